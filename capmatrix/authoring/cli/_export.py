"""``capmatrix export`` (the compiled matrix as a JSON artifact) and ``capmatrix codegen`` (code from it)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from capmatrix.authoring._atomic import write_text_atomic
from capmatrix.authoring.cli._common import EXIT_OK, add_matrix_option, load_matrix
from capmatrix.authoring.codegen import cpp_header
from capmatrix.authoring.export import dumps, export

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["cmd_codegen", "cmd_export", "configure_codegen", "configure_export"]

EPILOG = """example:
  capmatrix export --out capmatrix.json   # then validate it against capmatrix/schema/export.schema.json
"""


def configure_export(parser: argparse.ArgumentParser, _argv: Sequence[str] = ()) -> None:
    """Arguments of ``capmatrix export``."""
    parser.epilog = EPILOG
    add_matrix_option(parser)
    parser.add_argument("--out", metavar="FILE", default="-",
                        help="where to write the JSON (default: standard output)")


def cmd_export(args: argparse.Namespace, _prepared: None, out: TextIO, _err: TextIO) -> int:
    """Write the artifact; exit 0."""
    text = dumps(export(load_matrix(args.matrix)))
    if args.out == "-":
        out.write(text)
    else:
        write_text_atomic(args.out, text)
        out.write(f"wrote {args.out}\n")
    return EXIT_OK


CODEGEN_EPILOG = """example:
  capmatrix codegen cpp --kernel xqa trtllm_spec_dec_mode --role trtllm_generation --out capmatrix.h
  g++ -std=c++17 -c engine.cpp   # engine.cpp: #include "capmatrix.h", see docs/integration.md
"""


def configure_codegen(parser: argparse.ArgumentParser, _argv: Sequence[str] = ()) -> None:
    """Arguments of ``capmatrix codegen``."""
    parser.epilog = CODEGEN_EPILOG
    parser.add_argument("language", choices=["cpp"], help="cpp: a self-contained C++17 header")
    parser.add_argument("--kernel", metavar="K", nargs="+", action="extend", default=[],
                        help="kernels or gates to answer (repeatable)")
    parser.add_argument("--role", metavar="R", nargs="+", action="extend", default=[],
                        help="roles to answer; their candidates are included (repeatable)")
    parser.add_argument("--namespace", default="capmatrix", help="C++ namespace (default: capmatrix)")
    add_matrix_option(parser)
    parser.add_argument("--out", metavar="FILE", default="-",
                        help="where to write the header (default: standard output)")


def cmd_codegen(args: argparse.Namespace, _prepared: None, out: TextIO, _err: TextIO) -> int:
    """Write the generated code; exit 0 (2 for an unknown kernel or role)."""
    words = ["capmatrix codegen", args.language]
    if args.kernel:
        words += ["--kernel", *args.kernel]
    if args.role:
        words += ["--role", *args.role]
    text = cpp_header(export(load_matrix(args.matrix)), args.kernel, args.role,
                      namespace=args.namespace, command=" ".join(words))
    if args.out == "-":
        out.write(text)
    else:
        write_text_atomic(args.out, text)
        out.write(f"wrote {args.out}\n")
    return EXIT_OK
