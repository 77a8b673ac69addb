"""CLI commands of the analyses: ``check``, ``diff``, ``compare-legacy`` and ``test``, with their renderers.

The analyses return data (:mod:`capmatrix.authoring.analysis`); this module only parses arguments, reads git
revisions for ``diff REV`` and renders text, JSON or Markdown.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from capmatrix.authoring._atomic import write_text_atomic
from capmatrix.authoring._files import read_json
from capmatrix.authoring.analysis import (
    DEFAULT_TIMEOUT,
    MAX_CALLS,
    Change,
    LegacyError,
    Severity,
    Witness,
    check_path,
    compare_legacy_file,
    diff,
    parse_where,
    release_diff,
)
from capmatrix.authoring.cli._common import (
    EXIT_OK,
    FROM_WORKING_TREE,
    MATRIX_DEFAULT_HELP,
    add_format_option,
    add_matrix_option,
    announce_matrix,
    brief_load_errors,
    choose_matrix,
    print_json,
)
from capmatrix.authoring.cli._git import extract_revision
from capmatrix.authoring.cli._github import finding_annotation
from capmatrix.authoring.gate import ORACLES, run_gate
from capmatrix.authoring.loader import load
from capmatrix.errors import CapmatrixError, InvalidArgument

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping, Sequence

    from capmatrix.authoring.analysis import (
        Area,
        CheckResult,
        ExpectReport,
        Finding,
        LegacyComparison,
        MatrixDiff,
        PredicateOutput,
        ReleaseDiff,
    )
    from capmatrix.authoring.gate import GateReport, OracleResult
    from capmatrix.matrix import Matrix

__all__ = [
    "BASELINE_FORMAT",
    "BASELINE_NAME",
    "apply_baseline",
    "baseline_text",
    "cmd_check",
    "cmd_compare_legacy",
    "cmd_diff",
    "cmd_test",
    "configure_check",
    "configure_compare_legacy",
    "configure_diff",
    "configure_test",
    "gate_summary",
    "read_baseline",
    "render_check",
    "render_diff_markdown",
    "render_diff_text",
    "render_legacy",
    "render_oracle",
    "render_test",
]

#: Regions shown per finding or change in text and Markdown (JSON always has all of them).
SHOWN_REGIONS = 5


def _command(witness: Witness, matrix: str | None) -> str:
    return witness.command(matrix)


def _query_command(kind: str, name: str, area: Area, matrix: str | None) -> str:
    witness = Witness.at(area.space, area.witness, **{kind: name})
    return _command(witness, matrix)


# --------------------------------------------------------------------------------------------------
# check


#: The ``format`` of a findings baseline file (``capmatrix check --write-baseline``).
BASELINE_FORMAT = "capmatrix-check-baseline"
BASELINE_VERSION = 1
#: The baseline a matrix carries, in its own directory: ``check`` uses it unless told otherwise.
BASELINE_NAME = "check-baseline.json"


def configure_check(parser: argparse.ArgumentParser, _argv: Sequence[str]) -> None:
    """Arguments of ``capmatrix check``."""
    parser.add_argument("path", nargs="?", help=MATRIX_DEFAULT_HELP)
    add_format_option(parser, "findings")
    parser.add_argument("--strict", action="store_true", help="fail on warnings too")
    known = parser.add_mutually_exclusive_group()
    known.add_argument(
        "--baseline", metavar="FILE",
        help="hide the findings FILE records (by key) and judge only the others: with --strict, "
             "only a new warning fails",
    )
    known.add_argument(
        "--write-baseline", metavar="FILE",
        help="record every finding of today in FILE (JSON, one entry per finding key) and exit 0; "
             "the 'why' a rewritten FILE gave a key is kept",
    )
    known.add_argument(
        "--no-baseline", action="store_true",
        help=f"judge every finding, also those the matrix's own {BASELINE_NAME} accepts",
    )


def baseline_text(result: CheckResult, why: Mapping[str, str] | None = None) -> str:
    """The baseline file of ``result``: each finding's key, code, severity, message and ``why[key]``.

    ``why`` holds the reasons findings are accepted; a key without one gets no ``why`` field.
    """
    why = why or {}
    entries = sorted(
        ({"key": f.key, "code": f.code, "severity": str(f.severity), "message": f.message,
          **({"why": why[f.key]} if f.key in why else {})}
         for f in result.findings),
        key=lambda e: e["key"],
    )
    data = {"format": BASELINE_FORMAT, "version": BASELINE_VERSION, "findings": entries}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def read_baseline(path: str) -> frozenset[str]:
    """The finding keys a baseline file records.

    :raises capmatrix.errors.InvalidFile: when the file cannot be read (not a regular file, too large, not
        UTF-8, not strict JSON, nested too deeply), with what to do.
    :raises CapmatrixError: when it is JSON but not a baseline (with what to do).
    """
    return frozenset(_baseline_entries(path))


def _baseline_entries(path: str) -> dict[str, str | None]:
    """Each key a baseline file records, with its ``why`` (None without one)."""
    redo = f"write one with `capmatrix check --write-baseline {path}`"
    data = read_json(path, path, hint=redo)
    if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT:
        raise CapmatrixError(
            f'{path}: not a capmatrix check baseline (no "format": "{BASELINE_FORMAT}"); {redo}'
        )
    if data.get("version") != BASELINE_VERSION:
        raise CapmatrixError(f"{path}: baseline version {data.get('version')!r} is not "
                             f"{BASELINE_VERSION}; {redo}")
    findings = data.get("findings")
    if not isinstance(findings, list) or not all(
        isinstance(e, dict) and isinstance(e.get("key"), str) for e in findings
    ):
        raise CapmatrixError(f'{path}: "findings" must be a list of objects with a "key"; {redo}')
    return {e["key"]: e["why"] if isinstance(e.get("why"), str) else None for e in findings}


def _kept_whys(path: str) -> dict[str, str]:
    """The ``why`` of each key an existing baseline at ``path`` gives (none when there is no such file)."""
    if not Path(path).is_file():
        return {}
    return {key: why for key, why in _baseline_entries(path).items() if why is not None}


def apply_baseline(result: CheckResult, known: frozenset[str]) -> tuple[CheckResult, int, int]:
    """``result`` without the findings ``known`` records; how many were hidden; how many keys are gone."""
    kept = tuple(f for f in result.findings if f.key not in known)
    present = {f.key for f in result.findings}
    return (dataclasses.replace(result, findings=kept), len(result.findings) - len(kept),
            len(known - present))


def _baseline_note(hidden: int, gone: int, path: str) -> str:
    note = f"; {hidden} known finding{'' if hidden == 1 else 's'} hidden (baseline {path})"
    if gone:
        note += (f"; {gone} recorded finding{' is' if gone == 1 else 's are'} gone "
                 "(rewrite the baseline with --write-baseline)")
    return note


def render_finding(finding: Finding, matrix: str | None = None) -> list[str]:
    """Text lines of one finding: location, severity, code, message, the rest indented."""
    first = finding.locations[0] if finding.locations else None
    where = f"{first}: " if first else ""
    lines = [f"{where}{finding.severity} {finding.code} {finding.title}: {finding.message}"]
    lines.extend(f"    see {loc}" for loc in finding.locations[1:])
    if finding.releases_text():
        lines.append(f"    releases: {finding.releases_text()}")
    shown = finding.regions[:SHOWN_REGIONS]
    if finding.code == "C108" or len(finding.regions) > 1:
        lines.extend(f"    region: {a.description}" for a in shown)
        if len(finding.regions) > len(shown):
            lines.append(f"    ... and {len(finding.regions) - len(shown)} more regions (--json)")
    if finding.witness is not None:
        lines.append(f"    witness: {_command(finding.witness, matrix)}")
    return lines


def render_check(result: CheckResult, matrix: str | None = None, *, note: str = "") -> str:
    """The text report of ``capmatrix check`` (``note`` ends its last line: what a baseline hid)."""
    lines = []
    for finding in result.findings:
        lines.extend(render_finding(finding, matrix))
    counts = ", ".join(
        f"{result.count(s)} {s}{'' if result.count(s) == 1 else 's'}" for s in Severity
    )
    state = "" if result.loaded else " (the matrix did not load)"
    lines.append(f"capmatrix check: {counts}{state}{note}")
    return "\n".join(lines)


def cmd_check(args: argparse.Namespace, _prepared: None, out: TextIO, err: TextIO) -> int:
    """Check a matrix: exit 0 clean, 1 with errors (or warnings under --strict), 2 unloadable.

    With ``--baseline FILE`` the findings FILE records are left out first; ``--write-baseline FILE``
    records today's findings instead of judging them.
    """
    choice = choose_matrix(args.path)
    announce_matrix(choice, err)
    baseline = args.baseline
    own = Path(choice.path) / BASELINE_NAME
    if (baseline is None and args.write_baseline is None and not args.no_baseline
            and (own.is_symlink() or own.exists())):  # a FIFO or a device there is refused, not skipped
        baseline = str(own)  # the findings the matrix's maintainers accepted, with why
    known = read_baseline(baseline) if baseline is not None else None
    result = check_path(choice.path)
    if not result.loaded and args.brief_load_errors:
        err.write(brief_load_errors(len(result.findings), str(result.findings[0].locations[0])) + "\n")
        return result.exit_status()
    if args.write_baseline is not None:
        if not result.loaded:
            out.write(render_check(result, choice.witness_matrix) + "\n")
            err.write("capmatrix: no baseline written: the matrix did not load\n")
            return result.exit_status()
        write_text_atomic(args.write_baseline, baseline_text(result, _kept_whys(args.write_baseline)))
        out.write(f"wrote {len(result.findings)} findings to {args.write_baseline}\n")
        return EXIT_OK
    note, extra = "", {}
    if known is not None and result.loaded:
        assert baseline is not None  # noqa: S101 - known comes from it
        result, hidden, gone = apply_baseline(result, known)
        note = _baseline_note(hidden, gone, baseline)
        extra = {"baseline": {"file": baseline, "hidden": hidden, "gone": gone}}
    if args.format == "json":
        print_json({**result.as_dict(args.path, lazy=True), **extra}, out)
    elif args.format == "github":
        for finding in result.findings:
            witness = (None if finding.witness is None
                       else _command(finding.witness, choice.witness_matrix))
            out.write(finding_annotation(finding, witness) + "\n")
        out.write(render_check(result, choice.witness_matrix, note=note).splitlines()[-1] + "\n")
    else:
        out.write(render_check(result, choice.witness_matrix, note=note) + "\n")
    return result.exit_status(strict=args.strict)


# --------------------------------------------------------------------------------------------------
# diff


def configure_diff(parser: argparse.ArgumentParser, _argv: Sequence[str]) -> None:
    """Arguments of ``capmatrix diff``."""
    parser.add_argument("old", help="matrix directory or git revision (e.g. HEAD~1)")
    parser.add_argument(
        "new", nargs="?",
        help="matrix directory or git revision (default: as --matrix of other commands: "
             "$CAPMATRIX_MATRIX, else capabilities/ here or above, else the shipped one)",
    )
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print JSON")
    form.add_argument("--markdown", action="store_true", help="print a Markdown PR comment")
    parser.add_argument(
        "--exit-code", action="store_true", help="exit 1 when the matrices answer differently"
    )
    parser.add_argument(
        "--engine", metavar="ENGINE",
        help="compare two releases of ENGINE in one matrix: OLD and NEW are its versions "
             "(`capmatrix list versions`), the matrix is --matrix's",
    )
    add_matrix_option(parser)


def _open_matrix(spec: str | None, stack: ExitStack, err: TextIO) -> tuple[Matrix, str]:
    if spec is None:
        choice = choose_matrix(None)
        announce_matrix(choice, err)
        label = "working tree" if choice.source == FROM_WORKING_TREE else str(choice.path)
        return load(choice.path), label
    path = Path(spec)
    if path.is_dir():
        return load(path), spec
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="capmatrix-diff-")))
    root = extract_revision(spec, tmp)
    return load(root), spec


def _more(areas: Sequence[Area], total: int) -> str:
    """``12 more (--json)``, or ``4,095 more boxes (the first 1,000 in --json)`` past the bound."""
    shown = min(len(areas), SHOWN_REGIONS)
    if total > len(areas):
        return f"{total - shown:,} more boxes (the first {len(areas):,} in --json)"
    return f"{len(areas) - shown} more (--json)"


def _area_lines(
    areas: Sequence[Area], total: int, kind: str, name: str, matrix: str | None, indent: str, mark: str
) -> list[str]:
    lines = []
    for area in areas[:SHOWN_REGIONS]:
        lines.append(f"{indent}{mark} {area.description}")
        lines.append(f"{indent}    witness: {_query_command(kind, name, area, matrix)}")
    if max(total, len(areas)) > min(len(areas), SHOWN_REGIONS):
        lines.append(f"{indent}... and {_more(areas, total)}")
    return lines


def render_diff_text(result: MatrixDiff, matrix: str | None = None, *, note: str = "") -> str:
    """The text report of ``capmatrix diff`` (``note``: a line under the heading)."""
    lines = [f"capmatrix diff {result.old} -> {result.new}"]
    if note:
        lines.append(note)
    lines.extend(f"  {note}" for note in result.axes)
    same_k = same_r = 0
    for k in result.kernels:
        if k.change is Change.EQUIVALENT and k.presence == "both":
            same_k += 1
            continue
        extra = "" if k.presence == "both" else f" (kernel {k.presence})"
        lines.append(f"kernel {k.kernel}: {k.change}{extra}")
        lines.extend(_area_lines(k.gained, k.gained_total, "kernel", k.kernel, matrix, "  ", "+ gained:"))
        lines.extend(_area_lines(k.lost, k.lost_total, "kernel", k.kernel, matrix, "  ", "- lost:"))
    for r in result.roles:
        if not r.changed:
            same_r += 1
            continue
        lines.append(f"role {r.role}: selection changes (coverage {r.coverage})")
        for shift in r.shifts:
            lines.append(f"  {shift.old or 'none'} -> {shift.new or 'none'}:")
            lines.extend(_area_lines(shift.areas, shift.total, "role", r.role, matrix, "    ", "*"))
    lines.append(f"unchanged: {same_k} kernels, {same_r} roles")
    return "\n".join(lines)


def _md_areas(areas: Sequence[Area], total: int, kind: str, name: str) -> list[str]:
    lines = []
    for area in areas[:SHOWN_REGIONS]:
        lines.append(f"- `{area.description}`  ")
        lines.append(f"  witness: `{_query_command(kind, name, area, None)}`")
    if max(total, len(areas)) > min(len(areas), SHOWN_REGIONS):
        lines.append(f"- ... and {_more(areas, total).replace('--json', '`capmatrix diff --json`')}")
    return lines


def render_diff_markdown(result: MatrixDiff, extra: Sequence[str] = ()) -> str:
    """A ready-to-post PR comment (``extra``: lines after the kernels and roles)."""
    lines = [f"### capmatrix diff: `{result.old}` → `{result.new}`", ""]
    if not result.changed:
        lines.append("No semantic change: every kernel and role answers exactly as before.")
        return "\n".join([*lines, *(["", *extra] if extra else [])])
    if result.axes:
        lines.append("**Universe:** " + "; ".join(result.axes))
        lines.append("")
    changed = [k for k in result.kernels if k.change is not Change.EQUIVALENT or k.presence != "both"]
    if changed:
        lines += ["| kernel | change | gained | lost |", "|---|---|---|---|"]
        for k in changed:
            extra = "" if k.presence == "both" else f" ({k.presence})"
            lines.append(
                f"| `{k.kernel}` | **{k.change}**{extra} | {k.gained_total or '-'} | "
                f"{k.lost_total or '-'} |"
            )
        lines.append("")
    for k in changed:
        lines.append(f"#### `{k.kernel}`: {k.change}")
        if k.gained:
            gained = _md_areas(k.gained, k.gained_total, "kernel", k.kernel)
            lines += ["", "**Gained** (now supported):", *gained]
        if k.lost:
            lost = _md_areas(k.lost, k.lost_total, "kernel", k.kernel)
            lines += ["", "**Lost** (no longer supported):", *lost]
        lines.append("")
    for r in result.roles:
        if not r.changed:
            continue
        lines.append(f"#### role `{r.role}`: selection changes (coverage {r.coverage})")
        for shift in r.shifts:
            lines += ["", f"`{shift.old or 'none'}` → `{shift.new or 'none'}`:"]
            lines += _md_areas(shift.areas, shift.total, "role", r.role)
        lines.append("")
    same_k = sum(1 for k in result.kernels if k not in changed)
    same_r = sum(1 for r in result.roles if not r.changed)
    lines.extend(extra)
    if extra:
        lines.append("")
    lines.append(f"<sub>{same_k} kernels and {same_r} roles unchanged.</sub>")
    return "\n".join(lines)


def _release_diff(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``capmatrix diff --engine ENGINE OLD NEW``: two releases of one engine in one matrix."""
    if args.new is None:
        raise InvalidArgument("NEW", None, f"a second release of {args.engine} to compare with {args.old}")
    choice = choose_matrix(args.matrix)
    announce_matrix(choice, err)
    result = release_diff(load(choice.path), args.engine, args.old, args.new)
    if args.json:
        print_json(result.as_dict(lazy=True), out)
    elif args.markdown:
        out.write(render_diff_markdown(result.matrix, _selection_markdown(result)) + "\n")
    else:
        out.write(render_diff_text(result.matrix, note=_release_note(result)) + "\n")
        out.writelines(line + "\n" for line in _selection_lines(result))
    return 1 if args.exit_code and result.changed else 0


