"""Models by checkpoint: recorded config fields derive the declared axes; Hugging Face ids and
``--hf-config`` reach the same answers as the short names."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any

import pytest

import capmatrix
from capmatrix.authoring.cli import run
from capmatrix.engine import hf, query_from_hf_config
from capmatrix.errors import InvalidQuery, UnknownName
from capmatrix.query import KernelQuery

if TYPE_CHECKING:
    from pathlib import Path

    from capmatrix.matrix import Matrix

#: The checkpoints the matrix must know, by Hugging Face id -> (model, attention, head_dim, q_per_kv).
CHECKPOINTS = {
    "meta-llama/Llama-3.1-8B-Instruct": ("llama3_1_8b", "gqa", 128, 4),
    "meta-llama/Llama-3.1-70B-Instruct": ("llama3_1_70b", "gqa", 128, 8),
    "meta-llama/Llama-3.1-405B-Instruct": ("llama3_1_405b", "gqa", 128, 16),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": ("llama4_scout", "gqa", 128, 5),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": ("llama4_maverick", "gqa", 128, 5),
    "Qwen/Qwen2.5-7B-Instruct": ("qwen2_5_7b", "gqa", 128, 7),
    "Qwen/Qwen2.5-72B-Instruct": ("qwen2_5_72b", "gqa", 128, 8),
    "Qwen/Qwen3-8B": ("qwen3_8b", "gqa", 128, 4),
    "Qwen/Qwen3-30B-A3B": ("qwen3_30b_a3b", "gqa", 128, 8),
    "openai/gpt-oss-20b": ("gpt_oss_20b", "gqa", 64, 8),
    "openai/gpt-oss-120b": ("gpt_oss_120b", "gqa", 64, 8),
    "google/gemma-2-9b-it": ("gemma2_9b", "gqa", 256, 2),
    "google/gemma-2-27b-it": ("gemma2_27b", "gqa", 128, 2),
    "google/gemma-3-27b-it": ("gemma3_27b", "gqa", 128, 2),
    "microsoft/Phi-3-mini-4k-instruct": ("phi3_mini", "mha", 96, 1),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": ("mixtral_8x7b", "gqa", 128, 4),
    "mistralai/Mistral-7B-Instruct-v0.3": ("mistral", "gqa", 128, 4),
    "deepseek-ai/DeepSeek-V3": ("deepseek_v3", "mla", 576, 128),
    "deepseek-ai/DeepSeek-R1": ("deepseek_v3", "mla", 576, 128),
    "deepseek-ai/DeepSeek-V3.2": ("deepseek_v3_2", "mla", 576, 128),
    "moonshotai/Kimi-K2-Instruct": ("kimi_k2", "mla", 576, 64),
    "tiiuae/falcon-7b": ("falcon", "mqa", 64, 71),
}

#: Axes a config always determines (the others depend on which fields it sets).
CORE = ("attention", "head_dim", "q_per_kv")


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return capmatrix.default_matrix()


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("hf_id", "expected"), CHECKPOINTS.items(), ids=list(CHECKPOINTS))
def test_checkpoint_is_known_by_its_id(hf_id: str, expected: tuple[Any, ...],
                                       matrix: Matrix) -> None:
    name, attention, head_dim, group = expected
    model = matrix.model(hf_id)
    assert model is not None, hf_id
    assert model.name == name
    assert (model.axes["attention"], model.axes["head_dim"], model.axes["q_per_kv"]) == (
        attention, head_dim, group,
    )
    assert model.hf_config, f"{name} records no config.json fields"
    assert "config.json" in model.source or "hf_configs" in model.source


def test_every_recorded_config_derives_the_declared_axes(matrix: Matrix) -> None:
    """The engine's config reader, fed the recorded fields, gives each model's axes (all of them
    for attention, head_dim and q_per_kv; the others wherever the config sets them)."""
    checked = 0
    for name, model in matrix.models.items():
        if model.hf_config is None:
            continue
        derived = query_from_hf_config(dict(model.hf_config), matrix=matrix).axes
        for axis in CORE:
            assert derived.get(axis) == model.axes.get(axis), (name, axis)
        for axis, value in derived.items():
            assert model.axes.get(axis) == value, (name, axis, value)
        checked += 1
    assert checked >= len({m for m, *_ in CHECKPOINTS.values()})


def test_recorded_configs_land_on_a_model_with_the_same_attention(matrix: Matrix) -> None:
    for name, model in matrix.models.items():
        if model.hf_config is None:
            continue
        family = query_from_hf_config(dict(model.hf_config), matrix=matrix).model
        assert family is not None, name
        assert matrix.models[family].axes["attention"] == model.axes["attention"], name


def test_model_lookup_by_name_and_id(matrix: Matrix) -> None:
    assert matrix.model("llama") is matrix.models["llama"]
    assert matrix.model("META-LLAMA/llama-3.1-70b-instruct") is matrix.models["llama3_1_70b"]
    assert matrix.model("meta-llama/Llama-3.1-71B") is None
    assert matrix.model("lama") is None


def test_hf_ids_are_unique_case_insensitively(matrix: Matrix) -> None:
    seen: dict[str, str] = {}
    for name, model in matrix.models.items():
        for hf_id in model.hf_ids:
            assert hf_id.lower() not in seen, (hf_id, seen.get(hf_id.lower()), name)
            seen[hf_id.lower()] = name


def test_duplicate_hf_id_is_an_error(write_matrix: Any) -> None:
    root = write_matrix(files={"more.yaml": (
        "models:\n"
        "  one: {description: d, axes: {}, source: s, hf_ids: [org/Model-7B]}\n"
        "  two: {description: d, axes: {}, source: s, hf_ids: [ORG/model-7b]}\n"
    )})
    problems = list(capmatrix.iter_problems(str(root)))
    assert [(p.code, p.json_path) for p in problems] == [("E233", "models.two.hf_ids[0]")]
    assert "already names model 'one'" in problems[0].message


def test_a_query_by_id_answers_as_the_short_name(matrix: Matrix) -> None:
    by_id = capmatrix.resolve(KernelQuery(
        "xqa", model="meta-llama/Llama-3.1-70B-Instruct", sm=120, spec_dec="one_model"), matrix)
    by_name = capmatrix.resolve(KernelQuery(
        "xqa", model="llama3_1_70b", sm=120, spec_dec="one_model"), matrix)
    assert by_id.verdict == by_name.verdict
    assert by_id.values == by_name.values
    assert by_id.origins["q_per_kv"] == "model:llama3_1_70b"
    with pytest.raises(UnknownName):
        capmatrix.resolve(KernelQuery("xqa", model="meta-llama/Llama-9-1B", sm=120), matrix)


def test_llama_family_keeps_llama3_8b_semantics(matrix: Matrix) -> None:
    llama = matrix.models["llama"]
    assert llama.axes["q_per_kv"] == 4
    assert matrix.model("meta-llama/Meta-Llama-3-8B") is llama
    # Llama-3.1-70B differs from the family flagship: group 8.
    assert matrix.models["llama3_1_70b"].axes["q_per_kv"] == 8


# --------------------------------------------------------------------------------------------------
# text_config and _name_or_path

LLAVA_STYLE = {
    "model_type": "llava", "torch_dtype": "float16",
    "text_config": {"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
                    "hidden_size": 4096},
    "vision_config": {"num_attention_heads": 16, "hidden_size": 1024},
}


def test_text_config_supplies_the_attention_fields() -> None:
    q = query_from_hf_config(LLAVA_STYLE, "xqa")
    assert dict(q.axes) == {"attention": "gqa", "head_dim": 128, "q_per_kv": 4, "dtype": "fp16",
                            "kv_cache_dtype": "fp16"}
    assert q.model == "llama"  # the outer llava type is unknown; text_config's llama is not


def test_gemma3_config_reads_its_text_config(matrix: Matrix) -> None:
    config = dict(matrix.models["gemma3_27b"].hf_config or {})
    q = query_from_hf_config(config, matrix=matrix)
    assert q.model == "gemma3_27b"
    assert q.axes["sliding_window"] is True
    assert q.axes["dtype"] == "bf16"  # from the outer torch_dtype


def test_outer_attention_fields_win_over_text_config() -> None:
    config = {"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 32,
              "hidden_size": 4096, "text_config": {"num_attention_heads": 8}}
    assert query_from_hf_config(config).axes["attention"] == "mha"


def test_bad_text_config_is_an_error() -> None:
    with pytest.raises(InvalidQuery, match="text_config"):
        query_from_hf_config({"model_type": "llava", "text_config": 7})


def test_name_or_path_picks_the_checkpoint(matrix: Matrix) -> None:
    config = dict(matrix.models["llama3_1_70b"].hf_config or {})
    assert query_from_hf_config(config, matrix=matrix).model == "llama3_1_70b"  # by its own geometry
    config["num_key_value_heads"] = 16  # a llama no entry records: by model_type
    assert query_from_hf_config(config, matrix=matrix).model == "llama"
    config["_name_or_path"] = "meta-llama/Llama-3.1-70B-Instruct"
    assert query_from_hf_config(config, matrix=matrix).model == "llama3_1_70b"  # the id first
    config["_name_or_path"] = "/local/checkpoints/llama"
    assert query_from_hf_config(config, matrix=matrix).model == "llama"


#: Gemma 2's config.json fields as google/gemma-2-9b-it and google/gemma-2-27b-it set them: one
#: model_type, two geometries.
GEMMA2 = {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "sliding_window": 4096,
          "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "torch_dtype": "bfloat16"}
GEMMA2_9B = {**GEMMA2, "hidden_size": 3584, "num_attention_heads": 16, "head_dim": 256,
             "num_key_value_heads": 8, "num_hidden_layers": 42, "query_pre_attn_scalar": 256}
GEMMA2_27B = {**GEMMA2, "hidden_size": 4608, "num_attention_heads": 32, "head_dim": 128,
              "num_key_value_heads": 16, "num_hidden_layers": 46, "query_pre_attn_scalar": 144}


@pytest.mark.parametrize(("config", "name", "head_dim"), [(GEMMA2_9B, "gemma2_9b", 256),
                                                          (GEMMA2_27B, "gemma2_27b", 128)], ids=["9b", "27b"])
def test_cli_hf_config_labels_a_checkpoint_by_its_geometry(
    tmp_path: Path, config: dict[str, Any], name: str, head_dim: int,
) -> None:
    """``--hf-config`` of Gemma-2-27B was labelled gemma2_9b, the first model of its model_type."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    code, out, err = cli("query", "xqa", "--sm", "90", "--hf-config", str(path), "--spec-dec", "none",
                         "--json")
    assert code in {0, 1, 3}, err
    data = json.loads(out)
    assert data["model"] == name
    assert (data["query"]["head_dim"], data["query"]["q_per_kv"]) == (head_dim, 2)


