"""vLLM's CUDA attention-backend choice, answered from the matrix's ``vllm_attention`` role, per release.

The arguments map to axes; the priority lists, the validity of each backend and every default live in
the YAML (role ``vllm_attention``, kernels ``vllm_<backend>``), and so do vLLM's own words of each
release (``releases.yaml``: the ``AttentionBackendEnum`` members, the KV-cache dtype words). Backend
names map to kernels by spelling: ``FLASH_ATTN`` is ``vllm_flash_attn``. ``version`` picks the release
(``0.33.0``); without it, the newest the matrix models.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence

from capmatrix._core.start import refused_at_start, refusing_reason
from capmatrix._shipped.default import _resolver
from capmatrix.errors import CapmatrixError, InvalidArgument, did_you_mean
from capmatrix.model import NONE
from capmatrix.query import KernelQuery
from capmatrix.releases import release

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue
    from capmatrix.resolver import Resolution, Resolver

# ``VLLM_BACKENDS`` and ``KV_CACHE_DTYPES`` are read from the data on first use (module __getattr__).
__all__ = ["ENGINE", "ROLE", "BackendNotModelled", "EngineRefused", "InvalidArgument",
           "NoValidBackend", "backend_order", "backends", "kv_cache_dtypes", "select_backend",
           "valid_backends"]

#: The role that holds vLLM's priority lists.
ROLE = "vllm_attention"
_PREFIX = "vllm_"
#: Answers per compiled matrix (gone with it), at most this many each.
_MEMO_SIZE = 4096
_MEMO: weakref.WeakKeyDictionary[Resolver, dict[tuple[object, ...], str]] = weakref.WeakKeyDictionary()
#: The axes the named arguments set, each with its argument; ``extra`` may name none of them, by its name
#: or by an alias the matrix gives it (vLLM's ``block_size`` is ``tokens_per_block``).
_NAMED_AXES = {"sm": "capability", "head_dim": "head_size", "dtype": "dtype",
               "vllm_kv_from_checkpoint": "checkpoint_kv_cache_dtype",
               "kv_cache_dtype": "kv_cache_dtype", "tokens_per_block": "block_size", "attention": "use_mla",
               "use_sparse": "use_sparse", "attention_sinks": "has_sink", "vllm_release": "version"}
#: What a query holds besides axis values, and why ``extra`` may not give it: ``KernelQuery.replace``
#: would take it as the query's model (whose axis values then fill every axis the query leaves unset)
#: or kernel.
_NOT_AXES = {
    "model": "no value here: extra gives axis values, and a model is not one (it would set the axes the "
             "arguments leave unset); give the model's axes as arguments or as extra axes",
    "kernel": "no value here: extra gives axis values, and a kernel is not one; force a backend with "
              "argument 'selected'",
}
#: The engine's name in ``releases.yaml`` and its vocabularies there.
ENGINE = "vllm"
_BACKENDS, _KV_WORDS, _AUTOMATIC = "backends", "kv_cache_dtypes", "automatic_aliases"
_MODEL_DTYPES = "model_dtypes"
_CHECKPOINT_LAYERS = "checkpoint_kv_layers"
_MAX_MINOR = 9


#: Every ``AttentionBackendEnum`` member and every ``CacheDType`` word of the newest modelled release
#: (annotations only: :func:`__getattr__` reads them from the data on first use).
VLLM_BACKENDS: tuple[str, ...]
KV_CACHE_DTYPES: tuple[str, ...]


def __getattr__(name: str) -> object:
    """``VLLM_BACKENDS`` and ``KV_CACHE_DTYPES``: the newest modelled release's words (PEP 562)."""
    if name == "VLLM_BACKENDS":
        return backends()
    if name == "KV_CACHE_DTYPES":
        return kv_cache_dtypes()
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


#: Each vocabulary's words per release, per compiled matrix: the adapter asks for them at every call.
_WORDS: weakref.WeakKeyDictionary[Resolver, dict[tuple[str, ...], tuple[str, ...]]] = (
    weakref.WeakKeyDictionary())


def _words(resolver: Resolver, vocabulary: str, version: str) -> tuple[str, ...]:
    cache = _WORDS.get(resolver)
    if cache is None:
        cache = _WORDS.setdefault(resolver, {})
    words = cache.get((vocabulary, version))
    if words is None:
        words = cache[vocabulary, version] = resolver.matrix.releases[ENGINE].words_at(vocabulary, version)
    return words


