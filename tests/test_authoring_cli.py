"""The CLI: exit statuses, human and JSON output, errors without tracebacks."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from capmatrix.authoring.cli import main, run


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def root(write_matrix: Any) -> str:
    return str(write_matrix())


def test_query_supported_human(root: str) -> None:
    code, out, _ = cli("query", "xqa", "--matrix", root, "--sm", "120", "--model", "llama",
                       "--spec-dec", "one_model")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "xqa: supported"
    assert "  model llama: attention=gqa kv=bf16" in lines
    assert any(line.strip().startswith("+ xqa.hmma (") for line in lines)


def test_query_unsupported_json(root: str) -> None:
    code, out, _ = cli("query", "xqa", "--matrix", root, "--sm", "121", "--model", "dsv3",
                       "--spec-dec", "one_model", "--json")
    assert code == 1
    data = json.loads(out)
    assert data["verdict"] == "unsupported"
    excl = [r for r in data["reasons"] if r["kind"] == "exclude"]
    assert excl[0]["rule"] == "xqa.no-mla-spec"
    assert excl[0]["line"] == 15
    assert excl[0]["file"].endswith("kernels/test.yaml")


def test_query_depends_exit_3(root: str) -> None:
    code, out, _ = cli("query", "xqa", "--matrix", root, "--sm", "120", "--attention", "mla",
                       "--json")
    assert code == 3
    assert json.loads(out)["residual"] == ["spec_dec=none and kv=fp8"]


def test_bool_and_any_values(root: str) -> None:
    code, _, _ = cli("query", "fallback", "--matrix", root, "--sm", "90", "--causal", "yes",
                     "--beam", "*")
    assert code == 0
    code, _, err = cli("query", "fallback", "--matrix", root, "--causal", "maybe")
    assert code == 2
    assert "--causal expects true or false" in err


def test_select(root: str) -> None:
    code, out, _ = cli("select", "gen", "--matrix", root, "--sm", "90", "--attention", "mla")
    assert code == 0
    assert out.splitlines()[0] == "gen: fallback"
    code, out, _ = cli("select", "gen", "--matrix", root, "--sm", "120", "--attention", "mla",
                       "--kv", "bf16", "--json")
    assert code == 1
    assert json.loads(out)["kernel"] is None


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["query", "xqb"], "unknown kernel 'xqb'"),
        (["query", "xqa", "--sm", "nine"], "--sm expects an integer"),
        (["query", "xqa", "--attention", "gqb"], "did you mean 'gqa'?"),
        (["query", "xqa", "--model", "lama"], "did you mean 'llama'?"),
        (["query", "xqa", "--bogus", "1"], "unrecognized arguments: --bogus"),
        (["select", "nope"], "unknown role 'nope'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_usage_errors_exit_2(root: str, argv: list[str], needle: str) -> None:
    code, _, err = cli(*argv[:2], "--matrix", root, *argv[2:]) if argv[0] != "frobnicate" else cli(
        *argv
    )
    assert code == 2
    assert needle in err
    assert "Traceback" not in err


def test_no_arguments_prints_help() -> None:
    code, out, _ = cli()
    assert code == 2
    assert "query" in out
    code, out, _ = cli("--help")
    assert code == 0


def test_validate(root: str, write_matrix: Any) -> None:
    code, out, _ = cli("validate", root)
    assert code == 0
    assert out.startswith("ok: 2 files, 6 axes, 2 kernels, 5 rules, 2 models, 1 roles")
    broken = write_matrix({"kernels/x.yaml": "kernels:\n  x:\n    description: d\n    rules: 3\n"})
    code, _, err = cli("validate", str(broken))
    assert code == 2
    assert "kernels/x.yaml:4:12: kernels.x.rules: 3 is not of type 'array'" in err
    code, out, _ = cli("validate", str(broken), "--json")
    assert code == 2
    assert json.loads(out)["problems"][0]["line"] == 4


def test_main_and_module_entry_point(root: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", root]) == 0
    assert capsys.readouterr().out.startswith("ok:")
    proc = subprocess.run(
        [sys.executable, "-m", "capmatrix", "query", "xqa", "--matrix", root, "--sm", "nine"],
        capture_output=True, text=True, check=False, cwd=Path(root).parent,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "capmatrix: error: --sm expects an integer, got 'nine'"
