"""Deterministic, seeded synthetic capability matrices for the benchmarks and the brute-force tests.

Two shapes:

- ``boxes``: every rule is a random box (1-4 constrained axes; value lists, ranges and negations), about
  15 % of them exclusions, spread over many kernels and roles. Rules overlap freely: the stress case.
- ``dmn``: rules are the leaves of a random decision tree over the universe (as in Calvanese et al.'s
  LendingClub tables: each root-to-leaf path is one rule, so the table starts complete and overlap-free),
  each leaf granting one of seven "grade" kernels; then noise is injected into 10 % of the rules, widening
  a condition (overlaps) or narrowing it (gaps).

A :class:`Synthetic` holds the YAML documents; :meth:`Synthetic.load` writes them to a temporary
directory and loads them with :func:`capmatrix.load`, so every benchmark runs on a real, validated matrix.
The same ``(shape, size, seed)`` always gives byte-identical YAML.
"""

from __future__ import annotations

import math
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capmatrix import Matrix

__all__ = [
    "AxisSpec",
    "Synthetic",
    "boxes_matrix",
    "dmn_matrix",
    "make_axes",
    "mutate",
    "pairs_matrix",
    "random_cells",
]

GRADES = ("a", "b", "c", "d", "e", "f", "g")


@dataclass(frozen=True, slots=True)
class AxisSpec:
    """One synthetic axis: ``int`` axes get increasing integers, ``enum`` axes ``v0, v1, ...``."""

    name: str
    type: str
    values: tuple[int | str, ...]


@dataclass(frozen=True, slots=True)
class Synthetic:
    """A synthetic matrix as YAML documents (relative path -> data), with its size."""

    name: str
    axes: tuple[AxisSpec, ...]
    documents: dict[str, dict[str, Any]]
    n_rules: int
    kernels: tuple[str, ...]
    roles: tuple[str, ...]
    _cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def universe(self) -> int:
        """Number of cells of the known universe."""
        return math.prod(len(a.values) for a in self.axes)

    def write(self, root: Path) -> Path:
        """Write the YAML files below ``root`` (created) and return it."""
        import yaml  # noqa: PLC0415 - benchmarks import yaml only when writing

        for rel, data in self.documents.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            text = yaml.safe_dump(data, sort_keys=False, width=200, default_flow_style=None)
            path.write_text(text, encoding="utf-8")
        return root

    def build(self) -> Matrix:
        """The matrix built in memory with the loader's condition semantics (cached on this object).

        The loader caps files at 2 MiB and 50,000 YAML nodes, so one kernel of 10,000 rules cannot be
        written as YAML; this builds the same objects without YAML, schema or positions. The tests check
        that it equals :meth:`load` on matrices small enough to load.
        """
        found = self._cache.get("built")
        if found is None:
            found = _build(self)
            self._cache["built"] = found
        return found

    def load(self) -> Matrix:
        """The matrix, written to a temporary directory and loaded (cached on this object)."""
        found = self._cache.get("matrix")
        if found is None:
            import capmatrix  # noqa: PLC0415

            with tempfile.TemporaryDirectory(prefix=f"capmatrix-{self.name}-") as tmp:
                found = capmatrix.load(self.write(Path(tmp)))
            self._cache["matrix"] = found
        return found


