"""The reference engine: kernel selection through capmatrix, and draft verification against references."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import capmatrix  # noqa: E402
from capmatrix.engine.reference import (  # noqa: E402
    IMPLEMENTATIONS,
    ROLE_CPU,
    LayerConfig,
    NoImplementation,
    VerificationAttention,
    check_against_naive,
    check_against_sequential,
    naive_attention,
    verification_mask,
)

GQA = LayerConfig(hidden_size=256, num_heads=8, num_kv_heads=2, head_dim=64)
MQA = LayerConfig(hidden_size=128, num_heads=4, num_kv_heads=1, head_dim=32)
MHA = LayerConfig(hidden_size=128, num_heads=4, num_kv_heads=4, head_dim=32)
MLA = LayerConfig(hidden_size=256, num_heads=4, num_kv_heads=4, head_dim=96, kv_lora_rank=64,
                  qk_rope_head_dim=32)
SHAPES = {"gqa": GQA, "mqa": MQA, "mha": MHA, "mla": MLA}
TORCH_DTYPE = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _inputs(layer: VerificationAttention, past: int = 11, drafts: int = 4) -> tuple[Any, Any]:
    gen = torch.Generator().manual_seed(3)
    dtype = TORCH_DTYPE[layer.dtype]
    hidden = layer.config.hidden_size
    prefix = torch.randn(2, past, hidden, generator=gen).to(device=layer.device, dtype=dtype)
    x = torch.randn(2, drafts, hidden, generator=gen).to(device=layer.device, dtype=dtype)
    _, cache = layer.forward(prefix, layer.empty_cache(2))
    return x, cache


def test_cpu_selection_goes_through_the_cpu_role() -> None:
    layer = VerificationAttention(config=GQA, dtype="bf16")
    assert layer.role == ROLE_CPU
    assert "sm" not in layer.query.axes  # a CPU has no SM: the role carries the device class
    assert layer.query.axes["attn_mask"] is True  # draft verification passes an explicit mask
    assert layer.query.axes["causal"] is False
    assert layer.query.axes["attention"] == "gqa"
    assert layer.selection.kernel == "torch_sdpa_cpu_flash"
    assert layer.implementation == "FLASH_ATTENTION"
    trace = layer.trace()
    assert trace[0]["kernel"] == "torch_sdpa_cpu_flash"
    assert trace[0]["verdict"] == "supported"
    reasons = trace[0]["reasons"]
    assert isinstance(reasons, list)
    assert any("torch_sdpa_cpu_flash.float_dtypes" in m for m in reasons)


def test_mla_is_selected_as_the_decompressed_mha_call() -> None:
    layer = VerificationAttention(config=MLA, dtype="fp32")
    assert layer.query.axes["attention"] == "mha"
    assert layer.query.axes["head_dim"] == 96
    assert layer.selection.kernel == "torch_sdpa_cpu_flash"


def test_no_candidate_raises_with_the_query() -> None:
    with pytest.raises(NoImplementation) as info:
        VerificationAttention(config=GQA, dtype="fp8")
    assert info.value.role == ROLE_CPU
    assert info.value.query.axes["dtype"] == "fp8"


def test_every_sdpa_kernel_of_the_roles_has_an_implementation() -> None:
    m = capmatrix.default_matrix()
    for role in ("torch_sdpa", "torch_sdpa_cudnn_first", ROLE_CPU):
        assert set(m.roles[role].candidates) <= set(IMPLEMENTATIONS)


@pytest.mark.parametrize(("shape", "dtype"), list(itertools.product(SHAPES, ["fp32", "bf16"])))
def test_verification_matches_the_naive_reference(shape: str, dtype: str) -> None:
    layer = VerificationAttention(config=SHAPES[shape], dtype=dtype)
    x, cache = _inputs(layer)
    result = check_against_naive(layer, x, cache)
    assert result["ok"], result
    assert result["max_abs_error"] <= result["tolerance"]  # type: ignore[operator]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_verification_equals_decoding_one_token_at_a_time(shape: str) -> None:
    layer = VerificationAttention(config=SHAPES[shape], dtype="fp32")
    x, cache = _inputs(layer)
    result = check_against_sequential(layer, x, cache)
    assert result["ok"], result
    out, new_cache = layer.forward(x, cache)
    assert out.shape == (2, 4, layer.config.hidden_size)
    assert new_cache.length == cache.length + 4


def test_mla_cache_holds_the_latent_and_one_rope_key() -> None:
    layer = VerificationAttention(config=MLA, dtype="fp32")
    _, cache = _inputs(layer, past=5)
    assert tuple(cache.a.shape) == (2, 5, 64)
    assert tuple(cache.b.shape) == (2, 5, 32)


def test_verification_mask_is_bottom_right_causal() -> None:
    mask = verification_mask(3, 2)
    assert mask.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_sdpa_is_causal_would_be_wrong_for_drafts() -> None:
    """Why the query says attn_mask=true: is_causal aligns top-left when queries are fewer than keys."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 3, 16, generator=gen)
    k = torch.randn(1, 2, 8, 16, generator=gen)
    v = torch.randn(1, 2, 8, 16, generator=gen)
    right = naive_attention(q, k, v, verification_mask(5, 3)).float()
    top_left = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert float((top_left - right).abs().max()) > 1e-2


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="multiple"):
        LayerConfig(hidden_size=64, num_heads=6, num_kv_heads=4, head_dim=16)
    with pytest.raises(ValueError, match="both"):
        LayerConfig(hidden_size=64, num_heads=4, num_kv_heads=4, head_dim=16, kv_lora_rank=8)
    with pytest.raises(ValueError, match="between"):
        LayerConfig(hidden_size=64, num_heads=4, num_kv_heads=4, head_dim=16, kv_lora_rank=8,
                    qk_rope_head_dim=16)


