"""The seed bug, pinned: XQA spec-dec on SM120/SM121 works for GQA models and not for MLA models.

PR NVIDIA/TensorRT-LLM#10765 ("XQA kernels are only unavailable on sm120 if MLA is being used")
fixed a release that disabled XQA spec-dec mode on SM120 for every model. The matrix keeps the two
halves apart: the kernel (xqa) says what XQA can serve, the release-1.2 gate
(trtllm_spec_dec_mode) says whether the engine asks for multi-token mode, and
capmatrix.engine.trtllm.xqa_plan combines them. These tests hold the shipped matrix to the fixed
behaviour, through the Python API and through the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import capmatrix
from capmatrix import KernelQuery, Verdict
from capmatrix.authoring.cli import main
from capmatrix.engine.trtllm import xqa_plan

#: The kernel fact that keeps BF16 MLA off XQA, and the engine switch of the seed fix.
MLA_RULE = "xqa.mla_fp8_only"
SEED_GATE_RULE = "trtllm_spec_dec_mode.mla_sm12x_one_model"
KERNELS = Path(__file__).resolve().parent.parent / "capabilities" / "kernels"
XQA_FILE = KERNELS / "xqa.yaml"
GATES_FILE = KERNELS / "trtllm_gates.yaml"


def _declared_line(rule_id: str, path: Path = XQA_FILE) -> int:
    """The 1-based line of ``- id: <rule_id>`` in a kernel file, read from the file itself."""
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if text.strip() == f"- id: {rule_id}":
            return number
    raise AssertionError(f"{rule_id} is not declared in {path}")


@pytest.mark.parametrize("sm", [80, 90, 120, 121])
@pytest.mark.parametrize("spec_dec", ["one_model", "two_model"])
def test_xqa_spec_dec_is_supported_for_llama(sm: int, spec_dec: str) -> None:
    r = capmatrix.resolve(KernelQuery("xqa", sm=sm, model="llama", spec_dec=spec_dec))
    assert r.verdict is Verdict.SUPPORTED
    assert bool(r)
    assert "xqa.hmma_multi_token" in r.rules
    # the values really came from the model: GQA with a group of 4, BF16
    assert r.values["attention"] == "gqa"
    assert r.origins["attention"] == "model:llama"
    assert r.values["q_per_kv"] == 4


@pytest.mark.parametrize("sm", [120, 121])
def test_release_runs_xqa_multi_token_for_llama_one_model(sm: int) -> None:
    """The user's question, gate and kernel together: yes, as multi-token queries."""
    plan = xqa_plan(sm=sm, spec_dec="one_model", model="llama")
    assert plan.runs
    assert plan.multi_token
    assert not plan.context
    assert plan.gates["need"].rules == ("trtllm_spec_dec_mode.one_model",)
    assert "xqa.hmma_multi_token" in plan.kernel.rules


@pytest.mark.parametrize("sm", [120, 121])
@pytest.mark.parametrize("spec_dec", ["one_model", "two_model"])
def test_xqa_spec_dec_is_unsupported_for_deepseek_v3(sm: int, spec_dec: str) -> None:
    """DeepSeek-V3 as shipped (BF16): no XQA kernel serves MLA with BF16 queries, and the reason says MLA."""
    r = capmatrix.resolve(KernelQuery("xqa", sm=sm, model="deepseek_v3", spec_dec=spec_dec))
    assert r.verdict is Verdict.UNSUPPORTED
    assert not r
    excluded = [x for x in r.reasons if x.kind == "exclude"]
    assert [x.rule_id for x in excluded] == [MLA_RULE]
    (reason,) = excluded
    assert reason.path is not None
    assert Path(reason.path).as_posix().endswith("capabilities/kernels/xqa.yaml")
    assert reason.line == _declared_line(MLA_RULE)
    assert "MLA" in reason.message
    plan = xqa_plan(sm=sm, spec_dec=spec_dec, model="deepseek_v3")
    assert not plan.runs
    assert [x.rule_id for x in plan.kernel.reasons if x.kind == "exclude"] == [MLA_RULE]


