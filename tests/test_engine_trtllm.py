"""capmatrix.engine.trtllm against the release-1.2 legacy predicates, exhaustively over the SM universe."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path
from typing import Any

import pytest
from scripts import load_script

import capmatrix
from capmatrix.engine import trtllm
from capmatrix.engine.trtllm import (
    GATES,
    AmbiguousGate,
    attention_need_spec_dec_mode,
    bind_spec_dec,
    effective_spec_dec_mode,
    extend_ctx,
    spec_dec_pass,
)

ROOT = Path(__file__).resolve().parent.parent


legacy = load_script("examples/legacy/trtllm_release_1_2.py")
MATRIX = capmatrix.default_matrix()
SMS = tuple(int(v) for v in MATRIX.axes["sm"].known)
#: SMs outside the declared universe: the Python code answers them too, and so must the gates' ranges.
BEYOND = (70, 130)
BACKENDS = ("trtllm", "flashinfer", "vanilla")
SPEC_DECS = ("one_model", "two_model")
BOOLS = (False, True)


def _inputs(sms: tuple[int, ...] = SMS) -> list[dict[str, Any]]:
    return [
        {
            "spec_dec": spec_dec, "sm": sm, "is_mla": is_mla, "is_draft_model": draft,
            "is_first_draft": first, "use_chain_drafter": chain, "attention_backend": backend,
        }
        for spec_dec, sm, is_mla, draft, first, chain, backend in itertools.product(
            SPEC_DECS, sms, BOOLS, BOOLS, BOOLS, BOOLS, BACKENDS
        )
    ]


def _fix_cell(kw: dict[str, Any]) -> bool:
    """The cells PR #10765 changed: SM120/121, not MLA, one-model."""
    return kw["sm"] in (120, 121) and not kw["is_mla"] and kw["spec_dec"] == "one_model"


def test_universe_is_the_release_sm_list() -> None:
    assert SMS == (75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121)


@pytest.mark.parametrize("sms", [SMS, BEYOND], ids=["universe", "beyond"])
def test_need_equals_legacy_after_everywhere(sms: tuple[int, ...]) -> None:
    rows = _inputs(sms)
    assert len(rows) == len(sms) * 2 * 2**4 * 3
    mismatches = [
        kw for kw in rows
        if attention_need_spec_dec_mode(**kw) != legacy.attention_need_spec_dec_mode_after(**kw)
    ]
    assert mismatches == []


def test_need_differs_from_legacy_before_exactly_on_the_fix() -> None:
    rows = _inputs()
    differing = [
        kw for kw in rows
        if attention_need_spec_dec_mode(**kw) != legacy.attention_need_spec_dec_mode_before(**kw)
    ]
    expected = [kw for kw in rows if _fix_cell(kw)]
    assert differing == expected
    assert len(expected) == 2 * 2**3 * 3  # sm 120/121 x draft/first/chain x backends
    # On those cells the fix turns multi-token mode on (the Llama-on-SM120 accuracy fix).
    assert all(attention_need_spec_dec_mode(**kw) for kw in expected)


def _kept(kw: dict[str, Any]) -> bool:
    """The matrix's kept-flag gate for one input (the data, not the adapter)."""
    query = capmatrix.KernelQuery(GATES["kept"], sm=kw["sm"], attention_backend=kw["attention_backend"],
                                  attention="mla" if kw["is_mla"] else "gqa")
    return bool(capmatrix.resolve(query))


@pytest.mark.parametrize("sms", [SMS, BEYOND], ids=["universe", "beyond"])
def test_effective_is_the_need_and_the_kept_gate_everywhere(sms: tuple[int, ...]) -> None:
    """The adapter's effective flag is the need decision and the matrix's kept gate, on every input.

    Whether the gates restate the release-1.2 Python code is the data gate's question
    (capabilities/expect/legacy.yaml: xqa_spec_dec_kept), so a corrected fact fails there, with its refresh.
    """
    mismatches = [
        kw for kw in _inputs(sms)
        if effective_spec_dec_mode(**kw) != (attention_need_spec_dec_mode(**kw) and _kept(kw))
    ]
    assert mismatches == []
    assert any(effective_spec_dec_mode(**kw) for kw in _inputs(sms))


