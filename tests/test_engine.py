"""capmatrix.engine: SM detection (with a fake torch), queries from HF configs, bound decisions."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from conftest import int_enum, str_enum
from hypothesis import given, settings
from hypothesis import strategies as st

import capmatrix
from capmatrix import engine
from capmatrix.engine import (
    BoundDecision,
    InvalidSMOverride,
    NoDevice,
    UnboundAxes,
    bind,
    detect_sm,
    query_from_hf_config,
)

# --------------------------------------------------------------------------------------------------
# Import hygiene


def test_importing_capmatrix_and_engine_does_not_import_torch() -> None:
    code = (
        "import sys, capmatrix, capmatrix.engine, capmatrix.engine.trtllm, "
        "capmatrix.engine.reference; "
        "capmatrix.engine.trtllm.extend_ctx(spec_dec='two_model', sm=120, attention_backend='trtllm'); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------------
# detect_sm


class _FakeDevice:
    def __init__(self, spec: object) -> None:
        if isinstance(spec, str):
            kind, _, index = spec.partition(":")
            self.type = kind
            self.index = int(index) if index else None
        else:
            raise TypeError(spec)


def _fake_torch(caps: dict[int, tuple[int, int]], *, available: bool = True) -> Any:
    calls: list[int] = []

    def get_device_capability(index: int) -> tuple[int, int]:
        calls.append(index)
        return caps[index]

    cuda = SimpleNamespace(
        is_available=lambda: available,
        current_device=lambda: 0,
        get_device_capability=get_device_capability,
    )
    module = ModuleType("torch")
    module.cuda = cuda  # type: ignore[attr-defined]
    module.device = _FakeDevice  # type: ignore[attr-defined]
    module.calls = calls  # type: ignore[attr-defined]
    return module


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> Any:
    torch = _fake_torch({0: (9, 0), 1: (12, 1)})
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.delenv("CAPMATRIX_SM", raising=False)
    monkeypatch.setattr(engine.device, "_SM_CACHE", {})
    return torch


def test_detect_sm_reads_and_caches_per_device(fake_torch: Any) -> None:
    assert detect_sm() == 90
    assert detect_sm(0) == 90
    assert detect_sm("cuda:1") == 121  # raw: GB10 is 121, not folded into 120
    assert detect_sm(1) == 121
    assert fake_torch.calls == [0, 1]  # one query per device, then the cache
    assert detect_sm(_FakeDevice("cuda")) == 90  # no index: the current device


def test_detect_sm_rejects_a_cpu_device(fake_torch: Any) -> None:
    with pytest.raises(NoDevice) as info:
        detect_sm("cpu")
    assert "'cpu' is not a CUDA device" in info.value.reason


def test_detect_sm_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch({}, available=False))
    monkeypatch.delenv("CAPMATRIX_SM", raising=False)
    with pytest.raises(NoDevice) as info:
        detect_sm()
    assert info.value.reason == "torch sees no CUDA device"
    assert "CAPMATRIX_SM" in str(info.value)
    assert isinstance(info.value, capmatrix.CapmatrixError)


def test_detect_sm_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    monkeypatch.delenv("CAPMATRIX_SM", raising=False)
    with pytest.raises(NoDevice) as info:
        detect_sm()
    assert info.value.reason == "torch is not installed"


@pytest.mark.parametrize(("raw", "sm"), [("121", 121), (" 90 ", 90), ("75", 75), ("100", 100)])
def test_env_override_wins_without_touching_torch(
    monkeypatch: pytest.MonkeyPatch, raw: str, sm: int
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setenv("CAPMATRIX_SM", raw)
    assert detect_sm() == sm


@pytest.mark.parametrize("raw", ["", "sm_90", "9.0", "90a", "-90", "0", "1200", "x"])
def test_env_override_is_validated(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("CAPMATRIX_SM", raw)
    with pytest.raises(InvalidSMOverride) as info:
        detect_sm()
    assert info.value.variable == "CAPMATRIX_SM"
    assert info.value.value == raw
    assert isinstance(info.value, ValueError)


# --------------------------------------------------------------------------------------------------
# query_from_hf_config

LLAMA3_8B = {
    "model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
    "hidden_size": 4096, "torch_dtype": "bfloat16",
}
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3", "num_attention_heads": 128, "num_key_value_heads": 128,
    "kv_lora_rank": 512, "qk_rope_head_dim": 64, "hidden_size": 7168, "torch_dtype": "bfloat16",
}
GPT2 = {"model_type": "gpt2", "n_head": 12, "n_embd": 768}
FALCON_7B = {
    "model_type": "falcon", "num_attention_heads": 71, "hidden_size": 4544, "multi_query": True,
    "torch_dtype": "bfloat16",
}
GEMMA_7B = {
    "model_type": "gemma", "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256,
    "hidden_size": 3072, "torch_dtype": "bfloat16",
}
QWEN2_7B = {
    "model_type": "qwen2", "num_attention_heads": 28, "num_key_value_heads": 4,
    "hidden_size": 3584, "sliding_window": 131072, "use_sliding_window": False,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(
    ("config", "model", "axes"),
    [
        (LLAMA3_8B, "llama", {"attention": "gqa", "head_dim": 128, "q_per_kv": 4, "dtype": "bf16",
                              "kv_cache_dtype": "bf16"}),
        (DEEPSEEK_V3, "deepseek_v3", {"attention": "mla", "head_dim": 576, "q_per_kv": 128,
                                      "dtype": "bf16", "kv_cache_dtype": "bf16"}),
        (GPT2, "gpt2", {"attention": "mha", "head_dim": 64, "q_per_kv": 1}),
        (FALCON_7B, "falcon", {"attention": "mqa", "head_dim": 64, "q_per_kv": 71, "dtype": "bf16",
                               "kv_cache_dtype": "bf16"}),
        (GEMMA_7B, "gemma", {"attention": "mha", "head_dim": 256, "q_per_kv": 1, "dtype": "bf16",
                             "kv_cache_dtype": "bf16"}),
        (QWEN2_7B, "qwen2", {"attention": "gqa", "head_dim": 128, "q_per_kv": 7, "dtype": "bf16",
                             "kv_cache_dtype": "bf16", "sliding_window": False}),
    ],
    ids=["llama", "deepseek_v3", "gpt2", "falcon", "gemma", "qwen2"],
)
def test_query_from_config_dicts(config: dict[str, Any], model: str, axes: dict[str, Any]) -> None:
    q = query_from_hf_config(config, "xqa")
    assert q.kernel == "xqa"
    assert q.model == model
    assert dict(q.axes) == axes


def test_a_checkpoint_is_labelled_by_its_own_geometry() -> None:
    """Two checkpoints of one model_type: each config lands on the model whose recorded config has its
    shape (Gemma-2 27B is not the first gemma2 model, 9B), whatever the order of the YAML."""
    base = {"model_type": "gemma2", "sliding_window": 4096, "attn_logit_softcapping": 50.0,
            "torch_dtype": "bfloat16"}
    nine = {**base, "hidden_size": 3584, "num_attention_heads": 16, "head_dim": 256, "num_key_value_heads": 8,
            "num_hidden_layers": 42}
    twenty_seven = {**base, "hidden_size": 4608, "num_attention_heads": 32, "head_dim": 128,
                    "num_key_value_heads": 16, "num_hidden_layers": 46}
    assert query_from_hf_config(nine).model == "gemma2_9b"
    assert query_from_hf_config(twenty_seven).model == "gemma2_27b"
    assert query_from_hf_config(twenty_seven).axes["head_dim"] == 128
    # a Gemma 2 of a geometry no model records is the model_type's model, as before
    two = {**base, "hidden_size": 2304, "num_attention_heads": 8, "head_dim": 256, "num_key_value_heads": 4}
    assert query_from_hf_config(two).model == "gemma2_9b"
    # a config that gives no shape at all is labelled by its type alone
    assert query_from_hf_config({"model_type": "gemma2"}).model == "gemma2_9b"
    m = capmatrix.default_matrix()
    reordered = dataclasses.replace(m, models={k: m.models[k] for k in reversed(list(m.models))})
    assert query_from_hf_config(nine, matrix=reordered).model == "gemma2_9b"
    assert query_from_hf_config(twenty_seven, matrix=reordered).model == "gemma2_27b"


def test_derived_values_agree_with_the_model_families() -> None:
    """What the config says equals what models.yaml declares for the family (where both say it)."""
    m = capmatrix.default_matrix()
    for config in (LLAMA3_8B, DEEPSEEK_V3, FALCON_7B, GEMMA_7B, QWEN2_7B, GPT2):
        q = query_from_hf_config(config)
        assert q.model is not None
        family = m.models[q.model].axes
        for name, value in q.axes.items():
            if name in family:
                assert family[name] == value, (q.model, name)


def test_query_from_a_config_object_and_overrides() -> None:
    config = SimpleNamespace(
        model_type="mistral", num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        hidden_size=4096, torch_dtype="torch.float16", sliding_window=4096,
    )
    q = query_from_hf_config(config, "xqa", sm=120, spec_dec="one_model", kv_cache_dtype="fp8")
    assert q.model == "mistral"
    assert q.axes["dtype"] == "fp16"
    assert q.axes["kv_cache_dtype"] == "fp8"  # the override wins over the "auto" KV dtype
    assert q.axes["sliding_window"] is True
    assert q.axes["sm"] == 120


def test_index_topk_makes_mla_sparse_for_vllm() -> None:
    """DeepSeek-V3.2's index_topk: vLLM builds the indexer and asks for a sparse MLA backend."""
    from capmatrix.engine.vllm import select_backend

    v32 = dict(DEEPSEEK_V3, model_type="deepseek_v32", index_topk=2048)
    q = query_from_hf_config(v32)
    assert q.model == "deepseek_v3_2"
    assert q.axes["use_sparse"] is True
    assert "use_sparse" not in query_from_hf_config(DEEPSEEK_V3).axes  # dense: the default decides
    # a non-MLA config with the field is not sparse attention (vLLM reads it on DeepSeek's MLA layers)
    assert "use_sparse" not in query_from_hf_config(dict(LLAMA3_8B, index_topk=2048)).axes
    for bad in (0, "2048", True):
        with pytest.raises(capmatrix.InvalidQuery, match="index_topk"):
            query_from_hf_config(dict(v32, index_topk=bad))
    # the model entry says the same, so --model deepseek_v3_2 gets a sparse MLA backend
    assert capmatrix.default_matrix().models["deepseek_v3_2"].axes["use_sparse"] is True
    q = query_from_hf_config(v32, sm=90, vllm_kv_cache_dtype="auto", block_size=64)
    backend = capmatrix.select("vllm_attention", q).kernel
    assert backend == "vllm_" + select_backend(
        capability=(9, 0), head_size=576, dtype="bf16", kv_cache_dtype="auto", block_size=64,
        use_mla=True, use_sparse=True).lower()
    assert backend is not None
    assert "sparse" in backend


