"""Semantic diff of two matrices, as regions with witness queries.

Per kernel: where support was gained or lost. Per role: where the selected kernel changed. Each
change is a list of merged regions with a witness query.

Both matrices are placed in one space: every axis of either, with the union of their values (a value
one side does not declare is still answered by that side's rules, through their ranges). Nothing is
compared cell by cell: one region partition per kernel and per role.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from capmatrix._partition import mostly_disjoint, partition
from capmatrix.analysis._boxes import (
    Area,
    KernelBoxes,
    areas,
    reduce_kernel,
    subtract_all,
    supported_region,
    with_values,
)
from capmatrix.model import _StrEnum
from capmatrix.regions import Region, Space

if TYPE_CHECKING:
    from capmatrix.matrix import Matrix
    from capmatrix.model import Axis, AxisValue, Kernel, Role
    from capmatrix.regions import Box

__all__ = [
    "Change",
    "KernelDiff",
    "MatrixDiff",
    "RoleDiff",
    "RoleShift",
    "diff",
    "union_space",
]


class Change(_StrEnum):
    """How the supported region of a kernel (or the covered region of a role) moved."""

    EQUIVALENT = "equivalent"
    WIDER = "wider"
    NARROWER = "narrower"
    INCOMPARABLE = "incomparable"

    @classmethod
    def of(cls, gained: bool, lost: bool) -> Change:
        """The change for "something was gained" / "something was lost"."""
        if gained and lost:
            return cls.INCOMPARABLE
        if gained:
            return cls.WIDER
        if lost:
            return cls.NARROWER
        return cls.EQUIVALENT


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelDiff:
    """One kernel: ``presence`` is ``both``, ``added`` or ``removed``."""

    kernel: str
    change: Change
    presence: str
    gained: tuple[Area, ...]
    lost: tuple[Area, ...]

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "kernel": self.kernel,
            "change": str(self.change),
            "presence": self.presence,
            "gained": [a.as_dict() for a in self.gained],
            "lost": [a.as_dict() for a in self.lost],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleShift:
    """Where a role's selection moved from ``old`` to ``new`` (None: no candidate)."""

    old: str | None
    new: str | None
    areas: tuple[Area, ...]

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {"from": self.old, "to": self.new, "regions": [a.as_dict() for a in self.areas]}


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleDiff:
    """One role: ``coverage`` compares where some candidate is selected; ``shifts`` are the moves."""

    role: str
    coverage: Change
    presence: str
    shifts: tuple[RoleShift, ...]

    @property
    def changed(self) -> bool:
        """Whether the selection changes anywhere."""
        return bool(self.shifts)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "role": self.role,
            "changed": self.changed,
            "coverage": str(self.coverage),
            "presence": self.presence,
            "shifts": [s.as_dict() for s in self.shifts],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class MatrixDiff:
    """The semantic difference between two matrices."""

    old: str
    new: str
    kernels: tuple[KernelDiff, ...]
    roles: tuple[RoleDiff, ...]
    axes: tuple[str, ...]

    @property
    def changed(self) -> bool:
        """Whether any kernel or role answers differently (or the universe changed)."""
        return bool(
            self.axes
            or any(k.change is not Change.EQUIVALENT or k.presence != "both" for k in self.kernels)
            or any(r.changed for r in self.roles)
        )

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form (see docs/analysis.md)."""
        return {
            "old": self.old,
            "new": self.new,
            "changed": self.changed,
            "axes": list(self.axes),
            "kernels": [k.as_dict() for k in self.kernels],
            "roles": [r.as_dict() for r in self.roles],
        }


def _merge_axis(old: Axis | None, new: Axis | None) -> Axis:
    base = new if new is not None else old
    assert base is not None  # noqa: S101 - one side always has the axis
    values: list[AxisValue] = list(base.values)
    other = old if base is new else new
    if other is not None and other.type is base.type:
        values.extend(v for v in other.values if base.index(v) is None)
    return with_values(base, values)


def union_space(old: Matrix, new: Matrix) -> tuple[Space, tuple[str, ...]]:
    """One space for both matrices, and a description of each universe change."""
    names = list(new.axes) + [n for n in old.axes if n not in new.axes]
    axes = []
    notes = []
    for name in names:
        a, b = old.axes.get(name), new.axes.get(name)
        axes.append(_merge_axis(a, b))
        if a is None:
            notes.append(f"axis {name} added")
        elif b is None:
            notes.append(f"axis {name} removed")
        else:
            if a.type is not b.type:
                notes.append(f"axis {name}: type {a.type} -> {b.type}")
            added = [v for v in b.values if a.index(v) is None]
            removed = [v for v in a.values if b.index(v) is None]
            if added:
                notes.append(f"axis {name}: values added {added}")
            if removed:
                notes.append(f"axis {name}: values removed {removed}")
    return Space(tuple(axes)), tuple(notes)


class _Pool:
    """Rule boxes of both matrices; a rule box equal in both (same kernel and effect) is shared."""

    def __init__(self, space: Space) -> None:
        self.space = space
        self.boxes: list[Box] = []
        self.index: dict[tuple[str, bool, Box], int] = {}
        self.sides = [0, 0]

    def add(self, side: int, kernel: Kernel) -> tuple[int, int]:
        """Bit sets (grants, exclusions) of ``kernel``'s rules on ``side`` (0 old, 1 new)."""
        compiled = KernelBoxes.of(kernel, self.space)
        grants = exclusions = 0
        for i, box in enumerate(compiled.boxes):
            grant = bool(compiled.grants >> i & 1)
            key = (kernel.name, grant, box)
            at = self.index.get(key)
            if at is None:
                at = self.index[key] = len(self.boxes)
                self.boxes.append(box)
            if grant:
                grants |= 1 << at
            else:
                exclusions |= 1 << at
            self.sides[side] |= 1 << at
        return grants, exclusions

    def add_area(self, side: int, key: str, boxes: list[Box]) -> int:
        """Bit set of the boxes where candidate list ``key`` of a role applies, on ``side``."""
        bits = 0
        for box in boxes:
            at = self.index.get((key, True, box))
            if at is None:
                at = self.index[(key, True, box)] = len(self.boxes)
                self.boxes.append(box)
            bits |= 1 << at
            self.sides[side] |= 1 << at
        return bits

    @property
    def changed(self) -> int:
        """Boxes present on one side only: where none is live, both sides answer alike."""
        return self.sides[0] ^ self.sides[1]


