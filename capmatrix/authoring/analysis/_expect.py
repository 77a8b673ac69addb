"""Expectation tests: YAML cases ``query -> expected verdict (or kernel)``, with rule coverage.

Each case is run against a matrix; the report also lists the rules no case cites.

Cases live in ``<matrix>/expect/*.yaml`` (the loader skips that directory)::

    cases:
      - name: Llama one-model spec-dec on SM120 keeps XQA (PR #10765)
        kernel: xqa
        query: {model: llama, sm: 120, spec_dec: one_model}
        expect: supported             # supported | unsupported | depends
        because: [xqa.hmma_multi_token]
      - role: trtllm_generation
        query: {model: deepseek_v3, sm: 120, spec_dec: one_model, phase: generation}
        expect: fmha_v2               # for a role: the kernel selected, or none

See ``docs/analysis.md`` for the full format.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capmatrix._shipped.default import resolve, select
from capmatrix.authoring._yaml import read as _yaml
from capmatrix.errors import CapabilityError, CapabilityErrors, InvalidQuery, echo
from capmatrix.query import ANY, KernelQuery
from capmatrix.resolver import ReasonKind, Verdict

if TYPE_CHECKING:
    from capmatrix.matrix import Matrix
    from capmatrix.model import Rule
    from capmatrix.resolver import Resolution

__all__ = [
    "Case",
    "CaseResult",
    "ExpectReport",
    "discover_cases",
    "load_cases",
    "run_case",
    "run_expectations",
]

_KEYS = {"name", "kernel", "role", "query", "expect", "because", "note"}
_VERDICTS = {str(v) for v in Verdict}
#: Reason kinds that count as a case citing a rule (near misses do not).
_CITING = {ReasonKind.GRANT, ReasonKind.EXCLUDE}


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One expectation: a kernel (verdict expected) or a role (selected kernel expected)."""

    path: str
    line: int | None
    name: str
    kernel: str | None
    role: str | None
    query: dict[str, Any]
    expect: str
    because: tuple[str, ...] = ()

    @property
    def location(self) -> str:
        """``file:line``."""
        return f"{self.path}:{self.line}" if self.line is not None else self.path


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """The outcome of one case; ``cited`` are the rules its resolutions cite."""

    case: Case
    passed: bool
    actual: str
    message: str
    cited: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "name": self.case.name,
            "file": self.case.path,
            "line": self.case.line,
            "passed": self.passed,
            "expected": self.case.expect,
            "actual": self.actual,
            "message": self.message,
            "cited": list(self.cited),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectReport:
    """Every case's result, the format problems of the case files, and the uncovered rules."""

    results: tuple[CaseResult, ...]
    problems: tuple[CapabilityError, ...]
    uncovered: tuple[Rule, ...]
    total_rules: int

    @property
    def failed(self) -> tuple[CaseResult, ...]:
        """The failing cases."""
        return tuple(r for r in self.results if not r.passed)

    def exit_status(self) -> int:
        """0 all passed, 1 some case failed, 2 a case file is malformed or no case was found."""
        if self.problems:
            return 2
        return 1 if self.failed else 0

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "passed": sum(1 for r in self.results if r.passed),
            "failed": len(self.failed),
            "problems": [p.as_dict() for p in self.problems],
            "cases": [r.as_dict() for r in self.results],
            "coverage": {
                "rules": self.total_rules,
                "cited": self.total_rules - len(self.uncovered),
                "uncovered": [
                    {"rule": r.id, "file": r.location.path, "line": r.location.line}
                    for r in self.uncovered
                ],
            },
        }


# --------------------------------------------------------------------------------------------------
# Reading case files


def discover_cases(directory: Path) -> list[Path]:
    """The ``*.yaml`` / ``*.yml`` entries of an expectation directory that are not directories, sorted.

    A FIFO, a device or a broken link so named is listed too: reading it reports it (E001), where
    skipping it would drop its cases from the run unseen.
    """
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.rglob("*") if p.suffix in {".yaml", ".yml"} and not p.is_dir())


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def load_cases(path: Path, *, root: Path | None = None) -> tuple[list[Case], list[CapabilityError]]:
    """Read one case file; return its cases and its format problems (located).

    A file that resolves outside ``root`` (a symbolic link leaving the case directory) is not read.
    """
    display = _display(path)
    if root is not None and not path.resolve().is_relative_to(root.resolve()):
        return [], [
            CapabilityError(
                display, None, None, "",
                "this file is a symbolic link that leads outside the case directory; it is not read",
                hint="copy the file into the case directory, or link only within it", code="T001",
            )
        ]
    try:
        data, smap = _yaml.read(path, display)
    except CapabilityErrors as exc:
        return [], list(exc.errors)
    problems = list(smap.problems)
    if isinstance(data, dict) and "legacy" in data and "cases" not in data:
        return [], problems  # legacy comparisons only: read by capmatrix.authoring.gate
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        problems.append(smap.error((), "an expectation file is a mapping with a 'cases' list",
                                   code="T001"))
        return [], problems
    problems.extend(
        smap.error((key,), f"unknown key {echo(key)}", key=True, code="T001")
        for key in data
        if key not in {"cases", "description", "legacy"}
    )
    found = [_case(raw, ("cases", i), smap, problems) for i, raw in enumerate(data["cases"])]
    return [case for case in found if case is not None], problems


