"""The data gate: every oracle the matrix is held to, run in one call (``capmatrix test``).

An oracle is something other than the YAML that says what a cell should be: the expectation cases of
``<matrix>/expect/`` (with their rule coverage), the legacy conditionals they name
(``compare-legacy``), the engines' recorded selections in ``<matrix>/evidence/`` (vLLM and SGLang, per
release, grid and drawn sample), the importers' recorded sources (``tools/import_*.py --check``), the
hardware evidence (``<matrix>/evidence/*_h200.json``) and the generated pages (``docs/``). Each
disagreement names its oracle, the cell, what each side says and the command that refreshes the oracle
when the change of the matrix is intended; :func:`run_gate` returns them as data and prints nothing.

The oracles that live beside the matrix rather than in it (``examples/``, ``tools/``, ``docs/``) are read
from the matrix directory's parent, the checkout: a matrix without them is reported as skipping them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capmatrix._shipped.default import resolve
from capmatrix.authoring._heap import thresholds as collector_thresholds
from capmatrix.authoring._heap import tune as tune_collector
from capmatrix.authoring._yaml import read as _yaml
from capmatrix.authoring.analysis import (
    DEFAULT_TIMEOUT,
    MAX_CALLS,
    ExpectReport,
    LegacyError,
    compare_legacy_file,
    discover_cases,
    run_expectations,
)
from capmatrix.authoring.engine_records import compare_record as _compare_record
from capmatrix.authoring.engine_records import find_records
from capmatrix.authoring.evidence import EVIDENCE_FORMAT
from capmatrix.authoring.evidence import compare as compare_evidence
from capmatrix.authoring.loader import load
from capmatrix.authoring.render import REGENERATE, stale_pages
from capmatrix.errors import CapabilityError, CapabilityErrors, CapmatrixError, echo
from capmatrix.query import KernelQuery

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from capmatrix.matrix import Matrix

__all__ = ["ORACLES", "Disagreement", "GateReport", "LegacyCheck", "OracleResult", "load_legacy_checks",
           "run_gate"]

#: The oracles, in the order they run and print (``expect`` last: its FAIL lines end the report).
ORACLES = ("legacy", "importers", "evidence", "docs", "records", "expect")
#: Disagreements kept per oracle item (the count is always whole).
MAX_SHOWN = 20
#: The probe format of ``tools/probe_kernels.py``'s evidence (one kernel, one verdict per case).
KERNEL_PROBE_FORMAT = "capmatrix-kernel-probe/1"
#: The importers and what rewrites the YAML (or the table) each compares, when the change is intended.
IMPORTERS: dict[str, str] = {
    "import_flashinfer.py": "edit capabilities/kernels/flashinfer.yaml to the table, or re-read the sources: "
                            "python tools/import_flashinfer.py extract --flashinfer-src DIR",
    "import_fmha_v2.py": "python tools/import_fmha_v2.py",
    "import_trtllm_gen.py": "python tools/import_trtllm_gen.py",
    "import_vllm_backends.py": "edit capabilities/kernels/vllm_attention.yaml to the table, or re-read the "
                               "sources: python tools/import_vllm_backends.py extract --vllm-src DIR --write",
    "import_xqa_cubins.py": "python tools/import_xqa_cubins.py",
}
#: The generated pages besides the support matrix: (page, the tool that writes it).
FINDINGS_TOOL = "tools/render_findings.py"


@dataclass(frozen=True, slots=True, kw_only=True)
class Disagreement:
    """One cell where an oracle and the matrix disagree."""

    oracle: str
    #: The cell: a query, a recorded configuration, a page, a table entry.
    cell: str
    #: What the oracle says, and what the matrix says.
    oracle_says: str
    matrix_says: str
    #: The command (or edit) that refreshes the oracle when the matrix's change is intended.
    refresh: str

    def as_dict(self) -> dict[str, str]:
        """JSON-ready form."""
        return {"oracle": self.oracle, "cell": self.cell, "oracle_says": self.oracle_says,
                "matrix_says": self.matrix_says, "refresh": self.refresh}


@dataclass(frozen=True, slots=True, kw_only=True)
class OracleResult:
    """One item of one oracle (a record file, a legacy comparison, an importer, a page...)."""

    oracle: str
    #: What was compared, for a person: ``vllm_0.33.0_selection.json (vLLM 0.33.0 grid)``.
    item: str
    checks: int = 0
    #: How many checks disagree (``disagreements`` holds the first :data:`MAX_SHOWN`).
    failed: int = 0
    disagreements: tuple[Disagreement, ...] = ()
    #: Why the oracle could not be compared at all (an unreadable record, a crashing predicate).
    broken: str | None = None
    #: Why nothing was compared (the oracle is not there): not a failure.
    skipped: str | None = None
    #: One line on what was compared or left out, for the PASS line.
    note: str = ""
    seconds: float = 0.0

    @property
    def status(self) -> str:
        """``PASS``, ``FAIL``, ``BROKEN`` or ``SKIP``."""
        if self.broken is not None:
            return "BROKEN"
        if self.skipped is not None:
            return "SKIP"
        return "FAIL" if self.failed else "PASS"

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {"oracle": self.oracle, "item": self.item, "status": self.status, "checks": self.checks,
                "failed": self.failed, "disagreements": [d.as_dict() for d in self.disagreements],
                "broken": self.broken, "skipped": self.skipped, "note": self.note,
                "seconds": round(self.seconds, 2)}


@dataclass(frozen=True, slots=True, kw_only=True)
class GateReport:
    """Every oracle's result; ``expect`` is the expectation run (None when that oracle was not run)."""

    matrix: str
    results: tuple[OracleResult, ...]
    expect: ExpectReport | None = None
    seconds: float = 0.0
    ran: tuple[str, ...] = ORACLES

    @property
    def failed(self) -> tuple[OracleResult, ...]:
        """The items that disagree."""
        return tuple(r for r in self.results if r.status == "FAIL")

    @property
    def broken(self) -> tuple[OracleResult, ...]:
        """The items that could not be compared."""
        return tuple(r for r in self.results if r.status == "BROKEN")

    def disagreements(self) -> tuple[Disagreement, ...]:
        """Every disagreement shown, oracle by oracle."""
        return tuple(d for r in self.results for d in r.disagreements)

    def exit_status(self) -> int:
        """0 every oracle agrees, 1 one disagrees, 2 one is broken (a case file or a record unreadable)."""
        expect = self.expect.exit_status() if self.expect is not None else 0
        if self.broken or expect == 2:
            return 2
        return 1 if self.failed or expect else 0

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form: the expectation report's keys (as ``capmatrix test`` gave them), ``oracles``."""
        base: dict[str, object] = self.expect.as_dict() if self.expect is not None else {}
        return {**base, "matrix": self.matrix, "status": ("pass", "fail", "broken")[self.exit_status()],
                "seconds": round(self.seconds, 2), "ran": list(self.ran),
                "oracles": [r.as_dict() for r in self.results]}


