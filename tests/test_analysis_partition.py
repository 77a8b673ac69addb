"""Brute-force checks of the partition helpers against cell-by-cell answers."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from capmatrix.analysis._partition import partition
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
