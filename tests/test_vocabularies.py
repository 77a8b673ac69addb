"""One axis per physical concept, each engine's words onto it: aliases, spellings and engine defaults."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import pytest

import capmatrix
from capmatrix import KernelQuery
from capmatrix.authoring.cli import run
from capmatrix.engine.hf import query_from_hf_config
from capmatrix.engine.vllm import KV_CACHE_DTYPES, select_backend
from capmatrix.errors import CapabilityErrors, InvalidQuery

if TYPE_CHECKING:
    from pathlib import Path

AXES = """\
axes:
  sm:
    type: int
    description: compute capability
    values: [80, 90]
  kv:
    type: enum
    description: KV-cache dtype
    values: [fp16, fp8, auto]
    spellings: {float16: fp16}
    aliases: {eng_kv: eng}
    engine_defaults: {eng: auto}
  block:
    type: int
    description: block size in tokens
    values: [16, 32, 64]
    optional: true
    default: 32
    aliases: {block_size: eng}
    engine_defaults: {eng: none}
"""
KERNELS = """\
kernels:
  shared:
    description: a kernel of no engine
    rules:
      - {id: shared.base, grant: {kv: fp16, block: 32}, reason: r, source: s, status: untested}
  eng_k:
    engine: eng
    description: the engine's kernel
    rules:
      - {id: eng_k.base, grant: {kv: [auto, fp8], block: {multiple_of: 64}}, reason: r, source: s,
         status: untested}
roles:
  eng_role:
    description: the engine's role
    candidates: [eng_k]
  mixed:
    description: both
    candidates: [shared, eng_k]
  plain:
    description: no engine's
    candidates: [shared]
