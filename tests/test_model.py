"""The axis model: one text form (format_value) and one parser (Axis.parse) per value, round-tripping."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

import capmatrix
from capmatrix._core.record import replace as fresh_copy  # a copy's memo starts empty
from capmatrix.authoring.analysis import parse_where
from capmatrix.authoring.cli import run
from capmatrix.errors import InvalidValue
from capmatrix.model import NONE, Axis, AxisType, AxisValue, Condition, Interval, format_value

if TYPE_CHECKING:
    from pathlib import Path

    from capmatrix.model import AxisValue

AXES = (
    Axis(name="sm", type=AxisType.INT, values=(80, 90, 100, 120, 121), description="d"),
    Axis(name="offset", type=AxisType.INT, values=(-3, 0, 7), description="d"),
    Axis(name="causal", type=AxisType.BOOL, values=(False, True), description="d"),
    Axis(name="attention", type=AxisType.ENUM, values=("mha", "gqa", "mla", "1", "true"), description="d"),
)


@pytest.mark.parametrize("axis", AXES, ids=[a.name for a in AXES])
def test_every_value_round_trips_through_its_text(axis: Axis) -> None:
    for value in axis.values:
        parsed = axis.parse(format_value(value))
        assert parsed == value
        assert type(parsed) is type(value)


def test_every_axis_type_is_covered() -> None:
    assert {a.type for a in AXES} == set(AxisType)


def test_shipped_axes_round_trip() -> None:
    for axis in capmatrix.default_matrix().axes.values():
        for value in axis.values:
            parsed = axis.parse(format_value(value))
            assert (parsed, type(parsed)) == (value, type(value))


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("True", True), ("yes", True), ("on", True), ("1", True),
    ("false", False), ("NO", False), ("off", False), ("0", False),
])
def test_bool_spellings(text: str, value: bool) -> None:
    assert AXES[2].parse(text) is value


@pytest.mark.parametrize(("axis", "text", "expected"), [
    (AXES[0], "nine", "an integer"),
    (AXES[0], "9" * 5000, "an integer"),
    (AXES[2], "maybe", "true or false"),
])
def test_bad_text_is_an_invalid_value(axis: Axis, text: str, expected: str) -> None:
    with pytest.raises(InvalidValue) as info:
        axis.parse(text)
    assert (info.value.axis, info.value.text, info.value.expected) == (axis.name, text, expected)
    assert isinstance(info.value, capmatrix.InvalidQuery)


@given(st.one_of(
    st.integers(0, 10**6).map(lambda n: "".join(chr(0x0660 + int(d)) for d in str(n))),  # Arabic-Indic
    st.integers(0, 10**6).map(lambda n: "".join(chr(0xFF10 + int(d)) for d in str(n))),  # full width
    st.integers(10, 10**6).map(lambda n: f"{str(n)[0]}_{str(n)[1:]}"),
    st.integers(0, 10**6).map(lambda n: f" {n}"), st.integers(0, 10**6).map(lambda n: f"{n}\n"),
    st.integers(1, 10**6).map(hex), st.sampled_from(["1:30", "0b11", "1e3", "90.0", "", "+", "-"]),
))
def test_int_text_is_ascii_decimal_only(text: str) -> None:
    """int() would read lookalike digits, underscores and padding as a number; the axis does not."""
    with pytest.raises(InvalidValue):
        AXES[0].parse(text)


@given(st.integers(-(10**30), 10**30))
def test_ascii_decimal_text_round_trips(number: int) -> None:
    assert AXES[0].parse(str(number)) == number


def test_enum_text_is_taken_as_it_is() -> None:
    assert AXES[3].parse("true") == "true"
    assert AXES[3].parse("1") == "1"


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(argv, out, err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize("text", ["yes", "true", "on", "1"])
def test_where_reads_values_as_query_does(text: str, tmp_path: Path) -> None:
    """``compare-legacy --where causal=yes`` restricts like ``query --causal yes`` asks."""
    matrix = capmatrix.default_matrix()
    assert parse_where(matrix, [f"causal={text}"]) == {"causal": (True,)}
    predicate = tmp_path / "legacy.py"
    predicate.write_text("def causal_only(*, causal, **_):\n    return causal\n", encoding="utf-8")
    code, out, err = _run(["compare-legacy", f"{predicate}:causal_only", "--kernel",
                           "torch_sdpa_math", "--where", f"causal={text}", "--json"])
    assert err == ""
    assert code in {0, 1}
    assert json.loads(out)["where"] == {"causal": [True]}
    q_text = _run(["query", "torch_sdpa_math", "--causal", text, "--json"])
    q_true = _run(["query", "torch_sdpa_math", "--causal", "true", "--json"])
    assert q_text == q_true
    assert json.loads(q_text[1])["query"]["causal"] is True


def test_value_of_wrong_type_says_so_in_both() -> None:
    code, _out, err = _run(["query", "xqa", "--causal", "maybe"])
    assert (code, err.strip()) == (2, "capmatrix: error: --causal expects true or false, got 'maybe'")
    with pytest.raises(capmatrix.CapmatrixError, match="takes true or false"):
        parse_where(capmatrix.default_matrix(), ["causal=maybe"])


def _values() -> list[AxisValue]:
    return [v for a in AXES for v in a.values]


def test_format_value_spells_bools_in_lower_case() -> None:
    assert [format_value(v) for v in _values() if isinstance(v, bool)] == ["false", "true"]


def _bits_of_contains(cond: Condition, values: tuple[AxisValue, ...]) -> int:
    return sum(1 << i for i, value in enumerate(values) if cond.contains(value))


def test_mask_is_contains_of_each_value_on_the_shipped_matrix() -> None:
    matrix = capmatrix.load()
    checked = 0
    for rule in matrix.rules:
        for name, cond in rule.conditions.items():
            values = matrix.axes[name].values
            assert cond.mask(values) == _bits_of_contains(cond, values), (rule.id, name)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize(
    "cond",
    [
        Condition(axis="a", text="t", values=frozenset({True})),  # 1 == True: types must match
        Condition(axis="a", text="t", values=frozenset({1}), negated=True),
        Condition(axis="a", text="t", values=frozenset({"x", NONE}), optional=True, admits_none=True),
        Condition(axis="a", text="t", values=frozenset({"x"}), optional=True),
        Condition(axis="a", text="t", intervals=(Interval(low=2, high=8),), moduli=(3,)),
        Condition(axis="a", text="t", moduli=(4,), negated=True, optional=True, admits_none=True),
    ],
)
def test_mask_is_contains_of_each_value(cond: Condition) -> None:
    values: tuple[AxisValue, ...] = (False, True, 0, 1, 2, 3, 4, 6, 8, 9, 12, "x", "y", NONE, "1")
    assert cond.mask(values) == _bits_of_contains(cond, values)


def _open_axis() -> Axis:
    """An int axis with class representatives (an open domain), as the loader builds one."""
    matrix = capmatrix.load()
    return next(a for a in matrix.space.axes if a.extra and 3 <= len(a.values) <= 14)


def _rendered_axes() -> list[Axis]:
    """Axes of every kind: the shipped matrix's small ones (open ints, enums with spellings, bools,
    optional ones, with and without defaults) and this module's own."""
    shipped = [a for a in capmatrix.load().space.axes if 1 < len(a.values) <= 10]  # one value: no mask to say
    assert {a.type for a in shipped} >= {AxisType.INT, AxisType.ENUM, AxisType.BOOL}
    assert any(a.extra for a in shipped)
    assert any(a.default is not None for a in shipped)
    return [_open_axis(), *shipped, *AXES]


