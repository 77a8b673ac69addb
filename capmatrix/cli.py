"""The ``capmatrix`` command line: ``main(argv) -> exit status``; every subcommand is a function.

Exit statuses: 0 supported / clean, 1 unsupported (or a failed check), 3 depends, 2 usage or data error.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
from typing import TYPE_CHECKING, TextIO

from capmatrix.errors import CapabilityErrors, CapmatrixError, InvalidQuery
from capmatrix.model import AxisType

if TYPE_CHECKING:
    from collections.abc import Sequence

    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue
    from capmatrix.query import _Any
    from capmatrix.resolver import Resolution, Selection

__all__ = ["COMMANDS", "main", "run"]

EXIT_OK, EXIT_FAIL, EXIT_ERROR, EXIT_DEPENDS = 0, 1, 2, 3

#: Subcommand -> (module holding ``configure_<name>`` and ``cmd_<name>``, one-line help).
#: Modules are imported only for the subcommand that runs, to keep start-up fast.
COMMANDS: dict[str, tuple[str, str]] = {
    "query": ("capmatrix.cli", "answer whether a kernel supports a query"),
    "select": ("capmatrix.cli", "pick the first supported kernel of a role"),
    "validate": ("capmatrix.cli", "validate a matrix directory (exit 0 clean, 2 with problems)"),
    "render": ("capmatrix.render", "write the support-matrix docs, or --check them (1 when stale)"),
    "probe": (
        "capmatrix.probe",
        "check the torch SDPA rules on this GPU (exit 0 agree, 1 disagree, 2 no GPU)",
    ),
    "check": ("capmatrix._cli_analysis", "static analysis: dead, redundant, open-ended rules, gaps"),
    "diff": ("capmatrix._cli_analysis", "semantic diff of two matrices or git revisions"),
    "compare-legacy": ("capmatrix._cli_analysis", "compare a legacy predicate with a kernel"),
    "test": ("capmatrix._cli_analysis", "run the expectation cases and report rule coverage"),
}


class _Parser(argparse.ArgumentParser):
    """An argparse parser that raises instead of exiting, so ``main`` owns the exit status."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: error: {message}")


class _UsageError(Exception):
    pass


