"""Semantic diff of two matrices, as regions with witness queries.

Per kernel: where support was gained or lost. Per role: where the selected kernel changed. Each
change is a list of merged regions with a witness query.

Both matrices are placed in one space: every axis of either, with the union of their values (a value
one side does not declare is still answered by that side's rules, through their ranges). Nothing is
compared cell by cell: every supported and selected region is a decision diagram in one store shared
by both sides, so a kernel whose rules did not change costs one comparison of two node ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import TYPE_CHECKING

from capmatrix._core.partition import partition
from capmatrix.authoring.analysis._boxes import (
    Area,
    KernelBoxes,
    areas,
    subtract_all,
    supported_region,
    table_shaped,
    with_values,
)
from capmatrix.authoring.analysis._diagram import EMPTY, FULL, Diagram, axis_order, collection_paused
from capmatrix.authoring.analysis._findings import MAX_REGIONS
from capmatrix.authoring.analysis._roles import role_kernels
from capmatrix.model import _StrEnum
from capmatrix.regions import Region, Space

if TYPE_CHECKING:
    from collections.abc import Iterable

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
    #: How many regions the whole gain (loss) has: ``len(gained)`` when all are listed; past the
    #: bound, the exact number of canonical boxes, of which ``gained`` holds the first ones.
    gained_total: int = 0
    lost_total: int = 0

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "kernel": self.kernel,
            "change": str(self.change),
            "presence": self.presence,
            "gained": [a.as_dict() for a in self.gained],
            "lost": [a.as_dict() for a in self.lost],
            "gained_total": self.gained_total,
            "lost_total": self.lost_total,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleShift:
    """Where a role's selection moved from ``old`` to ``new`` (None: no candidate)."""

    old: str | None
    new: str | None
    areas: tuple[Area, ...]
    #: How many regions the whole move has (see :attr:`KernelDiff.gained_total`).
    total: int = 0

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {"from": self.old, "to": self.new, "regions": [a.as_dict() for a in self.areas],
                "total": self.total}


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

    def as_dict(self, *, lazy: bool = False) -> dict[str, object]:
        """JSON-ready form (see docs/analysis.md).

        ``lazy``: ``kernels`` and ``roles`` are iterators of their forms, made as a streaming
        writer reads them (a diff listing 1,000 boxes per change holds one change's at a time).
        """
        kernels = (k.as_dict() for k in self.kernels)
        roles = (r.as_dict() for r in self.roles)
        return {
            "old": self.old,
            "new": self.new,
            "changed": self.changed,
            "axes": list(self.axes),
            "kernels": kernels if lazy else list(kernels),
            "roles": roles if lazy else list(roles),
        }


def _merge_axis(old: Axis | None, new: Axis | None) -> Axis:
    base = new if new is not None else old
    assert base is not None  # noqa: S101 - one side always has the axis
    values: list[AxisValue] = list(base.values)
    other = old if base is new else new
    if other is not None and other.type is base.type:
        values.extend(v for v in other.values if base.index(v) is None)
    return with_values(base, values)


def _declares(axis: Axis, value: AxisValue) -> bool:
    """Whether the YAML of ``axis`` lists ``value`` (of the same type: ``True`` is not ``1``)."""
    return any(v == value and type(v) is type(value) for v in axis.known)


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
            # The declared universe (the values the YAML lists): an open int axis's class representatives
            # follow the rules' cuts, so they differ whenever a rule moves a bound, and are no values added.
            added = [v for v in b.known if not _declares(a, v)]
            removed = [v for v in a.known if not _declares(b, v)]
            if added:
                notes.append(f"axis {name}: values added {added}")
            if removed:
                notes.append(f"axis {name}: values removed {removed}")
    return Space(tuple(axes)), tuple(notes)


