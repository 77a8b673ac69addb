"""One cell of a grid: a kernel's verdict at fixed values, its note, and the labels of rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from capmatrix._shipped.default import resolve
from capmatrix.authoring.render._cite import _citation, _Notes, _Paths
from capmatrix.authoring.render.page import (
    UNGRANTED_SYMBOL,
    Cell,
    CellStatus,
    RenderError,
)
from capmatrix.model import Effect, format_value
from capmatrix.query import ANY, KernelQuery
from capmatrix.regions import Region, Space, box_of
from capmatrix.resolver import Verdict

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue, Kernel, Rule
    from capmatrix.query import _Any

__all__: list[str] = []

REGENERATE = "capmatrix render"
#: Row label of a grid whose rules never name ``sm`` (every SM answers alike).
ANY_SM = "any (no rule names sm)"
#: A residual is spelled out in a note only up to this many boxes (past that the rules say it better).
MAX_RESIDUAL_LINES = 6

#: Example GPUs of each compute capability, for labels only ("H100, H200 (sm90)"). The matrix's sm axis
#: holds numbers and no rule depends on a product name, so the names live here rather than in the YAML;
#: they are NVIDIA's published compute capabilities (https://developer.nvidia.com/cuda-gpus).
GPU_NAMES: Mapping[int, str] = {
    75: "T4, RTX 20",
    80: "A100, A30",
    86: "A10, A40, RTX 30",
    87: "Jetson Orin",
    89: "L4, L40S, RTX 40",
    90: "H100, H200, GH200",
    100: "B200, GB200",
    103: "B300, GB300",
    110: "Jetson Thor",
    120: "RTX 50, RTX PRO 6000",
    121: "DGX Spark (GB10)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Decision:
    status: CellStatus
    grants: tuple[Rule, ...]
    cutting: tuple[Rule, ...]
    open_axes: tuple[str, ...]
    residual: Region | None


class _Grid:
    """Cells and row labels, what every section of the page is made of."""

    def __init__(self, matrix: Matrix) -> None:
        self.matrix = matrix
        self.paths = _Paths(matrix)
        self.axes = tuple(matrix.axes.values())
        self.sm = matrix.axes.get("sm")
        self._unusable: dict[str, tuple[str, ...]] = {}  # per kernel: every cell of it asks
        if self.sm is None:
            raise RenderError("the matrix declares no 'sm' axis; the support matrix is per SM")

    # -- cells ---------------------------------------------------------------------------------

    def unusable_defaults(self, kernel: Kernel) -> tuple[str, ...]:
        """Axes whose default no grant of ``kernel`` admits: they range over their values instead.

        (FlashMLA needs 64-token blocks; pinning the default 32 would hide every grant it has.)
        """
        found = self._unusable.get(kernel.name)
        if found is None:
            found = self._unusable[kernel.name] = self._unusable_defaults(kernel)
        return found

    def _unusable_defaults(self, kernel: Kernel) -> tuple[str, ...]:
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
        granted = Region(space, [box_of(r, space) for r in grants])
        cutting = tuple(
            r for r in applies
            if r.effect is Effect.EXCLUDE and (granted & Region(space, [box_of(r, space)]))
        )
        # The verdict is the resolver's (tested against brute force); comparing the supported region
        # with the whole space here again would cost a subtraction exponential in the open axes.
        verdict = resolution.verdict
        if verdict is not Verdict.UNSUPPORTED and not grants:  # pragma: no cover - a resolver bug
            msg = f"{kernel.name} at {dict(fixed)}: resolver says {verdict} without a grant"
            raise RenderError(msg)
        if verdict is Verdict.UNSUPPORTED:
            status = CellStatus.UNSUPPORTED
        elif verdict is Verdict.SUPPORTED or not cutting:  # no exclusion meets the granted region
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
            return Cell(status=status, text=UNGRANTED_SYMBOL, ungranted=True)
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
        return format_value(value) + (f" ({', '.join(fams)})" if fams else "")

    def sm_rows(self, kernels: Sequence[str]) -> list[tuple[AxisValue, str]]:
        """One row per SM, or a single "any" row when no rule of ``kernels`` names ``sm``."""
        assert self.sm is not None  # noqa: S101
        if "sm" not in self.constrained(kernels):
            return [(self.sm.known[0], ANY_SM)]
        return [(sm, self.sm_label(sm)) for sm in self.sm.known]

    @staticmethod
    def row_sms(rows: Sequence[tuple[AxisValue, str]]) -> tuple[str, ...]:
        """Each row's SM for the page's search; "" for the one row of a grid whose rules name no SM."""
        return tuple("" if label == ANY_SM else format_value(sm) for sm, label in rows)

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
            f"{a.name}={format_value(a.default)}" for a in hidden
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

    # -- labels ---------------------------------------------------------------------------------

    def gpu_label(self, value: AxisValue) -> str:
        """``H100, H200, GH200 (sm90)``; ``sm130`` for an SM without a known name."""
        name = GPU_NAMES.get(value) if isinstance(value, int) and not isinstance(value, bool) else None
        return f"{name} (sm{format_value(value)})" if name else f"sm{format_value(value)}"

    def model_label(self, name: str) -> str:
        """A checkpoint's Hugging Face name without its organisation, else the model's key."""
        model = self.matrix.models[name]
        return model.hf_ids[0].rpartition("/")[2] if model.hf_ids else name
