"""``capmatrix query``: what would work, in text and ``--json`` (``suggestions``), limited by ``--vary``."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from conftest import SMALL_AXES

import capmatrix
from capmatrix import KernelQuery
from capmatrix.authoring.cli import run
from capmatrix.authoring.cli._query import SHOWN_SUGGESTIONS, format_suggestions


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


# --------------------------------------------------------------------------------------------------
# E227: an axis or alias named like an option of query or select


def _option_names(command: str) -> set[str]:
    """The axis names whose ``--<axis>`` option ``command``'s own parser has (read off argparse)."""
    import argparse

    from capmatrix.authoring.cli._query import AXIS_COMMANDS

    parser = argparse.ArgumentParser(prog=f"capmatrix {command}")
    AXIS_COMMANDS[command](parser)
    return {o[2:].replace("-", "_") for o in parser._option_string_actions if o.startswith("--")}


CLASHING = sorted(_option_names("query") | _option_names("select"))


def test_the_clashing_names_are_read_off_the_parsers() -> None:
    assert {"gpu", "vary", "explain", "closest", "model", "hf_config", "json", "matrix", "help"} <= set(
        CLASHING)
    assert "kernel" not in CLASHING  # a positional argument takes no option
    assert {"vary", "closest"} <= _option_names("query") - _option_names("select")


def _axes_with(name: str, alias: str | None = None) -> dict[str, str]:
    aliases = f"\n    aliases: {{{alias}: vllm}}" if alias else ""
    return {"axes.yaml": SMALL_AXES + f"  {name}:\n    type: bool\n    description: d{aliases}\n"}


@pytest.mark.parametrize("name", CLASHING)
def test_an_axis_named_like_an_option_is_refused_by_validate(write_matrix: Any, name: str) -> None:
    from capmatrix.authoring.loader import RESERVED_AXIS_NAMES

    root = write_matrix(_axes_with(name))
    code, out, _err = cli("validate", str(root), "--json")
    assert code == 2
    [problem] = json.loads(out)["problems"]
    line = SMALL_AXES.count("\n") + 1
    expected = "E217" if name in RESERVED_AXIS_NAMES else "E227"  # the loader's list answers first
    assert (problem["code"], problem["line"], problem["column"], problem["json_path"]) == (
        expected, line, 3, f"axes.{name}")
    for command in ("query", "select"):
        target = "xqa" if command == "query" else "nothing"
        code, _out, err = cli(command, target, "--matrix", str(root), "--sm", "90")
        if expected == "E227" and name not in _option_names(command):
            continue  # the other command has no such option: its axis option works
        assert (code, "Traceback" in err) == (2, False), err
        assert f"{root}/axes.yaml:{line}:3: axes.{name}: " in err


def test_the_clash_names_the_option_and_the_commands(write_matrix: Any) -> None:
    root = write_matrix(_axes_with("gpu"))
    code, _out, err = cli("validate", str(root))
    assert code == 2
    line = SMALL_AXES.count("\n") + 1
    assert err.splitlines() == [
        (f"{root}/axes.yaml:{line}:3: axes.gpu: axis name 'gpu' clashes with the command line: --gpu is "
         "an option of `capmatrix query` and `capmatrix select` (rename the axis, e.g. gpu_axis)"),
        "capmatrix: 1 problem in 1 file",
    ]
    assert capmatrix.load(root).axes["gpu"].type is capmatrix.AxisType.BOOL  # Python's queries are fine


def test_an_option_of_query_alone_leaves_select_its_axis(write_matrix: Any) -> None:
    roles = """\
        roles:
          decode:
            description: d
            candidates: [xqa, fallback]
            source: test
        """
    root = write_matrix({**_axes_with("vary"), "roles.yaml": roles})
    code, _out, err = cli("query", "xqa", "--matrix", str(root), "--sm", "90")
    assert code == 2
    assert "--vary is an option of `capmatrix query` (rename" in err
    code, out, err = cli("select", "decode", "--matrix", str(root), "--sm", "90", "--attention", "gqa",
                         "--kv", "bf16", "--spec-dec", "none", "--causal", "true", "--vary", "true", "--json")
    assert code == 0, err
    assert json.loads(out)["trace"][0]["origins"]["vary"] == "query"  # --vary set the axis
    code, _out, err = cli("validate", str(root))
    assert code == 2
    assert "--vary is an option of `capmatrix query` (rename" in err


def test_an_alias_named_like_an_option_is_placed_at_its_key(write_matrix: Any) -> None:
    root = write_matrix(_axes_with("kv_layout", alias="closest"))
    code, out, _err = cli("validate", str(root), "--json")
    assert code == 2
    [problem] = json.loads(out)["problems"]
    assert problem == {
        "code": "E227", "path": f"{root}/axes.yaml", "line": SMALL_AXES.count("\n") + 4, "column": 15,
        "json_path": "axes.kv_layout.aliases.closest",
        "message": "alias 'closest' of axis 'kv_layout' clashes with the command line: --closest is an "
                   "option of `capmatrix query`",
        "hint": "an alias is a name no option of capmatrix query or select has",
    }


def test_a_matrix_built_by_hand_is_placed_at_its_root(small: capmatrix.Matrix) -> None:
    import dataclasses

    from capmatrix.authoring.cli._query import option_clashes

    assert option_clashes(small) == []
    gpu = dataclasses.replace(small.axes["causal"], name="gpu", location=None)
    [problem] = option_clashes(dataclasses.replace(small, axes={**small.axes, "gpu": gpu}))
    assert (problem.code, problem.path, problem.line, problem.json_path) == (
        "E227", small.root, None, "axes.gpu")
