"""A family of synthetic matrix shapes, so that the analyses are measured on more than one distribution.

``benchmarks.synth`` gives two shapes (``boxes``, ``dmn``). The analyses (``check``, role gaps, ``diff``)
must be fast on any matrix an author may write, so this module varies each dimension of a matrix on its
own, around one base shape (:data:`ISSUE`, the shape that exposed the analyses' slow paths):

- rules per kernel, 10 to 200;
- constrained axes per rule, 1 to 6;
- value lists narrow (1-2 of 8 values) or wide (1-6, or all but one or two of 8);
- int conditions as ranges on the known values, or ranges whose bounds fall between them (open int
  domains: each such bound cuts a new class of ints);
- exclusions (15 %);
- roles of 2 to 16 candidates, sparse (candidates' regions pairwise disjoint) or fully overlapping
  (every candidate grants a common region);
- a twin with 1 % to 20 % of the rules mutated, for ``diff``.

:func:`family` lists the shapes; :func:`generate` makes one :class:`~benchmarks.synth.Synthetic` of a given
number of rules, written as YAML through the loader by the benchmark (one file per 25 kernels, fewer
where that passes 1,250 rules, below the loader's per-file limits). The same shape and size always give
byte-identical YAML.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.synth import AxisSpec, Synthetic, _documents, make_axes, mutate

__all__ = ["ISSUE", "Shape", "family", "generate", "twin"]


@dataclass(frozen=True, slots=True)
class Shape:
    """How one synthetic matrix is drawn; every field has the value of the issue's shape by default."""

    name: str
    #: rules of each kernel (the number of kernels is the number of rules over this)
    per_kernel: int = 50
    n_axes: int = 10
    values_per_axis: int = 8
    #: constrained axes per rule, drawn uniformly from this inclusive range
    constrained: tuple[int, int] = (1, 4)
    #: size of a value list, drawn uniformly from this inclusive range
    list_size: tuple[int, int] = (1, 6)
    #: share of the conditions on int axes written as a range instead of a list
    ranges: float = 0.0
    #: ranges' bounds fall between the known values and past them (open int domains: new classes)
    open_ints: bool = False
    exclude: float = 0.15
    #: candidates per role; roles are 25 (or fewer when there are fewer kernels) and may share kernels
    role_size: int = 8
    n_roles: int = 25
    #: "full": every candidate of a role grants one common region; "sparse": a role's candidates
    #: grant pairwise disjoint regions (each its own values of the first two enum axes)
    overlap: str = "full"
    #: share of the rules mutated in the twin that ``diff`` compares with
    twin: float = 0.05

    def describe(self) -> str:
        parts = [
            f"{self.per_kernel} rules/kernel",
            f"{self.constrained[0]}-{self.constrained[1]} axes",
            f"lists of {self.list_size[0]}-{self.list_size[1]} of {self.values_per_axis}",
        ]
        if self.ranges:
            parts.append(f"{self.ranges:.0%} int ranges" + (" (open: bounds between values)" if self.open_ints
                                                             else ""))
        parts.append(f"{self.exclude:.0%} exclusions")
        parts.append(f"roles of {self.role_size} ({self.overlap})")
        parts.append(f"twin {self.twin:.0%}")
        return ", ".join(parts)


#: 200 kernels of 50 overlapping rules, 1-4 constrained axes with lists of 1-6 of 8 values, 15 %
#: exclusions, 25 roles of 8 candidates whose regions all overlap; its twin has 5 % of the rules mutated.
ISSUE = Shape("issue")


def family() -> tuple[Shape, ...]:
    """The shapes ``make bench`` measures: the issue's, then each dimension varied on its own."""
    return (
        ISSUE,
        replace(ISSUE, name="kernels-of-10", per_kernel=10),
        replace(ISSUE, name="kernels-of-200", per_kernel=200),
        replace(ISSUE, name="one-axis", constrained=(1, 1)),
        replace(ISSUE, name="six-axes", constrained=(4, 6)),
        replace(ISSUE, name="narrow-lists", list_size=(1, 2)),
        replace(ISSUE, name="wide-lists", list_size=(6, 7)),
        replace(ISSUE, name="ranges", ranges=0.8),
        replace(ISSUE, name="open-ints", ranges=0.8, open_ints=True),
        replace(ISSUE, name="roles-of-2", role_size=2),
        replace(ISSUE, name="roles-of-16", role_size=16),
        replace(ISSUE, name="sparse-roles", overlap="sparse"),
        replace(ISSUE, name="sparse-roles-of-16", overlap="sparse", role_size=16),
        replace(ISSUE, name="twin-1pct", twin=0.01),
        replace(ISSUE, name="twin-20pct", twin=0.20),
    )


