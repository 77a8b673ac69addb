"""vLLM's engine-start refusals through the adapter and the CLI: the worker's bf16 check below SM80, and
TRITON_ATTN's init after selection (FP8 below SM89) in ``select``."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from typing import Any

import pytest

import capmatrix
from capmatrix import KernelQuery
from capmatrix.authoring.cli import run
from capmatrix.authoring.cli._query import (
    _start_lines,
    format_selection,
    kernel_start_refusal,
    selection_verdict,
    start_refusal,
)
from capmatrix.engine.vllm import (
    ROLE,
    EngineRefused,
    NoValidBackend,
    backend_order,
    select_backend,
    valid_backends,
)
from capmatrix.query import ANY
from capmatrix.resolver import Verdict

VERSIONS = capmatrix.default_matrix().releases["vllm"].names
T4: dict[str, Any] = {"capability": (7, 5), "head_size": 128, "kv_cache_dtype": "auto", "block_size": None,
                      "use_mla": False}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("selected", [None, "TRITON_ATTN", "FLEX_ATTENTION"])
def test_bf16_below_sm80_is_refused_at_worker_init(version: str, selected: str | None) -> None:
    """Automatic or forced, vLLM stops at worker init with its text and remedy (--dtype=half)."""
    with pytest.raises(EngineRefused) as info:
        select_backend(**T4, dtype="bf16", selected=selected, version=version)
    refusal = info.value
    assert isinstance(refusal, NoValidBackend)
    assert refusal.stage == "vllm_worker_init"
    assert refusal.rule == "vllm_worker_init.bf16_below_sm80"
    assert "compute capability of at least 8.0" in refusal.text
    assert "--dtype=half" in refusal.text
    assert refusal.backends == ()
    assert refusal.text in str(refusal)


@pytest.mark.parametrize("version", VERSIONS)
def test_order_and_validity_are_refused_too(version: str) -> None:
    """vLLM walks no priority list and validates no backend once its worker has stopped."""
    with pytest.raises(EngineRefused):
        backend_order(**T4, dtype="torch.bfloat16", version=version)
    with pytest.raises(EngineRefused):
        valid_backends(**T4, dtype="bfloat16", selected=["TRITON_ATTN"], version=version)


@pytest.mark.parametrize("capability", [(6, 0), (6, 1), (7, 2), (7, 9), (1, 0)])
@pytest.mark.parametrize("dtype", ["bf16", "bfloat16", "torch.bfloat16"])
def test_bf16_is_refused_on_every_capability_below_8(capability: tuple[int, int], dtype: str) -> None:
    """Capabilities no GPU list names (Pascal, Xavier, an unlisted minor) and vLLM's other spellings."""
    with pytest.raises(EngineRefused):
        select_backend(**{**T4, "capability": capability}, dtype=dtype)


@pytest.mark.parametrize("capability", [(8, 7), (8, 9), (9, 9), (12, 1)])
def test_bf16_from_8_0_passes_the_worker_check(capability: tuple[int, int]) -> None:
    """An unlisted capability of 8.0 and above is past the worker check: no engine-start refusal."""
    try:
        select_backend(**{**T4, "capability": capability}, dtype="bfloat16")
    except EngineRefused as refused:  # pragma: no cover - the failure message
        pytest.fail(f"refused at start on {capability}: {refused}")
    except NoValidBackend:
        pass  # selection may still find no backend; the start check is what is asked here


@pytest.mark.parametrize(("capability", "dtype"), [((7, 5), "fp16"), ((7, 5), "fp32"), ((8, 0), "bf16"),
                                                   ((8, 6), "bf16")])
def test_what_the_worker_check_lets_through_is_selected(capability: tuple[int, int], dtype: str) -> None:
    """fp16 on a T4 and bf16 from SM80 on start; selection then answers a backend."""
    asked = {**T4, "capability": capability, "dtype": dtype}
    backend = select_backend(**asked)
    assert backend in backend_order(**asked)


