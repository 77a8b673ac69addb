"""tests/file_progress.py: a line per test file as its last test finishes, failures in full at the end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

CONFTEST = """
import file_progress
import pytest

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    file_progress.register(config)
"""

PASSING = """
import pytest

def test_one(): pass

def test_two(): pass

@pytest.mark.skip(reason="not here")
def test_three(): pass
"""

FAILING = """
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("the fixture broke")

def test_fails(): assert 1 + 1 == 3

def test_errors(broken): pass

def test_passes(): pass
"""


def _run(tmp_path: Path, *args: str) -> str:
    (tmp_path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tmp_path / "test_passing.py").write_text(PASSING, encoding="utf-8")
    (tmp_path / "test_failing.py").write_text(FAILING, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:cov", "-o", "addopts=",
         "--rootdir", str(tmp_path), *args, str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # a test failed
    return done.stdout


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_a_line_per_file_and_failures_in_full(tmp_path: Path, workers: list[str]) -> None:
    out = _run(tmp_path, "-q", *workers)
    # [files done/files, wall clock] file  outcomes  seconds its tests took
    files = re.findall(r"^\[(\d)/2 +\d+:\d\d\] (test_\w+\.py)  (.+)  \d+\.\d s$", out, re.MULTILINE)
    assert sorted(int(n) for n, _, _ in files) == [1, 2], out
    said = {name: outcome for _, name, outcome in files}
    assert said == {"test_passing.py": "2 passed, 1 skipped",
                    "test_failing.py": "1 failed, 1 error, 1 passed"}, out
    assert not re.search(r"^[.sFE]{2,}", out, re.MULTILINE), out  # no dots
    assert "[100%]" not in out
    assert "the fixture broke" in out  # the error and the failure, in full
    assert "assert (1 + 1) == 3" in out
    assert "FAILED test_failing.py::test_fails" in out


def test_verbose_keeps_the_line_per_test(tmp_path: Path) -> None:
    out = _run(tmp_path, "-v")
    assert "test_passing.py::test_one PASSED" in out
    assert not re.search(r"^\[\d/2 ", out, re.MULTILINE), out
