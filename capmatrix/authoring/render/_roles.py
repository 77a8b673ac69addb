"""Role sections: a role's grids, the first candidate that serves each cell."""

from __future__ import annotations

from typing import TYPE_CHECKING

from capmatrix._shipped.default import _resolver, resolve
from capmatrix.authoring.render._cells import _Grid
from capmatrix.authoring.render._cite import _Notes
from capmatrix.authoring.render.page import (
    Cell,
    CellStatus,
    Grid,
    RoleSection,
    slug,
)
from capmatrix.model import format_value
from capmatrix.query import KernelQuery
from capmatrix.regions import Region, Space
from capmatrix.resolver import OriginKind, Verdict

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from capmatrix.model import Axis, AxisValue, Role
    from capmatrix.resolver import Origin

__all__: list[str] = []

#: A role grid is split into one grid per value of an axis with at most this many values.
MAX_SPLIT_VALUES = 4


class _RoleSections(_Grid):
    """The sections of roles."""

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
            if len(axis.known) > MAX_SPLIT_VALUES:
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
        for value in split.known if split is not None else (None,):
            suffix = "" if split is None else f"-{slug(split.name)}-{slug(format_value(value))}"
            notes = _Notes(f"role-{slug(name)}{suffix}")
            fixed: dict[str, AxisValue] = dict(pinned)
            if split is not None and value is not None:
                fixed[split.name] = value
            rows = []
            sm_rows = self.sm_rows(role.candidates)
            for sm, label in sm_rows:
                cells = tuple(
                    self.role_cell(self.candidates_for(role, model, {"sm": sm, **fixed}), model,
                                   {"sm": sm, **fixed}, notes)
                    for model in models
                )
                rows.append((label, cells))
            caption = f"{name}: the winning candidate by SM (rows) and model (columns)"
            if split is not None:
                caption += f", {split.name}={format_value(value)}"
            grids.append(Grid(
                anchor=f"role-{slug(name)}{suffix}-grid", caption=caption, corner="sm",
                columns=tuple(models), rows=tuple(rows), notes=notes.notes,
                column_models=tuple(models), row_sms=self.row_sms(sm_rows),
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
                "The role pins " + ", ".join(f"{k}={format_value(v)}" for k, v in pinned.items()) + ". "
                + fixed_text
            )
        return RoleSection(
            name=name,
            anchor=f"role-{slug(name)}",
            description=" ".join(role.description.split()),
            candidates=role.candidates,
            location=location,
            link=link,
            split=None if split is None else split.name,
            fixed=fixed_text,
            grids=tuple(grids),
        )

    def candidates_for(
        self, role: Role, model: str, fixed: Mapping[str, AxisValue]
    ) -> tuple[str, ...]:
        """The role's list for a cell: its order where the cell decides it, else every candidate."""
        if not role.orders:
            return role.candidates
        values = _resolver(self.matrix).derived_values(KernelQuery(None, model=model, **fixed))
        candidates, decided = role.order_for(values)
        return candidates if decided else role.candidates

    def role_cell(
        self, candidates: Sequence[str], model: str, fixed: Mapping[str, AxisValue], notes: _Notes
    ) -> Cell:
        query = KernelQuery(None, model=model, **fixed)
        origins: Mapping[str, Origin] = {}
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
            f"{k}={format_value(v)}" for k, v in values.items()
            if k in origins and origins[k].kind is OriginKind.MODEL
        )
        summary = f"The winner depends on axes the model leaves open (model {model}: {given})."
        status = CellStatus.SUPPORTED if everywhere else CellStatus.PARTIAL
        return Cell(status=status, text=text, note=notes.get(summary, (), details))
