"""Record vLLM's CUDA attention-backend selection over a grid, as evidence for capmatrix (0.33.0, 0.34.0).

The record (``capabilities/evidence/vllm_<version>_selection.json``; 0.33.0's is what the matrix's vLLM
engine is tested against) is made per release: ``--vllm-src`` names the unpacked sources of either, the
version is read from their ``vllm/_version.py`` and ``RELEASES`` holds each release's pin and what it adds
(see "Releases" below). It is made by running vLLM's *own* selection code from the release wheel, on
CPU:
``vllm.v1.attention.selector.get_attn_backend`` (which calls
``CudaPlatformBase.get_attn_backend_cls`` and ``get_valid_backends`` in ``vllm/platforms/cuda.py``
and every backend's ``validate_configuration``), once per grid cell with no backend forced and once
per forced backend (vLLM validates a forced backend alone, with no fallback). The answers are either
the chosen ``AttentionBackendEnum`` name or the per-backend rejection reasons, in vLLM's priority order.

Pins (``RELEASES``), each with torch 2.13.0 (CPU build):

=======  =========  ================================================================  ===========
vllm     commit     wheel sha256 (``vllm-<v>-cp38-abi3-manylinux_2_28_x86_64.whl``)    flashinfer
=======  =========  ================================================================  ===========
0.33.0   4ba787ec9  4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa  0.7.2.post1
0.34.0   62d4bc3c7  79ca4b3cd74aec08c4bf476bdf0cb15735b605ae5368526a2faae1e30f044ca2  0.7.4 (*)
=======  =========  ================================================================  ===========

(*) The 0.34.0 wheel pins flashinfer-python==0.7.3, which PyPI does not serve (its versions go from
0.7.2.post1 to 0.7.4). 0.34.0 was recorded with both neighbours; grid and sample came out identical but
for the version string, so the selection reads the same from 0.7.2.post1 and 0.7.4, and 0.7.3 between
them. The tool checks the vLLM and flashinfer versions it imports and refuses others.

Regenerate (outside the repository; nothing downloaded is committed)::

    pip download vllm==0.33.0 --no-deps -d /work/dl
    pip download flashinfer-python==0.7.2.post1 --no-deps -d /work/dl
    mkdir -p /work/dl/vllm-0.33.0
    unzip -q /work/dl/vllm-0.33.0-*.whl 'vllm/*' 'vllm-0.33.0.dist-info/*' -x '*.so' -d /work/dl/vllm-0.33.0
    python3 -m venv /work/dl/venv
    /work/dl/venv/bin/pip install torch==2.13.0 \
        packaging numpy regex cachetools psutil pydantic msgspec pyyaml cloudpickle requests tqdm \
        typing_extensions filelock cbor2 blake3 'transformers>=5.16.1,<5.21.0' huggingface_hub pybase64 \
        pyzmq prometheus_client einops py-cpuinfo pillow setproctitle ijson python-json-logger \
        sentencepiece aiohttp openai_harmony openai uvloop xgrammar fastapi partial_json_parser \
        llguidance apache-tvm-ffi==0.1.11 click tabulate nvidia-ml-py ninja
    /work/dl/venv/bin/pip install --no-deps /work/dl/flashinfer_python-0.7.2.post1-py3-none-any.whl
    /work/dl/venv/bin/python tools/record_vllm_selection.py \
        --vllm-src /work/dl/vllm-0.33.0 --out capabilities/evidence/vllm_0.33.0_selection.json

0.34.0 likewise, with two more light packages its forced KIMI_K3_KV_BALANCED_MLA reaches (its module
lives in ``vllm.models.kimi_k3``, whose package imports the model) and flashinfer 0.7.4 first on the path::

    pip download vllm==0.34.0 flashinfer-python==0.7.4 --no-deps -d /work/dl
    unzip -q /work/dl/vllm-0.34.0-*.whl 'vllm/*' 'vllm-0.34.0.dist-info/*' -x '*.so' -d /work/dl/vllm-0.34.0
    /work/dl/venv/bin/pip install loguru && /work/dl/venv/bin/pip install --no-deps compressed-tensors==0.17.0
    /work/dl/venv/bin/pip install --no-deps --target /work/dl/fi-0.7.4 \
        /work/dl/flashinfer_python-0.7.4-py3-none-any.whl
    PYTHONPATH=/work/dl/fi-0.7.4 /work/dl/venv/bin/python tools/record_vllm_selection.py \
        --vllm-src /work/dl/vllm-0.34.0 --out capabilities/evidence/vllm_0.34.0_selection.json
    PYTHONPATH=/work/dl/fi-0.7.4 /work/dl/venv/bin/python tools/record_vllm_selection.py \
        --vllm-src /work/dl/vllm-0.34.0 --sample 1000 --seed 20260334 \
        --out capabilities/evidence/vllm_0.34.0_sample.json.gz

With two workers the 0.33.0 grid takes about a minute and its sample a minute and a half; 0.34.0's grid
about three minutes and its sample about four (b12x and the checkpoint's KV dtype are recorded too).

(The light packages above are only what vLLM's import chain reaches; none of them takes part in the
selection. The tool checks the vLLM and flashinfer versions it imported and refuses others.)

What is stubbed, and why (everything else is vLLM's and flashinfer's real Python code):

* Native extension modules of the wheel (``vllm._C_stable_libtorch``, ``vllm._qutlass_C`` (0.33.0
  only: the 0.34.0 wheel has none), ``vllm._moe_C_stable_libtorch``, ``vllm._flashmla_C``,
  ``vllm._flashmla_extension_C``,
  ``vllm.vllm_flash_attn._vllm_fa2_C``, ``vllm.vllm_flash_attn._vllm_fa3_C``, ``vllm.cumem_allocator``):
  CUDA shared objects that cannot load without a GPU driver. They are replaced by empty modules, so
  that the import probes vLLM runs (``FA2_AVAILABLE``, ``FA3_AVAILABLE``, ``_flashmla_C_AVAILABLE``,
  ...) see them as built, as they are in the shipped wheel. Selection never calls into them.
* ``vllm.vllm_flash_attn.cute.interface`` (FA4): its import chain needs the CUTLASS DSL and a GPU.
  vLLM's FA4 availability check only tests that the file exists (it does, in the wheel); the sparse
  FA4 MLA backend additionally imports ``_flash_attn_fwd`` from it, so a stub module provides the
  names vLLM imports from it (each raises if called): FlashAttention 4 is built, as in the wheel.
* ``tokenspeed_mla``: a dependency of the wheel (``tokenspeed-mla==2.0.3``) whose import loads CUDA
  code; ``TOKENSPEED_MLA`` only checks that it imports, so an empty module stands for "installed".
* ``flashinfer_cubin``: models "flashinfer usable with its cubins". vLLM's
  ``has_flashinfer_cubin()`` looks it up with ``importlib.util.find_spec``; with it present,
  ``has_nvidia_artifactory()`` is true without any network access, and so is
  ``supports_trtllm_attention()`` on SM90 (decode), SM10x (both phases) and SM12x (decode).
  ``flashinfer`` itself is the real flashinfer-python 0.7.2.post1 package (its feature probes,
  e.g. ``has_flashinfer_sm90_nope_mla`` and ``has_flashinfer_sparse_mla_sm120``, run for real).
* ``b12x`` is not installed (the defaults say so). flashinfer-python 0.7.x embeds a top-level
  ``b12x`` package that ``vllm/utils/b12x.py`` would otherwise find with ``find_spec``; the recorder
  hides it (``sys.modules["b12x"] = None``), so ``B12X`` is recorded as vLLM rejects it without b12x.
  Where a release lists ``b12x_capabilities`` (0.34.0: 12.0 and 12.1, the only ones B12X accepts), those
  capabilities are recorded a second time with b12x installed: stub modules ``b12x``,
  ``b12x.attention`` and ``b12x.attention.paged``, whose ``is_supported()`` answers b12x's own gate
  (``is_b12x``: the device is 12.0 or 12.1; b12x 1.5.1 ``_lib/gating.py``:28-31, 89-95, the same file
  in flashinfer 0.7.4's embedded copy; its CUTLASS DSL and triton requirements are the package's own
  dependencies). The tool checks that b12x installed changes B12X's verdict and nothing else, and keeps
  B12X's verdict (``b12x_installed`` in the grid, ``answer.b12x_installed`` in the sample). Note that a
  plain vLLM install is the installed case more often than not: flashinfer-python, a dependency of the
  wheel, ships the ``b12x`` shim and requires cuda-python and nvidia-cutlass-dsl, which its
  ``b12x.attention.paged`` imports.
* Compiled capability probes called at import time (``Release.import_time_ops``, 0.34.0 only):
  KIMI_K3_KV_BALANCED_MLA's module lives in ``vllm.models.kimi_k3``, whose package imports the Kimi K3
  model and with it ``w8a8_utils.py``, which asks ``torch.ops._C.cutlass_scaled_mm_supports_block_fp8``
  at import (``CUTLASS_BLOCK_FP8_SUPPORTED``, a GEMM choice). The stubbed ``_C`` registers no op, so the
  recorder defines that op to answer False; selection never reads it.
* The platform: ``vllm.platforms.current_platform`` is a subclass of vLLM's ``NvmlCudaPlatform``
  whose ``get_device_capability`` returns the capability under test (all of vLLM's
  ``has_device_capability`` / ``is_device_capability`` / ``is_device_capability_family`` checks go
  through it), whose device name is fixed and whose ``num_compute_units`` returns 148 (read only when
  ``cutlass_mla`` is imported). One worker process per capability, as on a real machine, so that
  vLLM's per-process ``functools.cache`` results (``supports_trtllm_attention``, ...) stay valid.
* CUDA allocations at import time (``cutlass_mla`` allocates its workspace when imported) are made
  on PyTorch's ``meta`` device while backend classes are imported; selection never reads them.
* The model: vLLM reads the current ``VllmConfig`` during selection (FlashAttention's and
  FlashInfer's block sizes, FlashInfer MLA's and the sparse backends' geometry checks, the FA4
  fallbacks). The tool runs every cell inside ``set_current_vllm_config`` with vLLM's default
  ``VllmConfig()`` (no overrides: ``AttentionConfig()`` defaults, no batch invariance, no context
  parallelism, no KV connector, no speculative decoding) whose ``cache_config`` carries the cell's
  KV-cache dtype and block size (``user_specified_block_size`` only when the cell has one) and whose
  ``model_config`` is a small stand-in (``_ModelStandIn``) for a model of the default geometry:
  non-MLA, 32 query and 8 KV heads per GPU, the cell's head size, no soft-cap; MLA, DeepSeek-V3
  (128 heads per GPU, qk_nope 128, qk_rope 64, v 128, kv_lora_rank 512, ``index_topk`` 2048 when
  sparse). A read of any model attribute the stand-in does not model raises, so an unmodelled input
  cannot pass silently.
* Environment: every ``VLLM_*`` variable is removed from the workers' environment (vLLM's defaults).
* A cell without a block size sets ``cache_config.block_size`` to vLLM's ``CacheConfig.DEFAULT_BLOCK_SIZE``
  (16 in 0.33.0, 64 in 0.34.0) with ``user_specified_block_size`` false; selection then gets no block
  size (``selector.py`` passes one only when the user gave it).

Releases: what a later release adds to the record, only where that release reads it.

* 0.34.0: the members FLASHINFER_TS and KIMI_K3_KV_BALANCED_MLA are forced too (no automatic list has
  them); capability 10.7 joins the grid and the sample (FLASHINFER_TS lists it, flashinfer_ts.py:64);
  and the model layers' own code decides two inputs (``layer_front``): ``Attention.__init__``
  (attention.py:297-300) replaces ``--kv-cache-dtype auto`` with the checkpoint's KV-cache dtype
  (``quant_config.get_kv_cache_dtype(prefix)``), leaving ``CacheConfig.cache_dtype`` ``auto``, and
  ``MLAAttention.__init__`` (mla_attention.py:517-541) now passes its sliding window to selection and
  refuses a sliding window with ``fp8_ds_mla`` / ``nvfp4_ds_mla`` before asking. The recorder builds
  the layer (vLLM's ``__init__``, with ``get_attn_backend`` replaced by a stop and a stand-in
  quantization config that answers only ``get_kv_cache_dtype``) and asks selection with what the layer
  passes. The grid's ``checkpoint_kv`` section holds every cell of a quantized KV dtype once more with
  that dtype from the checkpoint; the sample draws ``kv_from_checkpoint`` and records ``answer.layer``.

The grid: capability {8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 12.0, 12.1} (0.34.0: and 10.7) x head size
{64, 80, 96, 128, 192,
256, 576} x dtype {fp16, bf16, fp32} x KV-cache dtype {auto, fp8, fp8_e4m3, fp8_e5m2} x block size
{16, 32, 64, 128, none} x (non-MLA, MLA dense, MLA sparse) x sinks {no, yes}; for each cell the
automatic choice and every backend of ``FORCED`` forced. ``num_heads`` is passed as the MLA layer
passes it (128) and left out for non-MLA layers, as the attention layer does.

The sample (``--sample N``): N configurations per capability of ``SAMPLE_CAPABILITIES`` (7.0 to 12.1,
10.1, 10.3 and 11.0 included), drawn from a seed over head sizes on and off every list, all 22 KV-cache
spellings, every block-size class, dense and sparse MLA, sinks, the multimodal prefix, non-causal
attention, a sliding window and forced spellings (any case, ``auto``, the MiniMax aliases) passed through
vLLM's own ``AttentionConfig``. Written as gzipped JSON lines to
``capabilities/evidence/vllm_<version>_sample.json.gz``; docs/vllm-differential.md gives its design.
Each release draws from its own seed (``RELEASES``: 0.33.0 20260333, 0.34.0 20260334); 0.33.0's draw is
unchanged (tests/test_engine_vllm_sample.py re-draws it).

``--members`` forces every member of ``AttentionBackendEnum`` the record does not force on a few
configurations (``MEMBER_CONFIGS``) per capability and writes what vLLM answers (a class, a refusal, or
an exception) as JSON.

The tool runs vLLM and so is not part of ``make test``; the tests read the records it wrote.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import random
import subprocess
import sys
import types
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

FORMAT = "capmatrix-vllm-selection/1"
#: The release recorded when none is named (the one the matrix models); see ``RELEASES``.
VLLM_VERSION = "0.33.0"
VLLM_COMMIT = "4ba787ec9"
VLLM_WHEEL = "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"
FLASHINFER_VERSION = "0.7.2.post1"

CAPABILITIES: tuple[tuple[int, int], ...] = (
    (8, 0),
    (8, 6),
    (8, 9),
    (9, 0),
    (10, 0),
    (10, 3),
    (12, 0),
    (12, 1),
)
HEAD_SIZES: tuple[int, ...] = (64, 80, 96, 128, 192, 256, 576)
DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp32")
KV_CACHE_DTYPES: tuple[str, ...] = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
BLOCK_SIZES: tuple[int | None, ...] = (16, 32, 64, 128, None)
# (use_mla, use_sparse): sparse attention exists only for MLA layers.
ATTENTION_KINDS: tuple[tuple[bool, bool], ...] = ((False, False), (True, False), (True, True))
SINKS: tuple[bool, ...] = (False, True)

# Every CUDA backend in vLLM's automatic lists (``_get_backend_priorities``), then the explicit-only B12X.
FORCED: tuple[str, ...] = (
    "FLASH_ATTN",
    "FLASHINFER",
    "TRITON_ATTN",
    "FLEX_ATTENTION",
    "TURBOQUANT",
    "TRITON_FLASHINFER",
    "TRITON_FLASH_ATTN",
    "FLASHINFER_MLA",
    "TOKENSPEED_MLA",
    "CUTLASS_MLA",
    "FLASH_ATTN_MLA",
    "FLASHMLA",
    "TRITON_MLA",
    "FLASHINFER_MLA_SPARSE",
    "FLASHMLA_SPARSE",
    "FLASH_ATTN_MLA_SPARSE_FA4",
    "FLASHINFER_MLA_SPARSE_SM120",
    "FLASH_ATTN_MLA_SPARSE",
    "FLASHINFER_MLA_SPARSE_SM90",
    "B12X",
)

NON_MLA_MODEL: dict[str, int | None] = {"num_attention_heads": 32, "num_kv_heads": 8, "soft_cap": None}
MLA_MODEL: dict[str, int] = {
    "num_attention_heads": 128,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "kv_lora_rank": 512,
    "index_topk_when_sparse": 2048,
}
DEFAULTS = {
    "flash_attn_versions_built": [2, 3, 4],
    "flashmla_built": True,
    "flashinfer": FLASHINFER_VERSION,
    "flashinfer_cubin": True,
    "tokenspeed_mla_installed": True,
    "b12x_installed": False,
    "attention_config": "AttentionConfig() defaults (no backend, flash_attn_version, use_trtllm_attention)",
    "batch_invariant": False,
    "context_parallel": False,
    "kv_connector": False,
    "use_mm_prefix": False,
    "use_per_head_quant_scales": False,
    "attn_type": "decoder",
    "has_sliding_window": False,
    "use_non_causal": False,
    "non_mla_model": NON_MLA_MODEL,
    "mla_model": MLA_MODEL,
}

NATIVE_STUBS = (
    "vllm._C_stable_libtorch",
    "vllm._qutlass_C",
    "vllm._moe_C_stable_libtorch",
    "vllm._flashmla_C",
    "vllm._flashmla_extension_C",
    "vllm.cumem_allocator",
    "vllm.vllm_flash_attn._vllm_fa2_C",
    "vllm.vllm_flash_attn._vllm_fa3_C",
)
PACKAGE_STUBS = ("tokenspeed_mla", "flashinfer_cubin")
FA4_INTERFACE = "vllm.vllm_flash_attn.cute.interface"
TORCH_DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}

SAMPLE_FORMAT = "capmatrix-vllm-sample/1"
HALF = 0.5
SAMPLE_SEED = 20260333
#: Records per capability worker (``--sample``).
SAMPLE_PER_CAPABILITY = 600
#: Every compute capability vLLM 0.33.0's CUDA code tells apart (majors 7 to 12, the minors devices report).
SAMPLE_CAPABILITIES: tuple[tuple[int, int], ...] = (
    (7, 0), (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0),
    (10, 0), (10, 1), (10, 3), (11, 0), (12, 0), (12, 1),
)
#: Head sizes on every backend's list and off all of them (odd multiples of 8, between the lists, above 256).
SAMPLE_HEAD_SIZES: tuple[int, ...] = (
    24, 32, 40, 48, 64, 72, 80, 96, 100, 112, 128, 136, 160, 192, 200, 224, 256, 264, 320, 384, 512, 576, 640,
)
#: vLLM 0.33.0's CacheDType (vllm/config/cache.py), every spelling.
SAMPLE_KV_CACHE_DTYPES: tuple[str, ...] = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc", "octave_k3v4",
    "octave_k3v3", "octave_k3v3_compact", "ultraquant_4bit", "int4_per_token_head", "int8_per_token_head",
    "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
)
#: Block-size classes: unset, below 16, not a multiple of 16, and multiples of 16, 32, 64, 128 and 256.
SAMPLE_BLOCK_SIZES: tuple[int | None, ...] = (None, 1, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)
#: Forced spellings beyond the enum names of ``FORCED``: automatic selection and the MiniMax aliases that
#: AttentionConfig resets to automatic (vllm/config/attention.py:172-181, :219-229).
SAMPLE_FORCED_EXTRA: tuple[str, ...] = ("auto", "AUTO", "Auto", "CUTLASS_MSA", "triton_msa")
#: 0.34.0 and later: the share of drawn records whose KV-cache dtype comes from the checkpoint's
#: quantization config (``QuantizationConfig.get_kv_cache_dtype``) rather than ``--kv-cache-dtype``.
SAMPLE_CHECKPOINT_KV = 0.25


# --------------------------------------------------------------------------------------------- releases


@dataclass(frozen=True)
class Release:
    """What differs between the vLLM releases the tool records (``RELEASES``).

    ``flashinfer`` is the flashinfer-python the tool records with; ``flashinfer_pin`` the one the
    release's METADATA pins (``Requires-Dist``), when that one could not be had. ``layer_front``: record
    what the model's attention layers pass to the selector (``Attention.__init__`` and
    ``MLAAttention.__init__`` run up to their ``get_attn_backend`` call), for the inputs the release
    reads there (0.34.0: the checkpoint's KV-cache dtype, the MLA layer's sliding window).
    ``b12x_capabilities``: capabilities recorded a second time with b12x installed.
    """

    version: str
    commit: str
    wheel: str
    wheel_sha256: str
    flashinfer: str
    native_stubs: tuple[str, ...]
    forced: tuple[str, ...]
    capabilities: tuple[tuple[int, int], ...]
    sample_capabilities: tuple[tuple[int, int], ...]
    sample_seed: int
    flashinfer_pin: str | None = None
    layer_front: bool = False
    b12x_capabilities: tuple[tuple[int, int], ...] = ()
    #: Compiled ops (``torch.ops._C``) that modules imported by a forced backend's class call at import
    #: time, as ``(name, schema)``; the recorder defines each to answer False (see the module docstring).
    import_time_ops: tuple[tuple[str, str], ...] = ()

    @property
    def tag(self) -> str:
        """The file-name part of this release's records, e.g. ``vllm_0.34.0``."""
        return f"vllm_{self.version}"


