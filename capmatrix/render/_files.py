"""Both pages as files: rendered fully to strings, then written atomically, or compared (``--check``).

A failed render leaves the old files intact; :func:`check_files` returns a unified diff per stale page.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING

from capmatrix._atomic import check_replaceable, write_text_atomic
from capmatrix.render._build import build
from capmatrix.render.html import render_html
from capmatrix.render.markdown import render_markdown

if TYPE_CHECKING:
    from capmatrix.matrix import Matrix

__all__ = ["HTML_NAME", "MARKDOWN_NAME", "check_files", "render_files", "render_pages"]

MARKDOWN_NAME = "support-matrix.md"
HTML_NAME = "support-matrix.html"
#: Lines of unified diff that ``--check`` prints before cutting the rest short.
MAX_DIFF_LINES = 60


def render_pages(matrix: Matrix) -> dict[str, str]:
    """Both pages as ``{file name: text}``, rendered fully before anything is written."""
    doc = build(matrix)
    return {MARKDOWN_NAME: render_markdown(doc), HTML_NAME: render_html(doc)}


def render_files(matrix: Matrix, out_dir: str | Path) -> list[Path]:
    """Render both pages and write them (atomically) into ``out_dir``; return the paths written.

    Both pages or neither: when writing one fails, the pages already written get their previous
    content back (or are removed when there was none), and the error propagates.
    """
    pages = render_pages(matrix)
    for name in pages:  # nothing is written when either path is a link, a FIFO or a device
        check_replaceable(Path(out_dir) / name)
    written: list[Path] = []
    previous: list[tuple[Path, bytes | None]] = []
    try:
        for name, text in pages.items():
            target = Path(out_dir) / name
            try:
                before: bytes | None = target.read_bytes()
            except (FileNotFoundError, NotADirectoryError):  # a bad parent: the write reports it
                before = None
            write_text_atomic(target, text)
            previous.append((target, before))
            written.append(target)
    except BaseException:
        for target, before in reversed(previous):
            if before is None:
                target.unlink(missing_ok=True)
            else:
                write_text_atomic(target, before.decode("utf-8", "replace"))
        raise
    return written


def check_files(matrix: Matrix, out_dir: str | Path) -> list[str]:
    """Unified diffs (one string per stale page) between ``out_dir`` and a fresh render."""
    diffs = []
    for name, text in render_pages(matrix).items():
        target = Path(out_dir) / name
        current = "" if check_replaceable(target) is None else target.read_text(encoding="utf-8")
        if current != text:
            lines = list(difflib.unified_diff(
                current.splitlines(), text.splitlines(),
                fromfile=f"{name} (committed)", tofile=f"{name} (rendered)", lineterm="", n=1,
            ))
            if len(lines) > MAX_DIFF_LINES:
                rest = len(lines) - MAX_DIFF_LINES
                lines = [*lines[:MAX_DIFF_LINES], f"... ({rest} more diff lines)"]
            diffs.append("\n".join(lines))
    return diffs