def _case(
    raw: Any,  # noqa: ANN401 - plain YAML data
    path: tuple[str | int, ...],
    smap: _yaml.SourceMap,
    problems: list[CapabilityError],
) -> Case | None:
    before = len(problems)

    def fail(where: tuple[str | int, ...], message: str, **kw: Any) -> None:  # noqa: ANN401
        problems.append(smap.error(where, message, code="T002", **kw))

    if not isinstance(raw, dict):
        fail(path, "a case is a mapping (kernel or role, query, expect)")
        return None
    for key in raw:
        if key not in _KEYS:
            fail((*path, key), f"unknown key {echo(key)}", key=True,
                 hint=f"allowed keys: {', '.join(sorted(_KEYS))}")
    kernel, role = raw.get("kernel"), raw.get("role")
    if (kernel is None) == (role is None):
        fail(path, "a case names exactly one of 'kernel' or 'role'")
    for key in ("kernel", "role", "name", "expect", "note"):
        if key in raw and not isinstance(raw[key], str):
            fail((*path, key), f"{echo(key)} must be a string")
    query = raw.get("query", {})
    if not isinstance(query, dict):
        fail((*path, "query"), "'query' is a mapping of axis (or model) to value")
        query = {}
    for key, value in query.items():
        if not isinstance(value, (str, int)) or (key == "model" and not isinstance(value, str)):
            fail((*path, "query", key), f"{echo(value)} is not a value (use a string, int or bool)")
    expect = raw.get("expect")
    if expect is None:
        fail(path, "a case needs 'expect'")
    elif kernel is not None and isinstance(expect, str) and expect not in _VERDICTS:
        fail((*path, "expect"), f"a kernel case expects one of {', '.join(sorted(_VERDICTS))}",
             hint="a role case expects a kernel name or none")
    because = raw.get("because", [])
    if not isinstance(because, list) or not all(isinstance(b, str) for b in because):
        fail((*path, "because"), "'because' is a list of rule ids")
        because = []
    if len(problems) > before:
        return None
    line, _col = smap.locate(path)
    target = kernel if kernel is not None else role
    shown = ", ".join(f"{k}={v}" for k, v in query.items())
    return Case(
        path=smap.path,
        line=line,
        name=raw.get("name") or f"{target} ({shown})",
        kernel=kernel,
        role=role,
        query=dict(query),
        expect=expect,  # type: ignore[arg-type]
        because=tuple(because),
    )


# --------------------------------------------------------------------------------------------------
# Running


def _query(case: Case) -> KernelQuery:
    axes = {k: (ANY if v == "*" else v) for k, v in case.query.items() if k != "model"}
    return KernelQuery(case.kernel, model=case.query.get("model"), **axes)


def _cited(resolutions: list[Resolution]) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for resolution in resolutions:
        for reason in resolution.reasons:
            if reason.kind in _CITING and reason.rule_id:
                out[reason.rule_id] = None
    return tuple(out)


def run_case(matrix: Matrix, case: Case) -> CaseResult:
    """Run one case against ``matrix``."""
    try:
        query = _query(case)
        if case.kernel is not None:
            resolution = resolve(query, matrix=matrix)
            actual = str(resolution.verdict)
            resolutions = [resolution]
        else:
            selection = select(case.role, query, matrix=matrix)  # type: ignore[arg-type]
            actual = selection.kernel or "none"
            resolutions = list(selection.trace)
    except InvalidQuery as exc:
        return CaseResult(case=case, passed=False, actual="error", message=str(exc))
    cited = _cited(resolutions)
    if actual != case.expect:
        why = "; ".join(
            r.message for res in resolutions for r in res.reasons if r.kind in _CITING
        )
        return CaseResult(
            case=case, passed=False, actual=actual, cited=cited,
            message=f"expected {case.expect}, got {actual}" + (f" ({why})" if why else ""),
        )
    missing = [b for b in case.because if b not in cited]
    if missing:
        return CaseResult(
            case=case, passed=False, actual=actual, cited=cited,
            message=f"{actual} as expected, but not because of {', '.join(missing)} "
            f"(cited: {', '.join(cited) or 'nothing'})",
        )
    return CaseResult(case=case, passed=True, actual=actual, cited=cited, message="ok")


def run_expectations(matrix: Matrix, directory: Path | None = None) -> ExpectReport:
    """Run every case under ``directory`` (default ``<matrix root>/expect``) against ``matrix``."""
    where = directory if directory is not None else Path(matrix.root) / "expect"
    results: list[CaseResult] = []
    problems: list[CapabilityError] = []
    files = discover_cases(where)
    for file in files:
        cases, found = load_cases(file, root=where)
        problems.extend(found)
        results.extend(run_case(matrix, case) for case in cases)
    if not results and not problems:
        # No case at all is a typo in a CI path far more often than an intent: never a green run.
        searched = f"{_display(where)}/**/*.yaml and *.yml"
        if files:
            detail = f"{len(files)} case file{'' if len(files) == 1 else 's'} with no case"
        elif where.is_dir():
            detail = "no case file"
        else:
            detail = "the directory does not exist"
        problems.append(CapabilityError(
            _display(where), None, None, "",
            f"no expectation cases found (searched {searched}: {detail})",
            hint="check the path; pass the case directory with --expect DIR", code="T003",
        ))
    cited: set[str] = set()
    for result in results:
        cited.update(result.cited)
        cited.update(result.case.because)
    rules = matrix.rules
    uncovered = tuple(r for r in rules if r.id not in cited)
    return ExpectReport(
        results=tuple(results),
        problems=tuple(sorted(problems, key=CapabilityError.sort_key)),
        uncovered=uncovered,
        total_rules=len(rules),
    )
