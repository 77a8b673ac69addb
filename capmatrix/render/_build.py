"""The builder of the support-matrix page model, from the YAML.

:func:`build` turns a :class:`~capmatrix.matrix.Matrix` into a :class:`~capmatrix.render.page.Document`
(plain data: grids of cells, each cell with its verdict and a note citing the rules behind it); the
Markdown and HTML printers print that document.

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

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from capmatrix._default import _resolver, resolve, select
from capmatrix._suggest import GEOMETRY, MAX_CHANGES, PRECISION
from capmatrix.errors import CapmatrixError
from capmatrix.evidence import compare
from capmatrix.export import export
from capmatrix.matrix import ROOT_LABEL, Matrix
from capmatrix.model import Effect, Status, format_value
from capmatrix.query import ANY, KernelQuery
from capmatrix.regions import Region, Space, box_of
from capmatrix.render.page import (
    Cell,
    CellStatus,
    Citation,
    CommonTable,
    Document,
    EvidenceSummary,
    Grid,
    KernelSection,
    Note,
    RenderError,
    RoleSection,
    slug,
)
from capmatrix.resolver import CLOSEST_GRANTS, OriginKind, ReasonKind, Verdict

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from capmatrix.model import Axis, AxisValue, Kernel, Role, Rule
    from capmatrix.query import _Any
    from capmatrix.resolver import Origin

__all__ = ["ANY_SM", "COMMON_MODELS", "COMMON_SETTINGS", "GPU_NAMES", "REGENERATE", "CommonSetting", "build"]

#: Column axes of a kernel grid: at most this many columns in all.
MAX_COLUMNS = 16
#: A role grid is split into one grid per value of an axis with at most this many values.
MAX_SPLIT_VALUES = 4
#: A residual is spelled out in a note only up to this many boxes (past that the rules say it better).
MAX_RESIDUAL_LINES = 6
#: Disagreements listed per evidence file (the count is always given).
MAX_DISAGREEMENTS = 10

REGENERATE = "capmatrix render"
#: Row label of a grid whose rules never name ``sm`` (every SM answers alike).
ANY_SM = "any (no rule names sm)"


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
class CommonSetting:
    """One deployment setting of the common-configurations table: an engine's role and query values."""

    label: str
    role: str
    axes: Mapping[str, AxisValue]


#: The settings users run most, each asked of an engine's role for every model of COMMON_MODELS.
#: They are a choice of what the page shows first, not a fact about any kernel, so they live with the
#: renderer rather than in the capability YAML (which holds facts with sources). A setting whose role
#: or axes a matrix lacks is left out.
COMMON_SETTINGS: tuple[CommonSetting, ...] = (
    CommonSetting(label="decode, BF16 (TensorRT-LLM)", role="trtllm_generation",
                  axes={"spec_dec": "none", "dtype": "bf16", "kv_cache_dtype": "bf16"}),
    CommonSetting(label="decode, one-model spec-dec, BF16 (TensorRT-LLM)", role="trtllm_generation",
                  axes={"spec_dec": "one_model", "dtype": "bf16", "kv_cache_dtype": "bf16"}),
    CommonSetting(label="decode, BF16, FP8 KV cache (TensorRT-LLM)", role="trtllm_generation",
                  axes={"spec_dec": "none", "dtype": "bf16", "kv_cache_dtype": "fp8"}),
    CommonSetting(label="decode, FP8, FP8 KV cache (TensorRT-LLM)", role="trtllm_generation",
                  axes={"spec_dec": "none", "dtype": "fp8", "kv_cache_dtype": "fp8"}),
    CommonSetting(label="prefill, BF16 (TensorRT-LLM)", role="trtllm_context",
                  axes={"spec_dec": "none", "dtype": "bf16", "kv_cache_dtype": "bf16"}),
    CommonSetting(label="BF16 (vLLM)", role="vllm_attention",
                  axes={"dtype": "bf16", "kv_cache_dtype": "auto"}),
)
#: The shipped checkpoints the table shows, each with every setting (a model the matrix lacks is left out).
COMMON_MODELS = ("llama3_1_8b", "llama3_1_70b", "qwen3_30b_a3b", "gpt_oss_120b", "deepseek_v3")
#: Rejected candidates (and rules) a common-configuration note names at most.
MAX_NOTE_ITEMS = 6


