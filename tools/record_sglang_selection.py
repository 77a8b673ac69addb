r"""Record SGLang 0.5.23's CUDA attention-backend resolution over a grid, as evidence for capmatrix.

The record (``capabilities/evidence/sglang_0.5.23_selection.json.gz``) is what the matrix's SGLang engine
(``capmatrix.engine.sglang``) is tested against. It is made by running SGLang's *own* argument
resolution from the release wheel, on CPU: ``ServerArgs(...).resolve_once()`` (the whole pipeline of
``sglang/srt/arg_groups/pipeline.py``: model overrides, the generic default, page-size snaps, KV-dtype
defaults, DSA sub-backends, speculative decoding), inside SGLang's own test seam
``sglang.srt.runtime_context.override_platform`` with the platform facts of the capability under test.
Then the engine-start checks that are pure functions of the resolved arguments run as SGLang runs them:

* the FA3 factory's assert (``sglang/srt/layers/attention/attention_registry.py:241-246``), for every
  resolved backend (attention, prefill, decode) that is ``fa3``: the registered factory is called with a
  stand-in runner that carries only ``use_mla_backend`` (the assert fires before any import);
* the sparse-MLA validation of the DSA backend (``_validate_flashinfer_sparse_mla_backend``,
  ``sglang/kernels/ops/attention/flash_mla_sm120.py:678-713``, called from
  ``sglang/srt/layers/attention/dsa_backend.py:742-752``), with the resolved DSA sub-backends, the
  architecture, the capability major and the resolved KV dtype (``fp8_e4m3`` as ``torch.float8_e4m3fn``);
* the hybrid-GDN allow-list of the backend factory (``attention_registry.py:461-476``) on Blackwell,
  with the resolved prefill and decode backends (the attention backend where neither is set): the
  wrapper around it needs a whole model runner, so its test and message are restated here from those
  lines, with SGLang's own ``HYBRID_GDN_SM100_BACKENDS`` and its ``hybrid_gdn_config``.

Pin: ``sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl`` (PyPI, sha256
``00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937``; ``sglang/_version.py`` has no
commit id). Cited as ``sglang/<path>:<line>`` inside that wheel.

Regenerate (outside the repository; nothing downloaded is committed)::

    pip download sglang==0.5.23 --no-deps -d /work/wheels/sglang
    python3 -m zipfile -e /work/wheels/sglang/sglang-0.5.23-*.whl /work/wheels/sglang/x
    python3.11 -m venv /work/venvs/sglang
    # torch 2.13.0 (the CPU build) and:
    /work/venvs/sglang/bin/pip install numpy pydantic msgspec orjson pyzmq fastapi openai==2.8.0 \\
        transformers==5.19.0 triton==3.6.0 psutil requests packaging pybase64 setproctitle aiohttp \\
        uvloop dill gguf apache-tvm-ffi==0.1.11 ipython pillow xxhash zstandard partial_json_parser tqdm \\
        einops regex sentencepiece prometheus-client python-multipart uvicorn interegular pyyaml \\
        safetensors easydict distro scipy loguru frozendict
    /work/venvs/sglang/bin/pip install --no-deps compressed-tensors==0.18.0
    /work/venvs/sglang/bin/python tools/record_sglang_selection.py --sglang-src /work/wheels/sglang/x \\
        --out capabilities/evidence/sglang_0.5.23_selection.json.gz
    /work/venvs/sglang/bin/python tools/record_sglang_selection.py --sglang-src /work/wheels/sglang/x \\
        --sample --out capabilities/evidence/sglang_0.5.23_sample.json.gz

(The packages are only what SGLang's import chain reaches; none takes part in the resolution. The tool
checks the SGLang version it imported and refuses any other.)

What is stubbed or fixed, and why (everything else is SGLang's own Python code):

* ``torchvision``: imported by SGLang's multimodal helpers and by transformers' image processors; its
  PyPI wheel needs CUDA torch. A meta-path finder answers ``torchvision`` and its submodules with
  modules whose attributes are inert placeholders, and a ``torchvision-0.29.0.dist-info`` (metadata only)
  lets transformers read a version. Resolution never calls into it.
* The platform facts under ``override_platform`` (SGLang's ``_PLATFORM_PROBES``,
  ``sglang/srt/runtime_context.py:1824-1845``), computed as ``sglang/srt/utils/common.py:275-340``
  defines them for a CUDA 13.0 runtime (the wheel is built for cu13): ``is_cuda``; ``is_sm90`` and
  ``is_hopper_with_cuda_12_3`` for major 9; ``is_sm100`` for major 10; ``is_sm100_or_sm110`` for 10
  and 11; ``is_sm110`` for 11; ``is_sm120`` for 12; ``is_blackwell`` for 10, 11 and 12;
  ``has_flashinfer`` true (FlashInfer 0.7.2 is a dependency of the wheel); HIP, NPU, XPU, MUSA, MPS and
  AMX false; ``device_sm`` = major * 10 + minor and ``device_capability`` = (major, minor).
* The passes that read the device directly (``torch.cuda.get_device_capability()``: the DSA passes,
  ``sglang/srt/arg_groups/overrides.py:512, 581, 631``, ``model_hook.py:341``, the linear-attention
  checks of ``attention_hook.py``, the FA3 factory, which bound ``get_device_capability`` from
  ``sglang.srt.utils`` at import, ``attention_registry.py:29``) get the
  capability under test; ``torch.version.cuda`` reads ``13.0``.
* Models: a ``config.json`` per archetype (``MODELS``), written to a temporary folder; SGLang and
  transformers read it as they read a checkpoint's (no weights are needed to resolve arguments). An
  EAGLE draft is the model itself (``speculative_draft_model_path`` = the model's folder).
* Isolation: each cell runs in a process forked from a worker that has imported SGLang and resolved
  one throw-away configuration (so the lazy imports are done once); the environment is restored to the
  worker's before the fork, so no cell sees another's writes (SGLang's resolution writes environment
  variables and caches per process).

The grid (``grid_cells``): capability {8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 11.0, 12.0, 12.1} x model
archetype (``MODELS``) x speculative setting {none, EAGLE with topk unset, EAGLE topk 1, EAGLE topk 4,
NEXTN} x KV dtype {auto, fp8_e4m3, fp8_e5m2, bfloat16} x page size {unset, 1, 64, 128}, no backend
forced; and capability x archetype x forced backend (``FORCED``) x no speculative decoding x
KV {auto, fp8_e4m3}, page size unset. ``--sample`` records the off-grid set (``sample_cells``):
capabilities 8.7, 10.1, 10.7, 11.1, 12.2 (and 9.0) with page sizes 8 and 256, other head sizes (Llama
with head 64, 96 and 256; Qwen3 with head 256), KV spelling ``bf16`` and ``fp8_e4m3`` and forced split
prefill/decode backends.

Each recorded answer is either the resolved values (``attention_backend``, ``prefill_attention_backend``,
``decode_attention_backend``, ``speculative_draft_attention_backend``, ``dsa_prefill_backend``,
``dsa_decode_backend``, ``page_size``, ``kv_cache_dtype``, ``speculative_eagle_topk``) or a refusal
with its stage (``server_args``: raised by ``resolve_once``; ``engine_start``: raised by one of the
checks above), the exception's class and its text.

The tool runs SGLang and so is not part of ``make test``; the tests read the records it wrote.
"""

