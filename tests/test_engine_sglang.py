"""capmatrix.engine.sglang against SGLang 0.5.23's own answers.

The record (capabilities/evidence/sglang_0.5.23_selection.json.gz, made by tools/record_sglang_selection.py
from SGLang's ServerArgs.resolve_once under override_platform, plus the pure engine-start checks) holds,
for every cell of capability x model archetype x speculative setting x KV dtype x page size (no backend
forced) and of capability x archetype x forced backend x KV dtype, the resolved values or the refusal with
its stage and text. The differential compares every field of every cell.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import capmatrix
from capmatrix.authoring.analysis import check_path
from capmatrix.authoring.cli import run
from capmatrix.authoring.engine_records import (
    RecordComparison,
    compare_record,
    normalised,
    read_record,
    sglang_cell,
)
from capmatrix.engine.sglang import (
    BACKENDS,
    InvalidArgument,
    Refusal,
    Resolved,
    SGLangModel,
    model_from_hf_config,
    resolve,
)

if TYPE_CHECKING:
    from capmatrix.matrix import Matrix

EVIDENCE = Path(__file__).resolve().parent.parent / "capabilities/evidence"
#: Every recorded release's grid: each is held to its own record (a new release adds its file).
RECORDS = sorted(EVIDENCE.glob("sglang_*_selection.json.gz"))
RECORD = EVIDENCE / "sglang_0.5.23_selection.json.gz"
#: What 0.5.23's grid holds (the shape of the first record; a later release's grid may differ).
GRID_0523 = {"cells": 9900,
             "capabilities": {"8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"}}


def read(path: Path) -> tuple[dict[str, Any], list[tuple[dict[str, Any], dict[str, Any]]]]:
    """The record's header and its (cell, answer) rows."""
    header, rows = read_record(path)
    return header, [(sglang_cell(key), answer) for key, answer in rows]


def differential(path: Path) -> RecordComparison:
    """Every row compared by the shared implementation (``capmatrix test`` runs the same)."""
    return compare_record(path)


@pytest.fixture(scope="module")
def findings() -> set[str]:
    """The keys of ``capmatrix check``'s findings on the shipped matrix."""
    return {f.key for f in check_path().findings}


@pytest.fixture(scope="module")
def record() -> tuple[dict[str, Any], list[tuple[dict[str, Any], dict[str, Any]]]]:
    return read(RECORD)


def test_every_modelled_release_has_its_record_and_every_record_a_release() -> None:
    recorded = {read(path)[0]["sglang"]["version"] for path in RECORDS}
    assert recorded == set(capmatrix.load().releases["sglang"].names)


@pytest.mark.parametrize("path", RECORDS, ids=[p.name for p in RECORDS])
def test_record_shape(path: Path) -> None:
    header, rows = read(path)
    assert header["format"] == "capmatrix-sglang-selection/1"
    release = capmatrix.load().releases["sglang"].release(header["sglang"]["version"])
    assert release is not None
    assert header["sglang"] == {"version": release.version, "wheel": release.pins["wheel"],
                                "sha256": release.pins["sha256"]}
    assert header["set"] == "grid"
    assert header["cells"] == len(rows)
    if release.version == "0.5.23":
        assert len(rows) == GRID_0523["cells"]
        assert {cell["capability"] for cell, _ in rows} == GRID_0523["capabilities"]
    automatic = [cell for cell, _ in rows if cell["forced"] == "-"]
    assert len(automatic) >= 6000
    assert {cell["spec"] for cell in automatic} == {"none", "eagle", "eagle_topk1", "eagle_topk4", "nextn"}
    assert not [cell for cell, ans in rows if "harness_error" in ans]
    # every stage and both outcomes occur
    stages = Counter(ans["refused"]["stage"] for _, ans in rows if "refused" in ans)
    assert stages["server_args"] > 0
    assert stages["engine_start"] > 0
    assert sum(1 for _, ans in rows if "refused" not in ans) > 0
    # every forced backend is one the engine models
    assert {cell["forced"] for cell, _ in rows} - {"-"} <= set(BACKENDS)