class _Paths:
    """Show every path relative to the matrix root, as ``capabilities/...``."""

    def __init__(self, matrix: Matrix) -> None:
        self.show = matrix.show_path

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
        return "derived from a recorded source table"
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
        return format_value(value) + (f" ({', '.join(fams)})" if fams else "")

    def sm_rows(self, kernels: Sequence[str]) -> list[tuple[AxisValue, str]]:
        """One row per SM, or a single "any" row when no rule of ``kernels`` names ``sm``."""
        assert self.sm is not None  # noqa: S101
        if "sm" not in self.constrained(kernels):
            return [(self.sm.known[0], ANY_SM)]
        return [(sm, self.sm_label(sm)) for sm in self.sm.known]

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
                groups=tuple((format_value(v), len(axes[1].known)) for v in axes[0].known)
                if len(axes) == 2 else (),
                subcolumns=tuple(format_value(c[1]) for c in combos) if len(axes) == 2 else (),
            ),
            rules=tuple(_citation(r, self.paths) for r in kernel.rules),
            roles=self.kernel_roles(kernel.name),
            models=self.kernel_models(kernel.name),
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

    def overview(self) -> Grid:
        assert self.sm is not None  # noqa: S101
        rows = []
        notes = _Notes("overview")
        for kernel in self.matrix.kernels.values():
            cells = []
            for sm in self.sm.known:
                decision = self.decide(kernel, {"sm": sm})
                cells.append(
                    Cell(status=decision.status, text=decision.status.symbol,
                         link=f"kernel-{slug(kernel.name)}")
                )
            rows.append((kernel.name, tuple(cells)))
        return Grid(
            anchor="overview", caption="Kernels by SM (all other axes as a query leaves them)",
            corner="kernel", columns=tuple(self.sm_label(v) for v in self.sm.known),
            rows=tuple(rows), notes=notes.notes, row_kernels=tuple(self.matrix.kernels),
        )

    # -- common configurations ------------------------------------------------------------------

    def gpu_label(self, value: AxisValue) -> str:
        """``H100, H200, GH200 (sm90)``; ``sm130`` for an SM without a known name."""
        name = GPU_NAMES.get(value) if isinstance(value, int) and not isinstance(value, bool) else None
        return f"{name} (sm{format_value(value)})" if name else f"sm{format_value(value)}"

    def model_label(self, name: str) -> str:
        """A checkpoint's Hugging Face name without its organisation, else the model's key."""
        model = self.matrix.models[name]
        return model.hf_ids[0].rpartition("/")[2] if model.hf_ids else name

    def common_settings(self) -> list[CommonSetting]:
        return [
            s for s in COMMON_SETTINGS
            if s.role in self.matrix.roles and all(a in self.matrix.axes for a in s.axes)
        ]

    def common(self) -> CommonTable | None:
        assert self.sm is not None  # noqa: S101
        settings = self.common_settings()
        models = [m for m in COMMON_MODELS if m in self.matrix.models]
        if not settings or not models:
            return None
        notes = _Notes("common")
        rows = []
        row_models = []
        for model in models:
            for setting in settings:
                cells = tuple(
                    self.common_cell(model, setting, sm, notes) for sm in self.sm.known
                )
                rows.append((f"{self.model_label(model)}, {setting.label}", cells))
                row_models.append(model)
        grid = Grid(
            anchor="common", corner="configuration",
            caption="Common configurations by GPU: the engine's answer for exactly this configuration",
            columns=tuple(self.gpu_label(v) for v in self.sm.known), rows=tuple(rows),
            notes=notes.notes, row_models=tuple(row_models),
        )
        lines = tuple(
            f"{s.label}: role {s.role}, "
            + ", ".join(f"{k}={format_value(v)}" for k, v in s.axes.items())
            for s in settings
        )
        return CommonTable(grid=grid, settings=lines)

    def common_cell(
        self, model: str, setting: CommonSetting, sm: AxisValue, notes: _Notes
    ) -> Cell:
        query = KernelQuery(None, model=model, sm=sm, **setting.axes)
        selection = select(setting.role, query, self.matrix)
        verdict = selection.verdict
        citations: list[Citation] = []
        details: list[str] = []
        if verdict is Verdict.SUPPORTED:
            status = CellStatus.SUPPORTED
            assert selection.resolution is not None  # noqa: S101 - a supported selection has a winner
            summary = f"{selection.kernel} serves it (role {setting.role})."
            citations = [
                _citation(self.matrix.rule(r.rule_id), self.paths)
                for r in selection.resolution.reasons
                if r.kind is ReasonKind.GRANT and r.rule_id is not None
            ][:MAX_NOTE_ITEMS]
        else:
            status = CellStatus.UNSUPPORTED if verdict is Verdict.UNSUPPORTED else CellStatus.DEPENDS
            if verdict is Verdict.UNSUPPORTED:
                summary = f"No candidate of role {setting.role} serves it."
            elif not selection.decided:
                summary = (f"Role {setting.role} picks its candidates by a setting this row leaves open.")
            else:
                summary = f"Role {setting.role}: the answer depends on a setting this row leaves open."
            for resolution in selection.trace[:MAX_NOTE_ITEMS]:
                excluded = [
                    r.rule_id for r in resolution.reasons
                    if r.kind is ReasonKind.EXCLUDE and r.rule_id is not None
                ]
                if resolution.verdict is Verdict.SUPPORTED:
                    details.append(f"{resolution.kernel}: supported")
                elif resolution.verdict is Verdict.DEPENDS:
                    where = "; ".join(resolution.residual.describe()[:3]) if resolution.residual else ""
                    details.append(f"{resolution.kernel}: depends" + (f" (supported when {where})"
                                                                      if where else ""))
                elif excluded:
                    details.append(f"{resolution.kernel}: excluded by {', '.join(excluded)}")
                    citations.extend(
                        _citation(self.matrix.rule(rid), self.paths) for rid in excluded
                        if rid not in {c.rule_id for c in citations}
                    )
                else:
                    details.append(f"{resolution.kernel}: no rule grants it")
            citations = citations[:MAX_NOTE_ITEMS]
        return Cell(status=status, text=status.symbol, note=notes.get(summary, citations, details))

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
            for sm, label in self.sm_rows(role.candidates):
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
                column_models=tuple(models),
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
            result = compare(data, self.matrix)
        except (ValueError, KeyError, TypeError, CapmatrixError) as exc:
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


def _describe_disagreement(item: object) -> str:
    """One line per disagreement (``evidence.Disagreement`` renders itself)."""
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
