"""tools/import_flashinfer.py: the recorded FlashInfer facts and the YAML agree; anchors fail loudly."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from scripts import load_script

#: FlashInfer 0.7.2.post1's wheel, unpacked (``python -m zipfile -e``); the test that re-reads it runs only
#: where this names a directory holding ``flashinfer/``.
SRC = Path(os.environ.get("CAPMATRIX_FLASHINFER_SRC", "") or "flashinfer-sources-not-given")

TOOL = load_script("tools/import_flashinfer.py")

UTILS = """\
#pragma once
#define DISPATCH_HEAD_DIM(head_dim, HEAD_DIM, ...)     \\
  switch (head_dim) {                                  \\
    case 64: {                                         \\
      constexpr size_t HEAD_DIM = 64;                  \\
      __VA_ARGS__                                      \\
      break;                                           \\
    }                                                  \\
    case 96: {                                         \\
      constexpr size_t HEAD_DIM = 96;                  \\
      __VA_ARGS__                                      \\
      break;                                           \\
    }                                                  \\
    default: {                                         \\
      err_msg << "Unsupported head_dim: " << head_dim; \\
    }                                                  \\
  }

#define DISPATCH_OTHER(x) case 7: { constexpr size_t HEAD_DIM = 7; }
"""
PREFILL = """\
template <uint32_t HEAD_DIM_VO>
cudaError_t Run() {
  static_assert(HEAD_DIM_VO == 64 || HEAD_DIM_VO == 192);
}
"""
AOT = """\
import torch


def get_default_config():
    return {
        "fa2_head_dim": [(64, 64)],
        "fa3_head_dim": [(192, 128), (64, 64)],
        "f16_dtype": [torch.float16],
        "f8_dtype": [torch.float8_e4m3fn],
        "use_sliding_window": [False],
        "use_logits_soft_cap": [False, True],
        "add_xqa": True,
    }
"""
JIT = """\
import torch


def gen_xqa_module(input_dtype, kv_cache_dtype, page_size, head_dim, head_group_ratio, q_seq_len=1):
    if input_dtype == torch.bfloat16:
        flags = 0
    else:
        raise ValueError("dtype")
    if kv_cache_dtype == torch.float8_e4m3fn:
        flags = 2
    else:
        flags = 0
    if page_size not in [32, 64]:
        raise ValueError("page")
    if head_dim % 32 != 0 or head_dim > 256 or head_dim < 32:
        raise ValueError("head")
    if head_dim > 128:
        if q_seq_len > 1:
            raise ValueError("spec")
        if head_group_ratio > 8:
            raise ValueError("group")
    return flags
"""
XQA = """\
def xqa(k_cache):
    if k_cache.dtype == 3:
        assert get_compute_capability(0)[0] in [12], "nvfp4"
    if get_compute_capability(0)[0] not in [9, 12]:
        raise RuntimeError("sm")


def xqa_mla():
    if get_compute_capability(0)[0] not in [12]:
        raise RuntimeError("sm")