RELEASES: dict[str, Release] = {
    "0.33.0": Release(
        version="0.33.0",
        commit="4ba787ec9",
        wheel="vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        wheel_sha256="4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa",
        flashinfer="0.7.2.post1",
        native_stubs=NATIVE_STUBS,
        forced=FORCED,
        capabilities=CAPABILITIES,
        sample_capabilities=SAMPLE_CAPABILITIES,
        sample_seed=SAMPLE_SEED,
    ),
    "0.34.0": Release(
        version="0.34.0",
        commit="62d4bc3c7",
        wheel="vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        wheel_sha256="79ca4b3cd74aec08c4bf476bdf0cb15735b605ae5368526a2faae1e30f044ca2",
        # The wheel pins flashinfer-python==0.7.3, which PyPI does not serve (its list goes from
        # 0.7.2.post1 to 0.7.4). The selection reads the same from 0.7.2.post1 and 0.7.4 (both were
        # recorded; the records are identical, see the module docstring), so 0.7.3 is bracketed.
        flashinfer="0.7.4",
        flashinfer_pin="0.7.3",
        # vllm._qutlass_C is gone from the 0.34.0 wheel, and no longer imported by vllm/platforms/cuda.py.
        native_stubs=tuple(name for name in NATIVE_STUBS if name != "vllm._qutlass_C"),
        # FLASHINFER_TS and KIMI_K3_KV_BALANCED_MLA are new members; like B12X, no automatic list has them.
        forced=(*FORCED, "FLASHINFER_TS", "KIMI_K3_KV_BALANCED_MLA"),
        # 10.7 (SM107): FLASHINFER_TS lists it (flashinfer_ts.py:64); every other check tests the major.
        capabilities=(*CAPABILITIES[:6], (10, 7), *CAPABILITIES[6:]),
        sample_capabilities=(*SAMPLE_CAPABILITIES[:10], (10, 7), *SAMPLE_CAPABILITIES[10:]),
        sample_seed=20260334,
        layer_front=True,
        b12x_capabilities=((12, 0), (12, 1)),
        import_time_ops=(
            # KIMI_K3_KV_BALANCED_MLA's module lives in vllm.models.kimi_k3, whose package imports the
            # model, and with it w8a8_utils.py:41 (CUTLASS_BLOCK_FP8_SUPPORTED) and the like.
            ("cutlass_scaled_mm_supports_block_fp8", "int cuda_device_capability"),
        ),
    ),
}
DEFAULT_RELEASE = RELEASES[VLLM_VERSION]