def test_the_gate_cites_vllm() -> None:
    """The refusing rule names the file, the function and the commit of each release."""
    matrix = capmatrix.default_matrix()
    rule = matrix.rule("vllm_worker_init.bf16_below_sm80")
    commits = [v.pins["commit"] for v in matrix.releases["vllm"].versions]
    assert "vllm/platforms/cuda.py" in rule.source
    assert "check_if_supports_dtype" in rule.source
    assert all(commit in rule.source for commit in commits)
    assert matrix.kernels["vllm_worker_init"].kind == "gate"
    assert "vllm_worker_init" in [c for o in matrix.roles[ROLE].orders for c in o.candidates]


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue()


def test_select_refuses_on_a_t4() -> None:
    """``select vllm_attention --gpu T4 --dtype bf16``: exit 1, the stage first, vLLM's text whole."""
    code, out = cli("select", ROLE, "--gpu", "T4", "--dtype", "bf16", "--head-dim", "128",
                    "--kv-cache-dtype", "auto", "--attention", "gqa")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"{ROLE}: no supported candidate: refused at engine start by gate vllm_worker_init"
    flat = " ".join(line.strip() for line in lines)
    assert "for example: --dtype=half." in flat
    assert "vllm_worker_init.bf16_below_sm80" in flat
    code, out = cli("select", ROLE, "--gpu", "T4", "--dtype", "fp16", "--head-dim", "128",
                    "--kv-cache-dtype", "auto", "--attention", "gqa")
    assert (code, out.splitlines()[0]) == (0, f"{ROLE}: vllm_triton_attn")


# ---- after selection: TRITON_ATTN's init refuses an FP8 cache below SM89 (vllm_triton_attn_init) -------

REFUSED = "vllm_triton_attn, then refused at engine start by gate vllm_triton_attn_init"
T4_FP8 = ("select", ROLE, "--gpu", "T4", "--kv-cache-dtype", "fp8", "--dtype", "fp16", "--model",
          "llama3_1_8b")


def test_select_shows_the_pick_then_the_refusal_at_its_init() -> None:
    """The winner vLLM's selection picks, then the gate that stops the engine, with vLLM's text whole."""
    code, out = cli(*T4_FP8)
    assert code == 1  # as the worker's refusal
    lines = out.splitlines()
    flat = " ".join(line.strip() for line in lines)
    assert flat.startswith(f"{ROLE}: {REFUSED} ")
    assert "=> vllm_triton_attn: supported" in flat
    assert "!! vllm_triton_attn_init: unsupported; - vllm_triton_attn_init.fp8_below_sm89" in flat
    assert "native FP8 (fp8e4nv) requires SM89+. Re-run with --kv-cache-dtype bfloat16." in flat
    assert flat.index("=> vllm_triton_attn") < flat.index("!! vllm_triton_attn_init")


@pytest.mark.parametrize(("kv", "gpu"), [("auto", "T4"), ("fp8", "L4"), ("fp8", "H100")])
def test_select_without_a_refusal_is_unchanged(kv: str, gpu: str) -> None:
    """A 16-bit cache on a T4, FP8 from SM89: the winner alone, exit 0, no start check shown."""
    code, out = cli("select", ROLE, "--gpu", gpu, "--kv-cache-dtype", kv, "--dtype", "fp16", "--model",
                    "llama3_1_8b")
    assert code == 0
    assert "engine start" not in out
    assert "!!" not in out


def test_select_json_carries_the_refusal() -> None:
    code, out = cli(*T4_FP8, "--json")
    assert code == 1
    data = json.loads(out)
    assert (data["kernel"], data["verdict"]) == ("vllm_triton_attn", "unsupported")
    assert data["trace"][-1]["verdict"] == "supported"  # selection's own answer is kept
    start = data["engine_start"]
    assert (start["kernel"], start["verdict"]) == ("vllm_triton_attn_init", "unsupported")
    exclusions = [r for r in start["reasons"] if r["kind"] == "exclude"]
    assert [r["rule"] for r in exclusions] == ["vllm_triton_attn_init.fp8_below_sm89"]
    assert "Re-run with --kv-cache-dtype" in exclusions[0]["reason"]
    code, out = cli(*T4_FP8[:-4], "--kv-cache-dtype", "auto", "--dtype", "fp16", "--model", "llama3_1_8b",
                    "--json")
    assert code == 0
    assert "engine_start" not in json.loads(out)


