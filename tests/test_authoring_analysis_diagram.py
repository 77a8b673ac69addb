"""Decision diagrams against cell-by-cell answers: set algebra, counts, canonical boxes."""

from __future__ import annotations

import gc
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capmatrix.authoring.analysis._diagram import CORES, EMPTY, FULL, Diagram, axis_order, collection_paused
from capmatrix.model import Axis, AxisType
from capmatrix.regions import Box, Region, Space

SPACE = Space(
    (
        Axis(name="sm", type=AxisType.INT, values=(80, 90, 100, 120, 121), description="sm"),
        Axis(name="att", type=AxisType.ENUM, values=("mha", "gqa", "mla"), description="att"),
        Axis(name="sd", type=AxisType.BOOL, values=(False, True), description="sd"),
        Axis(name="kv", type=AxisType.ENUM, values=("bf16", "fp8", "nvfp4"), description="kv"),
    )
)
WHOLE = SPACE.full_box()
UNIVERSE = set(itertools.product(*([1 << i for i in range(m.bit_length())] for m in WHOLE)))

box_strategy = st.tuples(*(st.integers(min_value=0, max_value=m) for m in WHOLE))
boxes_strategy = st.lists(box_strategy, max_size=6)
orders = st.permutations(range(len(WHOLE)))
#: Every test runs on each core this installation has (the compiled one where it was built).
each_core = pytest.mark.parametrize("core", list(CORES))


def cells_of(box: Box) -> set[tuple[int, ...]]:
    per_axis = [[1 << i for i in range(m.bit_length()) if m >> i & 1] for m in box]
    return set(itertools.product(*per_axis))


def union_cells(boxes: list[Box]) -> set[tuple[int, ...]]:
    return set().union(*(cells_of(b) for b in boxes))


def listed_cells(boxes: list[Box]) -> set[tuple[int, ...]]:
    seen: set[tuple[int, ...]] = set()
    for box in boxes:
        mine = cells_of(box)
        assert not mine & seen  # canonical boxes are disjoint
        assert mine  # and never empty
        seen |= mine
    return seen


@each_core
@given(boxes_strategy, boxes_strategy, orders)
def test_set_algebra_equals_brute_force(core: str, a: list[Box], b: list[Box], order: list[int]) -> None:
    d = Diagram(SPACE, order, core=core)
    x, y = d.union(d.box(box) for box in a), d.union(d.box(box) for box in b)
    cx, cy = union_cells(a), union_cells(b)
    for node, expected in (
        (x, cx), (d.join(x, y), cx | cy), (d.meet(x, y), cx & cy), (d.minus(x, y), cx - cy),
        (d.minus(FULL, x), UNIVERSE - cx),
    ):
        assert listed_cells(d.boxes(node)) == expected
        assert d.cells(node) == len(expected)
        assert d.cells(node, negated=True) == len(UNIVERSE) - len(expected)
        assert (node == EMPTY) == (not expected)
    assert d.within(x, y) == (cx <= cy)
    assert d.intersects(x, y) == bool(cx & cy)
    for box in b:
        assert d.meets(x, box) == bool(cells_of(box) & cx)
        assert d.contains(x, box) == (cells_of(box) <= cx)


@each_core
@given(boxes_strategy, orders, st.integers(min_value=0, max_value=8))
def test_counts_and_bounded_listings_agree(core: str, a: list[Box], order: list[int], limit: int) -> None:
    d = Diagram(SPACE, order, core=core)
    x = d.union(d.box(box) for box in a)
    for negated in (False, True):
        every = d.boxes(x, negated=negated)
        assert d.count_boxes(x, negated=negated) == len(every)
        assert d.boxes(x, limit, negated=negated) == every[:limit]  # the first ones, in order
    complement = d.minus(FULL, x)
    assert d.boxes(complement) == d.boxes(x, negated=True)


@each_core
@given(boxes_strategy, boxes_strategy, orders)
def test_canonical_boxes_depend_on_the_cells_only(
    core: str, a: list[Box], b: list[Box], order: list[int]
) -> None:
    """Equal regions built by different routes are one node, with the same boxes in the same order."""
    d = Diagram(SPACE, order, core=core)
    x = d.union(d.box(box) for box in a)
    y = d.union(d.box(box) for box in b)
    # the union built from the other side, and from the disjoint pieces of another diagram's answer
    rebuilt = d.union([d.minus(y, x), d.meet(x, y), d.minus(x, y)])
    assert rebuilt == d.join(x, y) == d.join(y, x)
    other = Diagram(SPACE, order, core=core)
    pieces = other.boxes(other.union(other.box(box) for box in [*reversed(b), *a]))
    assert d.union(d.box(p) for p in pieces) == d.join(x, y)
    assert other.boxes(other.union(other.box(p) for p in pieces)) == d.boxes(d.join(x, y))


