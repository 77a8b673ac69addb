"""Each engine word has one home in the data: the adapters read dtype and KV words from the matrix."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

import capmatrix
from capmatrix.authoring.loader import default_path
from capmatrix.authoring.probe import torch_dtype
from capmatrix.engine import sglang, vllm
from capmatrix.engine.hf import query_from_hf_config
from capmatrix.engine.reference import LayerConfig, VerificationAttention
from capmatrix.errors import InvalidArgument

VLLM_ARGS: dict[str, Any] = {"capability": (9, 0), "head_size": 128, "kv_cache_dtype": "auto",
                                "block_size": None, "use_mla": False}


@pytest.fixture(scope="module")
def edited(tmp_path_factory: pytest.TempPathFactory) -> capmatrix.Matrix:
    """The shipped matrix with one more dtype spelling and no torch one for bf16, vLLM's ``half`` dropped,
    and no GDN word."""
    root = tmp_path_factory.mktemp("words") / "capabilities"
    shutil.copytree(default_path(), root)
    axes = root / "axes.yaml"
    text = axes.read_text(encoding="utf-8")
    assert text.count("      half: fp16\n") == 1
    text = text.replace("      half: fp16\n", "      half: fp16\n      f16: fp16\n")
    text = text.replace("      torch.bfloat16: bf16\n", "", 1)  # the dtype axis's: the first
    axes.write_text(text, encoding="utf-8")
    releases = root / "releases.yaml"
    text = releases.read_text(encoding="utf-8")
    for word in ("        - half\n", "        - qwen3_next\n"):
        assert text.count(word) == 1
        text = text.replace(word, "")
    releases.write_text(text, encoding="utf-8")
    return capmatrix.load(root)


def test_vllm_model_dtypes_are_the_release_words() -> None:
    """Every --dtype word of each release selects as its dtype-axis value does."""
    matrix = capmatrix.default_matrix()
    axis = matrix.axes["dtype"]
    for version in matrix.releases["vllm"].names:
        words = matrix.releases["vllm"].words_at("model_dtypes", version)
        assert "half" in words
        for word in words:
            value = axis.spellings.get(word, word)
            assert vllm.select_backend(**VLLM_ARGS, dtype=word, version=version) == vllm.select_backend(
                **VLLM_ARGS, dtype=value, version=version)


def test_the_words_come_from_the_matrix(edited: capmatrix.Matrix) -> None:
    """Edit the data, and the adapters follow: a new spelling is read, a dropped word is refused."""
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 32,
              "num_key_value_heads": 8, "hidden_size": 4096, "torch_dtype": "f16"}
    assert query_from_hf_config(config, matrix=edited).axes["dtype"] == "fp16"
    with pytest.raises(capmatrix.InvalidQuery):
        query_from_hf_config(config)  # the shipped axis has no such spelling
    with pytest.raises(InvalidArgument):
        vllm.select_backend(**VLLM_ARGS, dtype="half", matrix=edited)
    assert vllm.select_backend(**VLLM_ARGS, dtype="float16", matrix=edited) == "FLASH_ATTN"
    qwen = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next"}
    assert sglang.model_from_hf_config(qwen).hybrid_gdn is True
    assert sglang.model_from_hf_config(qwen, matrix=edited).hybrid_gdn is False


def test_sglang_kv_words_are_the_axis_values() -> None:
    """SGLang's --kv-cache-dtype words are the values of its axis; another is refused, naming them."""
    matrix = capmatrix.default_matrix()
    model = sglang.model_from_hf_config({"architectures": ["LlamaForCausalLM"]})
    for word in matrix.axes["sglang_kv_cache_dtype"].values:
        assert sglang.resolve(capability=(9, 0), model=model, kv_cache_dtype=str(word)) is not None
    with pytest.raises(InvalidArgument) as info:
        sglang.resolve(capability=(9, 0), model=model, kv_cache_dtype="fp8")
    assert "fp8_e4m3" in str(info.value)


def test_torch_names_are_the_dtype_axis_spellings(edited: capmatrix.Matrix) -> None:
    """The probe's and the reference engine's torch dtypes are the axis's ``torch.`` spellings."""
    assert [torch_dtype(v) for v in ("fp32", "fp16", "bf16", "fp8")] == [
        "float32", "float16", "bfloat16", "float8_e4m3fn"]
    assert torch_dtype("fp16", edited) == "float16"
    assert edited.axes["dtype"].spelled("fp16", "torch.") == "float16"
    assert edited.axes["dtype"].spelled("fp16", "cuda.") is None
    with pytest.raises(ValueError, match="no torch spelling"):
        torch_dtype("int8")
    assert edited.axes["dtype"].spelled("bf16", "torch.") is None
    with pytest.raises(ValueError, match="no torch spelling"):
        VerificationAttention(config=LayerConfig(hidden_size=256, num_heads=8, num_kv_heads=2, head_dim=64),
                              dtype="bf16", matrix=edited)