def _release_note(result: ReleaseDiff) -> str:
    axis = f"--engine-version {result.engine}="
    return (f"  (the gates, kernels and roles of {result.engine}; a witness asks one release with "
            f"{axis}{result.old} or {axis}{result.new})")


def _selection_lines(result: ReleaseDiff) -> list[str]:
    if not result.selections:
        return ["models: no model of models.yaml changes its selection on any GPU of gpus.yaml"]
    lines = [f"models: {len(result.selections)} selections change (models.yaml x gpus.yaml)"]
    lines.extend(f"  {change.describe()}" for change in result.selections)
    return lines


def _selection_markdown(result: ReleaseDiff) -> list[str]:
    if not result.selections:
        return ["No model of `models.yaml` changes its selection on any GPU of `gpus.yaml`."]
    lines = ["#### Your model's selection", "", "| model | role | from | to | GPUs |",
             "|---|---|---|---|---|"]
    for c in result.selections:
        gpus = ", ".join(f"{name} (sm {sm})" for _key, name, sm in c.gpus)
        lines.append(f"| `{c.model}` | `{c.role}` | `{c.old or 'none'}` | `{c.new or 'none'}` | {gpus} |")
    return lines


def cmd_diff(args: argparse.Namespace, _prepared: None, out: TextIO, err: TextIO) -> int:
    """Compare two matrices, or two engine releases; exit 0 (or 1 with --exit-code when they differ)."""
    if args.engine is not None:
        return _release_diff(args, out, err)
    if args.matrix is not None:
        raise InvalidArgument("--matrix", args.matrix, "--engine with it (two matrices are OLD and NEW)")
    with ExitStack() as stack:
        old, old_label = _open_matrix(args.old, stack, err)
        new, new_label = _open_matrix(args.new, stack, err)
        result = diff(old, new, old_label=old_label, new_label=new_label)
    if args.json:
        print_json(result.as_dict(lazy=True), out)
    elif args.markdown:
        out.write(render_diff_markdown(result) + "\n")
    else:
        out.write(render_diff_text(result) + "\n")
    return 1 if args.exit_code and result.changed else 0


