"""Truth tables for the resolver's semantics: grants, exclusions, ranges, families, depends, models."""

from __future__ import annotations

import dataclasses
import itertools
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from conftest import disguises, int_enum, str_enum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import capmatrix
from capmatrix import ANY, InvalidQuery, KernelQuery, Verdict, resolve, select
from capmatrix.resolver import CLOSEST_GRANTS, MAX_RESIDUAL_BOXES, compile_matrix

if TYPE_CHECKING:
    from capmatrix.model import AxisValue

S, U, D = Verdict.SUPPORTED, Verdict.UNSUPPORTED, Verdict.DEPENDS

FULL: dict[str, AxisValue] = {"spec_dec": "none", "kv": "bf16", "causal": False}


def full_query(kernel: str | None = None, **axes: AxisValue) -> KernelQuery:
    """``KernelQuery(kernel, **FULL, **axes)``: the query with the remaining axes pinned (``axes`` win).

    The cast only tells mypy that the merged dict holds axis values and never feeds ``model``.
    """
    return KernelQuery(kernel, **cast("dict[str, Any]", {**FULL, **axes}))


TRUTH_TABLE: list[tuple[str, dict[str, Any], Verdict]] = [
    # grants add: the range >=80 covers every known SM
    ("xqa", {"sm": 80, "attention": "gqa", **FULL}, S),
    ("xqa", {"sm": 121, "attention": "mha", **FULL}, S),
    # unsupported by default: no grant covers mla on sm90
    ("xqa", {"sm": 90, "attention": "mla", **FULL}, U),
    # a family grants all its members, and only them
    ("xqa", {"sm": 120, "attention": "mla", **FULL, "kv": "fp8"}, S),
    ("xqa", {"sm": 121, "attention": "mla", **FULL, "kv": "fp8"}, S),
    ("xqa", {"sm": 103, "attention": "mla", **FULL, "kv": "fp8"}, U),
    # exclusions override grants
    ("xqa", {"sm": 121, "attention": "mla", "spec_dec": "one_model", "kv": "fp8", "causal": True}, U),
    ("xqa", {"sm": 120, "attention": "gqa", "spec_dec": "one_model", "kv": "bf16", "causal": True}, S),
    # axis default beam=1 applies; beam=4 trips the exclusion for mha only
    ("xqa", {"sm": 90, "attention": "mha", "beam": 4, **FULL}, U),
    ("xqa", {"sm": 90, "attention": "gqa", "beam": 4, **FULL}, S),
    # half-open interval [80, 120)
    ("fallback", {"sm": 103, "attention": "mla", **FULL}, S),
    ("fallback", {"sm": 120, "attention": "mla", **FULL}, U),
    # open axes: the verdict depends on them
    ("xqa", {"sm": 120, "attention": "mla"}, D),
    ("xqa", {"sm": 90, "attention": "gqa"}, S),
    ("xqa", {"sm": 90, "attention": "mla"}, U),
    ("xqa", {"sm": 90}, D),
    ("fallback", {"sm": 90}, S),
]


@pytest.mark.parametrize(("kernel", "axes", "expected"), TRUTH_TABLE)
def test_truth_table(
    small: capmatrix.Matrix, kernel: str, axes: dict[str, Any], expected: Verdict
) -> None:
    resolution = resolve(KernelQuery(kernel, **axes), small)
    assert resolution.verdict is expected
    assert bool(resolution) is (expected is S)


def test_exclusion_order_does_not_matter(write_matrix: Any) -> None:
    """Rules compose order-independently: reversing a kernel's rules changes no verdict."""
    from conftest import SMALL_KERNELS

    lines = SMALL_KERNELS.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if "- id: xqa.hmma" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("  fallback:"))
    rules = "".join(lines[start:end]).split("      - id:")
    reordered = "      - id:".join([rules[0], *reversed(rules[1:])])
    flipped = "".join(lines[:start]) + reordered.replace("\n      - id:", "\n      - id:") + "".join(
        lines[end:]
    )
    a = capmatrix.load(write_matrix())
    b = capmatrix.load(write_matrix({"kernels/test.yaml": flipped}))
    assert [r.id for r in b.kernels["xqa"].rules] != [r.id for r in a.kernels["xqa"].rules]
    for _kernel, axes, _expected in TRUTH_TABLE:
        query = KernelQuery(_kernel, **axes)
        assert resolve(query, a).verdict is resolve(query, b).verdict