def backends(version: str | None = None, matrix: Matrix | None = None) -> tuple[str, ...]:
    """Every ``AttentionBackendEnum`` member of vLLM ``version`` (default: the newest), in its order.

    A forced name among them that the matrix has no kernel for raises :class:`BackendNotModelled`; any
    other name is not vLLM's (vLLM raises there too) and is an :class:`InvalidArgument`.
    """
    resolver = _resolver(matrix)
    return _words(resolver, _BACKENDS, release(resolver.matrix, ENGINE, version))


def kv_cache_dtypes(version: str | None = None, matrix: Matrix | None = None) -> tuple[str, ...]:
    """The ``CacheDType`` words of vLLM ``version`` (``vllm/config/cache.py``), default: the newest.

    Each is a value or a spelling of the matrix's ``kv_cache_dtype`` axis (``float16`` is ``fp16``).
    """
    resolver = _resolver(matrix)
    return _words(resolver, _KV_WORDS, release(resolver.matrix, ENGINE, version))


class BackendNotModelled(CapmatrixError, LookupError):
    """The forced backend is one of the vLLM release's, but the matrix does not model it.

    vLLM would validate it (and may accept it on CUDA: FLASH_ATTN_DIFFKV, TRITON_ATTN_DIFFKV, HPC_ATTN,
    ...); the matrix cannot say whether it would, so it answers neither yes nor no.
    """

    def __init__(self, backend: str, modelled: tuple[str, ...], version: str = "") -> None:
        super().__init__(backend, modelled, version)
        self.backend = backend
        self.modelled = modelled
        self.version = version

    def __str__(self) -> str:
        return (f"backend {self.backend!r} is vLLM {self.version}'s, but the matrix does not model it "
                f"(modelled: {', '.join(self.modelled)}); ask vLLM itself, or leave 'selected' unset")


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

    def __str__(self) -> str:
        """The message, then each rejected backend and its first reason, a short line each."""
        lines = [str(self.args[0])]
        for backend, reasons in self.reasons.items():
            first = reasons[0] if reasons else "no reason recorded"
            more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
            lines.append(f"  {backend}: {first}{more}")
        return "\n".join(lines)


class EngineRefused(NoValidBackend):
    """vLLM stops at engine start: a start check of the matrix refuses, before or after selection.

    ``stage`` is the refusing gate, ``rule`` its refusing rule and ``text`` the rule's reason, vLLM's
    message with its remedy. It is a :class:`NoValidBackend`, with no backend rejected. Two kinds:

    - before selection (``selected`` None): a gate the role ``vllm_attention`` names as the only candidate
      of an order (no ``AttentionBackendEnum`` member), such as ``vllm_worker_init``; a forced backend does
      not get past it either;
    - after selection (``selected`` the backend vLLM picked or validated, ``TRITON_ATTN``): a gate the
      backend's guard names in ``caught_by``, which vLLM asks when it builds that backend's layers
      (``vllm_triton_attn_init``: ``TritonAttentionImpl.__init__`` below SM89 with an FP8 cache).
    """

    def __init__(self, stage: str, rule: str, text: str, selected: str | None = None) -> None:
        picked = f"selects {selected}, then " if selected is not None else ""
        super().__init__(f"vLLM {picked}refuses at engine start ({stage}, {rule}): {text}", ())
        self.stage = stage
        self.rule = rule
        self.text = text
        self.selected = selected

    def __str__(self) -> str:
        return str(self.args[0])


def _refusal(resolution: Resolution, selected: str | None = None) -> EngineRefused:
    """The refusal of a start check that does not admit the query: its rule and vLLM's words."""
    reason = refusing_reason(resolution)
    if reason is None:  # pragma: no cover - a refusal always has a reason
        return EngineRefused(resolution.kernel, "", str(resolution.verdict), selected)
    return EngineRefused(resolution.kernel, str(reason.rule_id or ""), reason.detail or reason.message,
                         selected)


def _start_check(resolver: Resolver, version: str, query: KernelQuery) -> None:
    """Raise :class:`EngineRefused` where the role's order for ``query`` is a start check that refuses."""
    candidates, _decided = resolver.order_for(ROLE, query)
    if len(candidates) != 1 or _backend(candidates[0]) in _words(resolver, _BACKENDS, version):
        return
    resolution = resolver.resolve(query.with_kernel(candidates[0]))
    if resolution:  # pragma: no cover - the data names a start check only where it refuses
        return
    raise _refusal(resolution)