# --------------------------------------------------------------------------------------------------
# legacy comparisons: ``legacy:`` entries of the expectation files


@dataclass(frozen=True, slots=True, kw_only=True)
class LegacyCheck:
    """A declared comparison: ``function`` (``FILE.py:NAME``, from the checkout) agrees with ``kernel``."""

    path: str
    line: int | None
    function: str
    kernel: str
    where: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    @property
    def location(self) -> str:
        """``file:line``."""
        return f"{self.path}:{self.line}" if self.line is not None else self.path

    def command(self) -> str:
        """The ``capmatrix compare-legacy`` command that shows the comparison's regions."""
        words = ["capmatrix", "compare-legacy", self.function, "--kernel", self.kernel]
        for axis, values in self.where.items():
            words += ["--where", f"{axis}={','.join(str(v) for v in values)}"]
        return " ".join(words)


_LEGACY_KEYS = {"function", "kernel", "where", "expect", "note"}


def load_legacy_checks(path: Path) -> tuple[list[LegacyCheck], list[CapabilityError]]:
    """The ``legacy:`` entries of one expectation file, and their format problems (located)."""
    display = path.as_posix()
    try:
        data, smap = _yaml.read(path, display)
    except CapabilityErrors as exc:
        return [], list(exc.errors)
    if not isinstance(data, dict) or "legacy" not in data:
        return [], []
    raw = data["legacy"]
    if not isinstance(raw, list):
        return [], [smap.error(("legacy",), "'legacy' is a list of comparisons", code="T002")]
    checks: list[LegacyCheck] = []
    problems: list[CapabilityError] = []
    for i, entry in enumerate(raw):
        where_path: tuple[str | int, ...] = ("legacy", i)
        if not isinstance(entry, dict) or not isinstance(entry.get("function"), str) or not isinstance(
                entry.get("kernel"), str):
            problems.append(smap.error(where_path, "a legacy comparison is a mapping with 'function' "
                                       "(FILE.py:NAME) and 'kernel'", code="T002"))
            continue
        unknown = [k for k in entry if k not in _LEGACY_KEYS]
        problems.extend(smap.error((*where_path, k), f"unknown key {echo(k)}", key=True, code="T002",
                                   hint=f"allowed keys: {', '.join(sorted(_LEGACY_KEYS))}") for k in unknown)
        if entry.get("expect", "agree") != "agree":
            problems.append(smap.error((*where_path, "expect"), "a legacy comparison expects 'agree' (the "
                                       "predicate's release is its 'where')", code="T002"))
        where = entry.get("where", {})
        if not isinstance(where, dict):
            problems.append(smap.error((*where_path, "where"), "'where' maps an axis to its values",
                                       code="T002"))
            continue
        if unknown or entry.get("expect", "agree") != "agree":
            continue
        line, _col = smap.locate(where_path)
        checks.append(LegacyCheck(
            path=display, line=line, function=entry["function"], kernel=entry["kernel"],
            where={axis: tuple(v if isinstance(v, list) else [v]) for axis, v in where.items()}))
    return checks, problems


