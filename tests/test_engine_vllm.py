"""capmatrix.engine.vllm against vLLM 0.33.0's own answers.

The record (capabilities/evidence/vllm_0.33.0_selection.json, made by tools/record_vllm_selection.py from
vLLM's selection code) holds, for every cell of capability x head size x dtype x KV dtype x block size x
{mha, mla, sparse mla} x sinks, the backend vLLM chooses and what it says of each of 20 forced backends.
The differential compares every cell, automatic and forced, and the priority list of every cell.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import stride
from record_spread import spread

import capmatrix
from capmatrix.authoring.cli import run
from capmatrix.authoring.engine_records import compare_record
from capmatrix.engine.vllm import ROLE, EngineRefused, NoValidBackend, backend_order, select_backend

EVIDENCE = Path(__file__).resolve().parent.parent / "capabilities/evidence"
#: Every recorded release's grid: each is held to its own record (a new release adds its file).
RECORDS = sorted(EVIDENCE.glob("vllm_*_selection.json"))
#: What 0.33.0's grid holds (a later release's grid may differ; each record says its own shape).
GRID_0330 = {"cells": 20160, "forced": 20}
#: vLLM's backends whose layers refuse an FP8 KV cache below SM89 when the engine builds them
#: (TritonAttentionImpl / TritonMLAImpl.__init__), after selection chose them: the recorder asks
#: selection alone and records them as chosen.
TRITON_INIT = {"TRITON_ATTN", "TRITON_MLA"}


@pytest.fixture(scope="module", params=RECORDS, ids=[p.name for p in RECORDS])
def record(request: pytest.FixtureRequest) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(request.param.read_text(encoding="utf-8"))
    return data


def test_every_modelled_release_has_its_record_and_every_record_a_release() -> None:
    recorded = {json.loads(path.read_text(encoding="utf-8"))["vllm"]["version"] for path in RECORDS}
    assert recorded == set(capmatrix.load().releases["vllm"].names)


def _kwargs(key: str, column: str) -> dict[str, Any]:
    cap, head, dtype, kv, block = key.split("/")
    major, minor = cap.split(".")
    return {
        "capability": (int(major), int(minor)),
        "head_size": int(head),
        "dtype": dtype,
        "kv_cache_dtype": kv,
        "block_size": None if block == "-" else int(block),
        "use_mla": column.startswith("mla"),
        "use_sparse": "sparse" in column,
        "has_sink": column.endswith("+sink"),
    }


def _forced_valid(kwargs: dict[str, Any], backend: str) -> bool:
    """Whether vLLM's validation accepts ``backend`` forced: refused only at its init, it was accepted."""
    try:
        select_backend(**kwargs, selected=backend)  # kwargs carry the release
    except EngineRefused as refused:
        return refused.selected == backend
    except NoValidBackend:
        return False
    return True


def test_record_shape(record: dict[str, Any]) -> None:
    version = record["vllm"]["version"]
    release = capmatrix.load().releases["vllm"].release(version)
    assert release is not None
    assert {k: record["vllm"][k] for k in ("commit", "wheel")} == {
        "commit": release.pins["commit"], "wheel": release.pins["wheel"]}
    if version == "0.33.0":
        assert len(record["cells"]) * len(record["columns"]) == GRID_0330["cells"]
        assert len(record["forced"]) == GRID_0330["forced"]
    # every forced backend of the record is a kernel of the matrix: none is skipped
    kernels = capmatrix.default_matrix().kernels
    assert all("vllm_" + name.lower() in kernels for name in record["forced"])
    candidates = set(capmatrix.default_matrix().roles[ROLE].candidates)
    assert {"vllm_" + n.lower() for order in record["orders"] for n in order} <= candidates