# --------------------------------------------------------------------------------------------------
# compare-legacy


#: What ``capmatrix compare-legacy --help`` says first: the file is code, and it runs.
LEGACY_DESCRIPTION = (
    "Compare a legacy predicate with a kernel. FILE.py is imported and FUNCTION is called (in a "
    "separate process, with a timeout): this EXECUTES the file, so run only files you trust. "
    "The predicate's own output goes to stderr, never into the report."
)


def configure_compare_legacy(parser: argparse.ArgumentParser, _argv: Sequence[str]) -> None:
    """Arguments of ``capmatrix compare-legacy``."""
    parser.description = LEGACY_DESCRIPTION
    parser.add_argument(
        "function", metavar="FILE.py:FUNCTION",
        help="the legacy predicate; the file is executed (imported) in a child process",
    )
    parser.add_argument("--kernel", required=True, help="kernel (or gate) to compare with")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--where", action="append", default=[], metavar="AXIS=V1,V2",
        help="restrict the universe (repeatable)",
    )
    parser.add_argument("--matrix", metavar="DIR", help=MATRIX_DEFAULT_HELP)
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
        help="stop the predicate after this many seconds, import included "
             f"(default: {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--max-calls", type=int, default=MAX_CALLS, metavar="N",
        help=f"refuse, before calling, comparisons that need more calls (default: {MAX_CALLS})",
    )