def test_model_given_as_an_id_is_checked() -> None:
    q = query_from_hf_config(LLAVA_STYLE, model="meta-llama/Llama-3.1-8B-Instruct")
    assert q.model == "meta-llama/Llama-3.1-8B-Instruct"
    with pytest.raises(UnknownName):
        query_from_hf_config(LLAVA_STYLE, model="meta-llama/Llama-9-1B")


# --------------------------------------------------------------------------------------------------
# CLI


def test_cli_model_accepts_a_hugging_face_id() -> None:
    code, out, _ = cli("query", "xqa", "--sm", "120", "--model",
                       "meta-llama/Llama-3.1-70B-Instruct", "--spec-dec", "one_model")
    code_name, out_name, _ = cli("query", "xqa", "--sm", "120", "--model", "llama3_1_70b",
                                 "--spec-dec", "one_model")
    assert (code, out) == (code_name, out_name)
    assert "  model llama3_1_70b: " in out
    assert "q_per_kv=8" in out


def test_cli_seed_answers_hold() -> None:
    code, out, _ = cli("query", "xqa", "--sm", "120", "--model", "llama", "--spec-dec", "one_model")
    assert (code, out.splitlines()[0]) == (0, "xqa: supported")
    code, out, _ = cli("query", "xqa", "--sm", "120", "--model", "deepseek_v3",
                       "--spec-dec", "one_model")
    assert (code, out.splitlines()[0]) == (1, "xqa: unsupported")
    assert "MLA" in out