# SGLang is imported only once the replay has put the wheel on the path: the imports are in functions.
# ruff: noqa: PLC0415
from __future__ import annotations

import argparse
import gzip
import importlib.abc
import importlib.machinery
import io
import itertools
import json
import os
import subprocess
import sys
import tempfile
import types
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

FORMAT = "capmatrix-sglang-selection/1"
SGLANG_VERSION = "0.5.23"
SGLANG_WHEEL = "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl"
SGLANG_SHA256 = "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937"

CAPABILITIES: tuple[tuple[int, int], ...] = (
    (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1),
)
#: Speculative settings: name -> ServerArgs keywords (the draft path is added per model).
SPECS: dict[str, dict[str, Any]] = {
    "none": {},
    "eagle": {"speculative_algorithm": "EAGLE"},
    "eagle_topk1": {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
                    "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4},
    "eagle_topk4": {"speculative_algorithm": "EAGLE", "speculative_num_steps": 5,
                    "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8},
    "nextn": {"speculative_algorithm": "NEXTN"},
}
KV_CACHE_DTYPES: tuple[str, ...] = ("auto", "fp8_e4m3", "fp8_e5m2", "bfloat16")
PAGE_SIZES: tuple[int | None, ...] = (None, 1, 64, 128)
#: Backends forced with --attention-backend in the forced part of the grid.
FORCED: tuple[str, ...] = (
    "fa3", "fa4", "flashinfer", "triton", "trtllm_mha", "trtllm_mla", "flashmla", "cutedsl_mla",
    "flex_attention", "torch_native",
)
FORCED_SPECS: tuple[str, ...] = ("none",)
FORCED_KV: tuple[str, ...] = ("auto", "fp8_e4m3")
FORCED_PAGES: tuple[int | None, ...] = (None,)

_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
    "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16", "head_dim": 128,
}
_DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_attention_heads": 128,
    "num_key_value_heads": 128, "num_hidden_layers": 61, "first_k_dense_replace": 3,
    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 8,
    "topk_group": 4, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280, "max_position_embeddings": 163840,
    "rms_norm_eps": 1e-6, "rope_theta": 10000, "torch_dtype": "bfloat16", "num_nextn_predict_layers": 1,
    "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
    "norm_topk_prob": True,
}
#: Model archetypes: name -> config.json. Geometries are the published ones (trimmed to what a config
#: needs); the architecture name is what SGLang's model overrides and allow-lists key on.
MODELS: dict[str, dict[str, Any]] = {
    "llama": _LLAMA,
    "qwen3": {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
        "intermediate_size": 12288, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "num_hidden_layers": 36, "vocab_size": 151936, "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000, "torch_dtype": "bfloat16",
    },
    "gpt_oss": {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
        "intermediate_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
        "num_hidden_layers": 24, "num_local_experts": 32, "num_experts_per_tok": 4, "experts_per_token": 4,
        "vocab_size": 201088, "max_position_embeddings": 131072, "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 12, "rms_norm_eps": 1e-5,
        "rope_theta": 150000, "torch_dtype": "bfloat16",
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "truncate": False, "original_max_position_embeddings": 4096},
    },
    "deepseek_v3": _DEEPSEEK_V3,
    "deepseek_v32": {
        **_DEEPSEEK_V3, "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
        "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64,
    },
    "glm5": {
        "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "hidden_size": 6144,
        "intermediate_size": 12288, "moe_intermediate_size": 2048, "num_attention_heads": 64,
        "num_key_value_heads": 64, "num_hidden_layers": 78, "first_k_dense_replace": 3,
        "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 1,
        "topk_group": 1, "q_lora_rank": 2048, "kv_lora_rank": 512, "qk_nope_head_dim": 192,
        "qk_rope_head_dim": 64, "v_head_dim": 256, "vocab_size": 154880, "max_position_embeddings": 202752,
        "rms_norm_eps": 1e-5, "rope_theta": 1000000, "torch_dtype": "bfloat16", "index_topk": 2048,
        "index_head_dim": 128, "index_n_heads": 32, "num_nextn_predict_layers": 1,
        "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
        "norm_topk_prob": True,
    },
    "llama4": {
        "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
        "text_config": {
            "model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192,
            "intermediate_size_mlp": 16384, "num_attention_heads": 40, "num_key_value_heads": 8,
            "head_dim": 128, "num_hidden_layers": 48, "num_local_experts": 16, "vocab_size": 202048,
            "max_position_embeddings": 10485760, "rope_theta": 500000.0, "attention_chunk_size": 8192,
            "no_rope_layers": [], "interleave_moe_layer_step": 1, "torch_dtype": "bfloat16",
        },
        "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408, "image_size": 336,
                          "patch_size": 14, "num_hidden_layers": 34, "num_attention_heads": 16,
                          "intermediate_size": 5632, "vision_output_dim": 4096},
        "torch_dtype": "bfloat16",
    },
    "gemma3": {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 2560,
        "intermediate_size": 10240, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
        "num_hidden_layers": 34, "vocab_size": 262208, "max_position_embeddings": 131072,
        "sliding_window": 1024, "sliding_window_pattern": 6, "query_pre_attn_scalar": 256,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000, "rope_local_base_freq": 10000,
        "torch_dtype": "bfloat16",
    },
    "olmo2": {
        "architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "hidden_size": 4096,
        "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32,
        "num_hidden_layers": 32, "vocab_size": 100352, "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6, "rope_theta": 500000, "torch_dtype": "bfloat16",
    },
    "exaone4": {
        "architectures": ["Exaone4ForCausalLM"], "model_type": "exaone4", "hidden_size": 5120,
        "intermediate_size": 27392, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
        "num_hidden_layers": 64, "vocab_size": 102400, "max_position_embeddings": 131072,
        "sliding_window": 4096, "sliding_window_pattern": "LLLG",
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                        "full_attention"] * 16,
        "rms_norm_eps": 1e-5, "rope_theta": 1000000, "torch_dtype": "bfloat16",
    },
    "qwen3_next": {
        "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 2048,
        "intermediate_size": 5120, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
        "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "num_hidden_layers": 48,
        "num_experts": 512, "num_experts_per_tok": 10, "full_attention_interval": 4,
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "partial_rotary_factor": 0.25,
        "vocab_size": 151936, "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
        "rope_theta": 10000000, "torch_dtype": "bfloat16", "decoder_sparse_step": 1,
        "norm_topk_prob": True, "mlp_only_layers": [],
    },
}

