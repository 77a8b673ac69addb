"""tools/import_vllm_backends.py: the recorded class-attribute table and the YAML agree (drift check)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from scripts import load_script

ROOT = Path(__file__).resolve().parent.parent
#: vLLM 0.33.0's sources, unpacked from its wheel (docs/vllm-differential.md says how); the test that
#: re-reads them runs only where this names a directory holding ``vllm/``.
SRC = Path(os.environ.get("CAPMATRIX_VLLM_SRC", "") or "vllm-0.33.0-sources-not-given")


TOOL = load_script("tools/import_vllm_backends.py")


def test_yaml_matches_recorded_table() -> None:
    table = TOOL.load_table()
    assert table["vllm"] == {"version": "0.33.0", "commit": "4ba787ec9"}
    kernels = TOOL.KERNELS.read_text(encoding="utf-8")
    assert TOOL.check(table, kernels, TOOL.AXES.read_text(encoding="utf-8")) == []
    assert TOOL.run(["--check"]) == 0


def test_check_catches_drift() -> None:
    """A changed dtype list, KV list, head list or block modulus in the YAML is reported with its line."""
    table = TOOL.load_table()
    kernels = TOOL.KERNELS.read_text(encoding="utf-8")
    axes = TOOL.AXES.read_text(encoding="utf-8")
    for old, new, needle in [
        ('kv_cache_dtype: [fp8, fp8_e4m3], head_dim: ["[320, 320]", 512, 576]',
         'kv_cache_dtype: [fp8], head_dim: ["[320, 320]", 512, 576]',
         "TOKENSPEED_MLA"),
        ('head_dim: ["[320, 320]", 512, 576], tokens_per_block: {multiple_of: 128}',
         'head_dim: ["[320, 320]", 512, 576], tokens_per_block: {multiple_of: 64}', "CUTLASS_MLA"),
        # a one-value range stands for its value; a wider one is not the value
        ('head_dim: ["[320, 320]", 512, 576], tokens_per_block: {multiple_of: 128}',
         'head_dim: ["[320, 336]", 512, 576], tokens_per_block: {multiple_of: 128}', "CUTLASS_MLA"),
        ('head_dim: ["[320, 320]", 512, 576], tokens_per_block: {multiple_of: 128}',
         "head_dim: [512, 576], tokens_per_block: {multiple_of: 128}", "CUTLASS_MLA"),
        ("sm: [120, 121], dtype: bf16,", "sm: [120, 121], dtype: [fp16, bf16],", "B12X"),
    ]:
        assert old in kernels, old
        problems = TOOL.check(table, kernels.replace(old, new, 1), axes)
        assert len(problems) == 1, problems
        assert problems[0].startswith(needle), problems


@pytest.mark.skipif(
    not (SRC / "vllm").is_dir(),
    reason="set CAPMATRIX_VLLM_SRC to vLLM 0.33.0's unpacked sources (docs/vllm-differential.md) to run",
)
def test_extract_reproduces_the_record() -> None:
    recorded = json.loads(TOOL.TABLE.read_text(encoding="utf-8"))
    assert TOOL.extract(SRC) == recorded