def test_mla_is_recognised_by_truthy_fields_only() -> None:
    config = dict(LLAMA3_8B, kv_lora_rank=0, qk_rope_head_dim=64)
    assert query_from_hf_config(config).axes["attention"] == "gqa"


def test_unknown_model_type_leaves_the_family_out() -> None:
    q = query_from_hf_config(dict(LLAMA3_8B, model_type="brand_new"))
    assert q.model is None
    assert q.axes["attention"] == "gqa"


def test_head_dim_outside_the_universe_is_allowed() -> None:
    q = query_from_hf_config(dict(LLAMA3_8B, head_dim=40), "xqa", sm=90, spec_dec="none")
    assert q.axes["head_dim"] == 40
    r = capmatrix.resolve(q)
    assert "head_dim" in r.outside


@pytest.mark.parametrize(
    ("extra", "axes"),
    [
        # gpt-oss style: layer_types mixes windowed and global layers; model_type gpt_oss has sinks
        ({"model_type": "gpt_oss", "sliding_window": 128,
          "layer_types": ["sliding_attention", "full_attention"]},
         {"sliding_window": True, "per_layer_window": True, "attention_sinks": True}),
        # one kind of layer only: no per-layer window
        ({"sliding_window": 4096, "layer_types": ["sliding_attention", "sliding_attention"]},
         {"sliding_window": True, "per_layer_window": False}),
        # Gemma 3 style: a global layer every sliding_window_pattern layers
        ({"sliding_window": 1024, "sliding_window_pattern": 6},
         {"sliding_window": True, "per_layer_window": True}),
        ({"sliding_window": 1024, "sliding_window_pattern": 1},
         {"sliding_window": True, "per_layer_window": False}),
        # the pattern says nothing without an active window
        ({"sliding_window_pattern": 6}, {}),
        # Llama 4 style chunked attention; an explicit null reads as off
        ({"attention_chunk_size": 8192}, {"chunked_attention": True}),
        ({"attention_chunk_size": None}, {"chunked_attention": False}),
        # Gemma 2 soft-capping; Gemma 3's null and a zero read as off
        ({"attn_logit_softcapping": 50.0}, {"logit_softcapping": True}),
        ({"attn_logit_softcapping": None}, {"logit_softcapping": False}),
        ({"attn_logit_softcapping": 0}, {"logit_softcapping": False}),
        # a use_sinks field wins over the model_type
        ({"use_sinks": True}, {"attention_sinks": True}),
        ({"model_type": "gpt_oss", "use_sinks": False}, {"attention_sinks": False}),
    ],
    ids=["gpt_oss", "one_layer_kind", "pattern_6", "pattern_1", "pattern_no_window", "chunk", "chunk_null",
         "softcap", "softcap_null", "softcap_zero", "use_sinks", "use_sinks_false"],
)
def test_layer_features_from_config_fields(extra: dict[str, Any], axes: dict[str, Any]) -> None:
    base = {"model_type": "brand_new", "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64}
    derived = dict(query_from_hf_config({**base, **extra}).axes)
    for name in ("attention", "head_dim", "q_per_kv"):
        derived.pop(name)
    assert derived == axes


def test_layer_features_are_read_from_text_config() -> None:
    config = {"model_type": "llama4", "torch_dtype": "bfloat16",
              "text_config": {"model_type": "llama4_text", "num_attention_heads": 40,
                              "num_key_value_heads": 8, "head_dim": 128, "attention_chunk_size": 8192}}
    q = query_from_hf_config(config, "xqa", sm=90, spec_dec="none", phase="generation", kv_cache_dtype="bf16")
    assert q.model == "llama4_scout"
    assert q.axes["chunked_attention"] is True
    # XQA's JIT kernels refuse chunked attention (the chunked layers fall back to MMHA); the same
    # query for the model's global (NoPE) layers is served
    refused = capmatrix.resolve(q)
    assert refused.verdict is capmatrix.Verdict.UNSUPPORTED
    assert "xqa.chunked_attention_single_token" in {r.rule_id for r in refused.reasons}
    served = capmatrix.resolve(query_from_hf_config(
        config, "xqa", sm=90, spec_dec="none", phase="generation", kv_cache_dtype="bf16",
        chunked_attention=False,
    ))
    assert served.verdict is capmatrix.Verdict.SUPPORTED


@pytest.mark.parametrize(
    ("config", "overrides", "needle"),
    [
        (dict(LLAMA3_8B, layer_types="sliding_attention"), {}, "layer_types"),
        (dict(LLAMA3_8B, attn_logit_softcapping="50"), {}, "attn_logit_softcapping"),
        (dict(LLAMA3_8B, attention_chunk_size=-1), {}, "attention_chunk_size"),
        (dict(LLAMA3_8B, torch_dtype="float64"), {}, "float64"),
        (dict(LLAMA3_8B, num_key_value_heads=5), {}, "not a multiple"),
        (dict(LLAMA3_8B, num_attention_heads="32"), {}, "num_attention_heads"),
        (LLAMA3_8B, {"attention": "gqaa"}, "gqaa"),
        (LLAMA3_8B, {"no_such_axis": 1}, "no_such_axis"),
    ],
)
def test_bad_configs_and_overrides(
    config: dict[str, Any], overrides: dict[str, Any], needle: str
) -> None:
    with pytest.raises(capmatrix.InvalidQuery) as info:
        query_from_hf_config(config, **overrides)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        (None, "got NoneType"),
        ("config.json", "is a str, not a config"),
        (b"{}", "is a bytes, not a config"),
        (Path("config.json"), "not its path"),
        ([LLAMA3_8B], "got list"),
        (7, "got int"),
        (1.5, "got float"),
        ({}, "no attention geometry"),
        ({"torch_dtype": "bfloat16"}, "no attention geometry"),
        ({"model_type": "brand_new", "hidden_size": 4096}, "no attention geometry"),
        (SimpleNamespace(), "no attention geometry"),
    ],
)
def test_what_is_not_a_config_is_refused(config: object, needle: str) -> None:
    """Nothing gives a query with nothing in it: a path, None, a list, an empty config are refused."""
    with pytest.raises(capmatrix.InvalidQuery, match=needle):
        query_from_hf_config(config, "xqa")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("head_dim", 0), ("head_dim", -64), ("num_attention_heads", 0), ("num_attention_heads", -8),
        ("num_key_value_heads", 0), ("num_key_value_heads", 64), ("num_key_value_heads", 5),
        ("hidden_size", 0), ("hidden_size", 4095), ("kv_lora_rank", -1), ("qk_rope_head_dim", -64),
        ("head_dim", True), ("head_dim", 128.0), ("kv_lora_rank", "512"), ("kv_lora_rank", [512]),
        ("sliding_window", "4096"), ("sliding_window", True), ("sliding_window", 4096.0),
        ("num_attention_heads", {"n": 32}), ("model_type", ["llama"]), ("model_type", 7),
    ],
)
def test_impossible_and_malformed_fields_are_refused(field: str, value: object) -> None:
    """Impossible geometry and fields of the wrong type: InvalidQuery naming the field or the fix."""
    config = dict(DEEPSEEK_V3 if field in {"kv_lora_rank", "qk_rope_head_dim"} else LLAMA3_8B)
    config[field] = value
    if field == "hidden_size":
        config.pop("head_dim", None)
    with pytest.raises(capmatrix.InvalidQuery) as info:
        query_from_hf_config(config, "xqa")
    assert type(info.value) is capmatrix.InvalidQuery
    assert any(word in str(info.value) for word in (field, "multiple of", "head_dim"))


JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.text(max_size=6),
    st.binary(max_size=3), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                                  st.integers(), max_size=2),
)
FIELDS = st.sampled_from([
    "num_attention_heads", "n_head", "num_key_value_heads", "head_dim", "hidden_size", "kv_lora_rank",
    "qk_rope_head_dim", "torch_dtype", "sliding_window", "use_sliding_window", "multi_query",
    "model_type", "_name_or_path", "text_config",
])


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([LLAMA3_8B, DEEPSEEK_V3, GPT2, FALCON_7B]),
       st.dictionaries(FIELDS, JUNK, min_size=1, max_size=4), st.booleans())
def test_junk_fields_give_a_query_or_invalid_query(
    base: dict[str, Any], junk: dict[str, Any], nested: bool
) -> None:
    """Any junk in any field, at the top or under text_config: a query the matrix can resolve, or
    InvalidQuery; never another exception."""
    config: Any = {**base, **junk}
    if nested:
        config = {"model_type": "llava", "text_config": {**base, **junk}}
    try:
        q = query_from_hf_config(config, "xqa", sm=90)
    except capmatrix.InvalidQuery:
        return
    assert q.axes or q.model is not None
    capmatrix.resolve(q)


MLLAMA = {  # the shape of meta-llama/Llama-3.2-11B-Vision's config.json (fields abridged)
    "model_type": "mllama", "torch_dtype": "bfloat16",
    "text_config": {"model_type": "mllama_text_model", "num_attention_heads": 32,
                    "num_key_value_heads": 8, "hidden_size": 4096},
    "vision_config": {"model_type": "mllama_vision_model", "attention_heads": 16, "hidden_size": 1280},
}
LLAVA_1_5 = {  # llava-hf/llava-1.5-7b-hf: its text_config leaves the geometry to LlamaConfig defaults
    "model_type": "llava", "torch_dtype": "float16",
    "text_config": {"model_type": "llama", "_name_or_path": "lmsys/vicuna-7b-v1.5",
                    "max_position_embeddings": 4096, "vocab_size": 32064},
}


