"""Queries from Hugging Face configs: attention kind, head_dim, dtypes and the model family, derived."""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping

from capmatrix._core.nesting import depth
from capmatrix._shipped.default import default_matrix
from capmatrix.errors import InvalidQuery, UnknownName
from capmatrix.model import AxisType, format_value
from capmatrix.query import ANY, KernelQuery, _short

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from typing import Any, Final

    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue, ModelFamily

__all__ = [
    "ATTENTION_GQA",
    "ATTENTION_MHA",
    "ATTENTION_MLA",
    "ATTENTION_MQA",
    "query_from_hf_config",
    "read_hf_config",
]

#: A ``config.json`` larger than this is refused unread (real ones are a few KiB; the largest, with
#: long label maps, well under 1 MiB).
MAX_CONFIG_BYTES: Final = 8 * 1024 * 1024
#: Objects and arrays nested deeper than this are refused (real configs nest four or five levels).
MAX_CONFIG_DEPTH: Final = 64



#: The attention value of MLA configs and the MQA/GQA/MHA values (the axis spellings).
ATTENTION_MLA: Final = "mla"
ATTENTION_MQA: Final = "mqa"
ATTENTION_GQA: Final = "gqa"
ATTENTION_MHA: Final = "mha"


#: Fields that carry a decoder's attention geometry; a config needs one of them (or a known family).
_HEAD_FIELDS: Final = ("num_attention_heads", "n_head", "num_heads")


def _field(config: object, *names: str) -> Any:  # noqa: ANN401 - config values are untyped
    """The first of ``names`` that the config (a dict or an object) sets to something not None."""
    for name in names:
        value = config.get(name) if isinstance(config, Mapping) else getattr(config, name, None)
        if value is not None:
            return value
    return None


def _check_config(config: object, what: str) -> None:
    """Refuse what is not a config: a path, a string, a list, a number, None.

    A config is a mapping (a parsed ``config.json``) or an object with attributes (a
    ``transformers.PretrainedConfig``).

    :raises InvalidQuery: for anything else.
    """
    if isinstance(config, Mapping):
        return
    if isinstance(config, str | bytes | bytearray | os.PathLike):
        raise InvalidQuery(
            f"{what} is a {type(config).__name__}, not a config; pass the parsed config.json "
            "(json.load) or a transformers config object, not its path"
        )
    if config is None or isinstance(config, numbers.Number) or not hasattr(config, "__dict__"):
        raise InvalidQuery(
            f"{what} must be a mapping (a parsed config.json) or a config object, "
            f"got {type(config).__name__}: {_short(config)}"
        )


def _int_field(config: object, names: tuple[str, ...], *, zero: bool = False) -> int | None:
    """A positive int field (``0`` too when ``zero``), or None when the config does not set it.

    :raises InvalidQuery: for a value of another type, a negative one, or 0 unless ``zero``.
    """
    value = _field(config, *names)
    if value is None:
        return None
    low = 0 if zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        what = "a non-negative int" if zero else "a positive int"
        raise InvalidQuery(f"config field {names[0]!r} must be {what}, got {_short(value)}")
    return int(value)


def _positive_int(config: object, names: tuple[str, ...]) -> int | None:
    return _int_field(config, names)


def _dtype_words(matrix: Matrix) -> dict[str, str]:
    """The dtype axis's values and spellings (torch's names without ``torch.``), each with its value."""
    axis = matrix.axes["dtype"]
    return {**{str(v): str(v) for v in axis.values},
            **{word.removeprefix("torch."): value for word, value in axis.spellings.items()}}


def _config_dtype(config: object, words: Mapping[str, str]) -> str | None:
    raw = _field(config, "torch_dtype", "dtype")
    if raw is None:
        return None
    text = _dtype_name(raw).removeprefix("torch.")
    found = words.get(text)
    if found is None:
        raise InvalidQuery(
            f"config torch_dtype {_short(raw)} has no dtype axis value "
            f"(known: {', '.join(sorted(words))}); pass dtype=... to override"
        )
    return found


