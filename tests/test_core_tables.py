"""Compiled decision tables answer as walking their rows with ``in_boxes`` (derived axes, role orders)."""

from __future__ import annotations

import itertools
import random
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import capmatrix
from capmatrix._core.tables import NO_ROW, Table
from capmatrix._shipped.default import _resolver
from capmatrix.model import NONE, Axis, AxisType, Condition, Interval, in_boxes

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from capmatrix.model import AxisValue, Boxes

AXES = {
    "n": Axis(name="n", type=AxisType.INT, values=(10, 20, 30, 40), description="d"),
    "e": Axis(name="e", type=AxisType.ENUM, values=("a", "b", "c"), description="d"),
    "f": Axis(name="f", type=AxisType.BOOL, values=(False, True), description="d"),
    "o": Axis(name="o", type=AxisType.INT, values=(NONE, 1, 2), description="d", optional=True),
}
#: Values each axis may be asked with: the known ones and, for int axes, some outside them.
ASKED: dict[str, tuple[AxisValue, ...]] = {
    "n": (10, 20, 30, 40, 5, 25, 99), "e": ("a", "b", "c"), "f": (False, True), "o": (NONE, 1, 2, 3),
}


def naive(whens: Sequence[Boxes], values: Mapping[str, AxisValue]) -> int | None:
    """The rows walked in order, as ``DerivedAxis.value`` and ``Role.order_for`` do."""
    for i, when in enumerate(whens):
        inside = in_boxes(when, values) if when else True
        if inside is None:
            return None
        if inside:
            return i
    return NO_ROW


@st.composite
def conditions(draw: st.DrawFn, name: str) -> Condition:
    axis = AXES[name]
    chosen = frozenset(draw(st.sets(st.sampled_from(axis.values), max_size=len(axis.values))))
    intervals: tuple[Interval, ...] = ()
    if axis.type is AxisType.INT and draw(st.booleans()):
        low = draw(st.integers(0, 45))
        intervals = (Interval(low=low, high=low + draw(st.integers(1, 30))),)
    return Condition(axis=name, text="t", values=chosen, intervals=intervals, negated=draw(st.booleans()),
                     optional=axis.optional, admits_none=axis.optional and draw(st.booleans()))


@st.composite
def whens(draw: st.DrawFn) -> Boxes:
    boxes = []
    for _ in range(draw(st.integers(0, 2))):
        names = draw(st.lists(st.sampled_from(sorted(AXES)), unique=True, max_size=3))
        boxes.append({name: draw(conditions(name)) for name in names})
    return tuple(boxes)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(whens(), min_size=1, max_size=5),
       asked=st.lists(st.fixed_dictionaries({}, optional={n: st.sampled_from(v) for n, v in ASKED.items()}),
                      min_size=1, max_size=8))
def test_table_answers_as_walking_its_rows(rows: list[Boxes], asked: list[dict[str, AxisValue]]) -> None:
    table = Table(rows, AXES)
    assert set(table.reads) == {name for when in rows for box in when for name in box}
    for values in asked:
        assert table.row(values) == naive(rows, values), values


def test_first_row_wins_and_a_missing_axis_leaves_it_undecided() -> None:
    only_a = Condition(axis="e", text="a", values=frozenset({"a"}))
    big = Condition(axis="n", text=">= 30", intervals=(Interval(low=30),))
    rows: list[Boxes] = [({"e": only_a, "n": big},), ({"e": only_a}, {"n": big}), ()]
    table = Table(rows, AXES)
    assert table.reads == ("e", "n")
    assert table.row({"e": "a", "n": 40}) == 0
    assert table.row({"e": "a", "n": 1000}) == 0  # outside the known values: asked of the condition
    assert table.row({"e": "a", "n": 10}) == 1
    assert table.row({"e": "b", "n": 10}) == 2
    assert table.row({"e": "b"}) is None  # row 1 holds when n >= 30: not given, so undecided
    assert table.row({"e": "a"}) is None  # row 0 needs n too
    assert Table([({"e": only_a},)], AXES).row({"e": "b"}) == NO_ROW


def test_shipped_tables_answer_as_their_rows() -> None:
    """Every derived axis and role order of the shipped matrix, on drawn values (some left out)."""
    matrix = capmatrix.load()
    resolver = _resolver(matrix)
    readable = {**matrix.axes, **{name: d.axis for name, d in matrix.derived.items()}}
    tables: list[tuple[Table, list[Boxes]]] = [
        (Table([r.when for r in d.rows], readable), [r.when for r in d.rows]) for d in matrix.derived.values()
    ]
    tables += [(resolver._order_table(name)[0], [o.when for o in role.orders])
               for name, role in matrix.roles.items() if role.orders]
    assert tables
    rng = random.Random(5)  # noqa: S311 - a reproducible draw, not a secret
    for table, rows in tables:
        for _ in range(400):
            values = {name: rng.choice(readable[name].values) for name in table.reads if rng.random() < 0.9}
            assert table.row(values) == naive(rows, values), values


@pytest.mark.parametrize("name", ["vllm_fa_version", "vllm_fa_default"])
def test_derived_values_match_the_tables(name: str) -> None:
    matrix = capmatrix.load()
    resolver = _resolver(matrix)
    rng = random.Random(7)  # noqa: S311 - a reproducible draw, not a secret
    for _ in range(200):
        sm = rng.choice(matrix.axes["sm"].values)
        got = resolver.derived_values(capmatrix.KernelQuery(None, sm=sm, head_dim=128))
        values = resolver.effective_values(capmatrix.KernelQuery(None, sm=sm, head_dim=128))[0]
        for earlier in matrix.derived:
            if earlier == name:
                break
            if earlier in got:
                values[earlier] = got[earlier]
        assert got.get(name) == matrix.derived[name].value(values)


DERIVED_ORDER = """
axes:
  sm:
    type: int
    description: compute capability
    values: [80, 90, 100]
  lib:
    type: bool
    description: a library is installed
    default: true
  ver:
    type: int
    description: library version
    values: [2, 3]
    derive:
      - when: {sm: ">=90", lib: true}
        value: 3
      - value: 2
  fast:
    type: bool
    description: version 3
    derive:
      - when: {ver: 3}
        value: true
      - value: false
  unread:
    type: bool
    description: read by no order
    derive:
      - when: {sm: 80}
        value: true
      - value: false
kernels:
  a:
    description: any
    rules:
      - {id: a.any, grant: {sm: [80, 90, 100]}, reason: r, source: s, status: untested}
  b:
    description: not on 90
    rules:
      - {id: b.any, grant: {sm: [80, 100]}, reason: r, source: s, status: untested}
roles:
  pick:
    description: order by a derived axis that reads another
    orders:
      - when: {fast: true}
        candidates: [b, a]
      - candidates: [a]
"""


def test_an_order_reading_derived_axes_computes_those_alone(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(DERIVED_ORDER, encoding="utf-8")
    matrix = capmatrix.load(tmp_path)
    resolver = _resolver(matrix)
    assert resolver._order_table("pick")[1] == ("ver", "fast")
    role = matrix.roles["pick"]
    for sm, lib in itertools.product([80, 90, 100, None], [True, False, None]):
        axes = {k: v for k, v in (("sm", sm), ("lib", lib)) if v is not None}
        query = capmatrix.KernelQuery().replace(**axes)
        selection = resolver.select("pick", query)
        order, decided = role.order_for(resolver.derived_values(query))
        assert selection.decided is decided
        assert [r.kernel for r in selection.trace] == list(order[:len(selection.trace)])
        assert selection.kernel == next((k for k in order if resolver.resolve(query.with_kernel(k))), None)
