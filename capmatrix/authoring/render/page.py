"""The page model both printers read: grids of cells, notes citing rules, kernel and role sections.

:func:`capmatrix.authoring.render.build` computes a :class:`Document` from a matrix;
:mod:`~capmatrix.authoring.render.markdown` and :mod:`~capmatrix.authoring.render.html` print it. Everything
here is plain, immutable data.
"""

from __future__ import annotations

from dataclasses import dataclass

from capmatrix.errors import CapmatrixError
from capmatrix.model import _StrEnum

__all__ = [
    "COMMON_LEGEND",
    "LEGEND",
    "UNGRANTED_SYMBOL",
    "Cell",
    "CellStatus",
    "Citation",
    "CommonTable",
    "Document",
    "EvidenceSummary",
    "Grid",
    "KernelSection",
    "Note",
    "RenderError",
    "RoleSection",
    "slug",
]


def slug(text: str) -> str:
    """The anchor form of a name (``trtllm_generation`` -> ``trtllm-generation``)."""
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")


class RenderError(CapmatrixError):
    """The docs cannot be rendered (an unreadable evidence file, an inconsistent verdict)."""


class CellStatus(_StrEnum):
    """The state of one grid cell."""

    SUPPORTED = "supported"
    PARTIAL = "partial"
    UNSUPPORTED = "unsupported"
    #: Only in the common-configurations table: the answer depends on an axis the row leaves open.
    DEPENDS = "depends"

    @property
    def symbol(self) -> str:
        """The symbol that carries the state without colour."""
        return _SYMBOLS[self]


_SYMBOLS = {
    CellStatus.SUPPORTED: "✓",
    CellStatus.PARTIAL: "◐",
    CellStatus.UNSUPPORTED: "✗",
    CellStatus.DEPENDS: "?",
}

#: The symbol of an unsupported cell that no rule grants (nothing is known either way), as against
#: ``✗``, a cell a rule refuses (a known refusal: an exclusion removes a grant).
UNGRANTED_SYMBOL = "○"

#: (symbol, label, explanation) for the legend of both pages.
LEGEND: tuple[tuple[str, str, str], ...] = (
    ("✓", "supported",
     ("the rules grant the cell and no exclusion cuts into it; the note lists what the grant still "
     "requires of the axes the grid does not show")),
    ("◐", "partial",
     ("granted, but an exclusion removes part of it: it depends on another axis (the note says which, "
     "and where it stays supported)")),
    ("✗", "refused",
     ("unsupported, a known refusal: a rule grants the cell and an exclusion removes all of it (the "
     "note names the exclusion, its reason and source)")),
    (UNGRANTED_SYMBOL, "not granted",
     ("unsupported because no rule grants it: nothing in the matrix says it works, and no rule says "
     "it fails")),
)


#: (symbol, label, explanation) for the common-configurations table, whose cells are whole answers.
COMMON_LEGEND: tuple[tuple[str, str, str], ...] = (
    ("✓", "supported", "a kernel of the engine serves exactly this configuration on this GPU"),
    ("✗", "refused",
     "no kernel of the engine serves it, and a rule refuses it for at least one (the note names it)"),
    (UNGRANTED_SYMBOL, "not granted",
     "no kernel of the engine serves it because no rule of any of them grants it"),
    ("?", "depends", "the answer depends on a setting the row does not fix (the note says which)"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Citation:
    """One rule cited by a note, with everything a reader needs to check it."""

    rule_id: str
    effect: str
    location: str
    link: str | None
    region: str
    requires: str
    reason: str
    source: str
    status: str
    verification: str

    @property
    def scope(self) -> str:
        """``requires dtype [fp16, bf16]`` for a grant, ``where head_dim <=128`` for an exclusion."""
        if not self.requires:
            return ""
        return f"{'requires' if self.effect == 'grant' else 'where'} {self.requires}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Note:
    """The explanation behind one or more cells (cells with the same explanation share a note)."""

    anchor: str
    number: int
    summary: str
    citations: tuple[Citation, ...] = ()
    details: tuple[str, ...] = ()

    @property
    def plain(self) -> str:
        """A one-paragraph plain-text form (the HTML ``title`` of a cell)."""
        parts = [self.summary]
        parts.extend(f"{c.effect} {c.rule_id} ({c.location}; {c.verification})" for c in self.citations)
        parts.extend(self.details)
        return " | ".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One cell: its state, the text shown (a symbol or a kernel name) and its note."""

    status: CellStatus | None
    text: str
    note: Note | None = None
    link: str | None = None
    #: Unsupported because no rule grants it (shown as UNGRANTED_SYMBOL), not refused by a rule.
    ungranted: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Grid:
    """A table of cells with row and column headers and the notes its cells cite."""

    anchor: str
    caption: str
    corner: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[Cell, ...]], ...]
    notes: tuple[Note, ...] = ()
    #: Two column axes: the first axis's values with their spans, and the second axis's values.
    groups: tuple[tuple[str, int], ...] = ()
    subcolumns: tuple[str, ...] = ()
    #: Per row, the model it is about (for the page's model filter); empty when rows are not models.
    row_models: tuple[str, ...] = ()
    #: Per column, the model it is about (role grids); empty when columns are not models.
    column_models: tuple[str, ...] = ()
    #: Per row, the kernel it is about (the overview); empty otherwise.
    row_kernels: tuple[str, ...] = ()
    #: Per row or per column, the SM it is about ("" for a row of every SM), for the page's search.
    row_sms: tuple[str, ...] = ()
    column_sms: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CommonTable:
    """The first table a reader sees: common configurations (rows) by GPU (columns).

    Each cell is the engine's answer for exactly that configuration (a role's selection), never a
    summary over axes the row leaves open: those make the cell ``depends``.
    """

    grid: Grid
    #: One line per common setting: its label and the query values it fixes.
    settings: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelSection:
    """One kernel: its description, its grid and a summary of its rules."""

    name: str
    anchor: str
    kind: str
    engine: str | None
    description: str
    location: str
    link: str | None
    fixed: str
    grid: Grid
    rules: tuple[Citation, ...]
    #: Roles listing the kernel, and models it supports on some SM (for the page's filters).
    roles: tuple[str, ...] = ()
    models: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleSection:
    """One role: its candidates in order and the grid of which candidate wins where."""

    name: str
    anchor: str
    description: str
    candidates: tuple[str, ...]
    location: str
    link: str | None
    split: str | None
    fixed: str
    grids: tuple[Grid, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceSummary:
    """One probe evidence file, summarised."""

    path: str
    link: str | None
    gpu: str
    sm: str
    software: str
    cases: int
    kernels: tuple[str, ...]
    disagreements: int | None
    notes: int | None
    examples: tuple[str, ...] = ()
    problem: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Document:
    """Everything both pages show."""

    title: str
    intro: tuple[str, ...]
    families: tuple[str, ...]
    common: CommonTable | None
    overview: Grid
    kernels: tuple[KernelSection, ...]
    roles: tuple[RoleSection, ...]
    evidence: tuple[EvidenceSummary, ...]
    #: The ask form's data: the export artifact plus labels (JSON text, embedded in the HTML page).
    ask_data: str = ""
    #: The models of the matrix and its roles, for the filters and the ask form.
    models: tuple[str, ...] = ()
    role_names: tuple[str, ...] = ()