#: Off-grid values for --sample (none of them on the grid's lists).
SAMPLE_CAPABILITIES: tuple[tuple[int, int], ...] = ((8, 7), (9, 0), (10, 1), (10, 7), (11, 1), (12, 2))
SAMPLE_PAGES: tuple[int | None, ...] = (8, 256)
SAMPLE_KV: tuple[str, ...] = ("auto", "bf16", "fp8_e4m3")
SAMPLE_SPECS: tuple[str, ...] = ("none", "eagle")
#: Off-grid model geometries: the archetype with other head sizes.
SAMPLE_MODELS: dict[str, dict[str, Any]] = {
    "llama_h64": {**_LLAMA, "head_dim": 64, "hidden_size": 2048},
    "llama_h96": {**_LLAMA, "head_dim": 96, "hidden_size": 3072},
    "llama_h256": {**_LLAMA, "head_dim": 256, "num_attention_heads": 16},
    "qwen3_h256": {**MODELS["qwen3"], "head_dim": 256, "num_attention_heads": 16},
    "deepseek_v3": _DEEPSEEK_V3,
    "glm5": MODELS["glm5"],
    "gpt_oss": MODELS["gpt_oss"],
    "olmo2": MODELS["olmo2"],
}
#: Forced (prefill, decode) splits for --sample, next to no backend forced.
SAMPLE_FORCED: tuple[tuple[str | None, str | None, str | None], ...] = (
    (None, None, None), ("trtllm_mha", None, None), (None, "fa3", "trtllm_mha"),
)