def _legacy(matrix: Matrix, cases: Path, checkout: Path,
            threads: Executor | None) -> list[OracleResult | Callable[[], OracleResult]]:
    checks: list[LegacyCheck] = []
    results: list[OracleResult | Callable[[], OracleResult]] = []
    for file in discover_cases(cases):
        found, problems = load_legacy_checks(file)
        checks.extend(found)
        results.extend(OracleResult(oracle="legacy", item=f"{p.path}:{p.line}", broken=str(p))
                       for p in problems)
    if not checks and not results:
        return [lambda: OracleResult(oracle="legacy", item="compare-legacy",
                                     skipped=f"no 'legacy:' comparison in {cases.as_posix()}")]
    for check in checks:
        def work(c: LegacyCheck = check) -> OracleResult:
            return _timed(lambda: _legacy_one(matrix, c, checkout))

        # each comparison runs its predicate in a child process: threads only wait on them
        results.append(work if threads is None else threads.submit(work).result)
    return results


def _legacy_one(matrix: Matrix, check: LegacyCheck, checkout: Path) -> OracleResult:
    item = f"{check.function} vs {check.kernel}" + "".join(
        f" ({axis}={','.join(map(str, v))})" for axis, v in check.where.items())
    file, _sep, name = check.function.rpartition(":")
    spec = f"{checkout / file}:{name}"
    refresh = (f"if the change is intended, the predicate is another release's code: narrow 'where' of "
               f"{check.location} to the releases it is, or edit {file}; see `{check.command()}`")
    try:
        result, _output = compare_legacy_file(matrix, spec, check.kernel, where=check.where or None,
                                              timeout=DEFAULT_TIMEOUT, max_calls=MAX_CALLS)
    except (LegacyError, CapmatrixError) as exc:
        return OracleResult(oracle="legacy", item=item, broken=f"{check.location}: {exc}")
    shown = [Disagreement(oracle="legacy", cell=area.description, oracle_says="True (supported)",
                          matrix_says="unsupported", refresh=refresh) for area in result.legacy_only]
    shown += [Disagreement(oracle="legacy", cell=area.description, oracle_says="False (unsupported)",
                           matrix_says="supported", refresh=refresh) for area in result.matrix_only]
    return OracleResult(oracle="legacy", item=item, checks=result.calls, failed=len(shown),
                        disagreements=tuple(shown[:MAX_SHOWN]),
                        note=f"{result.calls:,} calls over {', '.join(result.evaluated_axes)}")