def test_supported_reasons_cite_the_grant(small: capmatrix.Matrix) -> None:
    r = resolve(KernelQuery("xqa", sm=120, model="llama", spec_dec="one_model", causal=True), small)
    assert r.verdict is S
    grant = next(x for x in r.reasons if x.kind == "grant")
    assert grant.rule_id == "xqa.hmma"
    assert grant.path is not None
    assert grant.path.endswith("kernels/test.yaml")
    assert grant.line == 5


def test_unsupported_names_exclusion_and_every_failing_axis(small: capmatrix.Matrix) -> None:
    r = resolve(KernelQuery("xqa", sm=121, model="dsv3", spec_dec="one_model", causal=False), small)
    assert r.verdict is U
    kinds = {(x.kind, x.rule_id) for x in r.reasons}
    assert ("exclude", "xqa.no-mla-spec") in kinds
    excl = next(x for x in r.reasons if x.kind == "exclude")
    assert excl.line == 15
    assert excl.detail == "release disables it"
    mismatch = [x for x in r.reasons if x.kind == "mismatch"]
    assert [(m.rule_id, m.axis, m.required, m.actual) for m in mismatch] == [
        ("xqa.hmma", "attention", "[mha, gqa]", "mla")
    ]


def test_all_failing_axes_are_reported(small: capmatrix.Matrix) -> None:
    r = resolve(KernelQuery("xqa", sm=90, attention="mla", kv="bf16", spec_dec="none",
                            causal=False), small)
    failing = {(m.rule_id, m.axis) for m in r.reasons if m.kind == "mismatch"}
    assert failing == {("xqa.hmma", "attention"), ("xqa.mla", "sm"), ("xqa.mla", "kv")}


def test_depends_gives_the_residual(small: capmatrix.Matrix) -> None:
    r = resolve(KernelQuery("xqa", sm=120, attention="mla"), small)
    assert r.verdict is D
    assert r.residual is not None
    assert str(r.residual) == "spec_dec=none and kv=fp8"
    assert r.residual.as_dicts() == [{"spec_dec": ["none"], "kv": ["fp8"], "causal": [False, True]}]
    assert any(x.kind == "residual" and "kv=fp8" in x.message for x in r.reasons)


def test_model_defaults_are_reported_and_overridden(small: capmatrix.Matrix) -> None:
    r = resolve(KernelQuery("xqa", sm=90, model="dsv3"), small)
    assert r.values["attention"] == "mla"
    assert r.origins["attention"] == "model:dsv3"
    assert r.origins["beam"] == "default"
    assert any(x.kind == "model" and x.axis == "attention" for x in r.reasons)
    explicit = resolve(KernelQuery("xqa", sm=90, model="dsv3", attention="gqa"), small)
    assert explicit.values["attention"] == "gqa"
    assert explicit.origins["attention"] == "query"
    assert explicit.verdict is S


def test_any_reopens_a_defaulted_axis(small: capmatrix.Matrix) -> None:
    r = resolve(KernelQuery("xqa", sm=90, attention="mha", beam=ANY), small)
    assert r.verdict is D
    assert r.residual is not None
    assert str(r.residual) == "beam=1"


def test_value_outside_universe_is_answered_by_ranges_and_flagged(small: capmatrix.Matrix) -> None:
    r = resolve(full_query("xqa", sm=130, attention="gqa"), small)
    assert r.verdict is S
    assert r.outside == ("sm",)
    assert any(x.kind == "outside" and x.axis == "sm" for x in r.reasons)
    assert not resolve(full_query("fallback", sm=130, attention="gqa"), small)
    assert resolve(full_query("fallback", sm=85, attention="gqa"), small)


