"""Expectation tests: the shipped cases hold; failures, malformed files and coverage are reported."""

from __future__ import annotations

import io
import json
import os
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import capmatrix
from capmatrix.authoring.analysis import (
    Case,
    discover_cases,
    load_cases,
    run_case,
    run_expectations,
)
from capmatrix.authoring.cli import run
from capmatrix.authoring.cli._analysis import SHOWN_UNCITED
from capmatrix.authoring.gate import load_legacy_checks
from capmatrix.authoring.loader import default_path

if TYPE_CHECKING:
    from conftest import WriteMatrix

SHIPPED_CASES = [
    case for file in discover_cases(default_path() / "expect") for case in load_cases(file)[0]
]


def test_shipped_expectation_files_are_well_formed() -> None:
    files = discover_cases(default_path() / "expect")
    assert any(f.name == "seed.yaml" for f in files)
    for file in files:
        cases, problems = load_cases(file)
        assert problems == [], [str(p) for p in problems]
        checks, problems = load_legacy_checks(file)
        assert problems == [], [str(p) for p in problems]
        assert cases or checks  # a file of legacy comparisons only (capmatrix.authoring.gate) holds no case


@pytest.mark.parametrize("case", SHIPPED_CASES, ids=lambda c: f"{c.location} {c.name}")
def test_shipped_expectation(case: Case) -> None:
    result = run_case(capmatrix.default_matrix(), case)
    assert result.passed, f"{case.location}: {result.message}"


def _write(root: Path, text: str, name: str = "cases.yaml") -> Path:
    path = root / "expect" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


def test_pass_fail_and_coverage(write_matrix: WriteMatrix) -> None:
    root = write_matrix()
    _write(root, """\
        cases:
          - name: llama on sm120 runs xqa
            kernel: xqa
            query: {model: llama, sm: 120, spec_dec: one_model, causal: false}
            expect: supported
            because: [xqa.hmma]
          - kernel: xqa
            query: {model: dsv3, sm: 120, spec_dec: one_model, causal: false}
            expect: supported
          - role: gen
            query: {model: llama, sm: 90, spec_dec: none, causal: true}
            expect: xqa
          - kernel: xqa
            query: {model: dsv3, sm: "*", spec_dec: none, causal: false}
            expect: depends
          - kernel: xqa
            query: {model: llama, sm: 90, spec_dec: none, causal: false}
            expect: supported
            because: [xqa.mla]
          - kernel: xqa
            query: {smm: 90}
            expect: supported
        """)
    matrix = capmatrix.load(root)
    report = run_expectations(matrix)
    assert report.problems == ()
    outcomes = [(r.case.line, r.passed) for r in report.results]
    assert outcomes == [(2, True), (7, False), (10, True), (13, True), (16, False), (20, False)]
    wrong = report.results[1]
    assert wrong.actual == "unsupported"
    assert wrong.message.startswith("expected supported, got unsupported")
    assert "xqa.no-mla-spec" in wrong.message
    assert "not because of xqa.mla" in report.results[4].message
    assert report.results[5].actual == "error"
    assert "unknown axis 'smm'" in report.results[5].message
    assert report.exit_status() == 1
    uncovered = {r.id for r in report.uncovered}
    assert "xqa.hmma" not in uncovered
    assert "xqa.no-mla-spec" not in uncovered  # cited by the failing case's exclusion
    assert "fallback.all" in uncovered
    assert "xqa.beam" in uncovered
    assert report.total_rules == 5

    status, out, _ = _run("test", str(root))
    assert status == 1
    lines = out.splitlines()
    assert any(
        line.startswith("PASS ") and line.endswith("cases.yaml:2 llama on sm120 runs xqa")
        for line in lines
    )
    assert any(
        line.startswith("FAIL ") and "cases.yaml:7 " in line
        and "expected supported, got unsupported" in line
        for line in lines
    )
    assert "rules no case cites (2):" in out
    assert "fallback.all" in out
    assert lines[-1] == "capmatrix test: 3 passed, 3 failed"
    # The FAIL lines come last, just above the summary, after the uncited rules.
    assert [line.split()[0] for line in lines[-4:-1]] == ["FAIL"] * 3
    assert not any(line.startswith("FAIL ") for line in lines[:-4])

    status, out, _ = _run("test", str(root), "--json")
    data = json.loads(out)
    assert status == 1
    assert data["passed"] == 3
    assert data["failed"] == 3
    assert data["cases"][1]["line"] == 7
    assert data["coverage"]["rules"] == 5
    assert {u["rule"] for u in data["coverage"]["uncovered"]} == uncovered


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("cases: 3\n", 1, "a mapping with a 'cases' list"),
        ("cases: []\nextra: 1\n", 2, "unknown key 'extra'"),
        ("cases:\n  - kernel: xqa\n    role: gen\n    expect: supported\n", 2, "exactly one of"),
        ("cases:\n  - kernel: xqa\n    query: {sm: 90}\n", 2, "needs 'expect'"),
        ("cases:\n  - kernel: xqa\n    expect: xqa\n", 3, "expects one of depends"),
        ("cases:\n  - kernel: xqa\n    expect: supported\n    colour: red\n", 4, "unknown key"),
        ("cases:\n  - kernel: xqa\n    query: [1]\n    expect: supported\n", 3, "is a mapping"),
        ("cases:\n  - kernel: xqa\n    query: {sm: [90]}\n    expect: supported\n", 3,
         "is not a value"),
        ("cases:\n  - kernel: xqa\n    because: xqa.hmma\n    expect: supported\n", 3,
         "list of rule ids"),
        ("cases:\n  - just a string\n", 2, "a case is a mapping"),
        ("cases:\n  - kernel: 3\n    expect: supported\n", 2, "must be a string"),
        ("cases: [\n", 2, "YAML syntax error"),
    ],
)
def test_malformed_case_files_are_located(
    write_matrix: WriteMatrix, text: str, line: int, message: str
) -> None:
    root = write_matrix()
    path = _write(root, text)
    cases, problems = load_cases(path)
    assert cases == []
    assert problems
    assert problems[0].line == line
    assert message in str(problems[0])
    report = run_expectations(capmatrix.load(root))
    assert report.exit_status() == 2
    status, out, _ = _run("test", str(root))
    assert status == 2
    assert message in out