def test_select_per_gpu_refuses_below_sm89_only() -> None:
    """``--gpu all``: the GPUs below SM89 show the pick and the refusal; SM89 and above their winner."""
    argv = ("select", ROLE, "--gpu", "all", "--kv-cache-dtype", "fp8", "--dtype", "fp16", "--model",
            "llama3_1_8b", "--json")
    code, out = cli(*argv)
    assert code == 3  # some GPUs run, some stop: it depends on the GPU
    rows = json.loads(out)["gpus"]
    assert rows
    for row in rows:
        if row["kernel"] == "vllm_triton_attn":
            assert row["sm"] < 89
            assert row["verdict"] == "unsupported"
            assert row["answer"] == REFUSED
            assert row["engine_start"] == {"gate": "vllm_triton_attn_init", "verdict": "unsupported",
                                           "rule": "vllm_triton_attn_init.fp8_below_sm89"}
        else:
            assert row["verdict"] == "supported"
            assert "engine_start" not in row
    assert {row["sm"] for row in rows if row["kernel"] == "vllm_triton_attn"} == {75}
    assert any(row["sm"] >= 89 for row in rows if row["verdict"] == "supported")
    code, text = cli(*argv[:-1])
    assert (code, f"  {REFUSED}:" in text.splitlines()) == (3, True)


def test_the_start_check_that_depends_says_so() -> None:
    """A start check left open by the query: the head says it depends and the verdict is depends.

    No shipped query reaches it (the winner reads the axes its checks read), so it is asked directly."""
    matrix = capmatrix.default_matrix()
    selection = capmatrix.select(ROLE, KernelQuery(sm=75, dtype="fp16", kv_cache_dtype="auto",
                                                   attention="gqa", head_dim=128), matrix)
    assert selection.kernel == "vllm_triton_attn"
    open_check = capmatrix.resolve(KernelQuery("vllm_triton_attn_init", sm=75, kv_cache_dtype=ANY), matrix)
    assert open_check.verdict is Verdict.DEPENDS
    assert selection_verdict(selection, open_check) is Verdict.DEPENDS
    assert selection_verdict(selection, None) is Verdict.SUPPORTED
    text = format_selection(selection, matrix=matrix, refusal=open_check)
    assert text.splitlines()[0] == (f"{ROLE}: vllm_triton_attn, then at engine start gate "
                                    "vllm_triton_attn_init depends on values the query leaves open")
    assert "!! vllm_triton_attn_init: depends" in text
    explained = format_selection(selection, matrix=matrix, refusal=open_check, explain=True)
    assert "!! vllm_triton_attn_init: depends" in explained
    assert start_refusal(selection, matrix) is None  # auto: TRITON_ATTN's init admits it


def test_a_selection_that_already_depends_keeps_its_verdict() -> None:
    """An earlier candidate that depends makes the answer depend, whatever the start check says."""
    matrix = capmatrix.default_matrix()
    selection = capmatrix.select(ROLE, KernelQuery(sm=75, dtype="fp16", kv_cache_dtype="fp8",
                                                   attention="gqa", head_dim=128), matrix)
    refusal = start_refusal(selection, matrix)
    assert refusal is not None
    assert refusal.verdict is Verdict.UNSUPPORTED
    pending = replace(selection, trace=(replace(selection.trace[0], verdict=Verdict.DEPENDS),
                                        *selection.trace[1:]))
    assert selection_verdict(pending, refusal) is Verdict.DEPENDS
    assert selection_verdict(selection, refusal) is Verdict.UNSUPPORTED


# ---- a kernel question: the kernel's verdict, then the start check that refuses it ------------------

QUERY_T4_FP8 = ("query", "vllm_triton_attn", *T4_FP8[2:])