@pytest.mark.parametrize(
    ("query", "message", "suggestion"),
    [
        (KernelQuery("xqb", sm=90), "unknown kernel 'xqb'", "xqa"),
        (KernelQuery("xqa", smm=90), "unknown axis 'smm'", "sm"),
        (KernelQuery("xqa", attention="gqb"), "'gqb' is not a value of axis 'attention'", "gqa"),
        (KernelQuery("xqa", model="lama"), "unknown model 'lama'", "llama"),
        (KernelQuery("xqa", sm="90"), "axis 'sm' is int; got '90'", None),
        (KernelQuery("xqa", sm=True), "axis 'sm' is int; got True", None),
        (KernelQuery("xqa", causal="yes"), "axis 'causal' is bool; got 'yes'", None),
        (KernelQuery(None, sm=90), "names no kernel", None),
    ],
)
def test_bad_queries(
    small: capmatrix.Matrix, query: KernelQuery, message: str, suggestion: str | None
) -> None:
    with pytest.raises(capmatrix.InvalidQuery) as info:
        resolve(query, small)
    assert message in str(info.value)
    assert info.value.suggestion == suggestion


def test_select_first_supported_wins_with_trace(small: capmatrix.Matrix) -> None:
    s = select("gen", full_query(sm=90, attention="mla"), small)
    assert s.kernel == "fallback"
    assert [r.kernel for r in s.rejected] == ["xqa"]
    assert s.resolution is not None
    assert s.resolution.kernel == "fallback"
    assert bool(s)
    none = select("gen", full_query(sm=120, attention="mla"), small)
    assert none.kernel is None
    assert not none
    assert [r.kernel for r in none.trace] == ["xqa", "fallback"]
    with pytest.raises(capmatrix.UnknownName):
        select("gne", KernelQuery(sm=90), small)


def test_resolutions_are_cached(small: capmatrix.Matrix) -> None:
    q = KernelQuery("xqa", sm=90, attention="gqa")
    assert resolve(q, small) is resolve(KernelQuery("xqa", attention="gqa", sm=90), small)


def test_json_form(small: capmatrix.Matrix) -> None:
    data = resolve(KernelQuery("xqa", sm=120, model="dsv3", spec_dec="one_model"), small).as_dict()
    assert data["kernel"] == "xqa"
    assert data["verdict"] == "unsupported"
    reasons = data["reasons"]
    assert isinstance(reasons, list)
    assert {"rule", "file", "line", "message"} <= set(reasons[0])


def test_role_axes_pin_values_unless_the_query_overrides(write_matrix: Any) -> None:
    from conftest import SMALL_KERNELS

    pinned = (
        SMALL_KERNELS
        + "  gen_fp8:\n    description: pinned\n    candidates: [xqa]\n    axes: {kv: fp8}\n"
    )
    matrix = capmatrix.load(write_matrix({"kernels/test.yaml": pinned}))
    s = select("gen_fp8", KernelQuery(sm=120, attention="mla", spec_dec="none", causal=True), matrix)
    assert s.kernel == "xqa"
    assert s.resolution is not None
    assert s.resolution.values["kv"] == "fp8"
    s = select("gen_fp8", KernelQuery(sm=120, attention="mla", spec_dec="none", causal=True,
                                      kv="bf16"), matrix)
    assert s.kernel is None


def test_selection_depends_when_an_earlier_candidate_depends(small: capmatrix.Matrix) -> None:
    s = select("gen", KernelQuery(sm=90), small)
    assert s.kernel == "fallback"
    assert s.verdict is D
    assert s.as_dict()["verdict"] == "depends"
    assert select("gen", KernelQuery(sm=90, attention="mla"), small).verdict is S


def test_reasons_are_built_on_first_access_and_kept(small: capmatrix.Matrix) -> None:
    r = resolve(KernelQuery("xqa", sm=90, attention="mla", kv="bf16", spec_dec="none",
                            causal=False), small)
    assert r._reasons is None
    first = r.reasons
    assert first
    assert r.reasons is first
    assert r._reasons is first


# --------------------------------------------------------------------------------------------------
# Bounded answers: a few valid rules whose residual is inherently exponential


def _pairs(n: int, values: int = 2) -> tuple[Any, capmatrix.Matrix]:
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks import synth

    syn = synth.pairs_matrix(n, values_per_axis=values)
    return syn, syn.load()


def _open(syn: Any) -> dict[str, Any]:
    return {a.name: ANY for a in syn.axes}


