"""SGLang's CUDA attention-backend resolution (0.5.23), answered from the matrix.

SGLang resolves its server arguments once, in a fixed pipeline (``ServerArgs.resolve_once``,
sglang/srt/arg_groups/pipeline.py in the 0.5.23 wheel): model overrides, model allow-lists, the generic
default, page-size snaps and KV-dtype defaults, then speculative decoding fills an unset topk; some
refusals only come when the model runner starts. :func:`resolve` walks those steps in SGLang's order and
asks the matrix at each one: the roles ``sglang_model_override`` and ``sglang_attention`` choose the
backend, the derived axes ``sglang_dsa_*`` the DSA KV dtype and sub-backends, and the gates
``sglang_<backend>``, ``sglang_model_backends``, ``sglang_spec_topk``, ``sglang_fa3_factory``,
``sglang_dsa_sparse_mla`` and ``sglang_hybrid_gdn`` whether each step accepts the result. What the steps
rewrite (the page-size snaps, the default page size, the topk fill) is written here, each with its line.

Answers are in SGLang's words: backend names as ``--attention-backend`` spells them, a refusal with its
stage (``server_args``: ``resolve_once`` raises; ``engine_start``: a check at model-runner start raises)
and SGLang's text.
"""

from __future__ import annotations

from collections.abc import Mapping

from capmatrix._core.answers import ReasonKind
from capmatrix._core.record import record
from capmatrix._shipped.default import _resolver
from capmatrix.errors import InvalidArgument
from capmatrix.matrix import Matrix
from capmatrix.model import Effect
from capmatrix.query import KernelQuery
from capmatrix.releases import release

TYPE_CHECKING = False  # not typing's: the engine's start imports neither typing nor dataclasses
if TYPE_CHECKING:
    from capmatrix.model import AxisValue
    from capmatrix.resolver import Resolver

__all__ = ["BACKENDS", "ENGINE", "OVERRIDE_ROLE", "ROLE", "InvalidArgument", "Refusal", "Resolved",
           "SGLangModel", "model_from_hf_config", "resolve"]

#: The role of SGLang's choice (it asks the overrides first), and the role of the model overrides.
#: The engine's name in ``releases.yaml``.
ENGINE = "sglang"
ROLE = "sglang_attention"
OVERRIDE_ROLE = "sglang_model_override"
_PREFIX = "sglang_"
#: The backends the matrix models, as SGLang spells them (a subset of ATTENTION_BACKEND_CHOICES,
#: sglang/srt/arg_groups/choices.py:69-99).
BACKENDS: tuple[str, ...] = ("triton", "torch_native", "flex_attention", "dsa", "fa3", "fa4", "flashinfer",
                             "flashmla", "trtllm_mla", "cutedsl_mla", "trtllm_mha")
_SPECS = {None: "none", "EAGLE": "eagle", "NEXTN": "nextn"}
#: The DeepSeek family whose MLA the config's architecture names (sglang/srt/configs/model_config.py:180-212).
_DEEPSEEK_FAMILY = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN",
    "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
    "GlmMoeDsaForCausalLMNextN", "KimiK25ForConditionalGeneration", "LongcatFlashForCausalLM",
})
#: The releases.yaml vocabulary of the Gated-DeltaNet hybrids' config types (hybrid_gdn_config).
_GDN_WORDS = "gdn_model_types"
#: The axis whose values are SGLang's --kv-cache-dtype words.
_KV_AXIS = "sglang_kv_cache_dtype"
#: Architectures with learned attention sinks (SWA_SINK_ARCHS, model_config.py:1273-1289).
_SINK_ARCHS = frozenset({"GptOssForCausalLM"})
#: Backends whose page-tree cascade serves EAGLE topk > 1 at page size > 1 (speculative_hook.py:1272).
_PAGE_TREE = ("flashinfer", "fa3", "triton")
_GPT_OSS_BACKENDS = "['triton', 'trtllm_mha', 'fa3', 'fa4', 'ascend', 'intel_amx', 'intel_xpu', 'aiter']"
_MAX_MINOR = 9

