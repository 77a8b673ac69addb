"""``capmatrix list``: every kind of name a query may use, as text and JSON; unknown names point to it."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import pytest

import capmatrix
from capmatrix.authoring.cli import run
from capmatrix.authoring.cli._list import LISTS, SHOWN_DESCRIPTION, _first_sentence

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import WriteMatrix


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_list_kernels_names_every_kernel_and_no_gate() -> None:
    matrix = capmatrix.load()
    code, out, err = cli("list", "kernels")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    kernels = sorted(k.name for k in matrix.kernels.values() if k.kind == "kernel")
    assert lines[0] == f"{len(kernels)} kernels:"
    assert [line.split(":")[0].split(" [")[0].strip() for line in lines[1:]] == kernels
    assert "trtllm_spec_dec_mode" not in out  # a gate
    assert any(line.startswith("  xqa: ") and " rules; " in line for line in lines)


def test_list_gates_json() -> None:
    code, out, _ = cli("list", "gates", "--json")
    assert code == 0
    rows = json.loads(out)["gates"]
    names = [row["name"] for row in rows]
    assert "trtllm_spec_dec_mode" in names
    assert "xqa" not in names
    gate = next(row for row in rows if row["name"] == "trtllm_spec_dec_mode")
    assert gate["engine"] == "tensorrt_llm"
    assert gate["location"].startswith("capabilities/kernels/trtllm_gates.yaml:")


def test_list_roles_models_axes_gpus_text() -> None:
    _, roles, _ = cli("list", "roles")
    assert "  trtllm_generation: trtllm_attention_init, trtllm_gen, flash_mla, xqa, fmha_v2, mmha\n" in roles
    composed = next(line for line in roles.splitlines() if line.startswith("  sglang_attention: "))
    assert composed.endswith(" (asks sglang_model_override first)")
    assert composed.split(": ", 1)[1].startswith("sglang_dsa, sglang_trtllm_mla, ")  # the overrides' first
    _, models, _ = cli("list", "models")
    assert models.startswith("26 models:\n")
    assert ("  deepseek_v3: attention=mla dtype=bf16 kv_cache_dtype=bf16 head_dim=576 q_per_kv=128 "
            "sglang_model_arch=deepseek_v3\n") in models
    _, axes, _ = cli("list", "axes")
    assert "  sm: int 75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121\n" in axes
    assert "  beam_width: int 1, 2, 4, 8 (default 1)\n" in axes
    _, gpus, _ = cli("list", "gpus")
    assert "  DGX Spark: sm 121 (also GB10, Spark)\n" in gpus
    assert "  L4: sm 89\n" in gpus  # no aliases: no "(also ...)"
    sms = [int(line.split(": sm ")[1].split()[0]) for line in gpus.splitlines()[1:]]
    assert sms == sorted(sms)


@pytest.mark.parametrize("what", sorted(LISTS))
def test_every_listing_in_json_has_every_entry(what: str) -> None:
    matrix = capmatrix.load()
    code, out, _ = cli("list", what, "--json")
    assert code == 0
    rows = json.loads(out)[what]
    expected = {
        "kernels": sum(k.kind == "kernel" for k in matrix.kernels.values()),
        "gates": sum(k.kind == "gate" for k in matrix.kernels.values()),
        "roles": len(matrix.roles), "models": len(matrix.models), "axes": len(matrix.axes),
        "gpus": len(matrix.gpus), "versions": sum(len(r.names) for r in matrix.releases.values()),
    }[what]
    assert len(rows) == expected > 0


def test_list_of_one_uses_the_singular_and_names_the_chosen_matrix(
    write_matrix: WriteMatrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = write_matrix()
    monkeypatch.setenv("CAPMATRIX_MATRIX", str(root))
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("list", "roles")
    assert code == 0
    assert out == "1 role:\n  gen: xqa, fallback\n"
    assert f"matrix {root}" in err
    assert cli("list", "gpus")[1] == "0 gpus:\n"


def test_list_refuses_an_unknown_listing() -> None:
    code, _, err = cli("list", "kernel")
    assert code == 2
    assert "invalid choice: 'kernel'" in err


def test_first_sentence_is_cut() -> None:
    assert _first_sentence("One. Two.") == "One"
    long = "word " * 40
    cut = _first_sentence(long)
    assert len(cut) == SHOWN_DESCRIPTION
    assert cut.endswith("...")


def test_unknown_kernel_points_at_list_instead_of_a_cut_list() -> None:
    code, _, err = cli("query", "nosuch", "--sm", "90")
    assert code == 2
    listed = "listed by `capmatrix list kernels` and `capmatrix list gates`"
    known = len(capmatrix.load().kernels)
    assert f"unknown kernel 'nosuch'; {known} known, {listed}" in err
    assert "..." not in err
    _, _, err = cli("query", "xqa", "--sm", "90", "--model", "deepseek")
    assert "`capmatrix list models`" in err
    assert "(did you mean 'deepseek_v3'?)" in err


def test_a_short_list_of_names_is_shown_whole() -> None:
    code, _, err = cli("select", "nope", "--sm", "90")
    assert code == 2
    assert "unknown role 'nope'; known: sglang_attention, sglang_model_override, torch_sdpa, " in err
    assert "capmatrix list" not in err
    error = capmatrix.UnknownName("axis", "x", [f"a{i}" for i in range(13)])
    assert str(error).endswith("13 known, listed by `capmatrix list axes`")