def _report_output(output: PredicateOutput | None, err: TextIO) -> None:
    """Write what the predicate printed to our stderr, marked as its own."""
    if not output:
        return
    for stream, text in (("stdout", output.stdout), ("stderr", output.stderr)):
        if text:
            err.write(f"capmatrix: the predicate wrote to its {stream}:\n")
            err.writelines(f"  | {line}\n" for line in text.splitlines())


def render_legacy(result: LegacyComparison, matrix: str | None = None) -> str:
    """The text report of ``capmatrix compare-legacy``."""
    lines = [
        f"{result.function} vs kernel {result.kernel}: "
        + ("agree everywhere" if result.agree else "disagree"),
        (
            f"  evaluated over {', '.join(result.evaluated_axes) or 'no axis'} "
            f"({result.calls} calls)"
        ),
    ]
    if result.where:
        shown = "; ".join(f"{k} in {list(v)}" for k, v in result.where.items())
        lines.append(f"  within {shown}")
    if result.legacy_only:
        lines.append("legacy True, matrix unsupported:")
        only = result.legacy_only
        lines.extend(_area_lines(only, len(only), "kernel", result.kernel, matrix, "  ", "*"))
    if result.matrix_only:
        lines.append("legacy False, matrix supported:")
        only = result.matrix_only
        lines.extend(_area_lines(only, len(only), "kernel", result.kernel, matrix, "  ", "*"))
    return "\n".join(lines)