#: SGLang's words for each refusing rule (the exception text it raises, sglang/<path>:<line> as the rule
#: cites). ``{...}`` fields are filled from the configuration as SGLang fills them.
_TEXTS: dict[str, str] = {
    "sglang_flex_attention.spec": (
        "Speculative decoding is currently not supported with Flex Attention backend"),
    "sglang_trtllm_mla.blackwell": (
        "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please use a "
        "different backend."),
    "sglang_trtllm_mla.kv_dtype": (
        "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto."),
    "sglang_cutedsl_mla.prefill": (
        "CuteDSL MLA only supports decoding for now"),
    "sglang_cutedsl_mla.sm100": (
        "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100). Please use a different "
        "backend."),
    "sglang_cutedsl_mla.kv_dtype": (
        "CuteDSL MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto."),
    "sglang_trtllm_mha.sm/context": (
        "TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100), or SM120 GPUs. "
        "Please use a different prefill backend."),
    "sglang_trtllm_mha.sm/generation": (
        "TRTLLM MHA backend for decode is only supported on Hopper (SM90), Blackwell (SM100) and "
        "(SM120) GPUs. Please use a different decode backend."),
    "sglang_trtllm_mha.sm120_fp8_prefill": (
        "TRTLLM FMHAv2 prefill on SM120 does not support fp8_e4m3 KV cache or skip-softmax."),
    "sglang_dsa.kv_dtype": (
        "DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype"),
    "sglang_model_backends.gpt_oss": (
        f"GptOssForCausalLM requires one of {_GPT_OSS_BACKENDS} attention backend, but got the following "
        "backends\n- Prefill: {prefill}\n- Decode: {decode}\n"),
    "sglang_model_backends.llama4": (
        "fa3, aiter, triton, ascend, trtllm_mha or intel_xpu is required for Llama4 model but got "
        "{backend}"),
    "sglang_model_backends.exaone4_swa": (
        "One of the attention backends in ['fa3', 'triton', 'trtllm_mha'] is required for {arch}, "
        "but got {backend}"),
    "sglang_model_backends.olmo2": (
        "FlashInfer backend can significantly degrade the performance of Olmo3 models."),
    "sglang_spec_topk.trtllm_mha": (
        "trtllm_mha backend only supports topk = 1 for speculative decoding."),
    "sglang_spec_topk.page_tree": (
        "speculative_eagle_topk > 1 with page_size > 1 is only supported on ('flashinfer', 'fa3', "
        "'triton'); got attention_backend={backend!r}. Use page_size == 1 or one of those backends."),
    "sglang_fa3_factory": (
        "FlashAttention v3 Backend requires SM>=80 and SM<=90. Please use `--attention-backend "
        "flashinfer`."),
    "sglang_dsa_sparse_mla.glm_sm12_fp8_only": (
        "flashinfer_sparse_mla supports only GLM DSA with FP8 KV cache on NVIDIA SM120/SM121; got "
        "model_arch={arch!r}, sm_major={major}, kv_cache_dtype={torch_kv}, prefill_impl={prefill!r}, "
        "decode_impl={decode!r}."),
    "sglang_dsa_sparse_mla.glm_sm12_fp8_others": (
        "GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only flashinfer_sparse_mla "
        "(default) or triton_sparse_mla (prefill), but got {unsupported}."),
    "sglang_hybrid_gdn": (
        "Only {allowed} backends are supported on Blackwell GPUs for hybrid GDN models. Got "
        "prefill={prefill}, decode={decode}."),
}
#: The hybrid-GDN allow-lists as SGLang prints them, a Python set: SGLang's order follows the process's
#: string hashing (PYTHONHASHSEED), so no order is SGLang's; these are sorted.
_GDN_ALLOWED = {"sm12x": "{'flashinfer', 'triton', 'trtllm_mha'}",
                "sm10x_11x": "{'fa4', 'flashinfer', 'triton', 'trtllm_mha'}"}