def test_effective_differs_from_before_on_the_fix_with_the_trtllm_backend() -> None:
    """Where the matrix is the fixed code, it differs from the pre-fix code exactly on the fix's cells with
    the TRTLLM backend (other backends' metadata drop the flag)."""
    after, before = legacy.effective_spec_dec_mode_after, legacy.effective_spec_dec_mode_before
    rows = [kw for kw in _inputs() if effective_spec_dec_mode(**kw) == after(**kw)]
    differing = [kw for kw in rows if effective_spec_dec_mode(**kw) != before(**kw)]
    assert differing == [kw for kw in rows if _fix_cell(kw) and kw["attention_backend"] == "trtllm"]
    assert differing


@pytest.mark.parametrize("sms", [SMS, BEYOND], ids=["universe", "beyond"])
def test_extend_ctx_equals_legacy_before_and_after(sms: tuple[int, ...]) -> None:
    rows = list(itertools.product(SPEC_DECS, sms, BACKENDS))
    for spec_dec, sm, backend in rows:
        got = extend_ctx(spec_dec=spec_dec, sm=sm, attention_backend=backend)
        assert got == legacy.extend_ctx_after(spec_dec=spec_dec, sm=sm, attention_backend=backend)
        assert got == legacy.extend_ctx_before(spec_dec=spec_dec, sm=sm, attention_backend=backend)


def test_truth_table_rows_of_the_seed_fix() -> None:
    base: dict[str, Any] = {"is_draft_model": False, "is_first_draft": False, "use_chain_drafter": False,
            "attention_backend": "trtllm"}
    # Llama (GQA) one-model on SM120 and SM121: multi-token XQA after the fix.
    for sm in (120, 121):
        assert effective_spec_dec_mode(spec_dec="one_model", sm=sm, is_mla=False, **base)
        assert not attention_need_spec_dec_mode(spec_dec="one_model", sm=sm, is_mla=True, **base)
    # SM100/103: asked for, masked off, trtllm-gen takes the query (SM110, as release 1.2's Python says, is
    # an expectation case: capabilities/expect/seed.yaml).
    for sm in (100, 103):
        assert attention_need_spec_dec_mode(spec_dec="one_model", sm=sm, is_mla=False, **base)
        assert not effective_spec_dec_mode(spec_dec="one_model", sm=sm, is_mla=False, **base)
    # Two-model on SM120: the target still asks, and the drafts become context requests.
    assert attention_need_spec_dec_mode(spec_dec="two_model", sm=120, is_mla=False, **base)
    assert extend_ctx(spec_dec="two_model", sm=120, attention_backend="trtllm")
    assert not extend_ctx(spec_dec="two_model", sm=90, attention_backend="trtllm")
    assert not extend_ctx(spec_dec="one_model", sm=120, attention_backend="flashinfer")


@pytest.mark.parametrize("gate_name", ["before", "after"])
def test_gate_resolution_over_axes_matches_the_compare_legacy_predicates(gate_name: str) -> None:
    predicate = getattr(legacy, f"xqa_spec_dec_mode_{gate_name}")
    axes = MATRIX.axes
    diff = []
    for sm, attention, spec_dec, backend, sd_pass in itertools.product(
        SMS, axes["attention"].values, axes["spec_dec"].values, axes["attention_backend"].values,
        axes["spec_dec_pass"].values,
    ):
        values: dict[str, Any] = {"sm": sm, "attention": attention, "spec_dec": spec_dec,
                  "attention_backend": backend, "spec_dec_pass": sd_pass}
        got = bool(capmatrix.resolve(capmatrix.KernelQuery(GATES["need"], **values)))
        if got != predicate(**values):
            diff.append(values)
    if gate_name == "after":
        assert diff == []
    else:
        assert diff
        assert all(
            d["sm"] in (120, 121) and d["attention"] != "mla" and d["spec_dec"] == "one_model"
            for d in diff
        )
        assert len(diff) == 2 * 3 * 3 * 3  # sm x non-MLA types x backends x passes