def _dtype_name(raw: object) -> str:
    """The text of a dtype field: a string, or ``str()`` of a dtype object (``torch.bfloat16``)."""
    if isinstance(raw, str):
        return str.__str__(raw)
    try:
        return str(raw)
    except Exception:  # noqa: BLE001 - a foreign __str__ may raise anything; then no dtype is known
        return ""


def _text_config(config: object) -> object:
    """The language model's part of a config: its ``text_config`` when it nests one.

    Multimodal configs (llava, mllama, Llama 4, Gemma 3) keep the decoder's attention fields in
    ``text_config``; a config that sets ``num_attention_heads`` itself is used as it is.
    """
    nested = _field(config, "text_config")
    if nested is None or _field(config, *_HEAD_FIELDS) is not None:
        return config
    if not isinstance(nested, Mapping) and (
        isinstance(nested, str | bytes | numbers.Number | list | tuple) or not hasattr(nested, "__dict__")
    ):
        raise InvalidQuery(f"config field 'text_config' must be a mapping, got {_short(nested)}")
    return nested


def _config_axes(config: object, dtypes: Mapping[str, str]) -> dict[str, AxisValue]:
    """Derive attention, head_dim, q_per_kv, dtype and sliding_window from a config.

    ``dtypes``: the dtype words a config may name, each with its axis value (:func:`_dtype_words`).
    """
    outer = config
    config = _text_config(config)
    axes: dict[str, AxisValue] = {}
    heads = _positive_int(config, _HEAD_FIELDS)
    kv_lora_rank = _int_field(config, ("kv_lora_rank",), zero=True)
    rope_dim = _int_field(config, ("qk_rope_head_dim",), zero=True)
    # MLA first (P12: truthy kv_lora_rank and qk_rope_head_dim): MLA configs also carry
    # num_key_value_heads equal to num_attention_heads, which would otherwise read as MHA.
    if kv_lora_rank and rope_dim:
        axes["attention"] = ATTENTION_MLA
        axes["head_dim"] = kv_lora_rank + rope_dim
        if heads is not None:
            axes["q_per_kv"] = heads  # every query head shares the one latent KV head
        # DeepSeek Sparse Attention: vLLM builds the indexer, and so asks for a sparse MLA backend, when
        # the config has index_topk at all (is_v32 = hasattr(config, "index_topk"),
        # vllm/model_executor/models/deepseek_v2.py:1138 @ 4ba787ec9).
        if _has_field(config, "index_topk"):
            _positive_int(config, ("index_topk",))  # a present field must still be a positive int
            axes["use_sparse"] = True
    elif heads is not None:
        kv_heads = _positive_int(config, ("num_key_value_heads", "num_kv_heads", "n_head_kv"))
        if kv_heads is None and _field(config, "multi_query_attention") is True:
            # ChatGLM: multi_query_group_num KV heads when multi_query_attention is set, else one
            # per query head (vllm-project/vllm vllm/model_executor/models/chatglm.py
            # @ 1b2c2248f4f2f5045ed4e3d809099f1131c69546, GLMAttention.__init__).
            kv_heads = _positive_int(config, ("multi_query_group_num",))
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
            if hidden % heads:
                raise InvalidQuery(
                    f"hidden_size {hidden} is not a multiple of num_attention_heads {heads}, so "
                    "head_dim cannot be derived; the config must set head_dim"
                )
            head_dim = hidden // heads
        if head_dim is not None:
            axes["head_dim"] = head_dim
    dtype = _config_dtype(config, dtypes)
    if dtype is None and outer is not config:
        dtype = _config_dtype(outer, dtypes)  # multimodal configs often set torch_dtype at the top only
    if dtype is not None:
        axes["dtype"] = dtype
        axes["kv_cache_dtype"] = dtype  # engines default the KV cache to the model dtype ("auto")
    window = _field(config, "sliding_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)):
        raise InvalidQuery(
            f"config field 'sliding_window' must be an int (the window length) or null, "
            f"got {_short(window)}"
        )
    if window is not None and window > 0:
        axes["sliding_window"] = _field(config, "use_sliding_window") is not False
    elif _has_field(config, "sliding_window"):
        axes["sliding_window"] = False
    axes.update(_layer_feature_axes(config, outer, windowed=axes.get("sliding_window") is True))
    bias = _position_bias(config, outer)
    if bias is not None:
        axes["position_bias"] = bias
    return axes


#: model_types whose attention always adds ALiBi biases, with no config field to say so:
#: huggingface/transformers src/transformers/models/bloom/modeling_bloom.py
#: @ 0078a6cd96d5ab7c3c429b9fdc3fbc703d894dcc (BloomAttention.forward adds ``alibi`` to every score).
_ALIBI_MODEL_TYPES: Final = frozenset({"bloom"})


def _position_bias(config: object, outer: object) -> str | None:
    """``alibi`` when the config says its attention adds ALiBi biases, ``none`` when it says not.

    A boolean ``alibi`` field (Falcon: huggingface/transformers
    src/transformers/models/falcon/configuration_falcon.py @ 055855363e97555535aa9d133f53d99ef75bfd9c,
    ``rotary`` is ``not alibi``), MPT's ``attn_config.alibi``, or a model_type that always uses ALiBi
    (``_ALIBI_MODEL_TYPES``). None when the config says nothing, so the model entry or the default
    decides.

    :raises InvalidQuery: when an ``alibi`` field is not a boolean.
    """
    said: list[bool] = []
    nested = _field(config, "attn_config")
    for holder, name in ((config, "alibi"), (nested, "attn_config.alibi")):
        value = None if holder is None else _field(holder, "alibi")
        if value is not None and not isinstance(value, bool):
            raise InvalidQuery(f"config field {name!r} must be true or false, got {_short(value)}")
        if value is not None:
            said.append(value)
    if any(said) or {_model_type(outer), _model_type(config)} & _ALIBI_MODEL_TYPES:
        return "alibi"
    return "none" if said else None


#: model_types whose attention always carries learned per-head sinks, which are weights, not config
#: fields: huggingface/transformers src/transformers/models/gpt_oss/modeling_gpt_oss.py
#: @ 6edf5b311854175ff83c59179b3360beca1ceffc (GptOssAttention.__init__ creates ``self.sinks`` in every
#: layer, unconditionally).
_SINK_MODEL_TYPES: Final = frozenset({"gpt_oss"})


def _has_field(config: object, name: str) -> bool:
    return name in config if isinstance(config, Mapping) else hasattr(config, name)


def _layer_feature_axes(config: object, outer: object, *, windowed: bool) -> dict[str, AxisValue]:
    """per_layer_window, chunked_attention, logit_softcapping and attention_sinks, where the config says.

    per_layer_window: ``layer_types`` names more than one kind of layer (gpt-oss, newer Gemma 2/3
    configs), or a windowed config sets ``sliding_window_pattern`` above 1 (Gemma 3: one global layer
    every N). chunked_attention: a positive ``attention_chunk_size`` (Llama 4). logit_softcapping: a
    positive ``attn_logit_softcapping`` (Gemma 2; an explicit null or 0 reads as false).
    attention_sinks: a ``use_sinks`` field, else the model_type (``_SINK_MODEL_TYPES``). An axis the
    config says nothing about is left out, so the model entry or the axis default decides.
    """
    axes: dict[str, AxisValue] = {}
    layer_types = _field(config, "layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, (list, tuple)) or not all(isinstance(t, str) for t in layer_types):
            raise InvalidQuery(f"config field 'layer_types' must be a list of strings, got {layer_types!r}")
        axes["per_layer_window"] = len(set(layer_types)) > 1
    elif windowed:
        pattern = _positive_int(config, ("sliding_window_pattern",))
        if pattern is not None:
            axes["per_layer_window"] = pattern > 1
    chunk = _positive_int(config, ("attention_chunk_size",))
    if chunk is not None:
        axes["chunked_attention"] = True
    elif _has_field(config, "attention_chunk_size"):
        axes["chunked_attention"] = False
    if _has_field(config, "attn_logit_softcapping"):
        cap = _field(config, "attn_logit_softcapping")
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float))):
            raise InvalidQuery(f"config field 'attn_logit_softcapping' must be a number or null, got {cap!r}")
        axes["logit_softcapping"] = cap is not None and cap > 0
    sinks = _field(config, "use_sinks")
    if sinks is not None:
        axes["attention_sinks"] = sinks is True
    elif {_model_type(outer), _model_type(config)} & _SINK_MODEL_TYPES:
        axes["attention_sinks"] = True
    return axes