def test_depends_residual_is_bounded_and_says_it_is_truncated() -> None:

    syn, m = _pairs(13, values=3)  # 14 rules; the residual needs 2**13 disjoint boxes
    r = resolve(KernelQuery("holes", **_open(syn)), m)
    assert r.verdict is Verdict.DEPENDS
    assert r.residual is not None
    assert r.residual_truncated
    assert 0 < len(r.residual.boxes) <= MAX_RESIDUAL_BOXES
    residual = [x for x in r.reasons if x.kind == "residual"]
    assert f"more than {MAX_RESIDUAL_BOXES:,} regions, first {len(r.residual.boxes):,} shown" in (
        residual[0].message
    )
    assert r.as_dict()["residual_truncated"] is True
    # Every box shown is supported: its witness cell resolves supported.
    for box in r.residual.boxes[:20]:
        cell = r.residual.witness(box)
        assert resolve(KernelQuery("holes", **cast("dict[str, Any]", cell)), m).verdict is (
            Verdict.SUPPORTED
        )


@pytest.mark.parametrize(("n", "values"), [(2, 2), (3, 3), (4, 2)])
def test_depends_residual_equals_brute_force(n: int, values: int) -> None:
    syn, m = _pairs(n, values)
    for kernel in ("holes", "pairs"):
        r = resolve(KernelQuery(kernel, **_open(syn)), m)
        assert r.verdict is Verdict.DEPENDS
        assert r.residual is not None
        assert not r.residual_truncated
        names = [a.name for a in syn.axes]
        expected = set()
        for combo in itertools.product(*(a.values for a in syn.axes)):
            cell = dict(zip(names, combo, strict=True))
            if resolve(KernelQuery(kernel, **cast("dict[str, Any]", cell)), m):
                expected.add(combo)
        got = {
            tuple(combo)
            for box in r.residual.as_dicts()
            for combo in itertools.product(*(box[name] for name in names))
        }
        assert got == expected
        fresh = compile_matrix(m).resolve(KernelQuery(kernel, **_open(syn)))
        assert fresh.residual is not None
        assert fresh.residual.boxes == r.residual.boxes  # deterministic


def _dense_kernel(rules: int) -> tuple[Any, Any, capmatrix.Matrix]:
    """The benchmarks' synth module, and its ``boxes`` layout of ``rules`` rules in one kernel, built."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks import synth

    syn = synth.boxes_matrix(rules, n_kernels=1)
    return synth, syn, syn.build()


def test_explanation_lists_every_exclusion_and_the_closest_grants() -> None:
    """One kernel of 400 overlapping rules: reasons stay bounded, exclusions all listed, rest counted."""
    synth, syn, m = _dense_kernel(400)
    kernel = m.kernels["k000"]
    for cell in synth.random_cells(syn.axes, 40, seed=3):
        r = resolve(KernelQuery("k000", **cast("dict[str, Any]", cell)), m)
        applying = [x for x in kernel.rules
                    if all(c.contains(cell[a]) for a, c in x.conditions.items())]
        excl = {x.id for x in applying if x.effect == "exclude"}
        grants = [x.id for x in applying if x.effect == "grant"]
        kinds = [x.kind for x in r.reasons]
        if r.verdict is Verdict.UNSUPPORTED:
            assert {x.rule_id for x in r.reasons if x.kind == "exclude"} == excl
        listed = {x.rule_id for x in r.reasons if x.kind in ("grant", "mismatch")}
        assert len(listed) <= CLOSEST_GRANTS
        assert {x.rule_id for x in r.reasons if x.kind == "grant"} <= set(grants)
        more = [x for x in r.reasons if x.kind == "more"]
        total = len(kernel.grants) if r.verdict is Verdict.UNSUPPORTED else len(grants)
        if total > len(listed):
            assert more
            assert f"{total - len(listed):,} other grant" in more[0].message
        else:
            assert "more" not in kinds
        wide = r.explain(closest=1000)
        assert {x.rule_id for x in wide if x.kind == "grant"} == set(grants)
        assert not [x for x in wide if x.kind == "more"] or r.verdict is Verdict.UNSUPPORTED


def test_exclusions_that_hit_are_listed_in_rule_order_for_any_value() -> None:
    """Every exclusion that hits, in rule order: first sight and remembered alike, with a value
    outside an int axis's universe and with an axis left open."""
    synth, syn, m = _dense_kernel(600)
    kernel = m.kernels["k000"]
    resolver = compile_matrix(m)
    cells: list[dict[str, Any]] = []
    for i, drawn in enumerate(synth.random_cells(syn.axes, 60, seed=5)):
        cell: dict[str, Any] = dict(drawn)
        if i % 3 == 1:
            cell["x3"] = 8 if i % 2 else 40  # not a value of x3 (16, 32, ...)
        elif i % 3 == 2:
            del cell["x1"]  # x1 open
        cells.append(cell)
    seen = 0
    for _ in range(2):  # the second pass answers from the Reasons built by the first
        resolver.forget()
        for cell in cells:
            r = resolver.resolve(KernelQuery("k000", **cell))
            applying = [x for x in kernel.rules
                        if all(c.contains(cell[a]) for a, c in x.conditions.items() if a in cell)]
            expected = [x.id for x in applying if x.effect == "exclude"]
            listed = [x.rule_id for x in r.reasons if x.kind == "exclude"]
            assert listed == ([] if r.verdict is Verdict.SUPPORTED else expected)
            seen += len(listed)
    assert seen > 100  # the layout is dense: many exclusions were listed


