"""docs/authoring.md's recipes, performed on a copy of the shipped matrix."""

from __future__ import annotations

import io
import json
import shutil
from typing import TYPE_CHECKING

import capmatrix
from capmatrix.cli import run
from capmatrix.engine import sglang
from capmatrix.loader import default_path

if TYPE_CHECKING:
    from pathlib import Path


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_a_new_engine_release_is_a_data_change(tmp_path: Path) -> None:
    """SGLang 0.5.24: one entry in releases.yaml and `since:` on what changed; 0.5.23 answers as before."""
    root = tmp_path / "capabilities"
    shutil.copytree(default_path(), root)
    releases = root / "releases.yaml"
    text = releases.read_text(encoding="utf-8")
    anchor = "        source: PyPI sglang 0.5.23 (sglang/_version.py has no commit id)\n"
    assert text.count(anchor) == 1
    releases.write_text(text.replace(anchor, anchor + (
        "      - version: 0.5.24\n"
        "        pins: {wheel: sglang-0.5.24-cp311-cp311-manylinux_2_34_x86_64.whl}\n"
        "        source: a test release\n")), encoding="utf-8")
    kernels = root / "kernels" / "sglang_attention.yaml"
    text = kernels.read_text(encoding="utf-8")
    # 0.5.24 (in this test) drops flashmla on SM8x: the C112 finding of 0.5.23 is fixed there.
    anchor = "      - id: sglang_flashmla.base\n"
    assert text.count(anchor) == 1
    kernels.write_text(text.replace(anchor, (
        "      - id: sglang_flashmla.sm8x_dropped\n"
        '        exclude: {sm: "[80, 89]"}\n'
        "        since: 0.5.24\n"
        "        reason: a test release refuses flashmla below SM90\n"
        "        source: a test release\n"
        "        status: untested\n") + anchor), encoding="utf-8")
    assert _cli("validate", str(root))[0] == 0
    matrix = capmatrix.load(root)
    assert matrix.releases["sglang"].newest == "0.5.24"
    code, out, err = _cli("diff", "--engine", "sglang", "0.5.23", "0.5.24", "--matrix", str(root), "--json")
    assert code == 0, err
    data = json.loads(out)
    changed = [k["kernel"] for k in data["kernels"] if k["change"] != "equivalent"]
    assert changed == ["sglang_flashmla"]
    (lost,) = data["kernels"][[k["kernel"] for k in data["kernels"]].index("sglang_flashmla")]["lost"]
    assert lost["region"]["sm"][0] == 80
    # 0.5.23's answers are the shipped matrix's, cell for cell, on a spread of queries.
    shipped = capmatrix.load()
    for arch in ("DeepseekV3ForCausalLM", "LlamaForCausalLM", "GptOssForCausalLM"):
        model = sglang.model_from_hf_config({"architectures": [arch], "model_type": "x"})
        for capability in ((8, 0), (8, 9), (9, 0), (10, 0), (12, 0)):
            old = sglang.resolve(capability=capability, model=model, matrix=shipped)
            assert sglang.resolve(capability=capability, model=model, matrix=matrix, version="0.5.23") == old
    # The release's finding is gone in 0.5.24 and said to hold in 0.5.23 only.
    _code, out, _ = _cli("check", str(root), "--no-baseline")
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "gate sglang_flashmla admits" in line)
    assert "    releases: sglang 0.5.23 (not in 0.5.24)" in lines[at + 1: at + 4]