class _Sides:
    """Both matrices' kernels compiled over the union space; :meth:`scope` builds their diagrams."""

    def __init__(self, space: Space, old: Matrix, new: Matrix, limit: int) -> None:
        self.space = space
        self.limit = limit
        masks: dict[int, int] = {}  # both matrices are alive for the whole diff
        self.compiled = [
            {name: KernelBoxes.of(kernel, space, masks) for name, kernel in matrix.kernels.items()}
            for matrix in (old, new)
        ]

    def same(self, name: str) -> bool:
        """Whether kernel ``name`` has the same rule boxes (same order, same effects) on both sides."""
        a, b = self.compiled[0].get(name), self.compiled[1].get(name)
        return (a is not None and b is not None and a.boxes == b.boxes and a.grants == b.grants
                and a.exclusions == b.exclusions)

    def scope(self, names: Iterable[str]) -> _Scope:
        """One diagram store for kernels ``names`` of both sides (a kernel's diff, or a role's)."""
        return _Scope(self, list(names))


class _Scope:
    """Both sides' supported regions of some kernels as nodes of one diagram over the union space.

    One store per kernel and per role, in the axis order their own rules suggest: a store of every
    kernel's nodes grows with the whole matrix and slows every walk in it. ``with scope.diagram``
    hands the store back once its regions are listed.
    """

    def __init__(self, sides: _Sides, names: list[str]) -> None:
        self.sides = sides
        self.names = names
        self.space = sides.space
        boxes = (b for side in sides.compiled for name in names if name in side for b in side[name].boxes)
        self.diagram = Diagram(sides.space, axis_order(sides.space, boxes))
        self._supported: list[dict[str, int]] = [{}, {}]

    def supported(self, side: int, name: str) -> int:
        """The node of where kernel ``name`` is supported on ``side`` (0 old, 1 new; EMPTY if absent)."""
        memo = self._supported[side]
        found = memo.get(name)
        if found is None:
            compiled = self.sides.compiled[side].get(name)
            if compiled is None:
                found = EMPTY
            elif side and self.sides.same(name):
                found = self.supported(0, name)
            else:
                found = self.diagram.rules(compiled.boxes, compiled.grants, compiled.exclusions)
            memo[name] = found
        return found

    def region(self, node: int) -> tuple[tuple[Area, ...], int]:
        """A node's region within the bound, and how many regions it has.

        All of it merged (and their number), or past the bound its first canonical boxes (and the
        exact number of its canonical boxes).
        """
        limit = self.sides.limit
        count = self.diagram.count_boxes(node)
        if count <= limit:
            found = areas(Region(self.space, self.diagram.boxes(node), disjoint=True))
            return found, len(found)
        return tuple(Area(self.space, b) for b in self.diagram.boxes(node, limit)), count


def _routed_diff(
    sides: _Sides, old: Matrix, new: Matrix, kernel_names: list[str], role_names: list[str],
    local: bool | None,
) -> tuple[tuple[KernelDiff, ...], tuple[RoleDiff, ...]]:
    """Every kernel's and role's diff, one group per role then per kernel left, each on its own route.

    ``local`` None picks the route per group from the shape of its rules on both sides (as check
    does): decision-table-shaped rules the partition, overlapping rules a diagram store of the
    group's own. A role's candidates' own diffs are read in the role's group, so that no kernel's
    regions are built twice. Both routes give the same cells.
    """
    kernels: dict[str, KernelDiff] = {}
    roles = []
    groups: list[tuple[str | None, list[str]]] = [
        (name, _role_candidates(old, new, name)) for name in role_names]
    groups += [(None, [k]) for k in kernel_names if k not in {c for _r, names in groups for c in names}]
    for role, listed in groups:
        names = [k for k in listed if k in old.kernels or k in new.kernels]
        todo = [k for k in names if k not in kernels]
        if _table_route(sides, names, local):
            for kernel in todo:
                kernels[kernel] = _table_kernel_diff(sides.space, kernel, sides.compiled[0].get(kernel),
                                                     sides.compiled[1].get(kernel), sides.limit)
            if role is not None:
                roles.append(_table_role_diff(sides, role, old, new, sides.limit))
            continue
        scope = sides.scope(names)
        with scope.diagram:
            for kernel in todo:
                kernels[kernel] = _kernel_diff(scope, kernel, old.kernels.get(kernel),
                                               new.kernels.get(kernel))
            if role is not None:
                roles.append(_role_diff(sides, scope, role, old, new))
    return tuple(kernels[k] for k in kernel_names), tuple(roles)


