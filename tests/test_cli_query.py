"""``capmatrix query``: what would work, in text and ``--json`` (``suggestions``), limited by ``--vary``."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

import capmatrix
from capmatrix import KernelQuery
from capmatrix.cli import run
from capmatrix.cli._query import SHOWN_SUGGESTIONS, format_suggestions


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def root_small(write_matrix: Any) -> str:
    return str(write_matrix())


SEED = ("query", "xqa", "--sm", "121", "--model", "deepseek_v3", "--spec-dec", "one_model")


def test_unsupported_text_ends_with_what_would_work() -> None:
    code, out, _ = cli(*SEED)
    assert code == 1
    assert out.endswith("  would work:\n    set dtype=fp8 and kv_cache_dtype=fp8\n")


def test_json_has_suggestions() -> None:
    code, out, _ = cli(*SEED, "--json")
    assert code == 1
    data = json.loads(out)
    assert data["suggestions"] == [{
        "changes": {"dtype": "fp8", "kv_cache_dtype": "fp8"},
        "from": {"dtype": "bf16", "kv_cache_dtype": "bf16"},
        "command": "capmatrix query xqa --model deepseek_v3 --dtype fp8 --kv-cache-dtype fp8 --sm 121 "
                   "--spec-dec one_model",
    }]
    # the command a suggestion prints answers supported
    command = data["suggestions"][0]["command"].split()[1:]
    assert cli(*command)[0] == 0


def test_supported_answer_has_no_suggestions() -> None:
    code, out, _ = cli("query", "xqa", "--sm", "120", "--model", "llama", "--spec-dec", "one_model",
                       "--json")
    assert code == 0
    assert json.loads(out)["suggestions"] == []
    code, out, _ = cli("query", "xqa", "--sm", "120", "--model", "llama", "--spec-dec", "one_model")
    assert "would work" not in out


def test_vary_limits_and_groups() -> None:
    base = ("query", "xqa", "--sm", "120", "--model", "qwen2", "--spec-dec", "one_model")
    _, out, _ = cli(*base)
    assert out.endswith("  would work:\n    set sm=80, 86, 89 or 90\n    set spec_dec=none\n")
    _, out, _ = cli(*base, "--vary", "spec_dec")
    assert out.endswith("  would work:\n    set spec_dec=none\n")
    _, out, _ = cli(*base, "--vary", "dtype")
    assert out.endswith("  would work: no change of one or two axes\n")
    code, _, err = cli(*base, "--vary", "smm")
    assert code == 2
    assert "unknown axis 'smm'" in err


def test_no_change_hint_names_vary() -> None:
    _, out, _ = cli("query", "torch_sdpa_flash", "--sm", "75", "--dtype", "fp32")
    assert out.endswith(
        "  would work: no change of one or two axes (the model's geometry kept; widen with --vary AXIS)\n"
    )


def test_depends_answer_suggests_the_residual(root_small: str) -> None:
    code, out, _ = cli("query", "xqa", "--matrix", root_small, "--sm", "120", "--attention", "mla",
                       "--json")
    assert code == 3
    data = json.loads(out)
    assert data["residual"] == ["spec_dec=none and kv=fp8"]
    assert [s["changes"] for s in data["suggestions"]] == [{"spec_dec": "none", "kv": "fp8"}]


def test_long_lists_are_cut_in_text() -> None:
    query = KernelQuery("xqa", sm=120)
    pairs = [
        capmatrix.Suggestion(changes={"sm": 90, "beam_width": b}, previous={"sm": 120, "beam_width": 1},
                             query=query.replace(sm=90, beam_width=b))
        for b in range(12)
    ]
    lines = format_suggestions(pairs)
    assert len(lines) == SHOWN_SUGGESTIONS + 1
    assert lines[0] == "set sm=90 and beam_width=0"
    assert lines[-1] == f"... and {12 - SHOWN_SUGGESTIONS} more (--json)"


def test_closest_sets_how_many_grants_are_listed() -> None:
    """--closest K: at most K grants (near misses here) in the reasons, the rest counted; exclusions stay."""
    def kinds(k: int) -> list[str]:
        code, out, _ = cli(*SEED, "--json", "--closest", str(k))
        assert code == 1
        return [r["kind"] for r in json.loads(out)["reasons"] if r["kind"] in {"exclude", "mismatch", "more"}]

    none, one, many = kinds(0), kinds(1), kinds(1000)
    assert none.count("exclude") == one.count("exclude") == many.count("exclude") >= 1
    assert "mismatch" not in none
    assert none[-1] == "more"
    assert "mismatch" in one
    assert "more" not in many  # every grant listed: nothing left to count
    assert len([k for k in many if k == "mismatch"]) > len([k for k in one if k == "mismatch"])
    text = cli(*SEED, "--closest", "0")[1]
    assert "x xqa." not in text
    assert "- xqa.mla_fp8_only" in text
