"""Generated support-matrix docs: Markdown and a self-contained HTML page, both from the YAML.

:func:`build` turns a :class:`~capmatrix.matrix.Matrix` into a :class:`Document` (plain data: grids of
cells, each cell with its verdict and a note citing the rules behind it); :func:`render_markdown` and
:func:`capmatrix._html.render_html` print that document. :func:`render_files` renders both pages to
strings first and only then writes them (atomically), so a failed render leaves the old files intact;
:func:`check_files` compares the committed pages with a fresh render and returns a unified diff.

How a cell is decided. A cell fixes ``sm`` and the grid's column axes; every other axis takes its axis
default when it has one (``beam_width=1``, ...) and otherwise ranges over all its values, exactly as a
query that leaves the axis out. Over those open axes, the grants that apply to the cell cover a region
``G`` and the exclusions that apply remove a region ``E``; the resolver's verdict and residual give the
supported region ``R = G - E``:

- ✓ supported: ``R`` is everything, or ``R == G`` (no exclusion cuts in; the grants' own requirements on
  the open axes, such as ``dtype [fp16, bf16]``, are listed in the cell's note);
- ◐ partial: an exclusion removes part of ``G`` (the note gives the exclusion and the residual);
- ✗ unsupported: ``R`` is empty (the note names the exclusions, if a grant covered the cell at all).

Output is deterministic: matrix order, no timestamps, and every path shown relative to the matrix root
(written ``capabilities/...`` whatever directory was rendered).
"""

from __future__ import annotations

import argparse
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from tabulate import tabulate

from capmatrix._atomic import write_text_atomic
from capmatrix.errors import CapmatrixError
from capmatrix.model import Effect, Status, _StrEnum
from capmatrix.query import ANY, KernelQuery
from capmatrix.regions import Region, Space
from capmatrix.resolver import Verdict, resolve

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from capmatrix.matrix import Matrix
    from capmatrix.model import Axis, AxisValue, Kernel, Rule
    from capmatrix.query import _Any

__all__ = [
    "HTML_NAME",
    "MARKDOWN_NAME",
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
    "cmd_render",
    "configure_render",
    "main",
    "render_files",
    "render_markdown",
    "render_pages",
]

MARKDOWN_NAME = "support-matrix.md"
HTML_NAME = "support-matrix.html"
#: How the matrix root is named in generated pages, whatever directory was rendered.
ROOT_LABEL = "capabilities"
#: Column axes of a kernel grid: at most this many columns in all.
MAX_COLUMNS = 16
#: A role grid is split into one grid per value of an axis with at most this many values.
MAX_SPLIT_VALUES = 4
#: A residual is spelled out in a note only up to this many boxes (past that the rules say it better).
MAX_RESIDUAL_LINES = 6
#: Lines of unified diff that ``--check`` prints before cutting the rest short.
MAX_DIFF_LINES = 60
#: Disagreements listed per evidence file (the count is always given).
MAX_DISAGREEMENTS = 10

REGENERATE = "python tools/render_matrix.py"
#: Row label of a grid whose rules never name ``sm`` (every SM answers alike).
ANY_SM = "any (no rule names sm)"


class RenderError(CapmatrixError):
    """The docs cannot be rendered (an unreadable evidence file, an inconsistent verdict)."""


class CellStatus(_StrEnum):
    """The state of one grid cell."""

    SUPPORTED = "supported"
    PARTIAL = "partial"
    UNSUPPORTED = "unsupported"

    @property
    def symbol(self) -> str:
        """The symbol that carries the state without colour."""
        return _SYMBOLS[self]


_SYMBOLS = {
    CellStatus.SUPPORTED: "✓",
    CellStatus.PARTIAL: "◐",
    CellStatus.UNSUPPORTED: "✗",
}