def test_spec_dec_pass_mapping() -> None:
    assert spec_dec_pass(is_draft_model=False, is_first_draft=True, use_chain_drafter=True) == "target"
    assert (
        spec_dec_pass(is_draft_model=True, is_first_draft=True, use_chain_drafter=True)
        == "first_chain_draft"
    )
    assert spec_dec_pass(is_draft_model=True, is_first_draft=True, use_chain_drafter=False) == "draft"
    assert spec_dec_pass(is_draft_model=True, is_first_draft=False, use_chain_drafter=True) == "draft"


def test_bound_decisions_are_plain_dict_lookups() -> None:
    d = bind_spec_dec(spec_dec="two_model", sm=90, is_mla=False, is_draft_model=True,
                      use_chain_drafter=True, attention_backend="trtllm")
    assert d.need.__self__ is d.need_table  # type: ignore[attr-defined]
    assert d.effective.__self__ is d.effective_table  # type: ignore[attr-defined]
    assert d.need_table == {False: False, True: True}
    assert d.effective_table == {False: False, True: True}
    assert d.extend_ctx is False
    assert d.kept is True
    assert d.need_static is None  # the first chain-draft step differs from later draft steps
    target = bind_spec_dec(spec_dec="two_model", sm=90, is_mla=False, is_draft_model=False,
                           use_chain_drafter=True, attention_backend="trtllm")
    assert target.need_static is True
    assert target.effective_static is True
    assert d.need_decision.kernel == GATES["need"]
    reasons = d.need_decision.explain(True).rules
    assert "trtllm_spec_dec_mode.two_model" in reasons


def test_bound_decision_explains_the_seed_fix() -> None:
    d = bind_spec_dec(spec_dec="one_model", sm=121, is_mla=True, is_draft_model=False,
                      use_chain_drafter=False, attention_backend="trtllm")
    assert d.need_table == {False: False, True: False}
    assert "trtllm_spec_dec_mode.mla_sm12x_one_model" in d.need_decision.explain(False).rules


def test_unknown_backend_is_a_located_query_error() -> None:
    with pytest.raises(capmatrix.InvalidQuery) as info:
        attention_need_spec_dec_mode(spec_dec="one_model", sm=90, is_mla=False,
                                     is_draft_model=False, is_first_draft=False,
                                     use_chain_drafter=False, attention_backend="TRTLLM")
    assert "attention_backend" in str(info.value)


def test_gate_that_splits_non_mla_types_is_refused(tmp_path: Path) -> None:
    caps = tmp_path / "capabilities"
    caps.mkdir()
    (caps / "axes.yaml").write_text((ROOT / "capabilities" / "axes.yaml").read_text())
    (caps / "gates.yaml").write_text(
        "kernels:\n"
        "  trtllm_spec_dec_mode:\n"
        "    kind: gate\n"
        "    description: splits gqa from mha\n"
        "    rules:\n"
        "      - id: g.gqa\n"
        "        grant: {attention: gqa}\n"
        "        reason: test\n"
        "        source: test\n"
        "        status: untested\n"
        "  trtllm_extend_ctx:\n"
        "    kind: gate\n"
        "    description: never on\n"
        "    rules:\n"
        "      - id: e.none\n"
        "        grant: {spec_dec: none}\n"
        "        reason: test\n"
        "        source: test\n"
        "        status: untested\n"
        "  trtllm_spec_dec_kept:\n"
        "    kind: gate\n"
        "    engine: tensorrt_llm\n"
        "    description: always on\n"
        "    rules:\n"
        "      - id: k.all\n"
        "        grant: {attention_backend: [trtllm, flashinfer, vanilla]}\n"
        "        reason: test\n"
        "        source: test\n"
        "        status: untested\n"
    )
    m = capmatrix.load(caps)
    with pytest.raises(AmbiguousGate) as info:
        bind_spec_dec(spec_dec="one_model", sm=90, is_mla=False, is_draft_model=False,
                      use_chain_drafter=False, attention_backend="trtllm", matrix=m)
    assert info.value.gate == "trtllm_spec_dec_mode"
    assert info.value.attentions == ("mha", "gqa", "mqa")
    d = bind_spec_dec(spec_dec="one_model", sm=90, is_mla=True, is_draft_model=False,
                      use_chain_drafter=False, attention_backend="trtllm", matrix=m)
    assert d.need_table == {False: False, True: False}