def _model_type(config: object) -> str | None:
    """The config's ``model_type``, or None.

    :raises InvalidQuery: when it is not a string.
    """
    found = _field(config, "model_type")
    if found is None or isinstance(found, str):
        return found
    raise InvalidQuery(f"config field 'model_type' must be a string, got {_short(found)}")


#: The fields that tell checkpoints of one ``model_type`` apart, read as raw values (from ``text_config``
#: for a multimodal config): Gemma-2 9B and 27B share the type, not their heads, head size or width.
_SHAPE_FIELDS: Final = (
    _HEAD_FIELDS, ("num_key_value_heads", "num_kv_heads", "n_head_kv"), ("head_dim",),
    ("hidden_size", "n_embd", "d_model"), ("num_hidden_layers", "n_layer"), ("kv_lora_rank",),
    ("qk_rope_head_dim",),
)


def _shape(config: object) -> dict[str, object]:
    """The shape fields a config sets (by their first name), as set."""
    text = _text_config(config)
    found = {names[0]: _field(text, *names) for names in _SHAPE_FIELDS}
    return {name: value for name, value in found.items() if value is not None}


def _recorded(model: ModelFamily, model_type: str) -> dict[str, object] | None:
    """The shape of the config ``model`` records, when it records one of ``model_type``; else None."""
    if model.hf_config is None:
        return None
    try:
        if model_type not in {_field(model.hf_config, "model_type"),
                              _field(_text_config(model.hf_config), "model_type")}:
            return None
        return _shape(model.hf_config)
    except InvalidQuery:  # a recorded text_config that is no mapping: it describes nothing here
        return None


