"""``capmatrix query``, ``select`` and ``validate``, with the text form of verdicts and selections."""

from __future__ import annotations

import argparse

from capmatrix._core.start import refused_at_start, refusing_reason
from capmatrix._shipped.default import _resolver, derived_values, resolve, select, suggest
from capmatrix.authoring.cli import _per_gpu, _sglang
from capmatrix.authoring.cli._common import (
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
    axis_option_clashes,
    choose_matrix,
    columns,
    print_json,
    query_from_args,
    wrap,
)
from capmatrix.authoring.cli._github import problem_annotation
from capmatrix.authoring.loader import load
from capmatrix.errors import CapabilityErrors, InvalidQuery
from capmatrix.model import CORE, format_value
from capmatrix.resolver import CLOSEST_GRANTS, OriginKind, ReasonKind, Verdict

TYPE_CHECKING = False  # not typing's: every command would import it for annotations only
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Sequence
    from typing import TextIO

    from capmatrix.authoring._suggest import Suggestion
    from capmatrix.engine.sglang import Resolved
    from capmatrix.errors import CapabilityError
    from capmatrix.matrix import Matrix
    from capmatrix.resolver import Origin, Reason, Resolution, Selection

__all__ = [
    "AXIS_COMMANDS",
    "alternatives",
    "cmd_query",
    "cmd_select",
    "cmd_validate",
    "configure_query",
    "configure_select",
    "configure_validate",
    "format_resolution",
    "format_selection",
    "format_short",
    "format_suggestions",
    "kernel_start_refusal",
    "option_clashes",
    "read_axes",
    "selection_verdict",
    "start_refusal",
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


#: In a short answer: how many deciding rules, closest grants and suggestions are shown (``--explain``
#: lists every rule, ``--json`` every suggestion).
SHOWN_RULES = 3
SHOWN_CLOSEST = 3
SHOWN_SHORT_SUGGESTIONS = 3
#: The most characters of one rule's reason a short answer repeats (``--explain`` has all of it).
SHORT_REASON = 320
#: The same for the one-line reason of each candidate of a selection.
CANDIDATE_REASON = 160
_NO_LIMIT = 1 << 30


def read_axes(matrix: Matrix, kernels: Iterable[str],
              deciding: Iterable[Reason] | None = None) -> frozenset[str]:
    """The axes some rule of ``kernels`` reads: the only axis defaults an answer about them shows.

    ``deciding``: the reasons the answer shows; an environment axis (an engine's build or installation,
    ``vllm_fa3_built``) is then kept only where one of their rules reads it.
    """
    read: set[str] = set()
    for name in kernels:
        kernel = matrix.kernels.get(name)
        if kernel is not None:
            for rule in kernel.rules:
                read.update(rule.conditions)
    if deciding is not None:
        rules = {rule.id: rule for rule in matrix.rules}
        decide = {axis for r in deciding if r.rule_id in rules for axis in rules[r.rule_id].conditions}
        read = {a for a in read if a in decide or not (a in matrix.axes and matrix.axes[a].environment)}
    return frozenset(read)


def foreign_axes(matrix: Matrix, shown: Collection[str]) -> frozenset[str]:
    """The engine axes not in ``shown``, whose model values say nothing of the answer.

    SGLang's architecture word, a value of the model, is noise on a TensorRT-LLM answer.
    """
    return frozenset(a for a, axis in matrix.axes.items() if axis.scope != CORE and a not in shown)


def _values_lines(resolution: Resolution, shown_defaults: Collection[str] | None,
                  role: tuple[str, Collection[str]] | None = None,
                  foreign: Collection[str] = ()) -> list[str]:
    """The query's values by origin; axis defaults only where ``shown_defaults`` names them (if given).

    ``role``: a role's name and the axes it set for its candidates (shown as the role's, not the query's).
    ``foreign``: axes whose model values are left out (:func:`foreign_axes`).
    """
    lines: list[str] = []
    by_origin: dict[str, list[str]] = {}
    for name, value in resolution.values.items():
        origin = resolution.origins[name]
        if origin.kind is OriginKind.DEFAULT and shown_defaults is not None and name not in shown_defaults:
            continue
        if origin.kind is OriginKind.MODEL and name in foreign:
            continue
        by_origin.setdefault(_label(origin, name, role), []).append(f"{name}={format_value(value)}")
    lines.extend(f"  {label}: {' '.join(items)}" for label, items in by_origin.items())
    return lines


def _label(origin: Origin, name: str, role: tuple[str, Collection[str]] | None) -> str:
    if origin.kind is OriginKind.MODEL:
        return f"model {origin.model}"
    if origin.kind is OriginKind.DEFAULT:
        return "axis defaults"
    return f"role {role[0]}" if role is not None and name in role[1] else "query"


def format_resolution(resolution: Resolution, reasons: Sequence[Reason] | None = None,
                      *, shown_defaults: Collection[str] | None = None, foreign: Collection[str] = ()) -> str:
    """Human-readable verdict, query and every reason (``reasons``: another explanation of the same answer).

    ``shown_defaults``: the axes whose defaults are worth printing (:func:`read_axes`); None prints all.
    """
    lines = [f"{resolution.kernel}: {resolution.verdict}"]
    why = [r for r in (resolution.reasons if reasons is None else reasons) if r.kind in _MARKS]
    if why:
        lines.append("  why:")
        lines.extend(f"    {_MARKS[r.kind]} {r.message}" for r in why)
    lines.extend(_values_lines(resolution, shown_defaults, foreign=foreign))
    return "\n".join(lines)


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut after a whole word (``...`` says where)."""
    if len(text) <= limit:
        return text
    kept = text[: limit - 3]
    if text[limit - 3] != " " and " " in kept:
        kept = kept.rsplit(" ", 1)[0]  # never inside a word
    return kept.rstrip() + " ..."


def _near_misses(reasons: Sequence[Reason]) -> list[tuple[str, list[Reason]]]:
    """The grants that do not apply, closest first, each with its mismatches (one per axis)."""
    by_rule: dict[str, list[Reason]] = {}
    for reason in reasons:
        if reason.kind is ReasonKind.MISMATCH:
            by_rule.setdefault(reason.rule_id or reason.message, []).append(reason)
    return list(by_rule.items())


def _near_miss_line(rule_id: str, misses: Sequence[Reason]) -> str:
    """``x rule (file:line) needs axis required (got actual), ...``: every axis that kept one grant off."""
    first = misses[0]
    where = f" ({first.path}:{first.line})" if first.path is not None else ""
    needs = [f"{r.axis} {r.required} (got {format_value(r.actual)})" for r in misses if r.axis is not None]
    others = [r.message for r in misses if r.axis is None]  # said in the resolver's own words
    head = [f"{rule_id}{where} needs {', '.join(needs)}"] if needs else []
    return "x " + "; ".join([*head, *others])


def _deciding(resolution: Resolution, reasons: Sequence[Reason], limit: int) -> list[str]:
    """The reasons that decided the verdict, marked, one line each.

    A supported answer: the grants that apply. Otherwise: where it is supported (depends), the
    exclusions that apply and the grants they override. Empty when no rule applies: the closest grants
    (:func:`_near_misses`) then say why.
    """
    def marked(kind: ReasonKind) -> list[str]:
        return [f"{_MARKS[kind]} {_cut(r.message, limit)}" for r in reasons if r.kind is kind]

    order: tuple[ReasonKind, ...]
    if resolution.verdict is Verdict.SUPPORTED:
        order = (ReasonKind.GRANT, ReasonKind.OUTSIDE)
    else:
        order = (ReasonKind.RESIDUAL, ReasonKind.EXCLUDE, ReasonKind.GRANT, ReasonKind.OUTSIDE)
    return [line for kind in order for line in marked(kind)]


def format_short(resolution: Resolution, reasons: Sequence[Reason], suggestions: Sequence[Suggestion],
                 *, shown_defaults: Collection[str] | None, vary: bool, grants: int | None = None,
                 foreign: Collection[str] = ()) -> str:
    """The short answer: verdict, values, the rules that decided it, the closest grants, what would work.

    ``grants``: how many grants the kernel has, so that the ones not shown are counted (None: count
    only the near misses among ``reasons``).
    """
    lines = [f"{resolution.kernel}: {resolution.verdict}"]
    decided = _deciding(resolution, reasons, SHORT_REASON)
    if decided:
        lines.append("  decided by:")
        lines.extend(f"    {line}" for line in decided[:SHOWN_RULES])
        if len(decided) > SHOWN_RULES:
            lines.append(f"    ... and {len(decided) - SHOWN_RULES} more (--explain lists them)")
    misses = _near_misses(reasons)
    if resolution.verdict is not Verdict.SUPPORTED and misses and not any(
        r.kind is ReasonKind.GRANT for r in reasons
    ):
        lines.append("  no grant applies; the closest:")
        lines.extend(f"    {_cut(_near_miss_line(rule, m), SHORT_REASON)}"
                     for rule, m in misses[:SHOWN_CLOSEST])
        shown = min(len(misses), SHOWN_CLOSEST)
        more = (len(misses) if grants is None else grants) - shown
        if more > 0:
            lines.append(f"    ... and {more} other grant{'s' if more > 1 else ''} (--explain lists "
                         "them, closest first; --closest K sets how many)")
    lines.extend(_values_lines(resolution, shown_defaults, foreign=foreign))
    if resolution.verdict is not Verdict.SUPPORTED:
        lines.extend(_would_work(suggestions, vary=vary, limit=SHOWN_SHORT_SUGGESTIONS))
    return "\n".join(lines)


def _would_work(
    suggestions: Sequence[Suggestion], *, vary: bool, limit: int = SHOWN_SUGGESTIONS,
) -> list[str]:
    shown = format_suggestions(suggestions, limit=limit)
    # A search its work budget stopped (Suggestions.truncated): what it found, and that it stopped.
    cut = bool(getattr(suggestions, "truncated", False))
    stopped = "    truncated: the search's work budget ran out; other changes may work"
    if shown:
        return ["  would work:", *(f"    {line}" for line in shown), *([stopped] if cut else [])]
    if cut:
        return ["  would work: none found before the search's work budget ran out (truncated)"]
    hint = "" if vary else " (the model's geometry kept; widen with --vary AXIS)"
    return [f"  would work: no change of one or two axes{hint}"]


def format_suggestions(suggestions: Sequence[Suggestion], *, limit: int = SHOWN_SUGGESTIONS) -> list[str]:
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
    if len(lines) > limit:
        more = len(lines) - limit
        lines = [*lines[:limit], f"... and {more} more (--json)"]
    return lines


def configure_query(parser: argparse.ArgumentParser, argv: Sequence[str]) -> Matrix:
    """Arguments of ``capmatrix query``."""
    _query_options(parser)
    return add_axis_options(parser, argv, isolate=True)


def _query_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``capmatrix query`` besides the axes."""
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
    _add_explain_option(parser)
    add_matrix_option(parser)


def _add_explain_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--explain", "-v", action="store_true",
        help="list every rule behind the answer in full (default: a short answer, the rules that "
             "decided it and what would work)",
    )