"""
SM90 = "data/include/flashinfer/attention/hopper/prefill_sm90.cuh"
FILES = {"data/include/flashinfer/utils.cuh": UTILS, SM90: PREFILL, "aot.py": AOT, "jit/xqa.py": JIT,
         "xqa.py": XQA,
         "_build_meta.py": '__version__ = "9.9.9"\n__git_commit__ = "abc123"\n'}


def _tree(root: Path, **changed: str) -> Path:
    for rel, text in FILES.items():
        path = root / "flashinfer" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(changed.get(rel.replace("/", "_").replace(".", "_"), text), encoding="utf-8")
    return root


def test_yaml_matches_recorded_table(capsys: pytest.CaptureFixture[str]) -> None:
    table = TOOL.load_table()
    assert table["flashinfer"] == {"version": "0.7.2.post1",
                                   "commit": "beabf5004585b03da60e927bbb803acbaa62fe36"}
    assert TOOL.check(table, TOOL.KERNELS.read_text(encoding="utf-8")) == []
    assert TOOL.run(["--check"]) == 0
    assert capsys.readouterr().out == ""


def _in_rule(kernels: str, rule_id: str, old: str, new: str) -> str:
    """``kernels`` with ``old`` replaced by ``new`` in the rule ``rule_id`` only."""
    at = kernels.index(f"- id: {rule_id}\n")
    end = kernels.find("- id: ", at + 1)
    assert old in kernels[at:end], (rule_id, old)
    return kernels[:at] + kernels[at:end].replace(old, new, 1) + kernels[end:]


def test_check_catches_yaml_drift() -> None:
    """A page size, head modulus, SM range, FA2/FA3 head or an exclude changed in the YAML is named."""
    table = TOOL.load_table()
    kernels = TOOL.KERNELS.read_text(encoding="utf-8")
    for rule_id, old, new, needle in [
        ("flashinfer_xqa.sm90_fp16", "tokens_per_block: [16, 32, 64, 128]", "tokens_per_block: [16, 32, 64]",
         "flashinfer_xqa.sm90_fp16: tokens_per_block"),
        ("flashinfer_xqa.sm90_fp16", "head_dim: [{multiple_of: 16}]", "head_dim: [{multiple_of: 8}]",
         "flashinfer_xqa.sm90_fp16: head_dim"),
        ("flashinfer_xqa.other_sm", 'sm: ["[100, 109]", "[120, 129]"]', 'sm: ["[100, 119]", "[120, 129]"]',
         "flashinfer_xqa.other_sm: sm"),
        ("flashinfer_xqa.sm90_bf16", "kv_cache_dtype: [bf16, fp8]", "kv_cache_dtype: [bf16, fp16]",
         "flashinfer_xqa.sm90_bf16: kv_cache_dtype fp16"),
        ("flashinfer_xqa.head_gt512", 'head_dim: ">512"', 'head_dim: ">500"', "flashinfer_xqa: no exclude"),
        ("flashinfer_fa2.sm90_bf16", "head_dim: *fa2_head_sizes", "head_dim: [64, 128, 256, 512, 96]",
         "flashinfer_fa2.sm90_bf16: head_dim"),
        ("flashinfer_fa3.sm90_bf16", "head_dim: *fa3_head_sizes", "head_dim: [64, 128, 192, 256]",
         "flashinfer_fa3.sm90_bf16: head_dim"),
    ]:
        problems = TOOL.check(table, _in_rule(kernels, rule_id, old, new))
        assert problems, needle
        assert all(p.startswith(needle) for p in problems), (needle, problems)
    # A named list changed where it is written: every rule that uses it is named.
    fa3_sizes = _in_rule(kernels, "flashinfer_fa3.sm90", "&fa3_head_sizes [64, 128, 256]",
                         "&fa3_head_sizes [64, 128, 192, 256]")
    assert sorted({p.split(":")[0] for p in TOOL.check(table, fa3_sizes)}) == [
        "flashinfer_fa3.sm90", "flashinfer_fa3.sm90_bf16", "flashinfer_fa3.sm90_features",
        "flashinfer_fa3.sm90_features_fp16"]
    # XQA granted on only some of its majors, FA3 off Hopper, a kernel missing
    narrowed = kernels.replace('sm: ["[100, 109]", "[120, 129]"]', 'sm: ["[100, 109]"]').replace(
        'sm: [90, "[100, 109]", "[120, 129]"]', 'sm: [90, "[100, 109]"]')
    assert TOOL.check(table, narrowed) == [
        "flashinfer_xqa: grants cover majors [9, 10] != [9, 10, 12] (flashinfer/xqa.py:402)"]
    off_hopper = _in_rule(kernels, "flashinfer_fa3.sm90_features", "sm: 90", "sm: 100")
    assert [p.split(":")[0] for p in TOOL.check(table, off_hopper)] == ["flashinfer_fa3.sm90_features"]
    with pytest.raises(TOOL.TableError, match="no kernel flashinfer_fa3"):
        TOOL.check(table, kernels.replace("  flashinfer_fa3:\n", "  flashinfer_fa3x:\n"))


def test_check_catches_table_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A page size dropped from the table, a default build without windows, or the XQA SMs narrowed."""
    table = TOOL.load_table()
    kernels = TOOL.KERNELS.read_text(encoding="utf-8")
    pages = copy.deepcopy(table)
    pages["facts"]["xqa_page_size"]["value"].remove(128)
    problems = TOOL.check(pages, kernels)
    assert len(problems) == 6
    assert all("tokens_per_block" in p and "page sizes [16, 32, 64] (flashinfer/jit/xqa.py:82)" in p
               for p in problems), problems
    window = copy.deepcopy(table)
    window["facts"]["aot_use_sliding_window"]["value"] = [False]
    assert TOOL.check(window, kernels) == [
        f"flashinfer_fa3.{rid}: grants sliding_window but the default build has none (flashinfer/aot.py:1358)"
        for rid in ("sm90_features_fp16", "sm90_features")]
    sms = copy.deepcopy(table)
    sms["facts"]["xqa_sm_major"]["value"] = [9, 10]
    assert any(p.startswith("flashinfer_xqa.other_sm: sm") for p in TOOL.check(sms, kernels))
    dtypes = copy.deepcopy(table)
    dtypes["facts"]["xqa_input_dtype"]["value"] = ["fp16"]
    assert {p.split(":")[0] for p in TOOL.check(dtypes, kernels)} == {
        "flashinfer_xqa.sm90_bf16", "flashinfer_xqa.other_sm_bf16", "flashinfer_xqa.multi_token"}
    # through the command line: exit 1 and the drift printed; a table missing a fact is bad input (2)
    path = tmp_path / "table.json"
    path.write_text(json.dumps(pages), encoding="utf-8")
    monkeypatch.setattr(TOOL, "TABLE", path)
    assert TOOL.run(["--check"]) == 1
    assert "page sizes [16, 32, 64]" in capsys.readouterr().out
    del pages["facts"]["xqa_head_gt"]
    path.write_text(json.dumps(pages), encoding="utf-8")
    assert TOOL.run(["--check"]) == 2
    assert "facts differ" in capsys.readouterr().err


