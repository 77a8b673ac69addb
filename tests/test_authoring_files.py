"""capmatrix.authoring._files: one file's bytes within the limits, and JSON data files read as strict JSON."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capmatrix.authoring import _files
from capmatrix.authoring._files import MAX_JSON_DEPTH, read_json
from capmatrix.errors import CapmatrixError, InvalidFile

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def _refused(path: Path, *, hint: str | None = None) -> InvalidFile:
    with pytest.raises(InvalidFile) as info:
        read_json(path, "shown.json", hint=hint)
    assert info.value.path == "shown.json"
    assert isinstance(info.value, CapmatrixError)
    assert isinstance(info.value, ValueError)
    return info.value


def test_a_json_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('{"sm": 90, "cases": [1.5, -2e3, "x", null, true]}', encoding="utf-8")
    assert read_json(path, "a.json") == {"sm": 90, "cases": [1.5, -2000.0, "x", None, True]}


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity", "1e999", "-1E400"])
def test_numbers_json_does_not_have_are_refused(tmp_path: Path, word: str) -> None:
    path = tmp_path / "a.json"
    path.write_text(f'{{"environment": {{"sm": {word}}}}}', encoding="utf-8")
    error = _refused(path)
    assert error.message.startswith("not valid JSON (")
    assert word in error.message


def test_invalid_json_is_placed(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('{"format": 1,\n  "cases": [}\n', encoding="utf-8")
    error = _refused(path, hint="write one")
    assert (error.line, error.column) == (2, 13)
    assert str(error) == "shown.json:2:13: not valid JSON (Expecting value); write one"


def test_bytes_that_are_not_utf8_are_placed(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b'{"a": 1,\n "b\xe9": 2}')
    error = _refused(path)
    assert (error.line, error.column, error.message) == (2, 4, "not UTF-8 (byte 0xe9)")


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 5000, 200_000])
def test_nesting_past_the_bound_is_refused(tmp_path: Path, levels: int) -> None:
    """Past the bound (a walk after parsing) and past the interpreter's recursion (json's own refusal)."""
    path = tmp_path / "a.json"
    path.write_text("[" * levels + "]" * levels, encoding="utf-8")
    error = _refused(path)
    assert error.message == f"objects and arrays nested deeper than {MAX_JSON_DEPTH} levels"
    path.write_text("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, encoding="utf-8")
    assert read_json(path, "a.json") is not None  # the bound itself is fine


def test_an_integer_python_does_not_convert_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('{"sm": ' + "9" * 5000 + "}", encoding="utf-8")
    assert _refused(path).message.startswith("not JSON capmatrix reads (")


def test_a_file_above_the_bound_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_files, "MAX_JSON_BYTES", 10)
    path = tmp_path / "a.json"
    path.write_text('{"a": "0123456789"}', encoding="utf-8")
    assert _refused(path).message == "file is 19 bytes, above the limit of 10 bytes"


def test_a_device_is_refused_without_reading_it() -> None:
    """``/dev/zero`` never ends: read whole, it was a MemoryError."""
    assert _refused(Path("/dev/zero")).message == "not a regular file"


@needs_fifo
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """Opened for reading with no writer, a FIFO blocks for ever; opened without blocking, it is refused."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    assert _refused(fifo).message == "not a regular file"
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    assert _refused(link).message == "not a regular file"


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    error = _refused(tmp_path / "none.json", hint="write one")
    assert str(error) == "shown.json: No such file or directory; write one"