@pytest.mark.no_cover  # a sweep: the same lines thousands of times (see conftest.py)
@pytest.mark.sweep
@pytest.mark.parametrize("path", RECORDS, ids=[p.name for p in RECORDS])
def test_differential_every_cell(path: Path, tmp_path: Path) -> None:
    """Every cell (``make exhaustive``; ``make test``: every 8th of each section): the automatic choice,
    the priority list, the rejected backends in vLLM's order when nothing is valid, and every forced
    backend's verdict. No disagreement is tolerated. The comparison is
    capmatrix.authoring.engine_records's, which ``capmatrix test`` runs over every cell
    (tests/test_authoring_cli_main.py runs it once).
    """
    path = spread(path, tmp_path, stride(8))
    record = json.loads(path.read_text(encoding="utf-8"))
    result = compare_record(path)
    # the grid, then (0.34.0 and later) its checkpoint-KV cells and B12X's cells with b12x installed
    questions = len(record["cells"]) * len(record["columns"])
    checkpoint = record.get("checkpoint_kv", {"cells": {}, "columns": []})
    questions += len(checkpoint["cells"]) * len(checkpoint["columns"])
    b12x = len(record.get("b12x_installed", {"cells": {}})["cells"]) * len(record["columns"])
    assert result.rows == questions + b12x
    refused = result.checks - b12x - questions * (2 + len(record["forced"]))  # one more where none is valid
    assert 0 < refused < questions
    assert result.init_refused == _refused_at_init(record)
    assert result.agree, (result.failed, [str(d) for d in result.disagreements])
    if record["vllm"]["version"] == "0.34.0":  # the sections this test exists to hold
        assert checkpoint["cells"]
        assert b12x


def _refused_at_init(record: dict[str, Any]) -> int:
    """The grid's questions whose recorded choice vLLM then refuses at engine start: TRITON_ATTN or
    TRITON_MLA with an FP8 cache below SM89 (the checkpoint's cache reaches the non-MLA layers only,
    and the checkpoint section holds those alone)."""
    checkpoint = record.get("checkpoint_kv", {"cells": {}, "columns": []})
    count = 0
    assert all(not column.startswith("mla") for column in checkpoint["columns"])
    for cells in (record["cells"], checkpoint["cells"]):
        for key, outcome_ids in cells.items():
            cap, _head, _dtype, kv, _block = key.split("/")
            below = tuple(int(part) for part in cap.split(".")) < (8, 9)
            chosen = [record["outcomes"][oid][0] for oid in outcome_ids]
            count += sum(1 for backend in chosen if backend in TRITON_INIT and below and kv.startswith("fp8"))
    assert count > 0
    return count


def test_init_refusals_are_compared_by_the_pick(tmp_path: Path) -> None:
    """A cell whose recorded choice vLLM then refuses at its init: compared by the backend the adapter says
    vLLM picked (EngineRefused.selected) and counted; a record that says another backend disagrees."""
    record = json.loads(RECORDS[0].read_text(encoding="utf-8"))
    key, outcome_ids = next((k, ids) for k, ids in sorted(record["cells"].items())
                            if any(record["outcomes"][oid][0] in TRITON_INIT for oid in ids)
                            and k.split("/")[3].startswith("fp8") and k.startswith(("8.0/", "8.6/")))
    record["cells"] = {key: outcome_ids}
    one = tmp_path / "one" / RECORDS[0].name
    one.parent.mkdir()
    one.write_text(json.dumps(record), encoding="utf-8")
    result = compare_record(one)
    assert result.agree, [str(d) for d in result.disagreements]
    assert result.init_refused == _refused_at_init(record)
    column = next(i for i, oid in enumerate(outcome_ids) if record["outcomes"][oid][0] in TRITON_INIT)
    want, order_id, rsets = record["outcomes"][outcome_ids[column]]
    record["outcomes"].append(["FLEX_ATTENTION", order_id, rsets])
    record["cells"][key] = [*outcome_ids[:column], len(record["outcomes"]) - 1, *outcome_ids[column + 1:]]
    lying = tmp_path / RECORDS[0].name
    lying.write_text(json.dumps(record), encoding="utf-8")
    told = compare_record(lying)
    assert [(d.field, d.recorded, d.matrix) for d in told.disagreements] == [("auto", "FLEX_ATTENTION", want)]


