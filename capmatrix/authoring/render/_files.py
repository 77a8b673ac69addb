"""Both pages as files: rendered fully to strings, then written atomically, or compared (``--check``).

A failed render leaves the old files intact; :func:`stale_pages` names the stale pages, each with a short
unified diff of its readable lines. The Markdown page is committed and always compared; the HTML page is a
build output (``make docs``, CI's artifact), rendered by every check but compared only when asked for.
"""

from __future__ import annotations

import difflib
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from capmatrix.authoring._atomic import check_replaceable, write_text_atomic
from capmatrix.authoring.render._build import build
from capmatrix.authoring.render.html import render_html
from capmatrix.authoring.render.markdown import render_markdown

if TYPE_CHECKING:
    from capmatrix.matrix import Matrix

__all__ = ["HTML_NAME", "MARKDOWN_NAME", "check_files", "render_files", "render_pages", "stale_pages"]

MARKDOWN_NAME = "support-matrix.md"
HTML_NAME = "support-matrix.html"
#: Lines of unified diff that ``--check`` prints per page before cutting the rest short.
MAX_DIFF_LINES = 40
#: Characters of diff printed per page at most (a few kilobytes for both pages together).
MAX_DIFF_CHARS = 2500
#: Characters of one diff line printed; the rest of the line is counted.
MAX_LINE_CHARS = 200
#: A line this long is data, not text (the HTML page embeds its export artifact as one line): the
#: diff compares a short stand-in for it, never the line itself.
DATA_LINE_CHARS = 10_000


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


def _readable(text: str) -> list[str]:
    """The lines of a page as the diff shows them: a stand-in for each line of data."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if len(line) >= DATA_LINE_CHARS:
            what = "the embedded page data" if 'id="ask-data"' in line else "a line of data"
            digest = hashlib.sha256(line.encode("utf-8", "surrogatepass")).hexdigest()[:12]
            lines[i] = f"[{what}: {len(line):,} characters, sha256 {digest}...]"
    return lines


def _bounded(lines: list[str]) -> str:
    """``lines`` of a diff, each cut to :data:`MAX_LINE_CHARS`, all to the diff limits."""
    shown: list[str] = []
    size = 0
    for count, line in enumerate(lines):
        cut = line if len(line) <= MAX_LINE_CHARS else (
            f"{line[:MAX_LINE_CHARS]} ... ({len(line) - MAX_LINE_CHARS:,} more characters)"
        )
        if count >= MAX_DIFF_LINES or size + len(cut) > MAX_DIFF_CHARS:
            shown.append(f"... ({len(lines) - count} more diff lines)")
            break
        shown.append(cut)
        size += len(cut) + 1
    return "\n".join(shown)


def stale_pages(matrix: Matrix, out_dir: str | Path, *, html: bool = False) -> dict[str, str]:
    """The pages in ``out_dir`` that differ from a fresh render, each with a short diff of its text.

    Both pages are rendered, so a page that no longer renders fails the check; the HTML page is compared
    only with ``html`` (it is not committed: ``make docs`` builds it). The diff is bounded
    (:data:`MAX_DIFF_LINES` lines, :data:`MAX_DIFF_CHARS` characters, lines cut to
    :data:`MAX_LINE_CHARS`) and never repeats the page's embedded data: a line of data is compared as
    its length and digest.
    """
    stale = {}
    for name, text in render_pages(matrix).items():
        if name == HTML_NAME and not html:
            continue
        target = Path(out_dir) / name
        current = "" if check_replaceable(target) is None else target.read_text(encoding="utf-8")
        if current != text:
            lines = list(difflib.unified_diff(
                _readable(current), _readable(text),
                fromfile=f"{name} (committed)", tofile=f"{name} (rendered)", lineterm="", n=1,
            ))
            stale[name] = _bounded(lines) if lines else (
                f"{name}: the files differ only in line endings or the final newline")
    return stale


def check_files(matrix: Matrix, out_dir: str | Path, *, html: bool = False) -> list[str]:
    """The short diffs of :func:`stale_pages` (one string per stale page; empty when all are fresh)."""
    return list(stale_pages(matrix, out_dir, html=html).values())
