"""The common-configurations table: the settings users run most, for the shipped checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from capmatrix._shipped.default import select
from capmatrix.authoring.render._cells import _Grid
from capmatrix.authoring.render._cite import _citation, _Notes
from capmatrix.authoring.render.page import (
    UNGRANTED_SYMBOL,
    Cell,
    CellStatus,
    Citation,
    CommonTable,
    Grid,
)
from capmatrix.model import format_value
from capmatrix.query import KernelQuery
from capmatrix.resolver import ReasonKind, Verdict

if TYPE_CHECKING:
    from collections.abc import Mapping

    from capmatrix.model import AxisValue

__all__: list[str] = []

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


class _CommonTable(_Grid):
    """The common-configurations table of the page."""

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
            column_sms=tuple(format_value(v) for v in self.sm.known),
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
        ungranted = False
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
            # Refused when some candidate's exclusion removed its grant; else no rule granted any.
            ungranted = verdict is Verdict.UNSUPPORTED and not any(
                r.kind is ReasonKind.EXCLUDE for t in selection.trace for r in t.reasons
            )
        text = UNGRANTED_SYMBOL if ungranted else status.symbol
        return Cell(status=status, text=text, note=notes.get(summary, citations, details),
                    ungranted=ungranted)