# --------------------------------------------------------------------------------------------------
# The CPU rules agree with what the CPU backends do


def _runs(backend: str, dtype: str, attention: str, mask: bool, causal: bool, dropout: bool) -> bool:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kv_heads = 2 if attention == "gqa" else 4
    q = torch.randn(1, 4, 3, 64, dtype=TORCH_DTYPE[dtype])
    k = torch.randn(1, kv_heads, 7, 64, dtype=TORCH_DTYPE[dtype])
    attn_mask = torch.ones(3, 7, dtype=torch.bool) if mask else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with sdpa_kernel([getattr(SDPBackend, backend)]):
                torch.nn.functional.scaled_dot_product_attention(
                    q, k, k, attn_mask=attn_mask, is_causal=causal,
                    dropout_p=0.1 if dropout else 0.0, enable_gqa=attention == "gqa",
                )
    except RuntimeError:
        return False
    return True


def test_cpu_rules_match_forced_backends() -> None:
    disagreements = []
    for kernel in capmatrix.default_matrix().roles[ROLE_CPU].candidates:
        for dtype, attention, mask, causal, dropout in itertools.product(
            ["fp32", "fp16", "bf16"], ["mha", "gqa"], [False, True], [False, True], [False, True]
        ):
            q = capmatrix.KernelQuery(kernel, dtype=dtype, attention=attention, attn_mask=mask,
                                      causal=causal, dropout=dropout, head_dim=64)
            said = bool(capmatrix.resolve(q))
            did = _runs(IMPLEMENTATIONS[kernel], dtype, attention, mask, causal, dropout)
            if said != did:
                disagreements.append((kernel, dtype, attention, mask, causal, dropout, said, did))
    assert disagreements == []


# --------------------------------------------------------------------------------------------------
# On a CUDA GPU


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape", ["gqa", "mla"])
def test_gpu_selection_and_verification(shape: str) -> None:  # pragma: no cover - GPU only
    from capmatrix.engine import detect_sm

    layer = VerificationAttention(config=SHAPES[shape], device="cuda", dtype="bf16")
    assert layer.query.axes["sm"] == detect_sm()
    assert layer.selection.kernel in capmatrix.default_matrix().roles["torch_sdpa"].candidates
    x, cache = _inputs(layer)
    assert check_against_naive(layer, x, cache)["ok"]
    assert check_against_sequential(layer, x, cache)["ok"]