def cmd_compare_legacy(args: argparse.Namespace, _prepared: None, out: TextIO, err: TextIO) -> int:
    """Compare a legacy predicate with a kernel; exit 0 agree, 1 disagree, 2 on errors."""
    choice = choose_matrix(args.matrix)
    announce_matrix(choice, err)
    matrix = load(choice.path)
    where = parse_where(matrix, args.where)
    if not args.timeout > 0 or args.max_calls < 1:
        raise LegacyError("--timeout and --max-calls take positive numbers")
    try:
        result, output = compare_legacy_file(
            matrix, args.function, args.kernel, where=where, timeout=args.timeout,
            max_calls=args.max_calls,
        )
    except LegacyError as exc:
        _report_output(exc.output, err)
        raise
    _report_output(output, err)
    if args.json:
        print_json(result.as_dict(), out)
    else:
        out.write(render_legacy(result, choice.witness_matrix) + "\n")
    return 0 if result.agree else 1


# --------------------------------------------------------------------------------------------------
# test


def configure_test(parser: argparse.ArgumentParser, _argv: Sequence[str]) -> None:
    """Arguments of ``capmatrix test``."""
    parser.description = (
        "The data gate: hold the matrix to every oracle it has (" + ", ".join(ORACLES) + "): the "
        "expectation cases and their rule coverage, the legacy conditionals of the cases' 'legacy:' "
        "entries, the engines' recorded selections and the hardware evidence in PATH/evidence, the "
        "importers' recorded tables (tools/import_*.py --check) and the generated pages (docs/). Each "
        "disagreement names its oracle, the cell, what each side says and the command that refreshes "
        "the oracle when the change is intended. The legacy predicates are executed (in a child process)."
    )
    parser.add_argument("path", nargs="?", help=MATRIX_DEFAULT_HELP)
    parser.add_argument("--expect", metavar="DIR", help="case directory (default: PATH/expect)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "-v", "--verbose", action="store_true",
        help=f"list every rule no case cites (by default the first {SHOWN_UNCITED} and a count)",
    )
    parser.add_argument(
        "-j", "--jobs", type=int, default=max(1, min(os.cpu_count() or 1, 4)), metavar="N",
        help="compare the engines' records in N worker processes (default: the cores, at most 4)",
    )
    parser.add_argument(
        "--records-every", type=int, default=1, metavar="N",
        help="compare every N-th question of each engine record, a quick gate while editing (default 1: "
             "every question, as CI runs it)",
    )
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--only", action="append", choices=ORACLES, metavar="ORACLE",
                        help=f"run only this oracle (repeatable; one of {', '.join(ORACLES)})")
    chosen.add_argument("--skip", action="append", choices=ORACLES, metavar="ORACLE",
                        help="run every oracle but this one (repeatable)")


