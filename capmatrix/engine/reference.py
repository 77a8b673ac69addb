"""A reference engine: speculative-decoding verification attention that picks its kernel with capmatrix.

:class:`VerificationAttention` is a small Llama-style attention layer (GQA/MQA/MHA, or an MLA-shaped
variant whose KV cache holds a latent of ``kv_lora_rank`` plus one shared RoPE key) that verifies ``k``
draft tokens in one multi-token query over a contiguous KV cache, causal over the drafts. It asks
:func:`capmatrix.select` once, at construction, which torch SDPA backend to use: role ``torch_sdpa`` with
the device's SM on a GPU, role ``torch_sdpa_cpu`` with no SM on a CPU (a device class is a role, not an
axis). Draft verification needs a bottom-right-aligned causal mask (SDPA's ``is_causal`` is top-left
aligned when there are fewer queries than keys), so the layer passes an explicit mask and its query says
``attn_mask=true, causal=false``. :func:`check_against_naive` compares the result with a float64
matmul/softmax reference. torch is imported inside functions only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from capmatrix._shipped.default import default_matrix, select
from capmatrix.engine.device import detect_sm
from capmatrix.engine.hf import ATTENTION_MHA, query_from_hf_config
from capmatrix.errors import CapmatrixError, UnknownName
from capmatrix.query import KernelQuery

if TYPE_CHECKING:
    from collections.abc import Mapping

    from capmatrix.matrix import Matrix
    from capmatrix.resolver import Selection

__all__ = [
    "IMPLEMENTATIONS",
    "ROLE_CPU",
    "ROLE_CUDA",
    "TOLERANCE",
    "KVCache",
    "LayerConfig",
    "NoImplementation",
    "PagedKVCache",
    "VerificationAttention",
    "check_against_naive",
    "check_against_sequential",
    "naive_attention",
    "verification_mask",
]

#: The role a CUDA device selects from (sm set) and the one a CPU selects from (sm left out).
ROLE_CUDA: Final = "torch_sdpa"
ROLE_CPU: Final = "torch_sdpa_cpu"

#: The torch SDPA backend (a torch.nn.attention.SDPBackend member name) behind each kernel of the roles.
IMPLEMENTATIONS: Final[Mapping[str, str]] = {
    "torch_sdpa_flash": "FLASH_ATTENTION",
    "torch_sdpa_efficient": "EFFICIENT_ATTENTION",
    "torch_sdpa_cudnn": "CUDNN_ATTENTION",
    "torch_sdpa_math": "MATH",
    "torch_sdpa_cpu_flash": "FLASH_ATTENTION",
    "torch_sdpa_cpu_math": "MATH",
}

#: Max abs error against the float64 reference, per dtype axis value.
TOLERANCE: Final[Mapping[str, float]] = {"fp32": 1e-4, "fp16": 4e-3, "bf16": 3e-2}



class NoImplementation(CapmatrixError, LookupError):
    """No candidate of the role supports the layer's query, or a chosen kernel has no implementation."""

    def __init__(self, role: str, query: KernelQuery, detail: str) -> None:
        super().__init__(role, query, detail)
        self.role = role
        self.query = query
        self.detail = detail

    def __str__(self) -> str:
        return f"role {self.role!r} has no usable kernel for {self.query!r}: {self.detail}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerConfig:
    """Shape of the attention layer; ``kv_lora_rank`` and ``qk_rope_head_dim`` make it MLA-shaped.

    For MLA, ``head_dim`` is the per-head Q/K size after decompression (nope part plus the shared RoPE
    part) and also the V head size: the SDPA kernels' ``head_dim`` axis takes Q/K and V sizes equal.
    """

    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}"
            )
        if (self.kv_lora_rank is None) != (self.qk_rope_head_dim is None):
            raise ValueError("an MLA layer needs both kv_lora_rank and qk_rope_head_dim")
        if self.qk_rope_head_dim is not None and not 0 < self.qk_rope_head_dim < self.head_dim:
            raise ValueError("qk_rope_head_dim must lie between 0 and head_dim")

    @property
    def is_mla(self) -> bool:
        """Whether the KV cache holds a compressed latent (MLA) instead of per-head K/V."""
        return self.kv_lora_rank is not None

    def hf_config(self) -> dict[str, object]:
        """The layer as the fields of a Hugging Face config."""
        out: dict[str, object] = {
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "hidden_size": self.hidden_size,
            "head_dim": self.head_dim,
        }
        if self.is_mla:
            out["kv_lora_rank"] = self.kv_lora_rank
            out["qk_rope_head_dim"] = self.qk_rope_head_dim
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class KVCache:
    """A contiguous KV cache: per-head K/V (``a``, ``b``), or the MLA latent and shared RoPE key."""

    a: Any
    b: Any

    @property
    def length(self) -> int:
        """Cached tokens."""
        return int(self.a.shape[-2])