def _init_check(resolver: Resolver, chosen: Resolution) -> None:
    """Raise :class:`EngineRefused` where a check vLLM runs as it builds the chosen backend refuses.

    The checks are the ``caught_by`` gates of the backend's guard (the data's, no name here), asked the
    query the backend was chosen for.
    """
    refused = refused_at_start(resolver, chosen.kernel, chosen.query)
    if refused is not None:
        raise _refusal(refused, _backend(chosen.kernel))


def _backend(kernel: str) -> str:
    return kernel[len(_PREFIX):].upper()


def _int(argument: str, value: object, *, low: int) -> int:
    if type(value) is not int or value < low:  # bool is an int subclass: refused by the exact type
        raise InvalidArgument(argument, value, f"an integer >= {low}")
    return value


def _flag(argument: str, value: object) -> bool:
    if type(value) is not bool:
        raise InvalidArgument(argument, value, "True or False (a bool)")
    return value


#: vLLM's ``--dtype`` words and their dtype-axis values, per compiled matrix and release.
_DTYPE_WORDS: weakref.WeakKeyDictionary[Resolver, dict[str, dict[str, str]]] = weakref.WeakKeyDictionary()


def _model_dtypes(resolver: Resolver, version: str) -> dict[str, str]:
    """The ``--dtype`` words of vLLM ``version`` (releases.yaml), each with its dtype-axis value.

    The axis's spellings fold them (``half`` is ``fp16``); each value is a word of itself.
    """
    cache = _DTYPE_WORDS.get(resolver)
    if cache is None:
        cache = _DTYPE_WORDS.setdefault(resolver, {})
    found = cache.get(version)
    if found is None:
        spellings = resolver.matrix.axes["dtype"].spellings
        words = {w: spellings.get(w, w) for w in _words(resolver, _MODEL_DTYPES, version)}
        found = cache[version] = {**words, **{v: v for v in words.values()}}
    return found


def _dtype(value: object, words: Mapping[str, str]) -> str:
    """A dtype name, a torch name (``torch.bfloat16``) or a ``torch.dtype`` (by name; torch not imported)."""
    kind = type(value)
    if kind.__module__ == "torch" and kind.__name__ == "dtype":
        value = str(value)
    if isinstance(value, str):
        canonical = words.get(value.removeprefix("torch."))
        if canonical is not None:
            return canonical
    values = sorted(set(words.values()))
    raise InvalidArgument("dtype", value, f"a model dtype: {', '.join(values)} (a name or a torch.dtype)",
                          suggestion=did_you_mean(value, words) if isinstance(value, str) else None)


def _capability(value: object) -> int:
    if (not isinstance(value, tuple) or len(value) != 2  # (major, minor)
            or type(value[0]) is not int or type(value[1]) is not int
            or value[0] < 1 or not 0 <= value[1] <= _MAX_MINOR):
        raise InvalidArgument("capability", value, "a (major, minor) tuple of ints, minor 0-9, e.g. (9, 0)")
    return value[0] * 10 + value[1]


def _kv_word(argument: str, value: object, words: tuple[str, ...], version: str) -> str:
    if not isinstance(value, str) or value not in words:
        raise InvalidArgument(
            argument, value, f"one of vLLM {version}'s KV-cache dtypes: {', '.join(words)}",
            suggestion=did_you_mean(value, words) if isinstance(value, str) else None)
    return value


def _layer_kv(resolver: Resolver, version: str, kv_cache_dtype: object, checkpoint: object,
              use_mla: bool) -> tuple[str, bool]:
    """The KV-cache dtype the layer passes to selection, and whether it is the checkpoint's.

    The checkpoint's dtype counts only where ``--kv-cache-dtype`` is ``auto`` and the release's layer of
    this kind reads it (releases.yaml, ``checkpoint_kv_layers``); the config's dtype stays ``auto``.
    """
    words = _words(resolver, _KV_WORDS, version)  # ``version``: a release the matrix models (checked)
    kv = _kv_word("kv_cache_dtype", kv_cache_dtype, words, version)
    if checkpoint is None:
        return kv, False
    ckpt = _kv_word("checkpoint_kv_cache_dtype", checkpoint, words, version)
    kind = "mla" if use_mla else "mha"
    if kv != "auto" or ckpt == "auto" or kind not in _words(resolver, _CHECKPOINT_LAYERS, version):
        return kv, False
    return ckpt, True


