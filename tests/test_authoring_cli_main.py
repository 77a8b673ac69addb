"""The dispatcher: ``--version``, ``python -m capmatrix``, and every command's ``--help`` with examples."""

from __future__ import annotations

import argparse
import io
import shlex
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import stride

from capmatrix.authoring.cli import run
from capmatrix.authoring.cli._main import COMMANDS, EXAMPLES
from capmatrix.authoring.gate import ORACLES

if TYPE_CHECKING:
    from collections.abc import Callable

    from capmatrix.authoring.gate import GateReport, OracleResult
    from capmatrix.matrix import Matrix


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_version() -> None:
    code, out, err = cli("--version")
    assert code == 0
    assert err == ""
    assert out == f"capmatrix {version('capmatrix')}\n"


def test_version_through_python_m() -> None:
    done = subprocess.run([sys.executable, "-m", "capmatrix", "--version"], capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 0
    assert done.stdout.strip() == f"capmatrix {version('capmatrix')}"


def test_top_level_help_shows_examples_and_python_m() -> None:
    code, out, _ = cli("--help")
    assert code == 0
    assert "--version" in out
    assert "python -m capmatrix" in out
    assert "\n  capmatrix query xqa --sm 120 --model llama --spec-dec one_model\n" in out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_an_example(command: str) -> None:
    """From the dispatcher's EXAMPLES, or an epilog the command's own configure step sets."""
    code, out, _ = cli(command, "--help")
    assert code == 0
    epilog = out.split("\nexample", 1)
    assert len(epilog) == 2, out
    assert f"\n  capmatrix {command} " in "\n" + epilog[1], out


@pytest.mark.parametrize("command", sorted(EXAMPLES))
def test_help_of_each_command_ends_with_its_examples(command: str) -> None:
    assert command in COMMANDS
    code, out, _ = cli(command, "--help")
    assert code == 0
    examples = EXAMPLES[command]
    # RawDescriptionHelpFormatter: each example keeps its own line, unwrapped, for copy and paste.
    tail = "\n".join(f"  {line}" for line in examples) + "\n"
    assert out.endswith(tail), out
    assert ("examples:\n" if len(examples) > 1 else "example:\n") in out
    for line in examples:
        words = shlex.split(line.split(">", 1)[0])
        assert words[:2] == ["capmatrix", command]


@pytest.mark.no_cover  # whole commands (render, check, export) once more: the commands' tests cover them
@pytest.mark.parametrize(
    "line",
    [line for examples in EXAMPLES.values() for line in examples
     if not line.startswith(("capmatrix probe", "capmatrix diff", "capmatrix test"))],
)
def test_examples_run(line: str) -> None:
    """Every example (but probe, which needs a GPU, diff, which needs history, and test, below) parses
    and runs."""
    code, _out, err = cli(*shlex.split(line)[1:])
    assert code in {0, 1, 3}, err
    assert "error:" not in err


@pytest.mark.sweep  # the records over every 8th question (every one in make exhaustive and make data)
def test_the_data_gate_examples_run_and_every_oracle_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """``capmatrix test``'s examples: the data gate, run once for both, and every oracle agrees with the
    shipped matrix. The engines' records are compared over a spread of their questions here (the
    engines' own tests take other spreads); ``make data``, which CI runs after ``make test``, and
    ``make exhaustive`` compare every question."""
    from capmatrix.authoring.gate import run_gate

    every = stride(8)

    reports: dict[tuple[str, str], GateReport] = {}

    def once(matrix: Matrix, *, progress: Callable[[OracleResult], None] | None = None,
             **options: Any) -> GateReport:
        key = (str(Path(matrix.root).resolve()), repr(sorted(options.items())))
        if key not in reports:
            reports[key] = run_gate(matrix, progress=progress, **{**options, "records_every": every})
        elif progress is not None:  # the second example prints the first one's report
            for result in reports[key].results:
                progress(result)
        return reports[key]

    monkeypatch.setattr("capmatrix.authoring.cli._analysis.run_gate", once)
    texts = []
    for line in EXAMPLES["test"]:
        code, out, err = cli(*shlex.split(line)[1:])
        assert code == 0, out[-3000:] + err
        assert "error:" not in err
        texts.append(out)
    assert len(reports) == 1  # both examples ask the shipped matrix the same
    (report,) = reports.values()
    assert set(report.ran) == set(ORACLES)
    assert {r.oracle for r in report.results} == set(ORACLES)
    assert all(r.status in {"PASS", "SKIP"} for r in report.results)
    records = [r for r in report.results if r.oracle == "records"]
    assert records
    assert all(r.status == "PASS" and r.checks > 0 for r in records)
    if every > 1:
        assert all(f"--records-every {every}" in (r.note or "") for r in records)
    assert any(t.lstrip().startswith("{") for t in texts)  # the --json example


BAD_STATUS = """\
kernels:
  k:
    description: a kernel
    rules:
      - id: k.all
        grant: {sm: 90}
        reason: r
        source: s
        status: untestd
      - id: k.more
        grant: {sm: 80}
        reason: r
        source: s
        status: guessed
"""


@pytest.mark.parametrize("command", [["check"], ["test"], ["render", "--check", "--out-dir", "docs"]])
def test_brief_load_errors_says_one_line(write_matrix: Any, command: list[str]) -> None:
    root = write_matrix({"kernels/bad.yaml": BAD_STATUS})
    matrix = ["--matrix", str(root)] if command[0] == "render" else [str(root)]
    code, out, err = cli(*command, *matrix)
    full = out + err
    assert code == 2
    assert full.count("untestd") == 1  # every problem, in full (check: on stdout, as its findings)
    assert "guessed" in full
    code, out, brief = cli("--brief-load-errors", *command, *matrix)
    assert code == 2
    assert out == ""
    first = f"{root / 'kernels' / 'bad.yaml'}:9"
    assert brief.startswith(f"capmatrix: the matrix does not load (2 problems, the first at {first}")
    assert brief.endswith("); `capmatrix validate` reports them\n")
    assert brief.count("\n") == 1
    assert "untestd" not in brief


@pytest.mark.parametrize(
    "columns", ["50", "120", "0", "wide", None, "-5", " 90 ", "1e2", "+70", "", "100000"]
)
def test_help_width_is_shutils(columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The help wraps at the width ``shutil.get_terminal_size`` gives (argparse's own formatter's)."""
    import shutil

    from capmatrix.authoring.cli._common import columns as _columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert _columns() == shutil.get_terminal_size().columns
    ours = cli("query", "--help")
    monkeypatch.setattr("capmatrix.authoring.cli._main._Formatter", argparse.RawDescriptionHelpFormatter)
    assert ours == cli("query", "--help")  # the same help, wrapped alike


def test_a_command_does_not_import_shutil() -> None:
    """argparse's formatter would import shutil (and bz2, lzma) on every start; ours reads os."""
    code = ("import sys, io, contextlib\nfrom capmatrix.authoring.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['query', 'xqa', '--sm', '120', '--model', 'llama', '--spec-dec', 'one_model'])\n"
            "print('shutil' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          timeout=120, env={"CAPMATRIX_CACHE": "off", "PATH": ""})
    assert done.stdout.strip() == "False", done.stderr