def test_multimodal_configs_keep_their_attention_geometry() -> None:
    q = query_from_hf_config(MLLAMA, "xqa")
    assert dict(q.axes) == {"attention": "gqa", "head_dim": 128, "q_per_kv": 4, "dtype": "bf16",
                            "kv_cache_dtype": "bf16"}
    # A text_config that does not state its geometry derives none (nothing is guessed); the model
    # family found through text_config's model_type supplies it.
    q = query_from_hf_config(LLAVA_1_5, "xqa")
    assert q.model == "llama"
    assert "attention" not in q.axes
    assert q.axes["dtype"] == "fp16"
    assert capmatrix.resolve(q.replace(sm=90, spec_dec="none")).values["attention"] == "gqa"


def test_overrides_are_normalised_like_any_query() -> None:
    gqa, sm90 = str_enum("GQA", "gqa"), int_enum("X", 90)
    q = query_from_hf_config(LLAMA3_8B, "xqa", attention=gqa, sm=sm90)  # type: ignore[arg-type]
    assert q == query_from_hf_config(LLAMA3_8B, "xqa", attention="gqa", sm=90)
    assert type(q.axes["attention"]) is str
    opened = query_from_hf_config(LLAMA3_8B, "xqa", head_dim=capmatrix.ANY)  # type: ignore[arg-type]
    assert opened.axes["head_dim"] is capmatrix.ANY


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str")