"""


def _matrix(tmp_path: Path, axes: str = AXES, kernels: str = KERNELS) -> capmatrix.Matrix:
    (tmp_path / "axes.yaml").write_text(axes, encoding="utf-8")
    (tmp_path / "kernels.yaml").write_text(kernels, encoding="utf-8")
    return capmatrix.load(tmp_path)


def test_an_alias_names_the_axis_in_queries(tmp_path: Path) -> None:
    m = _matrix(tmp_path)
    assert m.axes["block"].aliases == {"block_size": "eng"}
    by_alias = capmatrix.resolve(KernelQuery("eng_k", sm=90, eng_kv="fp8", block_size=128), m)
    by_name = capmatrix.resolve(KernelQuery("eng_k", sm=90, kv="fp8", block=128), m)
    assert by_alias.verdict is by_name.verdict is capmatrix.Verdict.SUPPORTED
    assert by_alias.values == by_name.values
    assert "block_size" not in by_alias.values
    with pytest.raises(InvalidQuery, match="given twice"):
        capmatrix.resolve(KernelQuery("eng_k", kv="fp8", eng_kv="fp8"), m)
    # a spelling through an alias: the engine's word for the value
    assert capmatrix.resolve(KernelQuery("shared", sm=90, eng_kv="float16"), m)


def test_engine_defaults_ask_an_engines_kernels_and_roles(tmp_path: Path) -> None:
    m = _matrix(tmp_path)
    assert m.pins(m.kernels["eng_k"]) == {"kv": "auto", "block": "none"}
    assert m.pins(m.kernels["shared"]) == {}
    assert m.role_engine(m.roles["eng_role"]) == "eng"
    assert m.role_engine(m.roles["mixed"]) == "eng"  # a kernel of no engine is shared
    assert m.role_engine(m.roles["plain"]) is None
    # the engine's kernel: kv auto and an unset block (admitted by the grant's multiple_of)
    alone = capmatrix.resolve(KernelQuery("eng_k", sm=90), m)
    assert alone.verdict is capmatrix.Verdict.SUPPORTED
    assert alone.values["kv"] == "auto"
    assert alone.values["block"] == "none"
    # another engine's kernel keeps the axis default and leaves kv open
    shared = capmatrix.resolve(KernelQuery("shared", sm=90), m)
    assert shared.values["block"] == 32
    assert "kv" not in shared.values
    assert capmatrix.select("eng_role", KernelQuery(sm=80), m).kernel == "eng_k"
    # a query's own value wins over the engine's default
    assert not capmatrix.resolve(KernelQuery("eng_k", sm=90, block=32), m)
    assert not capmatrix.select("eng_role", KernelQuery(sm=80, block_size=16), m).kernel


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        ("    aliases: {block_size: eng}\n", "    aliases: {kv: eng}\n", "already names axis 'kv'"),
        ("    aliases: {block_size: eng}\n", "    aliases: {eng_kv: eng}\n", "already names axis 'kv'"),
        ("    aliases: {block_size: eng}\n", "    aliases: {matrix: eng}\n", "option of the command line"),
        ("    engine_defaults: {eng: none}\n", "    engine_defaults: {eng: 48}\n", "is not a value of axis"),
    ],
)
def test_aliases_and_engine_defaults_declared_wrongly(
    tmp_path: Path, change: str, code: str, words: str,
) -> None:
    with pytest.raises(CapabilityErrors) as info:
        _matrix(tmp_path, AXES.replace(change, code))
    (error,) = info.value.errors
    assert error.code == ("E213" if "engine_defaults" in code else "E210")
    assert words in str(error)
    assert error.line is not None


def test_a_rule_naming_an_alias_is_told_the_axis(tmp_path: Path) -> None:
    with pytest.raises(CapabilityErrors) as info:
        _matrix(tmp_path, kernels=KERNELS.replace("grant: {kv: fp16, block: 32}", "grant: {block_size: 32}"))
    (error,) = info.value.errors
    assert error.code == "E221"
    assert "'block_size' is eng's word for axis 'block'" in str(error)


def test_the_command_line_takes_the_alias(tmp_path: Path) -> None:
    _matrix(tmp_path)

    def cli(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        return run([*argv, "--matrix", str(tmp_path)], out, err), out.getvalue(), err.getvalue()

    code, out, _ = cli("query", "eng_k", "--sm", "90", "--block-size", "64", "--json")
    assert code == 0
    assert json.loads(out)["query"]["block"] == 64
    code, _, err = cli("query", "eng_k", "--sm", "90", "--block-size", "64", "--block", "64")
    assert code == 2
    assert "--block-size is --block by another name" in err


def test_hf_overrides_may_name_an_alias() -> None:
    config = {"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
              "torch_dtype": "bfloat16"}
    q = query_from_hf_config(config, sm=90, vllm_kv_cache_dtype="auto", block_size=64)
    assert q.axes["kv_cache_dtype"] == "auto"  # the override wins over the model dtype
    assert q.axes["tokens_per_block"] == 64
    assert "block_size" not in q.axes


def test_the_shipped_vllm_words() -> None:
    """vLLM's 22 KV words map onto kv_cache_dtype; the old axis names still answer the same."""
    m = capmatrix.default_matrix()
    kv = m.axes["kv_cache_dtype"]
    assert {kv.spellings.get(w, w) for w in KV_CACHE_DTYPES} <= set(kv.values)
    assert kv.aliases == {"vllm_kv_cache_dtype": "vllm"}
    assert m.axes["tokens_per_block"].aliases == {"block_size": "vllm"}
    assert "vllm_kv_cache_dtype" not in m.axes
    assert "block_size" not in m.axes
    old = KernelQuery(sm=90, attention="mla", head_dim=576, dtype="bf16", vllm_kv_cache_dtype="fp8",
                      block_size=64, use_sparse=True)
    new = KernelQuery(sm=90, attention="mla", head_dim=576, dtype="bf16", kv_cache_dtype="fp8",
                      tokens_per_block=64, use_sparse=True)
    chosen = capmatrix.select("vllm_attention", old).kernel
    assert chosen == capmatrix.select("vllm_attention", new).kernel
    assert chosen == "vllm_" + select_backend(capability=(9, 0), head_size=576, dtype="bf16",
                                              kv_cache_dtype="fp8", block_size=64, use_mla=True,
                                              use_sparse=True).lower()
    # a TensorRT-LLM kernel keeps its default block size; a vLLM kernel asks with an unset one
    assert capmatrix.resolve(KernelQuery("xqa", sm=90, model="llama")).values["tokens_per_block"] == 32
    assert capmatrix.resolve(KernelQuery("vllm_flashmla", sm=90, model="deepseek_v3")).values[
        "tokens_per_block"] == "none"


def test_the_export_carries_engine_defaults(tmp_path: Path) -> None:
    from capmatrix.authoring.export import export

    data = export(_matrix(tmp_path))
    assert data["kernels"]["eng_k"]["axes"] == {"kv": "auto", "block": "none"}
    assert "axes" not in data["kernels"]["shared"]
    assert data["roles"]["eng_role"]["axes"] == {"kv": "auto", "block": "none"}
    assert data["roles"]["plain"]["axes"] == {}


@pytest.mark.parametrize(("target", "kv"), [
    ("vllm_flash_attn", "auto"),  # a vLLM kernel: vLLM's own default word
    ("vllm_attention", "auto"),   # a vLLM role likewise
    ("xqa", "bf16"),              # TensorRT-LLM reads "auto" as the model dtype
    ("trtllm_generation", "bf16"),
    (None, "bf16"),               # no engine asked: the model dtype
])
def test_hf_kv_dtype_is_asked_in_the_engines_word(target: str | None, kv: str) -> None:
    config = {"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
              "torch_dtype": "bfloat16"}
    q = query_from_hf_config(config, target, sm=90)
    assert q.axes["kv_cache_dtype"] == kv
    assert q.axes["dtype"] == "bf16"
    # an override still wins over either reading
    assert query_from_hf_config(config, target, sm=90, kv_cache_dtype="fp8").axes["kv_cache_dtype"] == "fp8"
