"""Engine integration: SM detection, queries from Hugging Face configs, and bound per-engine decisions.

An engine answers its static questions (SM, backend, model, dtypes) once at start with :func:`bind`,
which resolves every combination of the few dynamic axes eagerly; the per-step call is then one dict
lookup. torch is imported only inside :func:`detect_sm`.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from capmatrix.errors import CapmatrixError, InvalidQuery, UnknownName
from capmatrix.model import AxisType
from capmatrix.query import KernelQuery
from capmatrix.resolver import Verdict, default_matrix, resolve

if TYPE_CHECKING:
    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue
    from capmatrix.resolver import Resolution

__all__ = [
    "SM_ENV",
    "BoundDecision",
    "InvalidSMOverride",
    "NoDevice",
    "UnboundAxes",
    "bind",
    "detect_sm",
    "query_from_hf_config",
]

#: Environment variable that overrides :func:`detect_sm` (an int such as ``121``).
SM_ENV: Final = "CAPMATRIX_SM"

_SM_TEXT = re.compile(r"[1-9][0-9]{1,2}")


class NoDevice(CapmatrixError, RuntimeError):
    """No CUDA device could be asked for its compute capability.

    >>> print(NoDevice("torch is not installed"))
    cannot detect the SM: torch is not installed; set CAPMATRIX_SM (e.g. CAPMATRIX_SM=90) to override
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot detect the SM: {self.reason}; set {SM_ENV} (e.g. {SM_ENV}=90) to override"


class InvalidSMOverride(CapmatrixError, ValueError):
    """The SM override variable holds something other than an SM number.

    >>> print(InvalidSMOverride("CAPMATRIX_SM", "sm_90"))
    CAPMATRIX_SM='sm_90' is not an SM number; use major*10+minor as an int, e.g. 90 or 121
    """

    def __init__(self, variable: str, value: str) -> None:
        super().__init__(variable, value)
        self.variable = variable
        self.value = value

    def __str__(self) -> str:
        return (
            f"{self.variable}={self.value!r} is not an SM number; "
            "use major*10+minor as an int, e.g. 90 or 121"
        )


class UnboundAxes(CapmatrixError, ValueError):
    """A bound decision would depend on axes that neither the static nor the dynamic part fixes."""

    def __init__(self, kernel: str, key: object, residual: str) -> None:
        super().__init__(kernel, key, residual)
        self.kernel = kernel
        self.key = key
        self.residual = residual

    def __str__(self) -> str:
        return (
            f"{self.kernel}: the answer for dynamic key {self.key!r} depends on axes left open "
            f"(supported when {self.residual}); bind them statically or make them dynamic"
        )


# --------------------------------------------------------------------------------------------------
# SM detection

_SM_CACHE: dict[int, int] = {}


def _sm_override() -> int | None:
    raw = os.environ.get(SM_ENV)
    if raw is None:
        return None
    text = raw.strip()
    if not _SM_TEXT.fullmatch(text):
        raise InvalidSMOverride(SM_ENV, raw)
    return int(text)


def detect_sm(device: object = None) -> int:
    """Return the compute capability of a CUDA device as ``major*10+minor``, raw (GB10 is 121).

    ``CAPMATRIX_SM`` overrides detection. Results are cached per device index.

    :param device: None (the current device), an index, ``"cuda:N"`` or a ``torch.device``.
    :raises InvalidSMOverride: when ``CAPMATRIX_SM`` is set to something other than an SM number.
    :raises NoDevice: without torch, without CUDA, or for a non-CUDA device.
    """
    override = _sm_override()
    if override is not None:
        return override
    try:
        import torch  # noqa: PLC0415 - torch is optional and imported only at the edge
    except ImportError:
        raise NoDevice("torch is not installed") from None
    if not torch.cuda.is_available():
        raise NoDevice("torch sees no CUDA device")
    index = _device_index(torch, device)
    found = _SM_CACHE.get(index)
    if found is None:
        major, minor = torch.cuda.get_device_capability(index)
        found = int(major) * 10 + int(minor)
        _SM_CACHE[index] = found
    return found