def release_of(vllm_src: Path) -> Release:
    """The release whose sources are unpacked at ``vllm_src``, read from its ``vllm/_version.py``."""
    import re  # noqa: PLC0415 - the driver reads the version file once

    path = vllm_src / "vllm" / "_version.py"
    if not path.is_file():
        raise SystemExit(f"{path}: not found (unpack the wheel's vllm/ sources under --vllm-src)")
    text = path.read_text(encoding="utf-8")
    version = re.search(r"^__version__ = version = '([^']+)'", text, re.MULTILINE)
    commit = re.search(r"^__commit_id__ = commit_id = '([^']+)'", text, re.MULTILINE)
    if version is None or commit is None:
        raise SystemExit(f"{path}: no __version__ / __commit_id__ line")
    release = RELEASES.get(version[1])
    if release is None:
        raise SystemExit(f"{path}: vllm {version[1]}; the tool records {', '.join(RELEASES)}")
    if not commit[1].endswith(release.commit):
        raise SystemExit(f"{path}: vllm {release.version} at {commit[1]}, expected {release.commit}")
    return release



def cell_key(
    capability: tuple[int, int],
    head_size: int,
    dtype: str,
    kv_cache_dtype: str,
    block_size: int | None,
    use_mla: bool,
    use_sparse: bool,
    has_sink: bool,
) -> str:
    """The record's key of one cell, e.g. ``9.0/128/bf16/auto/-/0/0/1``."""
    block = "-" if block_size is None else str(block_size)
    flags = f"{int(use_mla)}/{int(use_sparse)}/{int(has_sink)}"
    return f"{capability[0]}.{capability[1]}/{head_size}/{dtype}/{kv_cache_dtype}/{block}/{flags}"


# --------------------------------------------------------------------------------------------- worker


class _StubLoader(importlib.abc.Loader):
    def __init__(self, attributes: dict[str, object]) -> None:
        self._attributes = attributes

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__dict__.update(self._attributes)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the stub's attributes were set when it was created."""


def _fa4_forward_stub(*_args: object, **_kwargs: object) -> object:
    raise RuntimeError("FlashAttention 4 is stubbed in the selection recorder; it never runs a kernel")


def _cubin_dir_stub() -> str:
    return str(Path(__file__).resolve().parent / "no-cubins-here")


def _b12x_is_supported_stub(capability: tuple[int, int]) -> object:
    """b12x's own device gate (``is_b12x``: SM 12.0 or 12.1) for the faked capability.

    Its other requirements (CUTLASS DSL >= 4.6.0, triton) are the package's pinned dependencies, met
    once installed.
    """

    def is_supported(device: object = None) -> bool:
        del device
        return capability in ((12, 0), (12, 1))

    return is_supported


class _StubFinder(importlib.abc.MetaPathFinder):
    """Answers the module names the recorder stands in for (see the module docstring)."""

    def __init__(self, release: Release = DEFAULT_RELEASE, *,
                 b12x_for: tuple[int, int] | None = None) -> None:
        self._stubs: dict[str, dict[str, object]] = {
            name: {} for name in (*release.native_stubs, *PACKAGE_STUBS)}
        # The names vLLM imports from FA4's interface (its package __init__ and the sparse FA4 check).
        self._stubs[FA4_INTERFACE] = dict.fromkeys(
            ("flash_attn_func", "flash_attn_varlen_func", "_flash_attn_fwd", "_flash_attn_fwd_combine"),
            _fa4_forward_stub,
        )
        # flashinfer's own import reads the cubin package's version and folder.
        self._stubs["flashinfer_cubin"] = {
            "__version__": release.flashinfer,
            "get_cubin_dir": _cubin_dir_stub,
        }
        if b12x_for is not None:
            # b12x installed: the package and the paged-attention module vLLM's B12X checks
            # (vllm/utils/b12x.py imports b12x.attention.paged and calls its is_supported()).
            self._stubs["b12x"] = {"__path__": []}
            self._stubs["b12x.attention"] = {"__path__": []}
            self._stubs["b12x.attention.paged"] = {"is_supported": _b12x_is_supported_stub(b12x_for)}

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        del path, target
        attributes = self._stubs.get(fullname)
        if attributes is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _StubLoader(attributes))


class _StandInError(RuntimeError):
    """A model attribute the recorder does not model was read during selection."""


@dataclass(frozen=True)
class _ModelStandIn:
    """The parts of vLLM's ``ModelConfig`` that selection reads, for the default model geometry."""

    head_size: int
    num_attention_heads: int
    num_kv_heads: int
    hf_text_config: types.SimpleNamespace
    use_mla: bool
    dtype: Any
    rswa_window: None = None
    is_mm_prefix_lm: bool = False
    is_diffusion: bool = False
    is_multimodal_model: bool = False
    reads: set[str] = field(default_factory=set, compare=False)

    def get_head_size(self) -> int:
        return self.head_size

    def get_num_attention_heads(self, parallel_config: object) -> int:
        del parallel_config
        return self.num_attention_heads

    def get_num_kv_heads(self, parallel_config: object, arch_config: object = None) -> int:
        del parallel_config, arch_config
        return self.num_kv_heads

    def __getattr__(self, name: str) -> object:
        # Only called for attributes that are not defined above.
        raise _StandInError(f"vLLM read model_config.{name}, which the recorder does not model")


def _model_stand_in(head_size: int, torch_dtype: object, *, use_mla: bool, use_sparse: bool) -> _ModelStandIn:
    if use_mla:
        hf = types.SimpleNamespace(
            qk_nope_head_dim=MLA_MODEL["qk_nope_head_dim"],
            qk_rope_head_dim=MLA_MODEL["qk_rope_head_dim"],
            v_head_dim=MLA_MODEL["v_head_dim"],
            kv_lora_rank=MLA_MODEL["kv_lora_rank"],
            num_attention_heads=MLA_MODEL["num_attention_heads"],
        )
        if use_sparse:
            hf.index_topk = MLA_MODEL["index_topk_when_sparse"]
        # vLLM's ModelConfig for an MLA model reports kv_lora_rank + qk_rope_head_dim as head size
        # and one KV head (MQA at decode).
        return _ModelStandIn(
            head_size=MLA_MODEL["kv_lora_rank"] + MLA_MODEL["qk_rope_head_dim"],
            num_attention_heads=MLA_MODEL["num_attention_heads"],
            num_kv_heads=1,
            hf_text_config=hf,
            use_mla=True,
            dtype=torch_dtype,
        )
    heads, kv_heads = NON_MLA_MODEL["num_attention_heads"], NON_MLA_MODEL["num_kv_heads"]
    assert heads is not None, "the default model has query heads"  # noqa: S101 - narrows the type
    assert kv_heads is not None, "the default model has KV heads"  # noqa: S101 - narrows the type
    # No attn_logit_softcapping attribute: the default model has no soft-cap.
    hf = types.SimpleNamespace(num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_size)
    return _ModelStandIn(
        head_size=head_size,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        hf_text_config=hf,
        use_mla=False,
        dtype=torch_dtype,
    )


@contextmanager
def _cuda_allocations_on_meta(torch: Any) -> Iterator[None]:  # noqa: ANN401 - the venv's torch module
    """While backend modules are imported, tensors asked for on ``cuda`` are made on ``meta``."""
    real_empty = torch.empty

    def empty(*args: object, **kwargs: object) -> object:
        device = kwargs.get("device")
        if device is not None and str(device).startswith("cuda"):
            kwargs["device"] = "meta"
        return real_empty(*args, **kwargs)

    torch.empty = empty
    try:
        yield
    finally:
        torch.empty = real_empty


@dataclass
class _Vllm:
    """Handles on the vLLM objects one worker uses."""

    torch: Any
    selector: Any
    platform: Any
    enum: Any
    device_capability: Any
    vllm_config: Any
    set_current_vllm_config: Any
    classes: dict[str, Any]
    attention_config: Any = None
    release: Release = DEFAULT_RELEASE
    #: vLLM's default block size (``CacheConfig.DEFAULT_BLOCK_SIZE``), given where a cell sets none.
    default_block_size: int = 16
    #: The model layers' classes (``Attention``, ``MLAAttention``) and their modules, when recorded.
    layers: dict[str, Any] = field(default_factory=dict)


#: torch.library fragments the recorder defined (a fragment's ops live as long as the object).
_LIBRARIES: list[Any] = []


def _answers_false(*_args: object) -> bool:
    """A compiled capability probe's stand-in (see ``Release.import_time_ops``)."""
    return False