@record
class SGLangModel:
    """What SGLang's resolution reads of a model: its architecture name and a few flags of its config.

    :raises InvalidArgument: for an ``arch`` that is not a non-empty str, or a flag that is not a bool
        (``"False"`` and ``0`` are refused: a truthy string would silently read as MLA).
    """

    #: ``hf_config.architectures[0]``, e.g. ``LlamaForCausalLM``.
    arch: str
    #: MLA (the DeepSeek family's latent attention).
    mla: bool = False
    #: DeepSeek sparse attention (an ``index_topk`` in the config).
    dsa: bool = False
    #: learned attention sinks (gpt-oss).
    sinks: bool = False
    #: Gated-DeltaNet linear-attention layers (Qwen3-Next).
    hybrid_gdn: bool = False
    #: a ``sliding_window_pattern`` in the config (EXAONE 4).
    swa_pattern: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.arch, str) or not self.arch:
            raise InvalidArgument("arch", self.arch, "an architecture name (a non-empty str), e.g. "
                                  "'LlamaForCausalLM'")
        for name in _FLAGS:
            value = getattr(self, name)
            if type(value) is not bool:  # exactly: a str or an int would read by its truth
                raise InvalidArgument(name, value, "True or False (a bool)")


#: The flags of :class:`SGLangModel`, each a bool.
_FLAGS = ("mla", "dsa", "sinks", "hybrid_gdn", "swa_pattern")


def model_from_hf_config(config: Mapping[str, object], *, matrix: Matrix | None = None,
                         version: str | None = None) -> SGLangModel:
    """The :class:`SGLangModel` of a Hugging Face ``config.json`` (a mapping), read as SGLang reads it.

    The hybrid Gated-DeltaNet config types are SGLang ``version``'s words in the matrix (releases.yaml,
    ``gdn_model_types``; None: the newest release).

    :raises InvalidArgument: for a ``config`` that is not a mapping, or a field SGLang reads of the wrong
        type (``architectures`` a non-empty list of names, ``model_type`` a str, ``learnable_sink`` a
        JSON boolean), naming it.
    """
    if not isinstance(config, Mapping):
        raise InvalidArgument("config", config, "a mapping: the parsed config.json (json.load)")
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str) or not archs[0]:
        raise InvalidArgument("config['architectures']", archs, "a non-empty list of architecture names")
    model_type = config.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise InvalidArgument("config['model_type']", model_type, "a str, or no such field")
    sink = config.get("learnable_sink")
    if sink is not None and type(sink) is not bool:
        raise InvalidArgument("config['learnable_sink']", sink, "true or false (a JSON boolean), or no such "
                              "field")
    arch = archs[0]
    mla = arch in _DEEPSEEK_FAMILY
    return SGLangModel(
        arch=arch, mla=mla, dsa=mla and config.get("index_topk") is not None,
        sinks=arch in _SINK_ARCHS or bool(sink),
        hybrid_gdn=model_type is not None and model_type in _gdn_model_types(matrix, version),
        swa_pattern=config.get("sliding_window_pattern") is not None)


def _gdn_model_types(matrix: Matrix | None, version: str | None) -> tuple[str, ...]:
    if matrix is not None and not isinstance(matrix, Matrix):
        raise InvalidArgument("matrix", matrix, "None (the shipped matrix) or a Matrix from capmatrix.load()")
    found = _resolver(matrix).matrix
    releases = found.releases.get(ENGINE)
    return () if releases is None else releases.words_at(_GDN_WORDS, release(found, ENGINE, version))


@record
class Refusal:
    """Where and why SGLang refuses: ``stage`` (``server_args`` or ``engine_start``), its text, the rule."""

    stage: str
    text: str
    rule: str


