"""tools/import_xqa_cubins.py: xqa.yaml's precompiled multi-token grants follow the recorded cubin names."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from scripts import load_script

import capmatrix
from capmatrix import KernelQuery, Status, Verdict

ROOT = Path(__file__).resolve().parent.parent


tool = load_script("tools/import_xqa_cubins.py")
EVIDENCE = json.loads(tool.EVIDENCE.read_text(encoding="utf-8"))
MATRIX = capmatrix.load()


def _multi_token_m16(names: list[str]) -> list[object]:
    """The recorded kernels the precompiled path could pick for a spec-dec query of up to 16 tokens."""
    cubins = [tool.parse_name(n) for n in names]
    return [c for c in cubins
            if c.multi_token and c.beam_width == 1 and c.m_tile == 16
            and c.tokens_per_block in {32, 64, 128} and c.head_dim in {64, 128, 256}]


def _query(c: object, *, sm: int, group: int) -> KernelQuery:
    return KernelQuery(
        "xqa", sm=sm, spec_dec="one_model", attention="gqa", dtype=c.dtype,  # type: ignore[attr-defined]
        kv_cache_dtype=c.kv_cache_dtype, head_dim=c.head_dim,  # type: ignore[attr-defined]
        tokens_per_block=c.tokens_per_block, q_per_kv=group, beam_width=1,  # type: ignore[attr-defined]
    )


def test_generated_section_is_current() -> None:
    """The drift check `make test` runs: xqa.yaml holds exactly what the recorded names generate."""
    assert tool.main(["--check"]) == 0


def _copies(tmp_path: Path) -> tuple[Path, Path, Path]:
    evidence = tmp_path / "cubins.json"
    xqa = tmp_path / "xqa.yaml"
    axes = tmp_path / "axes.yaml"
    shutil.copy(tool.EVIDENCE, evidence)
    shutil.copy(tool.XQA_YAML, xqa)
    shutil.copy(tool.AXES_YAML, axes)
    return evidence, xqa, axes


def test_check_fails_when_a_cubin_is_added(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evidence, xqa, axes = _copies(tmp_path)
    data = json.loads(evidence.read_text(encoding="utf-8"))
    name = "xqa_kernel_dt_fp16_d_128_beam_1_kvt_fp16_pagedKV_32_nqpkv_0_m_16_sm_120.cubin.tar.zst"
    data["probed_absent"].remove(name)
    data["probed_present"].append({"name": name, "commit": "0" * 40})
    data["header_multi_token"].append(name.removesuffix(".cubin.tar.zst"))
    evidence.write_text(json.dumps(data), encoding="utf-8")
    args = ["--evidence", str(evidence), "--xqa", str(xqa), "--axes", str(axes)]
    assert tool.main([*args, "--check"]) == 1
    err = capsys.readouterr().err
    assert "stale: run python tools/import_xqa_cubins.py" in err
    assert "120, 121]" in err  # the loader folds SM121 into SM120
    assert tool.main(args) == 0
    assert tool.main([*args, "--check"]) == 0
    assert "120, 121]" in xqa.read_text(encoding="utf-8")


def test_a_new_group_needs_no_regeneration(tmp_path: Path) -> None:
    """The grants name groups by a condition, so a group added to the universe leaves them current."""
    evidence, xqa, axes = _copies(tmp_path)
    data = yaml.safe_load(axes.read_text(encoding="utf-8"))
    values = data["axes"]["q_per_kv"]["values"]
    new = next(g for g in range(3, 64) if 64 % g and g not in values)
    data["axes"]["q_per_kv"]["values"] = sorted([*values, new])
    axes.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert tool.main(["--evidence", str(evidence), "--xqa", str(xqa), "--axes", str(axes), "--check"]) == 0


def test_the_axis_must_hold_every_divisor_of_64(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The conditions list the divisors of 64; an axis without one of them is reported, not generated."""
    evidence, xqa, axes = _copies(tmp_path)
    data = yaml.safe_load(axes.read_text(encoding="utf-8"))
    data["axes"]["q_per_kv"]["values"] = [v for v in data["axes"]["q_per_kv"]["values"] if v != 16]
    axes.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert tool.main(["--evidence", str(evidence), "--xqa", str(xqa), "--axes", str(axes)]) == 2
    assert "lacks [16]" in capsys.readouterr().err
    axes.write_text("axes: {}\n", encoding="utf-8")
    with pytest.raises(tool.CubinError, match=r"no axes\.q_per_kv\.values"):
        tool.load_groups(axes)