def test_differential_names_each_disagreement(tmp_path: Path) -> None:
    """A record that says otherwise than the matrix in one cell: the comparison names that cell, what vLLM
    said and what the matrix says, and nothing else."""
    record = json.loads(RECORDS[0].read_text(encoding="utf-8"))
    key = next(k for k in sorted(record["cells"]) if k.startswith("9.0/"))
    record["cells"] = {key: record["cells"][key]}  # one cell: the comparison is quick
    column = record["columns"][0]
    one = tmp_path / "one" / RECORDS[0].name
    one.parent.mkdir()
    one.write_text(json.dumps(record), encoding="utf-8")
    before = compare_record(one)
    assert before.rows == len(record["columns"])
    want, order_id, rsets = record["outcomes"][record["cells"][key][0]]
    changed = "TRITON_ATTN" if want != "TRITON_ATTN" else "FLASH_ATTN"
    record["outcomes"].append([changed, order_id, rsets])
    record["cells"][key] = [len(record["outcomes"]) - 1, *record["cells"][key][1:]]
    lying = tmp_path / RECORDS[0].name
    lying.write_text(json.dumps(record), encoding="utf-8")
    result = compare_record(lying)
    assert result.failed == before.failed + 1
    new = [d for d in result.disagreements if d not in before.disagreements]
    assert [(d.cell, d.field, d.recorded) for d in new] == [(f"{key} {column}", "auto", changed)]
    assert result.regenerate == record["regenerate"]


def test_no_valid_backend_reasons() -> None:
    """MLA with fp32 on SM90: every MLA backend of vLLM's list refuses, each with the matrix's reason."""
    with pytest.raises(NoValidBackend) as info:
        select_backend(capability=(9, 0), head_size=576, dtype="float32", kv_cache_dtype="auto",
                       block_size=None, use_mla=True)
    exc = info.value
    assert isinstance(exc, ValueError)
    assert list(exc.reasons) == ["FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA",
                                 "FLASH_ATTN_MLA_SPARSE", "FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM90"]
    assert all(exc.reasons.values())
    assert any("dtype" in r for r in exc.reasons["TRITON_MLA"])
    with pytest.raises(NoValidBackend) as forced:
        select_backend(capability=(12, 0), head_size=576, dtype="bf16", kv_cache_dtype="auto",
                       block_size=None, use_mla=True, use_sparse=True, selected="FLASHMLA_SPARSE")
    assert list(forced.value.reasons) == ["FLASHMLA_SPARSE"]
    assert any("sm" in r for r in forced.value.reasons["FLASHMLA_SPARSE"])


def test_oddities_of_vllm() -> None:
    """Cells where vLLM 0.33.0's answer is surprising; the matrix reproduces each on purpose."""
    sink192: dict[str, Any] = {"capability": (10, 0), "head_size": 192, "dtype": "bf16",
        "kv_cache_dtype": "auto", "block_size": None, "use_mla": False, "has_sink": True}
    # sinks accepted on SM10x head 192: the gate asks the platform-default FA version (4)
    assert select_backend(**sink192) == "FLASH_ATTN"
    # 'fp8' is fp8_ds_mla for FLASHMLA_SPARSE, so fp8 and fp8_e4m3 pick different backends on SM90
    sparse: dict[str, Any] = {"capability": (9, 0), "head_size": 576, "dtype": "bf16",
        "block_size": None, "use_mla": True, "use_sparse": True}
    assert select_backend(**sparse, kv_cache_dtype="fp8") == "FLASHMLA_SPARSE"
    assert select_backend(**sparse, kv_cache_dtype="fp8_e4m3") == "FLASHINFER_MLA_SPARSE_SM90"
    # torch's dtype names are accepted
    assert select_backend(**{**sparse, "dtype": "torch.bfloat16"}, kv_cache_dtype="fp8") == "FLASHMLA_SPARSE"
    # an unset block size is not checked; a given one is: FLASHINFER on SM10x, head 256
    mha: dict[str, Any] = {"capability": (10, 0), "head_size": 256, "dtype": "bf16",
        "kv_cache_dtype": "auto", "use_mla": False}
    assert select_backend(**mha, block_size=None) == "FLASHINFER"
    assert _forced_valid({**mha, "block_size": None}, "FLASH_ATTN")
    assert not _forced_valid({**mha, "block_size": 64}, "FLASH_ATTN")  # hd256 kernel: multiples of 128