def test_expect_directory_option(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    root = write_matrix()
    other = tmp_path / "elsewhere"
    _write(other, "cases:\n  - role: gen\n    query: {sm: 120, attention: mla, kv: fp8, "
                  "spec_dec: none, causal: false}\n    expect: xqa\n")
    status, out, _ = _run("test", str(root), "--expect", str(other / "expect"))
    assert status == 0
    assert "1 passed, 0 failed" in out
    # No expectation directory: nothing to run, everything uncovered.
    report = run_expectations(capmatrix.load(root), tmp_path / "none")
    assert report.results == ()
    assert len(report.uncovered) == report.total_rules
    assert report.exit_status() == 2  # ... and no case found is an error, not a pass


@pytest.mark.parametrize(
    ("layout", "detail"),
    [
        ({}, "the directory does not exist"),
        ({"README.md": "cases:\n  - kernel: xqa\n"}, "no case file"),
        ({"sub/notes.txt": "x"}, "no case file"),
        ({"a.yaml": "cases: []\n"}, "1 case file with no case"),
        ({"a.yaml": "cases: []\n", "deep/b.yml": "cases: []\n"}, "2 case files with no case"),
    ],
    ids=["missing", "no-yaml", "nested-no-yaml", "empty-list", "two-empty"],
)
def test_no_case_found_is_an_error_naming_the_directory(
    write_matrix: WriteMatrix, tmp_path: Path, layout: dict[str, str], detail: str
) -> None:
    """A mistyped case path in CI must not pass: exit 2, T003, the directory searched named."""
    root = write_matrix()
    where = tmp_path / "cases-dir"
    for name, text in layout.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)
    report = run_expectations(capmatrix.load(root), where)
    assert report.exit_status() == 2
    (problem,) = report.problems
    assert problem.code == "T003"
    assert detail in problem.message
    assert str(where) in problem.path or problem.path.endswith("cases-dir")
    status, out, _ = _run("test", str(root), "--expect", str(where))
    assert status == 2
    assert "no expectation cases found" in out
    assert "cases-dir" in out
    assert "0 passed, 0 failed, 1 problems in case files" in out
    status, out, _ = _run("test", str(root), "--expect", str(where), "--json")
    assert status == 2
    assert json.loads(out)["problems"][0]["code"] == "T003"


