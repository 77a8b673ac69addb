"""The GPU table (``gpus:``): loading, names as users write them, ``--gpu`` and the ``--sm`` spellings."""

from __future__ import annotations

import hashlib
import io
import json
from typing import TYPE_CHECKING

import pytest

import capmatrix
from capmatrix.authoring.cli import run
from capmatrix.matrix import gpu_spelling

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import WriteMatrix

GPUS = """\
gpus:
  h100:
    name: H100
    aliases: [H100 SXM]
    sm: 90
    source: test
  rtx_5090:
    name: RTX 5090
    aliases: [GeForce RTX 5090]
    sm: 120
    source: test
"""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def problems(root: Path) -> list[tuple[str | None, str]]:
    return [(p.code, str(p)) for p in capmatrix.iter_problems(root)]


def test_the_shipped_table_names_the_gpus_people_ask_about() -> None:
    matrix = capmatrix.load()
    wanted = {"H100": 90, "H200": 90, "B200": 100, "GB200": 100, "B300": 103, "RTX 5090": 120,
              "RTX PRO 6000": 120, "DGX Spark": 121, "GB10": 121, "Jetson Thor": 110, "A100": 80,
              "A10": 86, "L4": 89, "L40S": 89, "RTX 4090": 89, "T4": 75}
    for name, sm in wanted.items():
        gpu = matrix.gpu(name)
        assert gpu is not None, name
        assert gpu.sm == sm, name
        assert gpu.source is not None
        assert "https://developer.nvidia.com/cuda-gpus" in gpu.source
    assert all(gpu.sm in matrix.axes["sm"].values for gpu in matrix.gpus.values())


@pytest.mark.parametrize("spelling", ["RTX 5090", "rtx5090", "rtx_5090", "Rtx-5090", " geforce rtx 5090 "])
def test_names_match_without_case_spaces_or_separators(spelling: str, write_matrix: WriteMatrix) -> None:
    matrix = capmatrix.load(write_matrix({"gpus.yaml": GPUS}))
    gpu = matrix.gpu(spelling)
    assert gpu is not None
    assert (gpu.key, gpu.name, gpu.sm) == ("rtx_5090", "RTX 5090", 120)
    assert gpu.spellings == ("rtx_5090", "RTX 5090", "GeForce RTX 5090")
    assert gpu.location.path.endswith("gpus.yaml")
    assert gpu.location.line == 7
    assert matrix.gpu("RTX 509") is None


def test_gpu_spelling() -> None:
    assert gpu_spelling("RTX PRO-6000") == "rtxpro6000"
    assert gpu_spelling("gb_10") == "gb10"


def test_a_gpu_whose_sm_the_axis_does_not_know(write_matrix: WriteMatrix) -> None:
    root = write_matrix({"gpus.yaml": GPUS.replace("sm: 120", "sm: 89")})
    ((code, text),) = problems(root)
    assert code == "E250"
    assert text.endswith(
        "/gpus.yaml:10:9: gpus.rtx_5090.sm: GPU 'rtx_5090' has sm 89; the sm axis has "
        "80, 90, 100, 103, 120, 121 (add the SM to the sm axis's values, or correct the GPU's sm)",
    )


@pytest.mark.parametrize("axis", ["", "  sm:\n    type: enum\n    description: d\n    values: [a]\n"])
def test_a_gpu_table_needs_an_int_sm_axis(axis: str, write_matrix: WriteMatrix) -> None:
    axes = "axes:\n  other:\n    type: bool\n    description: d\n" + axis
    root = write_matrix({"axes.yaml": axes, "gpus.yaml": GPUS}, base=False)
    found = problems(root)
    assert [code for code, _ in found] == ["E250", "E250"]
    assert "the matrix has no int axis 'sm'" in found[0][1]


@pytest.mark.parametrize(("edit", "where", "message"), [
    (("aliases: [GeForce RTX 5090]", "aliases: [h100 sxm]"), "gpus.rtx_5090.aliases[0]",
     "'h100 sxm' already names GPU 'h100'"),
    (("name: RTX 5090", "name: H-100"), "gpus.rtx_5090.name", "'H-100' already names GPU 'h100'"),
    (("rtx_5090:", "h100_sxm:"), "gpus.h100_sxm", "'h100_sxm' already names GPU 'h100'"),
])
def test_a_name_or_alias_names_one_gpu(
    edit: tuple[str, str], where: str, message: str, write_matrix: WriteMatrix,
) -> None:
    root = write_matrix({"gpus.yaml": GPUS.replace(*edit)})
    ((code, text),) = problems(root)
    assert code == "E251"
    assert f": {where}: {message} (a name or alias names one GPU, whatever" in text