@pytest.mark.parametrize("path", RECORDS, ids=[p.name for p in RECORDS])
def test_differential_every_cell(path: Path) -> None:
    """Every cell of each release's record, asked as that release: each resolved value, or the
    refusal's stage and text. No disagreement is tolerated."""
    result = differential(path)
    assert result.rows == result.checks == read(path)[0]["cells"]
    assert result.agree, "\n".join(map(str, result.disagreements))


# ---- SGLang's own defects, as the record shows them and the matrix explains them ----------------------

LLAMA = SGLangModel("LlamaForCausalLM")
OLMO2 = SGLangModel("Olmo2ForCausalLM")
DEEPSEEK_V3 = SGLangModel("DeepseekV3ForCausalLM", mla=True)
DEEPSEEK_V32 = SGLangModel("DeepseekV32ForCausalLM", mla=True, dsa=True)
GLM5 = SGLangModel("GlmMoeDsaForCausalLM", mla=True, dsa=True)
GPT_OSS = SGLangModel("GptOssForCausalLM", sinks=True)


def recorded(rows: list[tuple[dict[str, Any], dict[str, Any]]], key: str) -> dict[str, Any]:
    wanted = dict(zip(("capability", "model", "spec", "kv_cache_dtype", "page_size", "forced"),
                      key.split("/"), strict=True))
    for cell, ans in rows:
        if {**cell, "page_size": "-" if cell["page_size"] is None else str(cell["page_size"])} == wanted:
            return ans
    raise KeyError(key)


@pytest.mark.parametrize("capability", [(11, 0), (12, 0), (12, 1)])
@pytest.mark.parametrize(("model", "name"), [(OLMO2, "olmo2"),
                                             (SGLangModel("Exaone4ForCausalLM", swa_pattern=True),
                                              "exaone4")])
def test_olmo2_exaone4_default_to_fa3_where_its_factory_refuses(
    record: tuple[dict[str, Any], list[tuple[dict[str, Any], dict[str, Any]]]],
    capability: tuple[int, int], model: SGLangModel, name: str,
) -> None:
    """The override's device_sm >= 80 test picks fa3 on SM11x/SM12x; the fa3 factory then asserts."""
    got = resolve(capability=capability, model=model)
    assert got.attention_backend == "fa3"
    assert got.refused is not None
    assert got.refused.stage == "engine_start"
    assert got.refused.rule == "sglang_fa3_factory"
    sglang = recorded(record[1], f"{capability[0]}.{capability[1]}/{name}/none/auto/-/-")
    assert sglang["attention_backend"] == "fa3"
    assert sglang["refused"]["stage"] == "engine_start"


@pytest.mark.parametrize("capability", [(12, 0), (12, 1)])
def test_deepseek_v32_is_sent_to_sm100_kernels_on_sm12x_where_glm5_is_not(
    capability: tuple[int, int], findings: set[str],
) -> None:
    """The one SM12x route to the SM120 sparse-MLA kernel is by architecture name (GLM-5 only)."""
    deepseek = resolve(capability=capability, model=DEEPSEEK_V32)
    glm = resolve(capability=capability, model=GLM5)
    assert (deepseek.dsa_prefill_backend, deepseek.dsa_decode_backend, deepseek.kv_cache_dtype) == (
        "trtllm", "trtllm", "fp8_e4m3")
    assert (glm.dsa_prefill_backend, glm.dsa_decode_backend) == ("flashinfer_sparse_mla",) * 2
    assert deepseek.refused is None  # nothing in SGLang refuses it before the kernel call
    assert "C112 sglang_dsa.base" in findings


def test_trtllm_mla_admitted_on_sm12x_though_its_prefill_kernel_is_sm100_only(findings: set[str]) -> None:
    got = resolve(capability=(12, 0), model=DEEPSEEK_V3, attention_backend="trtllm_mla")
    assert got.refused is None
    assert got.page_size == 64
    assert "C112 sglang_trtllm_mla.blackwell" in findings