#: (symbol, label, explanation) for the legend of both pages.
LEGEND: tuple[tuple[str, str, str], ...] = (
    ("✓", "supported",
     ("the rules grant the cell and no exclusion cuts into it; the note lists what the grant still "
     "requires of the axes the grid does not show")),
    ("◐", "partial",
     ("granted, but an exclusion removes part of it: it depends on another axis (the note says which, "
     "and where it stays supported)")),
    ("✗", "unsupported",
     "no configuration is supported; the note names the exclusion when a grant covered the cell"),
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
    overview: Grid
    kernels: tuple[KernelSection, ...]
    roles: tuple[RoleSection, ...]
    evidence: tuple[EvidenceSummary, ...]


# --------------------------------------------------------------------------------------------------
# Building the document


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")


class _Paths:
    """Show every path relative to the matrix root, as ``capabilities/...``."""

    def __init__(self, matrix: Matrix) -> None:
        self.root = Path(matrix.root).resolve()

    def show(self, path: str) -> str:
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = Path.cwd() / candidate
        try:
            rel = candidate.resolve().relative_to(self.root)
        except ValueError:
            return Path(path).as_posix()
        return f"{ROOT_LABEL}/{rel.as_posix()}"

    def location(self, path: str, line: int | None) -> tuple[str, str | None]:
        """``capabilities/x.yaml:12`` and a link to it from ``docs/`` (None outside the root)."""
        shown = self.show(path)
        text = shown if line is None else f"{shown}:{line}"
        if not shown.startswith(f"{ROOT_LABEL}/"):
            return text, None
        return text, f"../{shown}" + (f"#L{line}" if line is not None else "")


def _verification(rule: Rule) -> str:
    if rule.status is Status.VERIFIED:
        info = rule.verified or {}
        parts = [info[k] for k in ("gpu", "software", "date") if info.get(k)]
        text = "verified" + (f" on {', '.join(parts)}" if parts else "")
        if info.get("evidence"):
            text += f" (evidence: {info['evidence']})"
        return text
    if rule.status is Status.DERIVED:
        return "derived from a source table"
    if rule.status is Status.READ_FROM_CODE:
        return "read from the code"
    if rule.status is Status.KNOWN_ISSUE:
        return "known issue"
    return "untested"


def _citation(rule: Rule, paths: _Paths, open_axes: Sequence[str] | None = None) -> Citation:
    location, link = paths.location(rule.location.path, rule.location.line)
    shown = rule.conditions if open_axes is None else {
        a: c for a, c in rule.conditions.items() if a in open_axes
    }
    requires = ", ".join(f"{a} {c.text}" for a, c in shown.items())
    return Citation(
        rule_id=rule.id,
        effect=str(rule.effect),
        location=location,
        link=link,
        region=rule.describe_region(),
        requires=requires,
        reason=" ".join(rule.reason.split()),
        source=" ".join(rule.source.split()),
        status=str(rule.status),
        verification=_verification(rule),
    )


class _Notes:
    """Numbered notes of one grid; cells with the same explanation share one."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.by_key: dict[tuple[object, ...], Note] = {}

    def get(
        self, summary: str, citations: Sequence[Citation], details: Sequence[str] = ()
    ) -> Note:
        key = (summary, tuple(c.rule_id for c in citations), tuple(details))
        found = self.by_key.get(key)
        if found is None:
            number = len(self.by_key) + 1
            found = Note(
                anchor=f"{self.prefix}-{number}", number=number, summary=summary,
                citations=tuple(citations), details=tuple(details),
            )
            self.by_key[key] = found
        return found

    @property
    def notes(self) -> tuple[Note, ...]:
        return tuple(self.by_key.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class _Decision:
    status: CellStatus
    grants: tuple[Rule, ...]
    cutting: tuple[Rule, ...]
    open_axes: tuple[str, ...]
    residual: Region | None


class _Builder:
    def __init__(self, matrix: Matrix) -> None:
        self.matrix = matrix
        self.paths = _Paths(matrix)
        self.axes = tuple(matrix.axes.values())
        self.sm = matrix.axes.get("sm")
        if self.sm is None:
            raise RenderError("the matrix declares no 'sm' axis; the support matrix is per SM")

    # -- cells ---------------------------------------------------------------------------------

    def _box(self, rule: Rule, space: Space) -> tuple[int, ...]:
        box = []
        for axis in space.axes:
            cond = rule.conditions.get(axis.name)
            if cond is None:
                box.append(axis.full_mask)
            else:
                box.append(sum(1 << i for i, v in enumerate(axis.values) if cond.contains(v)))
        return tuple(box)

    def unusable_defaults(self, kernel: Kernel) -> tuple[str, ...]:
        """Axes whose default no grant of ``kernel`` admits: they range over their values instead.

        (FlashMLA needs 64-token blocks; pinning the default 32 would hide every grant it has.)
        """
        out = []
        for axis in self.axes:
            if axis.default is None:
                continue
            admitted = any(
                g.conditions[axis.name].contains(axis.default)
                if axis.name in g.conditions else True
                for g in kernel.grants
            )
            if not admitted:
                out.append(axis.name)
        return tuple(out)

    def decide(self, kernel: Kernel, fixed: Mapping[str, AxisValue]) -> _Decision:
        """Status of ``kernel`` at ``fixed`` (other axes: defaults, else open)."""
        query_axes: dict[str, AxisValue | _Any] = dict.fromkeys(
            self.unusable_defaults(kernel), ANY
        )
        query_axes.update(fixed)
        resolution = resolve(KernelQuery(kernel.name).replace(**query_axes), self.matrix)
        values = resolution.values
        open_axes = tuple(a.name for a in self.axes if a.name not in values)
        space = Space(tuple(a for a in self.axes if a.name in open_axes))
        applies = [
            r for r in kernel.rules
            if all(c.contains(values[a]) for a, c in r.conditions.items() if a in values)
        ]
        grants = tuple(r for r in applies if r.effect is Effect.GRANT)
        granted = Region(space, [self._box(r, space) for r in grants])
        cutting = tuple(
            r for r in applies
            if r.effect is Effect.EXCLUDE and (granted & Region(space, [self._box(r, space)]))
        )
        supported = granted - Region(space, [self._box(r, space) for r in cutting])
        verdict = resolution.verdict
        expected = (
            Verdict.UNSUPPORTED if not supported
            else Verdict.SUPPORTED if supported == Region.full(space)
            else Verdict.DEPENDS
        )
        if verdict is not expected:  # pragma: no cover - a resolver/renderer disagreement is a bug
            msg = f"{kernel.name} at {dict(fixed)}: resolver says {verdict}, regions say {expected}"
            raise RenderError(msg)
        if verdict is Verdict.UNSUPPORTED:
            status = CellStatus.UNSUPPORTED
        elif verdict is Verdict.SUPPORTED or supported == granted:
            status = CellStatus.SUPPORTED
        else:
            status = CellStatus.PARTIAL
        return _Decision(
            status=status, grants=grants, cutting=cutting, open_axes=open_axes,
            residual=resolution.residual,
        )

    def cell(self, kernel: Kernel, fixed: Mapping[str, AxisValue], notes: _Notes) -> Cell:
        d = self.decide(kernel, fixed)
        status = d.status
        if status is CellStatus.UNSUPPORTED and not d.grants:
            return Cell(status=status, text=status.symbol)
        grants = [_citation(r, self.paths, d.open_axes) for r in d.grants]
        cuts = [_citation(r, self.paths, d.open_axes) for r in d.cutting]
        details: list[str] = []
        if status is CellStatus.SUPPORTED:
            if d.residual is None:
                summary = "Supported for every value of the axes not shown."
            else:
                summary = "Supported wherever the grant's requirements below hold."
            citations = grants
        elif status is CellStatus.PARTIAL:
            summary = "Partial: granted, but an exclusion removes part of it."
            citations = grants + cuts
            if d.residual is not None:
                lines = d.residual.describe()
                if len(lines) <= MAX_RESIDUAL_LINES:
                    details.append("Supported when " + " or ".join(
                        f"({line})" if len(lines) > 1 else line for line in lines
                    ) + ".")
        else:
            summary = "Unsupported: the grant is removed by an exclusion."
            citations = cuts + grants
        return Cell(status=status, text=status.symbol, note=notes.get(summary, citations, details))

    # -- grids ---------------------------------------------------------------------------------

    def sm_label(self, value: AxisValue) -> str:
        assert self.sm is not None  # noqa: S101 - checked in __init__
        fams = [name for name, members in self.sm.families.items() if value in members]
        return _fmt(value) + (f" ({', '.join(fams)})" if fams else "")

    def sm_rows(self, kernels: Sequence[str]) -> list[tuple[AxisValue, str]]:
        """One row per SM, or a single "any" row when no rule of ``kernels`` names ``sm``."""
        assert self.sm is not None  # noqa: S101
        if "sm" not in self.constrained(kernels):
            return [(self.sm.values[0], ANY_SM)]
        return [(sm, self.sm_label(sm)) for sm in self.sm.values]

    def column_axes(self, kernel: Kernel) -> tuple[Axis, ...]:
        """The (up to two) axes the kernel's rules constrain most besides ``sm``, within MAX_COLUMNS."""
        counts = {
            a.name: sum(1 for r in kernel.rules if a.name in r.conditions)
            for a in self.axes if a.name != "sm"
        }
        usable = [a for a in self.axes if counts.get(a.name) and len(a.values) <= MAX_COLUMNS]
        best: tuple[Axis, ...] = ()
        best_key: tuple[int, int] = (0, 0)
        for i, first in enumerate(usable):
            options: list[tuple[Axis, ...]] = [(first,)]
            options.extend(
                (first, second) for second in usable[i + 1:]
                if len(first.values) * len(second.values) <= MAX_COLUMNS
            )
            for option in options:
                # Axes without a default are the primary ones a reader picks; count them double.
                weight = sum(counts[a.name] * (1 if a.default is not None else 2) for a in option)
                key = (weight, -len(option))
                if key > best_key:
                    best, best_key = option, key
        return best

    def kernel_section(self, kernel: Kernel) -> KernelSection:
        assert self.sm is not None  # noqa: S101
        axes = self.column_axes(kernel)
        combos: list[tuple[AxisValue, ...]] = [()]
        for axis in axes:
            combos = [(*c, v) for c in combos for v in axis.values]
        columns = tuple(" · ".join(_fmt(v) for v in combo) or "any" for combo in combos)
        anchor = f"kernel-{_slug(kernel.name)}"
        notes = _Notes(_slug(kernel.name))
        rows = []
        for sm, label in self.sm_rows([kernel.name]):
            cells = []
            for combo in combos:
                fixed: dict[str, AxisValue] = {"sm": sm}
                fixed.update({a.name: v for a, v in zip(axes, combo, strict=True)})
                cells.append(self.cell(kernel, fixed, notes))
            rows.append((label, tuple(cells)))
        shown = ["sm", *(a.name for a in axes)]
        caption = (
            f"{kernel.name}: SM rows; columns "
            + (" · ".join(a.name for a in axes) if axes else "(no other axis constrained)")
        )
        location, link = self.paths.location(kernel.location.path, kernel.location.line)
        return KernelSection(
            name=kernel.name,
            anchor=anchor,
            kind=kernel.kind,
            engine=kernel.engine,
            description=" ".join(kernel.description.split()),
            location=location,
            link=link,
            fixed=self.fixed_text(
                shown, self.constrained([kernel.name]), opened=self.unusable_defaults(kernel)
            ),
            grid=Grid(
                anchor=f"{anchor}-grid", caption=caption, corner="sm",
                columns=columns, rows=tuple(rows), notes=notes.notes,
                groups=tuple((_fmt(v), len(axes[1].values)) for v in axes[0].values)
                if len(axes) == 2 else (),
                subcolumns=tuple(_fmt(c[1]) for c in combos) if len(axes) == 2 else (),
            ),
            rules=tuple(_citation(r, self.paths) for r in kernel.rules),
        )

    def constrained(self, kernels: Sequence[str]) -> set[str]:
        """Axes some rule of ``kernels`` names."""
        return {a for k in kernels for r in self.matrix.kernels[k].rules for a in r.conditions}

    def fixed_text(
        self,
        shown: Sequence[str],
        relevant: set[str],
        model_note: str = "",
        opened: Sequence[str] = (),
    ) -> str:
        """What the axes a grid does not show are set to (only those the rules name)."""
        opened = [a for a in opened if a not in shown]
        hidden = [a for a in self.axes if a.name not in shown and a.name in relevant]
        defaults = [
            f"{a.name}={_fmt(a.default)}" for a in hidden
            if a.default is not None and a.name not in opened
        ]
        open_axes = [a.name for a in hidden if a.default is None or a.name in opened]
        parts = []
        if defaults:
            parts.append(
                "Axes the rules name but the grid does not show take their default: "
                + ", ".join(defaults) + "."
            )
        if open_axes:
            parts.append(
                f"These range over all their values{model_note}: " + ", ".join(open_axes) + "."
            )
        if not parts:
            parts.append("The rules name no axis besides those shown.")
        if opened:
            parts.append(
                "(No grant admits the default of " + ", ".join(opened) + ", so "
                + ("it ranges" if len(opened) == 1 else "they range") + " over all values here.)"
            )
        return " ".join(parts)

    def overview(self) -> Grid:
        assert self.sm is not None  # noqa: S101
        rows = []
        notes = _Notes("overview")
        for kernel in self.matrix.kernels.values():
            cells = []
            for sm in self.sm.values:
                decision = self.decide(kernel, {"sm": sm})
                cells.append(
                    Cell(status=decision.status, text=decision.status.symbol,
                         link=f"kernel-{_slug(kernel.name)}")
                )
            rows.append((kernel.name, tuple(cells)))
        return Grid(
            anchor="overview", caption="Kernels by SM (all other axes as a query leaves them)",
            corner="kernel", columns=tuple(self.sm_label(v) for v in self.sm.values),
            rows=tuple(rows), notes=notes.notes,
        )

    # -- roles ---------------------------------------------------------------------------------

    def split_axis(self, candidates: Sequence[str], pinned: Sequence[str] = ()) -> Axis | None:
        """The axis a role grid is split by, one grid per value.

        It is the axis the candidates' rules constrain most, among the small axes that neither a
        default nor any model sets.
        """
        model_axes = {a for m in self.matrix.models.values() for a in m.axes}
        best: Axis | None = None
        best_count = 0
        for axis in self.axes:
            if axis.name == "sm" or axis.default is not None or axis.name in model_axes:
                continue
            if axis.name in pinned:
                continue
            if len(axis.values) > MAX_SPLIT_VALUES:
                continue
            count = sum(
                1 for k in candidates for r in self.matrix.kernels[k].rules
                if axis.name in r.conditions
            )
            if count > best_count:
                best, best_count = axis, count
        return best

    def role_section(self, name: str) -> RoleSection:
        assert self.sm is not None  # noqa: S101
        role = self.matrix.roles[name]
        models = list(self.matrix.models)
        pinned = dict(role.axes)
        split = self.split_axis(role.candidates, list(pinned))
        grids = []
        for value in split.values if split is not None else (None,):
            suffix = "" if split is None else f"-{_slug(split.name)}-{_slug(_fmt(value))}"
            notes = _Notes(f"role-{_slug(name)}{suffix}")
            fixed: dict[str, AxisValue] = dict(pinned)
            if split is not None and value is not None:
                fixed[split.name] = value
            rows = []
            for sm, label in self.sm_rows(role.candidates):
                cells = tuple(
                    self.role_cell(role.candidates, model, {"sm": sm, **fixed}, notes)
                    for model in models
                )
                rows.append((label, cells))
            caption = f"{name}: the winning candidate by SM (rows) and model (columns)"
            if split is not None:
                caption += f", {split.name}={_fmt(value)}"
            grids.append(Grid(
                anchor=f"role-{_slug(name)}{suffix}-grid", caption=caption, corner="sm",
                columns=tuple(models), rows=tuple(rows), notes=notes.notes,
            ))
        location, link = self.paths.location(role.location.path, role.location.line)
        model_axes = sorted({a for m in self.matrix.models.values() for a in m.axes})
        shown = ["sm", *model_axes, *pinned, *([split.name] if split is not None else [])]
        fixed_text = self.fixed_text(
            shown, self.constrained(role.candidates),
            " (and so do the model axes a model leaves unset)",
        )
        if pinned:
            fixed_text = (
                "The role pins " + ", ".join(f"{k}={_fmt(v)}" for k, v in pinned.items()) + ". "
                + fixed_text
            )
        return RoleSection(
            name=name,
            anchor=f"role-{_slug(name)}",
            description=" ".join(role.description.split()),
            candidates=role.candidates,
            location=location,
            link=link,
            split=None if split is None else split.name,
            fixed=fixed_text,
            grids=tuple(grids),
        )

    def role_cell(
        self, candidates: Sequence[str], model: str, fixed: Mapping[str, AxisValue], notes: _Notes
    ) -> Cell:
        query = KernelQuery(None, model=model, **fixed)
        origins: Mapping[str, str] = {}
        values: Mapping[str, AxisValue] = {}
        covered: Region | None = None
        wins: list[tuple[str, Region]] = []
        for candidate in candidates:
            resolution = resolve(query.with_kernel(candidate), self.matrix)
            values, origins = resolution.values, resolution.origins
            space = Space(tuple(a for a in self.axes if a.name not in values))
            if covered is None:
                covered = Region(space)
            if resolution.verdict is Verdict.SUPPORTED:
                region = Region.full(space)
            elif resolution.residual is not None:
                region = resolution.residual
            else:
                continue
            won = region - covered
            if won:
                wins.append((candidate, won))
                covered = covered | won
        if not wins or covered is None:
            return Cell(status=CellStatus.UNSUPPORTED, text="—")
        everywhere = covered == Region.full(covered.space)
        if len(wins) == 1 and everywhere:
            return Cell(status=CellStatus.SUPPORTED, text=wins[0][0])
        text = " / ".join(k for k, _ in wins)
        details = []
        for kernel, region in wins:
            lines = region.describe()
            where = " or ".join(f"({line})" if len(lines) > 1 else line for line in lines)
            details.append(f"{kernel} wins when {where}")
        if not everywhere:
            details.append("elsewhere no candidate supports the query")
        given = ", ".join(
            f"{k}={_fmt(v)}" for k, v in values.items() if origins.get(k, "").startswith("model:")
        )
        summary = f"The winner depends on axes the model leaves open (model {model}: {given})."
        status = CellStatus.SUPPORTED if everywhere else CellStatus.PARTIAL
        return Cell(status=status, text=text, note=notes.get(summary, (), details))

    # -- evidence ------------------------------------------------------------------------------

    def evidence(self) -> tuple[EvidenceSummary, ...]:
        folder = Path(self.matrix.root) / "evidence"
        if not folder.is_dir():
            return ()
        return tuple(self.evidence_file(p) for p in sorted(folder.glob("*.json")))

    def evidence_file(self, path: Path) -> EvidenceSummary:
        shown, link = self.paths.location(str(path), None)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise RenderError(f"{shown}: cannot read evidence file: {exc}") from None
        except json.JSONDecodeError as exc:
            raise RenderError(
                f"{shown}:{exc.lineno}:{exc.colno}: evidence file is not valid JSON: {exc.msg}"
            ) from None
        if not isinstance(data, dict):
            raise RenderError(f"{shown}: evidence file must hold a JSON object")
        env = data.get("environment") if isinstance(data.get("environment"), dict) else {}
        assert isinstance(env, dict)  # noqa: S101 - narrowed above
        software = ", ".join(
            f"{label} {_version(key, env[key])}" for key, label in (("torch", "torch"), ("cuda", "CUDA"),
                                                     ("cudnn", "cuDNN"))
            if env.get(key) is not None
        )
        cases = data.get("cases")
        kernels = data.get("kernels")
        disagreements: int | None = None
        notes: int | None = None
        examples: list[str] = []
        problem = None
        try:
            from capmatrix.probe import compare  # noqa: PLC0415 - torch-free, only for evidence

            result = compare(data, self.matrix)
        except (ImportError, ValueError, KeyError, TypeError, CapmatrixError) as exc:
            problem = f"not compared with the matrix: {exc}"
        else:
            disagreements = len(result.disagreements)
            notes = len(result.notes)
            examples.extend(_describe_disagreement(d) for d in result.disagreements[:MAX_DISAGREEMENTS])
        return EvidenceSummary(
            path=shown,
            link=link,
            gpu=str(env.get("gpu", "unknown GPU")),
            sm=str(env.get("sm", "?")),
            software=software or "unknown",
            cases=len(cases) if isinstance(cases, list) else 0,
            kernels=tuple(str(k) for k in kernels) if isinstance(kernels, list) else (),
            disagreements=disagreements,
            notes=notes,
            examples=tuple(examples),
            problem=problem,
        )

    # -- document ------------------------------------------------------------------------------

    def document(self) -> Document:
        assert self.sm is not None  # noqa: S101
        families = tuple(
            f"{name} = {', '.join(_fmt(v) for v in members)}"
            for name, members in self.sm.families.items()
        )
        return Document(
            title="Attention kernel support matrix",
            intro=(
                ("Generated from the capability YAML under `capabilities/` by "
                f"`{REGENERATE}`; do not edit by hand. `make test` fails when this page is stale."),
                ("A cell fixes the SM and the grid's column axes. Axes with a default take it; the "
                "other axes range over all their values, as in a query that leaves them out."),
            ),
            families=families,
            overview=self.overview(),
            kernels=tuple(self.kernel_section(k) for k in self.matrix.kernels.values()),
            roles=tuple(self.role_section(r) for r in self.matrix.roles),
            evidence=self.evidence(),
        )


def _describe_disagreement(item: object) -> str:
    """One line per disagreement (``probe.Disagreement`` renders itself)."""
    return " ".join(str(item).split())


def _version(key: str, value: object) -> str:
    """Show a cuDNN version integer (91900) dotted (9.19.0)."""
    if key == "cudnn" and isinstance(value, int) and value >= 10000:
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return str(value)


def build(matrix: Matrix) -> Document:
    """The document both pages render, computed from ``matrix``.

    :raises RenderError: for a matrix without an ``sm`` axis or an unreadable evidence file.
    """
    return _Builder(matrix).document()


# --------------------------------------------------------------------------------------------------
# Markdown


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _md_cell(cell: Cell) -> str:
    text = _md_escape(cell.text)
    if cell.note is not None:
        return f"{text} [{cell.note.number}](#{cell.note.anchor})"
    if cell.link is not None:
        return f"[{text}](#{cell.link})"
    return text


def _md_link(text: str, link: str | None) -> str:
    return f"[{text}]({link})" if link else f"`{text}`"


def _md_grid(grid: Grid) -> list[str]:
    headers = [grid.corner, *grid.columns]
    rows = [[label, *(_md_cell(c) for c in cells)] for label, cells in grid.rows]
    table = tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
    out = [f'<a id="{grid.anchor}"></a>', "", f"*{_md_escape(grid.caption)}*", "", table, ""]
    if grid.notes:
        out.append("Notes:")
        out.append("")
        for note in grid.notes:
            out.extend(_md_note(note))
    return out


def _md_citation(c: Citation) -> list[str]:
    head = f"  - {c.effect} `{c.rule_id}` ({_md_link(c.location, c.link)}; {c.verification})"
    if c.scope:
        head += f", {c.scope}"
    return [head, f"    - Reason: {c.reason}", f"    - Source: {c.source}"]


def _md_note(note: Note) -> list[str]:
    out = [f'- <a id="{note.anchor}"></a>**[{note.number}]** {note.summary}']
    for citation in note.citations:
        out.extend(_md_citation(citation))
    out.extend(f"  - {line}" for line in note.details)
    out.append("")
    return out


def render_markdown(doc: Document) -> str:
    """The Markdown page (GitHub tables, notes with anchors)."""
    out = [f"# {doc.title}", ""]
    out.extend(line for text in doc.intro for line in (text, ""))
    out.append("Legend: " + "; ".join(f"{s} {label}: {text}" for s, label, text in LEGEND) + ".")
    out.append("")
    if doc.families:
        out.append("SM families: " + "; ".join(doc.families) + ".")
        out.append("")
    out.append("Contents: [Overview](#overview) · "
               + " · ".join(f"[{k.name}](#{k.anchor})" for k in doc.kernels)
               + "".join(f" · [role {r.name}](#{r.anchor})" for r in doc.roles)
               + (" · [Evidence](#evidence)" if doc.evidence else ""))
    out.append("")
    out.extend(["## Overview", ""])
    out.extend(_md_grid(doc.overview))
    for section in doc.kernels:
        out.extend([f'<a id="{section.anchor}"></a>', "", f"## {section.name}", ""])
        kind = section.kind + (f", {section.engine}" if section.engine else "")
        out.extend([f"{section.description}", "",
                    f"Kind: {kind}. Defined at {_md_link(section.location, section.link)}.", ""])
        out.extend([section.fixed, ""])
        out.extend(_md_grid(section.grid))
        out.extend(["Rules:", ""])
        rows = [
            [f"`{c.rule_id}`", c.effect, _md_escape(c.region), c.verification,
             _md_link(c.location, c.link)]
            for c in section.rules
        ]
        out.append(tabulate(rows, headers=["rule", "effect", "region", "status", "defined at"],
                            tablefmt="github", disable_numparse=True))
        out.append("")
    for role in doc.roles:
        out.extend([f'<a id="{role.anchor}"></a>', "", f"## Role {role.name}", ""])
        out.extend([role.description, "",
                    "Candidates, first supported wins: "
                    + " → ".join(f"[{c}](#kernel-{_slug(c)})" for c in role.candidates)
                    + f". Defined at {_md_link(role.location, role.link)}.", ""])
        out.extend([role.fixed, "", ("A cell names the winning kernel; — means no candidate "
                    "supports the query; a note explains cells where the winner depends on an "
                    "axis the model leaves open."), ""])
        for grid in role.grids:
            out.extend(_md_grid(grid))
    if doc.evidence:
        out.extend(['<a id="evidence"></a>', "", "## Evidence", ""])
        for ev in doc.evidence:
            out.extend(_md_evidence(ev))
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


def _md_evidence(ev: EvidenceSummary) -> list[str]:
    out = [f"### {_md_link(ev.path, ev.link)}", "",
           f"- GPU: {ev.gpu} (sm {ev.sm}); software: {ev.software}",
           f"- Cases: {ev.cases}" + (f" over {', '.join(ev.kernels)}" if ev.kernels else "")]
    if ev.problem is not None:
        out.append(f"- {ev.problem}")
    else:
        out.append(f"- Disagreements with the matrix: {ev.disagreements}; "
                   f"notes (the matrix differs from `can_use_*` only): {ev.notes}")
        out.extend(f"  - {line}" for line in ev.examples)
    out.append("")
    return out


# --------------------------------------------------------------------------------------------------
# Files, check and command line


def render_pages(matrix: Matrix) -> dict[str, str]:
    """Both pages as ``{file name: text}``, rendered fully before anything is written."""
    from capmatrix._html import render_html  # noqa: PLC0415 - one concept per module

    doc = build(matrix)
    return {MARKDOWN_NAME: render_markdown(doc), HTML_NAME: render_html(doc)}


def render_files(matrix: Matrix, out_dir: str | Path) -> list[Path]:
    """Render both pages and write them (atomically) into ``out_dir``; return the paths written."""
    pages = render_pages(matrix)
    written = []
    for name, text in pages.items():
        target = Path(out_dir) / name
        write_text_atomic(target, text)
        written.append(target)
    return written


def check_files(matrix: Matrix, out_dir: str | Path) -> list[str]:
    """Unified diffs (one string per stale page) between ``out_dir`` and a fresh render."""
    diffs = []
    for name, text in render_pages(matrix).items():
        target = Path(out_dir) / name
        try:
            current = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = ""
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


def configure_render(parser: argparse.ArgumentParser, _argv: Sequence[str] = ()) -> None:
    """Arguments of ``capmatrix render`` and ``tools/render_matrix.py``."""
    parser.add_argument("--check", action="store_true",
                        help="exit 1 with a diff when the pages differ from a fresh render")
    parser.add_argument("--matrix", metavar="DIR", help="matrix directory (default: the shipped one)")
    parser.add_argument("--out-dir", metavar="DIR", default="docs",
                        help="where the pages live (default: docs)")


def cmd_render(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Write the pages, or with ``--check`` compare them; exit 0 fresh/written, 1 stale."""
    from capmatrix.loader import load  # noqa: PLC0415

    matrix = load(args.matrix)
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


def main(argv: Sequence[str] | None = None, *, default_out: str | Path | None = None) -> int:
    """Entry point of ``tools/render_matrix.py``: the ``render`` subcommand on its own."""
    import sys  # noqa: PLC0415

    from capmatrix.cli import run  # noqa: PLC0415

    args = list(sys.argv[1:] if argv is None else argv)
    if default_out is not None and not any(a == "--out-dir" or a.startswith("--out-dir=")
                                           for a in args):
        args += ["--out-dir", str(default_out)]
    return run(["render", *args], sys.stdout, sys.stderr)