def _config_family(config: object, matrix: Matrix) -> str | None:
    """The model a config belongs to.

    By its ``_name_or_path`` among the models' Hugging Face ids; else, for its ``model_type`` (the outer
    one, then ``text_config``'s), the model whose recorded config has its shape (the fields of
    :data:`_SHAPE_FIELDS` both set agree: a checkpoint is labelled by its own geometry), the model listing
    the type in ``hf_model_types`` first; else that model.
    """
    path = _field(config, "_name_or_path")
    if isinstance(path, str) and path.count("/") == 1:
        found = matrix.model(path)
        if found is not None:
            return found.name
    text = _text_config(config)
    shape = _shape(config)
    for model_type in (_model_type(config), _model_type(text)):
        if model_type is None:
            continue
        family = next((n for n, m in matrix.models.items() if model_type in m.hf_model_types), None)
        ordered = sorted(matrix.models.values(), key=lambda m: m.name != family)  # stable: YAML order
        for model in ordered:
            recorded = _recorded(model, model_type)
            if recorded is None:
                continue
            shared = [name for name in shape if name in recorded]
            if shared and all(shape[name] == recorded[name] for name in shared):
                return model.name
        if family is not None:
            return family
    return None


def read_hf_config(path: str | os.PathLike[str]) -> dict[str, object]:
    """A Hugging Face ``config.json`` file as a dict, read within :data:`MAX_CONFIG_BYTES`.

    :raises InvalidQuery: when the file is too large, not UTF-8, not JSON (with its line and column),
        nested deeper than :data:`MAX_CONFIG_DEPTH` or not one JSON object.
    :raises OSError: when it cannot be read.
    """
    where = os.fsdecode(path)
    with open(path, "rb") as handle:  # noqa: PTH123 - a user path (a pipe too), OSError reported
        raw = handle.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise InvalidQuery(
            f"{where}: larger than {MAX_CONFIG_BYTES} bytes, which no config.json is; "
            "pass the model's config.json as downloaded"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InvalidQuery(
            f"{where}:{line}:{column}: not UTF-8 (byte 0x{raw[exc.start]:02x}); a config.json is "
            "UTF-8 JSON, pass the model's config.json as downloaded"
        ) from None
    import json  # noqa: PLC0415 - only reading a config file needs it, not every query's start

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidQuery(
            f"{where}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); "
            "pass the model's config.json as downloaded"
        ) from None
    except (RecursionError, ValueError) as exc:  # nesting past the interpreter's limit; huge ints
        what = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InvalidQuery(f"{where}: not a config.json ({what})") from None
    if not isinstance(data, dict):
        raise InvalidQuery(f"{where}:1:1: a config.json holds one JSON object, got {_json_kind(data)}")
    if depth(data, MAX_CONFIG_DEPTH) > MAX_CONFIG_DEPTH:
        raise InvalidQuery(
            f"{where}: objects and arrays nested deeper than {MAX_CONFIG_DEPTH} levels, which no "
            "config.json is"
        )
    return data


def _json_kind(value: object) -> str:
    """The JSON name of a parsed value's type."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


#: Axes the config derives as "the engine's default" (the KV cache follows the model dtype), so that an
#: engine with a default word of its own for them (``engine_defaults``) is asked in that word.
_ENGINE_DEFAULTED = ("kv_cache_dtype",)


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
    the model whose recorded config of the same ``model_type`` has the config's own geometry (a
    checkpoint: Gemma-2 27B is not the first gemma2 model), else the one listing ``model_type`` in its
    ``hf_model_types``. A multimodal config's attention fields are
    read from its nested ``text_config`` (llava, mllama, Llama 4, Gemma 3). per_layer_window from
    ``layer_types`` / ``sliding_window_pattern``, chunked_attention from ``attention_chunk_size``,
    logit_softcapping from ``attn_logit_softcapping``, attention_sinks from ``use_sinks`` or a model_type
    whose attention always has sinks (gpt_oss); for MLA, use_sparse (vLLM's sparse MLA) from an
    ``index_topk`` field (DeepSeek-V3.2).
    ``overrides`` (axis values, an axis named by its name or an alias) win over everything derived. The
    KV-cache dtype derived is the model dtype (TensorRT-LLM's reading of ``auto``), unless ``kernel``
    names a kernel or role whose engine defaults it: then that default (vLLM's ``auto``).

    :raises InvalidQuery: for a config field of the wrong type, an unknown dtype, an enum value or axis
        that the matrix does not know, or an unknown ``model``.
    """
    m = default_matrix() if matrix is None else matrix
    _check_config(config, "config")
    derived = _config_axes(config, _dtype_words(m))
    family = model
    if family is None:
        family = _config_family(config, m)
    elif m.model(family) is None:
        raise UnknownName("model", family, m.models)
    if "attention" not in derived and family is None:
        raise InvalidQuery(
            "the config gives no attention geometry (num_attention_heads, or kv_lora_rank and "
            "qk_rope_head_dim, at the top or in text_config) and no model_type or _name_or_path "
            "the matrix knows; pass a model's config.json (parsed) or its transformers config, "
            "or name the model with model=..."
        )
    # A value derived as one engine reads a default (the KV cache "follows the model dtype") yields to the
    # asked kernel's or role's own engine default, in its own word (vLLM's kv_cache_dtype "auto").
    target = None if kernel is None else m.kernels.get(kernel) or m.roles.get(kernel)
    if target is not None:
        pinned = m.pins(target)
        derived.update({name: pinned[name] for name in _ENGINE_DEFAULTED
                        if name in pinned and name in derived})
    # An override may name an axis by an engine's word for it (vLLM's block_size): it overrides the axis.
    aliases = {alias: axis.name for axis in m.axes.values() for alias in axis.aliases}
    overrides = {aliases.get(name, name): value for name, value in overrides.items()}
    # The query normalises every value (a StrEnum override answers as its plain value) first.
    query = KernelQuery(kernel, model=family, **{**derived, **overrides})
    for name, value in query.axes.items():
        axis = m.axes.get(name)
        if axis is None:
            raise UnknownName("axis", name, m.axes)
        if value is ANY:
            continue
        if axis.index(value) is None and not (
            axis.type is AxisType.INT and isinstance(value, int) and not isinstance(value, bool)
        ):
            known = ", ".join(map(format_value, axis.known))
            raise InvalidQuery(f"{_short(value)} is not a value of axis {name!r} ({known})")
    return query
