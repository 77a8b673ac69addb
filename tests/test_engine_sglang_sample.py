"""capmatrix.engine.sglang off the grid: capabilities, page sizes, head sizes and KV spellings it never lists.

The sample (capabilities/evidence/sglang_0.5.23_sample.json.gz, ``tools/record_sglang_selection.py
--sample``) is SGLang 0.5.23's own resolution of capabilities 8.7, 10.1, 10.7, 11.1 and 12.2 (and 9.0),
page sizes 8 and 256, Llama and Qwen3 geometries with head sizes 64, 96 and 256, the KV spelling ``bf16``
and split prefill/decode backends: values on none of the grid's lists, so a fit to the grid shows here.
"""

from __future__ import annotations

from pathlib import Path

from test_engine_sglang import differential, read

SAMPLE = Path(__file__).resolve().parent.parent / "capabilities/evidence/sglang_0.5.23_sample.json.gz"
GRID_CAPABILITIES = {"8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"}


def test_sample_is_off_the_grid() -> None:
    header, rows = read(SAMPLE)
    assert header["set"] == "sample"
    assert header["cells"] == len(rows) > 1000
    off_grid = {cell["capability"] for cell, _ in rows} - GRID_CAPABILITIES
    assert off_grid == {"8.7", "10.1", "10.7", "11.1", "12.2"}
    assert {cell["page_size"] for cell, _ in rows} == {8, 256}
    assert "bf16" in {cell["kv_cache_dtype"] for cell, _ in rows}
    heads = {header["models"][cell["model"]].get("head_dim") for cell, _ in rows}
    assert {64, 96, 256} <= heads
    assert any("+" in cell["forced"] for cell, _ in rows)
    assert not [cell for cell, ans in rows if "harness_error" in ans]


def test_sample_differential() -> None:
    result = differential(SAMPLE)
    assert result.rows == result.checks > 1000
    assert result.agree, "\n".join(map(str, result.disagreements))