@dataclass(slots=True, kw_only=True)
class PagedKVCache:
    """A paged KV cache: fixed-size blocks in a pool, and a block table per sequence.

    ``pool_a`` / ``pool_b`` have shape (blocks, tokens_per_block, *features), features being
    (kv_heads, head_dim) for per-head K/V and (kv_lora_rank,) / (qk_rope_head_dim,) for MLA. Blocks are
    taken from ``free`` in its order, so a sequence's blocks need not be adjacent.
    """

    tokens_per_block: int
    pool_a: Any
    pool_b: Any
    tables: list[list[int]]
    free: list[int]
    length: int = 0

    def blocks_for(self, tokens: int) -> int:
        """Blocks needed to hold ``tokens`` tokens."""
        return -(-tokens // self.tokens_per_block)


def verification_mask(past: int, drafts: int, device: Any = None) -> Any:  # noqa: ANN401
    """Boolean mask (drafts, past + drafts): draft i sees the cache and drafts 0..i (bottom-right causal)."""
    import torch  # noqa: PLC0415

    keys = torch.arange(past + drafts, device=device)
    limits = past + torch.arange(drafts, device=device)
    return keys[None, :] <= limits[:, None]


def naive_attention(q: Any, k: Any, v: Any, mask: Any) -> Any:  # noqa: ANN401
    """Masked softmax attention in float64 with explicit matmuls (K/V heads repeated for GQA)."""
    import torch  # noqa: PLC0415

    q64, k64, v64 = (t.to(torch.float64) for t in (q, k, v))
    group = q64.shape[1] // k64.shape[1]
    k64 = k64.repeat_interleave(group, dim=1)
    v64 = v64.repeat_interleave(group, dim=1)
    scores = q64 @ k64.transpose(-1, -2) / math.sqrt(q64.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v64


def _rope(x: Any, positions: Any, theta: float) -> Any:  # noqa: ANN401
    """Rotate-half RoPE over the last dimension of ``x`` (..., T, n) at ``positions`` (T,)."""
    import torch  # noqa: PLC0415

    n = x.shape[-1]
    inv = theta ** (-torch.arange(0, n, 2, dtype=torch.float32, device=x.device) / n)
    angles = positions.to(torch.float32)[:, None] * inv[None, :]
    cos = torch.cat([angles.cos(), angles.cos()], dim=-1)
    sin = torch.cat([angles.sin(), angles.sin()], dim=-1)
    x32 = x.to(torch.float32)
    half = n // 2
    rotated = torch.cat([-x32[..., half:], x32[..., :half]], dim=-1)
    return (x32 * cos + rotated * sin).to(x.dtype)


@dataclass(slots=True)
class _Captured:
    q: Any
    k: Any
    v: Any
    mask: Any
    cache: KVCache


@dataclass(slots=True, kw_only=True)
class VerificationAttention:
    """One attention layer that verifies draft tokens with the SDPA backend capmatrix selects.

    :raises NoImplementation: when no candidate of the role supports the layer's query.
    :raises capmatrix.engine.NoDevice: on a CUDA device whose SM cannot be read.
    """

    config: LayerConfig
    device: str = "cpu"
    dtype: str = "bf16"
    role: str | None = None
    matrix: Matrix | None = None
    seed: int = 0
    query: KernelQuery = field(init=False)
    selection: Selection = field(init=False)
    implementation: str = field(init=False)
    weights: dict[str, Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        import torch  # noqa: PLC0415

        dev = torch.device(self.device)
        axes: dict[str, Any] = {"dtype": self.dtype, "attn_mask": True, "causal": False,
                                "dropout": False}
        if dev.type == "cuda":
            axes["sm"] = detect_sm(dev)
            role = self.role or ROLE_CUDA
        else:
            role = self.role or ROLE_CPU
        cfg = self.config
        if cfg.is_mla:
            # SDPA sees the decompressed per-head K/V: an mha call with equal head sizes.
            axes.update(attention=ATTENTION_MHA, head_dim=cfg.head_dim, q_per_kv=1)
            query = KernelQuery(None, **axes)
        else:
            query = query_from_hf_config(cfg.hf_config(), matrix=self.matrix, **axes)
        self.query = query
        self.role = role
        # Fail at start when the role names a kernel this engine cannot run, whichever gets chosen.
        matrix = default_matrix() if self.matrix is None else self.matrix
        if role not in matrix.roles:
            raise UnknownName("role", role, matrix.roles)
        missing = [k for k in matrix.roles[role].candidates if k not in IMPLEMENTATIONS]
        if missing:
            raise NoImplementation(role, query, f"no implementation for candidates {missing}")
        self.selection = select(role, query, matrix)
        kernel = self.selection.kernel
        if kernel is None:
            raise NoImplementation(role, query, "every candidate is unsupported")
        self.implementation = IMPLEMENTATIONS[kernel]
        self.weights = self._init_weights(torch, dev)

    # -- weights and projections ----------------------------------------------------------------

    def _init_weights(self, torch: Any, dev: Any) -> dict[str, Any]:  # noqa: ANN401
        cfg = self.config
        gen = torch.Generator().manual_seed(self.seed)
        matrix = default_matrix() if self.matrix is None else self.matrix
        name = matrix.axes["dtype"].spelled(self.dtype, "torch.")  # torch's word: the axis's spelling
        if name is None:
            msg = f"dtype {self.dtype!r} has no torch spelling on the dtype axis (torch.NAME: {self.dtype})"
            raise ValueError(msg)
        dtype = getattr(torch, name)

        def linear(n_in: int, n_out: int) -> Any:  # noqa: ANN401
            w = torch.randn(n_in, n_out, generator=gen) / math.sqrt(n_in)
            return w.to(device=dev, dtype=dtype)

        h, d = cfg.num_heads, cfg.head_dim
        weights = {"wq": linear(cfg.hidden_size, h * d), "wo": linear(h * d, cfg.hidden_size)}
        if cfg.kv_lora_rank is not None and cfg.qk_rope_head_dim is not None:
            rope = cfg.qk_rope_head_dim
            weights["w_dkv"] = linear(cfg.hidden_size, cfg.kv_lora_rank)
            weights["w_kr"] = linear(cfg.hidden_size, rope)
            weights["w_uk"] = linear(cfg.kv_lora_rank, h * (d - rope))
            weights["w_uv"] = linear(cfg.kv_lora_rank, h * d)
        else:
            weights["wk"] = linear(cfg.hidden_size, cfg.num_kv_heads * d)
            weights["wv"] = linear(cfg.hidden_size, cfg.num_kv_heads * d)
        return weights

    def empty_cache(self, batch: int) -> KVCache:
        """A cache with no tokens."""
        import torch  # noqa: PLC0415

        cfg = self.config
        w = self.weights["wq"]
        if cfg.kv_lora_rank is not None and cfg.qk_rope_head_dim is not None:
            a = w.new_zeros(batch, 0, cfg.kv_lora_rank)
            b = w.new_zeros(batch, 0, cfg.qk_rope_head_dim)
        else:
            a = w.new_zeros(batch, cfg.num_kv_heads, 0, cfg.head_dim)
            b = torch.zeros_like(a)
        return KVCache(a=a, b=b)

    def _project(self, x: Any, cache: KVCache) -> _Captured:  # noqa: ANN401
        import torch  # noqa: PLC0415

        cfg = self.config
        w = self.weights
        batch, drafts, _ = x.shape
        past = cache.length
        positions = torch.arange(past, past + drafts, device=x.device)
        h, d = cfg.num_heads, cfg.head_dim
        q = (x @ w["wq"]).view(batch, drafts, h, d).transpose(1, 2)
        if cfg.kv_lora_rank is not None and cfg.qk_rope_head_dim is not None:
            rope = cfg.qk_rope_head_dim
            q = torch.cat([q[..., : d - rope], _rope(q[..., d - rope :], positions,
                                                     cfg.rope_theta)], dim=-1)
            latent = torch.cat([cache.a, x @ w["w_dkv"]], dim=1)
            k_rope = torch.cat([cache.b, _rope(x @ w["w_kr"], positions, cfg.rope_theta)], dim=1)
            total = latent.shape[1]
            k_nope = (latent @ w["w_uk"]).view(batch, total, h, d - rope).transpose(1, 2)
            shared = k_rope[:, None].expand(batch, h, total, rope)  # one RoPE key for every head
            k = torch.cat([k_nope, shared], dim=-1)
            v = (latent @ w["w_uv"]).view(batch, total, h, d).transpose(1, 2)
            new_cache = KVCache(a=latent, b=k_rope)
        else:
            kvh = cfg.num_kv_heads
            q = _rope(q, positions, cfg.rope_theta)
            k_new = (x @ w["wk"]).view(batch, drafts, kvh, d).transpose(1, 2)
            v_new = (x @ w["wv"]).view(batch, drafts, kvh, d).transpose(1, 2)
            k = torch.cat([cache.a, _rope(k_new, positions, cfg.rope_theta)], dim=2)
            v = torch.cat([cache.b, v_new], dim=2)
            new_cache = KVCache(a=k, b=v)
        mask = verification_mask(past, drafts, device=x.device)
        return _Captured(q=q, k=k, v=v, mask=mask, cache=new_cache)

    # -- paged cache ----------------------------------------------------------------------------

    def _token_major(self, cache: KVCache) -> tuple[Any, Any]:
        """The cache as (batch, tokens, *features) tensors."""
        if self.config.is_mla:
            return cache.a, cache.b
        return cache.a.transpose(1, 2), cache.b.transpose(1, 2)

    def _from_token_major(self, a: Any, b: Any) -> KVCache:  # noqa: ANN401
        if self.config.is_mla:
            return KVCache(a=a, b=b)
        return KVCache(a=a.transpose(1, 2).contiguous(), b=b.transpose(1, 2).contiguous())

    def empty_paged_cache(
        self, batch: int, *, blocks: int, tokens_per_block: int, order: list[int] | None = None
    ) -> PagedKVCache:
        """A paged cache with ``blocks`` free blocks, handed out in ``order`` (default: ascending)."""
        a, b = self._token_major(self.empty_cache(1))
        pool_a = a.new_zeros(blocks, tokens_per_block, *a.shape[2:])
        pool_b = b.new_zeros(blocks, tokens_per_block, *b.shape[2:])
        free = list(range(blocks)) if order is None else list(order)
        return PagedKVCache(tokens_per_block=tokens_per_block, pool_a=pool_a, pool_b=pool_b,
                            tables=[[] for _ in range(batch)], free=free)

    def gather(self, paged: PagedKVCache) -> KVCache:
        """The contiguous view of a paged cache (what the SDPA call reads)."""
        import torch  # noqa: PLC0415

        n = paged.length
        rows_a, rows_b = [], []
        for table in paged.tables:
            index = torch.tensor(table, dtype=torch.long, device=paged.pool_a.device)
            rows_a.append(paged.pool_a[index].flatten(0, 1)[:n])
            rows_b.append(paged.pool_b[index].flatten(0, 1)[:n])
        return self._from_token_major(torch.stack(rows_a), torch.stack(rows_b))

    def forward_paged(self, x: Any, paged: PagedKVCache) -> Any:  # noqa: ANN401
        """Verify ``x`` over a paged cache, writing the new tokens into its blocks; return the output.

        :raises MemoryError: when the pool has too few free blocks.
        """
        out, grown = self.forward(x, self.gather(paged))
        new_a, new_b = self._token_major(grown)
        start, end = paged.length, grown.length
        need = paged.blocks_for(end)
        for table in paged.tables:
            while len(table) < need:
                if not paged.free:
                    raise MemoryError("the paged KV cache has no free block left")
                table.append(paged.free.pop(0))
        block = paged.tokens_per_block
        for seq, table in enumerate(paged.tables):
            for pos in range(start, end):
                slot = table[pos // block]
                paged.pool_a[slot, pos % block] = new_a[seq, pos]
                paged.pool_b[slot, pos % block] = new_b[seq, pos]
        paged.length = end
        return out

    # -- attention ------------------------------------------------------------------------------

    def attention(self, q: Any, k: Any, v: Any, mask: Any) -> Any:  # noqa: ANN401
        """Run the selected SDPA backend (forced with sdpa_kernel) on (B, H, T, D) tensors."""
        import torch  # noqa: PLC0415
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415

        backend = getattr(SDPBackend, self.implementation)
        with sdpa_kernel([backend]):
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, enable_gqa=q.shape[1] != k.shape[1]
            )

    def forward(self, x: Any, cache: KVCache) -> tuple[Any, KVCache]:  # noqa: ANN401
        """Verify the draft tokens ``x`` (B, k, hidden) against ``cache``; return output and new cache."""
        cap = self._project(x, cache)
        out = self.attention(cap.q, cap.k, cap.v, cap.mask)
        batch, _, drafts, _ = out.shape
        merged = out.transpose(1, 2).reshape(batch, drafts, -1)
        return merged @ self.weights["wo"], cap.cache

    def trace(self) -> list[dict[str, object]]:
        """Why the kernel was chosen: each candidate tried, its verdict and the rules behind it."""
        return [
            {
                "kernel": r.kernel,
                "verdict": str(r.verdict),
                "reasons": [reason.message for reason in r.reasons
                            if reason.kind in ("grant", "exclude", "mismatch")],
            }
            for r in self.selection.trace
        ]


def check_against_naive(
    layer: VerificationAttention, x: Any, cache: KVCache  # noqa: ANN401
) -> dict[str, object]:
    """Compare the layer's attention for ``x`` over ``cache`` with :func:`naive_attention`.

    Returns ``kernel``, ``implementation``, ``max_abs_error``, ``tolerance`` and ``ok``.
    """
    cap = layer._project(x, cache)  # noqa: SLF001 - the check needs the very tensors the layer uses
    got = layer.attention(cap.q, cap.k, cap.v, cap.mask)
    want = naive_attention(cap.q, cap.k, cap.v, cap.mask)
    err = float((got.to(want.dtype) - want).abs().max())
    tol = TOLERANCE[layer.dtype]
    return {
        "kernel": layer.selection.kernel,
        "implementation": layer.implementation,
        "max_abs_error": err,
        "tolerance": tol,
        "ok": err <= tol,
    }


def check_against_sequential(
    layer: VerificationAttention, x: Any, cache: KVCache  # noqa: ANN401
) -> dict[str, object]:
    """Compare one multi-token verification of ``x`` with decoding its tokens one at a time.

    Speculative verification is only right when each draft sees exactly what it would have seen in
    plain decoding; this checks the layer's outputs and final caches for that.
    """
    import torch  # noqa: PLC0415

    together, cache_together = layer.forward(x, cache)
    outputs = []
    step = cache
    for i in range(x.shape[1]):
        out, step = layer.forward(x[:, i : i + 1], step)
        outputs.append(out)
    one_by_one = torch.cat(outputs, dim=1)
    err = float((together.to(torch.float64) - one_by_one.to(torch.float64)).abs().max())
    cache_err = float((cache_together.a.to(torch.float64) - step.a.to(torch.float64)).abs().max())
    # GEMMs over k rows and over one row may round differently: compare within the dtype tolerance,
    # relative to the size of the values.
    scale = float(one_by_one.to(torch.float64).abs().max()) or 1.0
    tol = TOLERANCE[layer.dtype] * max(1.0, scale)
    cache_scale = float(step.a.to(torch.float64).abs().max()) or 1.0
    cache_tol = TOLERANCE[layer.dtype] * max(1.0, cache_scale)
    return {
        "max_abs_error": err,
        "cache_max_abs_error": cache_err,
        "tolerance": tol,
        "cache_tolerance": cache_tol,
        "ok": err <= tol and cache_err <= cache_tol,
    }
