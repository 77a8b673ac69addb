#!/usr/bin/env python3
r"""Probe vLLM's attention kernels and torch flex_attention on a GPU, and record the evidence.

Three steps, the middle one on the GPU machine::

    # 1. here: build the folder that travels (vLLM's kernel files out of the wheel, stand-in modules)
    pip download vllm==0.33.0 --no-deps -d /tmp/vllm
    python tools/probe_kernels.py bundle --wheel /tmp/vllm/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl
    # 2. there (the folder carried, out/ being ignored): unpack FA3 and run the case grids
    python3 -m zipfile -e out/probe_kernels/fa3.zip out/probe_kernels
    python3 out/probe_kernels/probe_kernels_device.py run --bundle out/probe_kernels --out $OUT \\
        --families triton_unified_attention,triton_mla_decode,flash_attn_3
    # 3. here: turn the JSONL results into capabilities/evidence/<family>_h200.json
    python tools/probe_kernels.py collect --results DIR [DIR ...]

FlashInfer's kernels (JIT-compiled there from FlashInfer's own sources) travel as a pruned copy of its wheel::

    pip download flashinfer-python==0.7.2.post1 --no-deps -d /tmp/fi
    pip download apache-tvm-ffi==0.1.11 --no-deps --only-binary=:all: --python-version 3.12 \\
        --platform manylinux_2_28_x86_64 -d /tmp/fi
    python tools/probe_kernels.py bundle-flashinfer \\
        --wheel /tmp/fi/flashinfer_python-0.7.2.post1-py3-none-any.whl \\
        --tvm-ffi /tmp/fi/apache_tvm_ffi-0.1.11-cp312-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
    # there:
    python3 -m zipfile -e out/probe_flashinfer/flashinfer.zip /tmp/fi
    pip install --no-deps --target /tmp/fi out/probe_flashinfer/apache_tvm_ffi-*.whl
    PYTHONPATH=/tmp/fi python3 out/probe_flashinfer/probe_kernels_device.py run \\
        --bundle out/probe_flashinfer \\
        --out $OUT --families flashinfer_fa2,flashinfer_xqa --workers 5

The bundle holds, from the vLLM wheel, only ``triton_unified_attention.py``, ``triton_attention_helpers.py``,
``triton_decode_attention.py``, ``flash_attn_interface.py`` and (zipped) ``_vllm_fa3_C.abi3.so``; the
modules those import from the rest of vLLM (``vllm.envs``, ``vllm.logger``, ``vllm.platforms``,
``vllm.triton_utils``, ``vllm.v1.kv_cache_interface``) are replaced by the small stand-ins below, which
give the kernels the values vLLM gives them on a CUDA device. Nothing of vLLM is kept in the repository:
the bundle lives under the ignored ``out/``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BUNDLE = ROOT / "out" / "probe_kernels"
EVIDENCE = ROOT / "capabilities" / "evidence"
DEVICE_SCRIPT = Path(__file__).resolve().parent / "probe_kernels_device.py"
#: Not capmatrix probe's SDPA evidence format (1): each row holds one kernel's outcome, checked by
#: tests/test_data_probes.py; ``capmatrix export`` lists these files with this record format.
EVIDENCE_FORMAT = "capmatrix-kernel-probe/1"
VLLM_VERSION = "0.33.0"
VLLM_COMMIT = "4ba787ec9"
FLASHINFER_VERSION = "0.7.2.post1"
#: flashinfer/_build_meta.py of that wheel.
FLASHINFER_COMMIT = "beabf5004585b03da60e927bbb803acbaa62fe36"
DEFAULT_FI_BUNDLE = ROOT / "out" / "probe_flashinfer"
#: What of the FlashInfer wheel the JIT builds of attention need (the headers, the top-level csrc files,
#: XQA's sources) beside the Python package; the rest (MoE, GEMM sources, experimental kernels) stays behind,
#: so that the bundle fits one call's transfer.
FI_DATA_DIRS = (
    "flashinfer/data/include/",
    "flashinfer/data/cutlass/include/",
    "flashinfer/data/cutlass/tools/util/include/",
    "flashinfer/data/cccl/cub/",
    "flashinfer/data/cccl/libcudacxx/include/",
    "flashinfer/data/cccl/thrust/",
    "flashinfer/data/spdlog/include/",
    "flashinfer/data/csrc/xqa/",
)
FI_DROPPED = ("flashinfer/experimental/", "flashinfer/moe_ep/")
#: Files taken from the wheel, as they are.
WHEEL_FILES = (
    "vllm/v1/attention/ops/triton_unified_attention.py",
    "vllm/v1/attention/ops/triton_attention_helpers.py",
    "vllm/v1/attention/ops/triton_decode_attention.py",
    "vllm/vllm_flash_attn/flash_attn_interface.py",
)
FA3_SO = "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"

#: Stand-ins for the vLLM modules the kernel files import: the values vLLM 0.33.0 gives them on CUDA.
STANDINS: dict[str, str] = {
    "vllm/__init__.py": "",
    "vllm/v1/__init__.py": "",
    "vllm/v1/attention/__init__.py": "",
    "vllm/v1/attention/ops/__init__.py": "",
    "vllm/vllm_flash_attn/__init__.py": "",
    "vllm/envs.py": "VLLM_BATCH_INVARIANT = False\nVLLM_TRITON_FORCE_FIRST_CONFIG = False\n",
    "vllm/logger.py": (
        "import logging\n\n\n"
        "class _Logger(logging.LoggerAdapter):\n"
        "    def debug_once(self, msg, *a, **k):\n        self.debug(msg, *a)\n\n"
        "    def info_once(self, msg, *a, **k):\n        self.info(msg, *a)\n\n"
        "    def warning_once(self, msg, *a, **k):\n        self.warning(msg, *a)\n\n\n"
        "def init_logger(name):\n    return _Logger(logging.getLogger(name), {})\n"
    ),
    "vllm/triton_utils/__init__.py": "import triton\nimport triton.language as tl\n",
    "vllm/platforms/__init__.py": (
        "import torch\n\n\n"
        "class _Cuda:\n"
        "    def fp8_dtype(self):\n        return torch.float8_e4m3fn\n\n"
        "    def is_rocm(self):\n        return False\n\n"
        "    def is_cuda(self):\n        return True\n\n"
        "    def _cap(self):\n        major, minor = torch.cuda.get_device_capability()\n"
        "        return major * 10 + minor\n\n"
        "    def is_device_capability_family(self, cap):\n        return self._cap() // 10 == cap // 10\n\n"
        "    def has_device_capability(self, cap):\n        return self._cap() >= cap\n\n\n"
        "current_platform = _Cuda()\n"
    ),
    "vllm/v1/kv_cache_interface.py": (
        "from enum import IntEnum\n\n\n"
        "class KVQuantMode(IntEnum):\n    NONE = 0\n    FP8_PER_TENSOR = 1\n    INT8_PER_TOKEN_HEAD = 2\n"
        "    FP8_PER_TOKEN_HEAD = 3\n    INT4_PER_TOKEN_HEAD = 4\n"
    ),
}


def device_module() -> ModuleType:
    """tools/probe_kernels_device.py as a module (its case grids and constants; torch loads only to run)."""
    name = "probe_kernels_device"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, DEVICE_SCRIPT)
    if spec is None or spec.loader is None:  # pragma: no cover - the file sits beside this one
        msg = f"{DEVICE_SCRIPT}: cannot be loaded"
        raise SystemExit(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def bundle(wheel: Path, dest: Path, *, with_fa3: bool) -> dict[str, Any]:
    """Write the carried folder: the wheel's kernel files, the stand-ins, the device script, FA3 zipped."""
    if not wheel.is_file():
        msg = (
            f"{wheel}: no such wheel; fetch it with: pip download vllm=={VLLM_VERSION} --no-deps -d /tmp/vllm"
        )
        raise SystemExit(msg)
    dest.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"wheel": wheel.name, "wheel_sha256": _sha256(wheel), "files": {}}
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for name in (*WHEEL_FILES, *((FA3_SO,) if with_fa3 else ())):
            if name not in names:
                msg = f"{wheel}: {name} is missing; is this the vLLM {VLLM_VERSION} wheel?"
                raise SystemExit(msg)
        for name in WHEEL_FILES:
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(name))
            manifest["files"][name] = hashlib.sha256(target.read_bytes()).hexdigest()
        if with_fa3:
            with zipfile.ZipFile(dest / "fa3.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=6) as out:
                out.writestr(FA3_SO, zf.read(FA3_SO))
            manifest["files"][FA3_SO] = "zipped in fa3.zip"
    for name, text in STANDINS.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (dest / DEVICE_SCRIPT.name).write_bytes(DEVICE_SCRIPT.read_bytes())
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    return manifest


def keeps_flashinfer(name: str) -> bool:
    """Whether a member of the FlashInfer wheel goes into the bundle."""
    if not name.startswith("flashinfer/"):
        return False
    if name.startswith(FI_DROPPED):  # their Python modules are imported by others; their sources not
        return name.endswith(".py")
    if not name.startswith("flashinfer/data/"):
        return True
    csrc = "flashinfer/data/csrc/"
    return name.startswith(FI_DATA_DIRS) or (name.startswith(csrc) and "/" not in name[len(csrc) :])


def bundle_flashinfer(wheel: Path, tvm_ffi: Path, dest: Path) -> dict[str, Any]:
    """Write the carried folder for the FlashInfer families: the pruned wheel zipped, tvm-ffi, the script."""
    for path, pkg in ((wheel, f"flashinfer-python=={FLASHINFER_VERSION}"), (tvm_ffi, "apache-tvm-ffi")):
        if not path.is_file():
            msg = f"{path}: no such wheel; fetch it with: pip download {pkg} --no-deps -d /tmp/fi"
            raise SystemExit(msg)
    dest.mkdir(parents=True, exist_ok=True)
    kept = 0
    with zipfile.ZipFile(wheel) as zf:
        if "flashinfer/jit/xqa.py" not in zf.namelist():
            msg = (
                f"{wheel}: flashinfer/jit/xqa.py is missing;"
                f" is this the FlashInfer {FLASHINFER_VERSION} wheel?"
            )
            raise SystemExit(msg)
        with zipfile.ZipFile(dest / "flashinfer.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
            for info in zf.infolist():
                if keeps_flashinfer(info.filename):
                    out.writestr(info, zf.read(info.filename))
                    kept += 1
    (dest / tvm_ffi.name).write_bytes(tvm_ffi.read_bytes())
    (dest / DEVICE_SCRIPT.name).write_bytes(DEVICE_SCRIPT.read_bytes())
    manifest = {
        "wheel": wheel.name,
        "wheel_sha256": _sha256(wheel),
        "tvm_ffi": tvm_ffi.name,
        "tvm_ffi_sha256": _sha256(tvm_ffi),
        "files": {"flashinfer.zip": f"{kept} members"},
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    return manifest


#: What each family is, for the evidence file: the kernel entry it checks and the call it made.
FAMILIES: dict[str, dict[str, str]] = {
    "triton_unified_attention": {
        "kernel": "triton_unified_attention",
        "probe": "tools/probe_kernels.py (vLLM 0.33.0 Triton unified attention)",
        "call": (
            "vllm/v1/attention/ops/triton_unified_attention.py unified_attention(...) as"
            " TritonAttentionImpl.forward"
            " calls it: paged K/V caches (blocks, block_size, kv_heads, head), causal, window_size (W-1, 0),"
            " per-tensor FP8 descales of 1.0 (KVQuantMode.FP8_PER_TENSOR), the query in the model dtype,"
            " seq_threshold_3D = 128 // kv_heads and 16 softmax segments (so decode and <= 8-token"
            " generation of"
            " these small batches take the 3D launch, prefill the 2D one)"
        ),
    },
    "triton_mla_decode": {
        "kernel": "triton_mla_decode",
        "probe": "tools/probe_kernels.py (vLLM 0.33.0 Triton MLA decode)",
        "call": (
            "vllm/v1/attention/ops/triton_decode_attention.py decode_attention_fwd(..., is_mla=True) as"
            " TritonMLAImpl.forward_mqa (vllm/v1/attention/backends/mla/triton_mla.py:246-345) calls it: one"
            " latent KV head of 576 (V = its first 512), softmax scale 192**-0.5, num_kv_splits as"
            " _compute_num_kv_splits, multi-token rows as per-row causal extents, k_scale = v_scale = 1.0"
        ),
    },
    "flash_attn_3": {
        "kernel": "flash_attn_3",
        "probe": "tools/probe_kernels.py (vLLM 0.33.0 FlashAttention-3 extension)",
        "call": (
            "vllm/vllm_flash_attn/flash_attn_interface.py flash_attn_varlen_func(..., fa_version=3) on vLLM's"
            " _vllm_fa3_C.abi3.so as FlashAttentionImpl.forward calls it: paged K/V, causal, window_size"
            " [W-1, 0], softcap, out= in the model dtype; with an FP8 cache the query is quantized to FP8 too"
            " (supports_quant_query_input) and q/k/v descales are 1.0; sinks as s_aux in the model dtype"
            " (vLLM creates them with make_attention_sink under the model's default dtype)"
        ),
    },
    "flashinfer_fa2": {
        "kernel": "flashinfer_fa2",
        "probe": "tools/probe_kernels.py (FlashInfer 0.7.2.post1 FA2 prefill, JIT)",
        "call": (
            "flashinfer BatchPrefillWithPagedKVCacheWrapper(workspace, 'NHD', backend='fa2').plan(qo_indptr,"
            " kv page indptr / indices / last-page lengths, heads, head, page size, causal=True, sm_scale,"
            " window_left=W-1, logits_soft_cap, q/kv/o data types).run(q, (k_cache, v_cache), out=): decode,"
            " 4-token and prefill rows alike (vLLM's decode wrapper runs these kernels,"
            " use_tensor_cores=True);"
            " an FP8 cache with the query in the model dtype; sinks through"
            " BatchAttentionWithAttentionSinkWrapper(backend='fa2').run(q, kv, sinks (float32), sm_scale),"
            " the wrapper vLLM's FLASHINFER builds for sinks on SM90"
            " (vllm/v1/attention/backends/flashinfer.py:1432)"
        ),
    },
    "flashinfer_fa3": {
        "kernel": "flashinfer_fa3",
        "probe": "tools/probe_kernels.py (FlashInfer 0.7.2.post1 FA3 prefill, JIT)",
        "call": (
            "as flashinfer_fa2 with backend='fa3'; with an FP8 cache the query is quantized to FP8 too and"
            " the"
            " output is in the model dtype (FA3 FP8 KV needs an FP8 query, flashinfer/utils.py:456-502)"
        ),
    },
    "flashinfer_xqa": {
        "kernel": "flashinfer_xqa",
        "probe": "tools/probe_kernels.py (FlashInfer 0.7.2.post1 XQA decode, JIT)",
        "call": (
            "flashinfer.decode.xqa_batch_decode_with_kv_cache(query, (k_cache, v_cache), workspace,"
            " block_tables, seq_lens, max_seq_len, bmm1_scale=sm_scale, bmm2_scale=1.0, window_left=W-1,"
            " out=, sinks (float32), kv_layout='NHD', q_len_per_req=1) as vLLM's FLASHINFER decode calls it"
            " (vllm/v1/attention/backends/flashinfer.py:2697); one token per sequence. With an FP8 cache the"
            " kernel multiplies Q and K in FP8, so the reference takes the query rounded to E4M3;"
            " max_abs_err_unrounded_q is the error against the unrounded query"
        ),
    },
    "flex_attention": {
        "kernel": "flex_attention",
        "probe": "tools/probe_kernels.py (torch flex_attention)",
        "call": (
            "torch.compile(torch.nn.attention.flex_attention.flex_attention, dynamic=False) with torch's"
            " default"
            " kernel options, a causal (and windowed) block mask from create_block_mask, soft-cap as a"
            " score_mod, enable_gqa for grouped heads; dense (batch 2, heads, tokens, head) inputs in the"
            " query"
            " dtype. vLLM's FLEX_ATTENTION passes its own BLOCK_M/BLOCK_N (get_kernel_options), which this"
            " probe does not."
        ),
    },
}
#: Tolerances of the verdict (max abs error against the float32 reference), by query dtype, x3 with FP8.
TOLERANCE = {"fp16": 0.01, "bf16": 0.03, "fp32": 0.002}
#: vLLM's Triton kernels call tl.dot with no input_precision, which Triton 3.6 runs as TF32 for fp32
#: operands (10-bit mantissa): their fp32 cases are held to fp16's tolerance, and the evidence counts how
#: many exceed the IEEE fp32 one.
TF32_FAMILIES = frozenset({"triton_unified_attention", "triton_mla_decode"})
TF32_TOLERANCE = 0.01
FP8_FACTOR = 3.0


#: Kernels that multiply an FP8 query with an FP8 cache (FlashInfer's FA3 is given an E4M3 query, XQA
#: rounds it to E4M3 itself): their error is the E4M3 rounding of Q, K and V whatever the output type, so
#: fp16 and bf16 cases share bf16's tolerance x3 (errors seen: 0.016 to 0.053 in both output types).
FP8_QUERY_FAMILIES = frozenset({"flashinfer_fa3", "flashinfer_xqa"})


def tolerance(family: str, dtype: str, kv: str) -> float:
    """The max abs error a case may have and pass."""
    if kv == "fp8" and family in FP8_QUERY_FAMILIES:
        return TOLERANCE["bf16"] * FP8_FACTOR
    base = TF32_TOLERANCE if dtype == "fp32" and family in TF32_FAMILIES else TOLERANCE[dtype]
    return base * (FP8_FACTOR if kv == "fp8" else 1.0)


#: A worker that died of a symbol missing from a JIT module it loaded: FlashInfer names the sink wrapper's
#: module without its head size (batch_prefill_attention_sink_<dtype>_swa_<bool>_<backend>,
#: flashinfer/attention/_core.py:423), so two head sizes share one cache entry and the second loads the
#: first's build. A fact about the cache the probe shared between workers, not about the query: such a
#: case is listed as not run, with the error, and not compared.
CACHE_COLLISION = "symbol lookup error"


def query_of(case: dict[str, Any]) -> dict[str, Any]:
    """The capmatrix query axes of one device case (sm 90: the H200)."""
    mla = case["family"] == "triton_mla_decode"
    if mla:
        attention = "mla"
    elif case["group"] == 1:
        attention = "mha"
    elif case["kv_heads"] == 1:
        attention = "mqa"
    else:
        attention = "gqa"
    query: dict[str, Any] = {
        "sm": 90,
        "attention": attention,
        "dtype": case["dtype"],
        "kv_cache_dtype": "fp8" if case["kv"] == "fp8" else case["dtype"],
        "head_dim": case["head"],
        "q_per_kv": case["group"],
        "phase": "context" if case["mode"] == "prefill" else "generation",
        "spec_dec": "one_model" if case["mode"] == "spec4" else "none",
        "sliding_window": bool(case["window"]),
        "logit_softcapping": bool(case["softcap"]),
        "attention_sinks": bool(case["sinks"]),
    }
    if case["family"] != "flex_attention":
        query["tokens_per_block"] = case["block"]
    return query


def _row(family: str, rec: dict[str, Any]) -> dict[str, Any]:
    case = {
        k: rec[k]
        for k in ("dtype", "kv", "head", "group", "kv_heads", "block", "mode", "sinks", "window", "softcap")
    }
    if "sink_dtype" in rec:
        case["sink_dtype"] = rec["sink_dtype"]
    row: dict[str, Any] = {"index": rec["index"], "query": query_of({**rec, "family": family}), "case": case}
    if rec["outcome"] == "error":
        row["outcome"] = "error"
        row["error"] = rec["error"]
        return row
    tol = tolerance(family, rec["dtype"], rec["kv"])
    err = rec["max_abs_err"]
    row["outcome"] = "pass" if err != "inf" and err <= tol else "wrong"
    row["max_abs_err"] = err
    row["tolerance"] = tol
    for key in ("feature_effect", "max_abs_err_unrounded_q"):
        if key in rec:
            row[key] = rec[key]
    return row


def collect(family: str, results: list[Path], manifest: dict[str, Any]) -> dict[str, Any]:
    """One evidence document from the device's JSONL files (a later folder adds cases an earlier lacked)."""
    dev = device_module()
    cases, shapes_of, window, softcap = (
        dev.cases,
        dev.MLA_SHAPES if family == "triton_mla_decode" else dev.SHAPES,
        dev.WINDOW,
        dev.SOFTCAP,
    )
    records: dict[int, dict[str, Any]] = {}
    environment: dict[str, Any] = {}
    for folder in results:
        path = folder / f"{family}.jsonl"
        if not path.exists():
            continue
        env = json.loads((folder / "environment.json").read_text(encoding="utf-8"))["environment"]
        if environment and env != environment:
            msg = f"{folder}: ran on {env}, an earlier folder on {environment}; collect one machine's runs"
            raise SystemExit(msg)
        environment = env
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            records.setdefault(rec["index"], rec)
    if not records:
        msg = f"no {family}.jsonl under {', '.join(map(str, results))}"
        raise SystemExit(msg)
    grid = cases(family)
    collided = {i for i, r in records.items() if r["outcome"] == "error" and CACHE_COLLISION in r["error"]}
    rows = [_row(family, records[c["index"]]) for c in grid if c["index"] in records.keys() - collided]
    not_run = [
        query_of(c)
        | {"index": c["index"]}
        | ({"error": records[c["index"]]["error"]} if c["index"] in collided else {})
        for c in grid
        if c["index"] not in records.keys() - collided
    ]
    on_axis = [r for r in rows if "sink_dtype" not in r["case"]]
    off_axis = [r for r in rows if "sink_dtype" in r["case"]]
    counts: dict[str, int] = {}
    for r in on_axis:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    strict = sum(
        1
        for r in rows
        if r["case"]["dtype"] == "fp32"
        and r["outcome"] != "error"
        and r["max_abs_err"] > TOLERANCE["fp32"] * (FP8_FACTOR if r["case"]["kv"] == "fp8" else 1.0)
    )
    info = FAMILIES[family]
    shapes = shapes_of
    return {
        "format": EVIDENCE_FORMAT,
        "probe": info["probe"],
        "kernel": info["kernel"],
        "kernels": [info["kernel"]],
        "environment": environment,
        "software": _software(family, manifest),
        "rerun": _rerun(family, manifest),
        "setup": {
            "call": info["call"],
            "shapes": (
                {m: [{"new_tokens": n, "kv_len": kv} for n, kv in v] for m, v in shapes.items()}
                if family != "flex_attention"
                else {
                    "decode": "2 x 1 token, 300 keys",
                    "spec4": "2 x 4 tokens, 211 keys",
                    "prefill": "2 x 200 tokens, 200 keys",
                }
            ),
            "inputs": (
                "q ~ N(0,1) x 2 in the query dtype, K/V ~ N(0,1) (rounded to E4M3 for an FP8 cache), pages"
                " shuffled;"
                f" window {window} tokens, soft-cap {softcap}, sink logits uniform in [3, 6]; 2 KV heads (1"
                " for MQA"
                " and groups >= 32); seed 0 + case index"
            ),
            "reference": (
                "explicit float32 softmax attention over the same (dequantized) inputs: GQA by"
                " repeat_interleave,"
                " causal with the queries at the end of the context, window k > q - W, soft-cap c*tanh(s/c),"
                " sinks as an extra logit in the softmax denominator (tools/probe_kernels_device.py"
                " reference;"
                " checked against a float64 brute-force loop, max diff 4e-7)"
            ),
            "tolerance": {
                "max_abs_err": TOLERANCE,
                "fp32_tf32": TF32_TOLERANCE if family in TF32_FAMILIES else None,
                "fp8_kv_factor": FP8_FACTOR,
                "fp8_query": (
                    "an FP8 query with an FP8 cache: bf16's tolerance x3 for fp16 and bf16 alike"
                    if family in FP8_QUERY_FAMILIES
                    else None
                ),
            },
            "outcomes": "pass: ran within tolerance; wrong: ran, above tolerance or not finite; error:"
            " raised",
        },
        "summary": {
            "cases": len(on_axis),
            "outcomes": dict(sorted(counts.items())),
            "fp32_above_ieee_tolerance": strict,
            "not_run": not_run,
            "off_axis_cases": len(off_axis),
        },
        "cases": on_axis,
        "off_axis_cases": off_axis,
    }


def _software(family: str, manifest: dict[str, Any]) -> dict[str, Any]:
    if family.startswith("flashinfer_"):
        return {
            "flashinfer": f"{FLASHINFER_VERSION} (commit {FLASHINFER_COMMIT})",
            "flashinfer_wheel": manifest["wheel"],
            "flashinfer_wheel_sha256": manifest["wheel_sha256"],
            "tvm_ffi_wheel": manifest["tvm_ffi"],
        }
    return {
        "vllm": f"{VLLM_VERSION} (commit {VLLM_COMMIT})",
        "vllm_wheel": manifest["wheel"],
        "vllm_wheel_sha256": manifest["wheel_sha256"],
        "vllm_files_sha256": manifest["files"],
    }


def _rerun(family: str, manifest: dict[str, Any]) -> list[str]:
    if family.startswith("flashinfer_"):
        return [
            f"pip download flashinfer-python=={FLASHINFER_VERSION} --no-deps -d /tmp/fi",
            (
                "pip download apache-tvm-ffi==0.1.11 --no-deps --only-binary=:all: --python-version 3.12"
                " --platform manylinux_2_28_x86_64 -d /tmp/fi"
            ),
            (
                f"python tools/probe_kernels.py bundle-flashinfer --wheel /tmp/fi/{manifest['wheel']}"
                f" --tvm-ffi /tmp/fi/{manifest['tvm_ffi']}"
            ),
            "# on the GPU machine, out/probe_flashinfer carried:",
            "python3 -m zipfile -e out/probe_flashinfer/flashinfer.zip /tmp/fi",
            f"pip install --no-deps --target /tmp/fi out/probe_flashinfer/{manifest['tvm_ffi']}",
            (
                "PYTHONPATH=/tmp/fi python3 out/probe_flashinfer/probe_kernels_device.py run --bundle"
                f" out/probe_flashinfer --out DIR --families {family} --workers 5"
            ),
            "# back here:",
            "python tools/probe_kernels.py collect --results DIR --bundle out/probe_flashinfer",
        ]
    return [
        f"pip download vllm=={VLLM_VERSION} --no-deps -d /tmp/vllm",
        "python tools/probe_kernels.py bundle --wheel /tmp/vllm/" + manifest["wheel"],
        "# on the GPU machine, out/probe_kernels carried:",
        "python3 -m zipfile -e out/probe_kernels/fa3.zip out/probe_kernels",
        (
            "python3 out/probe_kernels/probe_kernels_device.py run --bundle out/probe_kernels --out DIR"
            f" --families {family}"
        ),
        "# back here:",
        "python tools/probe_kernels.py collect --results DIR",
    ]


def write_evidence(results: list[Path], bundle_dir: Path, out_dir: Path) -> list[Path]:
    """Write capabilities/evidence/<family>_h200.json for every family the result folders hold."""
    manifest = json.loads((bundle_dir / "manifest.json").read_text(encoding="utf-8"))
    written = []
    for family in FAMILIES:
        if not any((folder / f"{family}.jsonl").exists() for folder in results):
            continue
        doc = collect(family, results, manifest)
        path = out_dir / f"{family}_h200.json"
        lines = [
            f'  "{k}": {json.dumps(v, sort_keys=True)}'
            for k, v in doc.items()
            if k not in {"cases", "off_axis_cases"}
        ]
        body = ",\n".join(lines)
        for key in ("cases", "off_axis_cases"):
            rows = ",\n".join("    " + json.dumps(r, sort_keys=True) for r in doc[key])
            body += f',\n  "{key}": [\n{rows}\n  ]' if rows else f',\n  "{key}": []'
        path.write_text("{\n" + body + "\n}\n", encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line: bundle (build the carried folder) or collect (write the evidence)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bundle", help="build the folder that travels to the GPU machine")
    b.add_argument("--wheel", type=Path, required=True)
    b.add_argument("--dest", type=Path, default=DEFAULT_BUNDLE)
    b.add_argument("--no-fa3", action="store_true", help="leave the 42 MB FA3 extension out")
    f = sub.add_parser(
        "bundle-flashinfer", help="build the FlashInfer folder that travels to the GPU machine"
    )
    f.add_argument("--wheel", type=Path, required=True)
    f.add_argument("--tvm-ffi", type=Path, required=True)
    f.add_argument("--dest", type=Path, default=DEFAULT_FI_BUNDLE)
    c = sub.add_parser("collect", help="write capabilities/evidence/<family>_h200.json from device results")
    c.add_argument(
        "--results", type=Path, nargs="+", required=True, help="folders of <family>.jsonl, first wins"
    )
    c.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE, help="the bundle whose manifest.json ran")
    c.add_argument("--evidence", type=Path, default=EVIDENCE)
    args = parser.parse_args(argv)
    if args.cmd == "collect":
        for path in write_evidence(args.results, args.bundle, args.evidence):
            print(path)
        return 0
    manifest = (
        bundle_flashinfer(args.wheel, args.tvm_ffi, args.dest)
        if args.cmd == "bundle-flashinfer"
        else bundle(args.wheel, args.dest, with_fa3=not args.no_fa3)
    )
    size = sum(p.stat().st_size for p in args.dest.rglob("*") if p.is_file())
    print(
        f"{args.dest}: {len(manifest['files'])} files from {manifest['wheel']}, {size / 2**20:.1f} MiB in all"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