def _table_route(sides: _Sides, names: list[str], local: bool | None) -> bool:
    """Whether a group of kernels takes the partition: ``local`` when given, else their rules' shape."""
    if local is not None:
        return local
    return table_shaped([c for side in sides.compiled for k in names if (c := side.get(k)) is not None])


def _role_candidates(old: Matrix, new: Matrix, name: str) -> list[str]:
    """The kernels either side's role ``name`` may select, once, in order."""
    found = [c for matrix in (old, new) if (role := matrix.roles.get(name)) is not None
             for c in role_kernels(matrix, role)]
    return list(dict.fromkeys(found))


def _kernel_diff(scope: _Scope, name: str, old: Kernel | None, new: Kernel | None) -> KernelDiff:
    if scope.sides.same(name):  # the same rules answer alike: nothing to build
        return KernelDiff(kernel=name, change=Change.EQUIVALENT, presence="both", gained=(), lost=())
    before, after = scope.supported(0, name), scope.supported(1, name)
    diagram = scope.diagram
    gained, gained_total = scope.region(diagram.minus(after, before))
    lost, lost_total = scope.region(diagram.minus(before, after))
    presence = "both" if old and new else ("added" if new else "removed")
    return KernelDiff(
        kernel=name, change=Change.of(bool(gained), bool(lost)), presence=presence,
        gained=gained, lost=lost, gained_total=gained_total, lost_total=lost_total,
    )


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


_Layers = list[tuple[tuple[str, ...], int]]


def _layers(sides: _Scope, matrix: Matrix, role: Role | None) -> _Layers:
    """Each candidate list of ``role`` with the node of where it applies (none for an absent role).

    The first order whose area holds a cell decides; where none does, no candidate is tried.
    """
    diagram = sides.diagram
    if role is None:
        return [((), FULL)]
    if not role.orders:
        return [(role.candidates, FULL)]
    layers: _Layers = []
    applied = EMPTY
    for order in role.orders:
        area = diagram.union(diagram.box(_area_box(sides.space, matrix, b)) for b in order.area)
        area = diagram.minus(area, applied)
        applied = diagram.join(applied, area)
        layers.append((order.candidates, area))
    layers.append(((), diagram.minus(FULL, applied)))
    return layers


def _selection(sides: _Scope, side: int, layers: _Layers) -> list[tuple[str | None, int]]:
    """A role's selection on ``side``: (label, node) entries, the first entry holding a cell decides.

    Per layer, each candidate where the layer applies and the candidate is supported, then the
    layer's area with no candidate (None); the layers' areas are disjoint and cover the universe.
    """
    diagram = sides.diagram
    out: list[tuple[str | None, int]] = []
    for candidates, area in layers:
        out.extend((c, diagram.meet(area, sides.supported(side, c))) for c in candidates)
        out.append((None, area))
    return out


#: Both sides' selections entry by entry: (label, node before, node after).
_Aligned = list[tuple[str | None, int, int]]


def _aligned(before: list[tuple[str | None, int]], after: list[tuple[str | None, int]]) -> _Aligned:
    """Both selections as one list of entries, an entry a side lacks holding nowhere on that side.

    Equal labels are paired along their longest common run (all of them when the candidate lists
    did not change); inserting entries that hold nowhere leaves each side's answer as it was.
    """
    labels = [[label for label, _node in entries] for entries in (before, after)]
    if labels[0] == labels[1]:
        return [(label, a, b) for (label, a), (_label, b) in zip(before, after, strict=True)]
    out: _Aligned = []
    i = j = 0
    for block in SequenceMatcher(None, labels[0], labels[1], autojunk=False).get_matching_blocks():
        out += [(label, node, EMPTY) for label, node in before[i:block.a]]
        out += [(label, EMPTY, node) for label, node in after[j:block.b]]
        out += [(label, a, b) for (label, a), (_label, b)
                in zip(before[block.a:block.a + block.size], after[block.b:block.b + block.size],
                       strict=True)]
        i, j = block.a + block.size, block.b + block.size
    return out


