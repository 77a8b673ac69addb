"""Check the PyTorch SDPA part of the capability matrix against the GPU it runs on (the torch runner).

torch is imported only when a probe runs. The evidence file format (cases, observations, comparison
with a matrix) is :mod:`capmatrix.authoring.evidence`; its names are re-exported here for convenience.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import warnings
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from capmatrix._shipped.default import default_matrix
from capmatrix.authoring.evidence import (
    EVIDENCE_FORMAT,
    Comparison,
    Disagreement,
    Observation,
    ProbeCase,
    annotate,
    compare,
    dumps_evidence,
    read_evidence,
    write_evidence,
)
from capmatrix.errors import CapmatrixError

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from types import ModuleType

    from capmatrix.matrix import Matrix

_T = TypeVar("_T")

__all__ = [
    "EVIDENCE_FORMAT",
    "KERNEL_BACKENDS",
    "SDPA_AXES",
    "SETUP",
    "Comparison",
    "Disagreement",
    "NoGPUError",
    "Observation",
    "ProbeCase",
    "annotate",
    "collect",
    "compare",
    "default_backend",
    "dumps_evidence",
    "environment",
    "judge",
    "observe_case",
    "priority_order",
    "probe_cases",
    "read_evidence",
    "run_probe",
    "torch_dtype",
    "universe_values",
    "write_evidence",
]

#: Matrix kernel name -> (``torch.nn.attention.SDPBackend`` member,
#: ``torch.backends.cuda`` predicate).
#: The math backend has no ``can_use_*`` predicate: forcing it is the only check.
KERNEL_BACKENDS: dict[str, tuple[str, str | None]] = {
    "torch_sdpa_flash": ("FLASH_ATTENTION", "can_use_flash_attention"),
    "torch_sdpa_efficient": ("EFFICIENT_ATTENTION", "can_use_efficient_attention"),
    "torch_sdpa_cudnn": ("CUDNN_ATTENTION", "can_use_cudnn_attention"),
    "torch_sdpa_math": ("MATH", None),
}

#: The axes an SDPA query ranges over (besides ``sm``, which is the GPU's own).
SDPA_AXES = ("dtype", "head_dim", "attention", "causal", "attn_mask", "dropout")

#: Attention kinds that are SDPA input shapes. ``mla`` is not one: SDPA takes materialised
#: per-head Q/K/V, so an MLA model reaches SDPA only after decompression, as mha.
_SDPA_ATTENTION = ("mha", "gqa", "mqa")

#: Tensor shapes and tolerances of every probe call (small: the probe checks dispatch, not speed).
SETUP: dict[str, Any] = {
    "batch": 1,
    "q_heads": 8,
    "kv_heads": {"mha": 8, "gqa": 2, "mqa": 1},
    "seq_len": 64,
    "dropout_p": 0.1,
    "attn_mask": "bool (seq_len, seq_len), random, diagonal kept (no fully masked row)",
    "layout": "contiguous (batch, heads, seq, head_dim); seqlen_q == seqlen_k",
    "reference": "explicit float32 softmax(q k^T * scale + mask) v on the same (upcast) inputs",
    "tolerance": {"fp32": 2e-3, "fp16": 1e-2, "bf16": 3e-2, "fp8": 1e-1},
    "dropout_numerics": "not compared (random); a forced run that returns finite values counts",
    "seed": 0,
}

_ERROR_CHARS = 240


class NoGPUError(CapmatrixError, RuntimeError):
    """No CUDA GPU (or no torch) is available to probe."""


def probe_cases(values: Mapping[str, Sequence[object]]) -> tuple[ProbeCase, ...]:
    """Return every SDPA case over the ``dtype``, ``head_dim`` and ``attention`` values given.

    ``attention: mla`` is left out: it is not an SDPA input shape (see the kernels' YAML); the bool
    axes ``causal``, ``attn_mask`` and ``dropout`` take both values.
    """
    dtypes = [str(v) for v in values["dtype"]]
    head_dims = [int(str(v)) for v in values["head_dim"]]
    attentions = [str(v) for v in values["attention"] if v in _SDPA_ATTENTION]
    flags = (False, True)
    return tuple(
        ProbeCase(dtype=d, head_dim=h, attention=a, causal=c, attn_mask=m, dropout=p)
        for d, h, a, c, m, p in itertools.product(dtypes, head_dims, attentions, flags, flags, flags)
    )


def universe_values(matrix: Matrix) -> dict[str, tuple[object, ...]]:
    """Return the matrix's declared values of the enumerated SDPA axes."""
    return {axis: tuple(matrix.axes[axis].known) for axis in ("dtype", "head_dim", "attention")}


def _short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return text[:_ERROR_CHARS]


def environment(torch: ModuleType) -> dict[str, object]:
    """Describe the GPU and the software stack the probe runs on.

    :raises NoGPUError: when torch sees no CUDA device.
    """
    if not torch.cuda.is_available():
        raise NoGPUError("torch sees no CUDA device (torch.cuda.is_available() is False)")
    major, minor = torch.cuda.get_device_capability()
    cudnn = None
    with contextlib.suppress(Exception):
        cudnn = torch.backends.cudnn.version()
    return {
        "gpu": str(torch.cuda.get_device_name()),
        "sm": major * 10 + minor,
        "torch": str(torch.__version__),
        "cuda": str(torch.version.cuda),
        "cudnn": cudnn,
        "sdpa_priority_order": priority_order(torch),
    }


def priority_order(torch: ModuleType) -> list[str] | None:
    """Return SDPA's backend priority order, or None where torch does not expose it.

    PyTorch settles its default order (cuDNN first on some GPUs) at the first dispatch, so read it
    after an SDPA call to see the order that dispatch uses.
    """
    with contextlib.suppress(Exception):
        return [_backend_name(torch, b) for b in torch._C._get_sdp_priority_order()]  # noqa: SLF001
    return None


def _backend_name(torch: ModuleType, value: object) -> str:
    for member in torch.nn.attention.SDPBackend.__members__.values():
        if member == value or int(member) == value:
            return str(member.name)
    return str(value)


def torch_dtype(value: str, matrix: Matrix | None = None) -> str:
    """The torch attribute of a dtype value: the dtype axis's ``torch.`` spelling (fp8 is E4M3).

    :raises ValueError: when the axis gives the value no such spelling.
    """
    name = (default_matrix() if matrix is None else matrix).axes["dtype"].spelled(value, "torch.")
    if name is None:
        msg = f"dtype {value!r} has no torch spelling on the dtype axis (add 'torch.NAME: {value}' to it)"
        raise ValueError(msg)
    return name


def _make_inputs(  # pragma: no cover - needs a CUDA GPU
    torch: ModuleType, case: ProbeCase
) -> dict[str, Any]:
    gen = torch.Generator(device="cuda").manual_seed(SETUP["seed"])
    b, hq, s = SETUP["batch"], SETUP["q_heads"], SETUP["seq_len"]
    hkv = SETUP["kv_heads"][case.attention]
    dtype = getattr(torch, torch_dtype(case.dtype))

    def rand(heads: int) -> Any:  # noqa: ANN401  (a torch.Tensor; torch is untyped here)
        x = torch.randn(b, heads, s, case.head_dim, device="cuda", generator=gen)
        return x.to(dtype)

    q, k, v = rand(hq), rand(hkv), rand(hkv)
    mask = None
    if case.attn_mask:
        mask = torch.rand(s, s, device="cuda", generator=gen) > 0.3
        mask |= torch.eye(s, dtype=torch.bool, device="cuda")
    return {"q": q, "k": k, "v": v, "mask": mask, "gqa": hkv != hq}


def _reference(  # pragma: no cover - needs a CUDA GPU
    torch: ModuleType, case: ProbeCase, inp: Mapping[str, Any]
) -> Any:  # noqa: ANN401 - a torch.Tensor
    q, k, v = (inp[n].float() for n in ("q", "k", "v"))
    groups = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    scores = (q @ k.transpose(-2, -1)) * (case.head_dim**-0.5)
    s = scores.shape[-1]
    keep = torch.ones(s, s, dtype=torch.bool, device=scores.device)
    if case.causal:
        keep = torch.tril(keep)
    if inp["mask"] is not None:
        keep = keep & inp["mask"]
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _can_use(  # pragma: no cover - needs a CUDA GPU
    torch: ModuleType, predicate: str, case: ProbeCase, inp: Mapping[str, Any]
) -> bool:
    cuda = torch.backends.cuda
    dropout = SETUP["dropout_p"] if case.dropout else 0.0
    args = (inp["q"], inp["k"], inp["v"], inp["mask"], dropout, case.causal)
    try:
        params = cuda.SDPAParams(*args, inp["gqa"])
    except TypeError:  # pragma: no cover - torch < 2.5 has no enable_gqa argument
        params = cuda.SDPAParams(*args)
    return bool(getattr(cuda, predicate)(params, debug=False))


def _force(  # pragma: no cover - needs a CUDA GPU
    torch: ModuleType, backend: str, case: ProbeCase, inp: Mapping[str, Any]
) -> Any:  # noqa: ANN401 - a torch.Tensor
    attention = torch.nn.attention
    dropout = SETUP["dropout_p"] if case.dropout else 0.0
    with attention.sdpa_kernel([getattr(attention.SDPBackend, backend)]):
        out = torch.nn.functional.scaled_dot_product_attention(
            inp["q"],
            inp["k"],
            inp["v"],
            attn_mask=inp["mask"],
            dropout_p=dropout,
            is_causal=case.causal,
            enable_gqa=inp["gqa"],
        )
    torch.cuda.synchronize()
    return out


def judge(
    kernel: str,
    *,
    can_use: Callable[[], bool] | None,
    force: Callable[[], _T],
    check: Callable[[_T], tuple[bool, float, bool]],
    compare_numerics: bool,
) -> Observation:
    """Turn one kernel's predicate and forced run into an :class:`Observation`.

    ``check(output)`` returns ``(finite, max_abs_err, within_tolerance)``. A predicate that
    raises answers nothing (``can_use=None``); a forced run that raises means "not usable";
    non-finite output means a wrong answer; with ``compare_numerics`` false (dropout) only
    finiteness is checked.
    """
    said: bool | None = None
    if can_use is not None:
        try:
            said = bool(can_use())
        except Exception:  # noqa: BLE001 - a predicate that raises answers nothing
            said = None
    with warnings.catch_warnings():
        # Forcing an unusable backend warns why before it raises; the error is what is recorded.
        warnings.simplefilter("ignore")
        try:
            out = force()
        except Exception as exc:  # noqa: BLE001 - any failure means "not usable"
            return Observation(kernel=kernel, can_use=said, ran=False, error=_short_error(exc))
    finite, err, ok = check(out)
    if not finite:
        return Observation(kernel=kernel, can_use=said, ran=True, matches=False, error="non-finite output")
    if not compare_numerics:
        return Observation(kernel=kernel, can_use=said, ran=True)
    return Observation(kernel=kernel, can_use=said, ran=True, max_abs_err=round(err, 6), matches=ok)


def observe_case(  # pragma: no cover - needs a CUDA GPU; judge() holds the logic
    torch: ModuleType, case: ProbeCase, kernels: Iterable[str] = tuple(KERNEL_BACKENDS)
) -> tuple[Observation, ...]:
    """Ask PyTorch about ``case`` and force each kernel's backend on it."""
    inp = _make_inputs(torch, case)
    ref = _reference(torch, case, inp)
    tol = SETUP["tolerance"][case.dtype]

    def check(out: Any) -> tuple[bool, float, bool]:  # noqa: ANN401 - a torch.Tensor
        out = out.float()
        if not bool(torch.isfinite(out).all()):
            return False, float("nan"), False
        err = float((out - ref).abs().max())
        return True, err, bool(torch.allclose(out, ref, atol=tol, rtol=tol))

    found = []
    for kernel in kernels:
        backend, predicate = KERNEL_BACKENDS[kernel]
        found.append(
            judge(
                kernel,
                can_use=None if predicate is None else partial(_can_use, torch, predicate, case, inp),
                force=partial(_force, torch, backend, case, inp),
                check=check,
                compare_numerics=not case.dropout,
            )
        )
    return tuple(found)


def default_backend(  # pragma: no cover - needs a CUDA GPU
    torch: ModuleType, case: ProbeCase
) -> str | None:
    """Return the backend SDPA picks for ``case`` by itself (``torch._fused_sdp_choice``)."""
    inp = _make_inputs(torch, case)
    dropout = SETUP["dropout_p"] if case.dropout else 0.0
    try:
        choice = torch._fused_sdp_choice(  # noqa: SLF001
            inp["q"],
            inp["k"],
            inp["v"],
            inp["mask"],
            dropout,
            case.causal,
            enable_gqa=inp["gqa"],
        )
    except Exception:  # noqa: BLE001  (no default choice is data too)
        return None
    return _backend_name(torch, choice)


def collect(
    torch: ModuleType,
    cases: Sequence[ProbeCase],
    kernels: Sequence[str] = tuple(KERNEL_BACKENDS),
) -> dict[str, Any]:
    """Run every case on the current GPU and return the evidence data (JSON-ready).

    :raises NoGPUError: when torch sees no CUDA device.
    """
    env = environment(torch)
    rows = []
    for case in cases:
        observations = observe_case(torch, case, kernels)
        rows.append(
            {
                "query": case.axes(),
                "default_backend": default_backend(torch, case),
                "results": {o.kernel: o.to_json() for o in observations},
            }
        )
    # Read again now that SDPA has dispatched: the default order is settled lazily.
    env["sdpa_priority_order"] = priority_order(torch)
    return {
        "format": EVIDENCE_FORMAT,
        "probe": "capmatrix probe (PyTorch SDPA backends)",
        "environment": env,
        "setup": SETUP,
        "kernels": list(kernels),
        "cases": rows,
    }


def _import_torch() -> ModuleType:
    import torch  # noqa: PLC0415 - torch is optional: imported only when a probe runs

    module: ModuleType = torch
    return module


def run_probe(
    kernels: Sequence[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    *,
    matrix: Matrix | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Check the torch SDPA kernels of the matrix against the current GPU.

    For every declared query of the kernels at this GPU's SM, compare the matrix's verdict with
    forcing the backend (and note where ``can_use_*`` differs); print the disagreements; write the
    evidence to ``out`` when given. Return 0 with no disagreement, 1 with some, 2 without a usable
    GPU (or torch) or for an unknown kernel.
    """
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    names = list(KERNEL_BACKENDS) if not kernels else list(dict.fromkeys(kernels))
    unknown = [k for k in names if k not in KERNEL_BACKENDS]
    if unknown:
        stderr.write(
            f"capmatrix probe: cannot probe {', '.join(map(repr, unknown))}; "
            f"probe-able kernels: {', '.join(KERNEL_BACKENDS)}\n"
        )
        return 2
    matrix = default_matrix() if matrix is None else matrix
    missing = [k for k in names if k not in matrix.kernels]
    if missing:
        stderr.write(f"capmatrix probe: the matrix has no kernel {', '.join(map(repr, missing))}\n")
        return 2
    try:
        torch = _import_torch()
    except ImportError as exc:
        stderr.write(f"capmatrix probe: no GPU to probe: torch is not importable ({exc})\n")
        return 2
    try:
        env = environment(torch)
    except NoGPUError as exc:
        stderr.write(f"capmatrix probe: no GPU to probe: {exc}\n")
        return 2
    cases = probe_cases(universe_values(matrix))
    stdout.write(
        f"probing {len(names)} kernel(s) x {len(cases)} case(s) on {env['gpu']} (sm{env['sm']}), "
        f"torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}\n"
    )
    data = collect(torch, cases, names)
    comparison = compare(data, matrix)
    for note in comparison.notes:
        stdout.write(f"note: {note}\n")
    for bad in comparison.disagreements:
        stdout.write(f"DISAGREE: {bad}\n")
    stdout.write(
        f"{comparison.checks} checks, {len(comparison.disagreements)} disagreement(s), "
        f"{len(comparison.notes)} can_use_* difference(s)\n"
    )
    if out is not None:
        written = write_evidence(out, annotate(data, comparison))
        stdout.write(f"evidence written to {written}\n")
    return 1 if comparison.disagreements else 0