def kernel_start_refusal(resolution: Resolution, matrix: Matrix) -> Resolution | None:
    """The engine-start check (a gate of the kernel's ``caught_by``) that refuses a supported kernel's query.

    A kernel that is not supported is never chosen, so it is asked no check (None).
    """
    if resolution.verdict is not Verdict.SUPPORTED:
        return None
    return refused_at_start(_resolver(matrix), resolution.kernel, resolution.query)


def _start_lines(refusal: Resolution) -> list[str]:
    """After a kernel's verdict: the start check that refuses it, with the reason whole."""
    if refusal.verdict is Verdict.UNSUPPORTED:
        head = f"  then refused at engine start by gate {refusal.kernel}"
    else:
        head = f"  then at engine start gate {refusal.kernel} depends on values the query leaves open"
    return [head, f"  !! {_one_reason(refusal, _NO_LIMIT)}"]


def cmd_query(args: argparse.Namespace, matrix: Matrix, out: TextIO, err: TextIO) -> int:
    """Resolve one query; exit 0 supported, 1 unsupported, 3 depends.

    A supported kernel that an engine-start check refuses (:func:`kernel_start_refusal`) keeps its
    verdict, followed by the refusal; the exit status is then the check's (1, or 3 for depends), as
    ``select`` answers the same winner.
    """
    announce_matrix(choose_matrix(args.matrix), err, matrix)
    gpus = _per_gpu.gpus_asked(args, matrix)
    if gpus is not None:
        return _print_per_gpu(args, _per_gpu.answer_per_gpu(
            args, gpus, args.kernel, lambda asked: _verdict_of(asked, matrix)), out)
    query = query_from_args(args, matrix, args.kernel)
    resolution = resolve(query, matrix)
    found = suggest(query, matrix, args.vary)
    reasons = resolution.explain(closest=args.closest)
    refusal = kernel_start_refusal(resolution, matrix)
    if args.json:
        start = {} if refusal is None else {"engine_start": refusal.as_dict()}
        print_json({**resolution.as_dict(), "reasons": [r.as_dict() for r in reasons],
                    "suggestions": [s.as_dict() for s in found],
                    "suggestions_truncated": found.truncated, **start}, out)
    else:
        shown_defaults = read_axes(matrix, [resolution.kernel], reasons)
        foreign = foreign_axes(matrix, read_axes(matrix, [resolution.kernel]))
        if args.explain:
            text = format_resolution(resolution, reasons, shown_defaults=shown_defaults, foreign=foreign)
            if resolution.verdict is not Verdict.SUPPORTED:
                text += "\n" + "\n".join(_would_work(found, vary=bool(args.vary)))
        else:
            text = format_short(resolution, reasons, found, shown_defaults=shown_defaults,
                                vary=bool(args.vary), grants=len(matrix.kernels[resolution.kernel].grants),
                                foreign=foreign)
        if refusal is not None:  # right after the kernel's own verdict line
            first, _, rest = text.partition("\n")
            text = "\n".join([first, *_start_lines(refusal), *([rest] if rest else [])])
        out.write(wrap(text, columns()) + "\n")
    return _exit_status(resolution.verdict if refusal is None else refusal.verdict)


