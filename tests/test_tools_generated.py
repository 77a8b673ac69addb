"""tools/_generated.py: the marker-delimited section the importers rewrite, and its drift check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripts import load_script

tool = load_script("tools/_generated.py")
BEGIN, END = "  # BEGIN GENERATED", "  # END GENERATED"


def test_splice_replaces_only_between_the_markers() -> None:
    text = f"head\n{BEGIN}\nold 1\nold 2\n{END}\ntail\n"
    assert tool.splice(text, "new\n", BEGIN, END, where="f.yaml") == f"head\n{BEGIN}\nnew\n{END}\ntail\n"


@pytest.mark.parametrize("text", ["rules:\n", f"{END}\n{BEGIN}\n", f"{BEGIN}\nno end\n"])
def test_splice_needs_both_markers_in_order(text: str) -> None:
    with pytest.raises(tool.MarkerError, match=r"f\.yaml: the generated section's markers are missing"):
        tool.splice(text, "x\n", BEGIN, END, where="f.yaml")


def test_update_checks_without_writing_and_writes_otherwise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "k.yaml"
    path.write_text("a\nb\n", encoding="utf-8")
    assert tool.update(path, "a\nb\n", "a\nc\n", check=True, tool="tools/x.py") == 1
    err = capsys.readouterr().err
    assert "-b\n" in err
    assert "+c\n" in err
    assert "stale: run python tools/x.py" in err
    assert path.read_text(encoding="utf-8") == "a\nb\n"  # a check never writes
    assert tool.update(path, "a\nb\n", "a\nc\n", check=False, tool="tools/x.py") == 0
    assert path.read_text(encoding="utf-8") == "a\nc\n"
    before = path.stat().st_mtime_ns
    assert tool.update(path, "a\nc\n", "a\nc\n", check=True, tool="tools/x.py") == 0
    assert path.stat().st_mtime_ns == before


def test_emit_table_prints_or_writes_sorted_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.json"
    tool.emit_table({"b": 1, "a": [2]}, path, write=False)
    printed = capsys.readouterr().out
    assert json.loads(printed) == {"a": [2], "b": 1}
    assert printed.index('"a"') < printed.index('"b"')
    assert not path.exists()
    tool.emit_table({"b": 1, "a": [2]}, path, write=True)
    assert path.read_text(encoding="utf-8") == printed