def _build(synthetic: Synthetic) -> Matrix:
    from capmatrix.authoring._validate.values import _parse_range, _render, open_domains  # noqa: PLC0415 - the loader's own parsing
    from capmatrix.matrix import Matrix  # noqa: PLC0415
    from capmatrix.model import (  # noqa: PLC0415
        Axis,
        AxisType,
        Condition,
        Effect,
        Interval,
        Kernel,
        Location,
        Role,
        Rule,
        Status,
    )

    axes = {
        a.name: Axis(
            name=a.name, type=AxisType(a.type), values=a.values,
            description=f"Synthetic {a.type} axis with {len(a.values)} values.",
        )
        for a in synthetic.axes
    }

    shared: dict[tuple[str, str], Condition] = {}

    def condition(axis: Axis, raw: Any) -> Condition:
        """The loader's condition of ``raw``; equal ones are one object, as the loader shares them."""
        memo = (axis.name, repr(raw))
        found = shared.get(memo)
        if found is None:
            found = shared[memo] = build_condition(axis, raw)
        return found

    def build_condition(axis: Axis, raw: Any) -> Condition:
        negated = isinstance(raw, dict)
        items_raw = raw["not"] if negated else raw
        items = items_raw if isinstance(items_raw, list) else [items_raw]
        values: set[int | str | bool] = set()
        intervals: list[Interval] = []
        for item in items:
            parsed = _parse_range(item) if isinstance(item, str) and axis.type is AxisType.INT else None
            if parsed is not None:
                intervals.append(parsed)
            else:
                values.add(item)
        text = _render(items_raw)
        return Condition(
            axis=axis.name, text=f"not {text}" if negated else text, values=frozenset(values),
            intervals=tuple(intervals), negated=negated,
        )

    kernels: dict[str, Kernel] = {}
    roles: dict[str, Role] = {}
    for rel, doc in synthetic.documents.items():
        for name, body in doc.get("kernels", {}).items():
            rules = []
            for raw in body["rules"]:
                effect = Effect.GRANT if "grant" in raw else Effect.EXCLUDE
                region = raw[str(effect)]
                rules.append(
                    Rule(
                        id=raw["id"], kernel=name, effect=effect,
                        conditions={a: condition(axes[a], region[a]) for a in axes if a in region},
                        reason=raw["reason"], source=raw["source"], status=Status(raw["status"]),
                        location=Location(path=rel),
                    )
                )
            kernels[name] = Kernel(
                name=name, description=body["description"], rules=tuple(rules),
                location=Location(path=rel),
            )
        for name, body in doc.get("roles", {}).items():
            roles[name] = Role(
                name=name, description=body["description"], candidates=tuple(body["candidates"]),
                location=Location(path=rel),
            )
    # As the loader does: the int axes get the classes their conditions cut.
    axes = open_domains(axes, [rule.conditions for kernel in kernels.values() for rule in kernel.rules])
    return Matrix(
        root=f"<synthetic {synthetic.name}>", files=tuple(synthetic.documents), axes=axes,
        kernels=kernels, models={}, roles=roles,
    )


def make_axes(n_axes: int, values_per_axis: int) -> tuple[AxisSpec, ...]:
    """``n_axes`` axes of ``values_per_axis`` values: every third one an int axis, the rest enums."""
    axes = []
    for i in range(n_axes):
        if i % 3 == 0:
            values: tuple[int | str, ...] = tuple(16 * (k + 1) for k in range(values_per_axis))
            axes.append(AxisSpec(f"x{i}", "int", values))
        else:
            axes.append(AxisSpec(f"x{i}", "enum", tuple(f"v{k}" for k in range(values_per_axis))))
    return tuple(axes)


def _axes_document(axes: tuple[AxisSpec, ...]) -> dict[str, Any]:
    return {
        "axes": {
            a.name: {
                "type": a.type,
                "description": f"Synthetic {a.type} axis with {len(a.values)} values.",
                "values": list(a.values),
            }
            for a in axes
        }
    }


def _rule(kernel: str, index: int, effect: str, region: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"{kernel}.r{index:05d}",
        effect: region,
        "reason": f"Synthetic {effect} number {index}.",
        "source": "benchmarks/synth.py (generated)",
        "status": "untested",
    }


def _documents(
    axes: tuple[AxisSpec, ...],
    rules: list[tuple[str, str, dict[str, Any]]],
    kernels: tuple[str, ...],
    roles: dict[str, list[str]],
    per_file: int,
) -> dict[str, dict[str, Any]]:
    by_kernel: dict[str, list[dict[str, Any]]] = {k: [] for k in kernels}
    for index, (kernel, effect, region) in enumerate(rules):
        by_kernel[kernel].append(_rule(kernel, index, effect, region))
    docs: dict[str, dict[str, Any]] = {"axes.yaml": _axes_document(axes)}
    names = [k for k in kernels if by_kernel[k]]
    for start in range(0, len(names), per_file):
        chunk = names[start : start + per_file]
        docs[f"kernels/k{start // per_file:04d}.yaml"] = {
            "kernels": {
                k: {"description": f"Synthetic kernel {k}.", "rules": by_kernel[k]} for k in chunk
            }
        }
    live = set(names)
    role_doc = {
        name: {"description": f"Synthetic role {name}.", "candidates": [c for c in cands if c in live]}
        for name, cands in roles.items()
        if any(c in live for c in cands)
    }
    if role_doc:
        docs["roles.yaml"] = {"roles": role_doc}
    return docs


