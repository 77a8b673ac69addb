"""Rules as boxes over a space, and the supported / selected regions they define.

Shared by the analyses (check, diff, compare-legacy): a rule's box is computed from its conditions, so
the same rule can be placed in the matrix's own space or in a wider one (the union of two matrices'
universes when diffing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from capmatrix._partition import bits, partition
from capmatrix.model import Axis, AxisValue, Effect
from capmatrix.regions import Region

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from capmatrix.model import Kernel, Rule
    from capmatrix.regions import Box, Space

__all__ = [
    "Area",
    "KernelBoxes",
    "areas",
    "box_of",
    "supported_region",
    "witness_of",
    "with_values",
]


def box_of(rule: Rule, space: Space) -> Box:
    """The box of ``rule`` over ``space`` (axes the rule does not name are whole)."""
    out = []
    for axis in space.axes:
        cond = rule.conditions.get(axis.name)
        if cond is None:
            out.append(axis.full_mask)
            continue
        mask = 0
        for i, value in enumerate(axis.values):
            if cond.contains(value):
                mask |= 1 << i
        out.append(mask)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class KernelBoxes:
    """The rules of one kernel as boxes, with bit sets of grants and exclusions."""

    kernel: Kernel
    boxes: tuple[Box, ...]
    grants: int
    exclusions: int

    @classmethod
    def of(cls, kernel: Kernel, space: Space) -> KernelBoxes:
        """Compile ``kernel``'s rules over ``space``."""
        grants = exclusions = 0
        for i, rule in enumerate(kernel.rules):
            if rule.effect is Effect.GRANT:
                grants |= 1 << i
            else:
                exclusions |= 1 << i
        boxes = tuple(box_of(r, space) for r in kernel.rules)
        return cls(kernel, boxes, grants, exclusions)


def supported_region(space: Space, compiled: KernelBoxes, *, root: Box | None = None) -> Region:
    """Where the kernel is supported: some grant applies and no exclusion does."""
    grants, exclusions = compiled.grants, compiled.exclusions

    def label(live: int) -> bool:
        return bool(live & grants) and not live & exclusions

    found = partition(space, compiled.boxes, label, root=root)
    return Region(space, found.get(True, []), disjoint=True)


def witness_of(space: Space, box: Box) -> dict[str, AxisValue]:
    """One cell of ``box``: the axis default where the box allows it, else its first value."""
    out: dict[str, AxisValue] = {}
    for axis, mask in zip(space.axes, box, strict=True):
        chosen: AxisValue | None = None
        if axis.default is not None:
            i = axis.index(axis.default)
            if i is not None and mask >> i & 1:
                chosen = axis.default
        if chosen is None:
            chosen = axis.values[bits(mask)[0]]
        out[axis.name] = chosen
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Area:
    """One box of a reported region: how it reads, its values per axis, and a cell inside it."""

    description: str
    values: Mapping[str, tuple[AxisValue, ...]]
    witness: Mapping[str, AxisValue]

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: ``description``, ``region`` (every axis -> its values) and ``witness``."""
        return {
            "description": self.description,
            "region": {k: list(v) for k, v in self.values.items()},
            "witness": dict(self.witness),
        }


def areas(region: Region | Sequence[Box], space: Space | None = None) -> tuple[Area, ...]:
    """The merged boxes of a region, as areas (largest first)."""
    if not isinstance(region, Region):
        if space is None:
            msg = "a space is needed for raw boxes"
            raise ValueError(msg)
        region = Region(space, region, disjoint=True)
    merged = region.merged()
    sp = merged.space
    return tuple(
        Area(
            description=merged.describe_box(box),
            values={a.name: a.values_of(m) for a, m in zip(sp.axes, box, strict=True)},
            witness=witness_of(sp, box),
        )
        for box in merged.boxes
    )


def with_values(axis: Axis, values: Sequence[AxisValue]) -> Axis:
    """A copy of ``axis`` with ``values`` as its universe (for union spaces)."""
    families = {
        name: members for name, members in axis.families.items() if all(m in values for m in members)
    }
    default = axis.default if axis.default in values else None
    return Axis(
        name=axis.name,
        type=axis.type,
        values=tuple(values),
        description=axis.description,
        families=families,
        default=default,
        location=axis.location,
    )