def _exit_status(verdict: Verdict) -> int:
    return {Verdict.SUPPORTED: EXIT_OK, Verdict.UNSUPPORTED: EXIT_FAIL}.get(verdict, EXIT_DEPENDS)


def _verdict_of(args: argparse.Namespace, matrix: Matrix) -> tuple[str, int, dict[str, object]]:
    """One GPU's verdict for ``query`` (the ``--gpu all`` table) and the rules that decided it."""
    resolution = resolve(query_from_args(args, matrix, args.kernel), matrix)
    if resolution.verdict is Verdict.SUPPORTED:
        decided = [r.rule_id for r in resolution.reasons if r.kind is ReasonKind.GRANT and r.rule_id]
    else:
        decided = [r.rule_id for r in resolution.reasons if r.kind is ReasonKind.EXCLUDE and r.rule_id]
    answer = str(resolution.verdict) + (f" ({', '.join(decided)})" if decided else "")
    data: dict[str, object] = {"verdict": str(resolution.verdict), "rules": decided}
    refusal = kernel_start_refusal(resolution, matrix)
    if refusal is None:
        return answer, _exit_status(resolution.verdict), data
    reason = refusing_reason(refusal)
    rule = None if reason is None else reason.rule_id
    refused = refusal.verdict is Verdict.UNSUPPORTED
    answer += (f", then refused at engine start by gate {refusal.kernel}" if refused
               else f", then at engine start gate {refusal.kernel} depends") + (f" ({rule})" if rule else "")
    data["engine_start"] = {"gate": refusal.kernel, "verdict": str(refusal.verdict), "rule": rule}
    return answer, _exit_status(refusal.verdict), data