def test_environment_and_model_axes() -> None:
    """The defaults model the stock wheel; a caller can say otherwise through ``extra``."""
    b12x: dict[str, Any] = {"capability": (12, 0), "head_size": 128, "dtype": "bf16",
        "kv_cache_dtype": "auto", "block_size": 64, "use_mla": False, "selected": "B12X"}
    with pytest.raises(NoValidBackend):
        select_backend(**b12x)
    assert select_backend(**b12x, extra={"vllm_b12x": True}) == "B12X"
    sparse10: dict[str, Any] = {"capability": (10, 0), "head_size": 576, "dtype": "bf16",
        "kv_cache_dtype": "auto", "block_size": None, "use_mla": True, "use_sparse": True}
    assert select_backend(**sparse10) == "FLASHMLA_SPARSE"
    assert select_backend(**sparse10, extra={"vllm_mla_heads": 16}) == "FLASH_ATTN_MLA_SPARSE_FA4"
    assert backend_order(**sparse10, extra={"vllm_mla_heads": 16})[-3:] == (
        "FLASH_ATTN_MLA_SPARSE_FA4", "FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE")
    mha9: dict[str, Any] = {"capability": (9, 0), "head_size": 128, "dtype": "bf16",
        "kv_cache_dtype": "auto", "block_size": None, "use_mla": False}
    assert select_backend(**mha9) == "FLASH_ATTN"
    assert select_backend(**mha9, has_sink=True, extra={"vllm_fa3_built": False}) == "FLASHINFER"
    assert backend_order(**mha9, extra={"use_mm_prefix": True})[0] == "TRITON_FLASH_ATTN"


@pytest.mark.no_cover  # a sweep: the same lines thousands of times (see conftest.py)
def test_cli_select_answers_the_same(record: dict[str, Any]) -> None:
    """`capmatrix select vllm_attention ...` answers as ``select_backend``: a spread of the record's cells,
    every column (whether that is vLLM's answer is the differential's question, and the data gate's)."""
    keys = sorted(record["cells"])[::613]
    assert len(keys) >= 6
    stopped = 0
    for key in keys:
        for column in record["columns"]:
            kw = _kwargs(key, column)
            stage = None  # the check that stops vLLM after it picked ``want``, if any
            try:
                want: str | None = select_backend(**kw, version=record["vllm"]["version"])
            except EngineRefused as exc:
                want, stage = exc.selected, exc.stage
            except NoValidBackend:
                want = None
            major, minor = kw["capability"]
            argv = ["select", ROLE, "--json", "--engine-version", f"vllm={record['vllm']['version']}",
                    "--sm", str(major * 10 + minor),
                    "--head-dim", str(kw["head_size"]),
                    "--dtype", kw["dtype"], "--vllm-kv-cache-dtype", kw["kv_cache_dtype"],
                    "--attention", "mla" if kw["use_mla"] else "gqa",
                    "--use-sparse", str(kw["use_sparse"]).lower(),
                    "--attention-sinks", str(kw["has_sink"]).lower()]
            if kw["block_size"] is not None:
                argv += ["--block-size", str(kw["block_size"])]
            out, err = io.StringIO(), io.StringIO()
            code = run(argv, out, err)
            answer = json.loads(out.getvalue())
            kernel = answer["kernel"]
            got = kernel and kernel.removeprefix("vllm_").upper()
            assert got == want, (key, column, code, err.getvalue())
            assert answer.get("engine_start", {}).get("kernel") == stage, (key, column)
            assert code == (1 if stage or want is None else 0), (key, column)
            stopped += stage is not None
    assert stopped > 0  # the spread holds cells vLLM stops at TRITON_ATTN's / TRITON_MLA's init


def test_repeated_selection_is_remembered_per_matrix() -> None:
    """A repeated configuration is answered from the memo, per compiled matrix, and only for equal types."""
    import gc

    from capmatrix.engine import vllm
    from capmatrix.errors import InvalidQuery

    mha: dict[str, Any] = {"capability": (9, 0), "head_size": 128, "dtype": "bf16",
        "kv_cache_dtype": "auto", "block_size": None, "use_mla": False}
    matrix = capmatrix.load()
    first = select_backend(**mha, matrix=matrix)
    assert select_backend(**mha, matrix=matrix) == first == select_backend(**mha)
    resolver = matrix._compiled  # the memo is keyed by the compiled matrix
    assert any(v == first for v in vllm._MEMO[resolver].values())
    # True and 1 hash alike; the memo must not let 1 through where the axis is bool.
    with pytest.raises(InvalidQuery):
        select_backend(**mha, use_sparse=1, matrix=matrix)  # type: ignore[arg-type]
    # a refusal is raised afresh each time, with the same backends
    bad = {**mha, "use_mla": True, "dtype": "float32", "head_size": 576}
    raised = []
    for _ in range(2):
        with pytest.raises(NoValidBackend) as info:
            select_backend(**bad, matrix=matrix)
        raised.append(info.value)
    assert raised[0] is not raised[1]
    assert raised[0].backends == raised[1].backends
    # the memo goes with its matrix
    before = len(vllm._MEMO)
    del matrix, resolver, raised, info
    gc.collect()
    assert len(vllm._MEMO) == before - 1


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that asks ever new configurations keeps at most ``_MEMO_SIZE`` answers per matrix."""
    from capmatrix.engine import vllm

    monkeypatch.setattr(vllm, "_MEMO_SIZE", 3)
    matrix = capmatrix.load()
    heads = (64, 96, 128, 256, 64, 128)
    answers = [select_backend(**{**_MHA, "head_size": h}, matrix=matrix) for h in heads]
    memo = vllm._MEMO[matrix._compiled]
    assert 1 <= len(memo) <= 3
    # answers after the memo was emptied are the same as before it
    assert answers[4] == answers[0]
    assert answers[5] == answers[2]


_MHA: dict[str, Any] = {"capability": (9, 0), "head_size": 128, "dtype": "bf16", "kv_cache_dtype": "auto",
                        "block_size": None, "use_mla": False}


class _FakeTorchDType:
    """Stands in for ``torch.dtype`` (same module and class name) without importing torch."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __str__(self) -> str:
        return f"torch.{self._name}"