#: Uncited rules listed without --verbose: the list can run to a hundred lines and more.
SHOWN_UNCITED = 5


def render_test(report: ExpectReport, *, verbose: bool = False, gate: GateReport | None = None) -> str:
    """The text report of the expectation cases: its FAIL lines last, just above the summary line.

    With ``gate``, the summary line ends with the other oracles' counts when any of them ran.
    """
    lines = [str(p) for p in report.problems]
    lines.extend(f"PASS {r.case.location} {r.case.name}" for r in report.results if r.passed)
    cited = report.total_rules - len(report.uncovered)
    lines.append(f"rule coverage: {cited}/{report.total_rules} rules cited by some case")
    if report.uncovered:
        shown = report.uncovered if verbose else report.uncovered[:SHOWN_UNCITED]
        lines.append(f"rules no case cites ({len(report.uncovered)}):")
        lines.extend(f"  {r.location} {r.id}" for r in shown)
        if len(shown) < len(report.uncovered):
            lines.append(f"  ... and {len(report.uncovered) - len(shown)} more (--verbose lists them)")
    lines.extend(f"FAIL {r.case.location} {r.case.name}: {r.message}"
                 for r in report.results if not r.passed)
    passed = len(report.results) - len(report.failed)
    lines.append(
        f"capmatrix test: {passed} passed, {len(report.failed)} failed"
        + (f", {len(report.problems)} problems in case files" if report.problems else "")
        + (gate_summary(gate) if gate is not None else "")
    )
    return "\n".join(lines)