def _moves(diagram: Diagram, entries: _Aligned) -> dict[tuple[str | None, str | None], int]:
    """Per pair (selected before, selected after) of different labels, the node of where it occurs.

    A cell changes hands only at the first entry whose node differs between the sides there, and
    only if no earlier entry holds it (on either side, as they agree on it): where entry ``k``
    held it before and not after, the new answer is the first later entry holding it after, and
    the other way round. So each entry that changed is followed from its own change alone, never
    from the whole selection: the work follows what changed, not the size of the role.
    """
    moved: dict[tuple[str | None, str | None], int] = {}

    def add(pair: tuple[str | None, str | None], node: int) -> None:
        if pair[0] != pair[1]:
            moved[pair] = diagram.join(moved.get(pair, EMPTY), node)

    def follow(part: int, label: str | None, rest: _Aligned, side: int, *, lost: bool) -> None:
        # Each side's entries cover the universe (every layer ends with its area, labelled None),
        # so the later entries of the other side take all of ``part``.
        for other, *nodes in rest:
            if part == EMPTY:
                return
            there = diagram.meet(part, nodes[side])
            if there != EMPTY:
                add((label, other) if lost else (other, label), there)
                part = diagram.minus(part, there)

    for k, (label, was, now) in enumerate(entries):
        if was == now:
            continue
        lost, gained = diagram.minus(was, now), diagram.minus(now, was)
        for _label, a, b in entries[:k]:
            for node in (a, b) if a != b else (a,):
                lost, gained = diagram.minus(lost, node), diagram.minus(gained, node)
            if lost == gained == EMPTY:
                break
        follow(lost, label, entries[k + 1:], 1, lost=True)
        follow(gained, label, entries[k + 1:], 0, lost=False)
    return moved