# --------------------------------------------------------------------------------------------------
# Python-side value types: a disguised value answers as the plain one, or is refused, never silently


def _disguise(value: AxisValue, how: int) -> object:
    """``value`` as one of the Python values that stand for it (see conftest.disguises)."""
    found = disguises(value)
    return found[how % len(found)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_disguised_values_answer_exactly_as_plain_values(
    small: capmatrix.Matrix, data: st.DataObject
) -> None:
    """Over the small matrix's whole universe: every kernel and role answers a query of disguised
    values (StrEnum and (str, Enum) members, str/int subclasses, IntEnum) exactly as the plain query,
    with no value reported outside the universe."""
    plain: dict[str, Any] = {
        name: data.draw(st.sampled_from(axis.known or (True,)), label=name)
        for name, axis in small.axes.items()
    }
    how = data.draw(st.integers(0, 5), label="disguise")
    disguised: dict[str, Any] = {name: _disguise(value, how) for name, value in plain.items()}
    for kernel in small.kernels:
        a = resolve(KernelQuery(kernel, **plain), small)
        b = resolve(KernelQuery(kernel, **disguised), small)
        assert a.verdict is b.verdict
        assert b.outside == ()
        assert a.values == b.values
    a_sel = select("gen", KernelQuery(**plain), small)
    b_sel = select(str_enum("GEN", "gen"), KernelQuery(**disguised), small)  # type: ignore[arg-type]
    assert (a_sel.kernel, a_sel.verdict) == (b_sel.kernel, b_sel.verdict)


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        ({"sm": True}, "axis 'sm' is int; got True"),  # bool is not an int axis value
        ({"causal": 1}, "axis 'causal' is bool; got 1"),  # nor an int a bool one
        ({"causal": int_enum("T", 1)}, "axis 'causal' is bool; got 1"),
        ({"attention": int_enum("G", 1)}, "is not a value of axis 'attention'"),
        ({"sm": str_enum("S", "90")}, "axis 'sm' is int; got '90'"),
    ],
)
def test_type_confusion_is_refused_after_normalising(
    small: capmatrix.Matrix, axes: dict[str, Any], message: str
) -> None:
    with pytest.raises(capmatrix.InvalidQuery, match=message):
        resolve(KernelQuery("xqa", **axes), small)


def test_forget_drops_every_memo_and_answers_alike() -> None:
    """Resolver.forget (for measuring first answers): nothing remembered, the same answers after."""
    matrix = capmatrix.load()
    resolver = compile_matrix(matrix)
    query = KernelQuery("xqa", model="deepseek_v3", sm=120, spec_dec="one_model")
    before = resolver.resolve(query)
    reasons = before.reasons
    asked = KernelQuery(sm=90, head_dim=128, dtype="bf16")
    chosen = resolver.select("vllm_attention", asked)
    assert resolver._cache
    assert resolver._select_cache
    assert resolver._effective_memo
    assert resolver._shapes
    resolver.forget()
    for memo in (resolver._cache, resolver._select_cache, resolver._effective_memo, resolver._shapes):
        assert not memo
    assert all(not c.reason_cache and not c.mismatch_cache for c in resolver._kernels.compiled())
    again = resolver.resolve(query)
    assert again is not before
    assert again == before
    assert again.reasons == reasons
    assert resolver.select("vllm_attention", asked).kernel == chosen.kernel


