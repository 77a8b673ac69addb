"""Truth tables for the shipped TensorRT-LLM kernels (xqa, trtllm_gen, fmha_v2, mmha, flash_mla, unfused_mha).

Each row is a query, the verdict the cited TensorRT-LLM code gives it, and the rule the row is
about. Besides checking verdicts, the rows prove that every rule of these kernels matters: for
each rule some row's verdict flips when that rule alone is removed from the matrix.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import pytest

import capmatrix
from capmatrix import KernelQuery, Matrix, Verdict

KERNELS = ("xqa", "trtllm_gen", "fmha_v2", "mmha", "flash_mla", "unfused_mha")
S, U = Verdict.SUPPORTED, Verdict.UNSUPPORTED
FP8 = {"dtype": "fp8", "kv_cache_dtype": "fp8"}
GEN = {"phase": "generation"}
CTX = {"phase": "context"}


class Case(NamedTuple):
    kernel: str
    model: str | None
    axes: dict[str, object]
    expected: Verdict
    rule: str  # the rule this row is about; it must be cited by the resolution


def case(kernel: str, model: str | None, expected: Verdict, rule: str, **axes: object) -> Case:
    return Case(kernel, model, axes, expected, rule)


CASES: tuple[Case, ...] = (
    # ---- xqa: HMMA (C22) ----------------------------------------------------------------------
    case("xqa", "llama", S, "xqa.hmma_decode", sm=86, spec_dec="none"),
    case("xqa", "llama", S, "xqa.hmma_decode", sm=121, spec_dec="none", kv_cache_dtype="int8"),
    case("xqa", "llama", U, "xqa.hmma_decode", sm=75, spec_dec="none"),
    case("xqa", "llama", U, "xqa.hmma_decode", sm=89, spec_dec="none", kv_cache_dtype="nvfp4"),
    case("xqa", "llama", U, "xqa.hmma_decode", sm=80, spec_dec="none", head_dim=72),
    case("xqa", "llama", U, "xqa.hmma_decode", sm=80, spec_dec="none", tokens_per_block=8),
    case("xqa", "llama", U, "xqa.hmma_decode", sm=80, spec_dec="none", dtype="fp32"),
    case("xqa", "falcon", U, "xqa.hmma_decode", sm=80, spec_dec="none"),  # group 71 > 32
    case("xqa", "llama", S, "xqa.hmma_multi_token", sm=120, spec_dec="one_model"),
    case("xqa", "llama", S, "xqa.hmma_multi_token", sm=121, spec_dec="two_model"),
    case("xqa", "llama", S, "xqa.hmma_multi_token", sm=80, spec_dec="one_model", q_per_kv=32),
    case("xqa", "llama", U, "xqa.hmma_multi_token", sm=80, spec_dec="one_model", q_per_kv=64),
    # ---- xqa: Hopper QGMMA (C21) --------------------------------------------------------------
    case("xqa", "llama", S, "xqa.qgmma", sm=90, spec_dec="none", kv_cache_dtype="fp8",
         tokens_per_block=8),
    case("xqa", "qwen2", S, "xqa.qgmma", sm=90, spec_dec="one_model", kv_cache_dtype="fp8",
         head_dim=96),
    case("xqa", "llama", U, "xqa.qgmma", sm=89, spec_dec="none", kv_cache_dtype="fp8",
         tokens_per_block=8),
    case("xqa", "llama", U, "xqa.qgmma", sm=90, spec_dec="none", kv_cache_dtype="bf16",
         tokens_per_block=8),
    # ---- xqa: precompiled multi-token cubins (C19, C27) ---------------------------------------
    case("xqa", "qwen2", S, "xqa.precompiled_multi_token", sm=80, spec_dec="one_model"),
    case("xqa", "qwen2", S, "xqa.precompiled_multi_token", sm=120, spec_dec="one_model"),
    case("xqa", "qwen2", U, "xqa.precompiled_multi_token", sm=80, spec_dec="one_model",
         head_dim=96),
    case("xqa", "qwen2", U, "xqa.precompiled_multi_token", sm=80, spec_dec="one_model",
         tokens_per_block=16),
    case("xqa", "qwen2", S, "xqa.precompiled_multi_token", sm=80, spec_dec="one_model",
         sliding_window=True),
    case("xqa", "qwen2", U, "xqa.precompiled_multi_token", sm=80, spec_dec="one_model",
         beam_width=4),
    case("xqa", "qwen2", S, "xqa.hmma_decode", sm=80, spec_dec="none", head_dim=96),
    # ---- xqa: SM120/121 MLA (C8, C23, C24) ----------------------------------------------------
    case("xqa", "deepseek_v3", S, "xqa.mla_sm12x", sm=121, spec_dec="none", **FP8),
    case("xqa", "deepseek_v3", S, "xqa.mla_sm12x", sm=120, spec_dec="none", tokens_per_block=8,
         **FP8),
    case("xqa", "deepseek_v3", U, "xqa.mla_sm12x", sm=120, spec_dec="none"),  # BF16 Q/KV
    case("xqa", "kimi_k2", U, "xqa.mla_sm12x", sm=120, spec_dec="none", **FP8),  # 64 heads
    case("xqa", "deepseek_v3", U, "xqa.mla_sm12x", sm=90, spec_dec="none", **FP8),
    # ---- xqa: exclusions ----------------------------------------------------------------------
    case("xqa", "gemma", U, "xqa.vanilla_mha_decode", sm=90, spec_dec="none"),
    case("xqa", "gemma", S, "xqa.hmma_decode", sm=90, spec_dec="none", beam_width=4),
    case("xqa", "gemma", S, "xqa.hmma_multi_token", sm=120, spec_dec="one_model"),
    case("xqa", "gpt2", U, "xqa.vanilla_mha_small_head", sm=80, spec_dec="none", dtype="fp16",
         beam_width=4),
    case("xqa", "llama", U, "xqa.group_times_beam", sm=80, spec_dec="none", q_per_kv=16,
         beam_width=4),
    case("xqa", "llama", S, "xqa.hmma_decode", sm=80, spec_dec="none", q_per_kv=8, beam_width=4),
    case("xqa", "llama", U, "xqa.beam_sliding_window", sm=80, spec_dec="none", beam_width=4,
         sliding_window=True),
    case("xqa", "llama", S, "xqa.hmma_multi_token", sm=80, spec_dec="one_model", beam_width=4,
         sliding_window=True),
    case("xqa", "llama", U, "xqa.sm100f_trtllm_gen", sm=100, spec_dec="one_model"),
    case("xqa", "llama", U, "xqa.sm100f_trtllm_gen", sm=103, spec_dec="none"),
    case("xqa", "llama", S, "xqa.hmma_multi_token", sm=110, spec_dec="one_model"),
    case("xqa", "deepseek_v3", U, "xqa.sm12x_mla_spec_dec", sm=120, spec_dec="one_model", **FP8),
    case("xqa", "deepseek_v3", U, "xqa.sm12x_mla_spec_dec", sm=121, spec_dec="two_model", **FP8),
    case("xqa", "deepseek_v3", U, "xqa.sm12x_mla_spec_dec", sm=120, spec_dec="one_model"),
    # ---- trtllm_gen (C14-C18) -----------------------------------------------------------------
    case("trtllm_gen", "llama", S, "trtllm_gen.generation", sm=100, spec_dec="none", **GEN),
    case("trtllm_gen", "llama", S, "trtllm_gen.generation", sm=103, spec_dec="none",
         kv_cache_dtype="nvfp4", **GEN),
    case("trtllm_gen", "llama", U, "trtllm_gen.generation", sm=120, spec_dec="none", **GEN),
    case("trtllm_gen", "llama", U, "trtllm_gen.generation", sm=121, spec_dec="none", **GEN),
    case("trtllm_gen", "llama", U, "trtllm_gen.generation", sm=110, spec_dec="none", **GEN),
    case("trtllm_gen", "llama", U, "trtllm_gen.generation", sm=90, spec_dec="none", **GEN),
    case("trtllm_gen", "llama", U, "trtllm_gen.generation", sm=100, spec_dec="none",
         kv_cache_dtype="int8", **GEN),
    case("trtllm_gen", "llama", S, "trtllm_gen.multi_token", sm=103, spec_dec="one_model", **GEN),
    case("trtllm_gen", "llama", S, "trtllm_gen.multi_token", sm=100, spec_dec="two_model", **GEN),
    case("trtllm_gen", "llama", U, "trtllm_gen.multi_token", sm=120, spec_dec="one_model", **GEN),
    case("trtllm_gen", "deepseek_v3", S, "trtllm_gen.mla_generation", sm=100, spec_dec="none",
         **GEN),
    case("trtllm_gen", "deepseek_v3", S, "trtllm_gen.mla_multi_token", sm=100,
         spec_dec="one_model", **GEN),
    case("trtllm_gen", "deepseek_v3", U, "trtllm_gen.mla_multi_token", sm=110,
         spec_dec="one_model", **GEN),
    case("trtllm_gen", "llama", S, "trtllm_gen.context", sm=100, **CTX),
    case("trtllm_gen", "deepseek_v3", S, "trtllm_gen.context", sm=103, **CTX),
    case("trtllm_gen", "llama", U, "trtllm_gen.context", sm=120, **CTX),
    case("trtllm_gen", "llama", U, "trtllm_gen.context_head_80", sm=100, head_dim=80, **CTX),
    case("trtllm_gen", "llama", S, "trtllm_gen.generation", sm=100, spec_dec="none", head_dim=80,
         **GEN),
    case("trtllm_gen", "llama", U, "trtllm_gen.beam_search", sm=100, spec_dec="none",
         beam_width=4, **GEN),
    case("trtllm_gen", "falcon", U, "trtllm_gen.group_over_16", sm=100, spec_dec="none", **GEN),
    case("trtllm_gen", "llama", S, "trtllm_gen.generation", sm=100, spec_dec="none", q_per_kv=16,
         **GEN),
    case("trtllm_gen", "llama", U, "trtllm_gen.nvfp4_kv_needs_fp8_context", sm=100,
         kv_cache_dtype="nvfp4", **CTX),
    case("trtllm_gen", "llama", S, "trtllm_gen.context", sm=100, dtype="fp8",
         kv_cache_dtype="nvfp4", **CTX),
    # ---- flash_mla (P13, P14, P21) ------------------------------------------------------------
    case("flash_mla", "deepseek_v3", S, "flash_mla.sm90", sm=90, tokens_per_block=64),
    case("flash_mla", "deepseek_v3", S, "flash_mla.sm90", sm=90, tokens_per_block=64,
         spec_dec="one_model"),
    case("flash_mla", "deepseek_v3", U, "flash_mla.sm90", sm=90, tokens_per_block=32),
    case("flash_mla", "deepseek_v3", U, "flash_mla.sm90", sm=100, tokens_per_block=64),
    case("flash_mla", "deepseek_v3", U, "flash_mla.sm90", sm=120, tokens_per_block=64),
    case("flash_mla", "llama", U, "flash_mla.sm90", sm=90, tokens_per_block=64),
    case("flash_mla", "deepseek_v3", S, "flash_mla.sm90_fp8_kv", sm=90, tokens_per_block=64, **FP8),
    case("flash_mla", "deepseek_v3", S, "flash_mla.sm90_fp8_kv", sm=90, tokens_per_block=64,
         kv_cache_dtype="fp8"),
    case("flash_mla", "deepseek_v3", U, "flash_mla.sm90_fp8_kv", sm=90, tokens_per_block=64,
         dtype="fp16", kv_cache_dtype="fp8"),
    # ---- fmha_v2: derived from setup.py (C4, C5, C7, C10, C18, P20) ---------------------------
    case("fmha_v2", "llama", S, "fmha_v2.context_fp16_bf16_sm80_86_90", sm=80, **CTX),
    case("fmha_v2", "llama", S, "fmha_v2.context_fp16_bf16_sm80_86_90", sm=90, head_dim=72, **CTX),
    case("fmha_v2", "llama", U, "fmha_v2.context_fp16_bf16_sm80_86_90", sm=80, head_dim=144, **CTX),
    case("fmha_v2", "llama", U, "fmha_v2.context_fp16_bf16_sm80_86_90", sm=86, dtype="fp8",
         kv_cache_dtype="fp8", **CTX),
    case("fmha_v2", "llama", S, "fmha_v2.context_fp16_bf16_fp8_sm89_120", sm=121, **CTX),
    case("fmha_v2", "llama", S, "fmha_v2.context_fp16_bf16_fp8_sm89_120", sm=89, dtype="fp8",
         kv_cache_dtype="fp8", head_dim=72, **CTX),
    case("fmha_v2", "llama", S, "fmha_v2.context_fp16_bf16_fp8_sm89_120", sm=120, dtype="fp8",
         kv_cache_dtype="nvfp4", **CTX),
    case("fmha_v2", "llama", U, "fmha_v2.context_fp16_bf16_fp8_sm89_120", sm=89, dtype="fp16",
         logit_softcapping=True, head_dim=64, **CTX),
    case("fmha_v2", "llama", S, "fmha_v2.context_fp16_bf16_sm100", sm=103, head_dim=80, **CTX),
    case("fmha_v2", "llama", U, "fmha_v2.context_fp16_bf16_sm100", sm=100, **CTX),
    case("fmha_v2", "llama", S, "fmha_v2.context_fp16_bf16_sm80_86_89_120_softcap", sm=80,
         logit_softcapping=True, **CTX),
    case("fmha_v2", "llama", S, "fmha_v2.context_fp16_bf16_fp8_sm90_softcap", sm=90, dtype="fp8",
         kv_cache_dtype="fp8", logit_softcapping=True, **CTX),
    case("fmha_v2", "llama", S, "fmha_v2.context_fp8_sm90", sm=90, dtype="fp8", kv_cache_dtype="fp8",
         **CTX),
    case("fmha_v2", "llama", U, "fmha_v2.context_fp8_sm90", sm=90, dtype="fp8", kv_cache_dtype="fp8",
         head_dim=72, **CTX),
    case("fmha_v2", "deepseek_v3", S, "fmha_v2.mla_context_bf16_sm90_100_120", sm=90, **CTX),
    case("fmha_v2", "deepseek_v3", S, "fmha_v2.mla_context_bf16_sm90_100_120", sm=121, **CTX),
    case("fmha_v2", "deepseek_v3", U, "fmha_v2.mla_context_bf16_sm90_100_120", sm=80, **CTX),
    case("fmha_v2", "deepseek_v3", S, "fmha_v2.mla_context_fp8_sm90_120", sm=120, **FP8, **CTX),
    case("fmha_v2", "deepseek_v3", S, "fmha_v2.mla_context_fp8_sm90_120", sm=90, **FP8, **CTX),
    case("fmha_v2", "deepseek_v3", U, "fmha_v2.mla_context_fp8_sm90_120", sm=100, **FP8, **CTX),
    case("fmha_v2", "deepseek_v3", S, "fmha_v2.mla_generation_bf16_sm90_100_120", sm=120,
         spec_dec="one_model", **GEN),
    case("fmha_v2", "deepseek_v3", S, "fmha_v2.mla_generation_bf16_sm90_100_120", sm=90,
         spec_dec="none", **GEN),
    case("fmha_v2", "deepseek_v3", U, "fmha_v2.mla_generation_bf16_sm90_100_120", sm=80,
         spec_dec="none", **GEN),
    case("fmha_v2", "deepseek_v3", U, "fmha_v2.mla_generation_bf16_sm90_100_120", sm=110,
         spec_dec="none", **GEN),
    case("fmha_v2", "deepseek_v3", S, "fmha_v2.mla_generation_fp8_sm120", sm=121,
         spec_dec="one_model", **FP8, **GEN),
    case("fmha_v2", "deepseek_v3", U, "fmha_v2.mla_generation_fp8_sm120", sm=90, spec_dec="none",
         **FP8, **GEN),
    case("fmha_v2", "deepseek_v3", U, "fmha_v2.mla_generation_fp8_sm120", sm=89, spec_dec="none",
         **FP8, **GEN),
    # ---- fmha_v2: hand-written (code) ---------------------------------------------------------
    case("fmha_v2", "deepseek_v3", U, "fmha_v2.mla_generation_sm100f", sm=103, spec_dec="none",
         **GEN),
    case("fmha_v2", "llama", U, "fmha_v2.nvfp4_kv_needs_fp8_context", sm=120,
         kv_cache_dtype="nvfp4", **CTX),
    case("fmha_v2", "llama", U, "fmha_v2.relative_position_unfused", sm=80, position_bias="relative",
         **CTX),
    case("fmha_v2", "llama", S, "fmha_v2.context_fp16_bf16_sm80_86_90", sm=80, position_bias="alibi",
         **CTX),
    # ---- unfused_mha ---------------------------------------------------------------------------
    case("unfused_mha", "llama", S, "unfused_mha.context", sm=80, head_dim=144, **CTX),
    case("unfused_mha", "gpt2", S, "unfused_mha.context", sm=75, dtype="fp32", kv_cache_dtype="fp32",
         **CTX),
    case("unfused_mha", "deepseek_v3", U, "unfused_mha.context", sm=80, **CTX),
    case("unfused_mha", "llama", U, "unfused_mha.context", sm=89, dtype="fp8", kv_cache_dtype="fp8",
         **CTX),
    case("unfused_mha", "llama", U, "unfused_mha.no_nvfp4_kv", sm=120, kv_cache_dtype="nvfp4", **CTX),
    case("unfused_mha", "llama", U, "unfused_mha.bf16_needs_sm80", sm=75, **CTX),
    # ---- trtllm_gen: position bias and per-layer windows ---------------------------------------
    case("trtllm_gen", "llama", U, "trtllm_gen.context_position_bias", sm=100, position_bias="alibi",
         **CTX),
    case("trtllm_gen", "llama", U, "trtllm_gen.variable_window_decode", sm=100, spec_dec="none",
         per_layer_window=True, **GEN),
    # ---- mmha (C6, C12, C28) ------------------------------------------------------------------
    case("mmha", "gemma", S, "mmha.decode", sm=80, spec_dec="none"),
    case("mmha", "falcon", S, "mmha.decode", sm=100, spec_dec="none"),
    case("mmha", "gpt2", S, "mmha.decode", sm=75, spec_dec="none", dtype="fp32",
         kv_cache_dtype="fp32"),
    case("mmha", "llama", U, "mmha.decode", sm=80, spec_dec="none", head_dim=72),
    case("mmha", "deepseek_v3", U, "mmha.decode", sm=80, spec_dec="none"),
    case("mmha", "llama", U, "mmha.no_spec_dec", sm=80, spec_dec="one_model"),
    case("mmha", "llama", U, "mmha.no_nvfp4_kv", sm=100, spec_dec="none", kv_cache_dtype="nvfp4"),
    case("mmha", "llama", U, "mmha.bf16_needs_sm80", sm=75, spec_dec="none"),
    case("mmha", "llama", S, "mmha.decode", sm=75, spec_dec="none", dtype="fp16",
         kv_cache_dtype="fp16"),
)


def _query(c: Case) -> KernelQuery:
    return KernelQuery(c.kernel, model=c.model, **c.axes)  # type: ignore[arg-type]


def _id(c: Case) -> str:
    axes = ",".join(f"{k}={v}" for k, v in c.axes.items())
    return f"{c.kernel}[{c.model}:{axes}]"


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return capmatrix.load()


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_truth_table(c: Case, matrix: Matrix) -> None:
    r = capmatrix.resolve(_query(c), matrix=matrix)
    assert r.verdict is c.expected, [str(x) for x in r.reasons]
    assert c.rule in r.rules, (c.rule, r.rules)
    assert r.rules  # every verdict is explained by at least one rule


def test_open_kv_dtype_leaves_only_nvfp4_out(matrix: Matrix) -> None:
    """GPT-2's config fixes no KV dtype, so MMHA's answer depends on it: everything but NVFP4."""
    r = capmatrix.resolve(
        KernelQuery("mmha", model="gpt2", sm=80, spec_dec="none", dtype="fp16"), matrix=matrix
    )
    assert r.verdict is Verdict.DEPENDS
    assert r.residual is not None
    assert str(r.residual) == "kv_cache_dtype in {fp32, fp16, bf16, fp8, int8}"


def _without(matrix: Matrix, rule_id: str) -> Matrix:
    rule = matrix.rule(rule_id)
    kernel = matrix.kernels[rule.kernel]
    trimmed = dataclasses.replace(kernel, rules=tuple(x for x in kernel.rules if x.id != rule_id))
    return dataclasses.replace(
        matrix, kernels={**matrix.kernels, rule.kernel: trimmed}, _compiled=None
    )


def _our_rules(matrix: Matrix) -> list[str]:
    return [rule.id for name in KERNELS for rule in matrix.kernels[name].rules]


def test_every_rule_decides_some_case(matrix: Matrix) -> None:
    """For each rule, some row cites it and changes verdict when the rule alone is removed."""
    undecided = []
    for rule_id in _our_rules(matrix):
        rows = [c for c in CASES if c.rule == rule_id]
        assert rows, f"no truth-table row is about {rule_id}"
        variant = _without(matrix, rule_id)
        flips = [
            c for c in rows
            if capmatrix.resolve(_query(c), matrix=variant).verdict is not c.expected
        ]
        if not flips:
            undecided.append(rule_id)
    assert not undecided, f"rules no row depends on: {undecided}"


def test_rule_metadata(matrix: Matrix) -> None:
    for name in KERNELS:
        kernel = matrix.kernels[name]
        assert kernel.rules, name
        for rule in kernel.rules:
            assert rule.id.startswith(f"{name}."), rule.id
            assert rule.reason.strip()
            assert rule.source.strip()
            # nothing here was checked on hardware: table-derived, read, or untested
            assert str(rule.status) in {"untested", "known_issue", "derived", "read"}, rule.id
            # every source cites the facts' ids or the upstream repository
            assert "TensorRT-LLM" in rule.source or "NVIDIA" in rule.source, rule.id


def test_sm121_is_listed_wherever_sm120_is(matrix: Matrix) -> None:
    """No condition of these kernels admits SM120 and refuses SM121, or the other way round."""
    for name in KERNELS:
        for rule in matrix.kernels[name].rules:
            cond = rule.conditions.get("sm")
            if cond is not None:
                assert cond.contains(120) == cond.contains(121), rule.id


class Pick(NamedTuple):
    model: str
    axes: dict[str, object]
    kernel: str | None


PICKS: tuple[Pick, ...] = (
    Pick("llama", {"sm": 120, "spec_dec": "one_model"}, "xqa"),
    Pick("llama", {"sm": 121, "spec_dec": "one_model"}, "xqa"),
    Pick("llama", {"sm": 90, "spec_dec": "none"}, "xqa"),
    Pick("llama", {"sm": 100, "spec_dec": "one_model"}, "trtllm_gen"),
    Pick("llama", {"sm": 100, "spec_dec": "none", "beam_width": 4}, "mmha"),
    Pick("llama", {"sm": 80, "spec_dec": "one_model", "kv_cache_dtype": "nvfp4"}, None),
    Pick("gemma", {"sm": 90, "spec_dec": "none"}, "mmha"),
    Pick("falcon", {"sm": 100, "spec_dec": "none"}, "mmha"),
    Pick("falcon", {"sm": 100, "spec_dec": "one_model"}, None),
    Pick("deepseek_v3", {"sm": 90, "spec_dec": "one_model", "tokens_per_block": 64}, "flash_mla"),
    Pick("deepseek_v3", {"sm": 90, "spec_dec": "none"}, "fmha_v2"),
    Pick("deepseek_v3", {"sm": 100, "spec_dec": "one_model"}, "trtllm_gen"),
    Pick("deepseek_v3", {"sm": 110, "spec_dec": "none"}, None),
    Pick("deepseek_v3", {"sm": 86, "spec_dec": "none"}, None),
    Pick("deepseek_v3", {"sm": 120, "spec_dec": "one_model"}, "fmha_v2"),
    Pick("deepseek_v3", {"sm": 120, "spec_dec": "none", **FP8}, "xqa"),
    Pick("deepseek_v3", {"sm": 121, "spec_dec": "one_model", **FP8}, "fmha_v2"),
    Pick("kimi_k2", {"sm": 120, "spec_dec": "none", **FP8}, "fmha_v2"),
)


@pytest.mark.parametrize("p", PICKS, ids=[f"{p.model}-{p.axes}" for p in PICKS])
def test_trtllm_generation_role(p: Pick, matrix: Matrix) -> None:
    query = KernelQuery(None, model=p.model, phase="generation", **p.axes)  # type: ignore[arg-type]
    selection = capmatrix.select("trtllm_generation", query, matrix=matrix)
    assert selection.kernel == p.kernel
    role = matrix.roles["trtllm_generation"]
    tried = [r.kernel for r in selection.trace]
    # candidates are tried in the declared order, and every one before the winner was refused
    assert tried == list(role.candidates[: len(tried)])
    assert all(r.verdict is not Verdict.SUPPORTED for r in selection.rejected)


def test_role_order(matrix: Matrix) -> None:
    assert matrix.roles["trtllm_generation"].candidates == (
        "trtllm_gen", "flash_mla", "xqa", "fmha_v2", "mmha",
    )


REQUIRED_MODELS = (
    "llama", "mistral", "qwen2", "gemma", "gpt2", "falcon", "deepseek_v2", "deepseek_v3", "kimi_k2",
)


@pytest.mark.parametrize("name", REQUIRED_MODELS)
def test_models_follow_the_recognition_rules(name: str, matrix: Matrix) -> None:
    model = matrix.models[name]
    assert model.hf_model_types
    assert model.source.strip()
    assert model.recognise
    axes = model.axes
    attention, group = axes["attention"], axes.get("q_per_kv")
    if attention == "mla":
        # kv_lora_rank 512 + qk_rope_head_dim 64 (P12, C7)
        assert axes["head_dim"] == 576
    elif attention == "mha":
        assert group == 1
    elif attention == "gqa":
        assert isinstance(group, int)
        assert group > 1
    else:
        assert attention == "mqa"
        assert isinstance(group, int)
        assert group > 1
    for axis, value in axes.items():
        assert axis in matrix.axes
        assert value in matrix.axes[axis].values, (name, axis, value)


def test_hf_model_types_are_unique(matrix: Matrix) -> None:
    seen: dict[str, str] = {}
    for name, model in matrix.models.items():
        for hf in model.hf_model_types:
            assert hf not in seen, f"{hf} maps to both {seen[hf]} and {name}"
            seen[hf] = name
