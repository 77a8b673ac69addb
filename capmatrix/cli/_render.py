"""``capmatrix render``: write the support-matrix pages, or check them (``--check``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from capmatrix.cli._common import add_matrix_option, announce_matrix, choose_matrix, load_matrix
from capmatrix.render import HTML_NAME, MARKDOWN_NAME, REGENERATE, check_files, render_files

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["cmd_render", "configure_render"]


def configure_render(parser: argparse.ArgumentParser, _argv: Sequence[str] = ()) -> None:
    """Arguments of ``capmatrix render`` and ``tools/render_matrix.py``."""
    parser.add_argument("--check", action="store_true",
                        help="exit 1 with a diff when the pages differ from a fresh render")
    add_matrix_option(parser)
    parser.add_argument("--out-dir", metavar="DIR", default="docs",
                        help="where the pages live (default: docs)")


def cmd_render(args: argparse.Namespace, _prepared: None, out: TextIO, err: TextIO) -> int:
    """Write the pages, or with ``--check`` compare them; exit 0 fresh/written, 1 stale."""
    announce_matrix(choose_matrix(args.matrix), err)
    matrix = load_matrix(args.matrix)
    if args.check:
        diffs = check_files(matrix, args.out_dir)
        if diffs:
            err.write("\n".join(diffs) + "\n")
            err.write(f"capmatrix: the support-matrix docs in {args.out_dir} are stale; "
                      f"run `{REGENERATE}` and commit the result\n")
            return 1
        out.write(f"ok: {MARKDOWN_NAME} and {HTML_NAME} in {args.out_dir} are up to date\n")
        return 0
    out.writelines(f"wrote {path}\n" for path in render_files(matrix, args.out_dir))
    return 0
