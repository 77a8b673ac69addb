"""Answers that fit: ``wrap`` at ``$COLUMNS`` (80 off a terminal), never in a word; verdict, reasons first."""

from __future__ import annotations

import io
import re

import pytest

from capmatrix.authoring.cli import run
from capmatrix.authoring.cli._common import columns, wrap


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


ANSWERS = [
    ("query", "xqa", "--sm", "121", "--model", "deepseek_v3", "--spec-dec", "one_model"),
    ("query", "xqa", "--sm", "121", "--model", "deepseek_v3", "--spec-dec", "one_model", "--explain"),
    ("query", "vllm_flash_attn", "--gpu", "T4", "--model", "llama"),
    ("select", "vllm_attention", "--gpu", "H100", "--model", "deepseek_v3"),
    ("select", "vllm_attention", "--gpu", "H100", "--model", "deepseek_v3", "--explain"),
    ("select", "trtllm_generation", "--sm", "121", "--model", "deepseek_v3", "--spec-dec", "one_model"),
    ("select", "sglang_attention", "--sm", "120", "--model", "deepseek_v3", "--sglang-backend",
     "trtllm_mla", "--sglang-kv-cache-dtype", "fp8_e5m2", "--explain"),
    ("select", "sglang_attention", "--gpu", "all", "--model", "gpt_oss_120b"),
]


def _words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize("width", [80, 60])
@pytest.mark.parametrize("argv", ANSWERS, ids=[" ".join(a[:2]) + f"-{i}" for i, a in enumerate(ANSWERS)])
def test_answers_wrap_at_columns_never_inside_a_word(
    monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...], width: int,
) -> None:
    """Every line fits (or is one word that cannot), and the words are the wide answer's, in order."""
    _code, wide, _ = cli(*argv)
    assert max(map(len, wide.splitlines())) > width  # there is something to wrap
    monkeypatch.setenv("COLUMNS", str(width))
    _code, narrow, _ = cli(*argv)
    for line in narrow.splitlines():
        assert len(line) <= width or len(line.split()) == 1, line
    assert _words(narrow) == _words(wide)  # nothing lost, no word cut in two


def test_default_width_off_a_terminal_is_80(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS")
    assert columns() == 80  # the tests' stdout is no terminal
    _code, out, _ = cli(*ANSWERS[0])
    assert max(map(len, out.splitlines())) <= 80
    monkeypatch.setenv("COLUMNS", "not a number")
    assert columns() == 80
    monkeypatch.setenv("COLUMNS", "132")
    assert columns() == 132


def test_continuations_go_under_the_text_after_the_mark() -> None:
    text = "    x rule.one (file.yaml:1) needs sm >=80 (got 75), attention [mha, gqa] (got mla)"
    assert wrap(text, 40).splitlines() == [
        "    x rule.one (file.yaml:1) needs sm",
        "      >=80 (got 75), attention [mha,",
        "      gqa] (got mla)",
    ]
    label = "  axis defaults: beam_width=1 tokens_per_block=32 sliding_window=false"
    assert wrap(label, 40).splitlines() == [
        "  axis defaults: beam_width=1",
        "      tokens_per_block=32",
        "      sliding_window=false",
    ]
    long_word = "  query: " + "x" * 60
    assert wrap(long_word, 40).splitlines() == ["  query:", "      " + "x" * 60]
    assert wrap("short\n\n  also short", 40) == "short\n\n  also short"


def test_verdict_and_deciding_reasons_come_before_the_values() -> None:
    _code, out, _ = cli(*ANSWERS[0])
    lines = out.splitlines()
    assert lines[0] == "xqa: unsupported"
    assert lines[1] == "  decided by:"
    values = next(i for i, line in enumerate(lines) if line.startswith("  query:"))
    assert lines.index("  decided by:") < values
    _code, out, _ = cli(*ANSWERS[3])
    lines = out.splitlines()
    assert lines[0] == "vllm_attention: vllm_flash_attn_mla"
    assert lines[1].startswith("=> vllm_flash_attn_mla: supported; + vllm_flash_attn_mla.base")


def test_build_values_only_where_they_decide() -> None:
    """vLLM's build flags are environment axes: an answer shows one only where a rule it shows reads it."""
    _code, out, _ = cli("query", "vllm_flash_attn", "--gpu", "T4", "--model", "llama")
    assert "_built=" not in out
    _code, out, _ = cli("select", "vllm_attention", "--gpu", "H100", "--model", "deepseek_v3", "--json")
    assert '"vllm_flashmla_built": true' in out  # still in the JSON, which has every value
    _code, out, _ = cli("select", "vllm_attention", "--gpu", "H100", "--model", "deepseek_v3")
    assert "vllm_flashmla_built" not in out


def test_a_cut_reason_ends_after_a_whole_word() -> None:
    _code, out, _ = cli(*ANSWERS[3])
    cut = next(line for line in out.splitlines() if line.endswith(" ..."))
    assert re.search(r"[\w)\].,;:]+ \.\.\.$", cut)
    from capmatrix.authoring.cli._query import _cut

    assert _cut("alpha beta gamma", 14) == "alpha beta ..."
    assert _cut("alpha beta gamma", 100) == "alpha beta gamma"
    assert _cut("alphabetagamma", 10) == "alphabe ..."  # one word longer than the limit: no space to cut at