_FakeTorchDType.__module__ = "torch"
_FakeTorchDType.__name__ = "dtype"


@pytest.mark.parametrize(("changes", "argument"), [
    ({"use_mla": "False"}, "use_mla"),
    ({"use_mla": 0}, "use_mla"),
    ({"use_sparse": "true"}, "use_sparse"),
    ({"has_sink": 1}, "has_sink"),
    ({"capability": (9, 0, 0)}, "capability"),
    ({"capability": (9,)}, "capability"),
    ({"capability": [9, 0]}, "capability"),
    ({"capability": (9.0, 0)}, "capability"),
    ({"capability": (9, True)}, "capability"),
    ({"capability": (9, 10)}, "capability"),
    ({"capability": (-1, 0)}, "capability"),
    ({"capability": "9.0"}, "capability"),
    ({"head_size": 128.0}, "head_size"),
    ({"head_size": True}, "head_size"),
    ({"head_size": 0}, "head_size"),
    ({"block_size": 0}, "block_size"),
    ({"block_size": "16"}, "block_size"),
    ({"dtype": "float8"}, "dtype"),
    ({"dtype": 16}, "dtype"),
    ({"dtype": _FakeTorchDType("float8_e4m3fn")}, "dtype"),
    ({"kv_cache_dtype": None}, "kv_cache_dtype"),
    ({"kv_cache_dtype": "fp9"}, "kv_cache_dtype"),
    ({"checkpoint_kv_cache_dtype": "fp9"}, "checkpoint_kv_cache_dtype"),
    ({"checkpoint_kv_cache_dtype": ["fp8"]}, "checkpoint_kv_cache_dtype"),
    ({"extra": {"vllm_kv_from_checkpoint": True}}, "extra['vllm_kv_from_checkpoint']"),
    ({"extra": {"sm": 100}}, "extra['sm']"),
    ({"extra": {"attention_sinks": True}}, "extra['attention_sinks']"),
    ({"extra": [("use_mm_prefix", True)]}, "extra"),
    ({"extra": {"model": "gpt_oss_20b"}}, "extra['model']"),  # not an axis: it set sliding_window, sinks...
    ({"extra": {"kernel": "vllm_flash_attn"}}, "extra['kernel']"),
    ({"extra": {"block_size": 16}}, "extra['block_size']"),  # an alias of tokens_per_block (block_size)
    ({"extra": {"vllm_kv_cache_dtype": "fp8"}}, "extra['vllm_kv_cache_dtype']"),
    ({"extra": {1: True}}, "extra"),
    ({"extra": {1: True, "use_mm_prefix": True}}, "extra"),  # names that do not even sort
    ({"selected": 3}, "selected"),
    ({"selected": "FLASH_ATTENTION"}, "selected"),
])
def test_arguments_are_validated(changes: dict[str, Any], argument: str) -> None:
    """A wrong type or value raises InvalidArgument naming the argument, in both entry points."""
    from capmatrix.engine.vllm import InvalidArgument
    from capmatrix.errors import InvalidQuery

    kwargs = {**_MHA, **changes}
    with pytest.raises(InvalidArgument) as info:
        select_backend(**kwargs)
    assert info.value.argument == argument
    assert isinstance(info.value, InvalidQuery)
    assert repr(argument) in str(info.value)
    if "selected" not in changes:
        with pytest.raises(InvalidArgument) as order:
            backend_order(**kwargs)
        assert order.value.argument == argument


