"""capmatrix/authoring/_heap.py: the collector thresholds of the processes capmatrix runs."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

import pytest

import capmatrix
from capmatrix.authoring import _heap
from capmatrix.authoring.cli import main
from capmatrix.authoring.gate import run_gate
from capmatrix.errors import CapmatrixError

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def interpreter_default(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, int, int]]:
    """The collector at CPython's default thresholds for the test; this process's own restored after."""
    monkeypatch.delenv(_heap.ENV, raising=False)
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_tune_sets_the_thresholds(interpreter_default: tuple[int, int, int]) -> None:
    assert _heap.thresholds() == _heap.THRESHOLDS
    _heap.tune()
    assert gc.get_threshold() == _heap.THRESHOLDS != interpreter_default


def test_default_keeps_the_interpreters_thresholds(
    interpreter_default: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_heap.ENV, "default")
    assert _heap.thresholds() is None
    _heap.tune()
    assert gc.get_threshold() == interpreter_default


@pytest.mark.parametrize("value", ["Default", "off", "0", " default", "700,10,10"])
def test_another_value_is_refused_with_the_remedy(
    interpreter_default: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(_heap.ENV, value)
    with pytest.raises(CapmatrixError) as info:
        _heap.tune()
    assert str(info.value) == (f"CAPMATRIX_GC={value!r}: not a setting; set it to 'default' to keep the "
                               "interpreter's garbage-collector thresholds, or unset it")
    assert gc.get_threshold() == interpreter_default  # nothing changed


def test_the_command_tunes_its_process(
    interpreter_default: tuple[int, int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate"]) == 0
    assert gc.get_threshold() == _heap.THRESHOLDS
    assert capsys.readouterr().err == ""


def test_the_command_refuses_a_bad_setting_before_it_starts(
    interpreter_default: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(_heap.ENV, "sometimes")
    assert main(["validate"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("capmatrix: error: CAPMATRIX_GC='sometimes': not a setting; set it to 'default' to keep "
                   "the interpreter's garbage-collector thresholds, or unset it\n")
    assert gc.get_threshold() == interpreter_default


def test_the_gate_refuses_a_bad_setting_before_its_workers_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_heap.ENV, "sometimes")
    with pytest.raises(CapmatrixError, match="CAPMATRIX_GC='sometimes': not a setting"):
        run_gate(capmatrix.load(), only=["records"], jobs=2)


def test_an_empty_setting_reads_as_unset(
    interpreter_default: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_heap.ENV, "")
    _heap.tune()
    assert gc.get_threshold() == _heap.THRESHOLDS


@pytest.mark.parametrize("value", ["x" * 5000, "défaut\tnull", "default\n"])
def test_a_long_or_odd_value_is_echoed_cut_and_printable(
    interpreter_default: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(_heap.ENV, value)
    with pytest.raises(CapmatrixError) as info:
        _heap.tune()
    message = str(info.value)
    assert message.startswith("CAPMATRIX_GC=")
    assert message.endswith("set it to 'default' to keep the interpreter's garbage-collector thresholds, "
                            "or unset it")
    assert len(message) < 400
    assert message.isprintable()
    assert gc.get_threshold() == interpreter_default