def _subcommand(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def _prescan(argv: Sequence[str], option: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return None


def _build_parser(argv: Sequence[str]) -> tuple[_Parser, dict[str, object]]:
    parser = _Parser(prog="capmatrix", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    chosen = _subcommand(argv)
    handlers: dict[str, object] = {}
    for name, (module_name, help_text) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            module = importlib.import_module(module_name)
            attr = name.replace("-", "_")
            getattr(module, f"configure_{attr}")(sub, argv)
            handlers[name] = getattr(module, f"cmd_{attr}")
    return parser, handlers


def run(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    """Run one command line; return its exit status (never raises for bad input)."""
    argv = list(argv)
    try:
        parser, handlers = _build_parser(argv)
        if not argv or argv[0] in {"-h", "--help"}:
            stdout.write(parser.format_help())
            return EXIT_OK if argv else EXIT_ERROR
        with contextlib.redirect_stdout(stdout):  # `capmatrix query --help` writes to ``stdout`` too
            args = parser.parse_args(argv)
        handler = handlers.get(args.command)
        if handler is None:
            stderr.write(parser.format_usage())
            return EXIT_ERROR
        return int(handler(args, stdout, stderr))  # type: ignore[operator]
    except _UsageError as exc:
        stderr.write(f"{exc}\n")
        return EXIT_ERROR
    except CapabilityErrors as exc:
        stderr.write(f"{exc}\n")
        return EXIT_ERROR
    except CapmatrixError as exc:
        stderr.write(f"capmatrix: error: {exc}\n")
        return EXIT_ERROR
    except BrokenPipeError:
        raise  # the reader went away: main() exits quietly
    except OSError as exc:  # e.g. --out-dir under a file, a full disk: a message, not a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        stderr.write(f"capmatrix: error: {where}{exc.strerror or exc}\n")
        return EXIT_ERROR
    except SystemExit as exc:  # argparse's --help inside a subcommand
        return int(exc.code or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``capmatrix`` script."""
    for stream in (sys.stdout, sys.stderr):
        # Text from a matrix may not fit a narrow terminal encoding: escape it rather than crash.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        return run(sys.argv[1:] if argv is None else argv, sys.stdout, sys.stderr)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


# --------------------------------------------------------------------------------------------------
# Shared helpers for subcommands


def load_matrix(path: str | None) -> Matrix:
    """Load the matrix at ``path`` (the shipped one when None)."""
    from capmatrix.loader import load  # noqa: PLC0415 - keep `capmatrix --help` light

    return load(path)


def _add_matrix_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--matrix", metavar="DIR", help="matrix directory (default: the shipped one)")


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _convert(axis_name: str, kind: AxisType, text: str) -> AxisValue | _Any:
    from capmatrix.query import ANY  # noqa: PLC0415

    if text == "*":
        return ANY
    if kind is AxisType.INT:
        try:
            return int(text, 10)
        except ValueError:
            raise InvalidQuery(f"{_option(axis_name)} expects an integer, got {text!r}") from None
    if kind is AxisType.BOOL:
        lowered = text.lower()
        if lowered in {"true", "1", "yes", "on"}:
            return True
        if lowered in {"false", "0", "no", "off"}:
            return False
        raise InvalidQuery(f"{_option(axis_name)} expects true or false, got {text!r}")
    return text


def _add_axis_options(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    matrix = load_matrix(_prescan(argv, "--matrix"))
    group = parser.add_argument_group("axes ('*' makes an axis range over all its values)")
    for axis in matrix.axes.values():
        shown = ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in axis.values)
        group.add_argument(
            _option(axis.name), dest=f"axis_{axis.name}", metavar="VALUE",
            help=f"{axis.type}: {shown}",
        )
    parser.set_defaults(_matrix=matrix)


def query_from_args(args: argparse.Namespace, kernel: str | None) -> object:
    """Build a KernelQuery from parsed ``--<axis>`` options."""
    from capmatrix.query import KernelQuery  # noqa: PLC0415

    matrix: Matrix = args._matrix  # noqa: SLF001
    axes = {}
    for axis in matrix.axes.values():
        text = getattr(args, f"axis_{axis.name}", None)
        if text is not None:
            axes[axis.name] = _convert(axis.name, axis.type, text)
    config_path = getattr(args, "hf_config", None)
    if config_path is None:
        return KernelQuery(kernel, model=args.model, **axes)
    from capmatrix.engine import query_from_hf_config  # noqa: PLC0415

    derived = query_from_hf_config(_read_hf_config(config_path), kernel, matrix=matrix,
                                   model=args.model)
    return KernelQuery(kernel, model=derived.model, **{**derived.axes, **axes})


def _read_hf_config(path: str) -> dict[str, object]:
    """A Hugging Face ``config.json`` as a dict.

    :raises InvalidQuery: when the file is not JSON (with its line and column) or not an object.
    """
    with open(path, encoding="utf-8") as handle:  # noqa: PTH123 - a user path, OSError reported
        text = handle.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidQuery(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); "
            "pass the model's config.json as downloaded"
        ) from None
    if not isinstance(data, dict):
        raise InvalidQuery(
            f"{path}:1:1: a config.json holds one JSON object, got {type(data).__name__}"
        )
    return data


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", metavar="NAME",
        help="model whose axis values are the defaults: a short name (llama3_1_70b) or a Hugging "
             "Face id (meta-llama/Llama-3.1-70B-Instruct)",
    )
    parser.add_argument(
        "--hf-config", metavar="PATH",
        help="a Hugging Face config.json: attention, head_dim, q_per_kv, dtype and sliding_window "
             "come from it (a nested text_config too); --<axis> options still win",
    )


def _print_json(data: object, out: TextIO) -> None:
    out.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


_MARKS = {
    "grant": "+",
    "exclude": "-",
    "mismatch": "x",
    "residual": "~",
    "outside": "!",
}


def format_resolution(resolution: Resolution) -> str:
    """Human-readable verdict, query and reasons."""
    lines = [f"{resolution.kernel}: {resolution.verdict}"]
    by_origin: dict[str, list[str]] = {}
    for name, value in resolution.values.items():
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        by_origin.setdefault(resolution.origins[name], []).append(f"{name}={shown}")
    for origin, items in by_origin.items():
        label = {"query": "query", "default": "axis defaults"}.get(
            origin, origin.replace("model:", "model ")
        )
        lines.append(f"  {label}: {' '.join(items)}")
    why = [r for r in resolution.reasons if r.kind in _MARKS]
    if why:
        lines.append("  why:")
        lines.extend(f"    {_MARKS[r.kind]} {r.message}" for r in why)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# query / select / validate


def configure_query(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Arguments of ``capmatrix query``."""
    parser.add_argument("kernel", help="kernel name, e.g. xqa")
    _add_model_options(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    _add_matrix_option(parser)
    _add_axis_options(parser, argv)


def cmd_query(args: argparse.Namespace, out: TextIO, _err: TextIO) -> int:
    """Resolve one query; exit 0 supported, 1 unsupported, 3 depends."""
    from capmatrix.resolver import Verdict, resolve  # noqa: PLC0415

    query = query_from_args(args, args.kernel)
    resolution = resolve(query, args._matrix)  # type: ignore[arg-type]  # noqa: SLF001
    if args.json:
        _print_json(resolution.as_dict(), out)
    else:
        out.write(format_resolution(resolution) + "\n")
    return {Verdict.SUPPORTED: EXIT_OK, Verdict.UNSUPPORTED: EXIT_FAIL}.get(
        resolution.verdict, EXIT_DEPENDS
    )


def configure_select(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Arguments of ``capmatrix select``."""
    parser.add_argument("role", help="role name, e.g. trtllm_generation")
    _add_model_options(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    _add_matrix_option(parser)
    _add_axis_options(parser, argv)


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


def cmd_select(args: argparse.Namespace, out: TextIO, _err: TextIO) -> int:
    """Select a kernel for a role; exit 0 when one is supported, 1 when none, 3 when it depends."""
    from capmatrix.resolver import Verdict, select  # noqa: PLC0415

    query = query_from_args(args, None)
    selection = select(args.role, query, args._matrix)  # type: ignore[arg-type]  # noqa: SLF001
    if args.json:
        _print_json(selection.as_dict(), out)
    else:
        out.write(format_selection(selection) + "\n")
    return {Verdict.SUPPORTED: EXIT_OK, Verdict.UNSUPPORTED: EXIT_FAIL}.get(
        selection.verdict, EXIT_DEPENDS
    )


def configure_validate(parser: argparse.ArgumentParser, _argv: Sequence[str]) -> None:
    """Arguments of ``capmatrix validate``."""
    parser.add_argument("path", nargs="?", help="matrix directory (default: the shipped one)")
    parser.add_argument("--json", action="store_true", help="print problems as JSON")


def cmd_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Validate a matrix; exit 0 when clean, 2 with every problem listed."""
    from capmatrix.loader import iter_problems, load  # noqa: PLC0415

    problems = list(iter_problems(args.path))
    if args.json:
        _print_json({"ok": not problems, "problems": [p.as_dict() for p in problems]}, out)
        return EXIT_ERROR if problems else EXIT_OK
    if problems:
        err.write(str(CapabilityErrors(problems)) + "\n")
        return EXIT_ERROR
    matrix = load(args.path)
    rules = sum(len(k.rules) for k in matrix.kernels.values())
    out.write(
        f"ok: {len(matrix.files)} files, {len(matrix.axes)} axes, {len(matrix.kernels)} kernels, "
        f"{rules} rules, {len(matrix.models)} models, {len(matrix.roles)} roles\n"
    )
    return EXIT_OK
