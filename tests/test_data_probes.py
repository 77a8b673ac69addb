"""The kernels probed on the H200 by tools/probe_kernels.py: the matrix agrees with every recorded case."""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from scripts import load_script

import capmatrix

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "capabilities" / "evidence"
TOOL = load_script("tools/probe_kernels.py")
DEVICE = TOOL.device_module()
#: evidence file -> the kernel entry it checks.
FILES = {
    "triton_unified_attention_h200.json": "triton_unified_attention",
    "triton_mla_decode_h200.json": "triton_mla_decode",
    "flash_attn_3_h200.json": "flash_attn_3",
    "flex_attention_h200.json": "flex_attention",
    "flashinfer_fa2_h200.json": "flashinfer_fa2",
    "flashinfer_fa3_h200.json": "flashinfer_fa3",
    "flashinfer_xqa_h200.json": "flashinfer_xqa",
}
FLASHINFER = {name for name, kernel in FILES.items() if kernel.startswith("flashinfer_")}
S = "supported"


@pytest.fixture(scope="module")
def matrix() -> capmatrix.Matrix:
    return capmatrix.load()


@pytest.fixture(scope="module")
def evidence() -> dict[str, dict[str, Any]]:
    return {name: json.loads((EVIDENCE / name).read_text(encoding="utf-8")) for name in FILES}


def _verdict(matrix: capmatrix.Matrix, kernel: str, query: dict[str, Any]) -> capmatrix.Resolution:
    return capmatrix.resolve(capmatrix.KernelQuery(kernel, **query), matrix=matrix)


@pytest.mark.parametrize("name", sorted(FILES))
def test_evidence_says_which_probe_made_it(evidence: dict[str, dict[str, Any]], name: str) -> None:
    doc = evidence[name]
    assert doc["format"] == "capmatrix-kernel-probe/1"
    assert doc["kernel"] == FILES[name]
    assert doc["kernels"] == [FILES[name]]
    assert doc["probe"].startswith("tools/probe_kernels.py (")
    assert doc["environment"]["gpu"] == "NVIDIA H200"
    assert doc["environment"]["sm"] == 90
    assert doc["environment"]["torch"] == "2.11.0+cu130"
    if name in FLASHINFER:
        assert doc["environment"]["flashinfer"] == TOOL.FLASHINFER_VERSION
        assert doc["software"]["flashinfer"] == f"{TOOL.FLASHINFER_VERSION} (commit {TOOL.FLASHINFER_COMMIT})"
        assert len(doc["software"]["flashinfer_wheel_sha256"]) == 64
        assert any("bundle-flashinfer" in step for step in doc["rerun"])
    else:
        assert doc["software"]["vllm"] == f"{TOOL.VLLM_VERSION} (commit {TOOL.VLLM_COMMIT})"
        assert len(doc["software"]["vllm_wheel_sha256"]) == 64
    assert any("probe_kernels_device.py run" in step and FILES[name] in step for step in doc["rerun"])
    assert doc["setup"]["tolerance"]["max_abs_err"] == TOOL.TOLERANCE


@pytest.mark.parametrize("name", sorted(FILES))
def test_matrix_agrees_with_every_recorded_case(
    matrix: capmatrix.Matrix, evidence: dict[str, dict[str, Any]], name: str
) -> None:
    """Each case's query, resolved on its kernel: supported exactly where the kernel passed."""
    doc = evidence[name]
    assert str(matrix.kernels[doc["kernel"]].kind) == "kernel"
    disagreements = [
        (row["index"], row["outcome"], str(_verdict(matrix, doc["kernel"], row["query"]).verdict))
        for row in doc["cases"]
        if (str(_verdict(matrix, doc["kernel"], row["query"]).verdict) == S) != (row["outcome"] == "pass")
    ]
    assert disagreements == []


def test_at_least_1500_cases_over_four_kernels(evidence: dict[str, dict[str, Any]]) -> None:
    sizes = {doc["kernel"]: len(doc["cases"]) for doc in evidence.values()}
    assert sum(sizes.values()) >= 1500
    assert all(n > 100 for k, n in sizes.items() if not k.startswith("flashinfer_")), sizes
    assert all(n >= 40 for n in sizes.values()), sizes


