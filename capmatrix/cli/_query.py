"""``capmatrix query``, ``select`` and ``validate``, with the text form of verdicts and selections."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from capmatrix._default import resolve, select, suggest
from capmatrix.cli._common import (
    EXIT_DEPENDS,
    EXIT_ERROR,
    EXIT_FAIL,
    EXIT_OK,
    MATRIX_DEFAULT_HELP,
    add_axis_options,
    add_format_option,
    add_matrix_option,
    add_model_options,
    announce_matrix,
    choose_matrix,
    print_json,
    query_from_args,
)
from capmatrix.cli._github import problem_annotation
from capmatrix.errors import CapabilityErrors
from capmatrix.loader import load
from capmatrix.model import format_value
from capmatrix.resolver import CLOSEST_GRANTS, OriginKind, ReasonKind, Verdict

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from capmatrix._suggest import Suggestion
    from capmatrix.errors import CapabilityError
    from capmatrix.matrix import Matrix
    from capmatrix.resolver import Origin, Reason, Resolution, Selection

__all__ = [
    "cmd_query",
    "cmd_select",
    "cmd_validate",
    "configure_query",
    "configure_select",
    "configure_validate",
    "format_resolution",
    "format_selection",
    "format_suggestions",
]

#: Lines of suggestions the text form shows (``--json`` has all of them).
SHOWN_SUGGESTIONS = 8


_MARKS = {
    ReasonKind.GRANT: "+",
    ReasonKind.EXCLUDE: "-",
    ReasonKind.MISMATCH: "x",
    ReasonKind.RESIDUAL: "~",
    ReasonKind.OUTSIDE: "!",
}


def format_resolution(resolution: Resolution, reasons: Sequence[Reason] | None = None) -> str:
    """Human-readable verdict, query and reasons (``reasons``: another explanation of the same answer)."""
    lines = [f"{resolution.kernel}: {resolution.verdict}"]
    by_origin: dict[Origin, list[str]] = {}
    for name, value in resolution.values.items():
        by_origin.setdefault(resolution.origins[name], []).append(f"{name}={format_value(value)}")
    for origin, items in by_origin.items():
        if origin.kind is OriginKind.MODEL:
            label = f"model {origin.model}"
        else:
            label = "axis defaults" if origin.kind is OriginKind.DEFAULT else "query"
        lines.append(f"  {label}: {' '.join(items)}")
    why = [r for r in (resolution.reasons if reasons is None else reasons) if r.kind in _MARKS]
    if why:
        lines.append("  why:")
        lines.extend(f"    {_MARKS[r.kind]} {r.message}" for r in why)
    return "\n".join(lines)


def format_suggestions(suggestions: Sequence[Suggestion]) -> list[str]:
    """Text lines of suggestions: one line per axis for single changes, one per pair otherwise."""
    lines: list[str] = []
    singles: dict[str, list[str]] = {}
    for s in suggestions:
        if len(s.changes) == 1:
            ((name, value),) = s.changes.items()
            singles.setdefault(name, []).append(format_value(value))
    for name, shown in singles.items():
        choice = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
        lines.append(f"set {name}={choice}")
    lines.extend(str(s) for s in suggestions if len(s.changes) > 1)
    if len(lines) > SHOWN_SUGGESTIONS:
        more = len(lines) - SHOWN_SUGGESTIONS
        lines = [*lines[:SHOWN_SUGGESTIONS], f"... and {more} more (--json)"]
    return lines


def configure_query(parser: argparse.ArgumentParser, argv: Sequence[str]) -> Matrix:
    """Arguments of ``capmatrix query``."""
    parser.add_argument("kernel", help="kernel name, e.g. xqa")
    add_model_options(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.add_argument(
        "--vary", action="append", metavar="AXIS",
        help="an axis the suggestions of an unsupported or depends answer may change (repeatable; "
             "default: all but the model's geometry: attention, head_dim, q_per_kv and the other "
             "axes the model sets, save its dtypes)",
    )
    parser.add_argument(
        "--closest", type=int, metavar="K", default=CLOSEST_GRANTS,
        help=f"how many grants the reasons list, closest first (default {CLOSEST_GRANTS}); every "
             "exclusion that applies is always listed, the other grants are counted",
    )
    add_matrix_option(parser)
    return add_axis_options(parser, argv)


def cmd_query(args: argparse.Namespace, matrix: Matrix, out: TextIO, err: TextIO) -> int:
    """Resolve one query; exit 0 supported, 1 unsupported, 3 depends."""
    announce_matrix(choose_matrix(args.matrix), err)
    query = query_from_args(args, matrix, args.kernel)
    resolution = resolve(query, matrix)
    found = suggest(query, matrix, args.vary)
    reasons = resolution.explain(closest=args.closest)
    if args.json:
        print_json({**resolution.as_dict(), "reasons": [r.as_dict() for r in reasons],
                    "suggestions": [s.as_dict() for s in found]}, out)
    else:
        text = format_resolution(resolution, reasons)
        if resolution.verdict is not Verdict.SUPPORTED:
            shown = format_suggestions(found)
            if shown:
                text += "\n  would work:\n" + "\n".join(f"    {line}" for line in shown)
            else:
                text += "\n  would work: no change of one or two axes"
                text += "" if args.vary else " (the model's geometry kept; widen with --vary AXIS)"
        out.write(text + "\n")
    return {Verdict.SUPPORTED: EXIT_OK, Verdict.UNSUPPORTED: EXIT_FAIL}.get(
        resolution.verdict, EXIT_DEPENDS
    )


def configure_select(parser: argparse.ArgumentParser, argv: Sequence[str]) -> Matrix:
    """Arguments of ``capmatrix select``."""
    parser.add_argument("role", help="role name, e.g. trtllm_generation")
    add_model_options(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    add_matrix_option(parser)
    return add_axis_options(parser, argv)


def format_selection(selection: Selection) -> str:
    """Human-readable winner and trace."""
    head = (
        f"{selection.role}: {selection.kernel}"
        if selection.kernel
        else f"{selection.role}: no supported candidate"
    )
    lines = [head]
    for resolution in selection.trace:
        mark = "=>" if resolution.kernel == selection.kernel else "  "
        body = format_resolution(resolution).splitlines()
        lines.append(f"{mark} {body[0]}")
        lines.extend(f"   {line}" for line in body[1:] if not line.startswith("  query")
                     and not line.startswith("  model") and not line.startswith("  axis"))
    return "\n".join(lines)


def cmd_select(args: argparse.Namespace, matrix: Matrix, out: TextIO, err: TextIO) -> int:
    """Select a kernel for a role; exit 0 when one is supported, 1 when none, 3 when it depends."""
    announce_matrix(choose_matrix(args.matrix), err)
    query = query_from_args(args, matrix, None)
    selection = select(args.role, query, matrix)
    if args.json:
        print_json(selection.as_dict(), out)
    else:
        out.write(format_selection(selection) + "\n")
    return {Verdict.SUPPORTED: EXIT_OK, Verdict.UNSUPPORTED: EXIT_FAIL}.get(
        selection.verdict, EXIT_DEPENDS
    )


def configure_validate(parser: argparse.ArgumentParser, _argv: Sequence[str]) -> None:
    """Arguments of ``capmatrix validate``."""
    parser.add_argument("path", nargs="?", help=MATRIX_DEFAULT_HELP)
    add_format_option(parser, "problems")


def cmd_validate(args: argparse.Namespace, _prepared: None, out: TextIO, err: TextIO) -> int:
    """Validate a matrix; exit 0 when clean, 2 with every problem listed."""
    choice = choose_matrix(args.path)
    announce_matrix(choice, err)
    # One load: its problems are iter_problems's, and a clean matrix is not read a second time.
    problems: list[CapabilityError] = []
    try:
        matrix: Matrix | None = load(choice.path)
    except CapabilityErrors as exc:
        matrix, problems = None, list(exc.errors)
    if args.format == "github":
        out.writelines(problem_annotation(p) + "\n" for p in problems)
        if problems:
            err.write(str(CapabilityErrors(problems)) + "\n")
            return EXIT_ERROR
        out.write("ok: no problems\n")
        return EXIT_OK
    if args.format == "json":
        print_json({"ok": not problems, "problems": [p.as_dict() for p in problems]}, out)
        return EXIT_ERROR if problems else EXIT_OK
    if problems or matrix is None:
        err.write(str(CapabilityErrors(problems)) + "\n")
        return EXIT_ERROR
    rules = sum(len(k.rules) for k in matrix.kernels.values())
    out.write(
        f"ok: {len(matrix.files)} files, {len(matrix.axes)} axes, {len(matrix.kernels)} kernels, "
        f"{rules} rules, {len(matrix.models)} models, {len(matrix.roles)} roles\n"
    )
    return EXIT_OK