def _naive_effective(
    matrix: capmatrix.Matrix, query: KernelQuery
) -> tuple[dict[str, Any], dict[str, str], list[str], list[str]]:
    """Effective values axis by axis, as documented: given, else the model's, else the default."""
    model = matrix.model(query.model) if query.model is not None else None
    given = dict(query.axes)
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    open_axes, outside = [], []
    for name, axis in matrix.axes.items():
        if name in given and given[name] is ANY:
            open_axes.append(name)
            continue
        if name in given:
            values[name], origins[name] = given[name], "query"
        elif model is not None and name in model.axes:
            values[name], origins[name] = model.axes[name], f"model:{model.name}"
        elif axis.default is not None:
            values[name], origins[name] = axis.default, "default"
        else:
            open_axes.append(name)
            continue
        if not any(v == values[name] and type(v) is type(values[name]) for v in axis.known):
            outside.append(name)  # not a listed value (a class representative included)
    return values, origins, open_axes, outside


def test_effective_values_by_shape_match_the_axis_by_axis_walk() -> None:
    """Values, origins (in axis order), open axes and values outside the universe, for drawn queries
    of a few shapes (the given axes, a model, ANY), each shape asked with many values."""
    matrix = capmatrix.load()
    resolver = compile_matrix(matrix)
    rng = random.Random(17)  # noqa: S311 - reproducible test data
    axes = list(matrix.axes.values())
    models = [None, *sorted(matrix.models)]
    for _ in range(40):
        shape = rng.sample(axes, rng.randint(0, 10))
        model = rng.choice(models)
        for _ in range(25):
            given: dict[str, Any] = {}
            for axis in shape:
                r = rng.random()
                if r < 0.1:
                    given[axis.name] = ANY
                elif r < 0.2 and str(axis.type) == "int":
                    low = -7 if axis.minimum is None else axis.minimum
                    given[axis.name] = rng.choice([v for v in (-7, 3, 1000, 72) if v >= low])
                else:
                    given[axis.name] = rng.choice(axis.values)
            query = KernelQuery(None, model=model, **given)
            values, origins, open_axes, outside = _naive_effective(matrix, query)
            got = resolver._effective(query)
            assert list(got[0].items()) == list(values.items())
            assert [(k, type(v)) for k, v in got[0].items()] == [(k, type(v)) for k, v in values.items()]
            assert list(got[1].items()) == list(origins.items())
            assert (got[2], got[3]) == (open_axes, outside)
            assert [i is None for i in got[4]] == [a.name not in values for a in axes]
            assert resolver.effective_values(query) == (values, origins, open_axes)


# --------------------------------------------------------------------------------------------------
# Engine vocabularies: an answer speaks only of the axes its kernel reads


def _scoped(matrix: capmatrix.Matrix, scope: str) -> set[str]:
    return {name for name, axis in matrix.axes.items() if axis.scope == scope}


def test_the_seed_answer_names_no_vllm_axis_and_a_vllm_answer_no_trtllm_axis() -> None:
    matrix = capmatrix.load()
    vllm, trtllm = _scoped(matrix, "vllm"), _scoped(matrix, "tensorrt_llm")
    assert vllm
    assert trtllm
    seed = capmatrix.resolve(KernelQuery("xqa", sm=120, model="llama", spec_dec="one_model"), matrix)
    assert seed
    named = {r.axis for r in seed.explain(closest=64) if r.axis is not None}
    named |= {a for r in seed.explain(closest=64) for a in vllm if a in r.message}
    assert not named & vllm
    from capmatrix.engine.vllm import NoValidBackend, select_backend

    with pytest.raises(NoValidBackend) as info:
        select_backend(capability=(8, 0), head_size=576, dtype="fp32", kv_cache_dtype="fp8",
                       block_size=None, use_mla=True, matrix=matrix)
    text = " ".join(m for reasons in info.value.reasons.values() for m in reasons) + str(info.value)
    assert info.value.reasons
    assert not [a for a in trtllm if a in text]


