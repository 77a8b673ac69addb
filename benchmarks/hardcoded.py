"""The baseline: TensorRT-LLM's after-fix spec-dec conditional, written the way the engine writes it.

The shape follows release 1.2 after PR #10765 (the project's conditional notes P1, P8, P9): an
``lru_cache``d ``get_sm_version()``, an ``is_mla`` flag passed in per call, ``issubclass`` on the attention
backend class, and the two use cases of ``attention_need_spec_dec_mode``. This is a re-statement for
timing, not a copy; the device is simulated, so it runs without a GPU.
"""

from __future__ import annotations

import enum
from functools import lru_cache

__all__ = [
    "FlashInferAttention",
    "SpecDecodingMode",
    "SpecResourceManager",
    "TrtllmAttention",
    "VanillaAttention",
    "get_sm_version",
    "set_device_sm",
]

_DEVICE = {"sm": 120}


class AttentionBackend:
    """Base class of the attention backends (the engine tests the class, not an instance)."""


class TrtllmAttention(AttentionBackend):
    """The TRTLLM backend."""


class FlashInferAttention(AttentionBackend):
    """The FlashInfer backend."""


class VanillaAttention(AttentionBackend):
    """The vanilla (PyTorch) backend."""


BACKENDS: dict[str, type[AttentionBackend]] = {
    "trtllm": TrtllmAttention,
    "flashinfer": FlashInferAttention,
    "vanilla": VanillaAttention,
}


@lru_cache(maxsize=1)
def get_sm_version() -> int:
    """Compute capability of device 0 as major*10+minor, cached for the process (simulated device)."""
    major, minor = divmod(_DEVICE["sm"], 10)  # stands in for torch.cuda.get_device_properties(0)
    return major * 10 + minor


def set_device_sm(sm: int) -> None:
    """Pretend the device has compute capability ``sm`` (and forget the cached answer)."""
    _DEVICE["sm"] = sm
    get_sm_version.cache_clear()


class SpecResourceManager:
    """The part of the spec-dec resource manager the decision reads."""

    __slots__ = ("is_first_draft",)

    def __init__(self, *, is_first_draft: bool) -> None:
        self.is_first_draft = is_first_draft


class SpecDecodingMode(enum.IntEnum):
    """Speculative-decoding modes; the first three run draft and target in one engine."""

    MTP = enum.auto()
    MTP_EAGLE_ONE_MODEL = enum.auto()
    EAGLE3_ONE_MODEL = enum.auto()
    EAGLE3 = enum.auto()
    DRAFT_TARGET = enum.auto()
    NGRAM = enum.auto()
    NONE = enum.auto()

    def use_one_engine(self) -> bool:
        """Draft and target run in one engine."""
        return self in (
            SpecDecodingMode.MTP,
            SpecDecodingMode.MTP_EAGLE_ONE_MODEL,
            SpecDecodingMode.EAGLE3_ONE_MODEL,
        )

    def attention_need_spec_dec_mode(
        self,
        spec_resource_manager: SpecResourceManager | None,
        is_draft_model: bool,
        attention_backend: type[AttentionBackend],
        use_chain_drafter: bool,
        is_mla: bool,
    ) -> bool:
        """Whether the attention of this pass asks for the multi-token (spec-dec) query mode."""
        is_trtllm_attention = issubclass(attention_backend, TrtllmAttention)
        # XQA has no multi-token MLA kernels on SM120/121; every other attention type keeps them.
        xqa_supported = not is_mla or get_sm_version() < 120
        use_case_1 = self.use_one_engine() and xqa_supported
        use_case_2 = (
            not self.use_one_engine()
            and (
                not is_draft_model
                or (
                    spec_resource_manager is not None
                    and spec_resource_manager.is_first_draft
                    and use_chain_drafter
                )
            )
            and is_trtllm_attention
        )
        return use_case_1 or use_case_2


#: A representative mode for each value of the ``spec_dec`` axis that turns spec-dec on.
MODES: dict[str, SpecDecodingMode] = {
    "one_model": SpecDecodingMode.MTP,
    "two_model": SpecDecodingMode.DRAFT_TARGET,
}
