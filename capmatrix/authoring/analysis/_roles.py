"""Role analyses: where each candidate of a role is selected, the role's gap, shadowed candidates.

Over decision diagrams (``_diagram``) for overlapping rules, and over the partition split like the table
for decision-table-shaped matrices; C108 and C109 findings come from here (``docs/analysis.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from capmatrix._core.partition import PartitionLimit, find, measure, partition, uncovered
from capmatrix.authoring.analysis._boxes import Area, KernelBoxes, areas, reduce_kernel
from capmatrix.authoring.analysis._diagram import EMPTY, FULL, Diagram, axis_order, collection_paused
from capmatrix.authoring.analysis._findings import MAX_REGIONS, Witness, finding
from capmatrix.errors import CapmatrixError
from capmatrix.regions import Region

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from capmatrix.authoring.analysis._findings import Finding
    from capmatrix.matrix import Matrix
    from capmatrix.model import Role
    from capmatrix.regions import Box, Space

__all__ = [
    "Gap", "TooManyRegions", "bounded_gap", "diagram_for", "role_findings", "role_gap", "role_kernels",
    "role_regions", "supported_node", "table_role_findings",
]


def diagram_for(space: Space, compiled: Iterable[KernelBoxes]) -> Diagram:
    """One diagram store for the kernels' rules, in the axis order their boxes suggest."""
    return Diagram(space, axis_order(space, (b for c in compiled for b in c.boxes)))


def supported_node(diagram: Diagram, compiled: KernelBoxes) -> int:
    """The node of the kernel's supported region: some grant applies and no exclusion does."""
    return diagram.rules(compiled.boxes, compiled.grants, compiled.exclusions)




def role_regions(
    matrix: Matrix, role: Role, *, space: Space | None = None
) -> dict[str | None, Region]:
    """Where each candidate of ``role`` is selected (key None: where none is), as merged regions.

    Candidates that are not kernels of the matrix never win. Over a ``space`` other than the
    matrix's, a role whose order depends on the query is read as its default candidate list.
    """
    sp = matrix.space if space is None else space
    names = role_kernels(matrix, role)
    compiled = {name: KernelBoxes.of(matrix.kernels[name], sp) for name in names}
    ordered = bool(role.orders) and sp.names == matrix.space.names
    with diagram_for(sp, compiled.values()) as diagram:
        supported = {name: supported_node(diagram, boxes) for name, boxes in compiled.items()}
        return {
            name: Region(sp, diagram.boxes(node), disjoint=True).merged()
            for name, node in _winners(diagram, matrix, role, supported, ordered=ordered).items()
        }


def role_kernels(matrix: Matrix, role: Role) -> list[str]:
    """Every candidate of ``role`` (any order) that is a kernel of the matrix, once, in order."""
    names = dict.fromkeys([*role.candidates, *(c for o in role.orders for c in o.candidates)])
    return [name for name in names if name in matrix.kernels]


def _layers(
    diagram: Diagram, role: Role, *, ordered: bool
) -> Iterator[tuple[tuple[str, ...], int]]:
    """Each candidate list of ``role`` with the node of where it applies.

    The first order whose area holds a cell decides; where none does, no candidate is tried.
    """
    if not ordered:
        yield role.candidates, FULL
        return
    applied = EMPTY
    for order in role.orders:
        area = diagram.minus(diagram.union(diagram.box(b) for b in order.area), applied)
        applied = diagram.join(applied, area)
        yield order.candidates, area
    yield (), diagram.minus(FULL, applied)


def _winners(
    diagram: Diagram, matrix: Matrix, role: Role, supported: Mapping[str, int], *, ordered: bool
) -> dict[str | None, int]:
    """Per candidate (None: no candidate), the node of where ``role`` selects it; empty ones left out."""
    def support(candidate: str) -> int:
        return supported.get(candidate, EMPTY) if candidate in matrix.kernels else EMPTY

    return diagram.winners(_layers(diagram, role, ordered=ordered), support)


def _gap_and_shadowed(
    diagram: Diagram, matrix: Matrix, role: Role, supported: Mapping[str, int]
) -> tuple[int, bool, list[str]]:
    """Where no candidate of ``role`` is supported, and the supported candidates it never selects.

    The gap comes as a node and whether it is that node's complement (a role without orders: the
    complement of its candidates' union, read without building it).
    """
    if role.orders:
        winners = _winners(diagram, matrix, role, supported, ordered=True)
        never = [c for c in role.candidates
                 if c in matrix.kernels and supported[c] != EMPTY and c not in winners]
        return winners.get(None, EMPTY), False, never
    present = [c for c in role.candidates if c in matrix.kernels]
    nodes = [supported[c] for c in present]
    # Shadowed: every cell of its own region is some earlier candidate's (asked without building
    # the earlier candidates' union; the gap is their balanced union, smaller to build than prefixes).
    never = [c for k, c in enumerate(present)
             if k and nodes[k] != EMPTY and diagram.covered(nodes[k], nodes[:k])]
    return diagram.union(nodes), True, never