@pytest.mark.parametrize("name", sorted(FILES))
def test_summary_counts_the_cases(evidence: dict[str, dict[str, Any]], name: str) -> None:
    doc = evidence[name]
    summary = doc["summary"]
    assert summary["cases"] == len(doc["cases"])
    assert summary["outcomes"] == dict(Counter(row["outcome"] for row in doc["cases"]))
    assert summary["off_axis_cases"] == len(doc["off_axis_cases"])
    # The follow-up cases (issue 46, written 2026-12-05, not run yet) are not in the recorded files.
    grid = {c["index"] for c in DEVICE.cases(doc["kernel"]) if "follow_up" not in c}
    recorded = {row["index"] for row in doc["cases"] + doc["off_axis_cases"]}
    assert recorded | {row["index"] for row in summary["not_run"]} == grid
    assert not recorded & {row["index"] for row in summary["not_run"]}


@pytest.mark.parametrize("name", sorted(FILES))
def test_rows_are_what_the_tool_makes_of_the_cases(evidence: dict[str, dict[str, Any]], name: str) -> None:
    """The query and the verdict of a row follow from its case and its error alone."""
    doc = evidence[name]
    for row in doc["cases"] + doc["off_axis_cases"]:
        case = row["case"]
        assert row["query"] == TOOL.query_of({**case, "family": doc["kernel"]}), row["index"]
        if row["outcome"] == "error":
            assert row["error"], row["index"]
            continue
        tol = TOOL.tolerance(doc["kernel"], case["dtype"], case["kv"])
        assert row["tolerance"] == tol
        assert (row["outcome"] == "pass") == (row["max_abs_err"] <= tol), row["index"]
        if case["sinks"] or case["window"] or case["softcap"]:
            # the feature moves the reference by several tolerances: a kernel ignoring it would fail
            assert row["feature_effect"] > 5 * tol, row["index"]


def test_fp32_tf32_kernels_are_held_to_fp16_tolerance(evidence: dict[str, dict[str, Any]]) -> None:
    """Where the Triton kernels exceed IEEE fp32's tolerance, the summary says how often."""
    for name, doc in evidence.items():
        strict = [
            row
            for row in doc["cases"] + doc["off_axis_cases"]
            if row["case"]["dtype"] == "fp32"
            and row["outcome"] != "error"
            and row["max_abs_err"]
            > TOOL.TOLERANCE["fp32"] * (TOOL.FP8_FACTOR if row["case"]["kv"] == "fp8" else 1)
        ]
        assert doc["summary"]["fp32_above_ieee_tolerance"] == len(strict), name
        if doc["kernel"] not in TOOL.TF32_FAMILIES:
            assert strict == [], name


def test_fa3_sinks_need_bf16_whatever_the_model_dtype(
    matrix: capmatrix.Matrix, evidence: dict[str, dict[str, Any]]
) -> None:
    """The off-axis FA3 rows: sinks in another dtype than the model's, which no axis expresses."""
    doc = evidence["flash_attn_3_h200.json"]
    rows = doc["off_axis_cases"]
    assert rows
    assert all(row["case"]["sink_dtype"] != row["case"]["dtype"] for row in rows)
    assert {(row["case"]["sink_dtype"], row["outcome"]) for row in rows} == {
        ("bf16", "pass"),
        ("fp32", "error"),
    }
    twins = {json.dumps(row["query"], sort_keys=True): row["outcome"] for row in doc["cases"]}
    for row in rows:
        # The matrix answers with the model-dtype sinks vLLM passes: its on-axis twin's outcome.
        twin = twins[json.dumps(row["query"], sort_keys=True)]
        assert (str(_verdict(matrix, doc["kernel"], row["query"]).verdict) == S) == (twin == "pass")


def test_verified_rules_are_confirmed_by_their_probe(
    matrix: capmatrix.Matrix, evidence: dict[str, dict[str, Any]]
) -> None:
    """A verified rule names its kernel's evidence and decides at least one recorded case its way."""
    for name, doc in evidence.items():
        kernel = matrix.kernels[doc["kernel"]]
        verified = {r.id: r for r in kernel.rules if str(r.status) == "verified"}
        assert verified, name
        for rule in verified.values():
            assert rule.verified is not None
            assert rule.verified["evidence"] == f"capabilities/evidence/{name}", rule.id
            sm = rule.conditions.get("sm")
            assert sm is None or sm.text == "90", rule.id
        confirmed: set[str] = set()
        for row in doc["cases"]:
            result = _verdict(matrix, doc["kernel"], row["query"])
            effect = "grant" if row["outcome"] == "pass" else "exclude"
            confirmed |= {r.rule_id for r in result.reasons if r.kind == effect and r.rule_id is not None}
        assert set(verified) <= confirmed, sorted(set(verified) - confirmed)


