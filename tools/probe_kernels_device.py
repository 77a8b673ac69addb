#!/usr/bin/env python3
r"""Device side of ``tools/probe_kernels.py``: run attention kernels on a GPU against a float32 reference.

This file travels to the GPU machine inside the bundle that ``tools/probe_kernels.py bundle`` builds
(next to the vLLM files it needs and the stand-in ``vllm`` modules written by that tool) and runs there
with the machine's own torch and triton::

    python3 BUNDLE/probe_kernels_device.py run --bundle BUNDLE --out DIR \\
        --families triton_unified_attention,triton_mla_decode,flash_attn_3,flex_attention

Families (one case grid each, built by :func:`cases`):

- ``triton_unified_attention``: vLLM's ``unified_attention`` (TRITON_ATTN), paged KV, 2D and 3D launches.
- ``triton_mla_decode``: vLLM's ``decode_attention_fwd(is_mla=True)`` (TRITON_MLA decode), called the way
  ``TritonMLAImpl.forward_mqa`` calls it (multi-token rows as per-row causal extents).
- ``flash_attn_3``: vLLM's FA3 extension through ``flash_attn_varlen_func(fa_version=3)``, paged KV, the
  way FLASH_ATTN passes an FP8 cache (query quantized too), sinks (``s_aux``) in the model dtype.
- ``flex_attention``: ``torch.nn.attention.flex_attention`` compiled (flex decoding for one or four query
  tokens, the flex attention template for prefill).
- ``flashinfer_fa2`` / ``flashinfer_fa3``: FlashInfer 0.7.2.post1's paged prefill kernels, JIT-compiled from
  its own sources, through ``BatchPrefillWithPagedKVCacheWrapper(backend=...)`` (decode, 4-token and prefill
  rows alike, as vLLM's tensor-core decode wrapper runs them), with sinks through
  ``BatchAttentionWithAttentionSinkWrapper`` (the wrapper vLLM builds for sinks on SM90).
- ``flashinfer_xqa``: FlashInfer's XQA decode (``flashinfer.decode.xqa_batch_decode_with_kv_cache``, as vLLM's
  FLASHINFER decode calls it), JIT-compiled.

FlashInfer cases run one JIT module per worker (a chunk is the cases of one module; ``module`` in a case).

Every case is compared with :func:`reference`, an explicit float32 softmax attention over the same
(dequantized) inputs. A case's outcome is ``pass`` (max abs error within the tolerance of its dtype),
``wrong`` (ran, error above tolerance or not finite) or ``error`` (raised; the text is kept). Cases run in
worker processes, a chunk each; a worker that dies (a sticky CUDA error, a crash) is restarted on the rest
of its chunk and the case it was running is recorded as an error with the worker's last stderr line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch
    from torch import Tensor

#: Max abs error allowed against the float32 reference, by the query dtype; x3 with an FP8 KV cache.
TOLERANCE = {"fp16": 0.01, "bf16": 0.03, "fp32": 0.002}
FP8_FACTOR = 3.0
#: Decode: one token for each of three sequences; spec4: four tokens for each of two; prefill: 40 new
#: tokens with no prefix and 17 new tokens after 80 cached.
SHAPES: dict[str, tuple[tuple[int, int], ...]] = {
    "decode": ((1, 37), (1, 130), (1, 300)),
    "spec4": ((4, 60), (4, 211)),
    "prefill": ((40, 40), (17, 97)),
}
#: MLA decode: longer contexts so that the split-KV path (one split per 512 tokens) has two splits.
MLA_SHAPES: dict[str, tuple[tuple[int, int], ...]] = {
    "decode": ((1, 37), (1, 300), (1, 1100)),
    "spec4": ((4, 60), (4, 1030)),
}
WINDOW = 32
SOFTCAP = 3.0
Q_GAIN = 2.0
SEED = 0
#: Where tensors live; "cpu" lets the reference and the inputs be checked on a machine with no GPU.
DEV = os.environ.get("PROBE_DEVICE", "cuda")
Case = dict[str, Any]


# ---------------------------------------------------------------- case grids


def _case(family: str, **kw: object) -> Case:
    base: Case = {
        "family": family,
        "dtype": "bf16",
        "kv": "model",
        "head": 128,
        "group": 4,
        "kv_heads": 2,
        "block": 16,
        "mode": "decode",
        "sinks": False,
        "window": 0,
        "softcap": 0.0,
    }
    base.update(kw)
    if base["group"] >= 32:
        base["kv_heads"] = 1
    return base


HEADS = (32, 48, 64, 72, 80, 96, 104, 112, 128, 144, 160, 192, 224, 256, 512, 576)
FEATURES: tuple[dict[str, Any], ...] = (
    {"sinks": True},
    {"window": WINDOW},
    {"softcap": SOFTCAP},
    {"sinks": True, "window": WINDOW},
    {"group": 1},
    {"group": 8, "kv_heads": 1},
    {"group": 5},
    {"group": 7},
    {"group": 16},
    {"group": 32},
    {"block": 8},
    {"block": 32},
    {"block": 64},
    {"block": 128},
)


def _paged_cases(family: str) -> list[Case]:
    out: list[Case] = []
    for dtype, kv, head, mode in itertools.product(
        ("fp16", "bf16", "fp32"), ("model", "fp8"), HEADS, ("decode", "spec4", "prefill")
    ):
        out.append(_case(family, dtype=dtype, kv=kv, head=head, mode=mode))
    for dtype, head, mode, feat in itertools.product(
        ("fp16", "bf16"), (64, 128, 256), ("decode", "spec4", "prefill"), FEATURES
    ):
        out.append(_case(family, dtype=dtype, head=head, mode=mode, **feat))
    for mode, feat in itertools.product(("decode", "spec4", "prefill"), FEATURES[:4]):
        out.append(_case(family, dtype="fp32", head=128, mode=mode, **feat))
        out.append(_case(family, dtype="bf16", kv="fp8", head=128, mode=mode, **feat))
        out.append(_case(family, dtype="fp16", kv="fp8", head=128, mode=mode, **feat))
    if family == "flash_attn_3":  # sinks in a dtype other than the model's (vLLM passes the model's)
        for dtype, sink_dtype, head, mode in itertools.product(
            ("fp16", "bf16"), ("bf16", "fp32"), (64, 128, 256), ("decode", "spec4", "prefill")
        ):
            if dtype != sink_dtype:
                out.append(
                    _case(family, dtype=dtype, head=head, mode=mode, sinks=True, sink_dtype=sink_dtype)
                )
    return out


def _mla_cases() -> list[Case]:
    out: list[Case] = []
    for dtype, kv, heads, block, mode in itertools.product(
        ("fp16", "bf16", "fp32"), ("model", "fp8"), (8, 16, 32, 64, 128), (16, 32, 64), ("decode", "spec4")
    ):
        out.append(
            _case(
                "triton_mla_decode",
                dtype=dtype,
                kv=kv,
                head=576,
                group=heads,
                kv_heads=1,
                block=block,
                mode=mode,
            )
        )
    for dtype, block, mode in itertools.product(("fp16", "bf16"), (8, 128), ("decode", "spec4")):
        out.append(
            _case("triton_mla_decode", dtype=dtype, head=576, group=16, kv_heads=1, block=block, mode=mode)
        )
    return out


def _flex_cases() -> list[Case]:
    out: list[Case] = []
    variants: tuple[dict[str, Any], ...] = (
        {"group": 1},
        {"group": 4},
        {"group": 8, "kv_heads": 1},
        {"group": 1, "window": WINDOW},
        {"group": 1, "softcap": SOFTCAP},
    )
    heads = (32, 64, 80, 96, 128, 192, 256, 512, 576)
    for dtype, head, mode, var in itertools.product(
        ("fp16", "bf16", "fp32"), heads, ("decode", "spec4", "prefill"), variants
    ):
        kw = {"kv_heads": 2, **var}
        out.append(_case("flex_attention", dtype=dtype, head=head, mode=mode, block=0, **kw))
    return out


#: FlashInfer FA2: every head of FlashInfer issue #4299's range and the dispatch list, both 16-bit dtypes.
FI_FA2_HEADS = (64, 80, 96, 128, 256, 512)
FI_FA3_HEADS = (64, 128, 256)
#: Per-module runtime variants (the same JIT module serves every group, block size and phase).
FI_VARIANTS: tuple[dict[str, Any], ...] = ({}, {"group": 1}, {"group": 8, "kv_heads": 1}, {"block": 64})
MODES = ("decode", "spec4", "prefill")


def module_of(case: Case) -> str:
    """The JIT module a FlashInfer case compiles (its chunk): what FlashInfer builds one module for."""
    keys: tuple[str, ...]
    if case["family"] == "flashinfer_xqa":
        keys = ("dtype", "kv", "head", "group", "block")
        extra = f"-w{int(bool(case['window']))}"
    else:
        keys = ("dtype", "kv", "head")
        extra = f"-w{int(bool(case['window']))}-c{int(bool(case['softcap']))}-s{int(case['sinks'])}"
    return str(case["family"]) + "-" + "-".join(str(case[k]) for k in keys) + extra


def _fi_prefill_cases(family: str) -> list[Case]:
    out: list[Case] = []
    fa3 = family == "flashinfer_fa3"
    heads = FI_FA3_HEADS if fa3 else FI_FA2_HEADS
    for dtype, head in itertools.product(("fp16", "bf16"), heads):
        if fa3 and dtype == "fp16" and head != 128:
            continue
        out.extend(
            _case(family, dtype=dtype, head=head, mode=mode, **var)
            for mode, var in itertools.product(MODES, FI_VARIANTS)
        )
    fp8 = (
        ((dtype, 128) for dtype in ("fp16", "bf16"))
        if fa3
        else (
            (d, h) for d, h in itertools.product(("fp16", "bf16"), (64, 128, 256)) if d == "bf16" or h == 128
        )
    )
    out.extend(
        _case(family, dtype=dtype, kv="fp8", head=head, mode=mode) for dtype, head in fp8 for mode in MODES
    )
    features: list[tuple[str, int, dict[str, Any]]] = (
        [
            ("bf16", 128, {"window": WINDOW}),
            ("bf16", 128, {"softcap": SOFTCAP}),
            ("bf16", 64, {"sinks": True}),
        ]
        if fa3
        else [
            (d, 128, f)
            for d in ("fp16", "bf16")
            for f in ({"window": WINDOW}, {"softcap": SOFTCAP}, {"sinks": True})
        ]
        + [("bf16", 64, {"sinks": True}), ("bf16", 64, {"sinks": True, "window": WINDOW})]
    )
    out.extend(
        _case(family, dtype=dtype, head=head, mode=mode, **feat)
        for dtype, head, feat in features
        for mode in MODES
    )
    return out


def _fi_xqa_cases() -> list[Case]:
    family = "flashinfer_xqa"
    out: list[Case] = []
    modules: list[dict[str, Any]] = [
        {"dtype": d, "kv": kv, "head": h}
        for d, kv, h in itertools.product(("fp16", "bf16"), ("model", "fp8"), (64, 128, 256))
    ]
    modules += [{"dtype": "bf16", "head": h} for h in (72, 80, 96, 512)]
    modules += [
        {"dtype": "bf16", "head": 128, **v}
        for v in (
            {"group": 1},
            {"group": 8, "kv_heads": 1},
            {"group": 16},
            {"block": 64},
            {"block": 8},
            {"window": WINDOW},
        )
    ]
    modules += [{"dtype": "bf16", "kv": "fp8", "head": 128, "window": WINDOW}]
    out.extend(_case(family, mode="decode", sinks=sinks, **mod) for mod in modules for sinks in (False, True))
    return out


#: Follow-up of 2026-12-05 (issue 46, "Kernel evidence settled"), appended after the first grids so that
#: their indices stay: Triton unified attention's fp32 2D launch at heads 512/576 with Triton's fp32 dot
#: forced to IEEE (``fp32_dot: ieee``, TRITON_F32_DEFAULT=ieee in the worker's environment; vLLM sets
#: nothing, so its fp32 is the default TF32: the first grid's fp32 cases at heads 512/576 re-run as they
#: are, TUA_RERUN).
TUA_FOLLOW_UP: tuple[dict[str, Any], ...] = tuple(
    {"dtype": "fp32", "kv": kv, "head": head, "mode": mode, "fp32_dot": "ieee"}
    for head, kv, mode in itertools.product((512, 576), ("model", "fp8"), ("prefill", "decode"))
)
#: The date the follow-up cases were written (``follow_up`` in each such case; the recorded evidence files
#: hold the first grids only).
FOLLOW_UP = "2026-12-05"
#: The first grid's cases the follow-up re-runs unchanged (fp32, heads 512/576, decode and prefill, both
#: caches).
TUA_RERUN = (234, 236, 237, 239, 282, 284, 285, 287)
#: vLLM 0.33.0's cache block sizes for FLEX_ATTENTION cases (``opts: vllm``): BLOCK_N is the block size.
FLEX_VLLM_HEADS = (32, 64, 128, 192, 256, 512, 576)


def _flex_follow_up() -> list[Case]:
    """flex_attention's follow-up: vLLM's own kernel options first (the disputed shapes), then head 16.

    ``opts: vllm`` is flex_attention called as vLLM 0.33.0's FlexAttentionImpl.forward calls it on torch
    >= 2.9 (direct block-mask build): a block mask of (16, block) tiles and the kernel options of
    ``get_kernel_options`` (FORCE_USE_FLEX_ATTENTION, BLOCK_M 16, BLOCK_N = the cache block size), every
    phase on the flex attention template. Without ``opts`` it is torch's default options, as the first grid.
    """
    out: list[Case] = []
    vllm = {"opts": "vllm", "kv_heads": 2}
    for dtype, head in itertools.product(("fp16", "bf16", "fp32"), (512, 576)):
        out.append(_case("flex_attention", dtype=dtype, head=head, mode="prefill", block=16, **vllm))
    out.append(_case("flex_attention", dtype="fp32", head=192, mode="prefill", block=16, **vllm))
    for dtype, head in itertools.product(("fp16", "bf16", "fp32"), (512, 576)):
        out.append(_case("flex_attention", dtype=dtype, head=head, mode="prefill", block=64, **vllm))
    for dtype, head, mode in itertools.product(("fp16", "bf16", "fp32"), (16,), MODES):
        out.extend(
            _case("flex_attention", dtype=dtype, head=head, mode=mode, block=0, kv_heads=2, **var)
            for var in ({"group": 4}, {"group": 1})
        )
    for dtype, head, mode in itertools.product(("fp16", "bf16", "fp32"), FLEX_VLLM_HEADS, MODES):
        if mode == "prefill" and (head in (512, 576) or (dtype, head) == ("fp32", 192)):
            continue  # first above
        out.append(_case("flex_attention", dtype=dtype, head=head, mode=mode, block=16, **vllm))
    features: tuple[dict[str, Any], ...] = (
        {"window": WINDOW},
        {"softcap": SOFTCAP},
        {"group": 1},
        {"group": 8, "kv_heads": 1},
    )
    for head, mode, var in itertools.product(
        (128, 576),
        ("decode", "prefill"),
        features,
    ):
        out.append(
            _case("flex_attention", dtype="bf16", head=head, mode=mode, block=16, **{**vllm, **var})
        )
    return out


def cases(family: str) -> list[Case]:
    """The case grid of one family, each case with its index (follow-up cases after the first grid)."""
    if family in {"triton_unified_attention", "flash_attn_3"}:
        grid = _paged_cases(family)
        if family == "triton_unified_attention":
            grid += [_case(family, follow_up=FOLLOW_UP, **kw) for kw in TUA_FOLLOW_UP]
    elif family == "triton_mla_decode":
        grid = _mla_cases()
    elif family == "flex_attention":
        grid = _flex_cases() + [{**c, "follow_up": FOLLOW_UP} for c in _flex_follow_up()]
    elif family in {"flashinfer_fa2", "flashinfer_fa3"}:
        grid = _fi_prefill_cases(family)
    elif family == "flashinfer_xqa":
        grid = _fi_xqa_cases()
    else:
        msg = f"unknown family {family!r}"
        raise ValueError(msg)
    for i, case in enumerate(grid):
        case["index"] = i
    return grid


# ---------------------------------------------------------------- inputs and reference


def _torch_dtype(name: str) -> torch.dtype:
    import torch  # noqa: PLC0415

    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp8": torch.float8_e4m3fn}[
        name
    ]


def reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_pos: Tensor,
    kv_len: int,
    *,
    scale: float,
    window: int,
    softcap: float,
    sinks: Tensor | None,
) -> Tensor:
    """float32 attention of one sequence: q (n, Hq, D), k (L, Hk, D), v (L, Hk, Dv) -> (n, Hq, Dv).

    Query i sits at absolute position q_pos[i]; it sees key j iff j <= q_pos[i] (causal) and, with a
    window W > 0, j > q_pos[i] - W. Soft-cap is c * tanh(s / c); sinks (Hq,) add exp(sink) to the softmax
    denominator. GQA repeats each KV head over its group.
    """
    import torch  # noqa: PLC0415

    group = q.shape[1] // k.shape[1]
    kk = k[:kv_len].float().repeat_interleave(group, dim=1)
    vv = v[:kv_len].float().repeat_interleave(group, dim=1)
    s = torch.einsum("nhd,lhd->hnl", q.float(), kk) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    j = torch.arange(kv_len, device=q.device)
    allowed = j[None, :] <= q_pos[:, None]
    if window > 0:
        allowed &= j[None, :] > (q_pos[:, None] - window)
    s = s.masked_fill(~allowed[None], float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    if sinks is not None:
        m = torch.maximum(m, sinks.float()[:, None, None])
    p = torch.exp(s - m)
    denom = p.sum(dim=-1, keepdim=True)
    if sinks is not None:
        denom = denom + torch.exp(sinks.float()[:, None, None] - m)
    return torch.einsum("hnl,lhd->nhd", p / denom, vv)


class Inputs:
    """Random paged inputs for one case: per-sequence dense K/V, a shuffled page pool, block table."""

    def __init__(self, case: Case, shapes: tuple[tuple[int, int], ...], *, head_v: int | None = None) -> None:
        import torch  # noqa: PLC0415

        gen = torch.Generator(device=DEV).manual_seed(SEED + case["index"])
        self.case = case
        dt = _torch_dtype(case["dtype"])
        d = case["head"]
        dv = head_v or d
        hk = case["kv_heads"]
        hq = hk * case["group"]
        self.hq, self.hk, self.d, self.dv = hq, hk, d, dv
        self.shapes = shapes
        block = max(case["block"], 1)
        self.q_lens = [n for n, _ in shapes]
        self.kv_lens = [kv for _, kv in shapes]
        pages_per = [math.ceil(kv / block) for kv in self.kv_lens]
        n_pages = sum(pages_per) + 3
        perm = torch.randperm(n_pages, generator=gen, device=DEV)
        self.block_table = torch.zeros(len(shapes), max(pages_per), dtype=torch.int32, device=DEV)
        fp8 = case["kv"] == "fp8"
        kv_dt = _torch_dtype("fp8") if fp8 else dt
        store_dt = torch.float32 if fp8 else dt
        self.k_cache = torch.zeros(n_pages, block, hk, d, dtype=store_dt, device=DEV)
        self.v_cache = torch.zeros(n_pages, block, hk, dv, dtype=store_dt, device=DEV)
        self.q_seqs, self.k_seqs, self.v_seqs = [], [], []
        used = 0
        for s, (n, kv) in enumerate(shapes):
            k = torch.randn(kv, hk, d, generator=gen, device=DEV).to(kv_dt)
            v = torch.randn(kv, hk, dv, generator=gen, device=DEV).to(kv_dt)
            qv = (torch.randn(n, hq, d, generator=gen, device=DEV) * Q_GAIN).to(dt)
            self.q_seqs.append(qv)
            self.k_seqs.append(k.float())
            self.v_seqs.append(v.float())
            for p in range(pages_per[s]):
                page = int(perm[used])
                used += 1
                self.block_table[s, p] = page
                lo, hi = p * block, min((p + 1) * block, kv)
                self.k_cache[page, : hi - lo] = k[lo:hi].float().to(store_dt)
                self.v_cache[page, : hi - lo] = v[lo:hi].float().to(store_dt)
        if fp8:
            self.k_cache = self.k_cache.to(kv_dt)
            self.v_cache = self.v_cache.to(kv_dt)
        self.q = torch.cat(self.q_seqs)
        self.cu_q = torch.tensor([0, *itertools.accumulate(self.q_lens)], dtype=torch.int32, device=DEV)
        self.seqused_k = torch.tensor(self.kv_lens, dtype=torch.int32, device=DEV)
        self.sinks = (
            (3.0 + 3.0 * torch.rand(hq, generator=gen, device=DEV)).to(
                _torch_dtype(str(case.get("sink_dtype", case["dtype"])))
            )
            if case["sinks"]
            else None
        )
        self.scale = d**-0.5

    def expected(
        self, *, q_override: list[Any] | None = None, scale: float | None = None
    ) -> tuple[Any, float]:
        """The reference output (all sequences, concatenated) and how much the case's features change it."""
        import torch  # noqa: PLC0415

        c = self.case
        outs, plain = [], []
        for s, (n, kv) in enumerate(self.shapes):
            q = (q_override or self.q_seqs)[s]
            pos = torch.arange(kv - n, kv, device=DEV)
            args = (q, self.k_seqs[s], self.v_seqs[s][..., : self.dv], pos, kv)
            sc = scale or self.scale
            outs.append(
                reference(*args, scale=sc, window=c["window"], softcap=c["softcap"], sinks=self.sinks)
            )
            plain.append(reference(*args, scale=sc, window=0, softcap=0.0, sinks=None))
        ref, base = torch.cat(outs), torch.cat(plain)
        return ref, float((ref - base).abs().max())