OUTPUTS: tuple[str, ...] = (
    "attention_backend", "prefill_attention_backend", "decode_attention_backend",
    "speculative_draft_attention_backend", "dsa_prefill_backend", "dsa_decode_backend", "page_size",
    "kv_cache_dtype", "speculative_eagle_topk",
)


def cell_key(cell: dict[str, Any]) -> str:
    """The record's key of one cell, e.g. ``9.0/llama/eagle_topk4/auto/-/-``.

    ``forced`` is ``-`` (none), a backend, or ``prefill+decode`` for a split.
    """
    page = "-" if cell["page_size"] is None else str(cell["page_size"])
    return "/".join((cell["capability"], cell["model"], cell["spec"], cell["kv_cache_dtype"], page,
                     cell["forced"]))


def _cell(cap: tuple[int, int], model: str, spec: str, kv: str, page: int | None,
          forced: str) -> dict[str, Any]:
    return {"capability": f"{cap[0]}.{cap[1]}", "model": model, "spec": spec, "kv_cache_dtype": kv,
            "page_size": page, "forced": forced}


def grid_cells() -> Iterator[dict[str, Any]]:
    """Every cell of the grid, automatic part first."""
    for cap, model, spec, kv, page in itertools.product(
            CAPABILITIES, MODELS, SPECS, KV_CACHE_DTYPES, PAGE_SIZES):
        yield _cell(cap, model, spec, kv, page, "-")
    for cap, model, forced, spec, kv, page in itertools.product(
            CAPABILITIES, MODELS, FORCED, FORCED_SPECS, FORCED_KV, FORCED_PAGES):
        yield _cell(cap, model, spec, kv, page, forced)


def sample_cells() -> Iterator[dict[str, Any]]:
    """Every cell of the off-grid set."""
    for cap, model, spec, kv, page, (both, prefill, decode) in itertools.product(
            SAMPLE_CAPABILITIES, SAMPLE_MODELS, SAMPLE_SPECS, SAMPLE_KV, SAMPLE_PAGES, SAMPLE_FORCED):
        forced = both or (f"{prefill}+{decode}" if prefill else "-")
        yield _cell(cap, model, spec, kv, page, forced)


def platform_facts(cap: tuple[int, int]) -> dict[str, Any]:
    """SGLang's platform facts for a CUDA 13.0 device of this capability (see the module docstring)."""
    major, minor = cap
    return {
        "is_cuda": True, "is_hip": False, "is_npu": False, "is_xpu": False, "is_musa": False, "is_mps": False,
        "is_sm90": major == 9, "is_sm100": major == 10, "is_sm100_or_sm110": major in (10, 11),
        "is_sm110": major == 11, "is_sm120": major == 12, "is_blackwell": major in (10, 11, 12),
        "is_hopper_with_cuda_12_3": major == 9, "has_amx": False, "has_flashinfer": True,
        "device_sm": major * 10 + minor, "device_capability": (major, minor),
    }