def test_reference_matches_a_brute_force_loop() -> None:
    """The float32 reference every case is compared with, against float64 loops on the CPU."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    n, length, hq, hk, d = 3, 12, 4, 2, 8
    q = torch.randn(n, hq, d, dtype=torch.float64)
    k = torch.randn(length, hk, d, dtype=torch.float64)
    v = torch.randn(length, hk, d, dtype=torch.float64)
    pos = torch.arange(length - n, length)
    sinks = torch.rand(hq, dtype=torch.float64) * 3 + 3

    def brute(window: int, cap: float, sink: Any) -> Any:
        out = torch.zeros(n, hq, d, dtype=torch.float64)
        for i in range(n):
            for h in range(hq):
                kh = h // (hq // hk)
                keys = [j for j in range(length) if j <= pos[i] and (window == 0 or j > pos[i] - window)]
                s = torch.stack([q[i, h] @ k[j, kh] * d**-0.5 for j in keys])
                if cap:
                    s = cap * torch.tanh(s / cap)
                extra = [sink[h]] if sink is not None else []
                p = torch.softmax(torch.cat([s, torch.stack(extra)]) if extra else s, dim=0)[: len(keys)]
                out[i, h] = sum(p[t] * v[j, kh] for t, j in enumerate(keys))
        return out

    for window, cap, sink in [
        (0, 0.0, None),
        (4, 0.0, None),
        (0, 2.0, None),
        (4, 0.0, sinks),
        (0, 2.0, sinks),
    ]:
        got = DEVICE.reference(
            q.float(),
            k.float(),
            v.float(),
            pos,
            length,
            scale=d**-0.5,
            window=window,
            softcap=cap,
            sinks=None if sink is None else sink.float(),
        )
        assert float((got.double() - brute(window, cap, sink)).abs().max()) < 1e-5


def _fake_wheel(path: Path, names: tuple[str, ...]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name in names:
            zf.writestr(name, f"# {name}\n")
    return path


def test_bundle_writes_the_carried_folder(tmp_path: Path) -> None:
    wheel = _fake_wheel(tmp_path / "vllm.whl", (*TOOL.WHEEL_FILES, TOOL.FA3_SO))
    dest = tmp_path / "bundle"
    manifest = TOOL.bundle(wheel, dest, with_fa3=True)
    assert set(manifest["files"]) == {*TOOL.WHEEL_FILES, TOOL.FA3_SO}
    for name in (*TOOL.WHEEL_FILES, *TOOL.STANDINS):
        assert (dest / name).is_file(), name
    assert (dest / "probe_kernels_device.py").read_bytes() == TOOL.DEVICE_SCRIPT.read_bytes()
    with zipfile.ZipFile(dest / "fa3.zip") as zf:
        assert zf.namelist() == [TOOL.FA3_SO]
    assert json.loads((dest / "manifest.json").read_text())["wheel"] == "vllm.whl"
    assert TOOL.main(["bundle", "--wheel", str(wheel), "--dest", str(tmp_path / "b2"), "--no-fa3"]) == 0
    assert not (tmp_path / "b2" / "fa3.zip").exists()


def test_bundle_refuses_a_missing_or_foreign_wheel(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"no such wheel; fetch it with: pip download vllm==0\.33\.0"):
        TOOL.bundle(tmp_path / "none.whl", tmp_path / "b", with_fa3=False)
    wheel = _fake_wheel(tmp_path / "other.whl", TOOL.WHEEL_FILES[:1])
    with pytest.raises(
        SystemExit, match=r"triton_attention_helpers\.py is missing; is this the vLLM 0\.33\.0 wheel"
    ):
        TOOL.bundle(wheel, tmp_path / "b", with_fa3=False)


def _results(folder: Path, family: str, rows: list[dict[str, Any]], env: dict[str, Any]) -> Path:
    folder.mkdir()
    (folder / f"{family}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "environment.json").write_text(json.dumps({"environment": env}))
    return folder


def test_collect_merges_runs_and_lists_what_did_not_run(tmp_path: Path) -> None:
    family = "triton_mla_decode"
    grid = DEVICE.cases(family)
    env = {"gpu": "NVIDIA H200", "sm": 90}
    first = _results(tmp_path / "a", family, [{**grid[0], "outcome": "pass", "max_abs_err": 0.001}], env)
    second = _results(
        tmp_path / "b",
        family,
        [
            {**grid[0], "outcome": "error", "error": "ignored: the first folder wins"},
            {**grid[1], "outcome": "error", "error": "RuntimeError: boom"},
        ],
        env,
    )
    manifest = {"wheel": "w.whl", "wheel_sha256": "0" * 64, "files": {}}
    doc = TOOL.collect(family, [first, second], manifest)
    assert [(r["index"], r["outcome"]) for r in doc["cases"]] == [(0, "pass"), (1, "error")]
    assert len(doc["summary"]["not_run"]) == len(grid) - 2
    assert doc["summary"]["outcomes"] == {"error": 1, "pass": 1}
    other = _results(
        tmp_path / "c", family, [{**grid[2], "outcome": "pass", "max_abs_err": 0.0}], {"gpu": "H100"}
    )
    with pytest.raises(SystemExit, match="collect one machine's runs"):
        TOOL.collect(family, [first, other], manifest)
    with pytest.raises(SystemExit, match=r"no flex_attention\.jsonl under"):
        TOOL.collect("flex_attention", [first], manifest)


def test_collect_writes_one_file_per_family(tmp_path: Path) -> None:
    family = "flex_attention"
    grid = DEVICE.cases(family)
    folder = _results(
        tmp_path / "r", family, [{**grid[0], "outcome": "wrong", "max_abs_err": "inf"}], {"sm": 90}
    )
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "manifest.json").write_text(
        json.dumps({"wheel": "w.whl", "wheel_sha256": "1" * 64, "files": {}})
    )
    out = tmp_path / "evidence"
    out.mkdir()
    assert (
        TOOL.main(["collect", "--results", str(folder), "--bundle", str(bundle), "--evidence", str(out)]) == 0
    )
    doc = json.loads((out / "flex_attention_h200.json").read_text())
    assert doc["cases"][0]["outcome"] == "wrong"
    assert doc["off_axis_cases"] == []
    assert "tokens_per_block" not in doc["cases"][0]["query"]


# FlashInfer (JIT from its own sources on the H200)


def _rows(evidence: dict[str, dict[str, Any]], name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = evidence[name]["cases"]
    return rows


def test_flashinfer_fa2_fails_at_heads_80_and_96_as_issue_4299_says(
    evidence: dict[str, dict[str, Any]],
) -> None:
    """FA2 never validates the head size: 80 and 96 fail in every case, the dispatch list's sizes run."""
    rows = _rows(evidence, "flashinfer_fa2_h200.json")
    odd = [row for row in rows if row["case"]["head"] in {80, 96}]
    assert len(odd) >= 24
    assert {row["outcome"] for row in odd} == {"error"}
    assert any("illegal memory access" in row["error"] for row in odd)
    assert any("Unsupported head_dim" in row["error"] for row in odd)
    listed = [row for row in rows if row["case"]["head"] in {64, 128, 256, 512}]
    assert {row["outcome"] for row in listed} == {"pass"}
    assert {row["case"]["head"] for row in listed} == {64, 128, 256, 512}