def _verdict(case: Case, got: Tensor, ref: Tensor, effect: float) -> dict[str, Any]:
    import torch  # noqa: PLC0415

    tol = TOLERANCE[case["dtype"]] * (FP8_FACTOR if case["kv"] == "fp8" else 1.0)
    got = got.float()
    finite = bool(torch.isfinite(got).all())
    err = float((got - ref).abs().max()) if finite else float("inf")
    out: dict[str, Any] = {
        "outcome": "pass" if finite and err <= tol else "wrong",
        "max_abs_err": round(err, 6) if finite else "inf",
        "tolerance": tol,
    }
    if case["sinks"] or case["window"] or case["softcap"]:
        out["feature_effect"] = round(effect, 4)
    return out


# ---------------------------------------------------------------- the kernels


def run_triton_unified(case: Case) -> dict[str, Any]:
    """Run vLLM's unified_attention on one case, as TritonAttentionImpl.forward calls it."""
    import torch  # noqa: PLC0415
    from vllm.v1.attention.ops.triton_unified_attention import unified_attention  # type: ignore[import-not-found]  # noqa: PLC0415
    from vllm.v1.kv_cache_interface import KVQuantMode  # type: ignore[import-not-found]  # noqa: PLC0415

    x = Inputs(case, SHAPES[case["mode"]])
    ref, effect = x.expected()
    out = torch.empty(x.q.shape[0], x.hq, x.d, dtype=x.q.dtype, device=DEV)
    segments = 16
    rows = x.q.shape[0]
    pad = 1 << (x.d - 1).bit_length()
    segm_out = torch.empty(rows, x.hq, segments, pad, dtype=torch.float32, device=DEV)
    segm_max = torch.empty(rows, x.hq, segments, dtype=torch.float32, device=DEV)
    segm_sum = torch.empty(rows, x.hq, segments, dtype=torch.float32, device=DEV)
    one = torch.ones(len(x.shapes), x.hk, dtype=torch.float32, device=DEV)
    fp8 = case["kv"] == "fp8"
    unified_attention(
        q=x.q,
        k=x.k_cache,
        v=x.v_cache,
        out=out,
        cu_seqlens_q=x.cu_q,
        max_seqlen_q=max(x.q_lens),
        seqused_k=x.seqused_k,
        max_seqlen_k=max(x.kv_lens),
        softmax_scale=x.scale,
        causal=True,
        window_size=(case["window"] - 1, 0) if case["window"] else (-1, -1),
        block_table=x.block_table,
        softcap=case["softcap"],
        q_descale=None,
        k_descale=one,
        v_descale=one,
        seq_threshold_3D=128 // x.hk,
        num_par_softmax_segments=segments,
        softmax_segm_output=segm_out,
        softmax_segm_max=segm_max,
        softmax_segm_expsum=segm_sum,
        sinks=x.sinks,
        kv_quant_mode=KVQuantMode.FP8_PER_TENSOR if fp8 else KVQuantMode.NONE,
    )
    torch.cuda.synchronize()
    res = _verdict(case, out, ref, effect)
    if case["dtype"] == "fp32":
        res["fp32_dot"] = _fp32_dot()
    return res