# --------------------------------------------------------------------------------------------- worker


class _Inert:
    """Stands for any torchvision name: calling, reading or subclassing it does nothing."""

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        """Nothing to keep."""

    def __call__(self, *_args: object, **_kwargs: object) -> _Inert:
        return _Inert()

    def __getattr__(self, _name: str) -> _Inert:
        return _Inert()

    def __mro_entries__(self, _bases: tuple[object, ...]) -> tuple[type, ...]:
        return (object,)


class _InertModule(types.ModuleType):
    def __getattr__(self, name: str) -> _Inert:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


class _TorchvisionFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        del path, target
        if fullname.split(".", maxsplit=1)[0] != "torchvision":
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _InertModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: every attribute is inert."""


class _Runner:
    """The model runner the FA3 factory reads (only ``use_mla_backend``, before its assert)."""

    def __init__(self, use_mla_backend: bool) -> None:
        self.use_mla_backend = use_mla_backend

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401 - any attribute of a model runner
        raise _PastTheCheck(name)


class _PastTheCheck(Exception):
    """Raised by the runner stand-in when a factory reads past the check the recorder runs."""


def _fa3_factory(factory: Any, use_mla: bool) -> None:  # noqa: ANN401 - SGLang's registered factory
    """Run the fa3 factory up to its assert: an AssertionError is its refusal; reading on means it passed.

    Past the assert the factory imports FlashAttentionBackend (CUDA code) and builds it from the runner;
    the stand-in runner stops that at its first read of anything but ``use_mla_backend``.
    """
    try:
        factory(_Runner(use_mla))
    except AssertionError:
        raise
    except (_PastTheCheck, ImportError, RuntimeError, OSError):
        return


def _write_models(root: Path, models: dict[str, dict[str, Any]]) -> dict[str, str]:
    paths = {}
    for name, config in models.items():
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config))
        paths[name] = str(folder)
    return paths


class _Replay:
    """SGLang imported once, with the platform patched per cell."""

    def __init__(self, sglang_src: Path, scratch: Path) -> None:
        dist = scratch / "dist"
        (dist / "torchvision-0.29.0.dist-info").mkdir(parents=True, exist_ok=True)
        (dist / "torchvision-0.29.0.dist-info" / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: torchvision\nVersion: 0.29.0\n")
        sys.path[:0] = [str(sglang_src), str(dist)]
        sys.meta_path.insert(0, _TorchvisionFinder())
        for name in list(os.environ):
            if name.startswith("SGLANG_"):
                del os.environ[name]
        import sglang
        import torch
        from sglang.srt.arg_groups.overrides import resolution_result
        from sglang.srt.runtime_context import override_platform
        from sglang.srt.server_args import ServerArgs
        from sglang.srt.utils import common

        if sglang.__version__ != SGLANG_VERSION:
            raise SystemExit(f"SGLang {sglang.__version__} imported from {sglang_src}; "
                             f"this tool records {SGLANG_VERSION}")
        from sglang.srt.layers.attention import attention_registry

        self.torch = torch
        self.common = common
        self.registry = attention_registry
        self.server_args = ServerArgs
        self.override_platform = override_platform
        self.resolution_result = resolution_result
        torch.version.cuda = "13.0"  # the wheel is built for CUDA 13
        self.models = _write_models(scratch / "models", {**MODELS, **SAMPLE_MODELS})

    def _capability(self, cap: tuple[int, int]) -> None:
        def capability(*_args: object, **_kwargs: object) -> tuple[int, int]:
            return cap

        self.torch.cuda.get_device_capability = capability
        self.common.get_device_capability = capability
        # The backend factories bound the name at import (attention_registry.py:29).
        self.registry.get_device_capability = capability

    def resolve(self, cell: dict[str, Any]) -> dict[str, Any]:
        """One cell: resolve, then the pure engine-start checks (see the module docstring)."""
        major, minor = (int(x) for x in cell["capability"].split("."))
        cap = (major, minor)
        self._capability(cap)
        path = self.models[cell["model"]]
        kwargs: dict[str, Any] = {"model_path": path, "device": "cuda",
                                  "kv_cache_dtype": cell["kv_cache_dtype"]}
        kwargs.update(SPECS[cell["spec"]])
        if cell["spec"].startswith("eagle"):
            kwargs["speculative_draft_model_path"] = path
        if cell["page_size"] is not None:
            kwargs["page_size"] = cell["page_size"]
        forced = cell["forced"]
        if "+" in forced:
            kwargs["prefill_attention_backend"], kwargs["decode_attention_backend"] = forced.split("+")
        elif forced != "-":
            kwargs["attention_backend"] = forced
        with self.override_platform(**platform_facts(cap)):
            try:
                args = self.server_args(**kwargs)
                args.resolve_once()
            except Exception as error:  # noqa: BLE001 # SGLang's refusal is the answer
                return _refusal("server_args", error)
            out = {name: self.resolution_result(args, name) for name in OUTPUTS}
            try:
                self._engine_start(out, args, cap)
            except Exception as error:  # noqa: BLE001
                return {**_plain(out), "refused": _refusal("engine_start", error)["refused"]}
        return _plain(out)

    def _engine_start(self, out: dict[str, Any], args: Any, cap: tuple[int, int]) -> None:  # noqa: ANN401
        from sglang.srt.arg_groups.model_override_base import model_config_of
        from sglang.srt.configs.model_config import AttentionArch
        from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS

        model_config = model_config_of(args)
        use_mla = model_config.attention_arch == AttentionArch.MLA  # model_runner.py:406
        attention = out["attention_backend"]
        prefill = out["prefill_attention_backend"] or attention
        decode = out["decode_attention_backend"] or attention
        for backend in dict.fromkeys((prefill, decode)):
            if backend == "fa3":
                _fa3_factory(ATTENTION_BACKENDS["fa3"], use_mla)
        if attention == "dsa" or "dsa" in (prefill, decode):
            from sglang.kernels.ops.attention.flash_mla_sm120 import _validate_flashinfer_sparse_mla_backend

            kv = self.torch.float8_e4m3fn if out["kv_cache_dtype"] == "fp8_e4m3" else self.torch.bfloat16
            _validate_flashinfer_sparse_mla_backend(
                model_arch=model_config.hf_config.architectures[0], device_sm_major=cap[0],
                kv_cache_dtype=kv, prefill_impl=out["dsa_prefill_backend"],
                decode_impl=out["dsa_decode_backend"])
        from sglang.srt.configs.hybrid_arch import hybrid_gdn_config

        if cap[0] in (10, 11, 12) and hybrid_gdn_config(model_config) is not None:
            from sglang.srt.layers.attention.attention_registry import HYBRID_GDN_SM100_BACKENDS

            allowed = {"triton", "trtllm_mha", "flashinfer"} if cap[0] == 12 else HYBRID_GDN_SM100_BACKENDS
            if prefill not in allowed or decode not in allowed:  # attention_registry.py:473-476, restated
                raise AssertionError(
                    f"Only {allowed} backends are supported on Blackwell GPUs for hybrid GDN models. "
                    f"Got prefill={prefill}, decode={decode}.")


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    return {k: (v if v is None or isinstance(v, (bool, int, float, str)) else str(v))
            for k, v in values.items()}


def _refusal(stage: str, error: BaseException) -> dict[str, Any]:
    return {"refused": {"stage": stage, "error": type(error).__name__, "text": str(error)}}


def _forked(replay: _Replay, cell: dict[str, Any]) -> dict[str, Any]:
    """Resolve one cell in a child process, which sees no other cell's state."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        with os.fdopen(write, "w") as out:
            out.write(json.dumps(_guarded(replay, cell)))
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as reader:
        text = reader.read()
    os.waitpid(pid, 0)
    return json.loads(text) if text else {"harness_error": "the child wrote nothing"}


