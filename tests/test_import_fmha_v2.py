"""tools/import_fmha_v2.py: the fmha_v2 grants follow the recorded setup.py table; the tool's parts work."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from scripts import load_script

ROOT = Path(__file__).resolve().parent.parent


tool = load_script("tools/import_fmha_v2.py")


def test_generated_rules_match_the_recorded_table() -> None:
    """The drift check: regenerating from the table changes nothing in fmha_v2.yaml."""
    assert tool.run(["--check"]) == 0


def test_check_fails_on_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    table = json.loads(tool.TABLE.read_text(encoding="utf-8"))
    # the table loses SM90's FP8 context kernels: the generated block must change
    table["kernels"] = [k for k in table["kernels"] if not (k["sm"] == 90 and k["dtype"] == "e4m3")]
    changed = tmp_path / "table.json"
    changed.write_text(json.dumps(table), encoding="utf-8")
    target = tmp_path / "fmha_v2.yaml"
    target.write_text(tool.TARGET.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(tool, "TABLE", changed)
    monkeypatch.setattr(tool, "TARGET", target)
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    assert tool.run(["--check"]) == 1
    assert "fmha_v2.context_fp8_sm90" in capsys.readouterr().out
    assert tool.run([]) == 0  # rewrite
    assert tool.run(["--check"]) == 0
    assert "fmha_v2.context_fp8_sm90" not in target.read_text(encoding="utf-8")


def test_sm100_has_no_fp8_context_kernels() -> None:
    """The issue's correction: setup.py builds no E4M3 context kernel for SM100 (only FP16/BF16 head 80)."""
    table = tool.load_table()
    sm100 = [k for k in table["kernels"] if k["sm"] == 100]
    assert {k["dtype"] for k in sm100 if k["kind"] == "context"} == {"fp16", "bf16"}
    assert all(k["head_sizes"] == [80] for k in sm100 if k["kind"] == "context")
    assert {(k["kind"], k["dtype"]) for k in sm100 if k["kind"] != "context"} == {
        ("mla_context", "bf16"), ("mla_generation", "bf16"),
    }


def _minimal_table() -> dict[str, Any]:
    return {
        "source": {"repo": "r", "path": "p", "commit": "c"},
        "build_env": {"path": "b", "commit": "d", "function": "f", "env": {}},
        "device_sms": {"map": {"90": [90], "120": [120, 121]}},
        "kernels": [
            {"sm": 90, "dtype": "bf16", "output_dtype": "bf16", "kind": "context",
             "head_sizes": [16, 64, 128], "softcapping_head_sizes": [128]},
            {"sm": 120, "dtype": "bf16", "output_dtype": "bf16", "kind": "context", "head_sizes": [64, 128],
             "softcapping_head_sizes": []},
            {"sm": 120, "dtype": "e4m3", "output_dtype": "bf16", "kind": "context", "head_sizes": [128],
             "softcapping_head_sizes": []},
            {"sm": 120, "dtype": "e4m3", "output_dtype": "bf16", "kind": "mla_generation"},
        ],
    }


def test_generate_groups_by_heads_and_maps_device_sms() -> None:
    text = tool.generate(_minimal_table(), [64, 128, 576])
    ids = [line.split(": ")[1] for line in text.splitlines() if line.startswith("      - id: ")]
    assert ids == [
        "fmha_v2.context_bf16_sm90_120",
        "fmha_v2.context_bf16_sm90_softcap",
        "fmha_v2.context_fp8_bf16_sm120",
        "fmha_v2.mla_generation_fp8_sm120",
    ]
    assert "sm: [90, 120, 121]" in text  # 16 is outside the axis, so SM90 and SM120 share a head list
    assert "kv_cache_dtype: fp8" in text
    # context grants read the engine's input/output pair; the E4M3-in/BF16-out kernel is its own grant
    assert "trtllm_fmha_dtype: fp8_bf16" in text
    assert "FP8-in/BF16-out" in text
    assert "trtllm_fmha_dtype: bf16" in text
    assert text.count("status: derived") == 4


def test_shipped_table_has_fp8_bf16_out_only_for_head_192() -> None:
    """Finding 1: off MLA, setup.py builds FP8-in/BF16-out context kernels for head 192 on SM89/120 only."""
    pairs = {(k["sm"], k["kind"]): k for k in tool.load_table()["kernels"]
             if k["dtype"] == "e4m3" and k["output_dtype"] == "bf16"}
    assert {sm for sm, kind in pairs if kind == "context"} == {89, 120}
    assert all(pairs[sm, "context"]["head_sizes"] == [192] for sm in (89, 120))
    assert (90, "context") not in pairs
    assert (90, "mla_context") in pairs


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda t: t["kernels"][0].update(kind="decode"), "kind 'decode'"),
    (lambda t: t["kernels"][0].update(dtype="int8"), "dtype 'int8'"),
    (lambda t: t["kernels"][0].pop("output_dtype"), "output_dtype None with dtype 'bf16'"),
    (lambda t: t["kernels"][0].update(output_dtype="e4m3"), "output_dtype 'e4m3' with dtype 'bf16'"),
    (lambda t: t["kernels"][0].update(sm=75), "sm 75"),
    (lambda t: t["kernels"][0].pop("head_sizes"), "needs head_sizes"),
    (lambda t: t.pop("device_sms"), "device_sms.map"),
    (lambda t: t.pop("kernels"), "'kernels' list"),
])
def test_load_table_rejects_bad_entries(tmp_path: Path, mutate: Any, message: str) -> None:
    table = copy.deepcopy(_minimal_table())
    mutate(table)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(table), encoding="utf-8")
    with pytest.raises(tool.TableError, match=message):
        tool.load_table(path)


