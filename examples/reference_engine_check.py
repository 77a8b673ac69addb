"""Run the reference engine's draft verification on every available device and write the evidence JSON.

Usage: python examples/reference_engine_check.py OUT.json
For each device (the CPU, and the CUDA GPU when there is one), layer shape and dtype it records the
selection query, the kernel capmatrix chose and why (each candidate's verdict and rules), what PyTorch's
own dispatcher would pick for the same tensors (torch._fused_sdp_choice), and the error against a
float64 reference and against token-by-token decoding.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend

from capmatrix.engine.reference import (
    ROLE_CUDA,
    LayerConfig,
    VerificationAttention,
    check_against_naive,
    check_against_sequential,
)

SHAPES = {
    "gqa_llama_like": LayerConfig(hidden_size=1024, num_heads=16, num_kv_heads=4, head_dim=64),
    "mqa": LayerConfig(hidden_size=512, num_heads=8, num_kv_heads=1, head_dim=64),
    "mla_deepseek_like": LayerConfig(
        hidden_size=1024, num_heads=16, num_kv_heads=16, head_dim=128, kv_lora_rank=256,
        qk_rope_head_dim=64,
    ),
}
BACKEND_NAMES = ["MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "OVERRIDEABLE"]


def _torch_choice(layer, x, cache) -> str:
    cap = layer._project(x, cache)  # noqa: SLF001 - the very tensors the layer attends over
    idx = torch._fused_sdp_choice(  # noqa: SLF001 - PyTorch's own dispatcher decision
        cap.q, cap.k, cap.v, cap.mask, 0.0, False, enable_gqa=cap.q.shape[1] != cap.k.shape[1]
    )
    names = {int(getattr(SDPBackend, n)): n for n in BACKEND_NAMES if hasattr(SDPBackend, n)}
    return names.get(int(idx), str(idx))


def run_case(device: str, shape: str, dtype: str, role: str | None) -> dict[str, object]:
    cfg = SHAPES[shape]
    case: dict[str, object] = {"device": device, "shape": shape, "dtype": dtype, "role": role}
    try:
        layer = VerificationAttention(config=cfg, device=device, dtype=dtype, role=role)
    except Exception as exc:  # noqa: BLE001 - recorded as evidence
        case["error"] = f"{type(exc).__name__}: {exc}"
        return case
    gen = torch.Generator().manual_seed(7)
    tdtype = layer.weights["wq"].dtype
    prefix = torch.randn(2, 29, cfg.hidden_size, generator=gen).to(device=device, dtype=tdtype)
    drafts = torch.randn(2, 4, cfg.hidden_size, generator=gen).to(device=device, dtype=tdtype)
    _, cache = layer.forward(prefix, layer.empty_cache(2))
    case.update(
        role=layer.role,
        query=dict(layer.query.axes),
        kernel=layer.selection.kernel,
        implementation=layer.implementation,
        torch_default_choice=_torch_choice(layer, drafts, cache),
        trace=layer.trace(),
        naive=check_against_naive(layer, drafts, cache),
        sequential=check_against_sequential(layer, drafts, cache),
    )
    return case


def main(out: str) -> int:
    warnings.simplefilter("ignore")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    roles = {"cpu": [None], "cuda": [ROLE_CUDA, "torch_sdpa_cudnn_first"]}
    cases = [
        run_case(device, shape, dtype, role)
        for device in devices
        for shape in SHAPES
        for dtype in ("fp32", "bf16", "fp16")
        for role in roles[device]
    ]
    env = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
           "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
    Path(out).write_text(json.dumps({"environment": env, "cases": cases}, indent=1) + "\n")
    bad = [c for c in cases if "error" in c or not (c["naive"]["ok"] and c["sequential"]["ok"])]
    for c in cases:
        fields = [c["device"], c["shape"], c["dtype"], c.get("role"), c.get("kernel"),
                  "torch:", c.get("torch_default_choice"),
                  "naive:", c.get("naive", {}).get("max_abs_error"),
                  "seq:", c.get("sequential", {}).get("max_abs_error"), c.get("error", "")]
        sys.stdout.write(" ".join(map(str, fields)) + "\n")
    sys.stdout.write(f"failed cases: {len(bad)}\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