def _load_vllm(vllm_src: Path, capability: tuple[int, int], release: Release = DEFAULT_RELEASE, *,
               b12x: bool = False) -> _Vllm:
    sys.meta_path.insert(0, _StubFinder(release, b12x_for=capability if b12x else None))
    if not b12x:
        # b12x is not installed. flashinfer-python 0.7.x embeds a top-level ``b12x`` package of its
        # own, which ``importlib.util.find_spec("b12x")`` would find; a None entry in sys.modules makes
        # find_spec answer None and the import fail, as they do where b12x is absent.
        sys.modules["b12x"] = None  # type: ignore[assignment]  # the import system's "not installed" marker
    sys.path.insert(0, str(vllm_src))
    torch = importlib.import_module("torch")
    vllm = importlib.import_module("vllm")
    version = importlib.import_module("vllm._version")
    if vllm.__version__ != release.version or not str(version.commit_id).endswith(release.commit):
        raise SystemExit(
            f"expected vllm {release.version} ({release.commit}), "
            f"got {vllm.__version__} ({version.commit_id})"
        )
    flashinfer = importlib.import_module("flashinfer")
    if flashinfer.__version__ != release.flashinfer:
        raise SystemExit(f"expected flashinfer {release.flashinfer}, got {flashinfer.__version__}")

    platforms: Any = importlib.import_module("vllm.platforms")
    cuda = importlib.import_module("vllm.platforms.cuda")
    interface = importlib.import_module("vllm.platforms.interface")
    faked = interface.DeviceCapability(*capability)

    def get_device_capability(_cls: object, device_id: int = 0) -> object:
        del device_id
        return faked

    def get_device_name(_cls: object, device_id: int = 0) -> str:
        del device_id
        return f"recorder-sm{capability[0]}{capability[1]}"

    def num_compute_units(_cls: object, device_id: int = 0) -> int:
        del device_id
        return 148

    fake_platform = type(
        "RecorderCudaPlatform",
        (cuda.NvmlCudaPlatform,),
        {
            "get_device_capability": classmethod(get_device_capability),
            "get_device_name": classmethod(get_device_name),
            "num_compute_units": classmethod(num_compute_units),
        },
    )
    platforms.current_platform = fake_platform()
    logging = importlib.import_module("logging")
    logging.getLogger("vllm").setLevel(logging.ERROR)
    logging.getLogger("flashinfer").setLevel(logging.ERROR)

    registry = importlib.import_module("vllm.v1.attention.backends.registry")
    if release.import_time_ops:
        library = torch.library.Library("_C", "FRAGMENT")
        for op_name, arguments in release.import_time_ops:
            library.define(f"{op_name}({arguments}) -> bool")
            library.impl(op_name, _answers_false, "CompositeExplicitAutograd")
        _LIBRARIES.append(library)
    classes: dict[str, Any] = {}
    with _cuda_allocations_on_meta(torch):
        for name in release.forced:
            classes[name] = registry.AttentionBackendEnum[name].get_class()
    config = importlib.import_module("vllm.config")
    layers: dict[str, Any] = {}
    if release.layer_front:
        for key, module_name, class_name in (
            ("attention", "vllm.model_executor.layers.attention.attention", "Attention"),
            ("mla", "vllm.model_executor.layers.attention.mla_attention", "MLAAttention"),
        ):
            module = importlib.import_module(module_name)
            layers[key] = (module, getattr(module, class_name))
    return _Vllm(
        torch=torch,
        selector=importlib.import_module("vllm.v1.attention.selector"),
        platform=platforms.current_platform,
        enum=registry.AttentionBackendEnum,
        device_capability=faked,
        vllm_config=config.VllmConfig(),
        set_current_vllm_config=config.set_current_vllm_config,
        classes=classes,
        attention_config=config.AttentionConfig,
        release=release,
        default_block_size=importlib.import_module("vllm.config.cache").CacheConfig.DEFAULT_BLOCK_SIZE,
        layers=layers,
    )


@dataclass(frozen=True)
class _Cell:
    head_size: int
    dtype: str
    kv_cache_dtype: str
    block_size: int | None
    use_mla: bool
    use_sparse: bool
    has_sink: bool


def _cells() -> Iterator[_Cell]:
    for head_size in HEAD_SIZES:
        for dtype in DTYPES:
            for kv in KV_CACHE_DTYPES:
                for block in BLOCK_SIZES:
                    for use_mla, use_sparse in ATTENTION_KINDS:
                        for sink in SINKS:
                            yield _Cell(head_size, dtype, kv, block, use_mla, use_sparse, sink)


#: The configurations the ``--bench`` mode times (SM90, as an engine would ask at start): a GQA model in
#: BF16 and FP16, with an FP8 KV cache, and an MLA model. Each is asked through vLLM's entry point.
BENCH_CELLS: tuple[_Cell, ...] = (
    _Cell(128, "bf16", "auto", None, use_mla=False, use_sparse=False, has_sink=False),
    _Cell(128, "fp16", "auto", None, use_mla=False, use_sparse=False, has_sink=False),
    _Cell(128, "bf16", "fp8", None, use_mla=False, use_sparse=False, has_sink=False),
    _Cell(576, "bf16", "auto", None, use_mla=True, use_sparse=False, has_sink=False),
)


def _bench(vllm_src: Path, repeat: int) -> dict[str, Any]:
    """Per-call seconds of vLLM's selector and of capmatrix's, on the same configurations and process.

    ``repeated``: the same configuration asked again (vLLM answers from ``functools.cache``; capmatrix
    from its memo). ``first``: a configuration not asked before (vLLM's cache cleared; capmatrix's memo
    and every resolver memo cleared), less the time of clearing alone. Minimum over ``repeat`` samples
    of calibrated loops.
    """
    import timeit  # noqa: PLC0415 - only this mode times anything

    capability = (9, 0)
    v = _load_vllm(vllm_src, capability)
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    capmatrix_vllm = importlib.import_module("capmatrix.engine.vllm")
    default = importlib.import_module("capmatrix._shipped.default")
    resolver = default._resolver(None)  # noqa: SLF001 - the benchmark clears the compiled caches

    def forget() -> None:
        capmatrix_vllm._MEMO.clear()  # noqa: SLF001
        resolver.forget()

    def best(fn: Any, number: int) -> float:  # noqa: ANN401 - any callable
        return min(timeit.repeat(fn, number=number, repeat=repeat)) / number

    rows: list[dict[str, Any]] = []
    by_class = {cls: name for name, cls in v.classes.items()}
    for cell in BENCH_CELLS:
        torch_dtype = getattr(v.torch, TORCH_DTYPE_NAMES[cell.dtype])
        cfg = v.vllm_config
        cfg.cache_config.cache_dtype = cell.kv_cache_dtype
        cfg.cache_config.block_size = 16
        cfg.cache_config.user_specified_block_size = False
        cfg.attention_config.backend = None
        object.__setattr__(cfg, "model_config", _model_stand_in(
            cell.head_size, torch_dtype, use_mla=cell.use_mla, use_sparse=cell.use_sparse))
        kwargs = {"head_size": cell.head_size, "dtype": torch_dtype, "kv_cache_dtype": cell.kv_cache_dtype,
                  "use_mla": cell.use_mla, "has_sink": cell.has_sink, "use_sparse": cell.use_sparse,
                  "num_heads": MLA_MODEL["num_attention_heads"] if cell.use_mla else None}
        ours = {"capability": capability, "head_size": cell.head_size, "dtype": cell.dtype,
                "kv_cache_dtype": cell.kv_cache_dtype, "block_size": cell.block_size,
                "use_mla": cell.use_mla, "use_sparse": cell.use_sparse, "has_sink": cell.has_sink}
        cached = v.selector._cached_get_attn_backend  # noqa: SLF001 - vLLM's memoised selector

        def vllm_first(cached: Any = cached, kwargs: dict[str, Any] = kwargs) -> object:  # noqa: ANN401
            cached.cache_clear()
            return v.selector.get_attn_backend(**kwargs)

        def ours_first(ours: dict[str, Any] = ours) -> object:
            forget()
            return capmatrix_vllm.select_backend(**ours)

        with v.set_current_vllm_config(cfg):
            chosen = by_class[v.selector.get_attn_backend(**kwargs)]
            answer = capmatrix_vllm.select_backend(**ours)
            rows.append({
                "cell": cell_key(capability, cell.head_size, cell.dtype, cell.kv_cache_dtype,
                                 cell.block_size, cell.use_mla, cell.use_sparse, cell.has_sink),
                "vllm": chosen, "capmatrix": answer,
                "vllm_repeated": best(lambda kwargs=kwargs: v.selector.get_attn_backend(**kwargs), 2000),
                "capmatrix_repeated": best(lambda ours=ours: capmatrix_vllm.select_backend(**ours), 2000),
                # less the cost of emptying the caches, timed alone: only the selection counts
                "vllm_first": best(vllm_first, 50) - best(cached.cache_clear, 50),
                "capmatrix_first": best(ours_first, 50) - best(forget, 50),
            })
    return {"vllm": VLLM_VERSION, "capability": list(capability), "cells": rows}