def _fp32_dot() -> str:
    """Triton's input precision for a tl.dot of fp32 operands with none given (TRITON_F32_DEFAULT)."""
    import triton  # type: ignore[import-not-found]  # noqa: PLC0415

    knobs = getattr(triton, "knobs", None)
    value = getattr(getattr(knobs, "language", None), "fp32_default", None) if knobs else None
    return str(value or os.environ.get("TRITON_F32_DEFAULT") or "tf32 (default)")


def run_triton_mla(case: Case) -> dict[str, Any]:
    """Run vLLM's decode_attention_fwd(is_mla=True) on one case, as TritonMLAImpl.forward_mqa calls it."""
    import torch  # noqa: PLC0415
    from vllm.v1.attention.ops.triton_decode_attention import decode_attention_fwd  # type: ignore[import-not-found]  # noqa: PLC0415

    kv_lora = 512
    x = Inputs(case, MLA_SHAPES[case["mode"]], head_v=None)
    scale = 192**-0.5
    # The latent cache holds one "KV head" of 576 values; V is its first 512 (kv_c).
    ref_rows = []
    for s, (n, kv) in enumerate(x.shapes):
        pos = torch.arange(kv - n, kv, device=DEV)
        ref_rows.append(
            reference(
                x.q_seqs[s],
                x.k_seqs[s],
                x.k_seqs[s][..., :kv_lora],
                pos,
                kv,
                scale=scale,
                window=0,
                softcap=0.0,
                sinks=None,
            )
        )
    ref = torch.cat(ref_rows)
    q_len = x.q_lens[0]
    rows = x.q.shape[0]
    max_seq = max(x.kv_lens)
    splits = min(
        1 << (max(1, max_seq // 512) - 1).bit_length(),
        torch.cuda.get_device_properties(0).multi_processor_count * 2,
    )
    o = torch.zeros(rows, x.hq, kv_lora, dtype=x.q.dtype, device=DEV)
    lse = torch.zeros(rows, x.hq, dtype=x.q.dtype, device=DEV)
    logits = torch.empty(rows, x.hq, splits, kv_lora + 1, dtype=torch.float32, device=DEV)
    cache = x.k_cache  # (pages, block, 1, 576)
    block_table, seq_lens = x.block_table, x.seqused_k
    if q_len > 1:  # TritonMLAImpl.forward_mqa: one row per query token, causal per-row extents
        block_table = block_table.repeat_interleave(q_len, dim=0)
        offsets = torch.arange(1 - q_len, 1, device=DEV, dtype=seq_lens.dtype)
        seq_lens = (seq_lens.unsqueeze(1) + offsets).flatten().clamp(min=0)
    one = torch.tensor(1.0, dtype=torch.float32, device=DEV)
    decode_attention_fwd(
        x.q,
        cache,
        cache[..., :kv_lora],
        o,
        lse,
        block_table,
        seq_lens,
        logits,
        splits,
        scale,
        cache.size(1),
        k_scale=one,
        v_scale=one,
        is_mla=True,
    )
    torch.cuda.synchronize()
    res = _verdict(case, o, ref, 0.0)
    res["kv_splits"] = splits
    return res


def run_fa3(case: Case) -> dict[str, Any]:
    """Run vLLM's flash_attn_varlen_func(fa_version=3) on one case, as FlashAttentionImpl.forward calls it."""
    import torch  # noqa: PLC0415
    from vllm.vllm_flash_attn.flash_attn_interface import flash_attn_varlen_func  # type: ignore[import-not-found]  # noqa: PLC0415

    x = Inputs(case, SHAPES[case["mode"]])
    fp8 = case["kv"] == "fp8"
    q = x.q
    q_seqs = None
    if fp8:  # FLASH_ATTN quantizes the query too when the cache is FP8 (supports_quant_query_input)
        q = x.q.float().to(torch.float8_e4m3fn)
        q_seqs = list(torch.split(q.float(), x.q_lens))
    ref, effect = x.expected(q_override=q_seqs)
    out = torch.empty(x.q.shape[0], x.hq, x.d, dtype=x.q.dtype, device=DEV)
    one = torch.ones(len(x.shapes), x.hk, dtype=torch.float32, device=DEV)
    flash_attn_varlen_func(
        q=q,
        k=x.k_cache,
        v=x.v_cache,
        max_seqlen_q=max(x.q_lens),
        cu_seqlens_q=x.cu_q,
        max_seqlen_k=max(x.kv_lens),
        seqused_k=x.seqused_k,
        softmax_scale=x.scale,
        causal=True,
        window_size=[case["window"] - 1, 0] if case["window"] else [-1, -1],
        softcap=case["softcap"],
        block_table=x.block_table,
        out=out,
        q_descale=one if fp8 else None,
        k_descale=one if fp8 else None,
        v_descale=one if fp8 else None,
        fa_version=3,
        s_aux=x.sinks,
    )
    torch.cuda.synchronize()
    return _verdict(case, out, ref, effect)


def vllm_flex_kernel_options(
    dtype: torch.dtype, block_m: int, block_n: int, *, use_direct_build: bool, smem_optin: int
) -> dict[str, int | bool]:
    """The get_kernel_options of vLLM 0.33.0 (vllm/v1/attention/backends/flex_attention.py:1398-1459), as is.

    ``block_m``/``block_n`` are the block mask's BLOCK_SIZE: (q_block_size 16, the cache block size) on
    torch >= 2.9 with a paged cache, where ``use_direct_build`` holds (FlexAttentionMetadataBuilder,
    :856-870); ``smem_optin`` is the device's shared_memory_per_block_optin.
    """
    import torch  # noqa: PLC0415

    kernel_options: dict[str, int | bool] = {"FORCE_USE_FLEX_ATTENTION": True}

    def ensure_divisible(candidate: int, block_size: int) -> int:
        if block_size <= 0:
            return candidate
        candidate = min(candidate, block_size)
        if candidate <= 0:
            return block_size
        if block_size % candidate == 0:
            return candidate
        candidate = math.gcd(candidate, block_size)
        if candidate <= 1:
            return block_size
        return candidate

    if use_direct_build:
        kernel_options["BLOCK_M"] = block_m
        kernel_options["BLOCK_N"] = block_n
        return kernel_options
    preferred_block = 32 if dtype == torch.float32 else 64
    block_m_candidate = ensure_divisible(preferred_block, block_m)
    block_n_candidate = ensure_divisible(preferred_block, block_n)
    if smem_optin < 144 * 1024:
        block_m_candidate = ensure_divisible(max(1, block_m_candidate // 2), block_m)
        block_n_candidate = ensure_divisible(max(1, block_n_candidate // 2), block_n)
    kernel_options["BLOCK_M"] = max(block_m_candidate, 16)
    kernel_options["BLOCK_N"] = max(block_n_candidate, 16)
    return kernel_options


def run_flex(case: Case) -> dict[str, Any]:
    """Run torch's compiled flex_attention on one case (default kernel options, or vLLM's: ``opts``)."""
    import torch  # noqa: PLC0415
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: PLC0415

    torch._dynamo.reset()  # noqa: SLF001 - one compile per case, no recompile limit
    vllm = case.get("opts") == "vllm"
    n_q, kv = {"decode": (1, 300), "spec4": (4, 211), "prefill": (200, 200)}[case["mode"]]
    batch = 2
    dt = _torch_dtype(case["dtype"])
    gen = torch.Generator(device=DEV).manual_seed(SEED + case["index"])
    hk = case["kv_heads"]
    hq = hk * case["group"]
    d = case["head"]
    q = (torch.randn(batch, hq, n_q, d, generator=gen, device=DEV) * Q_GAIN).to(dt)
    k = torch.randn(batch, hk, kv, d, generator=gen, device=DEV).to(dt)
    v = torch.randn(batch, hk, kv, d, generator=gen, device=DEV).to(dt)
    offset = kv - n_q
    window = case["window"]
    cap = case["softcap"]

    def mask_mod(b: Tensor, h: Tensor, qi: Tensor, ki: Tensor) -> Tensor:  # noqa: ARG001
        keep = ki <= qi + offset
        if window:
            keep = keep & (ki > qi + offset - window)
        return keep

    def score_mod(score: Tensor, b: Tensor, h: Tensor, qi: Tensor, ki: Tensor) -> Tensor:  # noqa: ARG001
        capped: Tensor = cap * torch.tanh(score / cap)
        return capped

    options: dict[str, int | bool] | None = None
    if vllm:  # FlexAttentionImpl.forward: (16, block) block mask, get_kernel_options, fullgraph compile
        block_n = case["block"]
        mask = create_block_mask(mask_mod, None, None, n_q, kv, device=DEV, BLOCK_SIZE=(16, block_n))
        smem = int(getattr(torch.cuda.get_device_properties(0), "shared_memory_per_block_optin", 0))
        options = vllm_flex_kernel_options(dt, 16, block_n, use_direct_build=True, smem_optin=smem)
        fn = torch.compile(flex_attention, fullgraph=True)
    else:
        mask = create_block_mask(mask_mod, None, None, n_q, kv, device=DEV)
        fn = torch.compile(flex_attention, dynamic=False)
    out = fn(
        q,
        k,
        v,
        block_mask=mask,
        score_mod=score_mod if cap else None,
        enable_gqa=hq != hk,
        scale=d**-0.5,
        kernel_options=cast("Any", options),
    )
    torch.cuda.synchronize()
    pos = torch.arange(offset, kv, device=DEV)
    refs, plain = [], []
    for b in range(batch):
        qb, kb, vb = (t[b].transpose(0, 1) for t in (q, k, v))
        refs.append(reference(qb, kb, vb, pos, kv, scale=d**-0.5, window=window, softcap=cap, sinks=None))
        plain.append(reference(qb, kb, vb, pos, kv, scale=d**-0.5, window=0, softcap=0.0, sinks=None))
    ref = torch.stack(refs)
    effect = float((ref - torch.stack(plain)).abs().max())
    res = _verdict(case, out.transpose(1, 2), ref, effect)
    if options is not None:
        res["kernel_options"] = options
    return res


def _fi_paging(x: Inputs) -> tuple[Tensor, Tensor, Tensor]:
    """FlashInfer's paged-KV description of ``x``: page indptr, page indices, last-page lengths."""
    import torch  # noqa: PLC0415

    block = x.k_cache.shape[1]
    pages = [math.ceil(kv / block) for kv in x.kv_lens]
    indptr = torch.tensor([0, *itertools.accumulate(pages)], dtype=torch.int32, device=DEV)
    indices = torch.cat([x.block_table[s, :n] for s, n in enumerate(pages)]).to(torch.int32)
    last = torch.tensor(
        [kv - (n - 1) * block for kv, n in zip(x.kv_lens, pages, strict=True)], dtype=torch.int32, device=DEV
    )
    return indptr, indices, last


def run_fi_prefill(case: Case) -> dict[str, Any]:
    """FlashInfer's paged prefill kernel (FA2 or FA3, JIT) on one case, as vLLM's FLASHINFER plans it."""
    import torch  # noqa: PLC0415
    from flashinfer import BatchPrefillWithPagedKVCacheWrapper  # type: ignore[import-not-found]  # noqa: PLC0415
    from flashinfer.attention import BatchAttentionWithAttentionSinkWrapper  # type: ignore[import-not-found]  # noqa: PLC0415

    backend = "fa3" if case["family"] == "flashinfer_fa3" else "fa2"
    x = Inputs(case, SHAPES[case["mode"]])
    fp8 = case["kv"] == "fp8"
    q, q_seqs = x.q, None
    if fp8 and backend == "fa3":  # "FA3 FP8 KV cache currently requires FP8 query" (utils.py:456-502)
        q = x.q.float().to(torch.float8_e4m3fn)
        q_seqs = list(torch.split(q.float(), x.q_lens))
    ref, effect = x.expected(q_override=q_seqs)
    ws = torch.zeros(256 << 20, dtype=torch.uint8, device=DEV)
    indptr, indices, last = _fi_paging(x)
    window_left = case["window"] - 1 if case["window"] else -1
    kv_dt = x.k_cache.dtype
    if case["sinks"]:
        wrapper = BatchAttentionWithAttentionSinkWrapper(
            ws,
            "NHD",
            backend=backend,
            q_data_type=q.dtype,
            kv_data_type=kv_dt,
            head_dim_qk=x.d,
            head_dim_vo=x.d,
            window_left=window_left,
        )
    else:
        wrapper = BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend=backend)
    wrapper.plan(
        x.cu_q,
        indptr,
        indices,
        last,
        x.hq,
        x.hk,
        x.d,
        x.k_cache.shape[1],
        causal=True,
        sm_scale=x.scale,
        window_left=window_left,
        logits_soft_cap=case["softcap"] or None,
        q_data_type=q.dtype,
        kv_data_type=kv_dt,
        o_data_type=x.q.dtype,
    )
    out = torch.empty(x.q.shape[0], x.hq, x.d, dtype=x.q.dtype, device=DEV)
    if case["sinks"]:
        assert x.sinks is not None  # noqa: S101
        wrapper.run(q, (x.k_cache, x.v_cache), x.sinks.float(), x.scale, out=out)
    else:
        wrapper.run(q, (x.k_cache, x.v_cache), out=out)
    torch.cuda.synchronize()
    return _verdict(case, out, ref, effect)


def run_fi_xqa(case: Case) -> dict[str, Any]:
    """FlashInfer's XQA decode (JIT) on one case, as vLLM's FLASHINFER decode calls it on SM90."""
    import torch  # noqa: PLC0415
    from flashinfer.decode import xqa_batch_decode_with_kv_cache  # type: ignore[import-not-found]  # noqa: PLC0415

    x = Inputs(case, SHAPES[case["mode"]])
    fp8 = case["kv"] == "fp8"
    # With an FP8 cache XQA multiplies Q and K in FP8 (the query converted to E4M3 inside the kernel), so
    # the reference takes the query rounded to E4M3; the error against the unrounded query is kept too.
    q_seqs = [q.float().to(torch.float8_e4m3fn).float() for q in x.q_seqs] if fp8 else None
    ref, effect = x.expected(q_override=q_seqs)
    ws = torch.zeros(256 << 20, dtype=torch.uint8, device=DEV)
    out = torch.empty(x.q.shape[0], x.hq, x.d, dtype=x.q.dtype, device=DEV)
    xqa_batch_decode_with_kv_cache(
        query=x.q,
        kv_cache=(x.k_cache, x.v_cache),
        workspace_buffer=ws,
        block_tables=x.block_table,
        seq_lens=x.seqused_k,
        max_seq_len=max(x.kv_lens),
        bmm1_scale=x.scale,
        bmm2_scale=1.0,
        window_left=case["window"] - 1 if case["window"] else -1,
        out=out,
        sinks=None if x.sinks is None else x.sinks.float(),
        kv_layout="NHD",
        q_len_per_req=1,
    )
    torch.cuda.synchronize()
    res = _verdict(case, out, ref, effect)
    if fp8:
        plain, _ = x.expected()
        res["max_abs_err_unrounded_q"] = round(float((out.float() - plain).abs().max()), 6)
    return res


RUNNERS = {
    "flashinfer_fa2": run_fi_prefill,
    "flashinfer_fa3": run_fi_prefill,
    "flashinfer_xqa": run_fi_xqa,
    "triton_unified_attention": run_triton_unified,
    "triton_mla_decode": run_triton_mla,
    "flash_attn_3": run_fa3,
    "flex_attention": run_flex,
}
STICKY = ("CUDA error", "illegal memory access", "device-side assert", "unspecified launch failure")


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[:3])[:600]


def worker(family: str, case_file: Path, out_file: Path) -> int:
    """Run one chunk's cases, appending a start line and a result line each; 3 after a sticky error."""
    chunk: list[Case] = json.loads(case_file.read_text())
    done = set()
    if out_file.exists():
        for line in out_file.read_text().splitlines():
            rec = json.loads(line)
            if "outcome" in rec:
                done.add(rec["index"])
    with out_file.open("a") as fh:
        for case in chunk:
            if case["index"] in done:
                continue
            fh.write(json.dumps({"index": case["index"], "start": True}) + "\n")
            fh.flush()
            t0 = time.perf_counter()
            try:
                res = RUNNERS[family](case)
            except Exception as exc:  # noqa: BLE001 - every failure is a recorded outcome
                res = {"outcome": "error", "error": _error_text(exc)}
                if os.environ.get("PROBE_TRACE"):
                    traceback.print_exc()
            res["seconds"] = round(time.perf_counter() - t0, 3)
            fh.write(json.dumps({**case, **res}) + "\n")
            fh.flush()
            if res["outcome"] == "error" and any(s in res["error"] for s in STICKY):
                return 3
    return 0


# ---------------------------------------------------------------- orchestration


def _environment() -> dict[str, Any]:
    import torch  # noqa: PLC0415
    import triton  # noqa: PLC0415

    props = torch.cuda.get_device_properties(0)
    extra: dict[str, Any] = {}
    try:
        import flashinfer  # noqa: PLC0415

        extra["flashinfer"] = flashinfer.__version__
    except Exception as exc:  # noqa: BLE001 - the other families run without it
        extra["flashinfer"] = f"not importable: {type(exc).__name__}"
    return {
        **extra,
        "gpu": torch.cuda.get_device_name(0),
        "sm": props.major * 10 + props.minor,
        "shared_memory_per_block_optin": int(getattr(props, "shared_memory_per_block_optin", 0)),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": sys.version.split()[0],
    }


def _index_set(text: str) -> set[int]:
    """``"239,287,576-591"`` -> those case indices (ranges inclusive)."""
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _results(path: Path) -> tuple[dict[int, dict[str, Any]], int | None]:
    """Finished cases of a worker's file, and the index of a case started but never finished."""
    done: dict[int, dict[str, Any]] = {}
    started: int | None = None
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "outcome" in rec:
                done[rec["index"]] = rec
                started = None
            else:
                started = rec["index"]
    return done, started


def orchestrate(args: argparse.Namespace) -> int:
    """Run the families' chunks in worker processes within the time budget; write <family>.jsonl to --out."""
    bundle = Path(args.bundle).resolve()
    out = Path(args.out)
    families = args.families.split(",")
    for family in families:
        cases(family)  # an unknown family stops here, before any worker starts
    so = bundle / "vllm" / "vllm_flash_attn" / "_vllm_fa3_C.abi3.so"
    if "flash_attn_3" in families and not so.is_file():
        print(
            f"{so}: missing; unpack it first: python3 -m zipfile -e {bundle}/fa3.zip {bundle}",
            file=sys.stderr,
        )
        return 2
    work = Path("/tmp/probe_work")  # noqa: S108 - the device machine's scratch
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget_s
    # The bundle first; an unpacked FlashInfer and its tvm-ffi may sit on PYTHONPATH already.
    path = os.pathsep.join(p for p in (str(bundle), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
    jobs: list[tuple[str, Path, Path, list[Case]]] = []
    for family in families:
        grid = cases(family)
        if args.skip_done:  # cases recorded by an earlier run (their JSONL carried along) are not run again
            prior = Path(args.skip_done) / f"{family}.jsonl"
            seen = (
                {json.loads(ln)["index"] for ln in prior.read_text().splitlines()}
                if prior.exists()
                else set()
            )
            grid = [c for c in grid if c["index"] not in seen]
        if args.indices:  # only these cases of the grid (a follow-up)
            wanted = _index_set(args.indices)
            grid = [c for c in grid if c["index"] in wanted]
        size = args.chunk
        if family.startswith("flashinfer_"):  # one JIT module per worker
            groups: dict[str, list[Case]] = {}
            for c in grid:
                groups.setdefault(module_of(c), []).append(c)
            chunks = list(groups.values())
        else:  # a chunk holds cases of one Triton fp32-dot setting (it is the worker's environment)
            chunks = []
            for _, run in itertools.groupby(grid, key=lambda c: c.get("fp32_dot")):
                part = list(run)
                chunks += [part[n : n + size] for n in range(0, len(part), size)]
        for chunk in chunks:
            n = chunk[0]["index"]
            cf = work / f"{family}-{n}.json"
            cf.write_text(json.dumps(chunk))
            jobs.append((family, cf, work / f"{family}-{n}.jsonl", chunk))
    deferred = [d for d in (args.defer or "").split(",") if d]
    # Chunks of the deferred modules run last (a stable sort keeps the grid's order otherwise).
    jobs.sort(
        key=lambda job: (
            any(d in module_of(job[3][0]) for d in deferred) if job[0].startswith("flashinfer_") else False
        )
    )
    pending = list(jobs)
    running: list[tuple[subprocess.Popen[bytes], tuple[str, Path, Path, list[Case]], Path]] = []
    crashes: dict[Path, list[dict[str, Any]]] = {}
    while pending or running:
        while pending and len(running) < args.workers and time.monotonic() < deadline:
            job = pending.pop(0)
            family, cf, of, _ = job
            log = of.with_suffix(".log")
            job_env = env
            dot = job[3][0].get("fp32_dot")
            if dot:  # Triton reads it when it compiles; a cache of its own keeps the two builds apart
                job_env = {**env, "TRITON_F32_DEFAULT": dot, "TRITON_CACHE_DIR": str(work / f"triton-{dot}")}
            with log.open("ab") as lf:
                proc = subprocess.Popen(  # noqa: S603
                    [sys.executable, str(Path(__file__).resolve()), "worker", family, str(cf), str(of)],
                    env=job_env,
                    stdout=lf,
                    stderr=lf,
                )
            running.append((proc, job, log))
        if not running:
            break
        time.sleep(0.2)
        for item in list(running):
            proc, job, log = item
            if time.monotonic() > deadline and proc.poll() is None:
                proc.kill()
            if proc.poll() is None:
                continue
            running.remove(item)
            family, cf, of, chunk = job
            done, started = _results(of)
            if len(done) < len(chunk) and time.monotonic() < deadline:
                if started is not None:
                    tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:]
                    case = next(c for c in chunk if c["index"] == started)
                    rec = {
                        **case,
                        "outcome": "error",
                        "error": f"worker died (rc {proc.returncode}): {' '.join(tail)[:400]}",
                    }
                    with of.open("a") as fh:
                        fh.write(json.dumps(rec) + "\n")
                    crashes.setdefault(of, []).append(rec)
                pending.insert(0, job)
    env_facts = _environment()
    summary: dict[str, Any] = {"environment": env_facts, "families": {}}
    for family in families:
        rows: list[dict[str, Any]] = []
        missing = 0
        for fam, _cf, of, chunk in jobs:
            if fam != family:
                continue
            done, _ = _results(of)
            for c in chunk:
                if c["index"] in done:
                    rows.append(done[c["index"]])
                else:
                    missing += 1
        rows.sort(key=lambda r: r["index"])
        (out / f"{family}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        summary["families"][family] = {"cases": len(rows), "not_run": missing, "outcomes": counts}
    (out / "environment.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line: run (orchestrate), worker (one chunk), count (grid sizes)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run")
    run.add_argument("--bundle", required=True)
    run.add_argument("--out", required=True)
    run.add_argument("--families", required=True)
    run.add_argument("--workers", type=int, default=14)
    run.add_argument("--chunk", type=int, default=12)
    run.add_argument("--budget-s", type=float, default=480.0)
    run.add_argument("--skip-done", help="folder of earlier <family>.jsonl results whose cases are skipped")
    run.add_argument("--indices", help="only these case indices: comma-separated, ranges as a-b")
    run.add_argument("--defer", help="comma-separated parts of FlashInfer module names whose chunks run last")
    count = sub.add_parser("count")
    count.add_argument("families")
    w = sub.add_parser("worker")
    w.add_argument("family")
    w.add_argument("case_file")
    w.add_argument("out_file")
    args = parser.parse_args(argv)
    if args.cmd == "worker":
        return worker(args.family, Path(args.case_file), Path(args.out_file))
    if args.cmd == "count":
        for family in args.families.split(","):
            print(family, len(cases(family)))
        return 0
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
