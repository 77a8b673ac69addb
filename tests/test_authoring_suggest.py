"""Suggestions: each one resolves supported, none has a smaller change inside it, and none is missed.

Checked by brute force with :func:`capmatrix.resolve` over every change of one and two axes.
"""

from __future__ import annotations

import random
import threading
from itertools import combinations, product
from typing import TYPE_CHECKING, Any

import pytest

import capmatrix
from capmatrix import ANY, KernelQuery, Verdict, resolve, suggest
from capmatrix.authoring import _suggest
from capmatrix.authoring._suggest import GEOMETRY, Suggestions, default_vary

if TYPE_CHECKING:
    from collections.abc import Sequence

    from capmatrix.model import AxisValue


def _changes(
    matrix: capmatrix.Matrix, query: KernelQuery, vary: Sequence[str], size: int
) -> list[dict[str, AxisValue]]:
    """Every change of exactly ``size`` axes of ``vary`` (an open axis may take any value)."""
    values = resolve(query, matrix).values
    out: list[dict[str, AxisValue]] = []
    for names in combinations(vary, size):
        options = [
            [v for v in matrix.axes[n].known if n not in values or v != values[n]] for n in names
        ]
        out.extend(dict(zip(names, combo, strict=True)) for combo in product(*options))
    return out


def _works(matrix: capmatrix.Matrix, query: KernelQuery, change: dict[str, AxisValue]) -> bool:
    return resolve(query.replace(**change), matrix).verdict is Verdict.SUPPORTED


def _brute_force(
    matrix: capmatrix.Matrix, query: KernelQuery, vary: Sequence[str]
) -> list[dict[str, AxisValue]]:
    """The minimal working changes of one or two axes, by resolving each candidate query."""
    singles = [c for c in _changes(matrix, query, vary, 1) if _works(matrix, query, c)]
    single_keys = {next(iter(c.items())) for c in singles}
    pairs = [
        c for c in _changes(matrix, query, vary, 2)
        if not any(item in single_keys for item in c.items()) and _works(matrix, query, c)
    ]
    return singles + pairs


def _key(change: dict[str, AxisValue]) -> tuple[tuple[str, str, AxisValue], ...]:
    return tuple(sorted((k, type(v).__name__, v) for k, v in change.items()))


def _assert_matches_brute_force(
    matrix: capmatrix.Matrix, query: KernelQuery, vary: Sequence[str] | None = None
) -> list[capmatrix.Suggestion]:
    found = list(suggest(query, matrix, vary))
    names = list(vary) if vary is not None else list(default_vary(matrix._compiled, query))
    expected = _brute_force(matrix, query, names)
    assert sorted(map(_key, (dict(s.changes) for s in found))) == sorted(map(_key, expected))
    values = resolve(query, matrix).values
    for s in found:
        # each suggestion works, through the public resolver ...
        assert resolve(s.query, matrix).verdict is Verdict.SUPPORTED, s
        assert set(s.changes) <= set(names)
        assert {k: values.get(k) for k in s.changes} == dict(s.previous)
        # ... and no smaller change inside it does
        for name in s.changes:
            if len(s.changes) > 1:
                assert not _works(matrix, query, {name: s.changes[name]}), s
    return found


SMALL_QUERIES = [
    KernelQuery("xqa", sm=120, model="dsv3", spec_dec="one_model"),
    KernelQuery("xqa", sm=120, attention="mla", kv="bf16"),
    KernelQuery("xqa", sm=90, attention="mha", beam=4),
    KernelQuery("xqa", attention="mla"),
    KernelQuery("fallback", sm=120),
    KernelQuery("fallback", sm=130),
    KernelQuery("xqa", sm=80, attention="mla", spec_dec=ANY),
]


@pytest.mark.parametrize("query", SMALL_QUERIES, ids=repr)
def test_small_matrix_default_vary(small: capmatrix.Matrix, query: KernelQuery) -> None:
    assert resolve(query, small).verdict is not Verdict.SUPPORTED
    _assert_matches_brute_force(small, query)