def _print_per_gpu(args: argparse.Namespace, table: _per_gpu.PerGPU, out: TextIO) -> int:
    if args.json:
        print_json(table.as_dict(), out)
    else:
        out.write(wrap(table.text(), columns()) + "\n")
    return table.status


def configure_select(parser: argparse.ArgumentParser, argv: Sequence[str]) -> Matrix:
    """Arguments of ``capmatrix select``."""
    _select_options(parser)
    return add_axis_options(parser, argv, isolate=True)


def _select_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``capmatrix select`` besides the axes."""
    parser.add_argument("role", help="role name, e.g. trtllm_generation")
    add_model_options(parser)
    parser.add_argument("--json", action="store_true",
                        help="print a JSON object (``alternatives``: the later candidates that also serve)")
    _add_explain_option(parser)
    add_matrix_option(parser)


#: The commands that take an option per axis, each with what adds its other options.
AXIS_COMMANDS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "query": _query_options, "select": _select_options,
}


class _FixedWidth(argparse.HelpFormatter):
    """argparse's formatter at a fixed width.

    argparse's own reads the terminal's width through ``shutil`` (imported for that alone), and the
    parsers :func:`option_clashes` builds never print their help.
    """

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, width or 80)


def option_clashes(matrix: Matrix) -> list[CapabilityError]:
    """E227: each axis or alias of ``matrix`` whose ``--<axis>`` option a command defines already.

    argparse finds them, on the parsers of the commands of :data:`AXIS_COMMANDS` with their own options.
    """
    parsers = {}
    for command, add_options in AXIS_COMMANDS.items():
        parser = argparse.ArgumentParser(prog=f"capmatrix {command}", formatter_class=_FixedWidth)
        add_options(parser)
        parsers[parser.prog] = parser
    return axis_option_clashes(parsers, matrix)


def alternatives(selection: Selection, matrix: Matrix) -> list[Resolution]:
    """The candidates after the winner that would serve the same query too (supported), in role order."""
    if selection.kernel is None or selection.resolution is None:
        return []
    role = matrix.roles[selection.role]
    query = selection.query
    pinned = {k: v for k, v in role.axes.items() if k not in query.axes}
    asked = query.replace(**pinned) if pinned else query
    candidates = role.candidates
    if role.orders:
        candidates, _decided = role.order_for(derived_values(asked.with_kernel(selection.kernel), matrix))
    later = candidates[candidates.index(selection.kernel) + 1:]
    found = [resolve(asked.with_kernel(kernel), matrix) for kernel in later]
    return [r for r in found if r.verdict is Verdict.SUPPORTED]


def _one_reason(resolution: Resolution, limit: int = CANDIDATE_REASON) -> str:
    """A candidate's verdict and the one reason that decided it, on one line."""
    decided = _deciding(resolution, resolution.reasons, limit)
    if not decided:
        decided = [_cut(_near_miss_line(rule, misses), CANDIDATE_REASON)
                   for rule, misses in _near_misses(resolution.reasons)]
    return f"{resolution.kernel}: {resolution.verdict}" + (f"; {decided[0]}" if decided else "")