def _role_diff(sides: _Sides, scope: _Scope, name: str, old: Matrix, new: Matrix) -> RoleDiff:
    layers = [_layers(scope, old, old.roles.get(name)), _layers(scope, new, new.roles.get(name))]
    if layers[0] == layers[1] and all(sides.same(c) or (c not in old.kernels and c not in new.kernels)
                                      for candidates, _area in layers[0] for c in candidates):
        moved = {}  # the same candidates with the same rules in the same areas: nothing moves
    else:
        moved = _moves(scope.diagram, _aligned(_selection(scope, 0, layers[0]),
                                               _selection(scope, 1, layers[1])))
    shifts = []
    gained = lost = False
    for (was, now), node in sorted(moved.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        gained = gained or was is None
        lost = lost or now is None
        found, total = scope.region(node)
        shifts.append(RoleShift(old=was, new=now, areas=found, total=total))
    in_old, in_new = name in old.roles, name in new.roles
    presence = "both" if in_old and in_new else ("added" if in_new else "removed")
    return RoleDiff(
        role=name, coverage=Change.of(gained, lost), presence=presence, shifts=tuple(shifts)
    )


@collection_paused()
def diff(
    old: Matrix,
    new: Matrix,
    *,
    old_label: str = "old",
    new_label: str = "new",
    local: bool | None = None,
    max_regions: int = MAX_REGIONS,
) -> MatrixDiff:
    """Compare ``old`` with ``new``: every kernel and role of either.

    Each gain, loss or move lists at most ``max_regions`` regions; past that, its first canonical
    boxes and their exact number (``*_total``).

    ``local`` picks the method: True for decision-table-shaped rules (the partition, split like the
    table), False for overlapping rules (decision diagrams in one axis order); None decides per role
    (and per kernel no role names) from how much the rule boxes of its kernels overlap on both
    sides. Both give the same cells; regions are listed in the canonical form of
    ``docs/analysis.md``, so the same two matrices always give the same areas.
    """
    space, notes = union_space(old, new)
    sides = _Sides(space, old, new, max_regions)
    kernel_names = list(old.kernels) + [k for k in new.kernels if k not in old.kernels]
    role_names = list(old.roles) + [r for r in new.roles if r not in old.roles]
    kernels, roles = _routed_diff(sides, old, new, kernel_names, role_names, local)
    return MatrixDiff(old=old_label, new=new_label, kernels=kernels, roles=roles, axes=notes)


# --------------------------------------------------------------------------------------------------
# Decision-table-shaped rules: the partition, split like the table (a fixed-order decision diagram of
# a table can be far larger than the table)


class _Pool:
    """Rule boxes of both matrices; a rule box equal in both (same kernel and effect) is shared."""

    def __init__(self, space: Space) -> None:
        self.space = space
        self.boxes: list[Box] = []
        self.index: dict[tuple[str, bool, Box], int] = {}
        self.sides = [0, 0]

    def add(self, side: int, compiled: KernelBoxes) -> tuple[int, int]:
        """Bit sets (grants, exclusions) of a kernel's rules on ``side`` (0 old, 1 new)."""
        grants = exclusions = 0
        for i, box in enumerate(compiled.boxes):
            grant = bool(compiled.grants >> i & 1)
            key = (compiled.kernel.name, grant, box)
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


def _table_supported(space: Space, compiled: KernelBoxes | None) -> list[Box]:
    if compiled is None:
        return []
    return list(supported_region(space, compiled, local=True).boxes)


def _first(found: tuple[Area, ...], limit: int) -> tuple[tuple[Area, ...], int]:
    return found[:limit], len(found)


def _table_kernel_diff(
    space: Space, name: str, old: KernelBoxes | None, new: KernelBoxes | None, limit: int
) -> KernelDiff:
    """Decision-table-shaped rules: subtract the supported regions pair by pair."""
    presence = "both" if old and new else ("added" if new else "removed")
    before, after = _table_supported(space, old), _table_supported(space, new)
    gained, gained_total = _first(areas(Region(space, subtract_all(space, after, before), disjoint=True)),
                                  limit)
    lost, lost_total = _first(areas(Region(space, subtract_all(space, before, after), disjoint=True)), limit)
    return KernelDiff(
        kernel=name, change=Change.of(bool(gained), bool(lost)), presence=presence,
        gained=gained, lost=lost, gained_total=gained_total, lost_total=lost_total,
    )


#: One candidate list of a role on one side: the pool bits of the area where it applies (None:
#: everywhere, a role without orders) and (candidate, grants, exclusions) per candidate.
_Order = tuple[int | None, list[tuple[str, int, int]]]


def _winner_parts(
    matrix: Matrix, compiled: dict[str, KernelBoxes], role: Role | None, pool: _Pool, side: int
) -> list[_Order]:
    if role is None:
        return []

    def parts(candidates: tuple[str, ...]) -> list[tuple[str, int, int]]:
        out: list[tuple[str, int, int]] = []
        for candidate in candidates:
            kernel = compiled.get(candidate)
            if kernel is None:
                continue
            grants, exclusions = pool.add(side, kernel)
            out.append((candidate, grants, exclusions))
        return out

    if not role.orders:
        return [(None, parts(role.candidates))]
    return [(pool.add_area(side, f"{role.name}#{j}", [_area_box(pool.space, matrix, b) for b in o.area]),
             parts(o.candidates)) for j, o in enumerate(role.orders)]


def _table_role_diff(both: _Sides, name: str, old: Matrix, new: Matrix, limit: int) -> RoleDiff:
    space = both.space
    pool = _Pool(space)
    sides = [
        _winner_parts(old, both.compiled[0], old.roles.get(name), pool, 0),
        _winner_parts(new, both.compiled[1], new.roles.get(name), pool, 1),
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

    found = partition(space, pool.boxes, label, relevant=relevant, local=True)
    shifts = []
    gained = lost = False
    for (was, now), found_boxes in sorted(found.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        if was == now:
            continue
        gained = gained or was is None
        lost = lost or now is None
        shown, total = _first(areas(Region(space, found_boxes, disjoint=True)), limit)
        shifts.append(RoleShift(old=was, new=now, areas=shown, total=total))
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