def _supported(space: Space, kernel: Kernel | None) -> list[Box]:
    if kernel is None:
        return []
    return list(supported_region(space, KernelBoxes.of(kernel, space), local=True).boxes)


def _kernel_diff(
    space: Space, name: str, old: Kernel | None, new: Kernel | None, local: bool | None
) -> KernelDiff:
    pool = _Pool(space)
    og, oe = pool.add(0, old) if old is not None else (0, 0)
    ng, ne = pool.add(1, new) if new is not None else (0, 0)
    changed = pool.changed
    presence = "both" if old and new else ("added" if new else "removed")
    if _local(pool.boxes) if local is None else local:
        # Decision-table-shaped rules: subtract the supported regions pair by pair.
        before, after = _supported(space, old), _supported(space, new)
        gained = areas(Region(space, subtract_all(space, after, before), disjoint=True))
        lost = areas(Region(space, subtract_all(space, before, after), disjoint=True))
        return KernelDiff(
            kernel=name, change=Change.of(bool(gained), bool(lost)), presence=presence,
            gained=gained, lost=lost,
        )

    def label(live: int) -> tuple[bool, bool]:
        return (bool(live & og) and not live & oe, bool(live & ng) and not live & ne)

    def relevant(live: int, covering: int) -> int:
        # With no one-sided box live, both sides see the same rules: no change below (only the
        # changed labels are read, so "unchanged" may be answered as (False, False)).
        if not live & changed:
            return 0
        return reduce_kernel(live, covering, og, oe)[0] | reduce_kernel(live, covering, ng, ne)[0]

    found = partition(space, pool.boxes, label, relevant=relevant, local=False)
    gained = areas(Region(space, found.get((False, True), []), disjoint=True))
    lost = areas(Region(space, found.get((True, False), []), disjoint=True))
    return KernelDiff(
        kernel=name, change=Change.of(bool(gained), bool(lost)), presence=presence,
        gained=gained, lost=lost,
    )


def _local(boxes: list[Box]) -> bool:
    return mostly_disjoint(boxes)


#: One candidate list of a role on one side: the pool bits of the area where it applies (None:
#: everywhere, a role without orders) and (candidate, grants, exclusions) per candidate.
_Order = tuple[int | None, list[tuple[str, int, int]]]


def _area_box(space: Space, matrix: Matrix, box: tuple[int, ...]) -> Box:
    """An order's area box (over ``matrix``'s space) over the diff's ``space``.

    A value the matrix does not know is inside only where the box leaves its axis whole.
    """
    own = {axis.name: (axis, mask) for axis, mask in zip(matrix.space.axes, box, strict=True)}
    out = []
    for axis in space.axes:
        found = own.get(axis.name)
        if found is None or found[1] == found[0].full_mask:
            out.append(axis.full_mask)
            continue
        mine, mask = found
        out.append(sum(1 << i for i, v in enumerate(axis.values)
                       if (j := mine.index(v)) is not None and mask >> j & 1))
    return tuple(out)