# --------------------------------------------------------------------------------------------------
# recorded engine selections


_ENGINES = {"vllm": "vLLM", "sglang": "SGLang"}


def _records(matrix: Matrix, evidence: Path, pool: Executor | None,
             every: int) -> list[Callable[[], OracleResult]]:
    found = find_records(evidence)
    if not found:
        return [lambda: OracleResult(oracle="records", item="engine selections",
                                     skipped=f"no recorded engine selection in {evidence.as_posix()}")]
    if pool is None:
        return [lambda e=e, k=k, p=p: _timed(lambda: _record_one(matrix, e, k, p, every))  # type: ignore[misc]
                for e, k, p in found]
    futures = [pool.submit(_record_task, matrix.root, e, k, p, every) for e, k, p in found]
    return [f.result for f in futures]


#: The matrix a worker process compared records with, by its directory (loaded once per worker).
_WORKER_MATRIX: dict[str, Matrix] = {}


def _record_task(root: str, engine: str, kind: str, path: Path, every: int) -> OracleResult:
    """One record, compared in a worker process (the matrix is loaded there from ``root``)."""
    matrix = _WORKER_MATRIX.get(root)
    if matrix is None:
        matrix = _WORKER_MATRIX[root] = load(root)
    return _timed(lambda: _record_one(matrix, engine, kind, path, every))


def _record_one(matrix: Matrix, engine: str, kind: str, path: Path, every: int) -> OracleResult:
    try:
        result = _compare_record(path, matrix, engine=engine, kind=kind, every=every)
    except (ValueError, KeyError, TypeError, OSError, CapmatrixError) as exc:
        return OracleResult(oracle="records", item=path.name, broken=f"{path.as_posix()}: {exc!r}")
    item = f"{path.name} ({_ENGINES[engine]} {result.version} {kind})"
    refresh = (f"re-record from {_ENGINES[engine]} {result.version}'s code: {result.regenerate}"
               if result.regenerate else f"re-record {path.name} with its recorder")
    shown = tuple(Disagreement(oracle="records", cell=f"{d.cell} [{d.field}]", oracle_says=d.recorded,
                               matrix_says=d.matrix, refresh=refresh) for d in result.disagreements)
    note = f"{result.rows:,} recorded questions"
    if every > 1:
        note += f" (every {_ordinal(every)}: --records-every {every})"
    if result.artefacts:
        note += f", {result.artefacts} left out as the recorder's mm-prefix artefact"
    if result.start_refused:
        note += (f", {result.start_refused} refused at engine start (the recorder asks selection past "
                 "the worker's checks)")
    if result.init_refused:
        note += (f", {result.init_refused} refused at engine start after selection (compared by the "
                 "backend vLLM picked)")
    return OracleResult(oracle="records", item=item, checks=result.checks, failed=result.failed,
                        disagreements=shown[:MAX_SHOWN], note=note)


# --------------------------------------------------------------------------------------------------
# importers: tools/import_*.py --check, run in the checkout


def _importers(checkout: Path) -> list[Callable[[], OracleResult]]:
    tools = checkout / "tools"
    found = [tools / name for name in IMPORTERS if (tools / name).is_file()]
    if not found:
        return [lambda: OracleResult(oracle="importers", item="tools/import_*.py",
                                     skipped=f"no importer in {tools.as_posix()}")]
    return [lambda t=t: _timed(lambda: _importer_one(checkout, t)) for t in found]  # type: ignore[misc]


