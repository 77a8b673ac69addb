"""The ``capmatrix`` dispatcher: ``main(argv) -> exit status``; each subcommand lives in a module.

Exit statuses: 0 supported / clean, 1 unsupported (or a failed check), 3 depends, 2 usage or data error.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys

from capmatrix.authoring._heap import tune as tune_collector
from capmatrix.authoring.cli._common import (
    EXIT_ERROR,
    EXIT_OK,
    brief_load_errors,
    columns,
    forget_matrix_choice,
)
from capmatrix.errors import CapabilityErrors, CapmatrixError

TYPE_CHECKING = False  # not typing's: every command would import it for annotations only
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import TextIO

    from capmatrix.authoring.cli._common import Handler

__all__ = ["COMMANDS", "EXAMPLES", "main", "render_main", "run", "version"]

#: Subcommand -> (module holding ``configure_<name>`` and ``cmd_<name>``, one-line help).
#: Modules are imported only for the subcommand that runs (``capmatrix --help`` stays fast); this
#: is start-up cost, not a way round an import circle: the dispatcher is the top of the package.
COMMANDS: dict[str, tuple[str, str]] = {
    "query": ("capmatrix.authoring.cli._query", "answer whether a kernel supports a query"),
    "select": ("capmatrix.authoring.cli._query", "pick the first supported kernel of a role"),
    "list": (
        "capmatrix.authoring.cli._list",
        "list the kernels, gates, roles, models, axes or GPUs a query may name",
    ),
    "validate": (
        "capmatrix.authoring.cli._query",
        "validate a matrix directory (exit 0 clean, 2 with problems)",
    ),
    "render": (
        "capmatrix.authoring.cli._render",
        "write the support-matrix docs, or --check them (1 when stale)",
    ),
    "probe": (
        "capmatrix.authoring.cli._probe",
        "check the torch SDPA rules on this GPU (exit 0 agree, 1 disagree, 2 no GPU)",
    ),
    "check": (
        "capmatrix.authoring.cli._analysis",
        "static analysis: dead, redundant, open-ended rules, gaps",
    ),
    "diff": ("capmatrix.authoring.cli._analysis", "semantic diff of two matrices or git revisions"),
    "compare-legacy": ("capmatrix.authoring.cli._analysis", "compare a legacy predicate with a kernel"),
    "test": ("capmatrix.authoring.cli._analysis", "run the expectation cases and report rule coverage"),
    "export": (
        "capmatrix.authoring.cli._export",
        "write the compiled matrix as a JSON artifact (docs/export.md)",
    ),
    "codegen": (
        "capmatrix.authoring.cli._export",
        "generate code answering chosen kernels and roles (cpp: C++17)",
    ),
}


#: Subcommand -> the example lines its ``--help`` ends with (every command has one).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "query": (
        "capmatrix query xqa --sm 120 --model llama --spec-dec one_model",
        "capmatrix query xqa --sm 121 --model deepseek_v3 --spec-dec one_model --json",
        "capmatrix query xqa --sm 120 --model qwen2 --spec-dec one_model --vary sm",
    ),
    "select": ("capmatrix select trtllm_generation --sm 90 --model llama",),
    "list": ("capmatrix list kernels", "capmatrix list gpus --json"),
    "validate": ("capmatrix validate capabilities", "capmatrix validate capabilities --format github"),
    "render": ("capmatrix render", "capmatrix render --check --matrix capabilities --out-dir docs"),
    "probe": ("capmatrix probe --kernel torch_sdpa_flash --out evidence.json",),
    "check": ("capmatrix check capabilities --strict", "capmatrix check --format github"),
    "diff": ("capmatrix diff HEAD~1", "capmatrix diff origin/main --markdown > comment.md"),
    "compare-legacy": (
        (
            "capmatrix compare-legacy examples/legacy/trtllm_release_1_2.py:xqa_spec_dec_mode_before "
            "--kernel trtllm_spec_dec_mode"
        ),
    ),
    "test": ("capmatrix test capabilities", "capmatrix test --json"),
}

#: The first line of ``capmatrix --help`` (unchanged since the command line was one module).
_DESCRIPTION = (
    "The ``capmatrix`` command line: ``main(argv) -> exit status``; every subcommand is a function."
)

_EPILOG = """\
exit status: 0 supported / clean, 1 unsupported / failed check, 3 depends, 2 usage or data error.
`python -m capmatrix` runs the same command line; `capmatrix COMMAND --help` shows an example.

