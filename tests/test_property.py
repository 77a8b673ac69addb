"""Differential property test: the compiled resolver agrees with a naive cell-by-cell evaluator."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import capmatrix
from capmatrix import KernelQuery, Verdict

if TYPE_CHECKING:
    from collections.abc import Sequence

    from capmatrix.model import Axis, AxisValue

INT_VALUES = [10, 20, 30, 40]
#: Every int a class of the generated conditions can hold, and more (bounds lie in 5..50).
OPEN_INTS = list(range(-2, 61))
ENUM_VALUES = ["a", "b", "c"]
AXES: dict[str, tuple[str, Sequence[AxisValue]]] = {
    "n": ("int", INT_VALUES),
    "e": ("enum", ENUM_VALUES),
    "f": ("bool", [False, True]),
}


@dataclass(frozen=True)
class Cond:
    values: frozenset[Any]
    low: int | None
    high: int | None  # inclusive bounds of a range, for int axes
    negated: bool

    def yaml(self) -> Any:
        items: list[Any] = sorted(self.values, key=str)
        if self.low is not None or self.high is not None:
            if self.low is not None and self.high is not None:
                items.append(f"[{self.low}, {self.high}]")
            elif self.low is not None:
                items.append(f">={self.low}")
            else:
                items.append(f"<={self.high}")
        body: Any = items if len(items) != 1 else items[0]
        return {"not": body} if self.negated else body

    def contains(self, value: Any) -> bool:
        hit = value in self.values
        if isinstance(value, int) and not isinstance(value, bool):
            lo_ok = self.low is None or value >= self.low
            hi_ok = self.high is None or value <= self.high
            hit = hit or ((self.low is not None or self.high is not None) and lo_ok and hi_ok)
        return hit != self.negated


@st.composite
def conditions(draw: st.DrawFn, axis: str) -> Cond:
    kind, values = AXES[axis]
    chosen = frozenset(draw(st.sets(st.sampled_from(values), min_size=0, max_size=len(values))))
    low = high = None
    if kind == "int" and draw(st.booleans()):
        low = draw(st.one_of(st.none(), st.sampled_from([5, 10, 15, 25, 40])))
        high = draw(st.one_of(st.none(), st.sampled_from([10, 25, 35, 50])))
        if low is not None and high is not None and low > high:
            low, high = high, low
        if low is None and high is None:
            low = 15
    if not chosen and low is None and high is None:
        chosen = frozenset([values[0]])
    return Cond(chosen, low, high, draw(st.booleans()))


@st.composite
def rules(draw: st.DrawFn) -> tuple[bool, dict[str, Cond]]:
    axes = draw(st.sets(st.sampled_from(sorted(AXES)), max_size=3))
    return draw(st.booleans()), {a: draw(conditions(a)) for a in sorted(axes)}


@st.composite
def queries(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for axis, (kind, values) in AXES.items():
        if draw(st.booleans()):
            if kind == "int":
                out[axis] = draw(st.sampled_from([*values, 5, 25, 99]))
            else:
                out[axis] = draw(st.sampled_from(values))
    return out


def write(root: Path, rule_list: list[tuple[bool, dict[str, Cond]]]) -> None:
    axes = {
        name: {"type": kind, "description": name, **({"values": vals} if kind != "bool" else {})}
        for name, (kind, vals) in AXES.items()
    }
    doc_rules = [
        {
            "id": f"k.r{i}",
            ("grant" if grant else "exclude"): {a: c.yaml() for a, c in conds.items()},
            "reason": "generated",
            "source": "hypothesis",
            "status": "untested",
        }
        for i, (grant, conds) in enumerate(rule_list)
    ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "axes.yaml").write_text(yaml.safe_dump({"axes": axes}))
    (root / "k.yaml").write_text(
        yaml.safe_dump({"kernels": {"k": {"description": "generated", "rules": doc_rules}}})
    )


def naive(rule_list: list[tuple[bool, dict[str, Cond]]], query: dict[str, Any]) -> set[tuple[AxisValue, ...]]:
    """The supported cells of the query's sub-universe, cell by cell."""
    names = sorted(AXES)
    # An open int axis ranges over every int: these cover each class the generated bounds can cut.
    ranges = [[query[n]] if n in query else (OPEN_INTS if AXES[n][0] == "int" else AXES[n][1])
              for n in names]
    supported = set()
    for cell in itertools.product(*ranges):
        point = dict(zip(names, cell, strict=False))
        granted = any(g and all(c.contains(point[a]) for a, c in conds.items())
                      for g, conds in rule_list)
        removed = any(not g and all(c.contains(point[a]) for a, c in conds.items())
                      for g, conds in rule_list)
        if granted and not removed:
            supported.add(cell)
    return supported


def _stand(n_axis: Axis, names: list[str], given: bool, cell: tuple[AxisValue, ...]) -> tuple[AxisValue, ...]:
    """``cell`` with its open int value replaced by the value standing for its class."""
    return tuple(n_axis.values[n_axis.locate(v) or 0] if n == "n" and not given else v
                 for n, v in zip(names, cell, strict=True))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rule_list=st.lists(rules(), min_size=1, max_size=6), query_list=st.lists(queries(),
       min_size=1, max_size=5))
def test_compiled_resolver_equals_naive(
    tmp_path_factory: Any, rule_list: list[tuple[bool, dict[str, Cond]]],
    query_list: list[dict[str, Any]],
) -> None:
    root = tmp_path_factory.mktemp("prop")
    write(root, rule_list)
    matrix = capmatrix.load(root)
    names = sorted(AXES)
    for query in query_list:
        expected = naive(rule_list, query)
        total = 1
        for n in names:
            total *= 1 if n in query else len(OPEN_INTS if AXES[n][0] == "int" else AXES[n][1])
        resolution = capmatrix.resolve(KernelQuery("k", **query), matrix)
        if not expected:
            assert resolution.verdict is Verdict.UNSUPPORTED
        elif len(expected) == total:
            assert resolution.verdict is Verdict.SUPPORTED
        else:
            assert resolution.verdict is Verdict.DEPENDS
            assert resolution.residual is not None
            cells = set()
            for box in resolution.residual.as_dicts():
                open_names = [n for n in names if n not in query]
                for combo in itertools.product(*(box[n] for n in open_names)):
                    point = dict(zip(open_names, combo, strict=False)) | query
                    cells.add(tuple(point[n] for n in names))
            # The residual names each class by the value standing for it: every int of a class is
            # answered alike (never half of it), and the classes supported are the residual's.
            stand = partial(_stand, matrix.axes["n"], names, "n" in query)

            everything = set(itertools.product(*(
                [query[n]] if n in query else (OPEN_INTS if AXES[n][0] == "int" else AXES[n][1])
                for n in names)))
            supported = {stand(c) for c in expected}
            assert not supported & {stand(c) for c in everything - expected}
            assert cells == supported