def _device_index(torch: Any, device: object) -> int:  # noqa: ANN401 - the torch module
    if device is None:
        return int(torch.cuda.current_device())
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    dev = torch.device(device) if isinstance(device, str) else device
    if getattr(dev, "type", None) != "cuda":
        raise NoDevice(f"{device!r} is not a CUDA device")
    index = getattr(dev, "index", None)
    return int(torch.cuda.current_device()) if index is None else int(index)


# --------------------------------------------------------------------------------------------------
# Queries from Hugging Face configs

_DTYPES: Final[Mapping[str, str]] = {
    "float32": "fp32",
    "float": "fp32",
    "fp32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float8_e4m3fn": "fp8",
    "fp8": "fp8",
}

#: The attention value of MLA configs and the MQA/GQA/MHA values (the axis spellings).
ATTENTION_MLA: Final = "mla"
ATTENTION_MQA: Final = "mqa"
ATTENTION_GQA: Final = "gqa"
ATTENTION_MHA: Final = "mha"


def _field(config: object, *names: str) -> Any:  # noqa: ANN401 - config values are untyped
    """The first of ``names`` that the config (a dict or an object) sets to something not None."""
    for name in names:
        value = config.get(name) if isinstance(config, Mapping) else getattr(config, name, None)
        if value is not None:
            return value
    return None


def _positive_int(config: object, names: tuple[str, ...]) -> int | None:
    value = _field(config, *names)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidQuery(f"config field {names[0]!r} must be a positive int, got {value!r}")
    return value


def _config_dtype(config: object) -> str | None:
    raw = _field(config, "torch_dtype", "dtype")
    if raw is None:
        return None
    text = str(raw).removeprefix("torch.")
    found = _DTYPES.get(text)
    if found is None:
        raise InvalidQuery(
            f"config torch_dtype {raw!r} has no dtype axis value "
            f"(known: {', '.join(sorted(_DTYPES))}); pass dtype=... to override"
        )
    return found


def _text_config(config: object) -> object:
    """The language model's part of a config: its ``text_config`` when it nests one.

    Multimodal configs (llava, mllama, Llama 4, Gemma 3) keep the decoder's attention fields in
    ``text_config``; a config that sets ``num_attention_heads`` itself is used as it is.
    """
    nested = _field(config, "text_config")
    if nested is None or _field(config, "num_attention_heads", "n_head", "num_heads") is not None:
        return config
    if not isinstance(nested, Mapping) and not hasattr(nested, "__dict__"):
        raise InvalidQuery(f"config field 'text_config' must be a mapping, got {nested!r}")
    return nested


def _config_axes(config: object) -> dict[str, AxisValue]:
    """Derive attention, head_dim, q_per_kv, dtype and sliding_window from a config."""
    outer = config
    config = _text_config(config)
    axes: dict[str, AxisValue] = {}
    heads = _positive_int(config, ("num_attention_heads", "n_head", "num_heads"))
    kv_lora_rank = _field(config, "kv_lora_rank")
    rope_dim = _field(config, "qk_rope_head_dim")
    # MLA first (P12: truthy kv_lora_rank and qk_rope_head_dim): MLA configs also carry
    # num_key_value_heads equal to num_attention_heads, which would otherwise read as MHA.
    if kv_lora_rank and rope_dim:
        axes["attention"] = ATTENTION_MLA
        axes["head_dim"] = int(kv_lora_rank) + int(rope_dim)
        if heads is not None:
            axes["q_per_kv"] = heads  # every query head shares the one latent KV head
    elif heads is not None:
        kv_heads = _positive_int(config, ("num_key_value_heads", "num_kv_heads", "n_head_kv"))
        if kv_heads is None and _field(config, "multi_query") is True:
            kv_heads = 1  # Falcon-7B style configs
        if kv_heads is None:
            kv_heads = heads
        if heads % kv_heads:
            raise InvalidQuery(
                f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}"
            )
        if kv_heads == 1 and heads > 1:
            axes["attention"] = ATTENTION_MQA
        elif kv_heads < heads:
            axes["attention"] = ATTENTION_GQA
        else:
            axes["attention"] = ATTENTION_MHA
        axes["q_per_kv"] = heads // kv_heads
        head_dim = _positive_int(config, ("head_dim",))
        hidden = _positive_int(config, ("hidden_size", "n_embd", "d_model"))
        if head_dim is None and hidden is not None:
            head_dim = hidden // heads
        if head_dim is not None:
            axes["head_dim"] = head_dim
    dtype = _config_dtype(config)
    if dtype is None and outer is not config:
        dtype = _config_dtype(outer)  # multimodal configs often set torch_dtype at the top only
    if dtype is not None:
        axes["dtype"] = dtype
        axes["kv_cache_dtype"] = dtype  # engines default the KV cache to the model dtype ("auto")
    window = _field(config, "sliding_window")
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        axes["sliding_window"] = _field(config, "use_sliding_window") is not False
    elif "sliding_window" in (config if isinstance(config, Mapping) else dir(config)):
        axes["sliding_window"] = False
    return axes