@record
class Resolved:
    """SGLang's resolved values (as ``resolution_result`` reads them), or its refusal.

    A refusal at argument resolution leaves no values (every field None); one at engine start keeps the
    values resolution gave.
    """

    attention_backend: str | None = None
    prefill_attention_backend: str | None = None
    decode_attention_backend: str | None = None
    speculative_draft_attention_backend: str | None = None
    dsa_prefill_backend: str | None = None
    dsa_decode_backend: str | None = None
    page_size: int | None = None
    kv_cache_dtype: str | None = None
    speculative_eagle_topk: int | None = None
    refused: Refusal | None = None


class _Refused(Exception):
    def __init__(self, rule: str, text: str) -> None:
        super().__init__(text)
        self.rule = rule
        self.text = text


def _capability(value: object) -> int:
    if (not isinstance(value, tuple) or len(value) != 2  # (major, minor)
            or type(value[0]) is not int or type(value[1]) is not int
            or value[0] < 0 or not 0 <= value[1] <= _MAX_MINOR):
        raise InvalidArgument("capability", value, "a (major, minor) tuple of ints, minor 0-9, e.g. (9, 0)")
    return value[0] * 10 + value[1]


def _choice(argument: str, value: object, allowed: tuple[str, ...]) -> None:
    if value is not None and (not isinstance(value, str) or value not in allowed):
        raise InvalidArgument(argument, value, f"None or one of {', '.join(allowed)}")


class _Pipeline:
    """One resolution: the base query, the current values, and the matrix's answers."""

    def __init__(self, resolver: Resolver, base: dict[str, AxisValue]) -> None:
        self.resolver = resolver
        self.base = base

    def ask(self, kernel: str, **axes: AxisValue) -> str | None:
        """The first of the gate's rules, in its order, that refuses the query; None when none does."""
        query = KernelQuery(_PREFIX + kernel).replace(**{**self.base, **axes})
        resolution = self.resolver.resolve(query)
        if resolution:
            return None
        applied = {r.rule_id for r in resolution.reasons if r.kind is ReasonKind.EXCLUDE}
        granted = any(r.kind is ReasonKind.GRANT for r in resolution.reasons)
        for rule in self.resolver.matrix.kernels[_PREFIX + kernel].rules:
            if rule.id in applied or (not granted and rule.effect is Effect.GRANT):
                return rule.id.split("#", 1)[0]
        raise AssertionError(f"{kernel}: unsupported with no refusing rule")  # pragma: no cover

    def first(self, role: str) -> str | None:
        """The first candidate of the role's order for the base query (SGLang takes it unchecked)."""
        candidates, _decided = self.resolver.order_for(role, KernelQuery().replace(**self.base))
        return candidates[0][len(_PREFIX):] if candidates else None

    def derived(self, name: str, **axes: AxisValue) -> AxisValue:
        value = self.resolver.derived_value(KernelQuery().replace(**{**self.base, **axes}), name)
        if value is None:  # pragma: no cover - the base query gives every axis the tables read
            raise AssertionError(f"{name}: not decided by {self.base}")
        return value