@each_core
@given(boxes_strategy)
def test_merged_listing_equals_the_region(core: str, a: list[Box]) -> None:
    d = Diagram(SPACE, axis_order(SPACE, a), core=core)
    x = d.union(d.box(box) for box in a)
    merged = Region(SPACE, d.boxes(x), disjoint=True).merged()
    assert merged == Region(SPACE, a)


def test_axis_order_puts_the_most_constrained_axis_first() -> None:
    boxes = [(0b11111, 0b111, 0b11, 0b1), (0b11, 0b111, 0b11, 0b111), (0b11111, 0b111, 0b11, 0b10)]
    assert axis_order(SPACE, boxes) == (3, 0, 1, 2)  # kv twice, sm once, then declared order


def test_an_order_must_name_every_axis_once() -> None:
    with pytest.raises(ValueError, match="not a permutation"):
        Diagram(SPACE, (0, 1, 1, 2))


@each_core
def test_a_single_box_is_one_canonical_box(core: str) -> None:
    d = Diagram(SPACE, core=core)
    box = (0b101, 0b11, 0b11, 0b010)
    node = d.box(box)
    assert d.boxes(node) == [box]
    assert d.count_boxes(node) == 1
    assert d.cells(node) == 2 * 2 * 2 * 1
    assert d.box((0, *box[1:])) == EMPTY
    assert d.box(WHOLE) == FULL
    assert d.boxes(FULL) == [WHOLE]
    assert d.boxes(EMPTY) == []


@each_core
@given(st.lists(box_strategy, max_size=9), st.integers(min_value=0, max_value=511), orders)
def test_rules_walk_equals_grants_minus_exclusions(
    core: str, boxes: list[Box], effects: int, order: list[int]
) -> None:
    """The top-down walk of a kernel's rules builds the node that combining box by box gives."""
    d = Diagram(SPACE, order, core=core)
    every = (1 << len(boxes)) - 1
    exclusions = effects & every
    grants = every & ~exclusions
    granted = [b for i, b in enumerate(boxes) if grants >> i & 1]
    excluded = [b for i, b in enumerate(boxes) if exclusions >> i & 1]
    node = d.rules(boxes, grants, exclusions)
    assert listed_cells(d.boxes(node)) == union_cells(granted) - union_cells(excluded)
    # One diagram per region and order: the very node the set algebra builds.
    assert node == d.minus(d.union(d.box(b) for b in granted), d.union(d.box(b) for b in excluded))


@each_core
def test_rules_of_no_grant_is_empty_and_a_whole_grant_full(core: str) -> None:
    d = Diagram(SPACE, core=core)
    part = (1, WHOLE[1], WHOLE[2], WHOLE[3])
    assert d.rules([part], 0, 1) == EMPTY
    assert d.rules([WHOLE, part], 0b01) == FULL
    assert d.rules([WHOLE, part], 0b01, 0b10) == d.minus(FULL, d.box(part))


@each_core
@given(box_strategy, st.lists(boxes_strategy, max_size=4), orders)
def test_covered_equals_within_the_union(
    core: str, box: Box, groups: list[list[Box]], order: list[int]
) -> None:
    d = Diagram(SPACE, order, core=core)
    node = d.box(box)
    others = [d.union(d.box(b) for b in group) for group in groups]
    expected = cells_of(box) <= set().union(*(union_cells(g) for g in groups))
    assert d.covered(node, others) is expected
    assert d.within(node, d.union(others)) is expected


@pytest.mark.parametrize("enabled", [True, False])
def test_collection_is_paused_inside_and_left_as_it_was(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with collection_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError, match="inside"), collection_paused():
            raise ValueError("inside")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


@each_core
def test_the_side_by_side_walks_leave_no_cycle_holding_the_store(core: str) -> None:
    """covered and meets recurse through a closure: it must not keep the store (and its nodes) alive
    after them while the analyses hold the collector off."""
    import sys

    d = Diagram(SPACE, core=core)
    a, b = d.box((0b00011, 0b011, 0b11, 0b111)), d.box((0b00110, 0b001, 0b11, 0b111))
    c = d.box((0b00001, 0b111, 0b01, 0b111))
    own, store = sys.getrefcount(d), sys.getrefcount(d._core)
    with collection_paused():
        assert not d.covered(a, [b, c])
        assert d.covered(d.meet(a, b), [b, c])
        assert d.meets(a, (0b00001, 0b001, 0b01, 0b001))
        assert not d.meets(d.minus(a, b), (0b00100, 0b111, 0b11, 0b111))
        assert (sys.getrefcount(d), sys.getrefcount(d._core)) == (own, store)