def engine_refusal(selection: Selection, matrix: Matrix | None) -> str | None:
    """The gate that stops the engine, where the role's order names a refusing gate as its only candidate.

    Such an order is an engine-start check (TensorRT-LLM's AttentionOp::initialize, vLLM's worker init):
    its refusal is the answer, so its reason is shown whole.
    """
    trace = selection.trace
    if (selection.kernel is not None or matrix is None or len(trace) != 1
            or trace[0].verdict is not Verdict.UNSUPPORTED or matrix.kernels[trace[0].kernel].kind != "gate"):
        return None
    return trace[0].kernel


def start_refusal(selection: Selection, matrix: Matrix | None) -> Resolution | None:
    """The check the engine runs at start, after it chose the winner, that does not admit the winner's query.

    Such a check is a gate the winner's guard names in ``caught_by`` (vLLM's
    ``TritonAttentionImpl.__init__``): the engine picks the winner, then stops as it builds the layers.
    None when there is no winner, or every such check admits.
    """
    if selection.resolution is None or matrix is None:
        return None
    return refused_at_start(_resolver(matrix), selection.resolution.kernel, selection.resolution.query)


def selection_verdict(selection: Selection, refusal: Resolution | None) -> Verdict:
    """The selection's verdict, with the engine-start check after it: a refusal (or a depends) wins."""
    if refusal is None or selection.verdict is not Verdict.SUPPORTED:
        return selection.verdict
    return refusal.verdict


