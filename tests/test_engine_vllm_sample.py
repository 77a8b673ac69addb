"""capmatrix.engine.vllm against vLLM 0.33.0's own answers off the grid (the drawn sample).

The record (capabilities/evidence/vllm_0.33.0_sample.json.gz, made by ``tools/record_vllm_selection.py
--sample``; its design is in docs/vllm-differential.md) holds configurations drawn over every input class
vLLM accepts: 13 capabilities (7.0-12.1 with 10.1, 10.3 and 11.0), head sizes on and off every list, all 22
KV-cache spellings, block sizes of every class, dense/sparse MLA, sinks, the multimodal prefix,
non-causal attention, a sliding window and forced names in any case (``auto`` and the MiniMax aliases
included). Every record is compared: the automatic choice, the priority list, the refused backends when
none is valid, each of the 20 modelled backends validated alone, and the forced spelling's answer.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import stride
from record_spread import spread

import capmatrix
from capmatrix import KernelQuery
from capmatrix.authoring.engine_records import (
    compare_record,
    recorder_mm_prefix_artefact,
    vllm_sample_kwargs,
    vllm_sample_row,
)
from capmatrix.engine import vllm
from capmatrix.engine.vllm import KV_CACHE_DTYPES
from capmatrix.resolver import compile_matrix

RECORD = Path(__file__).resolve().parent.parent / "capabilities/evidence/vllm_0.33.0_sample.json.gz"
#: The record's flags that are matrix axes passed through ``extra``.
_FLAG_AXES = (("use_mm_prefix", "use_mm_prefix"), ("use_non_causal", "use_non_causal"),
              ("has_sliding_window", "sliding_window"))


def _load() -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    with gzip.open(RECORD, "rt", encoding="utf-8") as lines:
        head = json.loads(next(lines))
        rows = [json.loads(line) for line in lines]
    return head, rows


@pytest.fixture(scope="module")
def sample() -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    return _load()


def _disagreements(config: dict[str, Any], answer: dict[str, Any], forced: list[str],
                   version: str = "0.33.0") -> list[str]:
    """Every way the matrix's answer for one record differs from vLLM's (empty: none)."""
    return [str(d) for d in vllm_sample_row(config, answer, forced, version)]


def test_sample_design(sample: tuple[dict[str, Any], list[list[dict[str, Any]]]]) -> None:
    """The sample covers what its design says, and the record is vLLM 0.33.0's."""
    head, rows = sample
    assert head["format"] == "capmatrix-vllm-sample/1"
    assert head["vllm"] == {"version": "0.33.0", "commit": "4ba787ec9",
                            "wheel": "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"}
    classes = head["classes"]
    assert {"7.0", "8.0", "9.0", "10.0", "10.1", "10.3", "11.0", "12.0", "12.1"} <= set(classes["capability"])
    assert {72, 136, 200, 264, 320, 384, 512, 576} <= set(classes["head_size"])
    assert set(classes["kv_cache_dtype"]) == set(KV_CACHE_DTYPES)
    assert len(KV_CACHE_DTYPES) == 22  # every CacheDType spelling of vllm/config/cache.py
    kv_axis = capmatrix.default_matrix().axes["kv_cache_dtype"]  # each of vLLM's words names one value
    assert {kv_axis.spellings.get(w, w) for w in KV_CACHE_DTYPES} <= set(kv_axis.values)
    assert {None, 1, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256} <= set(classes["block_size"])
    assert {"auto", "AUTO", "CUTLASS_MSA"} <= set(classes["forced"])
    assert len(rows) == head["per_capability"] * len(classes["capability"])
    seen: dict[str, set[str]] = {}
    for config, _answer in rows:
        for name, value in config.items():
            seen.setdefault(name, set()).add(json.dumps(value))
    # every class of every input is drawn at least once
    assert {json.loads(v) for v in seen["head_size"]} == set(classes["head_size"])
    assert {json.loads(v) for v in seen["kv_cache_dtype"]} == set(classes["kv_cache_dtype"])
    assert {json.loads(v) for v in seen["block_size"]} == set(classes["block_size"])
    assert {tuple(json.loads(v)) for v in seen["capability"]} == {
        tuple(int(x) for x in c.split(".")) for c in classes["capability"]}
    flags = ("use_mla", "use_sparse", "has_sink", "use_mm_prefix", "use_non_causal", "has_sliding_window")
    for flag in flags:
        assert seen[flag] == {"true", "false"}, flag
    forced = {json.loads(v) for v in seen["forced"]}
    assert None in forced
    assert {f.upper() for f in forced if f} == {f.upper() for f in classes["forced"]}
    # vLLM chose a backend in a good share of the records, and refused in a good share
    chosen = sum(1 for _config, answer in rows if answer["chosen"] is not None)
    assert len(rows) // 10 < chosen < len(rows) // 2