@pytest.mark.parametrize("group", [3, 5, 6, 7, 12, 71, 128])
@pytest.mark.parametrize("sm", [80, 86, 89, 90])
def test_any_group_64_does_not_divide_takes_the_precompiled_cubins(group: int, sm: int) -> None:
    """Llama-3.2-3B (3), Qwen2.5-1.5B (6), Command-R+ (12): groups outside the universe's list as well."""
    q = KernelQuery("xqa", sm=sm, spec_dec="one_model", attention="gqa", dtype="bf16", kv_cache_dtype="bf16",
                    head_dim=128, tokens_per_block=32, q_per_kv=group, beam_width=1)
    r = capmatrix.resolve(q, MATRIX)
    assert r.verdict is Verdict.SUPPORTED, r.rules
    assert r.rules == ("xqa.precompiled_mt.bf16_d128_kv_bf16.sm80_86_89_90",)


@pytest.mark.parametrize(("group", "rule"), [
    (3, "xqa.qgmma"), (12, "xqa.qgmma"), (71, "xqa.precompiled_mt.bf16_d128_kv_fp8.sm90"),
])
def test_hopper_fp8_keeps_groups_up_to_64_on_jit(group: int, rule: str) -> None:
    q = KernelQuery("xqa", sm=90, spec_dec="one_model", attention="gqa", dtype="bf16", kv_cache_dtype="fp8",
                    head_dim=128, tokens_per_block=32, q_per_kv=group, beam_width=1)
    r = capmatrix.resolve(q, MATRIX)
    assert r.verdict is Verdict.SUPPORTED
    assert rule in r.rules


def test_bad_inputs_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evidence, xqa, axes = _copies(tmp_path)
    xqa.write_text("kernels: {}\n", encoding="utf-8")
    assert tool.main(["--evidence", str(evidence), "--xqa", str(xqa), "--axes", str(axes)]) == 2
    assert "markers are missing" in capsys.readouterr().err
    data = json.loads(evidence.read_text(encoding="utf-8"))
    data["listing"].append({"name": data["probed_absent"][0]})
    evidence.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(tool.CubinError, match="both present and absent"):
        tool.load_names(evidence)


@pytest.mark.parametrize("name", [
    "xqa_kernel_dt_fp32_d_128_beam_1_kvt_fp32_nqpkv_0_m_16_sm_80.cubin.tar.zst",
    "xqa_kernel_dt_bf16_d_128_beam_1_kvt_fp16_nqpkv_0_m_16_sm_80.cubin.tar.zst",
    "mha_sm90.cu",
])
def test_parse_name_rejects(name: str) -> None:
    with pytest.raises(tool.CubinError):
        tool.parse_name(name)


def test_parse_name_reads_every_field() -> None:
    c = tool.parse_name(
        "xqa_kernel_dt_fp16_d_64_beam_1_kvt_e4m3_pagedKV_128_nqpkv_0_m_32_sm_89.cubin.tar.zst"
    )
    assert (c.dtype, c.head_dim, c.beam_width, c.kv_cache_dtype, c.tokens_per_block, c.q_per_kv,
            c.m_tile, c.sm) == ("fp16", 64, 1, "fp8", 128, 0, 32, 89)
    assert c.multi_token
    contiguous = tool.parse_name("xqa_kernel_dt_bf16_d_128_beam_1_kvt_bf16_nqpkv_8_m_8_sm_120.cubin.cpp")
    assert (contiguous.tokens_per_block, contiguous.q_per_kv, contiguous.multi_token) == (0, 8, False)