def test_topk_typed_or_not_chooses_differently_on_hopper() -> None:
    """The default reads the typed topk; SGLang fills an unset one (4 for Llama) only afterwards."""
    unset = resolve(capability=(9, 0), model=LLAMA, speculative_algorithm="EAGLE")
    typed = resolve(capability=(9, 0), model=LLAMA, speculative_algorithm="EAGLE", speculative_eagle_topk=4)
    assert (unset.attention_backend, unset.speculative_eagle_topk) == ("fa3", 4)
    assert (typed.attention_backend, typed.speculative_eagle_topk) == ("flashinfer", 4)


def test_gpt_oss_override_ignores_topk_on_sm100() -> None:
    got = resolve(capability=(10, 0), model=GPT_OSS, speculative_algorithm="EAGLE", speculative_eagle_topk=4)
    assert got.refused == Refusal("server_args", "trtllm_mha backend only supports topk = 1 for speculative "
                                  "decoding.", "sglang_spec_topk.trtllm_mha")


# ---- arguments ----------------------------------------------------------------------------------------


def test_printed_sets_are_compared_as_sets() -> None:
    assert normalised("Only {'triton', 'fa4'} backends, {x}") == "Only {'fa4', 'triton'} backends, {x}"


def test_split_backends_and_a_lone_prefill_backend() -> None:
    both = resolve(capability=(9, 0), model=LLAMA, prefill_attention_backend="fa3",
                   decode_attention_backend="fa3")
    assert both.attention_backend == "fa3"
    lone = resolve(capability=(9, 0), model=GPT_OSS, prefill_attention_backend="fa3")
    assert lone.refused is not None
    assert lone.refused.rule == "sglang_model_backends.gpt_oss"
    assert "- Decode: None" in lone.refused.text
    olmo = resolve(capability=(9, 0), model=OLMO2, prefill_attention_backend="flashinfer",
                   decode_attention_backend="flashinfer")
    assert olmo.attention_backend == "flashinfer"
    assert olmo.refused is None


def test_cutedsl_prefill_and_fa4_page() -> None:
    refused = resolve(capability=(10, 0), model=DEEPSEEK_V3, prefill_attention_backend="cutedsl_mla",
                      decode_attention_backend="cutedsl_mla")
    assert refused.refused == Refusal("server_args", "CuteDSL MLA only supports decoding for now",
                                      "sglang_cutedsl_mla.prefill")
    decode_only = resolve(capability=(10, 0), model=DEEPSEEK_V3, prefill_attention_backend="flashinfer",
                          decode_attention_backend="cutedsl_mla")
    assert decode_only == Resolved("flashinfer", "flashinfer", "cutedsl_mla", page_size=64,
                                   kv_cache_dtype="auto")
    fa4 = resolve(capability=(10, 0), model=LLAMA, attention_backend="fa4")
    assert fa4.page_size == 128
    assert fa4 == Resolved("fa4", page_size=128, kv_cache_dtype="auto")


def test_hf_config() -> None:
    assert model_from_hf_config({"architectures": ["DeepseekV32ForCausalLM"], "index_topk": 2048}
                                ) == DEEPSEEK_V32
    assert model_from_hf_config({"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next"}
                                ).hybrid_gdn
    assert model_from_hf_config({"architectures": ["Exaone4ForCausalLM"], "sliding_window_pattern": "LLLG"}
                                ).swa_pattern
    with pytest.raises(InvalidArgument, match="architectures"):
        model_from_hf_config({"architectures": []})