examples:
  capmatrix validate
  capmatrix query xqa --sm 120 --model llama --spec-dec one_model
  capmatrix select trtllm_generation --sm 90 --model llama
  capmatrix diff HEAD~1 --markdown"""


def version() -> str:
    """The installed distribution's version (``unknown`` when run from a bare source tree)."""
    from importlib.metadata import PackageNotFoundError  # noqa: PLC0415 - only for --version
    from importlib.metadata import version as dist_version  # noqa: PLC0415

    try:
        return dist_version("capmatrix")
    except PackageNotFoundError:  # pragma: no cover - the tests run an installed capmatrix
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: the version is read only when asked for (start-up stays light)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")
        del kwargs

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,  # noqa: ARG002
                 values: object, option_string: str | None = None) -> None:  # noqa: ARG002
        sys.stdout.write(f"capmatrix {version()}\n")
        parser.exit()


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help formatter, the terminal's width read without importing ``shutil``.

    argparse makes a formatter for every option it adds, and its own reads the width through
    ``shutil``, whose import (with ``bz2`` and ``lzma``) is a few per cent of a command's start.
    """

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         columns() - 2 if width is None else width)


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


def _build_parser(argv: Sequence[str]) -> tuple[_Parser, dict[str, tuple[Handler, object]]]:
    """The parser, and for the chosen subcommand its handler with what its configure step prepared."""
    parser = _Parser(prog="capmatrix", description=_DESCRIPTION, epilog=_EPILOG,
                     formatter_class=_Formatter)
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument(
        "--brief-load-errors", action="store_true",
        help=("when the matrix does not load, say so in one line and leave the problems to "
              "`capmatrix validate` (for hooks that run beside it)"),
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    chosen = _subcommand(argv)
    handlers: dict[str, tuple[Handler, object]] = {}
    for name, (module_name, help_text) in COMMANDS.items():
        examples = EXAMPLES.get(name, ())
        epilog = ("example" + ("s" if len(examples) > 1 else "") + ":\n"
                  + "\n".join(f"  {line}" for line in examples)) if examples else None
        sub = subparsers.add_parser(name, help=help_text, description=help_text, epilog=epilog,
                                    formatter_class=_Formatter)
        if name == chosen:
            module = importlib.import_module(module_name)
            attr = name.replace("-", "_")
            prepared = getattr(module, f"configure_{attr}")(sub, argv)
            handlers[name] = (getattr(module, f"cmd_{attr}"), prepared)
    return parser, handlers


def run(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    """Run one command line; return its exit status (never raises for bad input)."""
    argv = list(argv)
    forget_matrix_choice()
    brief = False
    try:
        parser, handlers = _build_parser(argv)
        if not argv or argv[0] in {"-h", "--help"}:
            stdout.write(parser.format_help())
            return EXIT_OK if argv else EXIT_ERROR
        with contextlib.redirect_stdout(stdout):  # `capmatrix query --help` writes to ``stdout`` too
            args = parser.parse_args(argv)
        found = handlers.get(args.command)
        if found is None:
            stderr.write(parser.format_usage())
            return EXIT_ERROR
        handler, prepared = found
        brief = bool(args.brief_load_errors)
        return int(handler(args, prepared, stdout, stderr))
    except _UsageError as exc:
        stderr.write(f"{exc}\n")
        return EXIT_ERROR
    except CapabilityErrors as exc:
        stderr.write(f"{brief_load_errors(len(exc.errors), exc.errors[0].location) if brief else exc}\n")
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
        tune_collector()  # the command's process is ours: see capmatrix/authoring/_heap.py
    except CapmatrixError as exc:
        sys.stderr.write(f"capmatrix: error: {exc}\n")
        return EXIT_ERROR
    try:
        return run(sys.argv[1:] if argv is None else argv, sys.stdout, sys.stderr)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


def render_main(argv: Sequence[str] | None = None, *, default_out: str | Path | None = None) -> int:
    """Entry point of ``tools/render_matrix.py``: the ``render`` subcommand on its own."""
    args = list(sys.argv[1:] if argv is None else argv)
    if default_out is not None and not any(a == "--out-dir" or a.startswith("--out-dir=")
                                           for a in args):
        args += ["--out-dir", str(default_out)]
    return run(["render", *args], sys.stdout, sys.stderr)
