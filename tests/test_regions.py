"""Region algebra laws and rendering."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

import capmatrix
from capmatrix.model import Axis, AxisType
from capmatrix.regions import Region, Space, _merge, box_of, intersect, subtract

SPACE = Space(
    (
        Axis(name="sm", type=AxisType.INT, values=(80, 90, 120, 121), description="sm"),
        Axis(name="att", type=AxisType.ENUM, values=("mha", "gqa", "mla"), description="att"),
        Axis(name="sd", type=AxisType.BOOL, values=(False, True), description="sd"),
    )
)
FULL = SPACE.full_box()

boxes = st.tuples(*(st.integers(min_value=1, max_value=m) for m in FULL))
regions = st.lists(boxes, max_size=4).map(lambda bs: Region(SPACE, bs))


def cells(region: Region) -> set[tuple[int, ...]]:
    out: set[tuple[int, ...]] = set()
    for box in region:
        per_axis = [[1 << i for i in range(m.bit_length()) if m >> i & 1] for m in box]
        out.update(itertools.product(*per_axis))
    return out


@given(regions, regions)
def test_set_algebra_matches_cell_sets(a: Region, b: Region) -> None:
    assert cells(a & b) == cells(a) & cells(b)
    assert cells(a | b) == cells(a) | cells(b)
    assert cells(a - b) == cells(a) - cells(b)
    assert (a <= b) == (cells(a) <= cells(b))
    assert (a == b) == (cells(a) == cells(b))
    assert cells(a.merged()) == cells(a)
    assert len(a.merged().boxes) <= max(len(a.boxes), 1) or not a


@given(regions)
def test_boxes_are_disjoint_and_cells_count(a: Region) -> None:
    seen: set[tuple[int, ...]] = set()
    for box in a:
        part = cells(Region(SPACE, [box], disjoint=True))
        assert not part & seen
        seen |= part
    assert a.cells() == len(seen)


def test_subtract_pieces_are_disjoint() -> None:
    pieces = subtract(FULL, (0b0011, 0b001, 0b01))
    assert len(pieces) == 3
    total = Region(SPACE, pieces, disjoint=True)
    assert total.cells() == SPACE.cells(FULL) - 2


@given(boxes, boxes)
def test_intersect_and_subtract_match_cell_sets(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    one, other = Region(SPACE, [a], disjoint=True), Region(SPACE, [b], disjoint=True)
    met = intersect(a, b)
    assert cells(Region(SPACE, [met] if met else [], disjoint=True)) == cells(one) & cells(other)
    pieces = subtract(a, b)
    assert cells(Region(SPACE, pieces, disjoint=True)) == cells(one) - cells(other)
    assert sum(SPACE.cells(p) for p in pieces) == len(cells(one) - cells(other))  # disjoint pieces
    if met is None:
        assert pieces == [a]  # a disjoint box is left as it is


def test_boxes_of_other_widths_are_refused() -> None:
    for op in (intersect, subtract):
        with pytest.raises(ValueError, match="boxes of 3 and 2 axes"):
            op(FULL, FULL[:2])


def test_describe_and_witness() -> None:
    region = Region(SPACE, [(0b1100, 0b100, 0b10), (0b1100, 0b011, 0b10)]).merged()
    assert str(region) == "sm in {120, 121} and sd=true"
    assert region.witness() == {"sm": 120, "att": "mha", "sd": True}
    assert Region(SPACE).describe() == []
    assert str(Region(SPACE)) == "nowhere"
    assert str(Region.full(SPACE)) == "everywhere"
    assert region.as_dicts() == [{"sm": [120, 121], "att": ["mha", "gqa", "mla"], "sd": [True]}]


def test_box_of_with_remembered_masks_equals_box_of() -> None:
    """Masks remembered by condition (shared between rules by the loader) give the same boxes."""
    m = capmatrix.load()
    space = Space(tuple(m.axes.values()))
    masks: dict[int, int] = {}
    rules = [r for k in m.kernels.values() for r in k.rules]
    for rule in rules + rules:  # the second pass answers from the memo
        assert box_of(rule, space, masks) == box_of(rule, space)
    conditions = {id(c) for r in rules for c in r.conditions.values()}
    assert set(masks) == conditions
    assert len(conditions) < sum(len(r.conditions) for r in rules)  # the loader shares equal ones


WIDE = Space((*SPACE.axes, *(Axis(name=f"w{i}", type=AxisType.BOOL, values=(False, True), description="w")
                              for i in range(4))))
wide_boxes = st.tuples(*(st.integers(min_value=1, max_value=m) for m in WIDE.full_box()))


def _merged_over_every_axis(region: Region) -> list[tuple[int, ...]]:
    """The merge over every axis of the space, the axes where all boxes agree included (the oracle)."""
    boxes = _merge(set(region.boxes), len(region.space.axes))
    return sorted(boxes, key=lambda b: ([-m.bit_count() for m in b], b))


@given(st.lists(wide_boxes, max_size=6), st.integers(min_value=0, max_value=3))
def test_merging_only_the_varying_axes_changes_nothing(boxes: list[tuple[int, ...]], pin: int) -> None:
    # Pin some axes to one mask in every box, as a wide space's unnamed axes are.
    pinned = [tuple(b[:3] + (1,) * pin + b[3 + pin:]) for b in boxes]
    region = Region(WIDE, pinned)
    assert list(region.merged().boxes) == _merged_over_every_axis(region)