@pytest.mark.parametrize(("kwargs", "argument"), [
    ({"capability": (9, 10)}, "capability"),
    ({"capability": [9, 0]}, "capability"),
    ({"model": "llama"}, "model"),
    ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype"),
    ({"kv_cache_dtype": None}, "kv_cache_dtype"),
    ({"speculative_algorithm": "EAGLE3"}, "speculative_algorithm"),
    ({"attention_backend": "aiter"}, "attention_backend"),
    ({"decode_attention_backend": "FA3"}, "decode_attention_backend"),
    ({"page_size": 0}, "page_size"),
    ({"speculative_eagle_topk": True}, "speculative_eagle_topk"),
    # unhashable or of another type: each a named refusal, never a TypeError from a lookup
    ({"speculative_algorithm": []}, "speculative_algorithm"),
    ({"speculative_algorithm": {"EAGLE": 1}}, "speculative_algorithm"),
    ({"kv_cache_dtype": ["auto"]}, "kv_cache_dtype"),
    ({"kv_cache_dtype": {}}, "kv_cache_dtype"),
    ({"attention_backend": ["fa3"]}, "attention_backend"),
    ({"prefill_attention_backend": {"fa3"}}, "prefill_attention_backend"),
    ({"page_size": "64"}, "page_size"),
    ({"page_size": 64.0}, "page_size"),
    ({"page_size": True}, "page_size"),
    ({"speculative_eagle_topk": [4]}, "speculative_eagle_topk"),
])
def test_invalid_arguments(kwargs: dict[str, Any], argument: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        resolve(**{"capability": (9, 0), "model": LLAMA, **kwargs})
    assert raised.value.argument == argument
    assert argument in str(raised.value)


def test_a_matrix_argument_that_is_no_matrix_or_no_sglang_one_is_refused(small: Matrix) -> None:
    """A path for ``matrix`` named no argument; a matrix without SGLang's axis raised KeyError."""
    with pytest.raises(InvalidArgument) as path:
        resolve(capability=(9, 0), model=LLAMA, matrix="capabilities")  # type: ignore[arg-type]
    assert (path.value.argument, path.value.value) == ("matrix", "capabilities")
    with pytest.raises(InvalidArgument) as other:
        resolve(capability=(9, 0), model=LLAMA, matrix=small)
    assert other.value.argument == "matrix"
    assert "models SGLang" in other.value.expected


@pytest.mark.parametrize(("kwargs", "argument"), [
    ({"arch": "DeepseekV3ForCausalLM", "mla": "False"}, "mla"),  # a truthy string: silently MLA before
    ({"arch": "DeepseekV3ForCausalLM", "mla": "True"}, "mla"),
    ({"arch": "LlamaForCausalLM", "mla": 0}, "mla"),  # an int is no bool either
    ({"arch": "DeepseekV32ForCausalLM", "mla": True, "dsa": 1}, "dsa"),
    ({"arch": "GptOssForCausalLM", "sinks": "yes"}, "sinks"),
    ({"arch": "Qwen3NextForCausalLM", "hybrid_gdn": None}, "hybrid_gdn"),
    ({"arch": "Exaone4ForCausalLM", "swa_pattern": "LLLG"}, "swa_pattern"),
    ({"arch": ["LlamaForCausalLM"]}, "arch"),
    ({"arch": ""}, "arch"),
    ({"arch": None}, "arch"),
])
def test_model_fields_of_the_wrong_type_are_refused(kwargs: dict[str, Any], argument: str) -> None:
    """SGLangModel takes an architecture name and real bools: ``mla="False"`` is not MLA, it is an error."""
    with pytest.raises(InvalidArgument) as raised:
        SGLangModel(**kwargs)
    assert (raised.value.argument, raised.value.value) == (argument, kwargs[argument])
    assert str(raised.value).startswith(f"argument {argument!r} expects ")


def test_a_model_flag_given_as_a_string_never_reaches_an_answer() -> None:
    """``mla="False"`` read as MLA gave the MLA default (flashinfer on SM100, not trtllm_mha): refused."""
    mha = resolve(capability=(10, 0), model=LLAMA)
    mla = resolve(capability=(10, 0), model=SGLangModel("LlamaForCausalLM", mla=True))
    assert (mha.attention_backend, mla.attention_backend) == ("trtllm_mha", "flashinfer")
    with pytest.raises(InvalidArgument, match="'mla'"):
        resolve(capability=(10, 0), model=SGLangModel("LlamaForCausalLM", mla="False"))  # type: ignore[arg-type]


def test_one_invalid_argument_class_for_the_engine_adapters() -> None:
    from capmatrix.engine import vllm
    from capmatrix.errors import InvalidArgument as Home
    from capmatrix.errors import InvalidQuery

    assert InvalidArgument is vllm.InvalidArgument is Home
    assert issubclass(InvalidArgument, InvalidQuery)


@pytest.mark.parametrize(("config", "argument"), [
    (None, "config"),
    ("config.json", "config"),
    ([("architectures", ["LlamaForCausalLM"])], "config"),
    ({"architectures": "LlamaForCausalLM"}, "config['architectures']"),
    ({"architectures": [""]}, "config['architectures']"),
    ({"architectures": [None]}, "config['architectures']"),
    ({"architectures": ["Qwen3NextForCausalLM"], "model_type": ["qwen3_next"]}, "config['model_type']"),
    ({"architectures": ["LlamaForCausalLM"], "learnable_sink": "false"}, "config['learnable_sink']"),
    ({"architectures": ["LlamaForCausalLM"], "learnable_sink": 1}, "config['learnable_sink']"),
])
def test_hf_config_of_the_wrong_shape(config: Any, argument: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        model_from_hf_config(config)
    assert raised.value.argument == argument
    assert argument in str(raised.value)


def test_hf_config_learnable_sink() -> None:
    assert model_from_hf_config({"architectures": ["LlamaForCausalLM"], "learnable_sink": True}).sinks
    assert not model_from_hf_config({"architectures": ["LlamaForCausalLM"], "learnable_sink": False}).sinks
    assert not model_from_hf_config({"architectures": ["LlamaForCausalLM"], "learnable_sink": None}).sinks


def test_select_on_the_command_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run(["select", "sglang_model_override", "--sm", "120", "--sglang-model-arch", "Olmo2ForCausalLM"],
               out, err)
    assert code == 0, err.getvalue()
    assert "sglang_fa3" in out.getvalue()
    out = io.StringIO()
    assert run(["query", "sglang_fa3_factory", "--sm", "120"], out, err) == 1
    assert "sglang_fa3_factory" in out.getvalue()


def test_three_engines_on_deepseek_mla_at_sm120() -> None:
    """One kernel layer, three engines: DeepSeek's MLA decode (576-wide absorbed head, FP8 KV) on SM120."""
    import capmatrix
    from capmatrix.engine.vllm import select_backend

    vllm = select_backend(capability=(12, 0), head_size=576, dtype="bf16", kv_cache_dtype="fp8",
                          block_size=None, use_mla=True, use_sparse=True)
    assert vllm == "FLASHINFER_MLA_SPARSE_SM120"
    sglang = resolve(capability=(12, 0), model=DEEPSEEK_V32)
    assert (sglang.attention_backend, sglang.dsa_decode_backend, sglang.kv_cache_dtype) == (
        "dsa", "trtllm", "fp8_e4m3")
    trtllm_gen = capmatrix.resolve(capmatrix.KernelQuery("trtllm_gen", sm=120, model="deepseek_v3",
                                                         phase="generation", kv_cache_dtype="fp8"))
    assert not trtllm_gen  # SGLang's DSA decode kernel has no SM120 build
    trtllm = capmatrix.select("trtllm_generation", capmatrix.KernelQuery(
        sm=120, model="deepseek_v3", phase="generation", kv_cache_dtype="fp8", dtype="fp8"))
    assert trtllm.kernel == "xqa"  # TensorRT-LLM's dense MLA decode: XQA-MLA


@pytest.mark.parametrize(("model", "forced"), [(GPT_OSS, None), (LLAMA, "flex_attention"), (OLMO2, None)])
def test_a_device_below_the_modelled_checks_is_refused_by_name(
    model: SGLangModel, forced: str | None,
) -> None:
    """SM75 lies below every check's grant (the record starts at 8.0): an InvalidArgument naming the
    capability and the check, not a KeyError from a refusal without SGLang's text."""
    with pytest.raises(InvalidArgument) as info:
        resolve(capability=(7, 5), model=model, attention_backend=forced)
    assert info.value.argument == "capability"
    assert info.value.value == (7, 5)
    assert "is modelled where sm >=80" in info.value.expected
    assert resolve(capability=(8, 0), model=model, attention_backend=forced) is not None