@pytest.mark.parametrize("query", SMALL_QUERIES, ids=repr)
def test_small_matrix_every_axis(small: capmatrix.Matrix, query: KernelQuery) -> None:
    _assert_matches_brute_force(small, query, list(small.axes))


def test_small_matrix_every_fixed_query(small: capmatrix.Matrix) -> None:
    """Every fully fixed query of the small universe, every axis allowed to change."""
    axes = list(small.axes.values())
    checked = 0
    for kernel in small.kernels:
        for combo in product(*(a.values for a in axes)):
            fixed: dict[str, AxisValue] = dict(zip([a.name for a in axes], combo, strict=True))
            query = KernelQuery(kernel).replace(**fixed)
            if resolve(query, small).verdict is Verdict.SUPPORTED:
                assert suggest(query, small, list(small.axes)) == ()
                continue
            _assert_matches_brute_force(small, query, list(small.axes))
            checked += 1
    assert checked > 50


def test_seed_query_suggests_fp8() -> None:
    query = KernelQuery("xqa", sm=121, model="deepseek_v3", spec_dec="one_model")
    found = _assert_matches_brute_force(capmatrix.default_matrix(), query)
    assert [dict(s.changes) for s in found] == [{"dtype": "fp8", "kv_cache_dtype": "fp8"}]
    assert str(found[0]) == "set dtype=fp8 and kv_cache_dtype=fp8"
    assert found[0].previous == {"dtype": "bf16", "kv_cache_dtype": "bf16"}


@pytest.mark.parametrize(
    ("query", "vary"),
    [
        (KernelQuery("xqa", sm=120, model="qwen2", spec_dec="one_model"), None),
        (KernelQuery("trtllm_spec_dec_mode", sm=121, model="deepseek_v3", spec_dec="one_model"), None),
        (KernelQuery("xqa", sm=120, model="llama", spec_dec="one_model", dtype="fp32"), None),
        (KernelQuery("xqa", sm=120, model="qwen2", spec_dec="one_model"), ["q_per_kv", "sm"]),
        (KernelQuery("fmha_v2", sm=75, model="deepseek_v3", phase="context"), ["sm", "dtype"]),
    ],
    ids=repr,
)
def test_shipped_matrix_matches_brute_force(query: KernelQuery, vary: list[str] | None) -> None:
    matrix = capmatrix.default_matrix()
    assert resolve(query, matrix).verdict is not Verdict.SUPPORTED
    _assert_matches_brute_force(matrix, query, vary)


def test_default_vary_keeps_the_model_geometry() -> None:
    matrix = capmatrix.default_matrix()
    names = default_vary(matrix._compiled, KernelQuery("xqa", model="mistral"))
    assert not set(GEOMETRY) & set(names)
    assert "sliding_window" not in names  # mistral sets it: geometry of that model
    assert {"dtype", "kv_cache_dtype", "sm", "spec_dec"} <= set(names)
    plain = default_vary(matrix._compiled, KernelQuery("xqa"))
    assert "sliding_window" in plain
    assert not set(GEOMETRY) & set(plain)


def test_supported_query_has_no_suggestions() -> None:
    assert suggest(KernelQuery("xqa", sm=120, model="llama", spec_dec="one_model")) == ()


def test_vary_limits_the_changed_axes() -> None:
    query = KernelQuery("xqa", sm=120, model="qwen2", spec_dec="one_model")
    assert {tuple(s.changes) for s in suggest(query)} == {("sm",), ("spec_dec",)}
    only_dec = suggest(query, vary=["spec_dec"])
    assert [dict(s.changes) for s in only_dec] == [{"spec_dec": "none"}]
    assert suggest(query, vary=[]) == ()


def test_suggestion_forms() -> None:
    query = KernelQuery("xqa", sm=120, model="qwen2", spec_dec="one_model")
    first = suggest(query, vary=["spec_dec"])[0]
    assert first.query == query.replace(spec_dec="none")
    assert first.command() == "capmatrix query xqa --model qwen2 --sm 120 --spec-dec none"
    assert first.as_dict() == {
        "changes": {"spec_dec": "none"},
        "from": {"spec_dec": "one_model"},
        "command": first.command(),
    }


