"""vLLM 0.34.0's own selection records (tools/record_vllm_selection.py): what they hold and how drawn.

The matrix models vLLM 0.33.0 (tests/test_engine_vllm.py, tests/test_engine_vllm_sample.py); these records
are the evidence for 0.34.0 and are checked here for shape and provenance only, not against the matrix.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from scripts import load_script

EVIDENCE = Path(__file__).resolve().parent.parent / "capabilities" / "evidence"
GRID = EVIDENCE / "vllm_0.34.0_selection.json"
SAMPLE = EVIDENCE / "vllm_0.34.0_sample.json.gz"
VLLM = {"version": "0.34.0", "commit": "62d4bc3c7",
        "wheel": "vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        "wheel_sha256": "79ca4b3cd74aec08c4bf476bdf0cb15735b605ae5368526a2faae1e30f044ca2"}
NEW_MEMBERS = ["FLASHINFER_TS", "KIMI_K3_KV_BALANCED_MLA"]


@pytest.fixture(scope="module")
def tool() -> Any:
    return load_script("tools/record_vllm_selection.py")


@pytest.fixture(scope="module")
def grid() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GRID.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def sample() -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as lines:
        head = json.loads(next(lines))
        return head, [json.loads(line) for line in lines]


def test_grid_provenance_and_shape(grid: dict[str, Any], tool: Any) -> None:
    release = tool.RELEASES["0.34.0"]
    assert grid["vllm"] == VLLM
    assert grid["defaults"]["flashinfer"] == release.flashinfer == "0.7.4"
    assert grid["defaults"]["flashinfer_pinned_by_vllm"] == "0.7.3"
    assert grid["forced"] == list(release.forced)
    assert grid["forced"][-2:] == NEW_MEMBERS
    assert "10.7" in grid["axes"]["capability"]
    assert len(grid["cells"]) * len(grid["columns"]) == 9 * 7 * 3 * 4 * 5 * 6
    # the checkpoint's KV dtype reaches selection from non-MLA layers only
    assert {(kind, kv, passed) for kind, kv, passed in grid["checkpoint_kv"]["layer_passes"]} == {
        (kind, kv, kv if kind == "mha" else "auto")
        for kind in ("mha", "mla", "mla-sparse") for kv in ("fp8", "fp8_e4m3", "fp8_e5m2")}
    assert len(grid["checkpoint_kv"]["cells"]) == 9 * 7 * 3 * 3 * 5
    assert grid["b12x_installed"]["capabilities"] == ["12.0", "12.1"]
    assert len(grid["b12x_installed"]["cells"]) == 2 * 7 * 3 * 4 * 5


def test_b12x_installed_is_valid_where_b12x_serves(grid: dict[str, Any]) -> None:
    """With b12x installed, B12X is valid exactly for bf16 non-MLA heads 128/192/256, KV auto/fp8/fp8_e4m3,
    blocks 64/128 or none, sinks or not (0.34.0 dropped head 64)."""
    valid = set()
    for group, ids in grid["b12x_installed"]["cells"].items():
        for column, reason_set in zip(grid["columns"], ids, strict=True):
            if grid["reason_sets"][reason_set] == []:
                valid.add((group, column))
    want = {(f"{cap}/{head}/bf16/{kv}/{block}", column)
            for cap in ("12.0", "12.1") for head in (128, 192, 256) for kv in ("auto", "fp8", "fp8_e4m3")
            for block in ("64", "128", "-") for column in ("mha", "mha+sink")}
    assert valid == want


def test_sample_is_the_documented_draw(sample: tuple[dict[str, Any], list[list[dict[str, Any]]]],
                                       tool: Any) -> None:
    head, rows = sample
    release = tool.RELEASES["0.34.0"]
    assert head["vllm"] == VLLM
    assert head["seed"] == release.sample_seed == 20260334
    assert head["classes"]["capability"] == [f"{a}.{b}" for a, b in release.sample_capabilities]
    assert "10.7" in head["classes"]["capability"]
    drawn = [s.as_json() for cap in release.sample_capabilities
             for s in tool._samples(cap, head["per_capability"], head["seed"], release)]
    assert drawn == [config for config, _answer in rows]
    assert {name for config, _ in rows if config["forced"] for name in [config["forced"].upper()]} >= set(
        NEW_MEMBERS)


def test_sample_layer_answers(sample: tuple[dict[str, Any], list[list[dict[str, Any]]]]) -> None:
    """What the layers passed: the checkpoint's KV dtype for non-MLA layers, auto for MLA ones; MLA layers
    pass their sliding window and refuse it with fp8_ds_mla / nvfp4_ds_mla before selection."""
    _head, rows = sample
    for config, answer in rows:
        layer = answer["layer"]
        refuses = (config["use_mla"] and config["has_sliding_window"] and not config["kv_from_checkpoint"]
                   and config["kv_cache_dtype"] in ("fp8_ds_mla", "nvfp4_ds_mla"))
        if refuses:
            assert layer == {"raises": "ValueError", "message": "Sliding-window MLA does not support "
                             f"kv_cache_dtype={config['kv_cache_dtype']}."}
            continue
        passed = "auto" if config["kv_from_checkpoint"] and config["use_mla"] else config["kv_cache_dtype"]
        assert layer == {"kv_cache_dtype": passed, "has_sliding_window": config["has_sliding_window"]}
        if config["capability"] in ([12, 0], [12, 1]):
            assert "b12x_installed" in answer