def test_extra_may_not_carry_a_model() -> None:
    """``extra={"model": ...}`` made the model's axes the defaults: a different answer, silently."""
    from capmatrix.engine.vllm import InvalidArgument

    mla80 = {**_MHA, "capability": (8, 0), "head_size": 64, "use_mla": True}
    assert select_backend(**mla80) == "TRITON_MLA"
    with pytest.raises(InvalidArgument) as info:
        select_backend(**mla80, extra={"model": "gpt_oss_20b"})
    assert (info.value.argument, info.value.value) == ("extra['model']", "gpt_oss_20b")
    assert "a model is not one" in info.value.expected
    with pytest.raises(InvalidArgument) as alias:
        backend_order(**mla80, extra={"block_size": 16})
    assert "'block_size' is axis 'tokens_per_block', which is set by argument 'block_size'" in str(
        alias.value)


def test_argument_suggestions() -> None:
    from capmatrix.engine.vllm import InvalidArgument

    with pytest.raises(InvalidArgument) as kv:
        select_backend(**{**_MHA, "kv_cache_dtype": "fp8_e4m"})
    assert kv.value.suggestion == "fp8_e4m3"
    with pytest.raises(InvalidArgument) as dtype:
        select_backend(**{**_MHA, "dtype": "bfloat61"})
    assert dtype.value.suggestion == "bfloat16"
    with pytest.raises(InvalidArgument) as name:
        select_backend(**_MHA, selected="flash_atn")
    assert name.value.suggestion == "FLASH_ATTN"


def test_float_capability_is_refused_before_and_after_the_int_one() -> None:
    """``(9.0, 0)`` hashes as ``(9, 0)``; the memo must not let it through once ``(9, 0)`` is known."""
    from capmatrix.engine.vllm import InvalidArgument

    matrix = capmatrix.load()
    with pytest.raises(InvalidArgument):
        select_backend(**{**_MHA, "capability": (9.0, 0)}, matrix=matrix)
    assert select_backend(**_MHA, matrix=matrix) == "FLASH_ATTN"
    with pytest.raises(InvalidArgument):
        select_backend(**{**_MHA, "capability": (9.0, 0)}, matrix=matrix)
    with pytest.raises(InvalidArgument):  # unhashable: no memo key, validated and refused
        select_backend(**{**_MHA, "capability": [9, 0]}, matrix=matrix)


def test_torch_dtypes_are_read_by_name() -> None:
    """``torch.bfloat16`` (the object) is bf16, without capmatrix importing torch."""
    sparse: dict[str, Any] = {"capability": (9, 0), "head_size": 576, "kv_cache_dtype": "fp8",
                              "block_size": None, "use_mla": True, "use_sparse": True}
    for spelling in (_FakeTorchDType("bfloat16"), "torch.bfloat16", "bfloat16", "bf16"):
        assert select_backend(**sparse, dtype=spelling) == "FLASHMLA_SPARSE"
    fp32 = {**_MHA, "dtype": _FakeTorchDType("float32")}
    assert select_backend(**fp32) == "TRITON_ATTN"  # FLASH_ATTN and FLASHINFER refuse fp32
    assert backend_order(**fp32) == backend_order(**_MHA)


def test_no_valid_backend_text_lists_each_refusal() -> None:
    """``str(NoValidBackend)`` names every refused backend with its first reason, a short line each."""
    with pytest.raises(NoValidBackend) as info:
        select_backend(capability=(9, 0), head_size=576, dtype="float32", kv_cache_dtype="auto",
                       block_size=None, use_mla=True)
    lines = str(info.value).splitlines()
    assert lines[0] == "No valid attention backend found."
    assert [line.split(":")[0].strip() for line in lines[1:]] == list(info.value.reasons)
    for line, reasons in zip(lines[1:], info.value.reasons.values(), strict=True):
        assert reasons[0] in line
        assert len(line) < 200
    with pytest.raises(NoValidBackend) as forced:
        select_backend(**{**_MHA, "dtype": "fp32"}, selected="FLASH_ATTN")
    text = str(forced.value).splitlines()
    assert text[0] == "Selected backend FLASH_ATTN is not valid for this configuration."
    assert text[1].startswith("  FLASH_ATTN: ")