def test_extract_reads_a_synthetic_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    table = TOOL.extract(_tree(tmp_path))
    assert table["flashinfer"] == {"version": "9.9.9", "commit": "abc123"}
    values = {k: v["value"] for k, v in table["facts"].items()}
    assert values == {
        "dispatch_head_dim": [64, 96], "fa3_head_dim_vo": [64, 192],
        "aot_fa2_head_dim": [[64, 64]], "aot_fa3_head_dim": [[192, 128], [64, 64]],
        "aot_f16_dtype": ["fp16"], "aot_f8_dtype": ["fp8_e4m3"], "aot_use_sliding_window": [False],
        "aot_use_logits_soft_cap": [False, True],
        "xqa_input_dtype": ["bf16"], "xqa_kv_cache_dtype": ["fp8_e4m3", "input_dtype"],
        "xqa_page_size": [32, 64], "xqa_head_dim": {"multiple_of": 32, "max": 256, "min": 32},
        "xqa_head_gt": {"above": 128, "max_q_seq_len": 1, "max_head_group_ratio": 8},
        "xqa_sm_major": [9, 12], "xqa_nvfp4_sm_major": [12], "xqa_mla_sm_major": [12]}
    lines = {k: (v["path"], v["line"]) for k, v in table["facts"].items()}
    assert lines["dispatch_head_dim"] == ("flashinfer/data/include/flashinfer/utils.cuh", 2)
    assert lines["fa3_head_dim_vo"] == ("flashinfer/" + SM90, 3)
    assert lines["xqa_page_size"] == ("flashinfer/jit/xqa.py", 13)
    assert lines["xqa_sm_major"] == ("flashinfer/xqa.py", 4)
    assert lines["xqa_nvfp4_sm_major"] == ("flashinfer/xqa.py", 3)
    assert lines["aot_fa3_head_dim"] == ("flashinfer/aot.py", 7)
    assert TOOL.run(["extract", "--flashinfer-src", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out) == table
    target = tmp_path / "written.json"
    monkeypatch.setattr(TOOL, "TABLE", target)
    assert TOOL.run(["extract", "--flashinfer-src", str(tmp_path), "--write"]) == 0
    assert json.loads(target.read_text(encoding="utf-8")) == table
    (tmp_path / "flashinfer" / "_build_meta.py").unlink()
    assert TOOL.extract(tmp_path)["flashinfer"] == {"version": "unknown", "commit": "unknown"}


@pytest.mark.parametrize(("key", "old", "new", "message"), [
    ("data_include_flashinfer_utils_cuh", "#define DISPATCH_HEAD_DIM(", "#define DISPATCH_HEAD_SIZE(",
     "DISPATCH_HEAD_DIM not found"),
    ("data_include_flashinfer_utils_cuh", "constexpr size_t HEAD_DIM = 96;", "constexpr int HEAD_DIM = 96;",
     "utils.cuh:2: DISPATCH_HEAD_DIM is no longer a switch"),
    ("data_include_flashinfer_utils_cuh", "constexpr size_t HEAD_DIM = 96;",
     "constexpr size_t HEAD_DIM = 128;", "DISPATCH_HEAD_DIM is no longer"),
    ("data_include_flashinfer_attention_hopper_prefill_sm90_cuh", "HEAD_DIM_VO == 64 ||",
     "HEAD_DIM_VO % 64 == 0 ||", "static_assert"),
    ("aot_py", "def get_default_config():", "def default_config():", "def get_default_config not found"),
    ("aot_py", '"fa3_head_dim": [(192, 128), (64, 64)]', '"fa3_head_dim": heads()',
     "'fa3_head_dim' is not a list literal"),
    ("aot_py", "[torch.float16]", "[torch.float4]", "torch.float4 is not a torch dtype"),
    ("aot_py", "    return {", "    return config\n    config = {", "no longer returns a dict literal"),
    ("jit_xqa_py", "if page_size not in [32, 64]:", "if page_size not in PAGES:",
     "PAGES is not an int list literal"),
    ("jit_xqa_py", "if page_size not in [32, 64]:", "if page_size % 32:",
     "`if page_size not in [...]` not found"),
    ("jit_xqa_py", "head_dim > 256 or", "head_dim >= 256 or", "is not a modulus or bound"),
    ("jit_xqa_py", " or head_dim < 32:", ":", "not a modulus, a max and a min"),
    ("jit_xqa_py", "head_dim % 32 != 0", "head_dim % 32 != 1", "is not a modulus or bound"),
    ("jit_xqa_py", "head_dim > 256 or", "head_dim > LIMIT or", "LIMIT is not an int literal"),
    ("jit_xqa_py", "if head_group_ratio > 8:", "if head_group_ratio >= 8:", "not the q_seq_len and"),
    ("jit_xqa_py", "if head_dim > 128:", "if head_dim >= 128:", "`if head_dim > N:` not found"),
    ("jit_xqa_py", "    else:\n        raise", "    elif input_dtype in (1, 2):\n        raise",
     "input_dtype chain has a test"),
    ("jit_xqa_py", "if input_dtype == torch.bfloat16:", "if input_dtype is torch.bfloat16:",
     "no `if input_dtype == torch.X` chain"),
    ("xqa_py", "not in [9, 12]", "not in (9, 12)", ""),
    ("xqa_py", "not in [9, 12]", "not in MAJORS", "xqa.py:4 (xqa): MAJORS is not an int list literal"),
    ("xqa_py", "not in [9, 12]", "< 9", "0 tests"),
    ("xqa_py", "not in [9, 12]", "not in [9, '12']", "'12' is not an int literal"),
    ("xqa_py", "def xqa_mla():", "def xqa_mla_sm120():", "def xqa_mla not found"),
])
def test_changed_anchor_fails_loudly(tmp_path: Path, key: str, old: str, new: str, message: str) -> None:
    original = {rel.replace("/", "_").replace(".", "_"): text for rel, text in FILES.items()}[key]
    assert old in original, old
    src = _tree(tmp_path, **{key: original.replace(old, new, 1)})
    if not message:  # a tuple literal is still a literal list of majors: not a shape change
        assert TOOL.extract(src)["facts"]["xqa_sm_major"]["value"] == [9, 12]
        return
    with pytest.raises(TOOL.TableError) as raised:
        TOOL.extract(src)
    assert message in str(raised.value)


def test_missing_sources_are_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert TOOL.run(["extract", "--flashinfer-src", str(tmp_path)]) == 2
    assert "not found (unpack the wheel's flashinfer/" in capsys.readouterr().err


def test_sm_ranges_read_as_majors() -> None:
    assert TOOL._majors([90, "[100, 109]", "[120, 129]"]) == {9, 10, 12}
    assert TOOL._majors("[80, 121]") == set(range(8, 13))


@pytest.mark.skipif(
    not (SRC / "flashinfer").is_dir(),
    reason="set CAPMATRIX_FLASHINFER_SRC to FlashInfer 0.7.2.post1's unpacked wheel to run",
)
def test_extract_reproduces_the_record() -> None:
    recorded = json.loads(TOOL.TABLE.read_text(encoding="utf-8"))
    assert TOOL.extract(SRC) == recorded
