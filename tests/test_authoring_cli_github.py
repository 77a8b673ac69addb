"""``--format github``: validation problems and check findings as GitHub Actions annotations."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from capmatrix import iter_problems
from capmatrix.authoring.analysis import check_path
from capmatrix.authoring.cli import run
from capmatrix.authoring.cli._github import annotation, escape_data, escape_property

#: ``::level props::message`` as the Actions runner parses a workflow command.
COMMAND = re.compile(r"^::(error|warning|notice)(?: ([^:]*))?::(.*)$")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def _unescape(text: str) -> str:
    for escaped, raw in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(escaped, raw)
    return text


def _parse(line: str) -> tuple[str, dict[str, str], str]:
    found = COMMAND.match(line)
    assert found is not None, line
    level, props, message = found.groups()
    fields = dict(item.split("=", 1) for item in props.split(",")) if props else {}
    return level, {k: _unescape(v) for k, v in fields.items()}, _unescape(message)


def test_escaping_follows_the_runner() -> None:
    assert escape_data("100% \r\nnext") == "100%25 %0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    line = annotation("error", "x: 5%, y\nz", file="dir,1/a:b.yaml", line=3, col=7, title="E1: t")
    assert line == "::error file=dir%2C1/a%3Ab.yaml,line=3,col=7,title=E1%3A t::x: 5%25, y%0Az"
    assert _parse(line) == (
        "error", {"file": "dir,1/a:b.yaml", "line": "3", "col": "7", "title": "E1: t"}, "x: 5%, y\nz"
    )
    assert annotation("notice", "m") == "::notice::m"
    assert annotation("warning", "m", line=3) == "::warning::m"  # a line means nothing without a file


def test_validate_github_clean(write_matrix: Any) -> None:
    code, out, _ = cli("validate", str(write_matrix()), "--format", "github")
    assert code == 0
    assert not any(line.startswith("::") for line in out.splitlines())


def test_validate_github_annotates_every_problem(write_matrix: Any) -> None:
    root = write_matrix({
        "kernels/x.yaml": "kernels:\n  x:\n    description: d\n    rules: 3\n",
        "roles.yaml": "roles:\n  r:\n    description: d\n    candidates: [xqa, nope]\n",
    })
    problems = list(iter_problems(root))
    assert len(problems) >= 2
    code, out, err = cli("validate", str(root), "--format", "github")
    assert code == 2
    assert "problem" in err  # the human report still goes to stderr
    parsed = [_parse(line) for line in out.splitlines() if line.startswith("::")]
    assert len(parsed) == len(problems)
    for (level, props, message), problem in zip(parsed, problems, strict=True):
        assert level == "error"
        assert props["file"] == problem.path
        assert props["line"] == str(problem.line)
        assert props["col"] == str(problem.column)
        assert props["title"] == f"capmatrix {problem.code}"
        assert problem.message in message


def test_json_is_the_same_as_format_json(write_matrix: Any) -> None:
    root = str(write_matrix())
    assert cli("validate", root, "--json") == cli("validate", root, "--format", "json")
    code, _, err = cli("validate", root, "--json", "--format", "github")
    assert code == 2
    assert "not allowed with" in err


@pytest.mark.parametrize("case", ["dead_grant", "open_ended"])
def test_check_github_annotates_every_finding(case: str, tmp_path: Path) -> None:
    cases = Path(__file__).parent / "analysis_cases"
    root = tmp_path / case
    (root / "kernels").mkdir(parents=True)
    shutil.copy(cases / "axes.yaml", root / "axes.yaml")
    shutil.copy(cases / f"{case}.yaml", root / "kernels" / f"{case}.yaml")
    result = check_path(str(root))
    assert result.findings
    code, out, _ = cli("check", str(root), "--format", "github")
    assert code == result.exit_status(strict=False)
    lines = out.splitlines()
    assert lines[-1].startswith("capmatrix check: ")
    parsed = [_parse(line) for line in lines if line.startswith("::")]
    assert len(parsed) == len(result.findings)
    levels = {"error": "error", "warning": "warning", "info": "notice"}
    for (level, props, message), finding in zip(parsed, result.findings, strict=True):
        assert level == levels[str(finding.severity)]
        first = finding.locations[0]
        assert props["file"] == first.path
        assert props["line"] == str(first.line)
        assert props["title"] == f"capmatrix {finding.code} {finding.title}"
        assert message.startswith(finding.message)
        if finding.witness is not None:
            assert "\nwitness: capmatrix " in message
