"""``capmatrix render``: write the support-matrix pages, or check them (``--check``).

The Markdown page is committed and ``--check`` compares it; the HTML page is a build output (``make
docs``), which ``--check`` renders (so a page that no longer renders fails) and compares only with
``--with-html``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from capmatrix.authoring.cli._common import add_matrix_option, announce_matrix, choose_matrix, load_matrix
from capmatrix.authoring.render import HTML_NAME, MARKDOWN_NAME, REGENERATE, render_files, stale_pages

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["cmd_render", "configure_render"]


def configure_render(parser: argparse.ArgumentParser, _argv: Sequence[str] = ()) -> None:
    """Arguments of ``capmatrix render`` and ``tools/render_matrix.py``."""
    parser.add_argument("--check", action="store_true",
                        help=f"exit 1 with a diff when {MARKDOWN_NAME} differs from a fresh render "
                             f"({HTML_NAME} is rendered too, not compared)")
    parser.add_argument("--with-html", action="store_true",
                        help=f"check {HTML_NAME} too (implies --check; a build output, not committed)")
    add_matrix_option(parser)
    parser.add_argument("--out-dir", metavar="DIR", default="docs",
                        help="where the pages live (default: docs)")


def cmd_render(args: argparse.Namespace, _prepared: None, out: TextIO, err: TextIO) -> int:
    """Write the pages, or with ``--check`` compare them; exit 0 fresh/written, 1 stale."""
    announce_matrix(choose_matrix(args.matrix), err)
    matrix = load_matrix(args.matrix)
    if args.check or args.with_html:
        stale = stale_pages(matrix, args.out_dir, html=args.with_html)
        if stale:
            err.write("\n".join(stale.values()) + "\n")
            err.write(f"capmatrix: stale in {_shown(args.out_dir)}: {', '.join(stale)}; run "
                      f"`{_command(args)}`{' and commit the result' if MARKDOWN_NAME in stale else ''}\n")
            return 1
        if args.with_html:
            out.write(f"ok: {MARKDOWN_NAME} and {HTML_NAME} in {args.out_dir} are up to date\n")
        else:
            out.write(f"ok: {MARKDOWN_NAME} in {args.out_dir} is up to date ({HTML_NAME} renders)\n")
        return 0
    out.writelines(f"wrote {path}\n" for path in render_files(matrix, args.out_dir))
    return 0


def _shown(path: str) -> str:
    """``path`` relative to the working directory when it lies below it (no machine paths in messages)."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix() or "."
    except ValueError:
        return path


def _command(args: argparse.Namespace) -> str:
    """The ``capmatrix render`` command that rewrites the pages this check compared."""
    parts = [REGENERATE]
    if args.matrix is not None and not _same(args.matrix, choose_matrix(None).path):
        parts += ["--matrix", _shown(args.matrix)]
    if _shown(args.out_dir) != "docs":
        parts += ["--out-dir", _shown(args.out_dir)]
    return " ".join(parts)


def _same(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one directory (``--matrix capabilities`` in a checkout is the default)."""
    return Path(a).resolve() == Path(b).resolve()