# --------------------------------------------------------------------------------------------------
# boxes: random, freely overlapping rules


def _random_condition(rng: random.Random, axis: AxisSpec) -> Any:
    n = len(axis.values)
    roll = rng.random()
    if axis.type == "int" and roll < 0.4:
        lo = rng.randrange(n)
        hi = rng.randrange(lo + 1, n + 1)
        if lo == 0 and hi < n:
            return f"<{axis.values[hi]}"
        if hi == n:
            return f">={axis.values[lo]}"
        return f"[{axis.values[lo]}, {axis.values[hi]})"
    if roll < 0.55:
        return {"not": sorted(rng.sample(axis.values, rng.randint(1, max(1, n // 3))), key=str)}
    picked = rng.sample(range(n), rng.randint(1, max(1, n // 2 + 1)))
    chosen = [axis.values[i] for i in sorted(picked)]
    return chosen[0] if len(chosen) == 1 else chosen


def boxes_matrix(
    n_rules: int,
    *,
    n_axes: int = 10,
    values_per_axis: int = 8,
    n_kernels: int | None = None,
    exclude_fraction: float = 0.15,
    seed: int = 0,
) -> Synthetic:
    """Random overlapping boxes spread over ``n_kernels`` kernels (default: one per 50 rules, 2..200).

    Roles group the kernels eight at a time, in order.
    """
    rng = random.Random(f"boxes/{n_rules}/{n_axes}/{values_per_axis}/{n_kernels}/{seed}")
    axes = make_axes(n_axes, values_per_axis)
    if n_kernels is None:
        n_kernels = min(200, max(2, n_rules // 50))
    kernels = tuple(f"k{i:03d}" for i in range(n_kernels))
    rules = []
    for i in range(n_rules):
        kernel = kernels[i % n_kernels]
        effect = "exclude" if rng.random() < exclude_fraction else "grant"
        constrained = rng.sample(axes, rng.randint(1, min(4, n_axes)))
        region = {a.name: _random_condition(rng, a) for a in sorted(constrained, key=lambda a: a.name)}
        rules.append((kernel, effect, region))
    roles = {f"role{j:02d}": list(kernels[j : j + 8]) for j in range(0, n_kernels, 8)}
    name = f"boxes-{n_rules}-{n_axes}x{values_per_axis}-s{seed}"
    docs = _documents(axes, rules, kernels, roles, per_file=25)
    return Synthetic(name, axes, docs, n_rules, kernels, tuple(roles))


# --------------------------------------------------------------------------------------------------
# dmn: decision-tree leaves with 10 % noise


def _leaf_region(axes: tuple[AxisSpec, ...], leaf: list[list[int]]) -> dict[str, Any]:
    region: dict[str, Any] = {}
    for axis, chosen in zip(axes, leaf, strict=True):
        n = len(axis.values)
        if len(chosen) == n:
            continue
        if axis.type == "int":
            lo, hi = chosen[0], chosen[-1] + 1  # int leaves are contiguous index ranges
            if lo == 0:
                region[axis.name] = f"<{axis.values[hi]}"
            elif hi == n:
                region[axis.name] = f">={axis.values[lo]}"
            else:
                region[axis.name] = f"[{axis.values[lo]}, {axis.values[hi]})"
        else:
            values = [axis.values[i] for i in chosen]
            region[axis.name] = values[0] if len(values) == 1 else values
    return region


def _split(rng: random.Random, axis: AxisSpec, chosen: list[int]) -> tuple[list[int], list[int]]:
    if axis.type == "int":
        cut = rng.randrange(1, len(chosen))
        return chosen[:cut], chosen[cut:]
    shuffled = chosen[:]
    rng.shuffle(shuffled)
    cut = rng.randrange(1, len(shuffled))
    return sorted(shuffled[:cut]), sorted(shuffled[cut:])


def _noise(rng: random.Random, axes: tuple[AxisSpec, ...], leaf: list[list[int]]) -> list[list[int]]:
    """Widen (overlap) or narrow (gap) one axis of a leaf by one value; a narrowed axis keeps one value."""
    leaf = [c[:] for c in leaf]
    ai = rng.randrange(len(axes))
    n = len(axes[ai].values)
    chosen = leaf[ai]
    if rng.random() < 0.5 and len(chosen) < n:
        if axes[ai].type == "int":
            grow = [i for i in (chosen[0] - 1, chosen[-1] + 1) if 0 <= i < n]
            chosen.append(rng.choice(grow))
        else:
            chosen.append(rng.choice([i for i in range(n) if i not in chosen]))
        leaf[ai] = sorted(chosen)
    elif len(chosen) > 1:
        if axes[ai].type == "int":
            leaf[ai] = chosen[1:] if rng.random() < 0.5 else chosen[:-1]
        else:
            drop = rng.choice(chosen)
            leaf[ai] = [i for i in chosen if i != drop]
    return leaf


def _tree_leaves(rng: random.Random, axes: tuple[AxisSpec, ...], n_leaves: int) -> list[list[list[int]]]:
    leaves: list[list[list[int]]] = [[list(range(len(a.values))) for a in axes]]
    splittable = [0]
    while len(leaves) < n_leaves and splittable:
        pick = rng.randrange(len(splittable))
        index = splittable[pick]
        leaf = leaves[index]
        options = [ai for ai, chosen in enumerate(leaf) if len(chosen) > 1]
        if not options:
            splittable[pick] = splittable[-1]
            splittable.pop()
            continue
        ai = rng.choice(options)
        left, right = _split(rng, axes[ai], leaf[ai])
        other = [c[:] for c in leaf]
        leaf[ai] = left
        other[ai] = right
        leaves.append(other)
        splittable.append(len(leaves) - 1)
    return leaves


def dmn_matrix(
    n_rules: int,
    *,
    n_axes: int = 15,
    values_per_axis: int = 6,
    noise: float = 0.10,
    single_kernel: bool = False,
    seed: int = 0,
) -> Synthetic:
    """A decision-tree table of ``n_rules`` leaves with ``noise`` of them perturbed.

    By default each leaf grants one of seven grade kernels and the role ``grade`` lists them all (a
    complete table before noise). With ``single_kernel`` every leaf is a rule of kernel ``k000``: a grant,
    or (one leaf in five) an exclusion.
    """
    rng = random.Random(f"dmn/{n_rules}/{n_axes}/{values_per_axis}/{noise}/{single_kernel}/{seed}")
    axes = make_axes(n_axes, values_per_axis)
    leaves = _tree_leaves(rng, axes, n_rules)
    noisy = set(rng.sample(range(len(leaves)), round(noise * len(leaves))))
    rules = []
    if single_kernel:
        kernels: tuple[str, ...] = ("k000",)
        roles: dict[str, list[str]] = {}
    else:
        kernels = tuple(f"grade_{g}" for g in GRADES)
        roles = {"grade": list(kernels)}
    for i, leaf in enumerate(leaves):
        region = _leaf_region(axes, _noise(rng, axes, leaf) if i in noisy else leaf)
        if single_kernel:
            rules.append(("k000", "exclude" if rng.random() < 0.2 else "grant", region))
        else:
            rules.append((rng.choice(kernels), "grant", region))
    kind = "dmn1" if single_kernel else "dmn"
    name = f"{kind}-{len(rules)}-{n_axes}x{values_per_axis}-s{seed}"
    docs = _documents(axes, rules, kernels, roles, per_file=25)
    return Synthetic(name, axes, docs, len(rules), kernels, tuple(roles))


# --------------------------------------------------------------------------------------------------
# variants and queries


def mutate(base: Synthetic, fraction: float = 0.05, *, seed: int = 1) -> Synthetic:
    """A copy of ``base`` in which ``fraction`` of the rules changed one axis condition (for diffs)."""
    rng = random.Random(f"mutate/{base.name}/{fraction}/{seed}")
    docs: dict[str, dict[str, Any]] = {}
    all_rules = [
        (rel, kernel, i)
        for rel, doc in base.documents.items()
        for kernel, body in doc.get("kernels", {}).items()
        for i in range(len(body["rules"]))
    ]
    chosen = set(rng.sample(range(len(all_rules)), round(fraction * len(all_rules))))
    targets = {all_rules[i] for i in chosen}
    for rel, doc in base.documents.items():
        if "kernels" not in doc:
            docs[rel] = doc
            continue
        kernels = {}
        for kernel, body in doc["kernels"].items():
            rules = []
            for i, rule in enumerate(body["rules"]):
                if (rel, kernel, i) in targets:
                    effect = "grant" if "grant" in rule else "exclude"
                    region = dict(rule[effect])
                    axis = rng.choice(base.axes)
                    region[axis.name] = _random_condition(rng, axis)
                    rule = {**rule, effect: dict(sorted(region.items()))}  # noqa: PLW2901
                rules.append(rule)
            kernels[kernel] = {**body, "rules": rules}
        docs[rel] = {"kernels": kernels}
    return Synthetic(
        f"{base.name}-mut{seed}", base.axes, docs, base.n_rules, base.kernels, base.roles
    )


def random_cells(
    axes: tuple[AxisSpec, ...], count: int, *, seed: int = 0
) -> list[dict[str, int | str]]:
    """``count`` distinct random cells (fully specified queries) of the universe."""
    rng = random.Random(f"cells/{len(axes)}/{count}/{seed}")
    seen: set[tuple[int | str, ...]] = set()
    out: list[dict[str, int | str]] = []
    limit = math.prod(len(a.values) for a in axes)
    while len(out) < min(count, limit):
        cell = tuple(rng.choice(a.values) for a in axes)
        if cell in seen:
            continue
        seen.add(cell)
        out.append({a.name: v for a, v in zip(axes, cell, strict=True)})
    return out


# --------------------------------------------------------------------------------------------------
# pairs: few rules whose regions are inherently many boxes (the adversarial shape of the bounds)


def pairs_matrix(n_pairs: int, *, values_per_axis: int = 2) -> Synthetic:
    """Few valid rules whose answers are inherently ``2 ** n_pairs`` boxes.

    ``2 * n_pairs`` enum axes, paired. Kernel ``holes`` grants everything and excludes, per pair,
    the cells where both axes of the pair take a non-first value: its supported region is "in every
    pair, some axis takes its first value", which no fewer than ``2 ** n_pairs`` disjoint boxes
    describe (the cells where exactly one axis of each pair is first lie in pairwise different
    boxes). Kernel ``pairs`` grants the excluded boxes instead; role ``gappy`` (its only candidate) has
    that same region as its gap. ``n_pairs + 1`` rules of ``holes`` make one ``depends`` query, ``n_pairs``
    grants make one role gap.
    """
    axes = tuple(
        AxisSpec(f"p{i // 2}{'ab'[i % 2]}", "enum", tuple(f"v{k}" for k in range(values_per_axis)))
        for i in range(2 * n_pairs)
    )
    rest = [f"v{k}" for k in range(1, values_per_axis)]
    both = [
        {axes[2 * i].name: rest if len(rest) > 1 else rest[0],
         axes[2 * i + 1].name: rest if len(rest) > 1 else rest[0]}
        for i in range(n_pairs)
    ]
    every = {axes[0].name: list(axes[0].values)}
    rules: list[tuple[str, str, dict[str, Any]]] = [("holes", "grant", every)]
    rules += [("holes", "exclude", region) for region in both]
    rules += [("pairs", "grant", region) for region in both]
    docs = _documents(axes, rules, ("holes", "pairs"), {"gappy": ["pairs"]}, per_file=25)
    name = f"pairs-{n_pairs}x{values_per_axis}"
    return Synthetic(name, axes, docs, len(rules), ("holes", "pairs"), ("gappy",))