def _guarded(replay: _Replay, cell: dict[str, Any]) -> dict[str, Any]:
    try:
        return replay.resolve(cell)
    except BaseException as error:  # noqa: BLE001 # a harness failure is recorded as one
        return {"harness_error": f"{type(error).__name__}: {error}"}


def _worker(sglang_src: Path, part: int, parts: int, sample: bool, verify_every: int) -> None:
    """Answer every ``parts``-th cell from ``part``; print one JSON line per cell.

    Cells run in this process, one after another, with the environment restored before each. Every
    ``verify_every``-th cell is resolved again in a forked child (a process that has seen no cell
    since the warm-up): a different answer is recorded as a harness failure, so state carried from
    one cell to the next cannot go unseen.
    """
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory(prefix="sglang-replay-") as scratch:
        replay = _Replay(sglang_src, Path(scratch))
        logging.disable(logging.CRITICAL)
        environment = dict(os.environ)
        replay.resolve(_cell((9, 0), "llama", "none", "auto", None, "-"))  # the lazy imports, once
        cells = list(sample_cells() if sample else grid_cells())[part::parts]
        out = sys.stdout
        for index, cell in enumerate(cells):
            os.environ.clear()
            os.environ.update(environment)
            if verify_every and index % verify_every == 0:
                fresh = _forked(replay, cell)
                answer = _guarded(replay, cell)
                if answer != fresh:
                    answer = {"harness_error": f"in-process {answer} != forked {fresh}"}
            else:
                answer = _guarded(replay, cell)
            out.write(json.dumps([cell, answer]) + "\n")
            out.flush()