def test_compiled_order_and_derived_lookups_equal_the_models_reading() -> None:
    """``Resolver.order_for`` / ``derived_value`` against ``Role.order_for`` / ``derived_values`` on the
    shipped matrix, over random queries (listed and unlisted values, axes left open)."""
    matrix = capmatrix.load()
    resolver = compile_matrix(matrix)
    rng = random.Random(7)  # noqa: S311 - a seeded sample, not a secret
    roles = [r for r in matrix.roles.values() if r.orders] + [next(r for r in matrix.roles.values()
                                                                     if not r.orders)]
    for _ in range(300):
        axes: dict[str, Any] = {}
        for name, axis in matrix.axes.items():
            if rng.random() < 0.3:
                continue  # left open
            value = rng.choice(axis.known) if axis.known else axis.default
            if axis.type.value == "int" and rng.random() < 0.2 and isinstance(value, int):
                value += rng.choice((1, 3, 7))  # a value no list names
            axes[name] = value
        query = KernelQuery(**axes)
        values = resolver.derived_values(query)
        for role in roles:
            assert resolver.order_for(role.name, query) == role.order_for(values), (role.name, axes)
        for name in matrix.derived:
            assert resolver.derived_value(query, name) == values.get(name), (name, axes)
    with pytest.raises(capmatrix.InvalidQuery, match="role"):
        resolver.order_for("no_such_role", KernelQuery())
    with pytest.raises(capmatrix.InvalidQuery, match="derived axis"):
        resolver.derived_value(KernelQuery(), "no_such_axis")


def test_a_condition_on_an_axis_the_matrix_lacks_narrows_nothing() -> None:
    """A hand-built matrix may name an axis it does not have: the rule's box ignores it, as before."""
    m = capmatrix.load()
    kernel = m.kernels["xqa"]
    rule = kernel.rules[0]
    stray = next(iter(rule.conditions.values()))
    odd = dataclasses.replace(rule, conditions={**rule.conditions, "no_such_axis": stray})
    built = dataclasses.replace(m, kernels={**m.kernels, "xqa": dataclasses.replace(
        kernel, rules=(odd, *kernel.rules[1:]))}, _compiled=None)
    ours, theirs = compile_matrix(built)._kernels["xqa"], m._compiled._kernels["xqa"]
    assert ours.boxes == theirs.boxes
    assert ours.by_value == theirs.by_value
    assert ours.constrained == theirs.constrained
    query = KernelQuery("xqa", sm=120, model="llama", spec_dec="one_model")
    assert resolve(query, built).verdict is resolve(query, m).verdict is Verdict.SUPPORTED


@pytest.mark.parametrize(("axis", "value"), [("head_dim", 0), ("head_dim", -64), ("beam_width", 0),
                                            ("tokens_per_block", -16), ("q_per_kv", 0), ("sm", 9)])
def test_an_int_outside_the_axis_range_is_refused(axis: str, value: int) -> None:
    """``min`` in axes.yaml: no head size, block size, beam width or group below 1, no sm below 10."""
    matrix = capmatrix.load()
    low = matrix.axes[axis].minimum
    assert low is not None
    assert value < low
    with pytest.raises(InvalidQuery, match=f"axis '{axis}' takes ints >= {low}; got {value}"):
        capmatrix.resolve(KernelQuery("xqa", model="llama", **{axis: value}), matrix)
    # the bound itself is an input (answered, listed or not)
    capmatrix.resolve(KernelQuery("xqa", model="llama", **{axis: low}), matrix)


def test_no_class_representative_lies_outside_the_axis_range() -> None:
    for axis in capmatrix.load().axes.values():
        ints = [v for v in axis.values if type(v) is int]
        if axis.minimum is not None:
            assert all(v >= axis.minimum for v in ints), axis.name
        if axis.maximum is not None:
            assert all(v <= axis.maximum for v in ints), axis.name
