"""vLLM's engine-start refusals: the worker's bf16 check below SM80, through the adapter and the CLI."""

from __future__ import annotations

import io
from typing import Any

import pytest

import capmatrix
from capmatrix.authoring.cli import run
from capmatrix.engine.vllm import (
    ROLE,
    EngineRefused,
    NoValidBackend,
    backend_order,
    select_backend,
    valid_backends,
)

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
