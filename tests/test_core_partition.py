"""Brute-force checks of the partition helpers against cell-by-cell answers."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capmatrix._core.partition import PartitionLimit, find, measure, partition
from capmatrix.model import Axis, AxisType
from capmatrix.regions import Box, Region, Space, bits

SPACE = Space(
    (
        Axis(name="sm", type=AxisType.INT, values=(80, 90, 100, 120, 121), description="sm"),
        Axis(name="att", type=AxisType.ENUM, values=("mha", "gqa", "mla"), description="att"),
        Axis(name="sd", type=AxisType.BOOL, values=(False, True), description="sd"),
    )
)
FULL = SPACE.full_box()

box_strategy = st.tuples(*(st.integers(min_value=0, max_value=m) for m in FULL))


def cells_of(box: Box) -> set[tuple[int, ...]]:
    per_axis = [[1 << i for i in range(m.bit_length()) if m >> i & 1] for m in box]
    return set(itertools.product(*per_axis))


@given(st.integers(min_value=0, max_value=1 << 80))
def test_bits_lists_the_set_bits_lowest_first(value: int) -> None:
    assert bits(value) == [i for i in range(value.bit_length()) if value >> i & 1]


@given(st.sets(st.integers(min_value=0, max_value=20_000), max_size=60),
       st.integers(min_value=0, max_value=40))
def test_bits_of_a_wide_set_lists_the_lowest_limit(positions: set[int], limit: int) -> None:
    # Wide sets take other paths (the binary text; a low window when a limit is given).
    value = sum(1 << p for p in positions)
    assert bits(value) == sorted(positions)
    assert bits(value, limit) == sorted(positions)[:limit]


def test_bits_returns_a_fresh_list() -> None:
    first = bits(0b1011)
    first.append(99)
    assert bits(0b1011) == [0, 1, 3]


@given(st.lists(box_strategy, max_size=6), st.booleans())
def test_partition_labels_every_cell_by_its_containing_boxes(boxes: list[Box], local: bool) -> None:
    found = partition(SPACE, boxes, lambda live: live, local=local)
    seen: dict[tuple[int, ...], int] = {}
    for live, parts in found.items():
        for part in parts:
            for cell in cells_of(part):
                assert cell not in seen  # the regions are disjoint
                seen[cell] = live
    assert set(seen) == cells_of(FULL)
    for cell, live in seen.items():
        expected = sum(1 << i for i, box in enumerate(boxes) if cell in cells_of(box))
        assert live == expected


@given(st.lists(box_strategy, max_size=6))
def test_merged_is_a_fixed_point(boxes: list[Box]) -> None:
    once = Region(SPACE, boxes).merged()
    twice = once.merged()
    assert twice.boxes == once.boxes
    fresh = Region(SPACE, once.boxes, disjoint=True).merged()
    assert fresh.boxes == once.boxes
    assert {c for b in once.boxes for c in cells_of(b)} == {
        c for b in boxes for c in cells_of(b)
    }


def _brute_labels(boxes: list[Box]) -> dict[tuple[int, ...], int]:
    return {
        cell: sum(1 << i for i, box in enumerate(boxes) if cell in cells_of(box))
        for cell in cells_of(FULL)
    }


@given(st.lists(box_strategy, max_size=6))
def test_measure_counts_the_cells_of_every_label(boxes: list[Box]) -> None:
    expected: dict[bool, int] = {}
    for live in _brute_labels(boxes).values():
        parity = live.bit_count() % 2 == 1
        expected[parity] = expected.get(parity, 0) + 1
    assert measure(SPACE, boxes, lambda live: live.bit_count() % 2 == 1) == expected


@given(st.lists(box_strategy, max_size=6), st.integers(min_value=1, max_value=8))
def test_find_lists_disjoint_boxes_of_the_wanted_label(boxes: list[Box], limit: int) -> None:
    want = {c for c, live in _brute_labels(boxes).items() if live.bit_count() == 1}
    found, complete = find(SPACE, boxes, lambda live: live.bit_count() == 1, want=True, limit=limit)
    assert len(found) <= limit
    got: set[tuple[int, ...]] = set()
    for box in found:
        cells = cells_of(box)
        assert not cells & got  # disjoint
        assert cells <= want  # each box lies inside the answer
        got |= cells
    if complete:
        assert got == want
    else:
        assert len(found) == limit
        assert got < want
    again, again_complete = find(SPACE, boxes, lambda live: live.bit_count() == 1, want=True, limit=limit)
    assert (again, again_complete) == (found, complete)  # deterministic


def _one_cover(live: int, covering: int) -> int:
    return covering & -covering if covering else live


def _pairs(n: int) -> tuple[Space, list[Box]]:
    """``n`` pairs of two-valued axes and one box per pair (both axes at their second value)."""
    axes = tuple(
        Axis(name=f"p{i}", type=AxisType.ENUM, values=("a", "b"), description="p") for i in range(2 * n)
    )
    space = Space(axes)
    boxes = []
    for i in range(n):
        box = [0b11] * (2 * n)
        box[2 * i] = box[2 * i + 1] = 0b10
        boxes.append(tuple(box))
    return space, boxes


def test_partition_limit_stops_an_answer_of_exponentially_many_boxes() -> None:
    space, boxes = _pairs(12)  # the cells outside every box need 2**12 disjoint boxes
    with pytest.raises(PartitionLimit) as caught:
        partition(space, boxes, bool, relevant=_one_cover, limit=100, watch=False)
    assert caught.value.limit == 100
    assert measure(space, boxes, bool, relevant=_one_cover) == {False: 3**12, True: 4**12 - 3**12}
    found, complete = find(space, boxes, bool, want=False, limit=100, relevant=_one_cover)
    assert len(found) == 100
    assert not complete


def test_partition_limit_allows_an_answer_within_it() -> None:
    space, boxes = _pairs(5)
    found = partition(space, boxes, bool, limit=1000, watch=False)
    assert len(Region(space, found[False], disjoint=True).merged().boxes) == 2**5
    assert Region(space, found[False], disjoint=True).cells() == 3**5