@pytest.mark.no_cover  # a sweep: the same lines thousands of times (see conftest.py)
@pytest.mark.sweep
def test_sample_differential(
    sample: tuple[dict[str, Any], list[list[dict[str, Any]]]], tmp_path: Path
) -> None:
    """Every record agrees (``make test``: every 8th; ``capmatrix test`` compares them all): the automatic
    choice, the order, every forced backend and spelling."""
    _head, rows = sample
    assert len(rows) > 10000
    result = compare_record(spread(RECORD, tmp_path, stride(8)))
    rows = rows[::stride(8)]
    assert result.rows == len(rows)
    assert result.artefacts == 0  # 0.33.0's recorder has no mm-prefix artefact to leave out
    assert result.start_refused == _below_worker_check(rows)
    assert result.init_refused == _refused_at_init(rows)
    assert result.agree, (result.failed, [str(d) for d in result.disagreements])


@pytest.mark.parametrize("minor", [2, 7, 9])
def test_any_blackwell_minor_answers_as_vllm_answered_10_1(
    sample: tuple[dict[str, Any], list[list[dict[str, Any]]]], minor: int
) -> None:
    """vLLM's CUDA selection tests the major only (``is_device_capability_family(100)``), so a 10.x
    nobody recorded is answered as vLLM answered 10.1, which no list of the matrix names either."""
    _head, rows = sample
    tried = 0
    for config, answer in rows:
        if config["capability"] != [10, 1]:
            continue
        moved = {**config, "capability": [10, minor]}
        assert _disagreements(moved, answer, []) == [], moved
        tried += 1
    assert tried > 500


def test_sample_is_the_documented_draw(sample: tuple[dict[str, Any], list[list[dict[str, Any]]]]) -> None:
    """The recorded inputs are exactly what the tool's seeded draw gives, capability by capability, in order
    (so the record is the documented draw, and ``--seed`` reproduces it)."""
    from scripts import load_script

    tool = load_script("tools/record_vllm_selection.py")
    head, rows = sample
    assert head["seed"] == tool.SAMPLE_SEED
    assert head["classes"]["capability"] == [f"{a}.{b}" for a, b in tool.SAMPLE_CAPABILITIES]
    drawn = [s.as_json() for cap in tool.SAMPLE_CAPABILITIES
             for s in tool._samples(cap, head["per_capability"], head["seed"])]
    assert drawn == [config for config, _answer in rows]
    first = tool.SAMPLE_CAPABILITIES[0]
    assert [s.as_json() for s in tool._samples(first, 5, head["seed"] + 1)] != drawn[:5]  # the seed matters


# ---- vLLM 0.34.0's sample (tools/record_vllm_selection.py, seed 20260334) --------------------------------

RECORD_0340 = RECORD.with_name("vllm_0.34.0_sample.json.gz")


def _layer_query(kwargs: dict[str, Any]) -> KernelQuery:
    """The query the adapter asks for ``kwargs``: what the model's layer hands to selection."""
    return vllm._query(compile_matrix(capmatrix.default_matrix()), kwargs["version"], (
        kwargs["capability"], kwargs["head_size"], kwargs["dtype"], kwargs["kv_cache_dtype"],
        kwargs["block_size"], kwargs.get("checkpoint_kv_cache_dtype")),
        (kwargs["use_mla"], kwargs["use_sparse"], kwargs["has_sink"]), None)


