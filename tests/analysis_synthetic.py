"""Random in-memory matrices for the analysis tests (and for timing the analyses at scale)."""

from __future__ import annotations

import random
from itertools import product
from typing import TYPE_CHECKING

from capmatrix.matrix import Matrix
from capmatrix.model import (
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

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from capmatrix.model import AxisValue


def make_axes(sizes: Sequence[int], *, families: bool = True) -> dict[str, Axis]:
    """Axis ``a0`` is an int axis (10, 20, ...) with families of pairs; the rest are enums."""
    axes: dict[str, Axis] = {}
    for i, size in enumerate(sizes):
        name = f"a{i}"
        if i == 0:
            values: tuple[AxisValue, ...] = tuple(10 * (k + 1) for k in range(size))
            fams = (
                {f"f{k}": (values[k], values[k + 1]) for k in range(0, size - 1, 3)}
                if families
                else {}
            )
            axes[name] = Axis(name=name, type=AxisType.INT, values=values, description=name,
                              families=fams)  # type: ignore[arg-type]
        else:
            values = tuple(f"v{k}" for k in range(size))
            axes[name] = Axis(name=name, type=AxisType.ENUM, values=values, description=name)
    return axes


def random_condition(rnd: random.Random, axis: Axis) -> Condition:
    """A random non-trivial condition on ``axis``."""
    values = list(axis.values)
    if axis.type is AxisType.INT and rnd.random() < 0.4:
        lo = rnd.randrange(len(values))
        hi = rnd.randrange(lo, len(values))
        if rnd.random() < 0.5:
            iv = Interval(low=int(values[lo]), low_inclusive=True)
            return Condition(axis=axis.name, text=f">={values[lo]}", intervals=(iv,))
        iv = Interval(low=int(values[lo]), high=int(values[hi]), high_inclusive=True)
        return Condition(axis=axis.name, text=f"[{values[lo]}, {values[hi]}]", intervals=(iv,))
    k = rnd.randint(1, max(1, len(values) - 1))
    chosen = frozenset(rnd.sample(values, k))
    negated = rnd.random() < 0.15
    text = ("not " if negated else "") + str(sorted(map(str, chosen)))
    return Condition(axis=axis.name, text=text, values=chosen, negated=negated)


def random_matrix(
    seed: int,
    *,
    sizes: Sequence[int] = (8, 8, 8, 8, 8, 8, 8, 8, 8, 8),
    rules: int = 100,
    per_kernel: int = 10,
    max_axes: int = 4,
    grant_share: float = 0.7,
    role_size: int = 4,
    pool: int | None = None,
) -> Matrix:
    """A random matrix: ``rules`` rules in kernels of ``per_kernel``, roles of ``role_size`` kernels.

    With ``pool``, each axis has that many shared conditions and rules draw from them (real matrices
    reuse the same value sets: the same head sizes, dtypes, SM ranges); without it every condition is
    fresh, which fragments regions far more than real data does.
    """
    rnd = random.Random(seed)  # noqa: S311 - test data, not secrets
    axes = make_axes(sizes)
    axis_list = list(axes.values())
    pools = (
        {a.name: [random_condition(rnd, a) for _ in range(pool)] for a in axis_list}
        if pool
        else None
    )
    kernels: dict[str, Kernel] = {}
    made = 0
    k = 0
    while made < rules:
        name = f"k{k}"
        rs = []
        for j in range(min(per_kernel, rules - made)):
            chosen = rnd.sample(axis_list, rnd.randint(1, min(max_axes, len(axis_list))))
            conds = {
                a.name: rnd.choice(pools[a.name]) if pools else random_condition(rnd, a)
                for a in chosen
            }
            ordered = {a: conds[a] for a in axes if a in conds}
            effect = Effect.GRANT if j == 0 or rnd.random() < grant_share else Effect.EXCLUDE
            rs.append(
                Rule(id=f"{name}.r{j}", kernel=name, effect=effect, conditions=ordered,
                     reason="r", source="s", status=Status.UNTESTED,
                     location=Location(path=f"{name}.yaml", line=j + 1))
            )
        kernels[name] = Kernel(name=name, description=name, rules=tuple(rs),
                               location=Location(path=f"{name}.yaml", line=1))
        made += len(rs)
        k += 1
    names = list(kernels)
    roles = {}
    for r in range(max(1, len(names) // role_size)):
        cands = tuple(names[r * role_size : (r + 1) * role_size])
        roles[f"role{r}"] = Role(name=f"role{r}", description="r", candidates=cands,
                                 location=Location(path="roles.yaml", line=r + 1))
    return Matrix(root="<synthetic>", files=(), axes=axes, kernels=kernels, models={}, roles=roles)


def cells(matrix: Matrix) -> Iterator[dict[str, AxisValue]]:
    """Every cell of the universe (small universes only)."""
    axes = list(matrix.axes.values())
    for combo in product(*(a.values for a in axes)):
        yield {a.name: v for a, v in zip(axes, combo, strict=True)}


def rule_applies(rule: Rule, cell: dict[str, AxisValue]) -> bool:
    """Brute force: whether every condition of ``rule`` holds at ``cell``."""
    return all(cond.contains(cell[a]) for a, cond in rule.conditions.items())


def supported_at(kernel: Kernel, cell: dict[str, AxisValue]) -> bool:
    """Brute force verdict of ``kernel`` at ``cell``."""
    granted = any(rule_applies(r, cell) for r in kernel.grants)
    return granted and not any(rule_applies(r, cell) for r in kernel.exclusions)