def gate_summary(gate: GateReport) -> str:
    """``; oracles: 14 PASS, 1 FAIL (62.3 s)``, or nothing when no oracle but the cases ran."""
    others = [r for r in gate.results if r.oracle != "expect"]
    if all(r.status == "SKIP" for r in others):
        return ""
    counts = Counter(r.status for r in others)
    shown = ", ".join(f"{counts[s]} {s}" for s in ("PASS", "FAIL", "BROKEN", "SKIP") if counts[s])
    return f"; other oracles: {shown} ({gate.seconds:.1f} s in all)"


def render_oracle(result: OracleResult) -> list[str]:
    """The lines of one oracle item: its status line, then each disagreement and its refresh command."""
    head = f"{result.status} {result.oracle} {result.item}"
    if result.status == "SKIP":
        return [f"{head}: {result.skipped}"]
    if result.status == "BROKEN":
        return [f"{head}: {result.broken}"]
    timing = f" ({result.seconds:.1f} s)"
    if result.status == "PASS":
        note = f"; {result.note}" if result.note else ""
        return [f"{head}: {result.checks:,} check{'' if result.checks == 1 else 's'} agree{note}{timing}"]
    lines = [f"{head}: {result.failed:,} of {result.checks:,} checks disagree{timing}"]
    refreshes: dict[str, None] = {}
    for d in result.disagreements:
        lines.append(f"    {d.cell}")
        lines.append(f"        {d.oracle} says: {d.oracle_says}")
        lines.append(f"        matrix says: {d.matrix_says}")
        refreshes[d.refresh] = None
    if result.failed > len(result.disagreements):
        more = result.failed - len(result.disagreements)
        lines.append(f"    ... and {more:,} more (--json lists the first {len(result.disagreements)})")
    lines.extend(f"    refresh (if the change is intended): {r}" for r in refreshes)
    return lines


def cmd_test(args: argparse.Namespace, _prepared: None, out: TextIO, err: TextIO) -> int:
    """Run the data gate; exit 0 every oracle agrees, 1 one disagrees, 2 malformed cases or matrix."""
    choice = choose_matrix(args.path)
    announce_matrix(choice, err)
    matrix = load(choice.path)
    only = args.only or [name for name in ORACLES if name not in (args.skip or ())]

    def progress(result: OracleResult) -> None:
        if result.oracle != "expect":
            out.writelines(line + "\n" for line in render_oracle(result))
            out.flush()

    if args.jobs < 1:
        raise InvalidArgument("--jobs", args.jobs, "a positive number of worker processes")
    if args.records_every < 1:
        raise InvalidArgument("--records-every", args.records_every, "a whole number >= 1 (1: all)")
    gate = run_gate(matrix, expect=Path(args.expect) if args.expect else None, only=only,
                    progress=None if args.json else progress, jobs=args.jobs,
                    records_every=args.records_every)
    if args.json:
        print_json(gate.as_dict(), out)
    elif gate.expect is not None:
        out.write(render_test(gate.expect, verbose=args.verbose, gate=gate) + "\n")
    else:
        out.write("capmatrix test:" + (gate_summary(gate).removeprefix(";") or " nothing ran") + "\n")
    return gate.exit_status()
