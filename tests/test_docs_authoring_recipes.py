"""docs/authoring.md's recipes, performed on a copy of the shipped matrix."""

from __future__ import annotations

import io
import json
import shutil
from typing import TYPE_CHECKING

import pytest
import yaml
from conftest import EXHAUSTIVE, stride
from record_spread import spread
from test_authoring_gate import FAST, ROOT, copy_checkout

import capmatrix
from capmatrix.authoring.cli import run
from capmatrix.authoring.gate import run_gate
from capmatrix.authoring.loader import default_path
from capmatrix.engine import sglang
from capmatrix.engine.trtllm import bind_spec_dec

if TYPE_CHECKING:
    from pathlib import Path

    from capmatrix.authoring.gate import GateReport


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_a_new_engine_release_is_a_data_change(tmp_path: Path) -> None:
    """SGLang 0.5.24: one entry in releases.yaml and `since:` on what changed; 0.5.23 answers as before."""
    root = tmp_path / "capabilities"
    shutil.copytree(default_path(), root)
    releases = root / "releases.yaml"
    text = releases.read_text(encoding="utf-8")
    anchor = "        source: PyPI sglang 0.5.23 (sglang/_version.py has no commit id)\n"
    assert text.count(anchor) == 1
    releases.write_text(text.replace(anchor, anchor + (
        "      - version: 0.5.24\n"
        "        pins: {wheel: sglang-0.5.24-cp311-cp311-manylinux_2_34_x86_64.whl}\n"
        "        source: a test release\n")), encoding="utf-8")
    kernels = root / "kernels" / "sglang_attention.yaml"
    text = kernels.read_text(encoding="utf-8")
    # 0.5.24 (in this test) drops flashmla on SM8x: the C112 finding of 0.5.23 is fixed there.
    anchor = "      - id: sglang_flashmla.base\n"
    assert text.count(anchor) == 1
    kernels.write_text(text.replace(anchor, (
        "      - id: sglang_flashmla.sm8x_dropped\n"
        '        exclude: {sm: "[80, 89]"}\n'
        "        since: 0.5.24\n"
        "        reason: a test release refuses flashmla below SM90\n"
        "        source: a test release\n"
        "        status: untested\n") + anchor), encoding="utf-8")
    assert _cli("validate", str(root))[0] == 0
    matrix = capmatrix.load(root)
    assert matrix.releases["sglang"].newest == "0.5.24"
    code, out, err = _cli("diff", "--engine", "sglang", "0.5.23", "0.5.24", "--matrix", str(root), "--json")
    assert code == 0, err
    data = json.loads(out)
    changed = [k["kernel"] for k in data["kernels"] if k["change"] != "equivalent"]
    assert changed == ["sglang_flashmla"]
    (lost,) = data["kernels"][[k["kernel"] for k in data["kernels"]].index("sglang_flashmla")]["lost"]
    assert lost["region"]["sm"][0] == 80
    # 0.5.23's answers are the shipped matrix's, cell for cell, on a spread of queries.
    shipped = capmatrix.load()
    for arch in ("DeepseekV3ForCausalLM", "LlamaForCausalLM", "GptOssForCausalLM"):
        model = sglang.model_from_hf_config({"architectures": [arch], "model_type": "x"})
        for capability in ((8, 0), (8, 9), (9, 0), (10, 0), (12, 0)):
            old = sglang.resolve(capability=capability, model=model, matrix=shipped)
            assert sglang.resolve(capability=capability, model=model, matrix=matrix, version="0.5.23") == old
    # The release's finding is gone in 0.5.24 and said to hold in 0.5.23 only.
    _code, out, _ = _cli("check", str(root), "--no-baseline")
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "gate sglang_flashmla admits" in line)
    assert "    releases: sglang 0.5.23 (not in 0.5.24)" in lines[at + 1: at + 4]


# ---- the recipes of docs/authoring.md, each performed on a copy of the checkout and run through the gate

