"""vLLM's refusals as it builds the chosen backend's layers (after selection), through the adapter.

TRITON_ATTN's and TRITON_MLA's ``__init__`` refuse an FP8 KV cache below SM89: vLLM's selection picks or
validates the backend, then the engine stops. The matrix says so with the gates the backends' guards name
in ``caught_by`` (``vllm_triton_attn_init``, ``vllm_triton_mla_init``); the adapter raises
``EngineRefused`` with ``selected`` set to the backend selection had picked.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

import pytest

import capmatrix
from capmatrix.authoring.loader import default_path
from capmatrix.engine.vllm import (
    EngineRefused,
    NoValidBackend,
    backend_order,
    select_backend,
    valid_backends,
)

if TYPE_CHECKING:
    from pathlib import Path

    from capmatrix.matrix import Matrix

VERSIONS = capmatrix.default_matrix().releases["vllm"].names
#: A Llama-like layer: head 128, fp16 (every GPU here runs fp16), no block size asked.
LAYER: dict[str, Any] = {"head_size": 128, "dtype": "float16", "block_size": None, "use_mla": False}
#: DeepSeek-V3's MLA layer (the matrix's MLA geometry).
MLA_LAYER: dict[str, Any] = {"head_size": 576, "dtype": "float16", "block_size": None, "use_mla": True}
FP8_WORDS = ("fp8", "fp8_e4m3", "fp8_e5m2")
T4, V100, A100, L4, H100 = (7, 5), (7, 0), (8, 0), (8, 9), (9, 0)


def _refusal(**kwargs: Any) -> EngineRefused:
    with pytest.raises(EngineRefused) as info:
        select_backend(**kwargs)
    return info.value


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kv", FP8_WORDS)
@pytest.mark.parametrize("capability", [T4, V100])
def test_fp8_below_sm80_picks_triton_attn_then_refuses(
    version: str, kv: str, capability: tuple[int, int]
) -> None:
    """T4 and V100: selection picks TRITON_ATTN (nothing else is valid), then its init stops the engine."""
    refusal = _refusal(capability=capability, kv_cache_dtype=kv, version=version, **LAYER)
    assert isinstance(refusal, NoValidBackend)
    assert (refusal.selected, refusal.stage, refusal.rule) == (
        "TRITON_ATTN", "vllm_triton_attn_init", "vllm_triton_attn_init.fp8_below_sm89")
    assert "FP8 KV cache is not supported by the Triton attention backend" in refusal.text
    assert "Re-run with --kv-cache-dtype" in refusal.text  # the remedy travels with the refusal
    assert refusal.backends == ()  # selection rejected nothing it would have run
    assert "selects TRITON_ATTN, then refuses at engine start" in str(refusal)
    # what vLLM walked and validated is unchanged: its validation accepts TRITON_ATTN
    assert "TRITON_ATTN" in backend_order(capability=capability, kv_cache_dtype=kv, version=version, **LAYER)
    assert valid_backends(capability=capability, kv_cache_dtype=kv, version=version, selected=["TRITON_ATTN"],
                          **LAYER) == {"TRITON_ATTN": True}


@pytest.mark.parametrize("kv", ["auto", "float16"])
def test_a_16_bit_cache_on_a_t4_is_not_refused(kv: str) -> None:
    """The check is FP8's: TRITON_ATTN runs a float16 cache (or the model's dtype) on a T4."""
    assert select_backend(capability=T4, kv_cache_dtype=kv, **LAYER) == "TRITON_ATTN"
    assert select_backend(capability=T4, kv_cache_dtype=kv, selected="triton_attn", **LAYER) == "TRITON_ATTN"


@pytest.mark.parametrize("kv", FP8_WORDS)
@pytest.mark.parametrize("capability", [A100, (8, 6), (8, 7), (8, 8)])
def test_from_sm80_auto_picks_another_backend_and_forced_triton_is_refused(
    kv: str, capability: tuple[int, int]
) -> None:
    """A100 to SM88 (8.7 and 8.8 are on no GPU list): selection picks a backend that runs FP8; TRITON_ATTN
    forced, in vLLM's spelling or any case, is validated and then refused at its init."""
    chosen = select_backend(capability=capability, kv_cache_dtype=kv, **LAYER)
    assert chosen != "TRITON_ATTN"
    for spelling in ("TRITON_ATTN", "triton_attn"):
        refusal = _refusal(capability=capability, kv_cache_dtype=kv, selected=spelling, **LAYER)
        assert (refusal.selected, refusal.stage) == ("TRITON_ATTN", "vllm_triton_attn_init")