def _importer_one(checkout: Path, tool: Path) -> OracleResult:
    command = [sys.executable, str(tool), "--check"]
    item = f"tools/{tool.name} --check"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=False,  # noqa: S603
                              timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return OracleResult(oracle="importers", item=item, broken="timed out after 120 s")
    if done.returncode == 0:
        return OracleResult(oracle="importers", item=item, checks=1, note="the YAML holds the recorded table")
    if done.returncode != 1:
        text = (done.stderr or done.stdout).strip().splitlines()
        return OracleResult(oracle="importers", item=item,
                            broken=f"exit {done.returncode}: {text[-1] if text else 'no output'}")
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    refresh = IMPORTERS[tool.name]
    if not any(line.startswith(("---", "+++", "@@")) for line in lines):
        shown = [Disagreement(oracle="importers", cell=line.split(":", 1)[0], oracle_says="the table",
                              matrix_says=line.split(":", 1)[-1].strip(), refresh=refresh)
                 for line in lines]
    else:  # a diff of a generated section (committed -> generated): one disagreement, its changed lines
        changed = [line for line in lines if line[:1] in "+-" and not line.startswith(("---", "+++"))]

        def side(mark: str) -> str:
            return "; ".join(line[1:].strip() for line in changed if line[0] == mark)[:300] or "(nothing)"

        shown = [Disagreement(oracle="importers", cell="the generated section", oracle_says=side("+"),
                              matrix_says=side("-"), refresh=refresh)]
    return OracleResult(oracle="importers", item=item, checks=1, failed=len(shown) or 1,
                        disagreements=tuple(shown[:MAX_SHOWN]))


# --------------------------------------------------------------------------------------------------
# hardware evidence


