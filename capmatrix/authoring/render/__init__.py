"""Generated support-matrix docs: Markdown and a self-contained HTML page, both from the YAML.

:func:`build` (private ``_build``) turns a matrix into a :class:`Document`, the page model of
:mod:`~capmatrix.authoring.render.page`; :mod:`~capmatrix.authoring.render.markdown` and
:mod:`~capmatrix.authoring.render.html` print it; :func:`render_files` writes both pages atomically and
:func:`stale_pages` (:func:`check_files`) compares them with a fresh render, with a short diff of each stale
page (private ``_files``): the committed Markdown always, the HTML page (a build output) when asked for.
Output is
deterministic: matrix order, no timestamps, every path shown relative to the matrix root.
"""

from __future__ import annotations

from capmatrix.authoring.render._build import ANY_SM as ANY_SM
from capmatrix.authoring.render._build import REGENERATE as REGENERATE
from capmatrix.authoring.render._build import build as build
from capmatrix.authoring.render._files import HTML_NAME as HTML_NAME
from capmatrix.authoring.render._files import MARKDOWN_NAME as MARKDOWN_NAME
from capmatrix.authoring.render._files import check_files as check_files
from capmatrix.authoring.render._files import render_files as render_files
from capmatrix.authoring.render._files import render_pages as render_pages
from capmatrix.authoring.render._files import stale_pages as stale_pages
from capmatrix.authoring.render.html import render_html as render_html
from capmatrix.authoring.render.markdown import render_markdown as render_markdown
from capmatrix.authoring.render.page import LEGEND as LEGEND
from capmatrix.authoring.render.page import UNGRANTED_SYMBOL as UNGRANTED_SYMBOL
from capmatrix.authoring.render.page import Cell as Cell
from capmatrix.authoring.render.page import CellStatus as CellStatus
from capmatrix.authoring.render.page import Citation as Citation
from capmatrix.authoring.render.page import Document as Document
from capmatrix.authoring.render.page import EvidenceSummary as EvidenceSummary
from capmatrix.authoring.render.page import Grid as Grid
from capmatrix.authoring.render.page import KernelSection as KernelSection
from capmatrix.authoring.render.page import Note as Note
from capmatrix.authoring.render.page import RenderError as RenderError
from capmatrix.authoring.render.page import RoleSection as RoleSection

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
