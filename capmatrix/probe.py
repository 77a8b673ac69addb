"""Check the PyTorch SDPA part of the capability matrix against the GPU it runs on."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from types import ModuleType

__all__ = [
    "EVIDENCE_FORMAT",
    "KERNEL_BACKENDS",
    "SDPA_AXES",
    "SETUP",
    "Disagreement",
    "NoGPUError",
    "Observation",
    "ProbeCase",
    "collect",
    "compare",
    "environment",
    "observe_case",
    "probe_cases",
    "run_probe",
    "write_evidence",
]

#: Version of the evidence file layout written by :func:`collect`.
EVIDENCE_FORMAT = 1

#: Matrix kernel name -> (``torch.nn.attention.SDPBackend`` member, ``torch.backends.cuda`` predicate).
#: The math backend has no ``can_use_*`` predicate: forcing it is the only check.
KERNEL_BACKENDS: dict[str, tuple[str, str | None]] = {
    "torch_sdpa_flash": ("FLASH_ATTENTION", "can_use_flash_attention"),
    "torch_sdpa_efficient": ("EFFICIENT_ATTENTION", "can_use_efficient_attention"),
    "torch_sdpa_cudnn": ("CUDNN_ATTENTION", "can_use_cudnn_attention"),
    "torch_sdpa_math": ("MATH", None),
}

#: The axes an SDPA query ranges over (besides ``sm``, which is the GPU's own).
SDPA_AXES = ("dtype", "head_dim", "attention", "causal", "attn_mask", "dropout")

#: Matrix dtype -> torch dtype attribute (fp8 is E4M3, the format the matrix means by fp8).
_TORCH_DTYPES = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp8": "float8_e4m3fn",
}

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


class NoGPUError(RuntimeError):
    """No CUDA GPU (or no torch) is available to probe."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeCase:
    """One SDPA query: the axis values besides ``sm``."""

    dtype: str
    head_dim: int
    attention: str
    causal: bool
    attn_mask: bool
    dropout: bool

    def axes(self) -> dict[str, str | int | bool]:
        """Return the case as ``{axis: value}``."""
        return {
            "dtype": self.dtype,
            "head_dim": self.head_dim,
            "attention": self.attention,
            "causal": self.causal,
            "attn_mask": self.attn_mask,
            "dropout": self.dropout,
        }

    @classmethod
    def from_axes(cls, axes: Mapping[str, object]) -> ProbeCase:
        """Build a case from ``{axis: value}`` (as stored in an evidence file).

        :raises ValueError: when an axis is missing or has the wrong type.
        """
        try:
            dtype, head_dim, attention = axes["dtype"], axes["head_dim"], axes["attention"]
            causal, attn_mask, dropout = axes["causal"], axes["attn_mask"], axes["dropout"]
        except KeyError as exc:
            raise ValueError(f"probe case {dict(axes)!r} lacks axis {exc.args[0]!r}") from None
        if not (
            isinstance(dtype, str)
            and isinstance(attention, str)
            and isinstance(head_dim, int)
            and not isinstance(head_dim, bool)
            and all(isinstance(v, bool) for v in (causal, attn_mask, dropout))
        ):
            raise ValueError(f"probe case {dict(axes)!r} has a value of the wrong type")
        return cls(
            dtype=dtype,
            head_dim=head_dim,
            attention=attention,
            causal=bool(causal),
            attn_mask=bool(attn_mask),
            dropout=bool(dropout),
        )

    def label(self) -> str:
        """Return a short, stable text form, e.g. ``bf16/d128/gqa/causal``."""
        flags = [n for n, on in (("causal", self.causal), ("mask", self.attn_mask),
                                 ("dropout", self.dropout)) if on]
        return "/".join([self.dtype, f"d{self.head_dim}", self.attention, *flags])


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """What PyTorch said and did for one kernel on one case."""

    kernel: str
    #: ``torch.backends.cuda.can_use_*`` (None for math, which has no predicate, or on error).
    can_use: bool | None
    #: Forcing the backend with ``sdpa_kernel([backend])`` returned without error.
    ran: bool
    #: Largest absolute difference to the float32 reference (None when not run or not compared).
    max_abs_err: float | None = None
    #: Within tolerance of the reference (None when not compared: not run, or dropout).
    matches: bool | None = None
    #: First line of the error that forcing raised, if any.
    error: str | None = None

    @property
    def usable(self) -> bool:
        """Return the ground truth the matrix models: forcing ran and gave a right answer."""
        return self.ran and self.matches is not False

    def to_json(self) -> dict[str, object]:
        """Return the observation as JSON-ready data."""
        return {
            "can_use": self.can_use,
            "ran": self.ran,
            "max_abs_err": self.max_abs_err,
            "matches": self.matches,
            "error": self.error,
            "usable": self.usable,
        }

    @classmethod
    def from_json(cls, kernel: str, data: Mapping[str, Any]) -> Observation:
        """Read an observation back from :meth:`to_json` data."""
        return cls(
            kernel=kernel,
            can_use=data.get("can_use"),
            ran=bool(data["ran"]),
            max_abs_err=data.get("max_abs_err"),
            matches=data.get("matches"),
            error=data.get("error"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Disagreement:
    """The matrix and the GPU disagree on one kernel and case."""

    kernel: str
    case: ProbeCase
    #: ``forced`` (matrix vs forcing the backend: counts) or ``can_use`` (matrix vs the predicate).
    against: str
    matrix: str
    observed: bool
    detail: str = ""

    def __str__(self) -> str:
        seen = "usable" if self.observed else "not usable"
        what = "forcing it" if self.against == "forced" else "torch can_use_*"
        tail = f" ({self.detail})" if self.detail else ""
        return f"{self.kernel} {self.case.label()}: matrix says {self.matrix}, {what}: {seen}{tail}"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Comparison:
    disagreements: tuple[Disagreement, ...] = ()
    notes: tuple[Disagreement, ...] = ()
    verdicts: dict[tuple[str, ProbeCase], str] = field(default_factory=dict)


def probe_cases(values: Mapping[str, Sequence[object]] | None = None) -> tuple[ProbeCase, ...]:
    """Return every SDPA case over the given axis values (default: the shipped axes universe).

    ``attention: mla`` is left out: it is not an SDPA input shape (see the kernels' YAML).
    """
    if values is None:
        values = _universe_values()
    dtypes = [str(v) for v in values["dtype"]]
    head_dims = [int(str(v)) for v in values["head_dim"]]
    attentions = [str(v) for v in values["attention"] if v in _SDPA_ATTENTION]
    flags = (False, True)
    return tuple(
        ProbeCase(dtype=d, head_dim=h, attention=a, causal=c, attn_mask=m, dropout=p)
        for d, h, a, c, m, p in itertools.product(dtypes, head_dims, attentions, flags, flags, flags)
    )


def _universe_values() -> dict[str, Sequence[object]]:
    import capmatrix  # noqa: PLC0415  (the core is only needed when no values are given)

    matrix = capmatrix.load()
    return {axis: tuple(matrix.axes[axis].values) for axis in ("dtype", "head_dim", "attention")}


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
    order: list[str] | None = None
    with contextlib.suppress(Exception):
        order = [_backend_name(torch, b) for b in torch._C._get_sdp_priority_order()]  # noqa: SLF001
    return {
        "gpu": str(torch.cuda.get_device_name()),
        "sm": major * 10 + minor,
        "torch": str(torch.__version__),
        "cuda": str(torch.version.cuda),
        "cudnn": cudnn,
        "sdpa_priority_order": order,
    }


def _backend_name(torch: ModuleType, value: object) -> str:
    for member in torch.nn.attention.SDPBackend.__members__.values():
        if member == value or int(member) == value:
            return str(member.name)
    return str(value)


def _make_inputs(torch: ModuleType, case: ProbeCase) -> dict[str, Any]:
    gen = torch.Generator(device="cuda").manual_seed(SETUP["seed"])
    b, hq, s = SETUP["batch"], SETUP["q_heads"], SETUP["seq_len"]
    hkv = SETUP["kv_heads"][case.attention]
    dtype = getattr(torch, _TORCH_DTYPES[case.dtype])

    def rand(heads: int) -> Any:  # noqa: ANN401  (a torch.Tensor; torch is untyped here)
        x = torch.randn(b, heads, s, case.head_dim, device="cuda", generator=gen)
        return x.to(dtype)

    q, k, v = rand(hq), rand(hkv), rand(hkv)
    mask = None
    if case.attn_mask:
        mask = torch.rand(s, s, device="cuda", generator=gen) > 0.3  # noqa: PLR2004
        mask |= torch.eye(s, dtype=torch.bool, device="cuda")
    return {"q": q, "k": k, "v": v, "mask": mask, "gqa": hkv != hq}


def _reference(torch: ModuleType, case: ProbeCase, inp: Mapping[str, Any]) -> Any:  # noqa: ANN401
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


def _can_use(torch: ModuleType, predicate: str, case: ProbeCase, inp: Mapping[str, Any]) -> bool:
    cuda = torch.backends.cuda
    dropout = SETUP["dropout_p"] if case.dropout else 0.0
    args = (inp["q"], inp["k"], inp["v"], inp["mask"], dropout, case.causal)
    try:
        params = cuda.SDPAParams(*args, inp["gqa"])
    except TypeError:  # pragma: no cover - torch < 2.5 has no enable_gqa argument
        params = cuda.SDPAParams(*args)
    return bool(getattr(cuda, predicate)(params, debug=False))


def _force(
    torch: ModuleType, backend: str, case: ProbeCase, inp: Mapping[str, Any]
) -> Any:  # noqa: ANN401
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


def observe_case(
    torch: ModuleType, case: ProbeCase, kernels: Iterable[str] = tuple(KERNEL_BACKENDS)
) -> tuple[Observation, ...]:
    """Ask PyTorch about ``case`` and force each kernel's backend on it."""
    inp = _make_inputs(torch, case)
    ref = _reference(torch, case, inp)
    tol = SETUP["tolerance"][case.dtype]
    found = []
    for kernel in kernels:
        backend, predicate = KERNEL_BACKENDS[kernel]
        can_use = None
        if predicate is not None:
            try:
                can_use = _can_use(torch, predicate, case, inp)
            except Exception:  # noqa: BLE001  (a predicate that raises answers nothing)
                can_use = None
        with warnings.catch_warnings():
            # Forcing an unusable backend warns why before raising; the error is recorded.
            warnings.simplefilter("ignore")
            try:
                out = _force(torch, backend, case, inp)
            except Exception as exc:  # noqa: BLE001  (any failure means "not usable")
                found.append(Observation(kernel=kernel, can_use=can_use, ran=False,
                                         error=_short_error(exc)))
                continue
        out = out.float()
        if not bool(torch.isfinite(out).all()):
            found.append(Observation(kernel=kernel, can_use=can_use, ran=True, matches=False,
                                     error="non-finite output"))
            continue
        if case.dropout:
            found.append(Observation(kernel=kernel, can_use=can_use, ran=True))
            continue
        err = float((out - ref).abs().max())
        ok = bool(torch.allclose(out, ref, atol=tol, rtol=tol))
        found.append(Observation(kernel=kernel, can_use=can_use, ran=True,
                                 max_abs_err=round(err, 6), matches=ok))
    return tuple(found)


def _default_backend(torch: ModuleType, case: ProbeCase) -> str | None:
    inp = _make_inputs(torch, case)
    dropout = SETUP["dropout_p"] if case.dropout else 0.0
    try:
        choice = torch._fused_sdp_choice(  # noqa: SLF001
            inp["q"], inp["k"], inp["v"], inp["mask"], dropout, case.causal,
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
        rows.append({
            "query": case.axes(),
            "default_backend": _default_backend(torch, case),
            "results": {o.kernel: o.to_json() for o in observations},
        })
    return {
        "format": EVIDENCE_FORMAT,
        "probe": "capmatrix probe (torch SDPA)",
        "environment": env,
        "setup": SETUP,
        "kernels": list(kernels),
        "cases": rows,
    }


def read_evidence(data: Mapping[str, Any]) -> tuple[int, list[tuple[ProbeCase, tuple[Observation, ...]]]]:
    """Return ``(sm, [(case, observations)])`` from evidence data.

    :raises ValueError: when the data is not a probe evidence file of a known format.
    """
    if data.get("format") != EVIDENCE_FORMAT:
        raise ValueError(f"unknown evidence format {data.get('format')!r} (want {EVIDENCE_FORMAT})")
    sm = int(data["environment"]["sm"])
    rows = []
    for i, row in enumerate(data["cases"]):
        try:
            case = ProbeCase.from_axes(row["query"])
        except ValueError as exc:
            raise ValueError(f"cases[{i}]: {exc}") from None
        obs = tuple(Observation.from_json(k, r) for k, r in sorted(row["results"].items()))
        rows.append((case, obs))
    return sm, rows


def compare(
    data: Mapping[str, Any],
    matrix: object | None = None,
) -> _Comparison:
    """Compare evidence data with the matrix's verdicts for the same queries.

    A disagreement is the matrix's verdict (supported or not) differing from forcing the backend;
    the matrix differing from ``can_use_*`` is reported as a note.
    """
    import capmatrix  # noqa: PLC0415  (the core stays out of the torch-only collection path)

    sm, rows = read_evidence(data)
    disagreements: list[Disagreement] = []
    notes: list[Disagreement] = []
    verdicts: dict[tuple[str, ProbeCase], str] = {}
    for case, observations in rows:
        for obs in observations:
            query = capmatrix.KernelQuery(obs.kernel, sm=sm, **case.axes())
            verdict = str(capmatrix.resolve(query, matrix=matrix).verdict)
            verdicts[obs.kernel, case] = verdict
            said = verdict == "supported"
            if verdict not in {"supported", "unsupported"} or said != obs.usable:
                disagreements.append(Disagreement(
                    kernel=obs.kernel, case=case, against="forced", matrix=verdict,
                    observed=obs.usable, detail=obs.error or "",
                ))
            if obs.can_use is not None and obs.can_use != said:
                notes.append(Disagreement(
                    kernel=obs.kernel, case=case, against="can_use", matrix=verdict,
                    observed=obs.can_use,
                ))
    return _Comparison(disagreements=tuple(disagreements), notes=tuple(notes), verdicts=verdicts)


def write_evidence(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """Write evidence data as JSON atomically (a temporary file, then ``os.replace``)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = _dump(data)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        Path(tmp).replace(target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _dump(data: Mapping[str, Any]) -> str:
    # One case per line: reviewable diffs without a multi-megabyte file.
    head = {k: v for k, v in data.items() if k != "cases"}
    lines = [json.dumps(row, sort_keys=True) for row in data.get("cases", ())]
    body = json.dumps(head, indent=2, sort_keys=True)
    cases = "[\n" + ",\n".join("  " + line for line in lines) + "\n]" if lines else "[]"
    return body[:-2] + f',\n  "cases": {cases}\n}}\n' if head else f'{{"cases": {cases}}}\n'


def run_probe(  # pragma: no cover - replaced below once the CLI wiring lands
    kernels: Sequence[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    *,
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
) -> int:
    """Probe the current GPU; see the module docstring."""
    raise NotImplementedError
