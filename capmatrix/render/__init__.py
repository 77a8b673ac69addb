"""Generated support-matrix docs: Markdown and a self-contained HTML page, both from the YAML.

:func:`build` (private ``_build``) turns a matrix into a :class:`Document`, the page model of
:mod:`~capmatrix.render.page`; :mod:`~capmatrix.render.markdown` and :mod:`~capmatrix.render.html` print
it; :func:`render_files` writes both pages atomically and :func:`stale_pages` (:func:`check_files`) compares
them with a fresh render, with a short diff of each stale page (private ``_files``): the committed
Markdown always, the HTML page (a build output) when asked for. Output is
deterministic: matrix order, no timestamps, every path shown relative to the matrix root.
"""

from __future__ import annotations

from capmatrix.render._build import ANY_SM as ANY_SM
from capmatrix.render._build import REGENERATE as REGENERATE
from capmatrix.render._build import build as build
from capmatrix.render._files import HTML_NAME as HTML_NAME
from capmatrix.render._files import MARKDOWN_NAME as MARKDOWN_NAME
from capmatrix.render._files import check_files as check_files
from capmatrix.render._files import render_files as render_files
from capmatrix.render._files import render_pages as render_pages
from capmatrix.render._files import stale_pages as stale_pages
from capmatrix.render.html import render_html as render_html
from capmatrix.render.markdown import render_markdown as render_markdown
from capmatrix.render.page import LEGEND as LEGEND
from capmatrix.render.page import UNGRANTED_SYMBOL as UNGRANTED_SYMBOL
from capmatrix.render.page import Cell as Cell
from capmatrix.render.page import CellStatus as CellStatus
from capmatrix.render.page import Citation as Citation
from capmatrix.render.page import Document as Document
from capmatrix.render.page import EvidenceSummary as EvidenceSummary
from capmatrix.render.page import Grid as Grid
from capmatrix.render.page import KernelSection as KernelSection
from capmatrix.render.page import Note as Note
from capmatrix.render.page import RenderError as RenderError
from capmatrix.render.page import RoleSection as RoleSection

__all__ = [
    "ANY_SM",
    "HTML_NAME",
    "LEGEND",
    "MARKDOWN_NAME",
    "REGENERATE",
    "UNGRANTED_SYMBOL",
    "Cell",
    "CellStatus",
    "Citation",
    "Document",
    "EvidenceSummary",
    "Grid",
    "KernelSection",
    "Note",
    "RenderError",
    "RoleSection",
    "build",
    "check_files",
    "render_files",
    "render_html",
    "render_markdown",
    "render_pages",
    "stale_pages",
]


def __dir__() -> list[str]:
    return list(__all__)
