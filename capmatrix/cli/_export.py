"""``capmatrix export``: the compiled matrix as a JSON artifact (``docs/export.md``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from capmatrix._atomic import write_text_atomic
from capmatrix.cli._common import EXIT_OK, add_matrix_option, load_matrix
from capmatrix.export import dumps, export

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["cmd_export", "configure_export"]

EPILOG = """example:
  capmatrix export --out capmatrix.json   # then validate it against capmatrix/schema/export.schema.json
"""


def configure_export(parser: argparse.ArgumentParser, _argv: Sequence[str] = ()) -> None:
    """Arguments of ``capmatrix export``."""
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
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