def _run_workers(sglang_src: Path, jobs: int, sample: bool, verify_every: int) -> list[list[Any]]:
    command = [sys.executable, __file__, "--sglang-src", str(sglang_src), "--verify-every", str(verify_every)]
    if sample:
        command.append("--sample")
    procs = [subprocess.Popen([*command, "--worker", f"{i}/{jobs}"], stdout=subprocess.PIPE, text=True)  # noqa: S603
             for i in range(jobs)]

    def drain(proc: subprocess.Popen[str]) -> list[list[Any]]:
        # Every worker's pipe is read at once: a full pipe would stop the worker that writes to it.
        if proc.stdout is None:  # pragma: no cover - Popen was given stdout=PIPE
            raise SystemExit("no worker output")
        out = [json.loads(line) for line in proc.stdout]
        if proc.wait() != 0:
            raise SystemExit(f"worker failed: {proc.args!r}")
        return out

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = [row for part in pool.map(drain, procs) for row in part]
    order = {cell_key(c): i for i, c in enumerate(sample_cells() if sample else grid_cells())}
    rows.sort(key=lambda row: order[cell_key(row[0])])
    return rows


def _write(rows: list[list[Any]], out: Path, sample: bool) -> None:
    header = {
        "format": FORMAT,
        "about": ("SGLang's own CUDA attention-backend resolution (ServerArgs.resolve_once under "
                  "override_platform, plus the pure engine-start checks), run on CPU; see "
                  "tools/record_sglang_selection.py for what is stubbed"),
        "sglang": {"version": SGLANG_VERSION, "wheel": SGLANG_WHEEL, "sha256": SGLANG_SHA256},
        "set": "sample" if sample else "grid",
        "regenerate": ("python tools/record_sglang_selection.py --sglang-src DIR"
                       + (" --sample" if sample else "") + f" --out {out.as_posix()}"),
        "models": {**MODELS, **SAMPLE_MODELS} if sample else MODELS,
        "specs": SPECS,
        "outputs": OUTPUTS,
        "cells": len(rows),
    }
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write((json.dumps(header, sort_keys=True) + "\n").encode())
        for cell, answer in rows:
            gz.write((json.dumps([cell_key(cell), answer], sort_keys=True) + "\n").encode())
    out.write_bytes(buffer.getvalue())


#: The configurations the ``--bench`` mode times, as a server would be started: (capability, model,
#: speculative decoding, KV dtype). Llama on Hopper and Blackwell, DeepSeek-V3 (MLA), DeepSeek-V3.2 (DSA),
#: gpt-oss (sinks) on SM120, Qwen3-Next (hybrid GDN) on SM100.
BENCH_CELLS: tuple[tuple[str, str, str, str], ...] = (
    ("9.0", "llama", "none", "auto"), ("10.0", "llama", "eagle", "auto"),
    ("9.0", "deepseek_v3", "none", "auto"), ("10.0", "deepseek_v32", "nextn", "auto"),
    ("12.0", "gpt_oss", "none", "auto"), ("10.0", "qwen3_next", "none", "auto"),
)