def _winner_parts(matrix: Matrix, role: Role | None, pool: _Pool, side: int) -> list[_Order]:
    if role is None:
        return []

    def parts(candidates: tuple[str, ...]) -> list[tuple[str, int, int]]:
        out: list[tuple[str, int, int]] = []
        for candidate in candidates:
            kernel = matrix.kernels.get(candidate)
            if kernel is None:
                continue
            grants, exclusions = pool.add(side, kernel)
            out.append((candidate, grants, exclusions))
        return out

    if not role.orders:
        return [(None, parts(role.candidates))]
    return [(pool.add_area(side, f"{role.name}#{j}", [_area_box(pool.space, matrix, b) for b in o.area]),
             parts(o.candidates)) for j, o in enumerate(role.orders)]


def _role_diff(
    space: Space, name: str, old: Matrix, new: Matrix, local: bool | None
) -> RoleDiff:
    pool = _Pool(space)
    sides = [
        _winner_parts(old, old.roles.get(name), pool, 0),
        _winner_parts(new, new.roles.get(name), pool, 1),
    ]

    def shape(orders: list[_Order]) -> list[tuple[int | None, list[str]]]:
        return [(w, [c for c, _g, _e in parts]) for w, parts in orders]

    same_order = shape(sides[0]) == shape(sides[1])
    changed = pool.changed
    areas_bits = 0
    for orders in sides:
        for w, _parts in orders:
            areas_bits |= w or 0

    def winner(orders: list[_Order], live: int) -> str | None:
        for w, parts in orders:
            if w is not None and not live & w:
                continue
            for candidate, g, e in parts:
                if live & g and not live & e:
                    return candidate
            return None
        return None

    def label(live: int) -> tuple[str | None, str | None]:
        return winner(sides[0], live), winner(sides[1], live)

    # Per candidate list: (grants, exclusions, grants | exclusions) of each candidate, and all boxes.
    flat = [([(g, e, g | e) for _c, g, e in parts], _union(parts))
            for orders in sides for _w, parts in orders]

    def relevant(live: int, covering: int) -> int:
        if same_order and not live & changed:
            return 0  # both sides see the same rules in the same order: the same winner
        # reduce_kernel per candidate, inlined (this runs once per partition node); the areas of
        # the candidate lists always matter.
        keep = live & areas_bits
        for parts, every in flat:
            if not live & every:
                continue
            for g, e, ge in parts:
                if not live & g:
                    continue
                covering_excl = covering & e
                if covering_excl:
                    keep |= covering_excl & -covering_excl
                    continue
                live_excl = live & e
                covering_grants = covering & g
                if covering_grants:
                    keep |= (covering_grants & -covering_grants) | live_excl
                    if not live_excl:
                        break
                    continue
                keep |= live & ge
        return keep

    table = _local(pool.boxes) if local is None else local
    found = partition(space, pool.boxes, label, relevant=relevant, local=table)
    shifts = []
    gained = lost = False
    for (was, now), found_boxes in sorted(found.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        if was == now:
            continue
        gained = gained or was is None
        lost = lost or now is None
        shifts.append(
            RoleShift(old=was, new=now, areas=areas(Region(space, found_boxes, disjoint=True)))
        )
    in_old, in_new = name in old.roles, name in new.roles
    presence = "both" if in_old and in_new else ("added" if in_new else "removed")
    return RoleDiff(
        role=name, coverage=Change.of(gained, lost), presence=presence, shifts=tuple(shifts)
    )


def _union(parts: list[tuple[str, int, int]]) -> int:
    out = 0
    for _c, g, e in parts:
        out |= g | e
    return out


def diff(
    old: Matrix,
    new: Matrix,
    *,
    old_label: str = "old",
    new_label: str = "new",
    local: bool | None = None,
) -> MatrixDiff:
    """Compare ``old`` with ``new``: every kernel and role of either.

    ``local`` forces the method for decision-table-shaped rules (True: kernels by subtracting
    supported regions pair by pair, roles by a partition that picks its split axis per node) or for
    overlapping rules (False: one partition per kernel and role in one global axis order); None
    picks per kernel and role from how much their rule boxes overlap. Both give the same regions.
    """
    space, notes = union_space(old, new)
    kernel_names = list(old.kernels) + [k for k in new.kernels if k not in old.kernels]
    kernels = tuple(
        _kernel_diff(space, k, old.kernels.get(k), new.kernels.get(k), local) for k in kernel_names
    )
    role_names = list(old.roles) + [r for r in new.roles if r not in old.roles]
    roles = tuple(_role_diff(space, r, old, new, local) for r in role_names)
    return MatrixDiff(old=old_label, new=new_label, kernels=kernels, roles=roles, axes=notes)