def test_a_dtype_object_that_cannot_be_printed_is_an_unknown_dtype() -> None:
    with pytest.raises(capmatrix.InvalidQuery, match="torch_dtype"):
        query_from_hf_config(dict(LLAMA3_8B, torch_dtype=_Unprintable()))


def test_explicit_model_must_exist() -> None:
    assert query_from_hf_config(GPT2, model="llama").model == "llama"
    with pytest.raises(capmatrix.InvalidQuery):
        query_from_hf_config(GPT2, model="lama")


# --------------------------------------------------------------------------------------------------
# bind


def test_bind_precomputes_every_dynamic_value() -> None:
    d = bind("trtllm_spec_dec_mode", dynamic=["spec_dec_pass"], sm=120, attention="gqa",
             spec_dec="two_model", attention_backend="trtllm")
    assert isinstance(d, BoundDecision)
    assert d.table == {"target": True, "first_chain_draft": True, "draft": False}
    assert d.lookup.__self__ is d.table  # type: ignore[attr-defined]
    assert d("draft") is False
    assert d.value is None
    assert d.explain("target").verdict is capmatrix.Verdict.SUPPORTED


def test_bind_with_engine_keys_and_several_axes() -> None:
    d = bind(
        "trtllm_spec_dec_mode",
        dynamic={"spec_dec_pass": {False: "draft", True: "first_chain_draft"},
                 "attention": {True: "mla", False: "gqa"}},
        sm=121, spec_dec="one_model", attention_backend="trtllm",
    )
    assert d.dynamic == ("spec_dec_pass", "attention")
    assert d.table == {(False, True): False, (False, False): True,
                       (True, True): False, (True, False): True}
    assert d(True, False) is True
    assert d.lookup((False, True)) is False
    assert "trtllm_spec_dec_mode.mla_sm12x_one_model" in d.explain(False, True).rules