def _config_family(config: object, matrix: Matrix) -> str | None:
    """The model a config belongs to.

    By its ``_name_or_path`` among the models' Hugging Face ids, else by ``model_type`` (the outer one,
    then ``text_config``'s) among their ``hf_model_types``.
    """
    path = _field(config, "_name_or_path")
    if isinstance(path, str) and path.count("/") == 1:
        found = matrix.model(path)
        if found is not None:
            return found.name
    text = _text_config(config)
    for model_type in (_field(config, "model_type"), _field(text, "model_type")):
        if model_type is None:
            continue
        for name, fam in matrix.models.items():
            if model_type in fam.hf_model_types:
                return name
    return None


def query_from_hf_config(
    config: object,
    kernel: str | None = None,
    *,
    matrix: Matrix | None = None,
    model: str | None = None,
    **overrides: AxisValue,
) -> KernelQuery:
    """Build a query from a Hugging Face config (an object or its ``config.json`` dict).

    attention: MLA when ``kv_lora_rank`` and ``qk_rope_head_dim`` are truthy, else by KV heads
    (1: mqa, fewer: gqa, equal or missing: mha); head_dim: ``kv_lora_rank + qk_rope_head_dim`` for MLA,
    else ``head_dim`` or ``hidden_size // num_attention_heads``; dtype and kv_cache_dtype from
    ``torch_dtype``; the model family from ``_name_or_path`` through the models' ``hf_ids``, else
    from ``model_type`` through their ``hf_model_types``. A multimodal config's attention fields are
    read from its nested ``text_config`` (llava, mllama, Llama 4, Gemma 3).
    ``overrides`` (axis values) win over everything derived.

    :raises InvalidQuery: for a config field of the wrong type, an unknown dtype, an enum value or axis
        that the matrix does not know, or an unknown ``model``.
    """
    m = default_matrix() if matrix is None else matrix
    axes = _config_axes(config)
    axes.update(overrides)
    family = model
    if family is None:
        family = _config_family(config, m)
    elif m.model(family) is None:
        raise UnknownName("model", family, m.models)
    for name, value in axes.items():
        axis = m.axes.get(name)
        if axis is None:
            raise UnknownName("axis", name, m.axes)
        if axis.index(value) is None and not (
            axis.type is AxisType.INT and isinstance(value, int) and not isinstance(value, bool)
        ):
            known = ", ".join(map(str, axis.values))
            raise InvalidQuery(f"{value!r} is not a value of axis {name!r} ({known})")
    return KernelQuery(kernel, model=family, **axes)


# --------------------------------------------------------------------------------------------------
# Bound decisions