def _query(
    resolver: Resolver, version: str, args: tuple[object, object, object, object, object, object],
    flags: tuple[object, object, object], extra: Mapping[str, AxisValue] | None,
) -> KernelQuery:
    capability, head_size, dtype, kv_cache_dtype, block_size, checkpoint = args
    use_mla, use_sparse, has_sink = flags
    if extra and not isinstance(extra, Mapping):
        raise InvalidArgument("extra", extra, "a mapping of axis names to values, or None")
    matrix = resolver.matrix
    mla = _flag("use_mla", use_mla)
    kv, from_checkpoint = _layer_kv(resolver, version, kv_cache_dtype, checkpoint, mla)
    axes: dict[str, AxisValue] = {
        matrix.releases[ENGINE].axis: version,
        "sm": _capability(capability),
        "head_dim": _int("head_size", head_size, low=1),
        "dtype": _dtype(dtype, _model_dtypes(resolver, version)),
        "kv_cache_dtype": kv,  # vLLM's word: the axis maps its spellings (float16 is fp16)
        "vllm_kv_from_checkpoint": from_checkpoint,
        "attention": "mla" if mla else "gqa",
        "use_sparse": _flag("use_sparse", use_sparse),
        "attention_sinks": _flag("has_sink", has_sink),
        # None: no block size asked, none checked (the axis's none; TensorRT-LLM's default is 32).
        "tokens_per_block": NONE if block_size is None else _int("block_size", block_size, low=1),
    }
    if not extra:  # the common case: one query built, no copy
        return KernelQuery(None, **axes)  # type: ignore[arg-type] # axes never holds kernel or model
    return KernelQuery().replace(**{**axes, **_extra_axes(matrix, extra)})


def _extra_axes(matrix: Matrix, extra: Mapping[str, AxisValue]) -> dict[str, AxisValue]:
    """``extra`` as axis values, refusing a name that is no axis's to give (a model, a named argument's)."""
    aliases = {alias: axis.name for axis in matrix.axes.values() for alias in axis.aliases}
    out: dict[str, AxisValue] = {}
    for name, value in extra.items():
        if not isinstance(name, str):
            raise InvalidArgument("extra", extra, "a mapping of axis names (str) to values, or None")
        if name in _NOT_AXES:
            raise InvalidArgument(f"extra[{name!r}]", value, _NOT_AXES[name])
        axis = aliases.get(name, name)
        if axis in _NAMED_AXES:
            named = f"axis {axis!r}" if axis == name else f"{name!r} is axis {axis!r}, which"
            raise InvalidArgument(f"extra[{name!r}]", value,
                                  f"no value here: {named} is set by argument {_NAMED_AXES[axis]!r}")
        out[name] = value
    return out


def _forced(resolver: Resolver, selected: object, version: str) -> str | None:
    """The enum name vLLM validates for ``selected``, or None for automatic selection.

    vLLM's AttentionConfig upper-cases the name, takes ``auto`` (any case) as automatic and resets the
    MiniMax aliases to automatic (vllm/config/attention.py:172-181, :219-229 @ 4ba787ec9).
    """
    if selected is None:
        return None
    if not isinstance(selected, str):
        raise InvalidArgument("selected", selected, "an AttentionBackendEnum name (a str) or None")
    name = selected.upper()
    matrix = resolver.matrix
    if name == "AUTO" or name in _words(resolver, _AUTOMATIC, version):
        return None
    members = _words(resolver, _BACKENDS, version)
    if name in members and _PREFIX + name.lower() in matrix.kernels:
        return name
    modelled = tuple(b for b in members if _PREFIX + b.lower() in matrix.kernels)
    if name in members:
        raise BackendNotModelled(name, modelled, version)
    raise InvalidArgument("selected", selected,
                          f"one of vLLM {version}'s AttentionBackendEnum names, or 'auto'",
                          suggestion=did_you_mean(name, members))