def test_every_recorded_multi_token_cubin_is_granted() -> None:
    present = _multi_token_m16([r["name"] for r in EVIDENCE["listing"] + EVIDENCE["probed_present"]])
    assert len(present) > 20
    for c in present:
        hopper_fp8 = c.sm == 90 and c.kv_cache_dtype == "fp8"  # type: ignore[attr-defined]
        group = 71 if hopper_fp8 else 7  # groups the runner sends to the precompiled path
        for sm in (120, 121) if c.sm == 120 else (c.sm,):  # type: ignore[attr-defined]
            r = capmatrix.resolve(_query(c, sm=sm, group=group), MATRIX)
            assert r.verdict is Verdict.SUPPORTED, c
            assert any(MATRIX.rule(x).status is Status.DERIVED for x in r.rules), (c, r.rules)


def test_no_probed_absent_cubin_is_granted() -> None:
    absent = _multi_token_m16(EVIDENCE["probed_absent"])
    assert any(c.sm == 120 for c in absent)  # type: ignore[attr-defined]
    for c in absent:
        for sm in (120, 121) if c.sm == 120 else (c.sm,):  # type: ignore[attr-defined]
            r = capmatrix.resolve(_query(c, sm=sm, group=71), MATRIX)
            assert r.verdict is Verdict.UNSUPPORTED, (c, r.rules)


def test_no_sm12x_multi_token_cubin_for_precompiled_groups() -> None:
    """The consequence: groups 64 does not divide have no XQA spec-dec kernel on SM120/121."""
    for model in ("qwen2", "falcon"):
        for sm in (120, 121):
            for spec_dec in ("one_model", "two_model"):
                r = capmatrix.resolve(KernelQuery("xqa", sm=sm, model=model, spec_dec=spec_dec), MATRIX)
                assert r.verdict is Verdict.UNSUPPORTED, (model, sm, spec_dec)
            r = capmatrix.resolve(KernelQuery("xqa", sm=80, model=model, spec_dec="one_model"), MATRIX)
            assert r.verdict is Verdict.SUPPORTED, model


def test_generated_rules_say_how_they_are_known() -> None:
    generated = [r for r in MATRIX.kernels["xqa"].rules if r.id.startswith("xqa.precompiled_mt.")]
    assert generated
    for rule in generated:
        assert rule.status is Status.DERIVED
        assert "trtllm_xqa_cubins.json" in rule.source


def test_nvidia_names_corroborate_the_header(tmp_path: Path) -> None:
    """A multi-token NVIDIA file name the header lacks, or a header kernel looked up in vain, is an error."""
    evidence, _, _ = _copies(tmp_path)
    data = json.loads(evidence.read_text(encoding="utf-8"))
    found = data["probed_present"][0]["name"]
    data["header_multi_token"].remove(found.removesuffix(".cubin.tar.zst"))
    evidence.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(tool.CubinError, match="missing from 'header_multi_token'"):
        tool.load_names(evidence)
    data = json.loads(tool.EVIDENCE.read_text(encoding="utf-8"))
    data["probed_absent"].append(data["header_multi_token"][0] + ".cubin.tar.zst")
    evidence.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(tool.CubinError, match="looked up in vain"):
        tool.load_names(evidence)
    data = json.loads(tool.EVIDENCE.read_text(encoding="utf-8"))
    data["header_multi_token"].append("xqa_kernel_dt_bf16_d_128_beam_1_kvt_bf16_nqpkv_8_m_8_sm_80")
    evidence.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(tool.CubinError, match="single-token"):
        tool.load_names(evidence)


def test_header_record_is_complete_per_sm() -> None:
    """The header declares multi-token kernels for SM80/86/89/90 only; none for SM87, SM120 or head 256."""
    cubins = [tool.parse_name(n) for n in EVIDENCE["header_multi_token"]]
    assert {c.sm for c in cubins} == {80, 86, 89, 90}
    assert {c.head_dim for c in cubins} == {64, 128}
    assert {c.sm for c in cubins if c.kv_cache_dtype == "fp8"} == {89, 90}
    assert 16 not in {c.tokens_per_block for c in cubins}