def _selection_head(selection: Selection, matrix: Matrix | None = None,
                    refusal: Resolution | None = None) -> str:
    """The answer's first line: the winner, why there is none yet, or that there is none."""
    if selection.kernel and refusal is not None:
        picked = f"{selection.role}: {selection.kernel}"
        if refusal.verdict is Verdict.UNSUPPORTED:
            return f"{picked}, then refused at engine start by gate {refusal.kernel}"
        return f"{picked}, then at engine start gate {refusal.kernel} depends on values the query leaves open"
    if selection.kernel:
        return f"{selection.role}: {selection.kernel}"
    gate = engine_refusal(selection, matrix)
    if gate is not None:
        return f"{selection.role}: no supported candidate: refused at engine start by gate {gate}"
    if not selection.decided:
        flags = " ".join(f"--{a.replace('_', '-')}" for a in selection.open_axes)
        return (f"{selection.role}: depends: its candidate order reads {', '.join(selection.open_axes)}, "
                f"which the query leaves open (give {flags})")
    pending = [r.kernel for r in selection.trace if r.verdict is Verdict.DEPENDS]
    if pending:
        return (f"{selection.role}: no candidate is supported for every value left open; "
                f"{', '.join(pending)} depend{'s' if len(pending) == 1 else ''} on them")
    return f"{selection.role}: no supported candidate"


def format_selection(selection: Selection, also: Sequence[Resolution] = (), *,
                     matrix: Matrix | None = None, explain: bool = False,
                     refusal: Resolution | None = None) -> str:
    """Human-readable winner, the candidates tried before it and those after it that would also serve.

    Short (the default): one line per candidate with its deciding reason; ``explain``: every reason.
    ``refusal`` is the engine-start check that refuses the winner (:func:`start_refusal`), shown whole
    after the candidates (``!!``).
    """
    lines = [_selection_head(selection, matrix, refusal)]
    whole = engine_refusal(selection, matrix) is not None  # the refusal is the answer: its text uncut
    answered = (*selection.trace, refusal) if refusal is not None else selection.trace
    for resolution in answered:
        mark = "=>" if resolution.kernel == selection.kernel else "!!" if resolution is refusal else "  "
        if not explain:
            limit = _NO_LIMIT if whole or resolution is refusal else CANDIDATE_REASON
            lines.append(f"{mark} {_one_reason(resolution, limit)}")
            continue
        body = format_resolution(resolution).splitlines()
        lines.append(f"{mark} {body[0]}")
        lines.extend(f"   {line}" for line in body[1:] if not line.startswith("  query")
                     and not line.startswith("  model") and not line.startswith("  axis"))
    if also:
        lines.append(f"   would also serve: {', '.join(r.kernel for r in also)}")
    if selection.trace:  # the values asked with, after the answer and its reasons
        kernels = [r.kernel for r in (*selection.trace, *also)]
        deciding = [reason for r in selection.trace for reason in r.reasons]
        shown = read_axes(matrix, kernels, deciding) if matrix is not None else None
        pinned = None
        foreign: Collection[str] = ()
        if matrix is not None:
            pinned = (selection.role, [a for a in matrix.roles[selection.role].axes
                                       if a not in selection.query.axes])
            order = {a for o in matrix.roles[selection.role].orders for box in o.when for a in box}
            foreign = foreign_axes(matrix, read_axes(matrix, kernels) | order)
        lines.extend(_values_lines(selection.trace[-1], shown, pinned, foreign))
    return "\n".join(lines)