def _range(rng: random.Random, axis: AxisSpec, open_ints: bool) -> str:
    """A range over an int axis: bounds on known values, or (open) off them, cutting new classes."""
    n = len(axis.values)
    lo = rng.randrange(n)
    hi = rng.randrange(lo + 1, n + 1)
    if open_ints:
        # Known values are 16, 32, ...; a bound of 16k + 3 lies between two of them, or past the last.
        low = int(axis.values[lo]) - 13
        high = int(axis.values[hi - 1]) + 3
        roll = rng.random()
        if roll < 0.3:
            return f">={low}"
        if roll < 0.6:
            return f"<{high}"
        return f"[{low}, {high}]"
    if lo == 0 and hi < n:
        return f"<{axis.values[hi]}"
    if hi == n:
        return f">={axis.values[lo]}"
    return f"[{axis.values[lo]}, {axis.values[hi]})"


def _condition(rng: random.Random, shape: Shape, axis: AxisSpec) -> Any:
    if axis.type == "int" and shape.ranges and rng.random() < shape.ranges:
        return _range(rng, axis, shape.open_ints)
    n = len(axis.values)
    size = min(n, rng.randint(*shape.list_size))
    chosen = [axis.values[i] for i in sorted(rng.sample(range(n), size))]
    return chosen[0] if len(chosen) == 1 else chosen


def generate(shape: Shape, n_rules: int, *, draw: int = 0) -> Synthetic:
    """``n_rules`` rules of ``shape`` (at least one kernel and role).

    ``draw`` picks another matrix of the same shape and size (another seed); draw 0 is the one
    the benchmark has always measured. A matrix of few roles (two at 1,000 rules) costs what its
    few roles happen to cost, so a baseline is taken over several draws.
    """
    rng = random.Random(f"shape/{shape}/{n_rules}" + (f"/draw {draw}" if draw else ""))
    axes = make_axes(shape.n_axes, shape.values_per_axis)
    n_kernels = max(1, n_rules // shape.per_kernel)
    kernels = tuple(f"k{i:04d}" for i in range(n_kernels))
    size = min(shape.role_size, n_kernels)
    n_roles = max(1, min(shape.n_roles, n_kernels // size))
    roles: dict[str, list[str]] = {}
    slot: dict[str, int] = {}  # a kernel's place in its (first) role: its home in a sparse role
    for r in range(n_roles):
        members = [kernels[(r * size + j) % n_kernels] for j in range(size)]
        roles[f"role{r:02d}"] = members
        for j, k in enumerate(members):
            slot.setdefault(k, j)
    enums = [a for a in axes if a.type == "enum"][:2]
    common = {a.name: list(a.values[:3]) for a in enums}  # the region every candidate grants ("full")
    rules: list[tuple[str, str, dict[str, Any]]] = []
    for i in range(n_rules):
        kernel = kernels[i % n_kernels]
        if shape.overlap == "full" and i < n_kernels:
            rules.append((kernel, "grant", {a: list(v) for a, v in common.items()}))
            continue
        effect = "exclude" if rng.random() < shape.exclude else "grant"
        low, high = shape.constrained
        constrained = rng.sample(axes, rng.randint(min(low, len(axes)), min(high, len(axes))))
        region = {a.name: _condition(rng, shape, a) for a in constrained}
        if shape.overlap == "sparse":
            # Two enum axes fix the candidate's home: slot j -> (v[j % n], v[j // n]), disjoint per role.
            j = slot.get(kernel, 0)
            n = shape.values_per_axis
            region[enums[0].name] = enums[0].values[j % n]
            region[enums[1].name] = enums[1].values[(j // n) % n]
        rules.append((kernel, effect, dict(sorted(region.items()))))
    name = f"{shape.name}-{n_rules}" + (f"-draw{draw}" if draw else "")  # the twin's seed too
    # 25 kernels a file, fewer for long kernels: a file stays within the loader's 50,000 nodes.
    docs = _documents(axes, rules, kernels, roles, per_file=max(1, min(25, 1_250 // shape.per_kernel)))
    return Synthetic(name, axes, docs, n_rules, kernels, tuple(roles))


def twin(shape: Shape, base: Synthetic) -> Synthetic:
    """``base`` with ``shape.twin`` of its rules mutated (one axis condition each)."""
    return mutate(base, shape.twin)