def test_the_gpu_table_round_trips_through_the_cache(
    write_matrix: WriteMatrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CAPMATRIX_CACHE", raising=False)
    monkeypatch.setenv("CAPMATRIX_CACHE_DIR", str(tmp_path / "cache"))
    root = write_matrix({"gpus.yaml": GPUS})
    cold = capmatrix.load(root)
    warm = capmatrix.load(root)  # read back from the entry the first load wrote
    assert warm.gpus == cold.gpus
    assert warm.gpus["h100"].location == cold.gpus["h100"].location
    # An entry whose GPU lost its location (a correct checksum) is refused: the files are read again.
    (entry,) = (tmp_path / "cache" / "entries").glob("matrix-*.json")
    head, _nl, payload = entry.read_bytes().partition(b"\n")
    data = json.loads(payload)
    data["gpus"][0][-1] = None
    body = json.dumps(data).encode()
    magic, fmt, wanted, _check = head.decode().split(" ")
    entry.write_bytes(f"{magic} {fmt} {wanted} {hashlib.sha256(body).hexdigest()}\n".encode() + body)
    assert capmatrix.load(root).gpus == cold.gpus


def test_gpu_option_is_the_sm_of_that_gpu() -> None:
    by_name = cli("query", "xqa", "--gpu", "dgx spark", "--model", "llama", "--json")
    by_sm = cli("query", "xqa", "--sm", "121", "--model", "llama", "--json")
    assert by_name == by_sm
    assert json.loads(by_name[1])["query"]["sm"] == 121
    code, out, _ = cli("select", "trtllm_generation", "--gpu", "B200", "--model", "llama", "--json")
    assert code == 0
    assert json.loads(out)["kernel"] == "trtllm_gen"
    assert cli("query", "xqa", "--gpu", "B200", "--sm", "sm_100", "--model", "llama")[0] == 1


def test_gpu_option_refuses_a_disagreeing_sm_and_an_unknown_name() -> None:
    code, _, err = cli("query", "xqa", "--gpu", "B200", "--sm", "90")
    assert code == 2
    assert "--gpu 'B200' has sm 100 but --sm says 90; give one of them" in err
    code, _, err = cli("query", "xqa", "--gpu", "rtx 509")
    assert code == 2
    listed = "26 known, listed by `capmatrix list gpus`"
    assert f"unknown GPU 'rtx 509'; {listed} (did you mean 'RTX 5090'?)" in err
    _, _, err = cli("query", "xqa", "--gpu", "zzzzzz")
    assert "did you mean" not in err


def test_gpu_option_on_a_matrix_without_gpus(write_matrix: WriteMatrix) -> None:
    root = write_matrix()
    code, _, err = cli("query", "xqa", "--gpu", "H100", "--matrix", str(root))
    assert code == 2
    assert "unknown GPU 'H100'; the matrix declares no GPUs" in err


@pytest.mark.parametrize(("text", "sm"), [
    ("sm_90a", 90), ("sm100", 100), ("SM_120", 120), ("12.1", 121), ("9.0", 90), ("90", 90),
])
def test_sm_option_spellings(text: str, sm: int) -> None:
    code, out, _ = cli("query", "xqa", "--sm", text, "--model", "llama", "--json")
    assert code in {0, 1}
    assert json.loads(out)["query"]["sm"] == sm


def test_sm_option_refuses_a_family_and_nonsense() -> None:
    code, _, err = cli("query", "xqa", "--sm", "sm_100f")
    assert code == 2
    assert "--sm 'sm_100f' is a family (100, 103); a query asks about one SM: give one of 100, 103" in err
    code, _, err = cli("query", "xqa", "--sm", "9x")
    assert code == 2
    assert "--sm expects an integer, got '9x'" in err


def test_sm_help_names_the_spellings() -> None:
    _, out, _ = cli("query", "--help")
    assert "sm_90a, sm100, 9.0" in " ".join(out.split())
    assert "--gpu NAME" in out