def test_module_cache_follows_the_default_matrix() -> None:
    kw: dict[str, Any] = {"spec_dec": "one_model", "sm": 120, "is_mla": False, "is_draft_model": False,
          "is_first_draft": False, "use_chain_drafter": False, "attention_backend": "trtllm"}
    assert attention_need_spec_dec_mode(**kw)
    first = trtllm._cache[("one_model", 120, False, False, False, "trtllm")]
    assert attention_need_spec_dec_mode(**kw)
    assert trtllm._cache[("one_model", 120, False, False, False, "trtllm")] is first


# --------------------------------------------------------------------------------------------------
# No literals in the decisions' conditionals

def _conditional_nodes(tree: ast.AST) -> list[ast.AST]:
    out: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)):
            out.append(node.test)
        elif isinstance(node, (ast.BoolOp, ast.Compare)) or (
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
        ):
            out.append(node)
        elif isinstance(node, ast.comprehension):
            out.extend(node.ifs)
    return out


def _forbidden_constants(source: str) -> list[tuple[int, object]]:
    names = {str(v) for v in MATRIX.axes["attention"].values} | set(MATRIX.kernels)
    found: list[tuple[int, object]] = []
    for cond in _conditional_nodes(ast.parse(source)):
        for node in ast.walk(cond):
            if not isinstance(node, ast.Constant):
                continue
            value = node.value
            if (isinstance(value, int) and not isinstance(value, bool)) or (
                isinstance(value, str) and value in names
            ):
                found.append((node.lineno, value))
    return found


def test_trtllm_module_has_no_literals_in_its_conditionals() -> None:
    source = (ROOT / "capmatrix" / "engine" / "trtllm.py").read_text()
    assert _forbidden_constants(source) == []


def test_the_literal_scan_catches_the_legacy_code() -> None:
    source = (ROOT / "examples" / "legacy" / "trtllm_release_1_2.py").read_text()
    found = {value for _line, value in _forbidden_constants(source)}
    assert {100, 120, 121, "mla"} <= found


# --------------------------------------------------------------------------------------------------
# xqa_plan: the release's gates and the XQA kernel together


def test_xqa_plan_llama_one_model_sm12x_runs_multi_token() -> None:
    for sm in (120, 121):
        plan = trtllm.xqa_plan(sm=sm, spec_dec="one_model", model="llama")
        assert plan
        assert (plan.multi_token, plan.context) == (True, False)
        assert plan.kernel.values["spec_dec"] == "one_model"


def test_xqa_plan_shows_the_release_asking_for_a_missing_kernel() -> None:
    """Qwen2 (group 7) on SM120: release 1.2 asks for multi-token mode, and no XQA kernel serves it."""
    plan = trtllm.xqa_plan(sm=120, spec_dec="one_model", model="qwen2")
    assert plan.multi_token
    assert not plan.runs
    assert plan.kernel.verdict is capmatrix.Verdict.UNSUPPORTED


def test_xqa_plan_two_model_sm12x_relabels_drafts_as_context() -> None:
    plan = trtllm.xqa_plan(sm=120, spec_dec="two_model", model="llama")
    assert plan.context
    assert not plan.runs
    assert plan.gates["extend_ctx"].rules == ("trtllm_extend_ctx.two_model_sm12x",)


def test_xqa_plan_without_spec_dec_is_the_kernel_answer() -> None:
    plan = trtllm.xqa_plan(sm=90, spec_dec="none", model="llama", kv_cache_dtype="fp8")
    assert plan.gates == {}
    assert not plan.multi_token
    direct = capmatrix.resolve(capmatrix.KernelQuery("xqa", sm=90, model="llama", spec_dec="none",
                                                     kv_cache_dtype="fp8"))
    assert plan.kernel.verdict is direct.verdict is capmatrix.Verdict.SUPPORTED
    assert plan.kernel.rules == direct.rules


def test_xqa_plan_sm100_never_runs_xqa() -> None:
    plan = trtllm.xqa_plan(sm=100, spec_dec="one_model", model="llama")
    assert not plan.multi_token  # trtllm_spec_dec_kept masks the flag off on trtllm-gen SMs
    assert not plan.runs
    assert "xqa.sm100f_trtllm_gen" in plan.kernel.rules
