"""Rules as boxes over a space, and the supported / selected regions they define.

Shared by the analyses (check, diff, compare-legacy): a rule's box is computed from its conditions, so
the same rule can be placed in the matrix's own space or in a wider one (the union of two matrices'
universes when diffing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from capmatrix._core.partition import TABLE_SAMPLE_MIN, mostly_disjoint, partition, reduce_kernel
from capmatrix.model import Axis, AxisValue, Effect
from capmatrix.regions import Region, bits, box_of, subtract

if TYPE_CHECKING:
    from collections.abc import Sequence

    from capmatrix.model import Kernel
    from capmatrix.regions import Box, Space

__all__ = [
    "Area",
    "BoxIndex",
    "KernelBoxes",
    "areas",
    "reduce_kernel",
    "subtract_all",
    "supported_region",
    "table_shaped",
    "with_values",
    "witness_of",
]


@dataclass(frozen=True, slots=True)
class KernelBoxes:
    """The rules of one kernel as boxes, with bit sets of grants and exclusions."""

    kernel: Kernel
    boxes: tuple[Box, ...]
    grants: int
    exclusions: int

    @classmethod
    def of(cls, kernel: Kernel, space: Space, masks: dict[int, int] | None = None) -> KernelBoxes:
        """Compile ``kernel``'s rules over ``space`` (``masks``: as for :func:`box_of`)."""
        grants = exclusions = 0
        for i, rule in enumerate(kernel.rules):
            if rule.effect is Effect.GRANT:
                grants |= 1 << i
            else:
                exclusions |= 1 << i
        boxes = tuple(box_of(r, space, masks) for r in kernel.rules)
        return cls(kernel, boxes, grants, exclusions)


class BoxIndex:
    """Per axis and value, the bit set of boxes whose mask admits the value."""

    def __init__(self, space: Space, boxes: Sequence[Box], members: int) -> None:
        self.rows: list[list[int]] = []
        self.full: list[int] = []
        for a, axis in enumerate(space.axes):
            row = [0] * len(axis.values)
            full = members
            for i in bits(members):
                mask = boxes[i][a]
                for v in bits(mask):
                    row[v] |= 1 << i
            for v in range(len(axis.values)):
                full &= row[v]
            self.rows.append(row)
            self.full.append(full)

    def intersecting(self, box: Box, candidates: int) -> int:
        """Boxes among ``candidates`` that intersect ``box``."""
        out = candidates
        for a, mask in enumerate(box):
            if not out:
                break
            row = self.rows[a]
            any_of = 0
            for v in bits(mask):
                any_of |= row[v]
            out &= any_of
        return out

    def containing(self, box: Box, candidates: int) -> int:
        """Boxes among ``candidates`` that contain ``box``."""
        out = candidates
        order = sorted(range(len(box)), key=lambda a: -box[a].bit_count())
        for a in order:
            if not out:
                break
            row = self.rows[a]
            for v in bits(box[a]):
                out &= row[v]
                if not out:
                    break
        return out


def _disjoint_union(space: Space, boxes: Sequence[Box], members: int) -> list[Box]:
    """The union of ``boxes`` (those in ``members``) as disjoint boxes.

    Each box minus the earlier ones it meets: cheap when boxes rarely overlap (decision tables).
    """
    index = BoxIndex(space, boxes, members)
    out: list[Box] = []
    earlier = 0
    for i in bits(members):
        hits = bits(index.intersecting(boxes[i], earlier))
        earlier |= 1 << i
        if len(hits) > _SEQUENTIAL_LIMIT:
            found = partition(
                space, [boxes[j] for j in hits], bool, root=boxes[i], relevant=_one_cover,
                local=True,
            )
            out.extend(found.get(False, []))
            continue
        pieces = [boxes[i]]
        for j in hits:
            pieces = [p for piece in pieces for p in subtract(piece, boxes[j])]
            if not pieces:
                break
        out.extend(pieces)
    return out