def _regenerate(root: Path) -> None:
    """`make docs` in the copy: the support-matrix pages and the findings page."""
    import subprocess
    import sys

    assert _cli("render", "--matrix", str(root), "--out-dir", str(root.parent / "docs"))[0] == 0
    done = subprocess.run([sys.executable, str(root.parent / "tools/render_findings.py")], cwd=root.parent,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _insert(path: Path, anchor: str, text: str, *, after: bool = True) -> None:
    body = path.read_text(encoding="utf-8")
    assert body.count(anchor) == 1, anchor
    path.write_text(body.replace(anchor, anchor + text if after else text + anchor), encoding="utf-8")


def _gate(root: Path, *oracles: str) -> GateReport:
    return run_gate(capmatrix.load(root), only=oracles or FAST)


def _failing(report: GateReport) -> dict[str, set[str]]:
    return {r.item: {d.refresh for d in r.disagreements} for r in report.failed}


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_recipe_a_new_gpu(tmp_path: Path) -> None:
    """A GPU of a known SM: one entry in gpus.yaml, then `make docs`; the gate is green after."""
    root = copy_checkout(tmp_path)
    _insert(root / "gpus.yaml", "gpus:\n", (
        "  rtx_pro_4500_blackwell:\n"
        "    name: RTX PRO 4500 Blackwell\n"
        "    sm: 120\n"
        "    source: a test GPU\n"))
    assert _cli("validate", str(root))[0] == 0
    code, out, _ = _cli("query", "xqa", "--gpu", "rtx pro 4500 blackwell", "--model", "llama",
                        "--spec-dec", "one_model", "--matrix", str(root))
    assert (code, out.split(":")[0]) == (0, "xqa")
    assert "supported" in out.splitlines()[0]
    _regenerate(root)
    report = _gate(root)
    assert report.exit_status() == 0, _failing(report)
    assert {r.oracle for r in report.results if r.status == "PASS"} == set(FAST)


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_recipe_a_new_model(tmp_path: Path) -> None:
    """A model: one entry in models.yaml (axes and the recorded config), an expectation case, `make docs`."""
    root = copy_checkout(tmp_path)
    _insert(root / "models.yaml", "  llama:\n", (
        "  llama_test_70b:\n"
        "    description: a test checkpoint (Llama 3 70B geometry).\n"
        "    hf_ids: [test/llama-test-70b]\n"
        "    axes: {attention: gqa, head_dim: 128, dtype: bf16, kv_cache_dtype: bf16, q_per_kv: 8}\n"
        "    hf_config:\n"
        "      {model_type: llama, num_attention_heads: 64, num_key_value_heads: 8, hidden_size: 8192,\n"
        "       torch_dtype: bfloat16}\n"
        "    source: a test model\n"
        "    recognise: model_type llama; num_key_value_heads 8 < num_attention_heads 64 -> gqa, group 8.\n"),
        after=False)
    _insert(root / "expect" / "seed.yaml", "cases:\n", (
        "  - name: the test 70B model's one-model spec-dec on SM120 runs XQA\n"
        "    kernel: xqa\n"
        "    query: {model: llama_test_70b, sm: 120, spec_dec: one_model}\n"
        "    expect: supported\n"))
    assert _cli("validate", str(root))[0] == 0
    _regenerate(root)
    report = _gate(root)
    assert report.exit_status() == 0, _failing(report)
    assert report.expect is not None
    assert any(r.case.query.get("model") == "llama_test_70b" and r.passed for r in report.expect.results)


def _keep_legacy_of(root: Path, *kernels: str) -> None:
    """The copy's legacy comparisons cut to those of ``kernels`` (``make test``; every one in ``make
    exhaustive``): each of the others runs its conditional over every cell of a gate the edit leaves alone."""
    if EXHAUSTIVE:
        return
    path = root / "expect" / "legacy.yaml"
    entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    kept = [e for e in entries["legacy"] if e["kernel"] in kernels]
    assert 0 < len(kept) < len(entries["legacy"])
    path.write_text(yaml.safe_dump({**entries, "legacy": kept}, sort_keys=False), encoding="utf-8")


@pytest.mark.no_cover  # the legacy oracle over every cell: tests/test_authoring_gate.py covers its lines
@pytest.mark.sweep
def test_recipe_a_corrected_fact_xqa_spec_dec_on_sm110(tmp_path: Path) -> None:
    """The maintainer edit of issue 45 (a): the TRT-LLM gate keeps XQA spec-dec on SM110 for non-MLA.

    The gate names the oracle that disagrees (the legacy conditional of the kept flag, which is the old
    code) with the region and how to refresh it, and the stale pages; nothing else. ``make test`` compares
    the legacy conditionals of the kept and extend_ctx gates; ``make exhaustive`` every one (the need's
    three release predicates read a gate the edit does not touch)."""
    root = copy_checkout(tmp_path)
    _keep_legacy_of(root, "trtllm_spec_dec_kept", "trtllm_extend_ctx")
    gates = root / "kernels" / "trtllm_gates.yaml"
    old = '          sm: {not: ["<100", sm_100f, sm_12x]}\n'
    body = gates.read_text(encoding="utf-8")
    assert body.count(old) == 1
    new = '          sm: {not: ["<100", sm_100f, sm_12x, 110]}\n'
    gates.write_text(body.replace(old, new), encoding="utf-8")
    _insert(gates, "      - id: trtllm_spec_dec_kept.trtllm_gen_other_sm\n", (
        "      - id: trtllm_spec_dec_kept.sm110_mla\n"
        "        exclude: {sm: 110, attention: mla}\n"
        "        reason: a test fix keeps the flag on SM110 for non-MLA models only\n"
        "        source: a test fix\n"
        "        status: untested\n"), after=False)
    assert _cli("validate", str(root))[0] == 0
    report = _gate(root, "legacy", "docs", "expect", "importers", "evidence")
    failing = _failing(report)
    kept = ("examples/legacy/trtllm_release_1_2.py:xqa_spec_dec_kept vs trtllm_spec_dec_kept "
            "(trtllm_release=1.2.0rc8,1.2.0,1.2.1)")
    assert set(failing) == {kept, "docs/support-matrix.md (capmatrix render --check)", "expectation cases"}
    (case,) = next(r for r in report.failed if r.oracle == "expect").disagreements
    assert "SM110" in case.cell
    assert case.refresh.startswith("if intended, set expect: supported in ")
    assert case.refresh.rsplit(":", 1)[0].endswith("capabilities/expect/seed.yaml")
    (legacy,) = [r for r in report.failed if r.item == kept]
    (d,) = legacy.disagreements
    assert d.cell.startswith("sm=110 and attention in {mha, gqa, mqa}")
    assert (d.oracle_says, d.matrix_says) == ("False (unsupported)", "supported")
    assert "capmatrix compare-legacy examples/legacy/trtllm_release_1_2.py:xqa_spec_dec_kept" in d.refresh
    _regenerate(root)
    # The pages are fresh now; the legacy comparison reads neither them nor the tools, so it still
    # disagrees as above (it is not run twice).
    assert set(_failing(_gate(root, "docs", "expect"))) == {"expectation cases"}
    # The engine's adapter answers the edited gate as is_mla says (no code change for a gate that tells
    # MLA from the rest).
    edited = capmatrix.load(root)
    kept_flag = {is_mla: bind_spec_dec(spec_dec="one_model", sm=110, is_mla=is_mla, is_draft_model=False,
                                       use_chain_drafter=False, attention_backend="trtllm",
                                       matrix=edited).kept for is_mla in (False, True)}
    assert kept_flag == {False: True, True: False}


@pytest.mark.sweep
def test_recipe_a_new_vllm_backend_before_flashinfer(tmp_path: Path) -> None:
    """The maintainer edit of issue 45 (b): a new vLLM backend on SM100/103, ordered before FLASHINFER.

    The gate names every oracle that disagrees: the importer that has no record of the backend, each
    recorded vLLM selection the new order changes (with the recorder's command), the stale pages."""
    grids = ["vllm_0.34.0_selection.json", "vllm_0.33.0_selection.json"]
    root = copy_checkout(tmp_path, records=grids)
    for grid in grids:  # a spread of each grid's cells (every cell in make exhaustive)
        spread(ROOT / "capabilities" / "evidence" / grid, root / "evidence", stride(8))
    _insert(root / "releases.yaml", "        - FLASHINFER\n", "        - TEST_ATTN\n")
    _insert(root / "kernels" / "vllm_attention.yaml", "  vllm_flashinfer_ts:\n", (
        "  vllm_test_attn:\n"
        "    description: a test backend of vLLM\n"
        "    engine: vllm\n"
        "    rules:\n"
        "      - id: vllm_test_attn.base\n"
        "        grant:\n"
        "          attention: [mha, gqa, mqa]\n"
        "          sm: [100, 103]\n"
        "          dtype: [fp16, bf16]\n"
        "          kv_cache_dtype: auto\n"
        "          head_dim: 128\n"
        "          use_sparse: false\n"
        "          attention_sinks: false\n"
        "        reason: a test backend\n"
        "        source: a test backend\n"
        "        status: untested\n"), after=False)
    _insert(root / "roles.yaml", '      - when: {sm: "[100, 109]", use_non_causal: false}\n', (
        "      - when: {sm: [100, 103], use_non_causal: false, use_mm_prefix: false}\n"
        "        candidates: [vllm_test_attn, vllm_flashinfer, vllm_flash_attn, vllm_triton_attn, "
        "vllm_flex_attention, vllm_turboquant]\n"), after=False)
    code, out, err = _cli("validate", str(root))
    assert code == 0, out + err
    report = run_gate(capmatrix.load(root), only=["importers", "records", "docs"], jobs=2)
    failing = _failing(report)
    assert set(failing) == {
        "tools/import_vllm_backends.py --check",
        "vllm_0.33.0_selection.json (vLLM 0.33.0 grid)", "vllm_0.34.0_selection.json (vLLM 0.34.0 grid)",
        "docs/support-matrix.md (capmatrix render --check)",
    } | ({"docs/findings.md (tools/render_findings.py --check)"} & set(failing))
    (importer,) = [r for r in report.failed if r.oracle == "importers"]
    assert importer.disagreements[0].cell == "TEST_ATTN"
    for record in (r for r in report.failed if r.oracle == "records"):
        assert all(d.refresh.startswith("re-record from vLLM ") for d in record.disagreements)
        assert all("tools/record_vllm_selection.py" in d.refresh for d in record.disagreements)
        assert record.disagreements
        assert all(d.cell.startswith(("10.0/", "10.3/")) and "TEST_ATTN" in d.matrix_says
                   for d in record.disagreements)