def select_backend(
    *,
    capability: tuple[int, int],
    head_size: int,
    dtype: object,
    kv_cache_dtype: str,
    block_size: int | None,
    use_mla: bool,
    use_sparse: bool = False,
    has_sink: bool = False,
    selected: str | None = None,
    checkpoint_kv_cache_dtype: str | None = None,
    extra: Mapping[str, AxisValue] | None = None,
    matrix: Matrix | None = None,
    version: str | None = None,
) -> str:
    """The ``AttentionBackendEnum`` name vLLM ``version`` picks (or validates, when ``selected``).

    ``version`` is one of the releases the matrix models (``capmatrix list versions``); None is the
    newest. Another is an :class:`InvalidArgument` that lists them.

    ``dtype`` is ``fp16``/``bf16``/``fp32``, a torch name (``torch.bfloat16``, ``half``) or a
    ``torch.dtype`` object (read by name). ``selected`` is read as vLLM reads ``--attention-backend``:
    any case, ``auto`` and the MiniMax aliases ``CUTLASS_MSA``/``TRITON_MSA`` mean automatic selection;
    the answer is vLLM's enum name. ``extra`` gives other axes of the matrix (environment axes such as
    ``vllm_b12x``, model axes such as ``vllm_mla_heads``, ``use_mm_prefix``, ``use_non_causal``); left
    out, they take their defaults. It may not name an axis a named argument sets.

    ``checkpoint_kv_cache_dtype`` is the KV-cache dtype the checkpoint's quantization config names (None:
    none). As in vLLM, it counts only where ``kv_cache_dtype`` is ``auto`` and the release's layer reads it
    (0.34.0's non-MLA layer): selection then gets that dtype while vLLM's cache config stays ``auto``.

    :raises InvalidArgument: an argument of the wrong type or value (bools must be bools, the capability a
        ``(major, minor)`` tuple of ints), naming the argument.
    :raises BackendNotModelled: ``selected`` is vLLM's but the matrix does not model it.
    :raises EngineRefused: vLLM stops at engine start: before any backend (bf16 below SM80: worker init;
        ``selected`` None), or after it picked or validated one, when it builds that backend's layers
        (an FP8 KV cache on TRITON_ATTN or TRITON_MLA below SM89; ``selected`` is the backend picked).
    :raises NoValidBackend: when no backend is valid, or the selected one is not.
    """
    resolver = _resolver(matrix)
    if extra and not isinstance(extra, Mapping):
        raise InvalidArgument("extra", extra, "a mapping of axis names to values, or None")
    # vLLM memoises its selector (``functools.cache`` on the selector config) and an engine asks again
    # for every layer, so a chosen backend is remembered per argument tuple and compiled matrix.
    # Types are part of the key: ``True`` and ``1`` hash alike, and so do ``(9, 0)`` and ``(9.0, 0)``,
    # but only one of each is a valid value; an argument that cannot be a key (unhashable) is validated
    # first, which refuses it. Refusals are not kept: they end the engine's start, and their reasons hold
    # the resolver.
    memo = _MEMO.get(resolver)
    if memo is None:
        memo = _MEMO.setdefault(resolver, {})
    key: tuple[object, ...] | None
    try:
        types = map(type, capability) if isinstance(capability, tuple) else ()
        key = (capability, type(capability), *types, head_size, type(head_size), dtype, type(dtype),
               kv_cache_dtype, checkpoint_kv_cache_dtype, block_size, type(block_size), use_mla,
               type(use_mla), use_sparse, type(use_sparse), has_sink, type(has_sink), selected, version,
               type(version),
               None if not extra else tuple(sorted((k, v, type(v)) for k, v in extra.items())))
        known = memo.get(key)
    except TypeError:  # unhashable, or extra's names unorderable (not all str): never valid, refused below
        key = known = None
    if known is not None:
        return known
    modelled = release(resolver.matrix, ENGINE, version)
    query = _query(resolver, modelled,
                   (capability, head_size, dtype, kv_cache_dtype, block_size, checkpoint_kv_cache_dtype),
                   (use_mla, use_sparse, has_sink), extra)
    forced = _forced(resolver, selected, modelled)
    _start_check(resolver, modelled, query)  # the worker stops before any backend, forced or chosen
    if forced is not None:
        resolution = resolver.resolve(query.with_kernel(_PREFIX + forced.lower()))
        if not resolution:
            raise NoValidBackend(f"Selected backend {forced} is not valid for this configuration.",
                                 (resolution,))
        known = forced
    else:
        selection = resolver.select(ROLE, query)
        if selection.kernel is None or selection.resolution is None:
            raise NoValidBackend("No valid attention backend found.", selection.trace)
        resolution = selection.resolution
        known = _backend(selection.kernel)
    _init_check(resolver, resolution)  # vLLM builds the layers of what it chose: refusals are not kept
    if key is not None:  # pragma: no branch - an argument no key holds is refused above
        if len(memo) >= _MEMO_SIZE:
            memo.clear()
        memo[key] = known
    return known