def test_cli_hf_config_reads_a_local_file(tmp_path: Path, matrix: Matrix) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(matrix.models["gemma3_27b"].hf_config or {})), encoding="utf-8")
    code, out, _ = cli("query", "xqa", "--sm", "90", "--hf-config", str(path), "--spec-dec", "none",
                       "--json")
    assert code in {0, 1, 3}
    data = json.loads(out)
    assert data["model"] == "gemma3_27b"
    values = data["query"]
    assert (values["attention"], values["head_dim"], values["q_per_kv"]) == ("gqa", 128, 2)
    assert values["sliding_window"] is True
    # an axis option wins over the config
    _, out, _ = cli("query", "xqa", "--sm", "90", "--hf-config", str(path), "--spec-dec", "none",
                    "--sliding-window", "false", "--json")
    assert json.loads(out)["query"]["sliding_window"] is False


def test_cli_hf_config_with_select(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAVA_STYLE), encoding="utf-8")
    code, out, _ = cli("select", "trtllm_generation", "--sm", "90", "--hf-config", str(path),
                       "--spec-dec", "none", "--json")
    assert code == 0
    assert json.loads(out)["kernel"]


@pytest.mark.parametrize(("model", "sm"), [("deepseek_v3_2", "120"), ("deepseek_v3", "100"),
                                         ("llama3_1_8b", "90"), ("gpt_oss_120b", "100")])