@dataclass(frozen=True, slots=True)
class Gap:
    """A role's gap within a bound: its regions (all, or the first ones), how many, its exact size.

    The gap's canonical boxes (``docs/analysis.md``) are counted exactly. When there are at most
    ``limit``, ``region`` holds all of them merged and ``total`` is the number of merged regions;
    else ``region`` holds the first ``limit`` canonical boxes and ``total`` is None.
    """

    #: Merged: every region of the gap; or its first ``limit`` canonical boxes when there are more.
    region: Region
    #: How many merged regions the whole gap has; None when it has more than ``limit`` boxes.
    total: int | None
    #: Cells of the whole gap (exact, truncated or not).
    cells: int
    limit: int
    #: Canonical boxes of the whole gap (exact); None where not counted (a decision-table-shaped
    #: matrix whose gap passed the bound: it has more than ``limit`` boxes).
    boxes: int | None = None

    @property
    def truncated(self) -> bool:
        """Whether ``region`` holds only part of the gap."""
        return self.total is None or self.total > len(self.region.boxes)

    def count(self) -> str:
        """``12 regions``, ``4,096 boxes, first 1,000 shown`` or ``more than 1,000 boxes, ...``."""
        shown = len(self.region.boxes)
        if self.total is None:
            if self.boxes is None:
                return f"more than {self.limit:,} boxes, first {shown:,} shown"
            return f"{self.boxes:,} boxes, first {shown:,} shown"
        plural = "s" if self.total != 1 else ""
        if self.total > shown:
            return f"{self.total:,} region{plural}, first {shown:,} shown"
        return f"{self.total:,} region{plural}"


class TooManyRegions(CapmatrixError):
    """An exact answer needs more regions than the bound allows."""


def role_gap(matrix: Matrix, role: Role, *, limit: int = MAX_REGIONS) -> Region:
    """Where no candidate of ``role`` is supported (merged).

    :raises TooManyRegions: when the gap has more than ``limit`` canonical boxes (see
        :func:`bounded_gap` for the first ones, the count and the exact size).
    """
    gap = bounded_gap(matrix, role, limit=limit)
    if gap.truncated:
        msg = f"role {role.name}: the gap has {gap.count()}; raise the limit or use bounded_gap"
        raise TooManyRegions(msg)
    return gap.region


@collection_paused()
def bounded_gap(matrix: Matrix, role: Role, *, limit: int = MAX_REGIONS) -> Gap:
    """Where no candidate of ``role`` is supported, within ``limit`` boxes (see :class:`Gap`).

    The work is bounded too: the gap's cells and boxes are counted on its decision diagram, and only
    the boxes returned are listed.
    """
    space = matrix.space
    compiled = {name: KernelBoxes.of(matrix.kernels[name], space) for name in role_kernels(matrix, role)}
    with diagram_for(space, compiled.values()) as diagram:
        supported = {name: supported_node(diagram, boxes) for name, boxes in compiled.items()}
        node, negated, _never = _gap_and_shadowed(diagram, matrix, role, supported)
        return _bounded(diagram, node, limit, negated=negated)


def _bounded(diagram: Diagram, node: int, limit: int, *, negated: bool = False) -> Gap:
    """The region of ``node`` (its complement when ``negated``) within ``limit`` boxes."""
    space = diagram.space
    boxes = diagram.count_boxes(node, negated=negated)
    cells = diagram.cells(node, negated=negated)
    if boxes <= limit:
        region = Region(space, diagram.boxes(node, negated=negated), disjoint=True).merged()
        return Gap(region, len(region.boxes), cells, limit, boxes)
    shown = diagram.boxes(node, limit, negated=negated)
    return Gap(Region(space, shown, disjoint=True), None, cells, limit, boxes)


def role_findings(
    matrix: Matrix, role: Role, diagram: Diagram, supported: Mapping[str, int], *, limit: int
) -> Iterator[Finding]:
    node, negated, never = _gap_and_shadowed(diagram, matrix, role, supported)
    gap = _bounded(diagram, node, limit, negated=negated)
    shadowed = [(c, areas(Region(matrix.space, diagram.boxes(supported[c], limit), disjoint=True)))
                for c in never]
    return _role_report(matrix, role, gap, shadowed)


