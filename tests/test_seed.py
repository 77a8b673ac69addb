"""The seed bug, pinned: XQA spec-dec on SM120/SM121 works for GQA models and not for MLA models.

PR NVIDIA/TensorRT-LLM#10765 ("XQA kernels are only unavailable on sm120 if MLA is being used")
fixed a release that disabled XQA spec-dec mode on SM120 for every model. These tests hold the
shipped matrix to the fixed behaviour, through the Python API and through the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import capmatrix
from capmatrix import KernelQuery, Verdict
from capmatrix.cli import main

SEED_RULE = "xqa.sm12x_mla_spec_dec"
XQA_FILE = Path(__file__).resolve().parent.parent / "capabilities" / "kernels" / "xqa.yaml"


def _declared_line(rule_id: str) -> int:
    """The 1-based line of ``- id: <rule_id>`` in xqa.yaml, read from the file itself."""
    for number, text in enumerate(XQA_FILE.read_text(encoding="utf-8").splitlines(), start=1):
        if text.strip() == f"- id: {rule_id}":
            return number
    raise AssertionError(f"{rule_id} is not declared in {XQA_FILE}")


@pytest.mark.parametrize("sm", [80, 90, 120, 121])
@pytest.mark.parametrize("spec_dec", ["one_model", "two_model"])
def test_xqa_spec_dec_is_supported_for_llama(sm: int, spec_dec: str) -> None:
    r = capmatrix.resolve(KernelQuery("xqa", sm=sm, model="llama", spec_dec=spec_dec))
    assert r.verdict is Verdict.SUPPORTED
    assert bool(r)
    assert SEED_RULE not in r.rules
    # the values really came from the model: GQA with a group of 4, BF16
    assert r.values["attention"] == "gqa"
    assert r.origins["attention"] == "model:llama"
    assert r.values["q_per_kv"] == 4


@pytest.mark.parametrize("sm", [120, 121])
@pytest.mark.parametrize("spec_dec", ["one_model", "two_model"])
def test_xqa_spec_dec_is_unsupported_for_deepseek_v3(sm: int, spec_dec: str) -> None:
    r = capmatrix.resolve(KernelQuery("xqa", sm=sm, model="deepseek_v3", spec_dec=spec_dec))
    assert r.verdict is Verdict.UNSUPPORTED
    assert not r
    excluded = [x for x in r.reasons if x.kind == "exclude"]
    assert [x.rule_id for x in excluded] == [SEED_RULE]
    (reason,) = excluded
    assert reason.path is not None
    assert Path(reason.path).as_posix().endswith("capabilities/kernels/xqa.yaml")
    assert reason.line == _declared_line(SEED_RULE)
    assert reason.source is not None
    assert "10765" in reason.source


@pytest.mark.parametrize("sm", [120, 121])
def test_the_exclusion_alone_decides_fp8_deepseek(sm: int) -> None:
    """With FP8 Q and KV the XQA-MLA kernel exists on SM12x; only spec-dec is taken away."""
    axes = {"dtype": "fp8", "kv_cache_dtype": "fp8"}
    plain = capmatrix.resolve(
        KernelQuery("xqa", sm=sm, model="deepseek_v3", spec_dec="none", **axes)
    )
    assert plain.verdict is Verdict.SUPPORTED
    assert plain.rules == ("xqa.mla_sm12x",)
    spec = capmatrix.resolve(
        KernelQuery("xqa", sm=sm, model="deepseek_v3", spec_dec="one_model", **axes)
    )
    assert spec.verdict is Verdict.UNSUPPORTED
    assert [x.rule_id for x in spec.reasons if x.kind == "exclude"] == [SEED_RULE]


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
    seed = [r for r in reasons if r.get("rule") == SEED_RULE]
    assert seed
    assert seed[0]["kind"] == "exclude"
    assert str(seed[0]["file"]).endswith("capabilities/kernels/xqa.yaml")
    assert seed[0]["line"] == _declared_line(SEED_RULE)