_GOOD_CASE = ("cases:\n  - role: gen\n    query: {sm: 120, attention: mla, kv: fp8, spec_dec: none, "
              "causal: false}\n    expect: xqa\n")


@pytest.mark.parametrize(("kind", "code", "message"), [
    pytest.param("fifo", "E001", "not a regular file", marks=pytest.mark.skipif(
        not hasattr(os, "mkfifo"), reason="needs FIFOs")),
    ("link to a device", "T001", "leads outside the case directory"),
    ("broken link", "E001", "cannot read file"),
    ("not UTF-8", "E001", "not UTF-8 (byte 0xff)"),
    ("nested deeply", "E001", "nest"),
])
def test_a_case_file_that_cannot_be_read_is_reported_not_skipped(
    write_matrix: WriteMatrix, kind: str, code: str, message: str,
) -> None:
    """A FIFO, a device or a broken link named ``*.yaml`` was skipped unseen: its cases never ran."""
    root = write_matrix()
    _write(root, _GOOD_CASE)
    bad = root / "expect" / "bad.yaml"
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "link to a device":
        bad.symlink_to(os.devnull)
    elif kind == "broken link":
        bad.symlink_to(root / "expect" / "gone.yaml")
    elif kind == "not UTF-8":
        bad.write_bytes(b"cases: [\xff]\n")
    else:
        bad.write_text("cases: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    assert bad in discover_cases(root / "expect")
    report = run_expectations(capmatrix.load(root))
    assert [(p.path.rsplit("/", 1)[-1], p.code) for p in report.problems] == [("bad.yaml", code)]
    assert message in report.problems[0].message
    assert len(report.results) == 1  # the readable file still runs
    status, out, _ = _run("test", str(root))
    assert status == 2
    assert "bad.yaml" in out


def test_a_matrix_without_expect_directory_fails_test(write_matrix: WriteMatrix) -> None:
    root = write_matrix()
    status, out, _ = _run("test", str(root))
    assert status == 2
    assert "no expectation cases found" in out
    assert f"{root.name}/expect" in out


def test_loader_skips_the_expect_directory(write_matrix: WriteMatrix) -> None:
    root = write_matrix()
    _write(root, "cases:\n  - kernel: xqa\n    expect: supported\n")
    matrix = capmatrix.load(root)
    assert matrix.files
    assert all(Path(f).parent.name != "expect" for f in matrix.files)


#: Twelve grants of one kernel that no case cites.
_UNCITED = "kernels:\n  many:\n    description: many rules\n    rules:\n" + "".join(
    f"      - {{id: many.r{i:02d}, grant: {{sm: 90, beam: {1 + 3 * (i % 2)}}}, reason: r, source: s, "
    "status: untested}\n" for i in range(12)
)


def test_uncited_rules_are_summarised_unless_verbose(write_matrix: WriteMatrix) -> None:
    root = write_matrix({"kernels/many.yaml": _UNCITED})
    _write(root, """\
        cases:
          - kernel: xqa
            query: {model: llama, sm: 90, spec_dec: none, causal: false}
            expect: unsupported
        """)
    uncovered = run_expectations(capmatrix.load(root)).uncovered
    assert len(uncovered) > SHOWN_UNCITED + 1
    status, out, _ = _run("test", str(root))
    assert status == 1
    lines = out.splitlines()
    listed = [line for line in lines if line.startswith("  ") and not line.startswith("  ...")]
    assert listed == [f"  {r.location} {r.id}" for r in uncovered[:SHOWN_UNCITED]]
    assert f"rules no case cites ({len(uncovered)}):" in lines
    assert f"  ... and {len(uncovered) - SHOWN_UNCITED} more (--verbose lists them)" in lines
    assert lines[-2].startswith("FAIL ")  # still last, however many rules go uncited
    for flag in ("--verbose", "-v"):
        status, out, _ = _run("test", str(root), flag)
        assert status == 1
        lines = out.splitlines()
        assert [line for line in lines if line.startswith("  ")] == [
            f"  {r.location} {r.id}" for r in uncovered
        ]
        assert lines[-2].startswith("FAIL ")