@pytest.mark.parametrize("spelling", ["auto", "AUTO", "Auto", "CUTLASS_MSA", "triton_msa"])
def test_forced_automatic_spellings(spelling: str) -> None:
    """``auto`` in any case, and MiniMax's MSA aliases, are automatic selection as vLLM reads them."""
    assert select_backend(**_MHA, selected=spelling) == select_backend(**_MHA) == "FLASH_ATTN"
    mla = {**_MHA, "head_size": 576, "use_mla": True}
    assert select_backend(**mla, selected=spelling) == select_backend(**mla)


def test_forced_spellings_are_upper_cased() -> None:
    for spelling in ("flash_attn", "Flash_Attn", "FLASH_ATTN"):
        assert select_backend(**_MHA, selected=spelling) == "FLASH_ATTN"
    assert select_backend(**_MHA, selected="triton_attn") == "TRITON_ATTN"
    with pytest.raises(NoValidBackend) as info:
        select_backend(**_MHA, selected="flashmla")
    assert info.value.backends == ("FLASHMLA",)


@pytest.mark.parametrize("name", ["FLASH_ATTN_DIFFKV", "TRITON_ATTN_DIFFKV", "hpc_attn", "ROCM_ATTN",
                                  "CUSTOM"])
def test_vllm_backends_not_modelled(name: str) -> None:
    """A backend vLLM knows but the matrix does not model: a documented error, not an unknown name."""
    from capmatrix.engine.vllm import VLLM_BACKENDS, BackendNotModelled
    from capmatrix.errors import InvalidQuery

    with pytest.raises(BackendNotModelled) as info:
        select_backend(**_MHA, selected=name)
    assert not isinstance(info.value, InvalidQuery)
    assert info.value.backend == name.upper()
    assert "FLASH_ATTN" in info.value.modelled
    assert name.upper() not in info.value.modelled
    assert set(info.value.modelled) < set(VLLM_BACKENDS)
    assert "does not model" in str(info.value)


def test_every_kernel_of_the_role_is_a_vllm_backend_or_a_start_check() -> None:
    """A vllm_ kernel that is no backend is a start check: the only candidate of one of the role's
    orders (the worker's), or a check a backend's guard names in ``caught_by`` (a backend's init)."""
    from capmatrix.engine.vllm import VLLM_BACKENDS

    matrix = capmatrix.default_matrix()
    kernels = {k for k in matrix.kernels if k.startswith("vllm_")}
    others = kernels - {"vllm_" + b.lower() for b in VLLM_BACKENDS}
    alone = {o.candidates[0] for o in matrix.roles[ROLE].orders if len(o.candidates) == 1}
    caught = {c for k in matrix.kernels.values() if k.guards is not None for c in k.guards.caught_by}
    assert alone & others
    assert caught & others
    assert others <= alone | caught
    assert all(matrix.kernels[k].kind == "gate" for k in others)


def test_triton_flash_attn_takes_flash_attn_limits() -> None:
    """The SM90 multimodal composite: FLASH_ATTN's half brings its FP8 head-512 block list and head limit."""
    mm: dict[str, Any] = {"capability": (9, 0), "head_size": 512, "dtype": "bf16", "use_mla": False,
                          "extra": {"use_mm_prefix": True}}
    assert select_backend(**mm, kv_cache_dtype="fp8", block_size=64) == "TRITON_FLASH_ATTN"
    assert select_backend(**mm, kv_cache_dtype="fp8", block_size=48) == "TRITON_ATTN"
    assert select_backend(**mm, kv_cache_dtype="auto", block_size=None) == "TRITON_FLASH_ATTN"
    no_fa4 = {**mm, "extra": {"use_mm_prefix": True, "vllm_fa4_built": False}}
    assert select_backend(**no_fa4, kv_cache_dtype="auto", block_size=None) == "TRITON_ATTN"


