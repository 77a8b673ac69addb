"""``make run``: the seed question and both answers, no make error lines; ``make test``'s skip reasons."""

from __future__ import annotations

import ast
import os
import re
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


#: A path of one machine's file system (a home, a scratch or work directory), not of the checkout.
_MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home|root|tmp|Users|mnt|scratch)/")


def _skip_reasons(path: Path) -> list[tuple[int, str]]:
    """The literal skip reasons of a test module: ``reason=`` arguments and ``pytest.skip`` messages."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        texts = [k.value for k in node.keywords if k.arg == "reason"]
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "skip" and node.args:
            texts.append(node.args[0])
        found.extend((t.lineno, t.value) for t in texts
                     if isinstance(t, ast.Constant) and isinstance(t.value, str))
    return found


def test_no_skip_reason_names_a_machine_path() -> None:
    """`make test` prints every skip reason (-ra); none may point into someone's file system."""
    reasons = [(f.name, line, text) for f in sorted((ROOT / "tests").glob("*.py"))
               for line, text in _skip_reasons(f)]
    assert len(reasons) >= 10  # the scan sees the suite's reasons
    assert any("CAPMATRIX_VLLM_SRC" in text for _, _, text in reasons)
    assert [r for r in reasons if _MACHINE_PATH.search(r[2])] == []
    assert _MACHINE_PATH.search("sources not unpacked at /work/dl")  # what it would catch
