"""vLLM's CUDA attention-backend choice (0.33.0), answered from the matrix's ``vllm_attention`` role.

The arguments map to axes; the priority lists, the validity of each backend and every default live in
the YAML (role ``vllm_attention``, kernels ``vllm_<backend>``). Backend names map to kernels by
spelling: ``FLASH_ATTN`` is ``vllm_flash_attn``.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from capmatrix._default import _resolver
from capmatrix.errors import CapmatrixError
from capmatrix.query import KernelQuery

if TYPE_CHECKING:
    from collections.abc import Mapping

    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue
    from capmatrix.resolver import Resolution, Resolver

__all__ = ["ROLE", "NoValidBackend", "backend_order", "select_backend"]

#: The role that holds vLLM's priority lists.
ROLE = "vllm_attention"
_PREFIX = "vllm_"
#: Answers per compiled matrix (gone with it), at most this many each.
_MEMO_SIZE = 4096
_MEMO: weakref.WeakKeyDictionary[Resolver, dict[tuple[object, ...], str]] = weakref.WeakKeyDictionary()
_DTYPES = {"fp16": "fp16", "float16": "fp16", "half": "fp16", "bf16": "bf16", "bfloat16": "bf16",
           "fp32": "fp32", "float32": "fp32", "float": "fp32"}


class NoValidBackend(CapmatrixError, ValueError):
    """No backend is valid, or the forced one is not.

    ``reasons`` maps each rejected backend, in vLLM's priority order, to the matrix's reasons
    (explained when first read).
    """

    def __init__(self, message: str, rejected: tuple[Resolution, ...]) -> None:
        super().__init__(message)
        self.rejected = rejected
        self._reasons: dict[str, tuple[str, ...]] | None = None

    @property
    def backends(self) -> tuple[str, ...]:
        """The rejected backends, in vLLM's priority order."""
        return tuple(_backend(r.kernel) for r in self.rejected)

    @property
    def reasons(self) -> dict[str, tuple[str, ...]]:
        """Each rejected backend's reasons, in vLLM's priority order."""
        if self._reasons is None:
            self._reasons = {_backend(r.kernel): tuple(str(x) for x in r.reasons) for r in self.rejected}
        return self._reasons


def _backend(kernel: str) -> str:
    return kernel[len(_PREFIX):].upper()


def _query(
    capability: tuple[int, int], head_size: int, dtype: str, kv_cache_dtype: str, block_size: int | None,
    flags: tuple[bool, bool, bool], extra: Mapping[str, AxisValue] | None,
) -> KernelQuery:
    use_mla, use_sparse, has_sink = flags
    axes: dict[str, AxisValue] = {
        "sm": capability[0] * 10 + capability[1],
        "head_dim": head_size,
        "dtype": _DTYPES.get(dtype.removeprefix("torch."), dtype),
        "vllm_kv_cache_dtype": kv_cache_dtype,
        "attention": "mla" if use_mla else "gqa",
        "use_sparse": use_sparse,
        "attention_sinks": has_sink,
    }
    if block_size is not None:
        axes["block_size"] = block_size
    if not extra:  # the common case: one query built, no copy
        return KernelQuery(None, **axes)  # type: ignore[arg-type] # axes never holds kernel or model
    return KernelQuery().replace(**{**axes, **extra})


def select_backend(
    *,
    capability: tuple[int, int],
    head_size: int,
    dtype: str,
    kv_cache_dtype: str,
    block_size: int | None,
    use_mla: bool,
    use_sparse: bool = False,
    has_sink: bool = False,
    selected: str | None = None,
    extra: Mapping[str, AxisValue] | None = None,
    matrix: Matrix | None = None,
) -> str:
    """The ``AttentionBackendEnum`` name vLLM 0.33.0 picks (or validates, when ``selected``).

    ``extra`` gives other axes of the matrix (environment axes such as ``vllm_b12x``, model axes such
    as ``vllm_mla_heads``, ``use_mm_prefix``, ``use_non_causal``); left out, they take their defaults.

    :raises NoValidBackend: when no backend is valid, or the selected one is not.
    """
    resolver = _resolver(matrix)
    # vLLM memoises its selector (``functools.cache`` on the selector config) and an engine asks again
    # for every layer, so a chosen backend is remembered per argument tuple and compiled matrix.
    # Types are part of the key: ``True`` and ``1`` hash alike, but only one of them is a valid value.
    # Refusals are not kept: they end the engine's start, and their reasons hold the resolver.
    key = (capability, head_size, type(head_size), dtype, kv_cache_dtype, block_size, type(block_size),
           use_mla, use_sparse, type(use_sparse), has_sink, type(has_sink), selected,
           None if not extra else tuple(sorted((k, v, type(v)) for k, v in extra.items())))
    memo = _MEMO.get(resolver)
    if memo is None:
        memo = _MEMO.setdefault(resolver, {})
    known = memo.get(key)
    if known is not None:
        return known
    query = _query(capability, head_size, dtype, kv_cache_dtype, block_size,
                   (use_mla, use_sparse, has_sink), extra)
    if selected is not None:
        resolution = resolver.resolve(query.with_kernel(_PREFIX + selected.lower()))
        if not resolution:
            raise NoValidBackend(f"Selected backend {selected} is not valid for this configuration.",
                                 (resolution,))
        known = selected
    else:
        selection = resolver.select(ROLE, query)
        if selection.kernel is None:
            raise NoValidBackend("No valid attention backend found.", selection.trace)
        known = _backend(selection.kernel)
    if len(memo) >= _MEMO_SIZE:
        memo.clear()
    memo[key] = known
    return known


def backend_order(
    *,
    capability: tuple[int, int],
    head_size: int,
    dtype: str,
    kv_cache_dtype: str,
    block_size: int | None,
    use_mla: bool,
    use_sparse: bool = False,
    has_sink: bool = False,
    extra: Mapping[str, AxisValue] | None = None,
    matrix: Matrix | None = None,
) -> tuple[str, ...]:
    """The priority list vLLM walks for the query (``_get_backend_priorities``), from the role's orders."""
    query = _query(capability, head_size, dtype, kv_cache_dtype, block_size,
                   (use_mla, use_sparse, has_sink), extra)
    resolver = _resolver(matrix)
    candidates, _decided = resolver.matrix.roles[ROLE].order_for(resolver.derived_values(query))
    return tuple(_backend(k) for k in candidates)