def test_flashinfer_xqa_serves_sinks_with_no_cubin(evidence: dict[str, dict[str, Any]]) -> None:
    """Every XQA case with sinks that built ran and was right; only the sizes jit/xqa.py refuses failed."""
    rows = _rows(evidence, "flashinfer_xqa_h200.json")
    sinks = [row for row in rows if row["case"]["sinks"]]
    assert len(sinks) == len(rows) // 2
    failed = {(row["case"]["head"], row["case"]["block"]) for row in rows if row["outcome"] != "pass"}
    assert failed == {(72, 16), (128, 8)}
    assert all(row["error"].startswith("ValueError: Invalid ") for row in rows if row["outcome"] == "error")
    fp8 = [row for row in rows if row["case"]["kv"] == "fp8"]
    # The reference rounds the query to E4M3 as the kernel does; against the unrounded query it is worse.
    assert fp8
    assert all(row["max_abs_err_unrounded_q"] > row["max_abs_err"] for row in fp8)


def test_fp8_query_kernels_share_one_tolerance() -> None:
    assert TOOL.tolerance("flashinfer_xqa", "fp16", "fp8") == TOOL.tolerance("flashinfer_xqa", "bf16", "fp8")
    assert TOOL.tolerance("flashinfer_fa3", "fp16", "fp8") == pytest.approx(0.09)
    assert TOOL.tolerance("flashinfer_fa2", "fp16", "fp8") == pytest.approx(0.03)
    assert TOOL.tolerance("flashinfer_fa3", "fp16", "model") == pytest.approx(0.01)