# --------------------------------------------------------------------------------------------------
# Paged KV cache and start-up checks


@pytest.mark.parametrize("shape", ["gqa", "mla"])
def test_paged_cache_gives_the_contiguous_answer(shape: str) -> None:
    layer = VerificationAttention(config=SHAPES[shape], dtype="fp32")
    gen = torch.Generator().manual_seed(5)
    hidden = layer.config.hidden_size
    prefix = torch.randn(2, 11, hidden, generator=gen)
    drafts = torch.randn(2, 4, hidden, generator=gen)
    order = [9, 3, 14, 0, 7, 12, 1, 5, 2, 8, 4, 6, 10, 11, 13, 15]
    paged = layer.empty_paged_cache(2, blocks=16, tokens_per_block=4, order=order)
    first = layer.forward_paged(prefix, paged)
    second = layer.forward_paged(drafts, paged)
    want_first, cache = layer.forward(prefix, layer.empty_cache(2))
    want_second, cache = layer.forward(drafts, cache)
    assert torch.equal(first, want_first)
    assert torch.equal(second, want_second)
    assert paged.length == 15
    assert paged.tables == [[9, 3, 14, 1], [0, 7, 12, 5]]  # blocks need not be adjacent
    gathered = layer.gather(paged)
    assert torch.equal(gathered.a, cache.a)
    assert torch.equal(gathered.b, cache.b)


def test_paged_cache_runs_out_of_blocks() -> None:
    layer = VerificationAttention(config=GQA, dtype="fp32")
    paged = layer.empty_paged_cache(2, blocks=3, tokens_per_block=4)
    with pytest.raises(MemoryError):
        layer.forward_paged(torch.randn(2, 5, GQA.hidden_size), paged)


def _matrix_with_cpu_role(tmp_path: Any, candidates: str) -> capmatrix.Matrix:
    root = Path(__file__).resolve().parent.parent / "capabilities"
    caps = tmp_path / "capabilities"
    (caps / "kernels").mkdir(parents=True)
    (caps / "axes.yaml").write_text((root / "axes.yaml").read_text())
    cpu_yaml = (root / "kernels" / "torch_sdpa_cpu.yaml").read_text()
    old = "candidates: [torch_sdpa_cpu_flash, torch_sdpa_cpu_math]"
    assert old in cpu_yaml
    (caps / "kernels" / "cpu.yaml").write_text(cpu_yaml.replace(old, f"candidates: {candidates}"))
    (caps / "kernels" / "mystery.yaml").write_text(
        "kernels:\n"
        "  mystery:\n"
        "    description: a kernel this engine has no implementation for\n"
        "    rules:\n"
        "      - id: mystery.all\n"
        "        grant: {dtype: [fp32]}\n"
        "        reason: test\n"
        "        source: test\n"
        "        status: untested\n"
    )
    return capmatrix.load(caps)


def test_a_candidate_without_implementation_fails_at_start(tmp_path: Any) -> None:
    m = _matrix_with_cpu_role(tmp_path, "[torch_sdpa_cpu_flash, mystery]")
    with pytest.raises(NoImplementation) as info:
        VerificationAttention(config=GQA, dtype="fp32", matrix=m)
    assert "mystery" in info.value.detail
    ok = _matrix_with_cpu_role(tmp_path / "ok", "[torch_sdpa_cpu_math]")
    layer = VerificationAttention(config=GQA, dtype="fp32", matrix=ok)
    assert layer.selection.kernel == "torch_sdpa_cpu_math"


def test_an_unknown_role_is_a_query_error() -> None:
    with pytest.raises(capmatrix.InvalidQuery):
        VerificationAttention(config=GQA, dtype="fp32", role="torch_sdpa_gpu")
