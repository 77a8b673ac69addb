"""tools/render_findings.py: docs/findings.md is the shipped matrix's engine findings, fresh, per release."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scripts import load_script

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

TOOL = load_script("tools/render_findings.py")


def test_the_committed_page_is_fresh(capsys: pytest.CaptureFixture[str]) -> None:
    assert TOOL.main(["--check"]) == 0, capsys.readouterr().err


def test_the_seed_is_reported_with_its_releases_and_a_reproducer() -> None:
    text = TOOL.render()
    entry = text[text.index("## trtllm_spec_dec_mode: over-restrictive gate (C111, TensorRT-LLM)"):]
    entry = entry[: entry.index("\n## ", 1)] if "\n## " in entry[1:] else entry
    assert "1.2.0rc8 (fixed in 1.2.0)" in entry
    assert "capmatrix query trtllm_spec_dec_mode --sm 120" in entry
    assert "--trtllm-release 1.2.0rc8" in entry
    assert "trtllm_gates.yaml:54" in entry
    assert "<summary>Report text</summary>" in entry


def test_a_stale_page_is_refused_with_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "findings.md"
    out.write_text("# old\n", encoding="utf-8")
    assert TOOL.main(["--check", "--out", str(out)]) == 1
    assert "python tools/render_findings.py" in capsys.readouterr().err
    assert TOOL.main(["--out", str(out)]) == 0
    assert TOOL.main(["--check", "--out", str(out)]) == 0