DynamicSpec = Sequence[str] | Mapping[str, Mapping[Hashable, "AxisValue"]]


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundDecision:
    """One kernel's or gate's answers for an engine, precomputed for every dynamic key.

    ``lookup(key)`` is ``table.__getitem__``: the per-step cost is one dict lookup. With one dynamic
    axis the key is that axis's engine value; with several it is a tuple in ``dynamic`` order; with
    none, ``value`` holds the answer and ``lookup`` takes the empty tuple.
    """

    kernel: str
    query: KernelQuery
    dynamic: tuple[str, ...]
    table: Mapping[Hashable, bool]
    resolutions: Mapping[Hashable, Resolution]
    lookup: Callable[[Hashable], bool] = field(repr=False)
    value: bool | None = None

    def __call__(self, *key: Hashable) -> bool:
        """Answer for a dynamic key (slower than ``lookup``; raises KeyError for an unknown key)."""
        if len(self.dynamic) == 1:
            return self.table[key[0]]
        return self.table[key]

    def explain(self, *key: Hashable) -> Resolution:
        """The resolution (verdict and reasons) behind the answer for ``key``."""
        if len(self.dynamic) == 1:
            return self.resolutions[key[0]]
        return self.resolutions[key]


def _dynamic_keys(
    matrix: Matrix, dynamic: DynamicSpec
) -> tuple[tuple[str, ...], list[list[tuple[Hashable, AxisValue]]]]:
    if isinstance(dynamic, str) or not isinstance(dynamic, (Mapping, list, tuple)):
        raise InvalidQuery(
            f"dynamic must be a list of axis names or a mapping axis -> {{engine value: axis value}}, "
            f"got {type(dynamic).__name__}"
        )
    names: tuple[str, ...] = tuple(dynamic)
    choices: list[list[tuple[Hashable, AxisValue]]] = []
    for name in names:
        axis = matrix.axes.get(name) if isinstance(name, str) else None
        if axis is None:
            raise UnknownName("axis", name, matrix.axes)
        if isinstance(dynamic, Mapping):
            mapping = dynamic[name]
            if not isinstance(mapping, Mapping) or not mapping:
                raise InvalidQuery(
                    f"dynamic[{name!r}] must be a non-empty mapping of engine values to values of "
                    f"axis {name!r}, got {mapping!r}"
                )
            choices.append(list(mapping.items()))
        else:
            choices.append([(v, v) for v in axis.values])
    return names, choices


def bind(
    kernel: str,
    *,
    dynamic: DynamicSpec = (),
    model: str | None = None,
    matrix: Matrix | None = None,
    strict: bool = True,
    **static: AxisValue,
) -> BoundDecision:
    """Resolve ``kernel`` for the static axis values and every combination of the dynamic ones.

    ``dynamic`` names the axes that change per step: a sequence of axis names (the keys are the axis's
    known values), or a mapping from axis name to ``{engine value: axis value}`` so that the engine
    looks up with its own values (e.g. ``{"spec_dec_pass": {False: "draft", True: "first_chain_draft"}}``).

    :raises InvalidQuery: for an unknown kernel, axis or value (a static axis also named dynamic).
    :raises UnboundAxes: when ``strict`` and some answer depends on axes left open.
    """
    m = default_matrix() if matrix is None else matrix
    names, choices = _dynamic_keys(m, dynamic)
    clash = sorted(set(names) & set(static))
    if clash:
        raise InvalidQuery(f"axes {clash} are both static and dynamic")
    base = KernelQuery(kernel, model=model, **static)
    table: dict[Hashable, bool] = {}
    resolutions: dict[Hashable, Resolution] = {}
    for combo in itertools.product(*choices):
        key: Hashable = combo[0][0] if len(names) == 1 else tuple(k for k, _ in combo)
        query = base.replace(**{n: v for n, (_, v) in zip(names, combo, strict=True)})
        resolution = resolve(query, matrix=m)
        if strict and resolution.verdict is Verdict.DEPENDS:
            raise UnboundAxes(kernel, key, str(resolution.residual))
        table[key] = bool(resolution)
        resolutions[key] = resolution
    value = table[()] if not names else None
    return BoundDecision(
        kernel=kernel,
        query=base,
        dynamic=names,
        table=table,
        resolutions=resolutions,
        lookup=table.__getitem__,
        value=value,
    )