def backend_order(
    *,
    capability: tuple[int, int],
    head_size: int,
    dtype: object,
    kv_cache_dtype: str,
    block_size: int | None,
    use_mla: bool,
    use_sparse: bool = False,
    has_sink: bool = False,
    checkpoint_kv_cache_dtype: str | None = None,
    extra: Mapping[str, AxisValue] | None = None,
    matrix: Matrix | None = None,
    version: str | None = None,
) -> tuple[str, ...]:
    """The priority list vLLM ``version`` walks (``_get_backend_priorities``), from the role's orders.

    The arguments are read and checked as :func:`select_backend` reads them.

    :raises EngineRefused: vLLM stops at engine start, before it walks any list.
    """
    resolver = _resolver(matrix)
    modelled = release(resolver.matrix, ENGINE, version)
    query = _query(resolver, modelled,
                   (capability, head_size, dtype, kv_cache_dtype, block_size, checkpoint_kv_cache_dtype),
                   (use_mla, use_sparse, has_sink), extra)
    _start_check(resolver, modelled, query)
    candidates, _decided = resolver.matrix.roles[ROLE].order_for(resolver.derived_values(query))
    return tuple(_backend(k) for k in candidates)


def valid_backends(
    *,
    capability: tuple[int, int],
    head_size: int,
    dtype: object,
    kv_cache_dtype: str,
    block_size: int | None,
    use_mla: bool,
    use_sparse: bool = False,
    has_sink: bool = False,
    selected: Sequence[str],
    checkpoint_kv_cache_dtype: str | None = None,
    extra: Mapping[str, AxisValue] | None = None,
    matrix: Matrix | None = None,
    version: str | None = None,
) -> dict[str, bool]:
    """Each backend of ``selected``: whether vLLM ``version`` accepts it forced (``--attention-backend``).

    ``valid_backends(..., selected=names)[name]`` is vLLM's validation verdict: whether
    ``select_backend(..., selected=name)`` gets past selection with ``name``; the query is built once for
    all of them (the differential asks every backend of every cell). The arguments are read and checked
    as :func:`select_backend` reads them; an automatic spelling (``auto``) is not a backend and is refused.

    A backend vLLM validates and then refuses when it builds its layers (TRITON_ATTN with an FP8 cache
    below SM89) counts as valid here, as vLLM's validation says; :func:`select_backend` raises
    :class:`EngineRefused` for it (``selected`` the backend). The engines' records compare this answer
    with vLLM's recorded validation, so it answers validation only.

    :raises InvalidArgument: an argument of the wrong type or value, or an automatic spelling in
        ``selected``.
    :raises BackendNotModelled: a name of ``selected`` is vLLM's but the matrix does not model it.
    :raises EngineRefused: vLLM stops at engine start, before any backend is validated (the worker's
        check; the checks vLLM runs after validation are not asked here).
    """
    resolver = _resolver(matrix)
    modelled = release(resolver.matrix, ENGINE, version)
    query = _query(resolver, modelled,
                   (capability, head_size, dtype, kv_cache_dtype, block_size, checkpoint_kv_cache_dtype),
                   (use_mla, use_sparse, has_sink), extra)
    names = tuple(selected)
    _start_check(resolver, modelled, query)
    cache = _WORDS.get(resolver)
    if cache is None:
        cache = _WORDS.setdefault(resolver, {})
    key = ("valid_backends", modelled, *names)
    kernels = cache.get(key)  # the same names for every cell asked
    if kernels is None:
        forced = [_forced(resolver, name, modelled) for name in names]
        for name, backend in zip(names, forced, strict=True):
            if backend is None:
                raise InvalidArgument("selected", name, "a backend's name (automatic selection is none)")
        kernels = cache[key] = tuple(_PREFIX + f.lower() for f in forced if f)
    return {name: bool(resolver.resolve(query.with_kernel(kernel)))
            for name, kernel in zip(names, kernels, strict=True)}
