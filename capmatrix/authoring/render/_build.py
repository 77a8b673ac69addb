"""The builder of the support-matrix page model, from the YAML.

:func:`build` turns a :class:`~capmatrix.matrix.Matrix` into a
:class:`~capmatrix.authoring.render.page.Document` (plain data: grids of cells, each cell with its verdict and
a note citing the rules behind it); the Markdown and HTML printers print that document.

How a cell is decided. A cell fixes ``sm`` and the grid's column axes; every other axis takes its axis
default when it has one (``beam_width=1``, ...) and otherwise ranges over all its values, exactly as a
query that leaves the axis out. Over those open axes, the grants that apply to the cell cover a region
``G`` and the exclusions that apply remove a region ``E``; the resolver's verdict and residual give the
supported region ``R = G - E``:

- ✓ supported: ``R`` is everything, or ``R == G`` (no exclusion cuts in; the grants' own requirements on
  the open axes, such as ``dtype [fp16, bf16]``, are listed in the cell's note);
- ◐ partial: an exclusion removes part of ``G`` (the note gives the exclusion and the residual);
- ✗ unsupported: ``R`` is empty (the note names the exclusions, if a grant covered the cell at all).

The sections other than kernels and the overview have modules of their own: cells and row labels
(:mod:`capmatrix.authoring.render._cells`), citations and notes (``_cite``), the common-configurations table
(``_common``), roles (``_roles``) and evidence (``_evidence``).

Output is deterministic: matrix order, no timestamps, and every path shown relative to the matrix root
(written ``capabilities/...`` whatever directory was rendered).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from capmatrix._shipped.default import resolve
from capmatrix.authoring._suggest import GEOMETRY, MAX_CHANGES, PRECISION
from capmatrix.authoring.export import export
from capmatrix.authoring.render._cells import ANY_SM, GPU_NAMES, REGENERATE
from capmatrix.authoring.render._cite import _citation, _Notes
from capmatrix.authoring.render._common import COMMON_MODELS, COMMON_SETTINGS, CommonSetting, _CommonTable
from capmatrix.authoring.render._evidence import _EvidenceSummaries
from capmatrix.authoring.render._roles import _RoleSections
from capmatrix.authoring.render.page import (
    UNGRANTED_SYMBOL,
    Cell,
    CellStatus,
    Document,
    Grid,
    KernelSection,
    slug,
)
from capmatrix.model import format_value
from capmatrix.query import KernelQuery
from capmatrix.resolver import CLOSEST_GRANTS, Verdict

if TYPE_CHECKING:

    from capmatrix.matrix import Matrix
    from capmatrix.model import Axis, AxisValue, Kernel

__all__ = ["ANY_SM", "COMMON_MODELS", "COMMON_SETTINGS", "GPU_NAMES", "REGENERATE", "CommonSetting", "build"]

#: Column axes of a kernel grid: at most this many columns in all.
MAX_COLUMNS = 16


class _Builder(_CommonTable, _RoleSections, _EvidenceSummaries):
    """The page: kernel sections, the overview, the filters' data, then the document."""

    def column_axes(self, kernel: Kernel) -> tuple[Axis, ...]:
        """The (up to two) axes the kernel's rules constrain most besides ``sm``, within MAX_COLUMNS."""
        counts = {
            a.name: sum(1 for r in kernel.rules if a.name in r.conditions)
            for a in self.axes if a.name != "sm"
        }
        usable = [a for a in self.axes if counts.get(a.name) and len(a.known) <= MAX_COLUMNS]
        best: tuple[Axis, ...] = ()
        best_key: tuple[int, int] = (0, 0)
        for i, first in enumerate(usable):
            options: list[tuple[Axis, ...]] = [(first,)]
            options.extend(
                (first, second) for second in usable[i + 1:]
                if len(first.known) * len(second.known) <= MAX_COLUMNS
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
            combos = [(*c, v) for c in combos for v in axis.known]
        columns = tuple(" · ".join(format_value(v) for v in combo) or "any" for combo in combos)
        anchor = f"kernel-{slug(kernel.name)}"
        notes = _Notes(slug(kernel.name))
        rows = []
        sm_rows = self.sm_rows([kernel.name])
        for sm, label in sm_rows:
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
                groups=tuple((format_value(v), len(axes[1].known)) for v in axes[0].known)
                if len(axes) == 2 else (),
                subcolumns=tuple(format_value(c[1]) for c in combos) if len(axes) == 2 else (),
                row_sms=self.row_sms(sm_rows),
            ),
            rules=tuple(_citation(r, self.paths) for r in kernel.rules),
            roles=self.kernel_roles(kernel.name),
            models=self.kernel_models(kernel.name),
        )

    def overview(self) -> Grid:
        assert self.sm is not None  # noqa: S101
        rows = []
        notes = _Notes("overview")
        for kernel in self.matrix.kernels.values():
            cells = []
            for sm in self.sm.known:
                decision = self.decide(kernel, {"sm": sm})
                ungranted = decision.status is CellStatus.UNSUPPORTED and not decision.grants
                cells.append(
                    Cell(status=decision.status,
                         text=UNGRANTED_SYMBOL if ungranted else decision.status.symbol,
                         link=f"kernel-{slug(kernel.name)}", ungranted=ungranted)
                )
            rows.append((kernel.name, tuple(cells)))
        return Grid(
            anchor="overview", caption="Kernels by SM (all other axes as a query leaves them)",
            corner="kernel", columns=tuple(self.sm_label(v) for v in self.sm.known),
            rows=tuple(rows), notes=notes.notes, row_kernels=tuple(self.matrix.kernels),
            column_sms=tuple(format_value(v) for v in self.sm.known),
        )

    # -- filters -------------------------------------------------------------------------------

    def kernel_roles(self, kernel: str) -> tuple[str, ...]:
        return tuple(name for name, role in self.matrix.roles.items() if kernel in role.candidates)

    def kernel_models(self, kernel: str) -> tuple[str, ...]:
        """The models for which ``kernel`` is not unsupported on every SM (SM and more left open)."""
        return tuple(
            name for name in self.matrix.models
            if resolve(KernelQuery(kernel, model=name), self.matrix).verdict is not Verdict.UNSUPPORTED
        )

    def ask_data(self) -> str:
        """The ask form's data: the export artifact, GPU labels and the suggestion search's settings."""
        assert self.sm is not None  # noqa: S101
        data = {
            "artifact": export(self.matrix),
            "gpu_labels": {format_value(v): self.gpu_label(v) for v in self.sm.known},
            "model_labels": {m: self.model_label(m) for m in self.matrix.models},
            "geometry": list(GEOMETRY),
            "precision": list(PRECISION),
            "max_changes": MAX_CHANGES,
            "max_grants": CLOSEST_GRANTS,
        }
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
        # Embedded in a <script> element: with no "<" at all, no text ("</script", "<!--", "<script")
        # can end the element or switch the parser into its escaped states. In JSON "<" only occurs
        # inside strings, where "\u003c" reads back as the same character.
        return text.replace("<", "\\u003c")

    # -- document ------------------------------------------------------------------------------

    def document(self) -> Document:
        assert self.sm is not None  # noqa: S101
        families = tuple(
            f"{name} = {', '.join(format_value(v) for v in members)}"
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
            common=self.common(),
            overview=self.overview(),
            kernels=tuple(self.kernel_section(k) for k in self.matrix.kernels.values()),
            roles=tuple(self.role_section(r) for r in self.matrix.roles),
            evidence=self.evidence(),
            ask_data=self.ask_data(),
            models=tuple(self.matrix.models),
            role_names=tuple(self.matrix.roles),
        )


def build(matrix: Matrix) -> Document:
    """The document both pages render, computed from ``matrix``.

    :raises RenderError: for a matrix without an ``sm`` axis or an unreadable evidence file.
    """
    return _Builder(matrix).document()