def _subtract_all(space: Space, pieces: list[Box], boxes: Sequence[Box], members: int) -> list[Box]:
    """``pieces`` minus the ``boxes`` in ``members``, touching only the pairs that meet."""
    if not members:
        return pieces
    index = BoxIndex(space, boxes, members)
    out: list[Box] = []
    for piece in pieces:
        hits = bits(index.intersecting(piece, members))
        if len(hits) > _SEQUENTIAL_LIMIT:
            # One box against many: box-by-box subtraction would fragment; partition the piece.
            found = partition(
                space, [boxes[j] for j in hits], bool, root=piece, relevant=_one_cover, local=True
            )
            out.extend(found.get(False, []))
            continue
        rest = [piece]
        for j in hits:
            rest = [p for r in rest for p in subtract(r, boxes[j])]
            if not rest:
                break
        out.extend(rest)
    return out


#: Above this many overlapping boxes, a piece is partitioned instead of subtracted box by box.
_SEQUENTIAL_LIMIT = 6


def _one_cover(live: int, covering: int) -> int:
    """For a union: one covering box decides "covered"; otherwise every live box matters."""
    return covering & -covering if covering else live


def subtract_all(space: Space, pieces: list[Box], boxes: Sequence[Box]) -> list[Box]:
    """``pieces`` minus every box of ``boxes`` (disjoint pieces stay disjoint)."""
    return _subtract_all(space, pieces, boxes, (1 << len(boxes)) - 1)


def table_shaped(kernels: Sequence[KernelBoxes]) -> bool:
    """Whether rules are decision-table-shaped: their boxes mostly disjoint, and within each kernel too.

    Kernels whose own rules overlap (each candidate of a role in its own region, say) make their
    boxes look disjoint together while each kernel's region is a union of overlapping boxes: the
    diagrams' route. Only kernels with enough boxes to sample are judged on their own.
    """
    if not mostly_disjoint([b for k in kernels for b in k.boxes]):
        return False
    judged = [k for k in kernels if len(k.boxes) >= TABLE_SAMPLE_MIN]
    overlapping = sum(len(k.boxes) for k in judged if not mostly_disjoint(k.boxes))
    return 2 * overlapping <= sum(len(k.boxes) for k in judged)


def supported_region(
    space: Space, compiled: KernelBoxes, *, root: Box | None = None, local: bool | None = None
) -> Region:
    """Where the kernel is supported: some grant applies and no exclusion does."""
    grants, exclusions = compiled.grants, compiled.exclusions
    if local and root is None:
        # Decision-table-shaped rules: the grants' union minus the exclusions, pair by pair.
        union = _disjoint_union(space, compiled.boxes, grants)
        return Region(space, _subtract_all(space, union, compiled.boxes, exclusions), disjoint=True)

    def label(live: int) -> bool:
        return bool(live & grants) and not live & exclusions

    def relevant(live: int, covering: int) -> int:
        return reduce_kernel(live, covering, grants, exclusions)[0]

    found = partition(space, compiled.boxes, label, root=root, relevant=relevant, local=local)
    return Region(space, found.get(True, []), disjoint=True)


def witness_of(space: Space, box: Box) -> dict[str, AxisValue]:
    """One cell of ``box``: the axis default where the box allows it, else its first value."""
    return {axis.name: axis.pick(mask) for axis, mask in zip(space.axes, box, strict=True)}


@dataclass(frozen=True, slots=True)
class Area:
    """One box of a reported region: how it reads, its values per axis, and a cell inside it.

    It keeps the box and renders on demand, so analyses that find many regions stay cheap.
    """

    space: Space
    box: Box

    @property
    def description(self) -> str:
        """``sm in {120, 121} and attention=mla`` (axes left out range over all their values)."""
        return Region(self.space, [self.box], disjoint=True).describe_box(self.box)

    @property
    def values(self) -> dict[str, tuple[AxisValue, ...]]:
        """Every axis and the values the box takes on it."""
        return {a.name: a.values_of(m) for a, m in zip(self.space.axes, self.box, strict=True)}

    @property
    def witness(self) -> dict[str, AxisValue]:
        """One cell of the box (axis defaults where the box allows them)."""
        return witness_of(self.space, self.box)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: ``description``, ``region`` (every axis -> its values) and ``witness``."""
        return {
            "description": self.description,
            "region": {k: list(v) for k, v in self.values.items()},
            "witness": self.witness,
        }


def areas(region: Region) -> tuple[Area, ...]:
    """The merged boxes of a region, as areas (largest first)."""
    merged = region.merged()
    return tuple(Area(merged.space, box) for box in merged.boxes)


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