@pytest.mark.parametrize("kv", FP8_WORDS)
@pytest.mark.parametrize("capability", [L4, H100, (12, 0)])
def test_from_sm89_triton_attn_runs_fp8(kv: str, capability: tuple[int, int]) -> None:
    """L4 (SM89, native FP8), H100 and an RTX 5090: TRITON_ATTN forced is answered, not refused."""
    assert select_backend(capability=capability, kv_cache_dtype=kv, selected="TRITON_ATTN",
                          **LAYER) == "TRITON_ATTN"
    assert select_backend(capability=capability, kv_cache_dtype=kv, selected="triton_attn",
                          **LAYER) == "TRITON_ATTN"
    select_backend(capability=capability, kv_cache_dtype=kv, **LAYER)  # whatever wins, nothing refuses


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("capability", [T4, A100, (8, 8)])
def test_triton_mla_below_sm89_is_refused(version: str, capability: tuple[int, int]) -> None:
    """MLA: TRITON_MLA (picked below SM90, or forced) is refused by TritonMLAImpl.__init__'s check."""
    for selected in (None, "TRITON_MLA", "triton_mla"):
        refusal = _refusal(capability=capability, kv_cache_dtype="fp8", selected=selected, version=version,
                           **MLA_LAYER)
        assert (refusal.selected, refusal.stage, refusal.rule) == (
            "TRITON_MLA", "vllm_triton_mla_init", "vllm_triton_mla_init.fp8_below_sm89")
        assert "Triton MLA backend" in refusal.text


def test_triton_mla_from_sm89_runs_fp8() -> None:
    assert select_backend(capability=L4, kv_cache_dtype="fp8", **MLA_LAYER) == "TRITON_MLA"
    assert select_backend(capability=H100, kv_cache_dtype="fp8", selected="TRITON_MLA",
                          **MLA_LAYER) == "TRITON_MLA"


def test_the_worker_refuses_before_selection() -> None:
    """bf16 below SM80: the worker stops first, before any backend is picked (``selected`` None)."""
    refusal = _refusal(capability=T4, kv_cache_dtype="fp8", **{**LAYER, "dtype": "bf16"})
    assert (refusal.stage, refusal.selected) == ("vllm_worker_init", None)
    assert "selects" not in str(refusal)


def test_refusals_are_not_memoised() -> None:
    """The memo keeps chosen backends only: the same refused question raises every time, and the same
    layer with a cache the backend runs is answered."""
    for _ in range(3):
        assert _refusal(capability=T4, kv_cache_dtype="fp8", **LAYER).selected == "TRITON_ATTN"
    assert select_backend(capability=T4, kv_cache_dtype="auto", **LAYER) == "TRITON_ATTN"
    assert _refusal(capability=T4, kv_cache_dtype="fp8", **LAYER).selected == "TRITON_ATTN"


@pytest.fixture(scope="module")
def moved_threshold(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    """A copy of the matrix whose TRITON_ATTN init refuses FP8 below SM90 instead of SM89."""
    root = tmp_path_factory.mktemp("init") / "capabilities"
    shutil.copytree(default_path(), root)
    path = root / "kernels" / "vllm_attention.yaml"
    text = path.read_text(encoding="utf-8")
    rule = "      - id: vllm_triton_attn_init.fp8_below_sm89\n"
    start = text.index(rule)
    end = text.index("\n", text.index('sm: "<89"', start))
    assert text.count('sm: "<89"', start, end + 1) == 1
    path.write_text(text[:start] + text[start:end].replace('sm: "<89"', 'sm: "<90"') + text[end:],
                    encoding="utf-8")
    return capmatrix.load(root)


def test_the_adapter_follows_the_data(moved_threshold: Matrix) -> None:
    """Moving the gate's threshold in the YAML moves the refusal: SM89 is refused in the copy only, and
    the MLA gate (not edited) is unchanged."""
    forced = {"capability": L4, "kv_cache_dtype": "fp8", "selected": "TRITON_ATTN", **LAYER}
    assert select_backend(**forced) == "TRITON_ATTN"
    refusal = _refusal(**forced, matrix=moved_threshold)
    assert (refusal.selected, refusal.rule) == ("TRITON_ATTN", "vllm_triton_attn_init.fp8_below_sm89")
    assert select_backend(**{**forced, "capability": H100}, matrix=moved_threshold) == "TRITON_ATTN"
    assert select_backend(capability=L4, kv_cache_dtype="fp8", selected="TRITON_MLA", **MLA_LAYER,
                          matrix=moved_threshold) == "TRITON_MLA"


def test_no_caught_by_no_refusal(tmp_path: Path) -> None:
    """The checks are the data's: with the guard's ``caught_by`` gone, vLLM's pick is answered as picked."""
    root = tmp_path / "capabilities"
    shutil.copytree(default_path(), root)
    path = root / "kernels" / "vllm_attention.yaml"
    text = path.read_text(encoding="utf-8")
    line = "      caught_by: [vllm_triton_attn_init]"
    assert text.count(line) == 1
    path.write_text(text.replace(line, "      # caught_by left out"), encoding="utf-8")
    matrix = capmatrix.load(root)
    assert select_backend(capability=T4, kv_cache_dtype="fp8", matrix=matrix, **LAYER) == "TRITON_ATTN"