def _evidence(matrix: Matrix, evidence: Path) -> list[OracleResult]:
    results: list[OracleResult] = []
    for path in sorted(evidence.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            results.append(OracleResult(oracle="evidence", item=path.name, broken=repr(exc)))
            continue
        if not isinstance(data, dict):
            continue
        if data.get("format") == KERNEL_PROBE_FORMAT:
            results.append(_timed(lambda p=path, d=data: _probe_one(matrix, p, d)))  # type: ignore[misc]
        elif data.get("format") == EVIDENCE_FORMAT:
            results.append(_timed(lambda p=path, d=data: _sdpa_one(matrix, p, d)))  # type: ignore[misc]
    if not results:
        return [OracleResult(oracle="evidence", item="hardware evidence",
                             skipped=f"no probe evidence in {evidence.as_posix()}")]
    return results


def _rerun(data: dict[str, Any], path: Path) -> str:
    steps = data.get("rerun")
    if isinstance(steps, list) and steps:
        return "re-probe on the GPU: " + "; ".join(str(s) for s in steps)
    probe = data.get("probe", "tools/probe_kernels.py")
    return f"re-probe on the GPU with {probe} and replace {path.name}"


def _probe_one(matrix: Matrix, path: Path, data: dict[str, Any]) -> OracleResult:
    kernel = data.get("kernel")
    item = f"{path.name} ({kernel}, sm {data.get('environment', {}).get('sm')})"
    if not isinstance(kernel, str) or kernel not in matrix.kernels:
        return OracleResult(oracle="evidence", item=item,
                            broken=f"kernel {kernel!r} of the evidence is not in the matrix")
    refresh = _rerun(data, path)
    shown: list[Disagreement] = []
    failed = 0
    rows = data.get("cases", [])
    for row in rows:
        try:
            verdict = str(resolve(KernelQuery(kernel, **row["query"]), matrix=matrix).verdict)
        except CapmatrixError as exc:
            return OracleResult(oracle="evidence", item=item, broken=f"case {row.get('index')}: {exc}")
        if (verdict == "supported") != (row["outcome"] == "pass"):
            failed += 1
            if len(shown) < MAX_SHOWN:
                query = " ".join(f"{k}={v}" for k, v in row["query"].items())
                shown.append(Disagreement(
                    oracle="evidence", cell=f"{kernel} {query} (case {row.get('index')})",
                    oracle_says=f"the GPU: {row['outcome']}", matrix_says=verdict, refresh=refresh))
    return OracleResult(oracle="evidence", item=item, checks=len(rows), failed=failed,
                        disagreements=tuple(shown), note=f"{len(rows)} probed cases")


def _sdpa_one(matrix: Matrix, path: Path, data: dict[str, Any]) -> OracleResult:
    item = f"{path.name} (sm {data.get('environment', {}).get('sm')})"
    try:
        comparison = compare_evidence(data, matrix)
    except (ValueError, CapmatrixError) as exc:
        return OracleResult(oracle="evidence", item=item, broken=str(exc))
    refresh = f"re-probe on the GPU: python tools/probe_kernels.py (see {path.name}'s 'probe') and replace it"
    shown = tuple(Disagreement(oracle="evidence", cell=f"{d.kernel} {d.case.label()}",
                               oracle_says=f"the GPU: {'usable' if d.observed else 'not usable'}",
                               matrix_says=d.matrix, refresh=refresh) for d in comparison.disagreements)
    return OracleResult(oracle="evidence", item=item, checks=comparison.checks, failed=len(shown),
                        disagreements=shown[:MAX_SHOWN], note=f"{comparison.checks} probed verdicts")


# --------------------------------------------------------------------------------------------------
# generated pages


def _docs(matrix: Matrix, checkout: Path) -> list[OracleResult]:
    docs = checkout / "docs"
    if not docs.is_dir():
        return [OracleResult(oracle="docs", item="docs/", skipped=f"no {docs.as_posix()} beside the matrix")]
    results = [_timed(lambda: _pages_one(matrix, docs))]
    tool = checkout / FINDINGS_TOOL
    if tool.is_file() and (docs / "findings.md").is_file():
        results.append(_timed(lambda: _findings_one(checkout, tool)))
    return results


def _pages_one(matrix: Matrix, docs: Path) -> OracleResult:
    stale = stale_pages(matrix, docs)
    shown = tuple(Disagreement(oracle="docs", cell=f"docs/{name}", oracle_says="the committed page",
                               matrix_says="a fresh render differs: " + diff.splitlines()[0][:200]
                               if diff else "a fresh render differs",
                               refresh=f"make docs (or `{REGENERATE}`), then commit docs/{name}")
                  for name, diff in stale.items())
    return OracleResult(oracle="docs", item="docs/support-matrix.md (capmatrix render --check)", checks=1,
                        failed=len(shown), disagreements=shown)


def _findings_one(checkout: Path, tool: Path) -> OracleResult:
    done = subprocess.run([sys.executable, str(tool), "--check"], cwd=checkout, capture_output=True,  # noqa: S603
                          text=True, check=False, timeout=120)
    item = f"docs/findings.md ({FINDINGS_TOOL} --check)"
    if done.returncode == 0:
        return OracleResult(oracle="docs", item=item, checks=1)
    if done.returncode != 1:
        return OracleResult(oracle="docs", item=item, broken=f"exit {done.returncode}: "
                            f"{(done.stderr or done.stdout).strip()[-300:]}")
    return OracleResult(oracle="docs", item=item, checks=1, failed=1, disagreements=(Disagreement(
        oracle="docs", cell="docs/findings.md", oracle_says="the committed page",
        matrix_says="a fresh render differs", refresh=f"make docs (or `python {FINDINGS_TOOL}`), then commit "
                                                      "docs/findings.md"),))


# --------------------------------------------------------------------------------------------------


def _timed(work: Callable[[], OracleResult]) -> OracleResult:
    start = time.perf_counter()
    result = work()
    return dataclasses.replace(result, seconds=time.perf_counter() - start)


def _expect_results(report: ExpectReport) -> OracleResult:
    shown = tuple(Disagreement(oracle="expect", cell=f"{r.case.location} {r.case.name}",
                               oracle_says=r.case.expect, matrix_says=r.message,
                               refresh=f"if intended, set expect: {r.actual} in {r.case.location}")
                  for r in report.failed)
    broken = "; ".join(str(p) for p in report.problems) or None
    cited = report.total_rules - len(report.uncovered)
    return OracleResult(oracle="expect", item="expectation cases", checks=len(report.results),
                        failed=len(report.failed), disagreements=shown[:MAX_SHOWN], broken=broken,
                        note=f"rule coverage {cited}/{report.total_rules}")


def _keep(holder: list[ExpectReport], report: ExpectReport) -> ExpectReport:
    holder.append(report)
    return report


def run_gate(
    matrix: Matrix,
    *,
    expect: Path | None = None,
    only: Iterable[str] | None = None,
    progress: Callable[[OracleResult], None] | None = None,
    jobs: int = 1,
    records_every: int = 1,
) -> GateReport:
    """Run every oracle (or those of ``only``, names of :data:`ORACLES`) against ``matrix``.

    ``expect`` is the case directory (default ``<matrix>/expect``); the checkout is the matrix
    directory's parent. ``progress`` is called with each item's result, in the order of
    :data:`ORACLES`. With ``jobs`` > 1 the records are compared in that many worker processes (each
    loads the matrix from its directory) and the legacy comparisons run side by side.
    ``records_every`` > 1 compares every that-many-th question of each record (a quick gate; the
    default compares them all).

    :raises CapmatrixError: for an unknown oracle name, or a ``records_every`` below 1.
    """
    if type(records_every) is not int or records_every < 1:
        raise CapmatrixError(f"records_every: a whole number >= 1, got {records_every!r}")
    chosen = tuple(ORACLES) if only is None else tuple(only)
    unknown = [name for name in chosen if name not in ORACLES]
    if unknown:
        raise CapmatrixError(f"unknown oracle {', '.join(map(repr, unknown))}: the oracles are "
                             f"{', '.join(ORACLES)}")
    root = Path(matrix.root)
    checkout = root.parent
    cases = expect if expect is not None else root / "expect"
    evidence = root / "evidence"
    start = time.perf_counter()
    results: list[OracleResult] = []
    holder: list[ExpectReport] = []
    with contextlib.ExitStack() as stack:
        pool = threads = None
        if jobs > 1:
            collector_thresholds()  # a bad CAPMATRIX_GC is refused here, not in each worker
            spawn = multiprocessing.get_context("spawn")
            pool = stack.enter_context(
                ProcessPoolExecutor(jobs, mp_context=spawn, initializer=tune_collector))
            threads = stack.enter_context(ThreadPoolExecutor(jobs))
        # the slow oracles start first, in the pools; each item is then awaited in the order of ORACLES
        pending: dict[str, Sequence[OracleResult | Callable[[], OracleResult]]] = {}
        if "records" in chosen:
            pending["records"] = _records(matrix, evidence, pool, records_every)
        if "legacy" in chosen:
            pending["legacy"] = _legacy(matrix, cases, checkout, threads)
        steps: dict[str, Callable[[], Sequence[OracleResult | Callable[[], OracleResult]]]] = {
            "importers": lambda: _importers(checkout),
            "evidence": lambda: _evidence(matrix, evidence),
            "docs": lambda: _docs(matrix, checkout),
            "expect": lambda: [lambda: _timed(lambda: _expect_results(
                _keep(holder, run_expectations(matrix, cases))))],
        }
        for name in ORACLES:
            if name not in chosen:
                continue
            items = pending[name] if name in pending else steps[name]()
            for item in items:
                result = item if isinstance(item, OracleResult) else item()
                if progress is not None:
                    progress(result)
                results.append(result)
    report = holder[0] if holder else None
    return GateReport(matrix=root.as_posix(), results=tuple(results), expect=report,
                      seconds=time.perf_counter() - start, ran=tuple(n for n in ORACLES if n in chosen))


def oracle_names() -> Sequence[str]:
    """The oracles' names, in their order."""
    return ORACLES


def _ordinal(n: int) -> str:
    """``8th``, ``2nd``, ``23rd``, ``11th``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
