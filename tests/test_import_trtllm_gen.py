"""tools/import_trtllm_gen.py: trtllm_gen.yaml's cubin-table exclusions follow the recorded kernel table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from scripts import load_script

import capmatrix
from capmatrix import KernelQuery, Status, Verdict

tool = load_script("tools/import_trtllm_gen.py")
EVIDENCE = json.loads(tool.EVIDENCE.read_text(encoding="utf-8"))
MATRIX = capmatrix.load()
COMMIT, NAMES = tool.load_names()
KERNELS = [tool.parse_name(n) for n in NAMES]


def test_generated_section_is_current() -> None:
    """The drift check `make test` runs: trtllm_gen.yaml holds exactly what the recorded table generates."""
    assert tool.main(["--check"]) == 0


def _copies(tmp_path: Path) -> tuple[Path, Path]:
    evidence = tmp_path / "kernels.json"
    yaml_file = tmp_path / "trtllm_gen.yaml"
    shutil.copy(tool.EVIDENCE, evidence)
    shutil.copy(tool.TRTLLM_GEN_YAML, yaml_file)
    return evidence, yaml_file


def test_check_fails_when_a_head_size_is_added(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A head-96 family in the table (a newer header) widens the generated head lists once regenerated."""
    evidence, yaml_file = _copies(tmp_path)
    data = json.loads(evidence.read_text(encoding="utf-8"))
    data["families"].append({"prefix": "FmhaSm100Kernel_QkvBfloat16OBfloat16", "head": "H96",
                             "groups": ["packed_context", "swaps_ab_generation"], "page": 0})
    evidence.write_text(json.dumps(data), encoding="utf-8")
    args = ["--evidence", str(evidence), "--yaml", str(yaml_file)]
    assert tool.main([*args, "--check"]) == 1
    err = capsys.readouterr().err
    assert "stale: run python tools/import_trtllm_gen.py" in err
    assert "+          head_dim: {not: [64, 96, 128, 256]}" in err
    assert tool.main(args) == 0
    assert tool.main([*args, "--check"]) == 0
    assert "trtllm_gen.cubins.generation_head_kv_bf16:" not in yaml_file.read_text(encoding="utf-8")
    assert "trtllm_gen.cubins.generation_head_kv_bf16\n" in yaml_file.read_text(encoding="utf-8")


def test_the_table_as_read() -> None:
    """The header at 07e3c21f: SM100 only, heads 64/128/256, MLA 192/128 and 576/512, P32/P64."""
    assert COMMIT == "07e3c21fe89328481546d3db838b6696de7d1128"
    assert len(NAMES) == len(set(NAMES)) == 1356
    assert {k.sm for k in KERNELS} == {100}
    assert {(k.head_qk, k.head_v) for k in KERNELS if not k.mla} == {(64, 64), (128, 128), (256, 256)}
    assert {(k.head_qk, k.head_v) for k in KERNELS if k.mla} == {(192, 128), (576, 512)}
    assert {k.tokens_per_page for k in KERNELS} == {0, 32, 64}
    nvfp4 = [k for k in KERNELS if k.kv == "nvfp4"]
    assert {(k.q, k.out, k.head_qk) for k in nvfp4} == {("fp8", "fp8", 64), ("fp8", "fp8", 128)}
    assert {k.layout for k in nvfp4} == {"PagedKv"}
    assert {(k.q, k.kv) for k in KERNELS if k.mla} == {("bf16", "bf16"), ("fp8", "fp8")}
    # every Qkv<T> family shares one type for Q and KV
    assert all(k.q == k.kv for k in KERNELS if k.kv != "nvfp4")


def test_names_round_trip_the_fields() -> None:
    k = tool.parse_name("FmhaSm100Kernel_QE4m3KvE2m1OE4m3H128PagedKvCausalP64VarSeqQ128Kv128StaticContext")
    assert (k.sm, k.q, k.kv, k.out, k.head_qk, k.head_v, k.layout, k.tokens_per_page, k.generation) == (
        100, "fp8", "nvfp4", "fp8", 128, 128, "PagedKv", 64, False)
    mla = tool.parse_name(
        "FmhaSm100Kernel_QkvE4m3OBfloat16HQk576HV512HVPerCta256PagedKvDenseP32MultiCtasKvCgaVarSeqQ64Kv128"
        "Static2CtaKeepsAbForGen")
    assert (mla.head_qk, mla.head_v, mla.mla, mla.generation, mla.out) == (576, 512, True, True, "bf16")
    packed = tool.parse_name("FmhaSm100Kernel_QkvFp16OFp16H64PackedQkvDenseVarSeqQ128Kv128PersistentContext")
    assert (packed.tokens_per_page, packed.mla, packed.q) == (0, False, "fp16")