def _role_report(
    matrix: Matrix, role: Role, gap: Gap, shadowed: list[tuple[str, tuple[Area, ...]]]
) -> Iterator[Finding]:
    """C108 for the gap and C109 for each candidate never selected (with where it is supported)."""
    space = matrix.space
    if gap.region:
        found = tuple(Area(space, box) for box in gap.region.boxes)
        share = gap.cells / space.cells(space.full_box())
        yield finding(
            "C108",
            f"role {role.name}: no candidate is supported in {gap.count()} "
            f"({share:.1%} of the universe), e.g. {found[0].description}",
            locations=(role.location,), kernels=tuple(role.candidates),
            witness=Witness.at(space, found[0].witness, role=role.name), regions=found,
            subject=f"role {role.name}",
        )
    for candidate, found in shadowed:
        kernel = matrix.kernels[candidate]
        yield finding(
            "C109",
            f"role {role.name}: candidate {candidate} is never selected: earlier candidates "
            f"cover everywhere it is supported",
            locations=(role.location, kernel.location), kernels=(candidate,),
            witness=Witness.at(space, found[0].witness, role=role.name), regions=found,
            subject=f"role {role.name} candidate {candidate}",
        )


# --------------------------------------------------------------------------------------------------
# Roles of decision-table-shaped matrices: the partition, split like the table


def table_role_findings(
    matrix: Matrix, role: Role, compiled: Mapping[str, KernelBoxes], supported: Mapping[str, Region],
    *, limit: int,
) -> Iterator[Finding]:
    space = matrix.space
    if role.orders:
        shown: list[Box] = []
        cells = 0
        counted: int | None = 0
        applied: list[Box] = []
        for order in role.orders:
            present = [c for c in order.candidates if c in compiled]
            for root in order.area:
                part = _gap_within(space, [compiled[c] for c in present], [supported[c] for c in present],
                                   root, limit)
                shown.extend(part.region.boxes[: max(0, limit - len(shown))])
                cells += part.cells
                counted = None if counted is None or part.total is None else counted + part.total
            applied.extend(order.area)
        rest = Region.full(space) - Region(space, applied, disjoint=True)
        shown.extend(rest.boxes[: max(0, limit - len(shown))])
        cells += rest.cells()
        counted = None if counted is None else counted + len(rest.boxes)
        region = Region(space, shown, disjoint=True).merged()
        total = len(region.boxes) if counted is not None and counted <= limit else None
        gap = Gap(region, total, cells, limit)
        winners = role_regions(matrix, role)
        never = [c for c in role.candidates if c in compiled and supported[c] and c not in winners]
    else:
        present = [c for c in role.candidates if c in compiled]
        gap = _gap_within(space, [compiled[c] for c in present], [supported[c] for c in present],
                          None, limit)
        never = []
        earlier: list[Box] = []
        for candidate in present:
            own = supported[candidate]
            if own and earlier and all(uncovered(space, box, earlier) is None for box in own.boxes):
                never.append(candidate)
            earlier.extend(own.boxes)
    return _role_report(matrix, role, gap, [(c, areas(supported[c])) for c in never])


def _gap_within(
    space: Space, compiled: list[KernelBoxes], regions: list[Region], root: Box | None, limit: int
) -> Gap:
    """Where none of the candidates is supported within ``root``, bounded (see :class:`Gap`)."""
    label: Callable[[int], bool]
    relevant: Callable[[int, int], int]
    boxes_of: list[Box] = []
    merged = [r.merged() for r in regions]
    # The smaller input wins: the candidates' supported boxes, or their rules' boxes.
    if sum(len(r.boxes) for r in merged) <= sum(len(c.boxes) for c in compiled):
        for region in merged:
            boxes_of.extend(region.boxes)

        def label(live: int) -> bool:
            return bool(live)

        def relevant(live: int, covering: int) -> int:
            return covering & -covering if covering else live
    else:
        parts: list[tuple[int, int]] = []
        for c in compiled:
            offset = len(boxes_of)
            boxes_of.extend(c.boxes)
            parts.append((c.grants << offset, c.exclusions << offset))

        def label(live: int) -> bool:
            return any(live & g and not live & e for g, e in parts)

        def relevant(live: int, covering: int) -> int:
            keep = 0
            for g, e in parts:
                kept, decided = reduce_kernel(live, covering, g, e)
                keep |= kept
                if decided:
                    break
            return keep

    try:
        found = partition(space, boxes_of, label, relevant=relevant, local=True, root=root,
                          limit=limit, watch=False)
    except PartitionLimit:
        first, _ = find(space, boxes_of, label, want=False, limit=limit, root=root, relevant=relevant)
        cells = measure(space, boxes_of, label, root=root, relevant=relevant).get(False, 0)
        return Gap(Region(space, first, disjoint=True).merged(), None, cells, limit)
    whole = Region(space, found.get(False, []), disjoint=True).merged()
    total = len(whole.boxes)
    if total <= limit:
        return Gap(whole, total, whole.cells(), limit, total)
    shown = Region(space, whole.boxes[:limit], disjoint=True).merged()
    return Gap(shown, total, whole.cells(), limit, total)