@pytest.mark.parametrize("sm", [120, 121])
def test_the_gate_alone_keeps_fp8_deepseek_out_of_multi_token_mode(sm: int) -> None:
    """With FP8 Q and KV the XQA-MLA kernel serves MTP queries on SM12x; release 1.2 does not ask."""
    axes = {"dtype": "fp8", "kv_cache_dtype": "fp8"}
    for spec_dec in ("none", "one_model", "two_model"):
        kernel = capmatrix.resolve(
            KernelQuery("xqa", sm=sm, model="deepseek_v3", spec_dec=spec_dec, **axes)
        )
        assert kernel.verdict is Verdict.SUPPORTED, spec_dec
        assert kernel.rules == ("xqa.mla_sm12x",)
    gate = capmatrix.resolve(
        KernelQuery("trtllm_spec_dec_mode", sm=sm, model="deepseek_v3", spec_dec="one_model")
    )
    assert gate.verdict is Verdict.UNSUPPORTED
    excluded = [x for x in gate.reasons if x.kind == "exclude"]
    assert [x.rule_id for x in excluded] == [SEED_GATE_RULE]
    assert excluded[0].line == _declared_line(SEED_GATE_RULE, GATES_FILE)
    assert excluded[0].source is not None
    assert "10765" in excluded[0].source
    plan = xqa_plan(sm=sm, spec_dec="one_model", model="deepseek_v3", dtype="fp8", kv_cache_dtype="fp8")
    assert not plan.multi_token
    assert plan.kernel.values["spec_dec"] == "none"
    assert plan.runs  # XQA-MLA still serves the single-token queries it is handed


def test_sm120_and_sm121_answer_alike() -> None:
    """SM121 (GB10) is never left behind where SM120 is listed."""
    for model in ("llama", "mistral", "qwen2", "gemma", "deepseek_v3", "kimi_k2"):
        for spec_dec in ("none", "one_model", "two_model"):
            a = capmatrix.resolve(KernelQuery("xqa", sm=120, model=model, spec_dec=spec_dec))
            b = capmatrix.resolve(KernelQuery("xqa", sm=121, model=model, spec_dec=spec_dec))
            assert a.verdict is b.verdict, (model, spec_dec)
            assert a.rules == b.rules, (model, spec_dec)


def _run_cli(capsys: pytest.CaptureFixture[str], model: str) -> tuple[int, dict[str, object]]:
    argv = ["query", "xqa", "--sm", "120", "--model", model, "--spec-dec", "one_model", "--json"]
    status = main(argv)
    out = capsys.readouterr().out
    data = json.loads(out)
    assert isinstance(data, dict)
    return status, data


def test_cli_llama_is_supported(capsys: pytest.CaptureFixture[str]) -> None:
    status, data = _run_cli(capsys, "llama")
    assert status == 0
    assert data["verdict"] == "supported"
    assert data["kernel"] == "xqa"
    reasons = data["reasons"]
    assert isinstance(reasons, list)
    assert any(r.get("kind") == "grant" for r in reasons)


def test_cli_deepseek_v3_is_unsupported(capsys: pytest.CaptureFixture[str]) -> None:
    status, data = _run_cli(capsys, "deepseek_v3")
    assert status == 1
    assert data["verdict"] == "unsupported"
    reasons = data["reasons"]
    assert isinstance(reasons, list)
    mla = [r for r in reasons if r.get("rule") == MLA_RULE]
    assert mla
    assert mla[0]["kind"] == "exclude"
    assert str(mla[0]["file"]).endswith("capabilities/kernels/xqa.yaml")
    assert mla[0]["line"] == _declared_line(MLA_RULE)
    assert "MLA" in str(mla[0]["message"])