def test_bind_without_dynamic_axes_is_a_constant() -> None:
    d = bind("trtllm_extend_ctx", sm=121, spec_dec="two_model", attention_backend="trtllm")
    assert d.value is True
    assert d.table == {(): True}
    assert d.lookup(()) is True


def test_bind_refuses_open_axes_when_strict() -> None:
    with pytest.raises(UnboundAxes) as info:
        bind("xqa", sm=90, spec_dec="none")
    assert info.value.kernel == "xqa"
    assert info.value.residual
    loose = bind("xqa", sm=90, spec_dec="none", strict=False)
    assert loose.value is False
    assert loose.resolutions[()].verdict is capmatrix.Verdict.DEPENDS


def test_bind_rejects_bad_specs() -> None:
    with pytest.raises(capmatrix.InvalidQuery, match="both static and dynamic"):
        bind("trtllm_extend_ctx", dynamic=["sm"], sm=90)
    with pytest.raises(capmatrix.InvalidQuery):
        bind("trtllm_extend_ctx", dynamic=["smm"])
    with pytest.raises(capmatrix.InvalidQuery):
        bind("no_such_gate")


@pytest.mark.parametrize(
    ("dynamic", "message"),
    [
        (3, "dynamic must be a list of axis names"),
        ("spec_dec_pass", "dynamic must be a list of axis names"),
        ({"spec_dec_pass": 1}, "must be a non-empty mapping"),
        ({"spec_dec_pass": {}}, "must be a non-empty mapping"),
        ([7], "unknown axis 7"),
    ],
)
def test_bind_rejects_malformed_dynamic(dynamic: object, message: str) -> None:
    from capmatrix.engine import bind

    with pytest.raises(capmatrix.InvalidQuery, match=message):
        bind("trtllm_spec_dec_mode", dynamic=dynamic, sm=90)  # type: ignore[arg-type]