def test_cli_hf_config_gives_vllm_its_own_kv_default(
    tmp_path: Path, matrix: Matrix, model: str, sm: str,
) -> None:
    """``select vllm_attention --hf-config`` asks vLLM with its KV default, ``auto``, as ``--model`` does
    (it gave the model dtype: DeepSeek-V3.2 on SM120 had no supported candidate); a TensorRT-LLM role
    keeps the model dtype."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(matrix.models[model].hf_config or {})), encoding="utf-8")
    _code, out, err = cli("select", "vllm_attention", "--sm", sm, "--hf-config", str(path), "--json")
    from_config = json.loads(out)
    assert from_config["trace"][-1]["query"]["kv_cache_dtype"] == "auto", err
    _code, out, _ = cli("select", "vllm_attention", "--sm", sm, "--model", model, "--json")
    assert from_config["kernel"] == json.loads(out)["kernel"] is not None
    _code, out, _ = cli("select", "trtllm_generation", "--sm", sm, "--hf-config", str(path), "--json")
    assert json.loads(out)["trace"][-1]["query"]["kv_cache_dtype"] == "bf16"
    # per GPU too: the config answers as the model does on every GPU
    _code, out, _ = cli("select", "vllm_attention", "--gpu", "all", "--hf-config", str(path), "--json")
    _code, by_model, _ = cli("select", "vllm_attention", "--gpu", "all", "--model", model, "--json")
    kernels = [row["kernel"] for row in json.loads(out)["gpus"]]
    assert kernels == [row["kernel"] for row in json.loads(by_model)["gpus"]]


def test_query_from_hf_config_words_the_kv_default_as_the_engine() -> None:
    config = {"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
              "hidden_size": 4096, "torch_dtype": "bfloat16"}
    assert query_from_hf_config(config, "vllm_attention").axes["kv_cache_dtype"] == "auto"
    assert query_from_hf_config(config, "vllm_flash_attn").axes["kv_cache_dtype"] == "auto"
    assert query_from_hf_config(config, "xqa").axes["kv_cache_dtype"] == "bf16"
    assert query_from_hf_config(config).axes["kv_cache_dtype"] == "bf16"


def test_cli_hf_config_bad_json_names_the_place(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "model_type": "llama",\n  "num_attention_heads": 32,,\n}\n',
                    encoding="utf-8")
    code, out, err = cli("query", "xqa", "--sm", "90", "--hf-config", str(path))
    assert (code, out) == (2, "")
    assert f"{path}:3:29: not valid JSON" in err


def test_cli_hf_config_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("[1, 2]", encoding="utf-8")
    code, _, err = cli("query", "xqa", "--sm", "90", "--hf-config", str(path))
    assert code == 2
    assert "a config.json holds one JSON object, got an array" in err


def test_cli_hf_config_missing_file(tmp_path: Path) -> None:
    code, _, err = cli("query", "xqa", "--sm", "90", "--hf-config", str(tmp_path / "nope.json"))
    assert code == 2
    assert "nope.json" in err


def test_cli_unknown_hf_id_is_an_error() -> None:
    code, _, err = cli("query", "xqa", "--sm", "90", "--model", "meta-llama/Llama-9-1B")
    assert code == 2
    assert "meta-llama/Llama-9-1B" in err


# --------------------------------------------------------------------------------------------------
# --hf-config: bounded, and every bad file a located exit-2 error


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"model_type": "llama", "name": "caf\xe9"}', ":1:37: not UTF-8 (byte 0xe9)"),
        (b'{\n "a": 1,\n "b": "\xff"}', ":3:8: not UTF-8 (byte 0xff)"),
        (b"[" * 100_000 + b"]" * 100_000, "not a config.json (nested too deeply)"),
        (b'{"a": ' + b"[" * 65 + b"]" * 65 + b"}", "nested deeper than 64 levels"),
        (b'{"num_attention_heads": 1' + b"0" * 5000 + b"}", "not a config.json (Exceeds the limit"),
        (b'"a string"', ":1:1: a config.json holds one JSON object, got a string"),
        (b"null", "got null"),
        (b"true", "got a boolean"),
        (b"3.5", "got a number"),
    ],
    ids=["latin1", "latin1_line3", "deep_array", "deep_in_object", "huge_int", "string", "null", "bool",
         "number"],
)
def test_cli_hf_config_bad_files_exit_2(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(content)
    code, out, err = cli("query", "xqa", "--sm", "90", "--hf-config", str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"capmatrix: error: {path}")
    assert message in err
    assert "Traceback" not in err


def test_cli_hf_config_at_the_depth_bound_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    nested: Any = 1
    for _ in range(63):
        nested = [nested]
    path.write_text(json.dumps({**LLAMA_LIKE, "deep": nested}), encoding="utf-8")
    code, out, _err = cli("query", "xqa", "--sm", "90", "--hf-config", str(path), "--json")
    assert code in {0, 1, 3}
    assert json.loads(out)["query"]["attention"] == "gqa"


def test_cli_hf_config_size_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/dev/zero (or any endless stream) is cut at the bound, not read until memory runs out."""
    monkeypatch.setattr(hf, "MAX_CONFIG_BYTES", 1000)
    code, _out, err = cli("query", "xqa", "--sm", "90", "--hf-config", "/dev/zero")
    assert code == 2
    assert "capmatrix: error: /dev/zero: larger than 1000 bytes" in err
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_LIKE).ljust(1000), encoding="utf-8")
    assert cli("query", "xqa", "--sm", "90", "--hf-config", str(path))[0] in {0, 1, 3}
    path.write_text(json.dumps(LLAMA_LIKE).ljust(1001), encoding="utf-8")
    assert cli("query", "xqa", "--sm", "90", "--hf-config", str(path))[0] == 2


def test_cli_hf_config_real_default_bound_refuses_dev_zero() -> None:
    code, _out, err = cli("query", "xqa", "--sm", "90", "--hf-config", "/dev/zero")
    assert code == 2
    assert "larger than 8388608 bytes" in err


LLAMA_LIKE = {"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
              "hidden_size": 4096, "torch_dtype": "bfloat16"}
