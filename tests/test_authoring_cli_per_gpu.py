"""``--gpu all`` and ``--gpu A,B`` on ``query`` and ``select``: a line per GPU, grouped where GPUs agree."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import EXHAUSTIVE

import capmatrix
from capmatrix.authoring.cli import run

if TYPE_CHECKING:
    from conftest import WriteMatrix


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def table(text: str) -> dict[str, str]:
    """GPU name -> the answer of its group, read from the text form (and each GPU's SM checked)."""
    matrix = capmatrix.load()
    sms = {gpu.name: gpu.sm for gpu in matrix.gpus.values()}
    answers: dict[str, str] = {}
    group = None
    for line in text.splitlines()[1:]:
        if not line.startswith("    "):
            group = line.strip().removesuffix(":")
            continue
        name, sm = line.strip().rsplit("  sm ", 1)
        assert group is not None
        assert sms[name.strip()] == int(sm)
        assert name.strip() not in answers
        answers[name.strip()] = group
    return answers


def single(*argv: str, gpu: str) -> str:
    """The answer ``--gpu NAME`` alone gives: a selection's winner (or head) or a query's verdict."""
    _code, out, _err = cli(*argv, "--gpu", gpu, "--json")
    data: dict[str, Any] = json.loads(out)
    if argv[0] == "query":
        return str(data["verdict"])
    return str(data["kernel"])


COMMANDS = [
    ("select", "sglang_attention", "--model", "deepseek_v3"),
    ("select", "vllm_attention", "--model", "gpt_oss_120b"),
    ("query", "xqa", "--model", "llama", "--spec-dec", "one_model"),
]


@pytest.mark.sweep
@pytest.mark.parametrize("argv", COMMANDS, ids=[c[1] for c in COMMANDS])
def test_all_is_every_gpu_each_as_asked_alone(argv: tuple[str, ...]) -> None:
    """``--gpu all`` answers each GPU as ``--gpu NAME`` alone does. A GPU entry is a name and an SM, so
    GPUs of one SM answer alike: ``make test`` asks one GPU of each SM alone (``make exhaustive``: all)."""
    code, out, err = cli(*argv, "--gpu", "all")
    assert code in (0, 1, 3), err
    matrix = capmatrix.load()
    answers = table(out)
    assert set(answers) == {gpu.name for gpu in matrix.gpus.values()}
    assert out.splitlines()[0] == f"{argv[1]}, per GPU ({len(matrix.gpus)}):"
    by_sm: dict[object, list[str]] = {}
    for gpu in matrix.gpus.values():
        by_sm.setdefault(gpu.sm, []).append(gpu.name)
    for names in by_sm.values():
        assert len({answers[name] for name in names}) == 1, names
    asked = [g for g in matrix.gpus.values() if EXHAUSTIVE or g.name == by_sm[g.sm][0]]
    assert len(asked) >= len(by_sm)
    for gpu in asked:
        alone = single(*argv, gpu=gpu.name)
        assert answers[gpu.name].split(" (")[0].startswith(alone if alone != "None" else "no supported"), gpu
    # one group per answer: GPUs that agree are together
    groups = [line for line in out.splitlines()[1:] if not line.startswith("    ")]
    assert len(groups) == len(set(groups)) == len(set(answers.values()))


def test_the_issue_cases() -> None:
    """DeepSeek-V3 in SGLang: trtllm_mla on SM100/103, fa3 on SM90 (the override before the default)."""
    code, out, _ = cli("select", "sglang_attention", "--model", "deepseek_v3", "--gpu", "H100,B200,GB300")
    assert code == 0
    assert table(out) == {"H100": "sglang_fa3", "B200": "sglang_trtllm_mla", "GB300": "sglang_trtllm_mla"}


def test_json_is_the_same_table() -> None:
    argv = ("query", "xqa", "--model", "llama", "--spec-dec", "one_model", "--gpu", "all")
    _code, out, _ = cli(*argv)
    _code, as_json, _ = cli(*argv, "--json")
    data = json.loads(as_json)
    assert {row["gpu"]: row["answer"] for row in data["gpus"]} == table(out)
    assert [row["gpu"] for row in data["gpus"]] == [g.name for g in capmatrix.load().gpus.values()]
    assert {g["answer"]: g["gpus"] for g in data["groups"]} == {
        answer: [r["gpu"] for r in data["gpus"] if r["answer"] == answer] for answer in table(out).values()}
    for row in data["gpus"]:
        assert row["verdict"] == row["answer"].split(" (")[0]


def test_sglang_refusals_and_unmodelled_devices_have_their_rows() -> None:
    """A GPU where SGLang refuses is grouped by SGLang's stage and text; one below the SGLang checks the
    matrix models says so on its row, and the other GPUs are still answered."""
    code, out, _ = cli("select", "sglang_attention", "--model", "deepseek_v3", "--sglang-backend",
                       "trtllm_mla", "--gpu", "H100,B200")
    assert code == 3
    answers = table(out)
    assert answers["B200"] == "sglang_trtllm_mla"
    assert answers["H100"].startswith("no supported candidate: SGLang refuses at server_args: TRTLLM MLA")
    code, out, _ = cli("select", "sglang_attention", "--model", "gpt_oss_120b", "--gpu", "T4,H100")
    assert code == 3
    assert table(out)["T4"].startswith("not modelled: --sm 75:")
    data = json.loads(cli("select", "sglang_attention", "--model", "gpt_oss_120b", "--gpu", "T4,H100",
                          "--json")[1])
    assert [row["verdict"] for row in data["gpus"]] == [None, "supported"]
    assert data["gpus"][0]["error"].startswith("--sm 75:")


def test_a_list_keeps_its_order_and_names_each_gpu_once() -> None:
    code, out, _ = cli("select", "vllm_attention", "--model", "llama", "--gpu", "B200, h100,GB10,b200")
    assert code == 0
    names = [line.split("  sm ")[0].strip() for line in out.splitlines() if line.startswith("    ")]
    assert sorted(names) == ["B200", "DGX Spark", "H100"]
    assert list(table(out)) == names


@pytest.mark.parametrize(("argv", "status"), [
    (("query", "xqa", "--model", "llama", "--spec-dec", "one_model", "--gpu", "H100,RTX 5090"), 0),
    (("query", "xqa", "--model", "llama", "--spec-dec", "one_model", "--gpu", "H100,B200"), 3),
    (("query", "xqa", "--model", "llama", "--spec-dec", "one_model", "--gpu", "B200,GB300"), 1),
])
def test_exit_status_says_whether_every_gpu_or_none_is_supported(argv: tuple[str, ...], status: int) -> None:
    assert cli(*argv)[0] == status


@pytest.mark.parametrize(("gpu", "words"), [
    ("H100,B2000", "unknown GPU 'B2000'"),
    ("H100,,B200", "an empty name"),
    (",", "an empty name"),
])
def test_bad_names_exit_2(gpu: str, words: str) -> None:
    for command in (("select", "vllm_attention"), ("query", "xqa")):
        code, out, err = cli(*command, "--model", "llama", "--gpu", gpu)
        assert code == 2
        assert out == ""
        assert words in err
    assert "did you mean 'B200'" in cli("query", "xqa", "--gpu", "H100,B2000")[2]


def test_sm_beside_several_gpus_is_refused() -> None:
    code, _out, err = cli("query", "xqa", "--model", "llama", "--gpu", "all", "--sm", "90")
    assert code == 2
    assert "leave out --sm" in err


def test_a_matrix_without_gpus(write_matrix: WriteMatrix) -> None:
    root: Path = write_matrix()
    code, _out, err = cli("query", "xqa", "--matrix", str(root), "--gpu", "all")
    assert code == 2
    assert "the matrix lists no GPUs" in err