@pytest.mark.parametrize(("capability", "changes", "want"), [
    # every 10.x is Blackwell: FLASHINFER first on 10.1 as on 10.0
    ((10, 1), {}, "FLASHINFER"),
    # KV spellings beyond the grid: the turboquant family and Triton's per-token-head caches
    ((9, 0), {"kv_cache_dtype": "turboquant_4bit_nc"}, "TURBOQUANT"),
    ((9, 0), {"kv_cache_dtype": "int8_per_token_head"}, "TRITON_ATTN"),
    # FlashInfer tests startswith("nvfp4"): nvfp4_ds_mla passes for a non-MLA model on 10.x ...
    ((10, 0), {"kv_cache_dtype": "nvfp4_ds_mla"}, "FLASHINFER"),
    # ... and refuses nvfp4 on 11.0 (no backend left)
    ((11, 0), {"kv_cache_dtype": "nvfp4"}, None),
    # MLA: no backend takes the multimodal prefix or a sliding window; non-causal leaves TRITON_MLA on SM90
    ((9, 0), {"head_size": 576, "use_mla": True, "extra": {"use_mm_prefix": True}}, None),
    ((9, 0), {"head_size": 576, "use_mla": True, "extra": {"sliding_window": True}}, None),
    ((9, 0), {"head_size": 576, "use_mla": True, "extra": {"use_non_causal": True}}, "TRITON_MLA"),
    # MLA head 320 is on the MLA backends' list
    ((10, 1), {"head_size": 320, "use_mla": True}, "FLASHINFER_MLA"),
])
def test_classes_beyond_the_grid(capability: tuple[int, int], changes: dict[str, Any],
                                 want: str | None) -> None:
    """One case per class the grid did not reach, each as vLLM 0.33.0's own selector answers it
    (tools/record_vllm_selection.py run on these configurations; the sample holds the rest)."""
    kwargs = {**_MHA, "capability": capability, **changes, "version": "0.33.0"}
    if want is None:
        with pytest.raises(NoValidBackend):
            select_backend(**kwargs)
    else:
        assert select_backend(**kwargs) == want


def test_flashmla_sparse_asks_no_flashmla_build() -> None:
    """FLASHMLA_SPARSE never checks that FlashMLA is built (its combination check reads head and KV only)."""
    sparse: dict[str, Any] = {"capability": (9, 0), "head_size": 576, "dtype": "bf16",
                              "kv_cache_dtype": "fp8", "block_size": None, "use_mla": True,
                              "use_sparse": True}
    assert select_backend(**sparse, extra={"vllm_flashmla_built": False}) == "FLASHMLA_SPARSE"
    with pytest.raises(NoValidBackend):  # dense FLASHMLA does
        select_backend(**{**sparse, "use_sparse": False}, extra={"vllm_flashmla_built": False},
                       selected="FLASHMLA")


def test_valid_backends_is_select_backend_forced() -> None:
    """``valid_backends`` (what the differential asks) answers as ``select_backend(selected=...)`` does, on a
    spread of the grid's cells and every modelled backend; an automatic spelling is no backend."""
    from capmatrix.engine.vllm import BackendNotModelled, InvalidArgument, backends, valid_backends

    record = json.loads(RECORDS[-1].read_text(encoding="utf-8"))
    version = record["vllm"]["version"]
    names = [b for b in backends(version) if "vllm_" + b.lower() in capmatrix.default_matrix().kernels]
    keys = sorted(record["cells"])[::347]
    assert len(keys) >= 10
    seen: set[bool] = set()
    for key in keys:
        for column in record["columns"]:
            kwargs = {**_kwargs(key, column), "version": version}
            got = valid_backends(**kwargs, selected=names)
            assert list(got) == names
            assert got == {name: _forced_valid(kwargs, name) for name in names}
            seen.update(got.values())
    assert seen == {True, False}
    with pytest.raises(InvalidArgument):
        valid_backends(**_MHA, selected=["FLASH_ATTN", "auto"])
    with pytest.raises(BackendNotModelled):
        valid_backends(**_MHA, selected=["CUSTOM"])


def test_every_entry_point_refuses_an_extra_that_is_no_mapping() -> None:
    """``backend_order`` and ``valid_backends`` read ``extra`` as ``select_backend`` does."""
    from capmatrix.engine.vllm import InvalidArgument, valid_backends

    base: dict[str, Any] = {"capability": (9, 0), "head_size": 128, "dtype": "bf16", "kv_cache_dtype": "auto",
                            "block_size": None, "use_mla": False, "extra": [("use_mm_prefix", True)]}
    with pytest.raises(InvalidArgument, match="extra"):
        backend_order(**base)
    with pytest.raises(InvalidArgument, match="extra"):
        valid_backends(**base, selected=["FLASH_ATTN"])