class _SelectorCalled(Exception):
    """Raised in place of ``get_attn_backend`` while a model layer is built: what it would have asked."""

    def __init__(self, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        super().__init__("get_attn_backend")
        self.call_args = args
        self.call_kwargs = kwargs


class _CheckpointQuantization:
    """Stands in for a checkpoint's ``QuantizationConfig`` where only its KV-cache dtype is read.

    vLLM 0.34.0's ``Attention.__init__`` asks ``quant_config.get_kv_cache_dtype(prefix)`` when
    ``--kv-cache-dtype`` is ``auto`` (``QuantizationConfig.get_kv_cache_dtype``, base_config.py:273, answers
    None; no in-tree subclass overrides it: a checkpoint format's plugin does). Any other attribute is
    missing, as ``getattr(quant_config, "kv_cache_scheme", None)`` expects of a config without one.
    """

    def __init__(self, kv_cache_dtype: str) -> None:
        self._kv_cache_dtype = kv_cache_dtype

    def get_kv_cache_dtype(self, prefix: str) -> str:
        del prefix
        return self._kv_cache_dtype


#: The layer name the recorder builds its layers under (a decoder layer's attention, layer 0).
LAYER_PREFIX = "model.layers.0.self_attn.attn"
#: The window a sliding-window layer is built with (any window: selection reads only that there is one).
SLIDING_WINDOW = 4096


def _layer_passes(v: _Vllm, *, head_size: int, torch_dtype: Any, use_mla: bool, use_sparse: bool,  # noqa: ANN401
                  has_sink: bool, kv_user: str, kv_checkpoint: str | None,
                  sliding_window: bool) -> dict[str, Any]:
    """What the model's attention layer passes to ``get_attn_backend``, by vLLM's own ``__init__``.

    ``Attention`` (non-MLA) or ``MLAAttention`` is built with ``--kv-cache-dtype`` ``kv_user``, a
    checkpoint whose quantization config gives ``kv_checkpoint`` (None: no quantization config) and a
    sliding window or none; its ``get_attn_backend`` is replaced by a stop, so the build ends where the
    layer asks for its backend. Returns ``{"kv_cache_dtype": ..., "has_sliding_window": ...}`` as the
    layer passes them, or ``{"raises": type, "message": text}`` for what the layer raises before asking.
    The current ``VllmConfig`` must hold the cell's model and cache config.
    """
    module, layer_class = v.layers["mla" if use_mla else "attention"]
    real = module.get_attn_backend

    def stop(*args: object, **kwargs: object) -> object:
        raise _SelectorCalled(args, kwargs)

    cfg = v.vllm_config
    cfg.cache_config.cache_dtype = kv_user
    quant = None if kv_checkpoint is None else _CheckpointQuantization(kv_checkpoint)
    window = SLIDING_WINDOW if sliding_window else None
    default_dtype = v.torch.get_default_dtype()
    module.get_attn_backend = stop
    v.torch.set_default_dtype(torch_dtype)  # the layer reads the model's dtype from torch's default
    try:
        with v.set_current_vllm_config(cfg):
            if use_mla:
                layer_class(
                    num_heads=MLA_MODEL["num_attention_heads"], scale=1.0,
                    qk_nope_head_dim=MLA_MODEL["qk_nope_head_dim"],
                    qk_rope_head_dim=MLA_MODEL["qk_rope_head_dim"], v_head_dim=MLA_MODEL["v_head_dim"],
                    q_lora_rank=None, kv_lora_rank=MLA_MODEL["kv_lora_rank"], kv_b_proj=None,
                    cache_config=cfg.cache_config, quant_config=quant, prefix=LAYER_PREFIX,
                    use_sparse=use_sparse, sliding_window=window)
            else:
                sinks = {"sinks": object()} if has_sink else {}
                layer_class(
                    num_heads=NON_MLA_MODEL["num_attention_heads"], head_size=head_size, scale=1.0,
                    num_kv_heads=NON_MLA_MODEL["num_kv_heads"], cache_config=cfg.cache_config,
                    quant_config=quant, per_layer_sliding_window=window, prefix=LAYER_PREFIX, **sinks)
    except _SelectorCalled as called:
        return {"kv_cache_dtype": called.call_args[2],
                "has_sliding_window": bool(called.call_kwargs.get("has_sliding_window", False))}
    except (ValueError, NotImplementedError) as exc:
        return {"raises": type(exc).__name__, "message": str(exc)}
    finally:
        module.get_attn_backend = real
        v.torch.set_default_dtype(default_dtype)
        cfg.cache_config.cache_dtype = kv_user
    raise AssertionError(f"{layer_class.__name__} was built without asking for a backend")


def _run_cell(v: _Vllm, cell: _Cell, *, from_checkpoint: bool = False) -> dict[str, Any]:
    """One cell, automatic and every backend forced.

    ``from_checkpoint``: the cell's KV-cache dtype is the checkpoint's (``--kv-cache-dtype`` left
    ``auto``), and selection gets what the model's layer passes for it (``out["layer"]``).
    """
    torch_dtype = getattr(v.torch, TORCH_DTYPE_NAMES[cell.dtype])
    cfg = v.vllm_config
    cfg.cache_config.cache_dtype = "auto" if from_checkpoint else cell.kv_cache_dtype
    cfg.cache_config.block_size = v.default_block_size if cell.block_size is None else cell.block_size
    cfg.cache_config.user_specified_block_size = cell.block_size is not None
    model = _model_stand_in(cell.head_size, torch_dtype, use_mla=cell.use_mla, use_sparse=cell.use_sparse)
    object.__setattr__(cfg, "model_config", model)
    num_heads = MLA_MODEL["num_attention_heads"] if cell.use_mla else None
    kv_cache_dtype = cell.kv_cache_dtype
    out: dict[str, Any] = {}
    if from_checkpoint:
        layer = _layer_passes(v, head_size=cell.head_size, torch_dtype=torch_dtype, use_mla=cell.use_mla,
                              use_sparse=cell.use_sparse, has_sink=cell.has_sink, kv_user="auto",
                              kv_checkpoint=cell.kv_cache_dtype, sliding_window=False)
        if "raises" in layer:
            raise AssertionError(f"{cell}: the layer raised before selection: {layer}")
        out["layer"] = layer
        kv_cache_dtype = layer["kv_cache_dtype"]
    kwargs = {
        "head_size": cell.head_size,
        "dtype": torch_dtype,
        "kv_cache_dtype": kv_cache_dtype,
        "use_mla": cell.use_mla,
        "has_sink": cell.has_sink,
        "use_sparse": cell.use_sparse,
        "num_heads": num_heads,
    }
    by_class = {cls: name for name, cls in v.classes.items()}
    with v.set_current_vllm_config(cfg):
        # The automatic choice, through vLLM's entry point.
        cfg.attention_config.backend = None
        v.selector._cached_get_attn_backend.cache_clear()  # noqa: SLF001 - the selector memoises per config
        try:
            chosen = by_class[v.selector.get_attn_backend(**kwargs)]
            error = None
        except ValueError as exc:
            chosen, error = None, str(exc)
        # The same selection's per-candidate verdicts, in priority order.
        selector_config = v.selector.AttentionSelectorConfig(
            head_size=cell.head_size,
            dtype=torch_dtype,
            kv_cache_dtype=kv_cache_dtype,
            block_size=cell.block_size,
            use_mla=cell.use_mla,
            has_sink=cell.has_sink,
            use_sparse=cell.use_sparse,
        )
        valid, invalid = v.platform.get_valid_backends(
            device_capability=v.device_capability, attn_selector_config=selector_config, num_heads=num_heads
        )
        order = sorted(
            [(c.priority, c.backend.name) for c in valid] + [(p, b.name) for b, (p, _) in invalid.items()]
        )
        auto_reasons = {b.name: list(reasons) for b, (_, reasons) in invalid.items()}
        expected = min(((c.priority, c.backend.name) for c in valid), default=(None, None))[1]
        if chosen != expected:
            raise AssertionError(
                f"{cell}: get_attn_backend chose {chosen}, get_valid_backends says {expected}"
            )
        if error is not None:
            listing = ", ".join(f"{name}: [{', '.join(r)}]" for name, r in auto_reasons.items())
            if "{" + listing + "}" not in error:
                raise AssertionError(f"{cell}: error text does not list the structured reasons: {error}")
        # Each backend forced alone.
        forced: dict[str, list[str] | dict[str, str]] = {}
        for name in v.release.forced:
            cfg.attention_config.backend = v.enum[name]
            v.selector._cached_get_attn_backend.cache_clear()  # noqa: SLF001
            try:
                got = v.selector.get_attn_backend(**kwargs)
            except (AttributeError, KeyError, TypeError) as exc:
                # Not a verdict: vLLM itself fails while validating (e.g. an MLA backend's
                # supports_combination reads MLA fields a non-MLA model's config does not have).
                forced[name] = {"raises": type(exc).__name__, "message": str(exc)}
                continue
            except ValueError as exc:
                reasons = v.classes[name].validate_configuration(
                    device_capability=v.device_capability, **selector_config._asdict()
                )
                if not reasons or str(reasons) not in str(exc):
                    raise AssertionError(
                        f"{cell}: forced {name} failed with {exc}, reasons {reasons}"
                    ) from exc
                forced[name] = list(reasons)
            else:
                if by_class[got] != name:
                    raise AssertionError(f"{cell}: forcing {name} returned {by_class[got]}")
                forced[name] = []
            if name in auto_reasons and auto_reasons[name] != forced[name]:
                raise AssertionError(
                    f"{cell}: {name} auto reasons {auto_reasons[name]} != forced {forced[name]}"
                )
        cfg.attention_config.backend = None
    out["chosen"] = chosen
    out["order"] = [name for _, name in order]
    out["forced"] = forced
    return out


CHECKPOINT_PREFIX = "checkpoint:"


def _worker(vllm_src: Path, capability: tuple[int, int], *, b12x: bool = False) -> None:
    """One capability's cells as JSON lines ``[key, result]``.

    Where the release reads the checkpoint's KV-cache dtype (and not with ``b12x``), each cell of a
    quantized KV dtype once more as ``["checkpoint:" + key, result]``.
    """
    release = release_of(vllm_src)
    v = _load_vllm(vllm_src, capability, release, b12x=b12x)
    for count, cell in enumerate(_cells(), 1):
        result = _run_cell(v, cell)
        if count % 500 == 0:
            sys.stderr.write(f"sm{capability[0]}{capability[1]}: {count} cells\n")
        key = cell_key(
            capability,
            cell.head_size,
            cell.dtype,
            cell.kv_cache_dtype,
            cell.block_size,
            cell.use_mla,
            cell.use_sparse,
            cell.has_sink,
        )
        sys.stdout.write(json.dumps([key, result]) + "\n")
        if release.layer_front and not b12x and cell.kv_cache_dtype != "auto":
            checkpoint = _run_cell(v, cell, from_checkpoint=True)
            sys.stdout.write(json.dumps([CHECKPOINT_PREFIX + key, checkpoint]) + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------------------------- sample


@dataclass(frozen=True)
class _Sample:
    capability: tuple[int, int]
    head_size: int
    dtype: str
    kv_cache_dtype: str
    block_size: int | None
    use_mla: bool
    use_sparse: bool
    has_sink: bool
    use_mm_prefix: bool
    use_non_causal: bool
    has_sliding_window: bool
    forced: str | None
    #: 0.34.0 and later: the KV-cache dtype is the checkpoint's (``--kv-cache-dtype`` left ``auto``);
    #: None where the release has no such input (0.33.0: the key is left out of the record).
    kv_from_checkpoint: bool | None = None

    def as_json(self) -> dict[str, Any]:
        out = {"capability": list(self.capability), "head_size": self.head_size, "dtype": self.dtype,
               "kv_cache_dtype": self.kv_cache_dtype, "block_size": self.block_size,
               "use_mla": self.use_mla, "use_sparse": self.use_sparse, "has_sink": self.has_sink,
               "use_mm_prefix": self.use_mm_prefix, "use_non_causal": self.use_non_causal,
               "has_sliding_window": self.has_sliding_window, "forced": self.forced}
        if self.kv_from_checkpoint is not None:
            out["kv_from_checkpoint"] = self.kv_from_checkpoint
        return out


def _spelling(rng: random.Random, name: str) -> str:
    """A backend name as a user may type it: vLLM upper-cases it (AttentionConfig.validate_backend_before)."""
    return str(rng.choice((name, name.lower(), name.capitalize())))


def _samples(capability: tuple[int, int], count: int, seed: int,
             release: Release = DEFAULT_RELEASE) -> Iterator[_Sample]:
    """``count`` configurations for one capability, each input drawn uniformly from its classes.

    Half the records are drawn over every class (most of them refused by every backend); the other half
    stay near what some backend accepts (fp16/bf16, no block size or a multiple of 16, each flag on one
    time in ten), so that valid choices are well covered too. Every record draws its KV dtype from all of
    vLLM's spellings and its head size from all of ``SAMPLE_HEAD_SIZES``; MLA layers (a third dense, a
    third sparse) take an MLA head size (576 or 512, kv_lora_rank + qk_rope as an MLA layer passes it)
    half the time. Half the records force a backend (any of ``FORCED`` or ``SAMPLE_FORCED_EXTRA``, in a
    random case). The draw depends on the seed, the capability and the release only: a release with
    more members draws its forced names from its own ``forced``, and one that reads the checkpoint's
    KV-cache dtype (``layer_front``) draws, last in each record, whether a quantized KV dtype comes from
    the checkpoint (``SAMPLE_CHECKPOINT_KV`` of them). 0.33.0's draw is the one it always was.
    """
    rng = random.Random(f"{seed}/{capability[0]}.{capability[1]}")  # noqa: S311 - not cryptography
    for _ in range(count):
        near = rng.random() < HALF  # half the records stay near the accepted region
        flag = 0.1 if near else 0.25
        use_mla, use_sparse = rng.choice(ATTENTION_KINDS)
        mla_head = use_mla and rng.random() < HALF  # half of MLA layers take an MLA head size
        head = rng.choice((576, 512)) if mla_head else rng.choice(SAMPLE_HEAD_SIZES)
        forced: str | None = None
        if rng.random() < HALF:  # half the records force a backend
            forced = _spelling(rng, rng.choice(release.forced + SAMPLE_FORCED_EXTRA))
        blocks = SAMPLE_BLOCK_SIZES
        if near:
            blocks = tuple(b for b in SAMPLE_BLOCK_SIZES if b is None or b % 16 == 0)
        sample = _Sample(
            capability=capability,
            head_size=head,
            dtype=rng.choice(DTYPES[:2] if near else DTYPES),
            kv_cache_dtype=rng.choice(SAMPLE_KV_CACHE_DTYPES),
            block_size=rng.choice(blocks),
            use_mla=use_mla,
            use_sparse=use_sparse,
            has_sink=rng.random() < flag,
            use_mm_prefix=rng.random() < flag,
            use_non_causal=rng.random() < flag,
            has_sliding_window=rng.random() < flag,
            forced=forced,
        )
        if release.layer_front:
            from_checkpoint = rng.random() < SAMPLE_CHECKPOINT_KV and sample.kv_cache_dtype != "auto"
            sample = replace(sample, kv_from_checkpoint=from_checkpoint)
        yield sample


def _run_sample(v: _Vllm, s: _Sample) -> dict[str, Any]:
    """Answer one drawn configuration as vLLM does.

    The automatic choice with its priority list, each backend of ``FORCED`` validated alone, and the
    forced spelling (if any) through vLLM's own AttentionConfig parsing and ``get_attn_backend``.
    """
    torch_dtype = getattr(v.torch, TORCH_DTYPE_NAMES[s.dtype])
    cfg = v.vllm_config
    kv_user = "auto" if s.kv_from_checkpoint else s.kv_cache_dtype
    cfg.cache_config.cache_dtype = kv_user
    cfg.cache_config.block_size = v.default_block_size if s.block_size is None else s.block_size
    cfg.cache_config.user_specified_block_size = s.block_size is not None
    object.__setattr__(cfg, "model_config", _model_stand_in(
        s.head_size, torch_dtype, use_mla=s.use_mla, use_sparse=s.use_sparse))
    num_heads = MLA_MODEL["num_attention_heads"] if s.use_mla else None
    kv_cache_dtype, has_sliding_window = s.kv_cache_dtype, s.has_sliding_window
    out: dict[str, Any] = {}
    if v.release.layer_front:
        # What the model's layer passes for this KV dtype and window (or refuses before asking); the
        # selection below is asked with what it passes. A layer that raises never asks: the selection
        # is then recorded with the drawn values, as the selector answers them.
        layer = _layer_passes(v, head_size=s.head_size, torch_dtype=torch_dtype, use_mla=s.use_mla,
                              use_sparse=s.use_sparse, has_sink=s.has_sink, kv_user=kv_user,
                              kv_checkpoint=s.kv_cache_dtype if s.kv_from_checkpoint else None,
                              sliding_window=s.has_sliding_window)
        out["layer"] = layer
        if "raises" not in layer:
            kv_cache_dtype, has_sliding_window = layer["kv_cache_dtype"], layer["has_sliding_window"]
    kwargs = {"head_size": s.head_size, "dtype": torch_dtype, "kv_cache_dtype": kv_cache_dtype,
              "use_mla": s.use_mla, "has_sink": s.has_sink, "use_sparse": s.use_sparse,
              "use_mm_prefix": s.use_mm_prefix, "has_sliding_window": has_sliding_window,
              "num_heads": num_heads}
    by_class = {cls: name for name, cls in v.classes.items()}
    with v.set_current_vllm_config(cfg):
        object.__setattr__(cfg, "attention_config", v.attention_config(use_non_causal=s.use_non_causal))
        v.selector._cached_get_attn_backend.cache_clear()  # noqa: SLF001 - memoised per config
        try:
            out["chosen"] = by_class[v.selector.get_attn_backend(**kwargs)]
        except ValueError:
            out["chosen"] = None
        selector_config = v.selector.AttentionSelectorConfig(
            head_size=s.head_size, dtype=torch_dtype, kv_cache_dtype=kv_cache_dtype,
            block_size=s.block_size, use_mla=s.use_mla, has_sink=s.has_sink, use_sparse=s.use_sparse,
            use_mm_prefix=s.use_mm_prefix, use_non_causal=s.use_non_causal,
            has_sliding_window=has_sliding_window,
        )
        valid, invalid = v.platform.get_valid_backends(
            device_capability=v.device_capability, attn_selector_config=selector_config, num_heads=num_heads
        )
        order = sorted([(c.priority, c.backend.name) for c in valid]
                       + [(p, b.name) for b, (p, _) in invalid.items()])
        out["order"] = [name for _, name in order]
        expected = min(((c.priority, c.backend.name) for c in valid), default=(None, None))[1]
        if out["chosen"] != expected:
            raise AssertionError(f"{s}: get_attn_backend chose {out['chosen']}, "
                                 f"get_valid_backends {expected}")
        out["verdicts"] = {name: _verdict(v, name, selector_config) for name in v.release.forced}
        if s.forced is not None:
            attention = v.attention_config(backend=s.forced, use_non_causal=s.use_non_causal)
            object.__setattr__(cfg, "attention_config", attention)
            v.selector._cached_get_attn_backend.cache_clear()  # noqa: SLF001
            try:
                got = v.selector.get_attn_backend(**kwargs)
            except (AttributeError, KeyError, TypeError) as exc:
                out["forced"] = {"raises": type(exc).__name__, "message": str(exc)}
            except ValueError as exc:
                out["forced"] = {"refused": str(exc)[:300]}
            else:
                out["forced"] = {"backend": by_class[got],
                                 "automatic": attention.backend is None}
        object.__setattr__(cfg, "attention_config", v.attention_config())
    return out


def _verdict(v: _Vllm, name: str, selector_config: Any) -> list[str] | dict[str, str]:  # noqa: ANN401
    """One backend's ``validate_configuration`` reasons, or the exception vLLM raised instead."""
    try:
        return list(v.classes[name].validate_configuration(
            device_capability=v.device_capability, **selector_config._asdict()))
    except (AttributeError, KeyError, TypeError) as exc:
        return {"raises": type(exc).__name__, "message": str(exc)}


def _sample_worker(vllm_src: Path, capability: tuple[int, int], count: int, seed: int, *,
                   b12x: bool = False) -> None:
    release = release_of(vllm_src)
    v = _load_vllm(vllm_src, capability, release, b12x=b12x)
    for sample in _samples(capability, count, seed, release):
        sys.stdout.write(json.dumps([sample.as_json(), _run_sample(v, sample)]) + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------------------------- members

MEMBERS_ABOUT = (
    "every AttentionBackendEnum member the record does not force, forced through "
    "AttentionConfig(backend=...) and get_attn_backend on each configuration (as in the grid: the default "
    "model of that kind, no block size "
    "given): {'backend': the class vLLM returned, 'name': its get_name(), 'automatic': AttentionConfig reset "
    "it to automatic} or {'refused': vLLM's ValueError} or {'raises': type, 'message': text}"
)
#: The configurations ``--members`` forces each member on: a GQA layer (bf16, head 128; auto and fp8 KV),
#: a dense and a sparse MLA layer (bf16, head 576; auto and fp8_ds_mla KV).
MEMBER_CONFIGS: tuple[_Cell, ...] = (
    _Cell(128, "bf16", "auto", None, use_mla=False, use_sparse=False, has_sink=False),
    _Cell(128, "bf16", "fp8", None, use_mla=False, use_sparse=False, has_sink=False),
    _Cell(576, "bf16", "auto", None, use_mla=True, use_sparse=False, has_sink=False),
    _Cell(576, "bf16", "fp8_ds_mla", None, use_mla=True, use_sparse=False, has_sink=False),
    _Cell(576, "bf16", "auto", None, use_mla=True, use_sparse=True, has_sink=False),
    _Cell(576, "bf16", "fp8_ds_mla", None, use_mla=True, use_sparse=True, has_sink=False),
)


def _members_worker(vllm_src: Path, capability: tuple[int, int]) -> None:
    """Every member not in the release's ``forced``, forced on each of ``MEMBER_CONFIGS``: one JSON line."""
    release = release_of(vllm_src)
    v = _load_vllm(vllm_src, capability, release)
    names = [m.name for m in v.enum if m.name not in release.forced]
    answers: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for cell in MEMBER_CONFIGS:
        torch_dtype = getattr(v.torch, TORCH_DTYPE_NAMES[cell.dtype])
        cfg = v.vllm_config
        cfg.cache_config.cache_dtype = cell.kv_cache_dtype
        cfg.cache_config.block_size = v.default_block_size
        cfg.cache_config.user_specified_block_size = False
        object.__setattr__(cfg, "model_config", _model_stand_in(
            cell.head_size, torch_dtype, use_mla=cell.use_mla, use_sparse=cell.use_sparse))
        kwargs = {"head_size": cell.head_size, "dtype": torch_dtype, "kv_cache_dtype": cell.kv_cache_dtype,
                  "use_mla": cell.use_mla, "has_sink": cell.has_sink, "use_sparse": cell.use_sparse,
                  "num_heads": MLA_MODEL["num_attention_heads"] if cell.use_mla else None}
        with v.set_current_vllm_config(cfg):
            for name in names:
                answer: dict[str, Any]
                try:
                    attention = v.attention_config(backend=name)
                except Exception as exc:  # noqa: BLE001 - whatever AttentionConfig raises is the answer
                    answers[name].append({"config_raises": type(exc).__name__, "message": str(exc)[:400]})
                    continue
                object.__setattr__(cfg, "attention_config", attention)
                v.selector._cached_get_attn_backend.cache_clear()  # noqa: SLF001
                try:
                    with _cuda_allocations_on_meta(v.torch):
                        got = v.selector.get_attn_backend(**kwargs)
                except ValueError as exc:
                    answer = {"refused": str(exc)[:400]}
                except Exception as exc:  # noqa: BLE001 - whatever vLLM raises is the answer
                    answer = {"raises": type(exc).__name__, "message": str(exc)[:400]}
                else:
                    answer = {"backend": f"{got.__module__}.{got.__qualname__}", "name": got.get_name(),
                              "automatic": attention.backend is None}
                answers[name].append(answer)
            object.__setattr__(cfg, "attention_config", v.attention_config())
    sys.stdout.write(json.dumps(answers) + "\n")
    sys.stdout.flush()


def _run_members_worker(vllm_src: Path, capability: tuple[int, int]) -> dict[str, Any]:
    command = [sys.executable, __file__, "--vllm-src", str(vllm_src), "--members", "--worker",
               f"{capability[0]}.{capability[1]}"]
    done = subprocess.run(command, env=_worker_env(), capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise SystemExit(f"members worker for {capability} failed:\n{done.stderr[-4000:]}")
    answers: dict[str, Any] = json.loads(done.stdout)
    return answers


# --------------------------------------------------------------------------------------------- driver


def _worker_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env["VLLM_LOGGING_LEVEL"] = "ERROR"  # logging only; selection never reads it
    return env


def _run_worker(vllm_src: Path, capability: tuple[int, int], *,
                b12x: bool = False) -> list[tuple[str, dict[str, Any]]]:
    command = [
        sys.executable,
        __file__,
        "--vllm-src",
        str(vllm_src),
        "--worker",
        f"{capability[0]}.{capability[1]}",
        *(["--b12x"] if b12x else []),
    ]
    done = subprocess.run(command, env=_worker_env(), capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise SystemExit(f"worker for {capability} failed:\n{done.stderr[-4000:]}")
    rows: list[tuple[str, dict[str, Any]]] = []
    for line in done.stdout.splitlines():
        key, result = json.loads(line)
        rows.append((key, result))
    return rows


class _Interner:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self._index: dict[str, int] = {}

    def __call__(self, item: object) -> int:
        text = json.dumps(item)
        if text not in self._index:
            self._index[text] = len(self.items)
            self.items.append(item)
        return self._index[text]


COLUMNS: tuple[str, ...] = tuple(
    ("mla-sparse" if sparse else "mla" if mla else "mha") + ("+sink" if sink else "")
    for mla, sparse in ATTENTION_KINDS
    for sink in SINKS
)


#: The columns whose layer (``Attention``, non-MLA) reads the checkpoint's KV-cache dtype in 0.34.0.
CHECKPOINT_COLUMNS: tuple[str, ...] = ("mha", "mha+sink")


def _column(key: str) -> tuple[str, str]:
    """A cell key's group (``capability/head/dtype/kv/block``) and column (``mha``, ``mla+sink``, ...)."""
    group, mla, sparse, sink = key.rsplit("/", 3)
    return group, ("mla-sparse" if sparse == "1" else "mla" if mla == "1" else "mha") + (
        "+sink" if sink == "1" else "")


def _grouped(rows: list[tuple[str, int]], *, complete: bool = True) -> dict[str, list[int]]:
    """Ids by cell group, one per column in ``COLUMNS`` order (every column when ``complete``)."""
    cells: dict[str, list[int]] = {}
    for key, item in rows:
        group, column = _column(key)
        ids = cells.setdefault(group, [])
        if COLUMNS[len(ids)] != column:
            raise AssertionError(f"{key}: rows out of column order")
        ids.append(item)
    for group, ids in cells.items():
        if complete and len(ids) != len(COLUMNS):
            raise AssertionError(f"{group}: {len(ids)} outcomes, expected {len(COLUMNS)}")
    return cells


def _defaults(release: Release) -> dict[str, Any]:
    """The record's ``defaults``: 0.33.0's as they always were, a later release's with what it adds."""
    if release is DEFAULT_RELEASE:
        return DEFAULTS
    return {
        **DEFAULTS,
        "flashinfer": release.flashinfer,
        "flashinfer_pinned_by_vllm": release.flashinfer_pin or release.flashinfer,
        "kv_cache_dtype_from": "--kv-cache-dtype (CacheConfig.cache_dtype); no checkpoint KV dtype",
        "block_size_unset": "CacheConfig.DEFAULT_BLOCK_SIZE, user_specified_block_size false",
    }


def _vllm_header(release: Release) -> dict[str, str]:
    head = {"version": release.version, "commit": release.commit, "wheel": release.wheel}
    if release is not DEFAULT_RELEASE:
        head["wheel_sha256"] = release.wheel_sha256
    return head


def _build_record(rows: list[tuple[str, dict[str, Any]]], release: Release = DEFAULT_RELEASE, *,
                  checkpoint: list[tuple[str, dict[str, Any]]] | None = None,
                  b12x: list[tuple[str, dict[str, Any]]] | None = None) -> dict[str, Any]:
    orders, reasons, reason_sets, outcomes = _Interner(), _Interner(), _Interner(), _Interner()
    reason_sets([])  # id 0: valid

    def verdict_id(verdict: list[str] | dict[str, str]) -> int:
        if isinstance(verdict, dict):  # vLLM raised something other than its ValueError
            return reason_sets(verdict)
        return reason_sets([reasons(text) for text in verdict])

    def outcome_id(result: dict[str, Any]) -> int:
        forced_ids = [verdict_id(result["forced"][name]) for name in release.forced]
        return outcomes([result["chosen"], orders(result["order"]), forced_ids])

    cells = _grouped([(key, outcome_id(result)) for key, result in rows])
    record: dict[str, Any] = {
        "format": FORMAT,
        "about": (
            "vLLM's own CUDA attention-backend selection, run on CPU with its CUDA extensions stubbed and "
            "the device capability faked; see tools/record_vllm_selection.py for what is stubbed"
        ),
        "vllm": _vllm_header(release),
        "regenerate": (
            f"pip download vllm=={release.version} --no-deps -d DL; unzip its vllm/ sources to "
            f"DL/vllm-{release.version}; "
            f"python tools/record_vllm_selection.py --vllm-src DL/vllm-{release.version} "
            f"--out capabilities/evidence/{release.tag}_selection.json "
            "(venv and stubs: see the tool's docstring)"
        ),
        "defaults": _defaults(release),
        "axes": {
            "capability": [f"{a}.{b}" for a, b in release.capabilities],
            "head_size": list(HEAD_SIZES),
            "dtype": list(DTYPES),
            "kv_cache_dtype": list(KV_CACHE_DTYPES),
            "block_size": list(BLOCK_SIZES),
            "use_mla/use_sparse": [[m, s] for m, s in ATTENTION_KINDS],
            "has_sink": list(SINKS),
        },
        "layout": [
            "cells: 'capability/head_size/dtype/kv_cache_dtype/block_size' ('-' = no block size given)",
            "  -> one outcome id per entry of 'columns' (mha: use_mla false; mla: use_mla true, use_sparse",
            "  false; mla-sparse: both true; +sink: has_sink true)",
            "outcomes[id]: [backend vLLM chooses, or null where it raises 'No valid attention backend",
            "  found'; id in 'orders' of its candidate list in priority order; one id in 'reason_sets' per",
            "  entry of 'forced']",
            "reason_sets[id]: ids in 'reasons', in vLLM's order, of what validate_configuration says of",
            "  that backend for the cell; [] = valid. Forced, a non-empty set is the ValueError vLLM raises;",
            "  a candidate of the automatic list has the same reasons. An object records an exception vLLM",
            "  raised instead of a verdict: {'raises': type, 'message': text}",
        ],
        "columns": list(COLUMNS),
        "forced": list(release.forced),
        "orders": orders.items,
        "reasons": reasons.items,
        "reason_sets": reason_sets.items,
        "outcomes": outcomes.items,
        "cells": cells,
    }
    if checkpoint:
        plain = dict(rows)
        passes: set[tuple[str, str, str]] = set()
        kept: dict[str, list[int]] = {}
        for key, result in checkpoint:
            group, column = _column(key[len(CHECKPOINT_PREFIX):])
            kind, kv = column.split("+")[0], group.split("/")[3]
            passes.add((kind, kv, result["layer"]["kv_cache_dtype"]))
            answer = {k: v for k, v in result.items() if k != "layer"}
            if result["layer"]["kv_cache_dtype"] == "auto":
                # The layer ignores the checkpoint's dtype (MLA): the answer is the auto cell's, not kept.
                auto_key = key[len(CHECKPOINT_PREFIX):].replace(f"/{kv}/", "/auto/", 1)
                if answer != plain[auto_key]:
                    raise AssertionError(f"{key}: the layer passes auto, but the answer is not auto's")
                continue
            ids = kept.setdefault(group, [])
            if CHECKPOINT_COLUMNS[len(ids)] != column:
                raise AssertionError(f"{key}: checkpoint rows out of column order")
            ids.append(outcome_id(answer))
        record["layout"] += [
            "checkpoint_kv: the cells of a quantized KV dtype once more, where that dtype is the",
            "  checkpoint's (its quantization config's get_kv_cache_dtype; --kv-cache-dtype left auto, so",
            "  CacheConfig.cache_dtype stays auto), selection asked with what the model's layer passes.",
            "  layer_passes: [column kind, the checkpoint's KV dtype, what the layer passes]. cells: as",
            "  'cells', one outcome id per entry of checkpoint_kv.columns, for the column kinds whose layer",
            "  passes the checkpoint's dtype; where the layer passes auto the outcome is the auto cell's",
        ]
        record["checkpoint_kv"] = {
            "layer_passes": sorted(passes),
            "columns": list(CHECKPOINT_COLUMNS),
            "cells": kept,
        }
    if b12x:
        plain = dict(rows)
        for key, result in b12x:
            same = {**plain[key], "forced": {**plain[key]["forced"], "B12X": result["forced"]["B12X"]}}
            if result != same:  # b12x installed changes B12X's verdict and nothing else
                raise AssertionError(f"{key}: b12x installed changes more than B12X's verdict")
        record["layout"] += [
            "b12x_installed.cells: as 'cells', for the capabilities of b12x_installed.capabilities, each the",
            "  id in 'reason_sets' of B12X forced with b12x installed (every other answer is as in 'cells')",
        ]
        record["b12x_installed"] = {
            "capabilities": sorted({key.split("/")[0] for key, _ in b12x}),
            "cells": _grouped([(key, verdict_id(result["forced"]["B12X"])) for key, result in b12x]),
        }
    return record


def _write(record: dict[str, Any], out: Path) -> None:
    """Write JSON with one outcome, reason set or cell a line (short lines, readable diffs)."""
    tables = {name: record.pop(name) for name in ("reasons", "reason_sets", "outcomes")}
    cells = record.pop("cells")
    sections = {name: record.pop(name) for name in ("checkpoint_kv", "b12x_installed") if name in record}
    parts = [json.dumps(record, indent=1)[:-2]]
    for name, items in tables.items():
        body = ",\n".join("  " + json.dumps(item, separators=(",", ":")) for item in items)
        parts.append(f',\n "{name}": [\n{body}\n ]')
    body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in cells.items())
    parts.append(f',\n "cells": {{\n{body}\n }}')
    for name, section in sections.items():
        head = {k: v for k, v in section.items() if k != "cells"}
        lines = [f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in head.items()]
        body = ",\n".join(f"   {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                          for k, v in section["cells"].items())
        lines.append(f'  "cells": {{\n{body}\n  }}')
        parts.append(f',\n "{name}": {{\n' + ",\n".join(lines) + "\n }")
    parts.append("\n}\n")
    out.write_text("".join(parts), encoding="utf-8")
    json.loads(out.read_text(encoding="utf-8"))  # the hand-laid layout must still be JSON


def _run_sample_worker(vllm_src: Path, capability: tuple[int, int], count: int,
                       seed: int, *, b12x: bool = False) -> list[list[Any]]:
    command = [sys.executable, __file__, "--vllm-src", str(vllm_src), "--sample-worker",
               f"{capability[0]}.{capability[1]}", "--sample", str(count), "--seed", str(seed),
               *(["--b12x"] if b12x else [])]
    done = subprocess.run(command, env=_worker_env(), capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise SystemExit(f"sample worker for {capability} failed:\n{done.stderr[-4000:]}")
    return [json.loads(line) for line in done.stdout.splitlines()]


def _merge_b12x(rows: list[list[Any]], installed: list[list[Any]]) -> None:
    """Add to each record of ``rows`` drawn on a b12x capability what b12x installed changes.

    That is B12X's verdict, and the forced answer where the spelling names B12X (anything else
    differing is an error). ``installed`` holds the same draws, capability by capability, in order.
    """
    by_capability: dict[str, list[list[Any]]] = {}
    for row in rows:
        by_capability.setdefault(json.dumps(row[0]["capability"]), []).append(row)
    others: dict[str, list[list[Any]]] = {}
    for row in installed:
        others.setdefault(json.dumps(row[0]["capability"]), []).append(row)
    for capability, part in others.items():
        for (config, answer), (other_config, other) in zip(by_capability[capability], part, strict=True):
            if config != other_config:
                raise AssertionError(f"{config}: the b12x draw differs ({other_config})")
            change: dict[str, Any] = {"B12X": other["verdicts"]["B12X"]}
            same = {**answer, "verdicts": {**answer["verdicts"], "B12X": other["verdicts"]["B12X"]}}
            if config["forced"] is not None and config["forced"].upper() == "B12X":
                change["forced"] = same["forced"] = other["forced"]
            if other != same:
                raise AssertionError(f"{config}: b12x installed changes more than B12X")
            answer["b12x_installed"] = change


def _write_sample(rows: list[list[Any]], out: Path, count: int, seed: int,
                  release: Release = DEFAULT_RELEASE) -> None:
    """Gzipped JSON, one record a line, written byte-for-byte reproducibly (no gzip timestamp)."""
    import gzip  # noqa: PLC0415 - only the sample is compressed

    head: dict[str, Any] = {
        "format": SAMPLE_FORMAT,
        "about": ("vLLM's own CUDA attention-backend selection on configurations drawn off the grid; "
                  "see docs/vllm-differential.md for the design and tools/record_vllm_selection.py for "
                  "what is stubbed"),
        "vllm": _vllm_header(release),
        "regenerate": (f"python tools/record_vllm_selection.py --vllm-src DL/vllm-{release.version} "
                       f"--sample {count} --seed {seed} "
                       f"--out capabilities/evidence/{release.tag}_sample.json.gz"),
        "seed": seed,
        "per_capability": count,
        "classes": {
            "capability": [f"{a}.{b}" for a, b in release.sample_capabilities],
            "head_size": list(SAMPLE_HEAD_SIZES),
            "dtype": list(DTYPES),
            "kv_cache_dtype": list(SAMPLE_KV_CACHE_DTYPES),
            "block_size": list(SAMPLE_BLOCK_SIZES),
            "use_mla/use_sparse": [[m, sp] for m, sp in ATTENTION_KINDS],
            "forced": [*release.forced, *SAMPLE_FORCED_EXTRA],
        },
        "defaults": _defaults(release),
        "forced": list(release.forced),
        "layout": [
            ("records: [input, answer]; input: the configuration (forced: the spelling given to "
             "AttentionConfig.backend, or null)"),
            ("answer.chosen: the automatic choice (null: 'No valid attention backend found'); "
             "answer.order: the priority list; answer.verdicts: each backend of 'forced' validated alone "
             "([] = valid, a list of vLLM's reasons, or {'raises': type, 'message': text}); answer.forced "
             "(forced records): {'backend': name, 'automatic': whether AttentionConfig reset it to "
             "automatic} or {'refused': vLLM's message}"),
        ],
    }
    if release.layer_front:
        head["classes"]["kv_from_checkpoint"] = [False, True]
        head["layout"] += [
            ("input.kv_from_checkpoint: the KV-cache dtype is the checkpoint's (its quantization config's "
             "get_kv_cache_dtype; --kv-cache-dtype left auto, CacheConfig.cache_dtype auto), drawn for "
             f"{SAMPLE_CHECKPOINT_KV:.0%} of the records of a KV dtype other than auto"),
            ("answer.layer: what the model's layer (Attention, or MLAAttention for use_mla) passes to "
             "get_attn_backend for this KV dtype and sliding window, by its own __init__: "
             "{'kv_cache_dtype', 'has_sliding_window'}, or {'raises': type, 'message': text} where it "
             "refuses before asking. The answer's selection is asked with what the layer passes (with the "
             "drawn values where it raises); head size, sinks, sparse and the multimodal prefix are the "
             "drawn ones"),
        ]
    if release.b12x_capabilities:
        head["b12x_installed_capabilities"] = [f"{a}.{b}" for a, b in release.b12x_capabilities]
        head["layout"].append(
            "answer.b12x_installed (records on b12x_installed_capabilities): what b12x installed changes, "
            "{'B12X': its verdict, 'forced': the forced answer where the spelling names B12X}; every "
            "other answer is the same")
    lines = [json.dumps(head, separators=(",", ":"))]
    lines += [json.dumps(row, separators=(",", ":")) for row in rows]
    with out.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(("\n".join(lines) + "\n").encode("utf-8"))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: record the grid (default) or, with ``--worker``, answer one capability."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--vllm-src", type=Path, required=True,
        help=f"folder holding the wheel's vllm/ package (a release of: {', '.join(RELEASES)})"
    )
    parser.add_argument("--out", type=Path, help="where to write the record (JSON)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes at once (default 2)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--sample-worker", help=argparse.SUPPRESS)
    parser.add_argument("--b12x", action="store_true", help=argparse.SUPPRESS)  # a worker: b12x installed
    parser.add_argument("--sample", type=int, metavar="N",
                        help="record N drawn configurations per capability of the release's sample "
                             "capabilities (gzipped JSON lines) instead of the grid")
    parser.add_argument("--seed", type=int,
                        help="--sample: the draw's seed (default: the release's, 0.33.0: "
                             f"{SAMPLE_SEED})")
    parser.add_argument("--members", action="store_true",
                        help="force every AttentionBackendEnum member the record does not force on a few "
                             "configurations per capability; write JSON to --out")
    parser.add_argument("--bench", action="store_true",
                        help="time vLLM's selector against capmatrix's on a few SM90 cells; print JSON")
    parser.add_argument("--repeat", type=int, default=5, help="--bench: samples per timing (default 5)")
    args = parser.parse_args(argv)
    src = args.vllm_src.resolve()
    if args.bench:
        print(json.dumps(_bench(src, args.repeat), indent=1))
        return 0
    if args.worker:
        major, minor = (int(x) for x in args.worker.split("."))
        if args.members:
            _members_worker(src, (major, minor))
        else:
            _worker(src, (major, minor), b12x=args.b12x)
        return 0
    if args.sample_worker:
        major, minor = (int(x) for x in args.sample_worker.split("."))
        _sample_worker(src, (major, minor), args.sample, args.seed, b12x=args.b12x)
        return 0
    if args.out is None:
        parser.error("--out is required")
    release = release_of(src)
    if args.members:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            found = list(pool.map(lambda cap: _run_members_worker(src, cap), release.capabilities))
        args.out.write_text(json.dumps({
            "vllm": _vllm_header(release), "about": MEMBERS_ABOUT,
            "configurations": [asdict(c) for c in MEMBER_CONFIGS],
            "answers": {f"{a}.{b}": part for (a, b), part in zip(release.capabilities, found, strict=True)},
        }, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
        return 0
    if args.sample:
        seed = release.sample_seed if args.seed is None else args.seed
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            drawn = list(pool.map(lambda cap: _run_sample_worker(src, cap, args.sample, seed),
                                  release.sample_capabilities))
            installed = list(pool.map(lambda cap: _run_sample_worker(src, cap, args.sample, seed, b12x=True),
                                      release.b12x_capabilities))
        sample_rows = [row for part in drawn for row in part]
        _merge_b12x(sample_rows, [row for part in installed for row in part])
        _write_sample(sample_rows, args.out, args.sample, seed, release)
        print(f"wrote {args.out}: {len(sample_rows)} drawn configurations")
        return 0
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        parts = list(pool.map(lambda cap: _run_worker(src, cap), release.capabilities))
        b12x_parts = list(pool.map(lambda cap: _run_worker(src, cap, b12x=True), release.b12x_capabilities))
    rows = [row for part in parts for row in part]
    checkpoint = [row for row in rows if row[0].startswith(CHECKPOINT_PREFIX)]
    rows = [row for row in rows if not row[0].startswith(CHECKPOINT_PREFIX)]
    record = _build_record(rows, release, checkpoint=checkpoint,
                           b12x=[row for part in b12x_parts for row in part])
    chosen = sum(1 for _, result in rows if result["chosen"] is not None)
    _write(record, args.out)
    print(f"wrote {args.out}: {len(rows)} cells x (auto + {len(release.forced)} forced), chosen in {chosen}"
          + (f"; {len(checkpoint)} with the checkpoint's KV dtype" if checkpoint else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