@pytest.mark.no_cover  # a sweep: the same lines thousands of times (see conftest.py)
@pytest.mark.sweep
def test_sample_0340_differential(tmp_path: Path) -> None:
    """Every record of 0.34.0's sample agrees when asked as 0.34.0, but the recorder's artefact above
    (``make test``: every 8th record; ``capmatrix test`` compares them all).

    A record whose KV dtype is the checkpoint's (``kv_from_checkpoint``) is asked as vLLM was: ``auto``
    with ``checkpoint_kv_cache_dtype``, which the adapter hands on as the layer does (the checkpoint's for a
    non-MLA layer, auto for an MLA one, attention.py:297-300 @ 62d4bc3c7; ``layer`` records what the
    layer passed, and the adapter's query must say the same). Where the MLA layer refuses
    before selection (a sliding window with ``fp8_ds_mla`` / ``nvfp4_ds_mla``, mla_attention.py:517-523,
    recorded as the layer's ``raises``), the matrix must choose nothing either: those KV words are no
    MLA backend's.
    """
    with gzip.open(RECORD_0340, "rt", encoding="utf-8") as lines:
        head = json.loads(next(lines))
        rows = [json.loads(line) for line in lines]
    assert head["vllm"]["version"] == "0.34.0"
    assert len(rows) == 14000
    compared = spread(RECORD_0340, tmp_path, stride(8))
    rows = rows[::stride(8)]
    for config, answer in rows:
        assert "raises" not in answer["layer"] or answer["chosen"] is None
        if "raises" not in answer["layer"]:  # the adapter hands selection what the layer handed it
            passed = _layer_query(vllm_sample_kwargs(config, "0.34.0")).axes
            assert (passed["kv_cache_dtype"], passed["vllm_kv_from_checkpoint"]) == (
                answer["layer"]["kv_cache_dtype"],
                bool(config.get("kv_from_checkpoint")) and not config["use_mla"]), config
    result = compare_record(compared)
    assert result.rows == len(rows)
    assert result.artefacts <= sum(1 for config, _answer in rows if recorder_mm_prefix_artefact(config))
    assert result.start_refused == _below_worker_check(rows)
    assert result.init_refused == _refused_at_init(rows)
    assert result.agree, (result.failed, [str(d) for d in result.disagreements])


#: vLLM's backends whose layers refuse an FP8 KV cache below SM89 (and a bfloat16 one below SM80) when
#: the engine builds them (TritonAttentionImpl / TritonMLAImpl.__init__), after selection chose them.
TRITON_INIT = {"TRITON_ATTN", "TRITON_MLA"}


def _refused_at_init(rows: list[list[dict[str, Any]]], *, allow_none: bool = False) -> int:
    """The records whose recorded automatic or forced choice vLLM then refuses as it builds the layers.

    The KV dtype is the one the layer passed (``layer``, from 0.34.0: a checkpoint's reaches non-MLA
    layers only); the worker's refusal (bf16 below SM80) comes first.
    """
    count = 0
    for config, answer in rows:
        cap = tuple(config["capability"])
        kv = answer.get("layer", {}).get("kv_cache_dtype", config["kv_cache_dtype"])
        if config["dtype"] == "bf16" and cap < (8, 0):
            continue
        picked = {answer["chosen"], answer["forced"].get("backend") if config["forced"] else None}
        refused = (kv.startswith("fp8") and cap < (8, 9)) or (kv == "bfloat16" and cap < (8, 0))
        count += bool(picked & TRITON_INIT) and refused
    assert count > 0 or allow_none
    return count


def test_start_refusals_are_counted_apart(sample: tuple[dict[str, Any], list[list[dict[str, Any]]]],
                                         tmp_path: Path) -> None:
    """A row the worker refuses (bf16 below SM80) is left out as ``start_refused``; a row whose pick
    TRITON_ATTN's init refuses is compared by the pick and counted as ``init_refused``."""
    head, rows = sample
    worker = next(row for row in rows if row[0]["dtype"] == "bf16" and tuple(row[0]["capability"]) < (8, 0))
    init = next(row for row in rows if _refused_at_init([row], allow_none=True))
    path = tmp_path / RECORD.name
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write("\n".join(json.dumps(line) for line in (head, worker, init)) + "\n")
    result = compare_record(path)
    assert (result.rows, result.start_refused, result.init_refused) == (2, 1, 1)
    assert result.agree, [str(d) for d in result.disagreements]


def _below_worker_check(rows: list[list[dict[str, Any]]]) -> int:
    """The records vLLM's worker refuses at start (bf16 below SM80), which its recorder asks past."""
    count = sum(1 for config, _answer in rows
                if config["dtype"] == "bf16" and tuple(config["capability"]) < (8, 0))
    assert count > 0
    return count
