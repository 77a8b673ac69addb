"""``make run``: the seed question and both answers, with no make error lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "seed_question.py"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_run_is_clean() -> None:
    # The recipe runs with this interpreter's environment, taken as installed (-o: never rebuilt).
    # Run as a user would, from a shell: under `make test` the inherited MAKELEVEL/MAKEFLAGS would make
    # the inner make print "Entering directory" lines that a user never sees.
    venv = Path(sys.prefix)
    inherited = {"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"}
    env = {k: v for k, v in os.environ.items() if k not in inherited}
    done = subprocess.run(
        ["make", "-o", f"{venv}/.installed", "run", f"VENV={venv}", f"PY={sys.executable}"],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=300, env=env,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert not [line for line in out.splitlines() if "Error" in line or "(ignored)" in line], out
    assert out.startswith("ok: ")  # validate, its command not echoed
    assert "May XQA serve one-model speculative decoding" in out
    assert "\nLlama: supported\n" in out
    assert "\nDeepSeek-V3: unsupported\n" in out
    assert "would work: set dtype=fp8 and kv_cache_dtype=fp8" in out
    assert "Where to go next:" in out


def test_seed_question_fails_when_the_answer_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's exit status is a real check: a different answer makes `make run` fail."""
    import runpy

    module = runpy.run_path(str(EXAMPLE))
    assert module["main"]() == 0
    label, query, expected = module["ASKED"][0]
    wrong = ((label, query, expected.__class__("unsupported")),)
    monkeypatch.setitem(module["main"].__globals__, "ASKED", wrong)
    assert module["main"]() == 1