def test_splice_needs_markers() -> None:
    with pytest.raises(tool.TableError, match="markers are missing"):
        tool.splice("rules:\n", "x\n")
    with pytest.raises(tool.TableError, match="comes before"):
        tool.splice(f"{tool.END}\n{tool.BEGIN}\n", "x\n")
    assert tool.splice(f"a\n{tool.BEGIN}\nold\n{tool.END}\nb\n", "new\n") == (
        f"a\n{tool.BEGIN}\nnew\n{tool.END}\nb\n"
    )


FAKE_SETUP = """
import os
from collections import namedtuple
from scripts import load_script
spec = namedtuple("kernel_spec", "sm dtype head_size head_size_v input_layout sage_block_sizes "
                  "enable_attn_logit_softcapping flash_attention output_dtype", defaults=[None])
def generate_files(specs_names):
    raise AssertionError("the importer replaces generate_files")
def enumerate_kernels():
    assert os.environ["ENABLE_SM120"] == "1"
    os.mkdir("generated")  # setup.py writes into the working directory: it must be a scratch one
    specs = [
        spec(120, "bf16", 64, 0, 0, None, False, True),
        spec(120, "bf16", 128, 0, 1, None, True, True),
        spec(120, "e4m3_fp32", 128, 0, 0, None, False, True),
        spec(120, "e4m3_fp32", 192, 0, 2, None, False, True, "bf16"),    # FP8 in, BF16 out
        spec(120, "e4m3_fp32", 192, 0, 2, None, False, True, "int8"),    # an output the axis lacks
        spec(120, "e4m3_fp32", 192, 128, 3, None, False, True),
        spec(120, "e4m3_fp32", 576, 512, 2, None, False, True),
        spec(120, "e4m3_fp32", 576, 512, 0, None, False, True),   # not paged: not the decode kernel
        spec(90, "bf16", 80, 0, 0, (64, 64, 256), False, True),    # SageAttention: left out
        spec(90, "fp16", 64, 0, 0, None, False, False),            # fixed length: left out
        spec(90, "int8", 64, 0, 0, None, False, True),             # not an axis dtype
        spec(90, "bf16", 512, 512, 2, None, False, True),          # neither context nor MLA
    ]
    generate_files([(s, "f", "l", "k") for s in specs])
"""


def test_extract_runs_setup_py_and_distils_it(tmp_path: Path) -> None:
    setup = tmp_path / "setup.py"
    setup.write_text(FAKE_SETUP, encoding="utf-8")
    table = tool.extract(setup, {"ENABLE_SM120": "1"})
    assert table == [
        {"sm": 120, "dtype": "bf16", "output_dtype": "bf16", "kind": "context", "head_sizes": [64],
         "softcapping_head_sizes": [128]},
        {"sm": 120, "dtype": "e4m3", "output_dtype": "bf16", "kind": "context", "head_sizes": [192],
         "softcapping_head_sizes": []},
        {"sm": 120, "dtype": "e4m3", "output_dtype": "e4m3", "kind": "context", "head_sizes": [128],
         "softcapping_head_sizes": []},
        {"sm": 120, "dtype": "e4m3", "output_dtype": "e4m3", "kind": "mla_context"},
        {"sm": 120, "dtype": "e4m3", "output_dtype": "e4m3", "kind": "mla_generation"},
    ]
    assert not (tmp_path / "generated").exists()


def test_extract_drops_specs_without_kernel_code(tmp_path: Path) -> None:
    # generate_files skips a spec whose get_kernel_code returns None (every mask type switched off)
    setup = tmp_path / "setup.py"
    setup.write_text(
        FAKE_SETUP + "\ndef get_kernel_code(kspec, kname, lname):\n"
        "    return None if kspec.head_size == 64 else 'code'\n",
        encoding="utf-8",
    )
    table = tool.extract(setup, {"ENABLE_SM120": "1"})
    assert table[0] == {
        "sm": 120, "dtype": "bf16", "output_dtype": "bf16", "kind": "context", "head_sizes": [],
        "softcapping_head_sizes": [128],
    }
    assert len(table) == 5


def test_extract_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    setup = tmp_path / "setup.py"
    setup.write_text(FAKE_SETUP.replace('os.environ["ENABLE_SM120"] == "1"', "True"), encoding="utf-8")
    assert tool.run(["extract", "--setup-py", str(setup), "--commit", "abc"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["commit"] == "abc"
    assert len(out["kernels"]) == 5


def test_extract_rejects_other_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.py"
    other.write_text("x = 1\n", encoding="utf-8")
    assert tool.run(["extract", "--setup-py", str(other), "--commit", "abc"]) == 2
    assert "not fmha_v2's setup.py" in capsys.readouterr().err
    with pytest.raises(tool.TableError, match="cannot be loaded"):
        tool.extract(tmp_path / "setup.txt", {})