# ChatGLM's KV heads and ALiBi

#: THUDM/chatglm2-6b config.json (attention fields): 32 query heads over 2 KV groups.
CHATGLM2_6B = {
    "model_type": "chatglm", "num_attention_heads": 32, "hidden_size": 4096, "kv_channels": 128,
    "multi_query_attention": True, "multi_query_group_num": 2, "torch_dtype": "float16",
}


@pytest.mark.parametrize(
    ("config", "axes"),
    [
        (CHATGLM2_6B, {"attention": "gqa", "q_per_kv": 16, "head_dim": 128}),
        ({**CHATGLM2_6B, "multi_query_attention": False}, {"attention": "mha", "q_per_kv": 1}),
        ({**CHATGLM2_6B, "multi_query_group_num": 1}, {"attention": "mqa", "q_per_kv": 32}),
        ({**CHATGLM2_6B, "num_key_value_heads": 4}, {"attention": "gqa", "q_per_kv": 8}),
    ],
    ids=["chatglm2", "chatglm_mha", "chatglm_one_group", "explicit_kv_heads_win"],
)
def test_chatglm_kv_groups(config: dict[str, Any], axes: dict[str, Any]) -> None:
    derived = dict(query_from_hf_config(config).axes)
    assert {name: derived[name] for name in axes} == axes


def test_chatglm_group_num_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(capmatrix.InvalidQuery, match="multi_query_group_num"):
        query_from_hf_config({**CHATGLM2_6B, "multi_query_group_num": "2"})


@pytest.mark.parametrize(
    ("extra", "bias"),
    [
        ({"model_type": "falcon", "alibi": True}, "alibi"),
        ({"model_type": "falcon", "alibi": False}, "none"),
        ({"model_type": "falcon"}, None),
        ({"model_type": "bloom"}, "alibi"),
        ({"model_type": "mpt", "attn_config": {"alibi": True}}, "alibi"),
        ({"model_type": "mpt", "attn_config": {"alibi": False}}, "none"),
        ({"model_type": "mpt", "attn_config": {"alibi": None}}, None),
        ({"model_type": "mpt", "attn_config": "odd"}, None),
        ({"model_type": "brand_new", "alibi": None}, None),
    ],
    ids=["falcon_alibi", "falcon_rope", "falcon_unsaid", "bloom", "mpt", "mpt_rope", "mpt_null",
         "mpt_odd_attn_config", "null"],
)
def test_alibi_keeps_the_position_bias(extra: dict[str, Any], bias: str | None) -> None:
    config = {"num_attention_heads": 32, "hidden_size": 4096, **extra}
    assert query_from_hf_config(config).axes.get("position_bias") == bias


def test_an_alibi_field_that_is_not_a_boolean_is_refused() -> None:
    with pytest.raises(capmatrix.InvalidQuery, match=r"'attn_config\.alibi' must be true or false"):
        query_from_hf_config({"num_attention_heads": 32, "attn_config": {"alibi": "yes"}})


def test_bloom_with_alibi_is_refused_by_trtllm_gen_context() -> None:
    """The bias reaches the resolver: trtllm-gen's context FMHA refuses ALiBi."""
    bloom = {"model_type": "bloom", "n_head": 32, "hidden_size": 4096, "torch_dtype": "bfloat16"}
    q = query_from_hf_config(bloom, "trtllm_gen", sm=100, phase="context")
    assert "trtllm_gen.context_position_bias" in {r.rule_id for r in capmatrix.resolve(q).reasons}