def _bench(sglang_src: Path, repeat: int) -> dict[str, Any]:
    """Per-call seconds of SGLang's resolution and of capmatrix's, on the same configurations and process.

    SGLang: ``ServerArgs(...)`` and ``resolve_once()`` (it keeps no memo: each start resolves anew), the
    engine-start checks left out. capmatrix: ``capmatrix.engine.sglang.resolve`` with every resolver memo
    cleared first (less the time of clearing alone), given the model read from the same ``config.json``
    (``model_from_hf_config``); and the same with reading and parsing that file included. Minimum over
    ``repeat`` samples of calibrated loops.
    """
    import timeit

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    ours = importlib.import_module("capmatrix.engine.sglang")
    default = importlib.import_module("capmatrix._shipped.default")
    resolver = default._resolver(None)  # noqa: SLF001 - the benchmark clears the compiled caches
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        replay = _Replay(sglang_src, Path(scratch))

        def best(fn: Any, number: int) -> float:  # noqa: ANN401 - any callable
            return min(timeit.repeat(fn, number=number, repeat=repeat)) / number

        for cap_text, model, spec, kv in BENCH_CELLS:
            major, minor = cap_text.split(".")
            cap = (int(major), int(minor))
            cell = _cell(cap, model, spec, kv, None, "-")
            replay._capability(cap)  # noqa: SLF001
            path = replay.models[model]
            kwargs: dict[str, Any] = {"model_path": path, "device": "cuda", "kv_cache_dtype": kv,
                                      **SPECS[spec]}
            if spec.startswith("eagle"):
                kwargs["speculative_draft_model_path"] = path
            config_file = Path(path) / "config.json"
            hf = ours.model_from_hf_config(json.loads(config_file.read_text(encoding="utf-8")))
            spec_args = {k: v for k, v in SPECS[spec].items()
                         if k in ("speculative_algorithm", "speculative_eagle_topk")}

            def sglang_call(kwargs: dict[str, Any] = kwargs) -> object:
                args = replay.server_args(**kwargs)
                args.resolve_once()
                return args

            def ours_first(hf: Any = hf, cap: tuple[int, int] = cap, kv: str = kv,  # noqa: ANN401
                           spec_args: dict[str, Any] = spec_args) -> Any:  # noqa: ANN401 - ours.Resolved
                resolver.forget()
                return ours.resolve(capability=cap, model=hf, kv_cache_dtype=kv, **spec_args)

            def ours_with_config(config_file: Path = config_file, cap: tuple[int, int] = cap, kv: str = kv,
                                 spec_args: dict[str, Any] = spec_args) -> object:
                resolver.forget()
                model_of = ours.model_from_hf_config(json.loads(config_file.read_text(encoding="utf-8")))
                return ours.resolve(capability=cap, model=model_of, kv_cache_dtype=kv, **spec_args)

            with replay.override_platform(**platform_facts(cap)):
                try:
                    theirs = replay.resolution_result(sglang_call(), "attention_backend")
                except Exception as error:  # noqa: BLE001 # a refusal is an answer too
                    theirs = f"refused: {type(error).__name__}"
                mine = ours_first()
                answer = mine.attention_backend if mine.refused is None else f"refused ({mine.refused.stage})"
                sglang_time = best(sglang_call, 5)
            clear = best(resolver.forget, 200)
            rows.append({
                "cell": cell_key(cell), "sglang": str(theirs), "capmatrix": str(answer),
                "sglang_first": sglang_time,
                "capmatrix_first": best(ours_first, 200) - clear,
                "capmatrix_first_with_config": best(ours_with_config, 200) - clear,
            })
    return {"sglang": SGLANG_VERSION, "cells": rows}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: record the grid (default) or the off-grid set (``--sample``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sglang-src", type=Path, required=True, help="folder holding the wheel's sglang/")
    parser.add_argument("--out", type=Path, help="where to write the record (gzipped JSON lines)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes at once (default 2)")
    parser.add_argument("--sample", action="store_true", help="record the off-grid set instead of the grid")
    parser.add_argument("--verify-every", type=int, default=80,
                        help="resolve every N-th cell again in a fresh forked process and compare (0: never)")
    parser.add_argument("--bench", action="store_true",
                        help="time SGLang's resolution and capmatrix's on a few configurations; print JSON")
    parser.add_argument("--repeat", type=int, default=5, help="--bench: samples per timing (default 5)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bench:
        print(json.dumps(_bench(args.sglang_src.resolve(), args.repeat), indent=1))
        return 0
    if args.worker:
        part, parts = (int(x) for x in args.worker.split("/"))
        _worker(args.sglang_src.resolve(), part, parts, args.sample, args.verify_every)
        return 0
    if args.out is None:
        parser.error("--out is required")
    rows = _run_workers(args.sglang_src.resolve(), args.jobs, args.sample, args.verify_every)
    failures = [row for row in rows if "harness_error" in row[1]]
    _write(rows, args.out, args.sample)
    refused = sum(1 for _, answer in rows if "refused" in answer)
    print(f"wrote {args.out}: {len(rows)} cells, {refused} refused, {len(failures)} harness failures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