@pytest.mark.parametrize(
    ("vary", "error"),
    [(["smm"], "unknown axis 'smm'"), ("sm", "collection of axis names")],
)
def test_bad_vary_is_invalid_query(vary: object, error: str) -> None:
    with pytest.raises(capmatrix.InvalidQuery, match=error):
        suggest(KernelQuery("xqa", sm=120, model="qwen2", spec_dec="one_model"), vary=vary)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# bounded: a depends query over many open axes costs a bounded number of resolves


def _open_matrix(write_matrix: Any) -> capmatrix.Matrix:
    """13 rules over 14 six-valued axes, none with a default: the empty query depends on all of them."""
    rng = random.Random(3)  # noqa: S311 - reproducible test inputs
    names = [f"a{i}" for i in range(14)]
    values = [f"v{j}" for j in range(6)]
    axes = "axes:\n" + "".join(
        f"  {n}: {{type: enum, description: d, values: [{', '.join(values)}]}}\n" for n in names)
    axes += "  unused: {type: enum, description: named by no rule, values: [x, y]}\n"
    rules = []
    for r in range(13):
        cond = ", ".join(f"{a}: [{', '.join(rng.sample(values, 3))}]" for a in rng.sample(names, 3))
        effect = "grant" if r < 8 else "exclude"
        rules.append(f"      - {{id: k.r{r}, {effect}: {{{cond}}}, reason: r, source: s, "
                     "status: untested}\n")
    kernels = ("kernels:\n  k:\n    description: d\n    rules:\n" + "".join(rules)
               + "models:\n  m: {description: m, axes: {a0: v0}, source: s}\n"
               + "roles:\n  r: {description: r, candidates: [k]}\n")
    return capmatrix.load(write_matrix({"axes.yaml": axes, "kernels/k.yaml": kernels}, base=False))


def test_suggestions_on_many_open_axes_stop_at_the_budget(
    write_matrix: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small work budget stops the search: truncated, and what it found is still right."""
    matrix = _open_matrix(write_matrix)
    query = KernelQuery("k")
    assert capmatrix.resolve(query, matrix).verdict is Verdict.DEPENDS
    monkeypatch.setattr(_suggest, "MAX_WORK", 400)
    done: list[Suggestions] = []
    fresh = capmatrix.Resolver(matrix)
    worker = threading.Thread(target=lambda: done.append(_suggest.suggestions(fresh, query)), daemon=True)
    worker.start()
    worker.join(120)
    assert done, "suggestions did not finish"
    found = done[0]
    assert found.truncated is True
    brute = {(a, v) for a in matrix.axes if a != "unused" for v in matrix.axes[a].values
             if capmatrix.Resolver(matrix).resolve(query.replace(**{a: v})).verdict is Verdict.SUPPORTED}
    assert {next(iter(s.changes.items())) for s in found if len(s.changes) == 1} <= brute
    assert all("unused" not in s.changes for s in found)  # an axis no rule names is never varied


def test_an_untruncated_search_says_so(small: capmatrix.Matrix) -> None:
    found = capmatrix.suggest(KernelQuery("xqa", sm=80, attention="mla", kv="fp8"), small)
    assert isinstance(found, Suggestions)
    assert found.truncated is False
    assert [str(s) for s in found]


def test_a_query_by_an_axis_alias_gets_suggestions_by_the_axis_name() -> None:
    """A change of tokens_per_block replaces the query's block_size (vLLM's name), not joins it."""
    matrix = capmatrix.load()
    query = KernelQuery("vllm_flash_attn", block_size=7, sm=80, model="llama3_1_70b")
    found = capmatrix.suggest(query, matrix)
    assert found
    by_name = capmatrix.suggest(KernelQuery("vllm_flash_attn", tokens_per_block=7, sm=80,
                                            model="llama3_1_70b"), matrix)
    assert [dict(s.changes) for s in found] == [dict(s.changes) for s in by_name]
    for s in found:
        assert "block_size" not in s.query.axes
        assert capmatrix.resolve(s.query, matrix).verdict is Verdict.SUPPORTED
        assert "--block-size" not in s.command()