def test_a_jit_cache_collision_is_listed_as_not_run(evidence: dict[str, dict[str, Any]]) -> None:
    """A case whose worker loaded another head size's sink module is no fact about the query."""
    doc = evidence["flashinfer_fa2_h200.json"]
    collided = [row for row in doc["summary"]["not_run"] if "error" in row]
    assert collided
    assert all(TOOL.CACHE_COLLISION in row["error"] for row in collided)
    assert not {row["index"] for row in collided} & {row["index"] for row in doc["cases"]}


def test_flashinfer_modules_group_the_grid() -> None:
    """One JIT module per chunk: the runtime shapes of a module share it, dtypes and heads do not."""
    for family in ("flashinfer_fa2", "flashinfer_fa3", "flashinfer_xqa"):
        grid = DEVICE.cases(family)
        modules = {DEVICE.module_of(c) for c in grid}
        assert 1 < len(modules) < len(grid)
        for case in grid:
            twin = {**case, "mode": "prefill" if family != "flashinfer_xqa" else "decode"}
            if family != "flashinfer_xqa":
                assert DEVICE.module_of(twin) == DEVICE.module_of(case)
            assert DEVICE.module_of({**case, "head": case["head"] + 16}) != DEVICE.module_of(case)


def test_bundle_flashinfer_prunes_the_wheel(tmp_path: Path) -> None:
    names = (
        "flashinfer/__init__.py", "flashinfer/jit/xqa.py", "flashinfer/experimental/x.py",
        "flashinfer/experimental/k.cu", "flashinfer/data/include/a.cuh", "flashinfer/data/csrc/top.cu",
        "flashinfer/data/csrc/moe/deep.cu", "flashinfer/data/csrc/xqa/mha.cu",
        "flashinfer/data/cutlass/examples/e.cu",
        "b12x/__init__.py",
    )
    wheel = _fake_wheel(tmp_path / "fi.whl", names)
    tvm = _fake_wheel(tmp_path / "tvm.whl", ("tvm_ffi/__init__.py",))
    dest = tmp_path / "bundle"
    manifest = TOOL.bundle_flashinfer(wheel, tvm, dest)
    with zipfile.ZipFile(dest / "flashinfer.zip") as zf:
        assert sorted(zf.namelist()) == sorted([
            "flashinfer/__init__.py", "flashinfer/jit/xqa.py", "flashinfer/experimental/x.py",
            "flashinfer/data/include/a.cuh", "flashinfer/data/csrc/top.cu", "flashinfer/data/csrc/xqa/mha.cu",
        ])
    assert (dest / "tvm.whl").read_bytes() == tvm.read_bytes()
    assert (dest / "probe_kernels_device.py").is_file()
    assert manifest["tvm_ffi"] == "tvm.whl"
    with pytest.raises(SystemExit, match=r"no such wheel; fetch it with: pip download apache-tvm-ffi"):
        TOOL.bundle_flashinfer(wheel, tmp_path / "none.whl", dest)
    with pytest.raises(SystemExit, match=r"is this the FlashInfer 0\.7\.2\.post1 wheel"):
        TOOL.bundle_flashinfer(tvm, tvm, dest)
    argv = ["bundle-flashinfer", "--wheel", str(wheel), "--tvm-ffi", str(tvm), "--dest", str(dest)]
    assert TOOL.main(argv) == 0