class _Unmodelled(Exception):
    """A gate refuses with no SGLang text: its grants do not cover the query (below SM80, say)."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


def _refuse(rule: str | None, **fields: object) -> None:
    if rule is None:
        return
    key = rule if rule in _TEXTS else rule.rsplit(".", 1)[0]
    if key not in _TEXTS and f"{rule}/{fields.get('phase')}" not in _TEXTS:
        raise _Unmodelled(rule)
    if rule == "sglang_trtllm_mha.sm":
        key = f"{rule}/{fields['phase']}"
    raise _Refused(rule, _TEXTS[key].format(**fields))


def resolve(
    *,
    capability: tuple[int, int],
    model: SGLangModel,
    kv_cache_dtype: str = "auto",
    page_size: int | None = None,
    speculative_algorithm: str | None = None,
    speculative_eagle_topk: int | None = None,
    attention_backend: str | None = None,
    prefill_attention_backend: str | None = None,
    decode_attention_backend: str | None = None,
    matrix: Matrix | None = None,
    version: str | None = None,
) -> Resolved:
    """What SGLang ``version`` resolves for these server arguments on a CUDA device of ``capability``.

    ``version`` is a release the matrix models (``capmatrix list versions``); None is the newest.

    ``speculative_eagle_topk`` is the typed value (None: not typed); the algorithm is None, ``EAGLE`` or
    ``NEXTN``. Backends are SGLang's names (:data:`BACKENDS`).

    :raises InvalidArgument: an argument of the wrong type or value, naming it.
    """
    sm = _capability(capability)
    if not isinstance(model, SGLangModel):
        raise InvalidArgument("model", model, "an SGLangModel (see model_from_hf_config)")
    if speculative_algorithm is not None and (not isinstance(speculative_algorithm, str)
                                              or speculative_algorithm not in _SPECS):
        raise InvalidArgument("speculative_algorithm", speculative_algorithm, "None, 'EAGLE' or 'NEXTN'")
    for name, value in (("attention_backend", attention_backend), ("prefill_attention_backend",
                        prefill_attention_backend), ("decode_attention_backend", decode_attention_backend)):
        _choice(name, value, BACKENDS)
    for name, number in (("page_size", page_size), ("speculative_eagle_topk", speculative_eagle_topk)):
        if number is not None and (type(number) is not int or number < 1):
            raise InvalidArgument(name, number, "None or an integer >= 1")
    if matrix is not None and not isinstance(matrix, Matrix):
        raise InvalidArgument("matrix", matrix, "None (the shipped matrix) or a Matrix from capmatrix.load()")
    resolver = _resolver(matrix)
    arch_axis = resolver.matrix.axes.get("sglang_model_arch")
    if arch_axis is None or not {ROLE, OVERRIDE_ROLE} <= resolver.matrix.roles.keys():
        raise InvalidArgument("matrix", matrix, f"a matrix that models SGLang (axis sglang_model_arch, roles "
                              f"{ROLE} and {OVERRIDE_ROLE}), as the shipped one does")
    kv_words = tuple(map(str, resolver.matrix.axes[_KV_AXIS].values))
    if not isinstance(kv_cache_dtype, str) or kv_cache_dtype not in kv_words:
        raise InvalidArgument("kv_cache_dtype", kv_cache_dtype, f"one of {', '.join(kv_words)}")
    topk_word = {None: "unset", 1: "one"}.get(speculative_eagle_topk, "many")
    base: dict[str, AxisValue] = {
        "sm": sm, "attention": "mla" if model.mla else "gqa", "attention_sinks": model.sinks,
        "sglang_model_arch": arch_axis.spellings.get(model.arch, "other"),
        "sglang_dsa": model.dsa, "sglang_hybrid_gdn": model.hybrid_gdn,
        "sglang_swa_pattern": model.swa_pattern,
        "sglang_spec": _SPECS[speculative_algorithm], "sglang_topk": topk_word,
        _KV_AXIS: kv_cache_dtype,
        "sglang_split": prefill_attention_backend is not None or decode_attention_backend is not None,
    }
    if page_size is not None:
        base["sglang_page_size"] = page_size
    if ENGINE in resolver.matrix.releases:
        base[resolver.matrix.releases[ENGINE].axis] = release(resolver.matrix, ENGINE, version)
    run = _Pipeline(resolver, base)
    state = _State(model, sm, kv_cache_dtype, page_size, attention_backend, prefill_attention_backend,
                   decode_attention_backend, speculative_algorithm, speculative_eagle_topk)
    try:
        try:
            state.resolve_arguments(run)
        except _Refused as refusal:
            return Resolved(refused=Refusal("server_args", refusal.text, refusal.rule))
        try:
            state.engine_start(run)
        except _Refused as refusal:
            return state.resolved(Refusal("engine_start", refusal.text, refusal.rule))
    except _Unmodelled as unmodelled:
        granted = " or ".join(r.describe_region() for r in resolver.matrix.kernels[
            unmodelled.rule.split(".", 1)[0]].grants)
        raise InvalidArgument("capability", capability, f"a device the matrix models SGLang on: the check "
                              f"{unmodelled.rule.split('.', 1)[0]} is modelled where {granted}") from None
    return state.resolved(None)


class _State:
    """The fields one resolution rewrites, in SGLang's order."""

    def __init__(self, model: SGLangModel, sm: int, kv: str, page: int | None, attn: str | None,
                 prefill: str | None, decode: str | None, spec: str | None, topk: int | None) -> None:
        self.model = model
        self.sm = sm
        self.kv = kv
        self.page = page
        self.attn = attn
        self.prefill = prefill
        self.decode = decode
        self.spec = spec
        self.topk = topk
        self.dsa_prefill: str | None = None
        self.dsa_decode: str | None = None

    def slots(self) -> tuple[str | None, str | None]:
        """(prefill, decode) as attention_backends_of reads them (model_override_base.py:138-152)."""
        return self.prefill or self.attn, self.decode or self.attn

    def resolved(self, refused: Refusal | None) -> Resolved:
        return Resolved(attention_backend=self.attn, prefill_attention_backend=self.prefill,
                        decode_attention_backend=self.decode, dsa_prefill_backend=self.dsa_prefill,
                        dsa_decode_backend=self.dsa_decode, page_size=self.page, kv_cache_dtype=self.kv,
                        speculative_eagle_topk=self.topk, refused=refused)

    def resolve_arguments(self, run: _Pipeline) -> None:
        self._model_step(run)
        self._attention_step(run)
        page = 1 if self.page is None else self.page  # _page_size_default, overrides.py:1341-1363
        self.page = page
        self._speculative_step(run, page)

    def _model_step(self, run: _Pipeline) -> None:
        """handle_model_specific_adjustments (model_hook.py:140): overrides, DSA passes, allow-lists."""
        if self.attn is None:
            chosen = run.first(OVERRIDE_ROLE)
            if chosen is not None:
                self.attn = chosen
                if run.base["sglang_model_arch"] == "qwen3_next":  # qwen3_5.py:46-49 writes the page too
                    self.page = 64 if chosen == "trtllm_mha" else 1
        if self.model.dsa:
            self.page = 64  # deepseek_v2.py:161-173: 64 * index_kpool (1), whatever the backend
            _refuse(run.ask("dsa", sglang_backend="dsa"))
            self.kv = str(run.derived("sglang_dsa_kv"))
            self.dsa_prefill = str(run.derived("sglang_dsa_prefill_default"))
            self.dsa_decode = str(run.derived("sglang_dsa_decode_default"))
        arch = self.model.arch
        word = run.base["sglang_model_arch"]
        if word == "gpt_oss":
            prefill, decode = self.slots()
            for backend in (prefill, decode):
                rule = run.ask("model_backends", **({"sglang_backend": backend} if backend else {}))
                if rule is None and backend is None:
                    rule = "sglang_model_backends.gpt_oss"  # None is in no list
                _refuse(rule, prefill=prefill, decode=decode)
        elif word in ("llama4", "exaone4", "olmo2") and (word != "exaone4" or self.model.swa_pattern):
            # Their overrides always set --attention-backend on CUDA (sglang_model_override), so it is read.
            rule = run.ask("model_backends", **({"sglang_backend": self.attn} if self.attn else {}))
            _refuse(rule, backend=self.attn, arch=arch)

    def _attention_step(self, run: _Pipeline) -> None:
        """handle_attention_backend_compatibility (attention_hook.py:110-278), in its order."""
        if self.prefill is not None and self.prefill == self.decode:  # overrides.py:1127-1140
            self.attn = self.prefill
        elif self.attn is None:
            # ROLE asks OVERRIDE_ROLE first (asks_first); here with the base the overrides chose nothing
            # for, so its first orders hold for none of it and the generic default answers.
            self.attn = run.first(ROLE)
        kv = {"sglang_kv_cache_dtype": self.kv}
        if self.attn == "flex_attention":
            _refuse(run.ask("flex_attention"))
        trio = (self.attn, self.prefill, self.decode)
        page = self.page  # _mla_backend_page_constraints, overrides.py:1143-1202
        if "flashmla" in (self.attn, self.decode):
            page = 64
        if "trtllm_mla" in (self.attn, self.decode) and page not in (32, 64):
            page = 64
        if "cutedsl_mla" in trio and page not in (32, 64):
            page = 64
        if "trtllm_mha" in trio and page not in (16, 32, 64, 128):
            page = 64
        self.page = page
        if "trtllm_mla" in (self.attn, self.decode):  # _mla_kv_cache_dtype_checks, :1204-1218
            _refuse(run.ask("trtllm_mla", **kv))
        if "cutedsl_mla" in trio:  # _cutedsl_prefill_backend_fill, :1231-1260
            phase = "context" if self.prefill == "cutedsl_mla" else "generation"
            _refuse(run.ask("cutedsl_mla", phase=phase, **kv))
            if self.prefill is None:
                self.prefill = "trtllm_mla"
        prefill, decode = self.slots()  # attention_hook.py:197-227
        if prefill == "trtllm_mha":
            _refuse(run.ask("trtllm_mha", phase="context", **kv), phase="context")
        if decode == "trtllm_mha":
            _refuse(run.ask("trtllm_mha", phase="generation", **kv), phase="generation")
        if self.attn == "fa3" and self.kv == "fp8_e5m2":  # overrides.py:1263-1270
            self.attn = "triton"
        if ("fa4" in (self.attn, self.decode, self.prefill) and not self.model.mla  # :1274-1297
                and self.sm // 10 == 10 and (self.topk or 0) <= 1):
            self.page = 128

    def _speculative_step(self, run: _Pipeline, page: int) -> None:
        """_handle_eagle_family (speculative_hook.py:1100-1283): the topk fill, then its checks."""
        if self.spec is None:
            return
        if self.topk is None:  # _auto_choose_speculative_params, :1430-1461
            self.topk = 4 if self.model.arch == "LlamaForCausalLM" else 1
        topk = "many" if self.topk > 1 else "one"
        if "trtllm_mha" in self.slots():
            _refuse(run.ask("spec_topk", sglang_topk=topk, sglang_backend="trtllm_mha", phase="generation"))
        _refuse(run.ask("spec_topk", sglang_topk=topk, sglang_page_size=page, phase="context",
                        **({"sglang_backend": self.attn} if self.attn else {})), backend=self.attn)

    def engine_start(self, run: _Pipeline) -> None:
        """The pure checks at model-runner start: the fa3 factory, the DSA validation, the GDN allow-list."""
        prefill, decode = self.slots()
        for backend in dict.fromkeys((prefill, decode)):
            if backend == "fa3" and run.ask("fa3_factory") is not None:
                _refuse("sglang_fa3_factory")
        if self.attn == "dsa":
            for sub in (self.dsa_prefill, self.dsa_decode):
                rule = run.ask("dsa_sparse_mla", sglang_dsa_sub=str(sub), sglang_kv_cache_dtype=self.kv)
                unsupported = sorted({str(self.dsa_prefill), str(self.dsa_decode)}
                                     - {"flashinfer_sparse_mla", "triton_sparse_mla"})
                torch_kv = "torch.float8_e4m3fn" if self.kv == "fp8_e4m3" else "torch.bfloat16"
                _refuse(rule, arch=self.model.arch, major=self.sm // 10, torch_kv=torch_kv,
                        prefill=self.dsa_prefill, decode=self.dsa_decode, unsupported=unsupported)
        if self.model.hybrid_gdn and self.sm // 10 in (10, 11, 12):
            for backend in (prefill, decode):
                rule = run.ask("hybrid_gdn", **({"sglang_backend": backend} if backend else {}))
                if rule is not None:
                    allowed = _GDN_ALLOWED[rule.rsplit(".", 1)[1]]
                    _refuse("sglang_hybrid_gdn", allowed=allowed, prefill=prefill, decode=decode)