def cmd_select(args: argparse.Namespace, matrix: Matrix, out: TextIO, err: TextIO) -> int:
    """Select a kernel for a role; exit 0 when one is supported, 1 when none, 3 when it depends."""
    announce_matrix(choose_matrix(args.matrix), err, matrix)
    gpus = _per_gpu.gpus_asked(args, matrix)
    if gpus is not None:
        return _print_per_gpu(args, _per_gpu.answer_per_gpu(
            args, gpus, args.role, lambda asked: _winner_of(asked, matrix)), out)
    if _sglang.serves(args.role, matrix):
        return _select_sglang(args, matrix, out)
    query = query_from_args(args, matrix, None, role=args.role)
    selection = select(args.role, query, matrix)
    also = alternatives(selection, matrix)
    refusal = start_refusal(selection, matrix)
    verdict = selection_verdict(selection, refusal)
    if args.json:
        start = {} if refusal is None else {"verdict": str(verdict), "engine_start": refusal.as_dict()}
        print_json({**selection.as_dict(), **start,
                    "alternatives": [{"kernel": r.kernel, "rules": list(r.rules)} for r in also]}, out)
    else:
        text = format_selection(selection, also, matrix=matrix, explain=args.explain, refusal=refusal)
        out.write(wrap(text, columns()) + "\n")
    return _exit_status(verdict)


def _winner_of(args: argparse.Namespace, matrix: Matrix) -> tuple[str, int, dict[str, object]]:
    """One GPU's winner of ``select`` (the ``--gpu all`` table), or why there is none."""
    if _sglang.serves(args.role, matrix):
        try:
            ask, sm, got = _ask_sglang(args, matrix)
        except _sglang.Unmodelled as exc:  # one GPU the matrix does not model SGLang on: said on its row
            return f"not modelled: {exc}", EXIT_DEPENDS, {"kernel": None, "verdict": None,
                                                          "error": str(exc)}
        kernel = _sglang.winner(got)
        if got.refused is None:
            answer = str(kernel)
        else:
            refused = got.refused
            answer = f"no supported candidate: SGLang refuses at {refused.stage}: {refused.text.strip()}"
        data = _sglang.answer_dict(ask, sm, got)
        return answer, EXIT_FAIL if kernel is None else EXIT_OK, {
            "kernel": kernel, "verdict": data["verdict"], "sglang": data["sglang"]}
    selection = select(args.role, query_from_args(args, matrix, None, role=args.role), matrix)
    refusal = start_refusal(selection, matrix)
    verdict = selection_verdict(selection, refusal)
    answer = (selection.kernel if refusal is None else None) or (
        _selection_head(selection, matrix, refusal).split(": ", 1)[1])
    start = {}
    if refusal is not None:
        reason = refusing_reason(refusal)
        start = {"engine_start": {"gate": refusal.kernel, "verdict": str(refusal.verdict),
                                  "rule": None if reason is None else reason.rule_id}}
    return answer, _exit_status(verdict), {"kernel": selection.kernel, "verdict": str(verdict), **start}


def _ask_sglang(args: argparse.Namespace, matrix: Matrix) -> tuple[_sglang.SGLangAsk, int, Resolved]:
    # SGLang's topk is a number, which the axis's words (unset, one, many) do not carry: read apart.
    plain = argparse.Namespace(**{**vars(args), "axis_sglang_topk": None})
    query = query_from_args(plain, matrix, None)
    sm = query.axes.get("sm")
    if not isinstance(sm, int) or isinstance(sm, bool):
        raise InvalidQuery(f"select {args.role} asks SGLang about one device: give --gpu NAME (or all) or "
                           "--sm SM")
    ask = _sglang.prepare(args, matrix, query.axes)
    return ask, sm, _sglang.resolve_at(ask, sm, matrix)


def _select_sglang(args: argparse.Namespace, matrix: Matrix, out: TextIO) -> int:
    """``select sglang_attention``: SGLang's whole resolution (:mod:`capmatrix.authoring.cli._sglang`)."""
    ask, sm, got = _ask_sglang(args, matrix)
    if args.json:
        print_json(_sglang.answer_dict(ask, sm, got), out)
    else:
        out.write(wrap(_sglang.format_answer(ask, sm, got, matrix, explain=args.explain), columns()) + "\n")
    return EXIT_FAIL if got.refused is not None else EXIT_OK


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
    matrix: Matrix | None = None
    try:
        loaded = load(choice.path)
    except CapabilityErrors as exc:
        problems = list(exc.errors)
    else:  # then the names the command line's own parsers refuse (E227)
        matrix, problems = loaded, option_clashes(loaded)
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