@pytest.mark.parametrize("explain", [(), ("--explain",)])
def test_query_keeps_the_kernels_verdict_then_names_the_refusing_check(explain: tuple[str, ...]) -> None:
    """``query vllm_triton_attn`` on a T4 with FP8: supported, then refused at start; exit 1 as select."""
    code, out = cli(*QUERY_T4_FP8, *explain)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "vllm_triton_attn: supported"
    assert lines[1] == "  then refused at engine start by gate vllm_triton_attn_init"
    assert lines[2].startswith(
        "  !! vllm_triton_attn_init: unsupported; - vllm_triton_attn_init.fp8_below_sm89")
    flat = " ".join(line.strip() for line in lines)
    assert "native FP8 (fp8e4nv) requires SM89+. Re-run with --kv-cache-dtype bfloat16." in flat
    assert "vllm_triton_attn.base" in flat  # the kernel's own reasons follow


def test_query_json_carries_the_refusal_beside_the_kernels_verdict() -> None:
    code, out = cli(*QUERY_T4_FP8, "--json")
    assert code == 1
    data = json.loads(out)
    assert (data["kernel"], data["verdict"]) == ("vllm_triton_attn", "supported")
    start = data["engine_start"]
    assert (start["kernel"], start["verdict"]) == ("vllm_triton_attn_init", "unsupported")
    assert [r["rule"] for r in start["reasons"] if r["kind"] == "exclude"] == [
        "vllm_triton_attn_init.fp8_below_sm89"]


@pytest.mark.parametrize(("kv", "gpu"), [("auto", "T4"), ("fp16", "T4"), ("fp8", "L4"), ("fp8", "H100")])
def test_query_without_a_refusal_is_unchanged(kv: str, gpu: str) -> None:
    code, out = cli("query", "vllm_triton_attn", "--gpu", gpu, "--kv-cache-dtype", kv, "--dtype", "fp16",
                    "--model", "llama3_1_8b")
    assert (code, out.splitlines()[0]) == (0, "vllm_triton_attn: supported")
    assert "engine start" not in out
    code, out = cli("query", "vllm_triton_attn", "--gpu", gpu, "--kv-cache-dtype", kv, "--dtype", "fp16",
                    "--model", "llama3_1_8b", "--json")
    assert "engine_start" not in json.loads(out)


def test_an_unsupported_kernel_is_asked_no_start_check() -> None:
    """A head below 32 is no TRITON_ATTN layer at all: its own exclusion, never the init's."""
    code, out = cli(*QUERY_T4_FP8, "--head-dim", "16")
    assert (code, out.splitlines()[0]) == (1, "vllm_triton_attn: unsupported")
    assert "engine start" not in out


def test_query_per_gpu_names_the_check_below_sm89() -> None:
    argv = ("query", "vllm_triton_attn", "--gpu", "all", "--kv-cache-dtype", "fp8", "--dtype", "fp16",
            "--model", "llama3_1_8b", "--json")
    code, out = cli(*argv)
    assert code == 3  # refused on some GPUs, run on others
    rows = json.loads(out)["gpus"]
    refused = {row["sm"] for row in rows if "engine_start" in row}
    assert refused
    assert all(sm < 89 for sm in refused)
    running = {row["sm"] for row in rows if row["verdict"] == "supported" and "engine_start" not in row}
    assert running >= {89, 90}
    row = next(row for row in rows if "engine_start" in row)
    assert row["engine_start"] == {"gate": "vllm_triton_attn_init", "verdict": "unsupported",
                                   "rule": "vllm_triton_attn_init.fp8_below_sm89"}
    assert row["verdict"] == "supported"  # the kernel's own, as the text's first words
    assert row["answer"].startswith("supported (vllm_triton_attn.base), then refused at engine start by gate "
                                    "vllm_triton_attn_init (vllm_triton_attn_init.fp8_below_sm89)")


def test_a_start_check_left_open_says_it_depends() -> None:
    matrix = capmatrix.default_matrix()
    open_check = capmatrix.resolve(KernelQuery("vllm_triton_attn_init", sm=75, kv_cache_dtype=ANY), matrix)
    assert _start_lines(open_check)[0] == (
        "  then at engine start gate vllm_triton_attn_init depends on values the query leaves open")
    resolution = capmatrix.resolve(KernelQuery("vllm_triton_attn", sm=75, kv_cache_dtype=ANY,
                                               model="llama3_1_8b"), matrix)
    assert resolution.verdict is Verdict.DEPENDS
    assert kernel_start_refusal(resolution, matrix) is None  # not supported: no check is asked