@pytest.mark.parametrize("name", [
    "FmhaSm100Kernel_QkvFp32OFp32H128PackedQkvDenseVarSeqQ128Kv128PersistentContext",
    "FmhaSm100Kernel_QkvFp16OFp16H128PackedQkvDenseVarSeqQ128Kv128Persistent",
    "fmha_v2_flash_attention_fp16_64_32_S_qkv_64_sm80",
])
def test_parse_name_rejects(name: str) -> None:
    with pytest.raises(tool.TableError, match="not a trtllm-gen"):
        tool.parse_name(name)


def test_expand_takes_every_alternative_in_order() -> None:
    assert tool.expand("a{1,2}b{x,y}") == ["a1bx", "a1by", "a2bx", "a2by"]
    assert tool.expand("plain") == ["plain"]


def test_bad_records_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evidence, yaml_file = _copies(tmp_path)
    args = ["--evidence", str(evidence), "--yaml", str(yaml_file)]
    data = json.loads(evidence.read_text(encoding="utf-8"))
    data["families"][0]["groups"].append("no_such_group")
    evidence.write_text(json.dumps(data), encoding="utf-8")
    assert tool.main(args) == 2
    assert "names group 'no_such_group'" in capsys.readouterr().err
    data["families"][0]["groups"].pop()
    data["families"].append(data["families"][0])
    evidence.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(tool.TableError, match="more than one family"):
        tool.load_names(evidence)
    del data["commit"]
    evidence.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(tool.TableError, match="needs 'commit'"):
        tool.load_names(evidence)
    shutil.copy(tool.EVIDENCE, evidence)
    yaml_file.write_text("kernels: {}\n", encoding="utf-8")
    assert tool.main(args) == 2
    assert "markers are missing" in capsys.readouterr().err


def test_generated_rules_say_how_they_are_known() -> None:
    generated = [r for r in MATRIX.kernels["trtllm_gen"].rules if r.id.startswith("trtllm_gen.cubins.")]
    assert len(generated) >= 10
    for rule in generated:
        assert rule.status is Status.DERIVED
        assert "trtllm_gen_kernels.json" in rule.source
        assert COMMIT in rule.source


def _gen(**axes: object) -> KernelQuery:
    base: dict[str, object] = {"sm": 100, "phase": "generation", "spec_dec": "none", "attention": "gqa",
                               "q_per_kv": 4, "dtype": "bf16", "kv_cache_dtype": "bf16", "head_dim": 128,
                               "tokens_per_block": 32, "beam_width": 1}
    return KernelQuery("trtllm_gen", **{**base, **axes})  # type: ignore[arg-type]


def test_every_recorded_decode_shape_is_served_and_no_other_head() -> None:
    """Each non-MLA decode kernel's (KV dtype, head, tokens per page) is granted; other heads are not."""
    shapes = {(k.kv, k.head_qk, k.tokens_per_page) for k in KERNELS if k.generation and not k.mla}
    assert len(shapes) == 22  # (3 KV types x heads 64/128/256 + NVFP4 x heads 64/128) x pages 32/64
    for kv, head, page in shapes:
        dtype = kv if kv in {"fp16", "bf16"} else "bf16"
        query = _gen(kv_cache_dtype=kv, dtype=dtype, head_dim=head, tokens_per_block=page)
        r = capmatrix.resolve(query, MATRIX)
        assert r.verdict is Verdict.SUPPORTED, (kv, head, page, r.rules)
    for head in MATRIX.axes["head_dim"].values or ():
        if head not in {64, 128, 256}:
            r = capmatrix.resolve(_gen(head_dim=head), MATRIX)
            assert r.verdict is Verdict.UNSUPPORTED, head
            assert "trtllm_gen.cubins.generation_head_kv_bf16_fp16_fp8" in r.rules


@pytest.mark.parametrize("sm", [100, 103])
def test_phi3_mini_on_blackwell(sm: int) -> None:
    """Phi-3-mini (head 96): no trtllm-gen cubin, so decode is MMHA, prefill unfused MHA (no fmha_v2 step)."""
    query = KernelQuery(None, model="phi3_mini", sm=sm, spec_dec="none")
    decode = capmatrix.select("trtllm_generation", query, matrix=MATRIX)
    assert decode.kernel == "mmha"
    assert decode.trace[0].kernel == "trtllm_gen"
    assert "trtllm_gen.cubins.generation_head_kv_bf16_fp16_fp8" in decode.trace[0].rules
    query = KernelQuery(None, model="phi3_mini", sm=sm)
    prefill = capmatrix.select("trtllm_context", query, matrix=MATRIX)
    assert prefill.kernel == "unfused_mha"
    assert [r.kernel for r in prefill.trace] == ["trtllm_gen", "unfused_mha"]
    # paged context FMHA is on by default (KV-cache reuse), so the paged-KV kernels are the ones asked
    assert "trtllm_gen.cubins.paged_context_head_kv_bf16_fp16_fp8" in prefill.trace[0].rules
    packed = capmatrix.select("trtllm_context", query.replace(paged_context_fmha=False), matrix=MATRIX)
    assert packed.kernel == "unfused_mha"
    assert "trtllm_gen.cubins.context_head_bf16_fp16_fp8" in packed.trace[0].rules