@pytest.mark.parametrize("axis", _rendered_axes(), ids=lambda a: a.name)
def test_rendered_masks_read_as_the_ones_made_anew(axis: Axis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-axis memo of values, texts, phrases and witness picks answers as rendering afresh."""
    full = axis.full_mask
    masks = range(1, full) if full < 1 << 10 else range(1, 1 << 10)  # a whole axis is left unsaid
    wholes = (full, full & ~1)  # a phrase within the axis, and within a narrower box (relative_to)
    remembered = [(axis.values_of(m), axis.format_values(m), axis.pick(m),
                   *(axis.phrase(m, w) for w in wholes if m & w and m & w != w and m & ~w == 0))
                  for m in masks]
    assert axis._rendered
    monkeypatch.setattr("capmatrix.model.RENDERED_LIMIT", 0)
    fresh = fresh_copy(axis)
    assert [(fresh.values_of(m), fresh.format_values(m), fresh.pick(m),
             *(fresh.phrase(m, w) for w in wholes if m & w and m & w != w and m & ~w == 0))
            for m in masks] == remembered
    assert not fresh._rendered


def test_the_rendered_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("capmatrix.model.RENDERED_LIMIT", 40)
    axis = fresh_copy(_open_axis())
    for mask in range(1, axis.full_mask):
        axis.format_values(mask)
        axis.phrase(mask, axis.full_mask)
    assert len(axis._rendered) == 40
    past = axis.full_mask ^ 1  # rendered after the memo is full: made anew, and the same
    assert axis.phrase(past, axis.full_mask) == fresh_copy(axis).phrase(past, axis.full_mask)

