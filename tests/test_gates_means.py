"""A guard's ``means``: what a gate-side word is for the guarded kernels (vLLM's ``kv_cache_dtype: auto``
is the model's dtype). The mapping itself, reading it (located errors), the cache, the regions against
brute force, and an ``auto`` query out of step with its kernel reported by ``check``."""

from __future__ import annotations

import hashlib
import json
from itertools import product
from typing import TYPE_CHECKING

import pytest
from analysis_synthetic import cells, supported_at

import capmatrix
from capmatrix import KernelQuery
from capmatrix.authoring.analysis import check
from capmatrix.authoring.analysis._gates import pinned
from capmatrix.model import Guard, Location, ValueOf

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from capmatrix.authoring.analysis import Finding
    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue

HERE = Location(path="g.yaml", line=1, column=1)

# dtype and kv as vLLM has them: kv's auto is the model's dtype, float16 / bfloat16 its spellings.
AXES = (
    "axes:\n"
    "  sm:\n    type: int\n    description: d\n    values: [80, 90]\n"
    "  dtype:\n    type: enum\n    description: d\n    values: [fp16, bf16, fp32]\n"
    "  kv:\n    type: enum\n    description: d\n    values: [fp16, bf16, fp32, fp8, auto]\n"
    "    spellings: {float16: fp16, bfloat16: bf16}\n"
    "  sinks:\n    type: bool\n    description: d\n"
)

# k: fp16 only on SM90 (an FP8 cache too); bf16 everywhere, never with sinks. g: vLLM's shape, every
# 16-bit model with its own KV dtype, auto or fp8; it refuses bf16 on SM90 (out of step: k serves it).
KERNELS = """\
kernels:
  k:
    description: the kernel
    rules:
      - id: k.fp16
        grant: {sm: 90, dtype: fp16, kv: [fp16, fp8]}
        reason: r
        source: s
        status: untested
      - id: k.bf16
        grant: {dtype: bf16, kv: [bf16, fp8], sinks: false}
        reason: r
        source: s
        status: untested
  g:
    kind: gate
    description: the gate
    guards:
      targets: [k]
@MEANS@      when:
        - {dtype: fp16, kv: @FP16@}
        - {dtype: bf16, kv: @BF16@}
        - {dtype: [fp16, bf16], kv: fp8}
    rules:
      - id: g.base
        grant: {dtype: [fp16, bf16], kv: [auto, float16, bfloat16, fp8]}
        reason: r
        source: s
        status: untested
      - id: g.no_bf16_sm90
        exclude: {sm: 90, dtype: bf16}
        reason: r
        source: s
        status: untested
"""
MEANS = "      means: {kv: {auto: {value_of: dtype}}}\n"


def _kernels(means: str, fp16: str = "fp16", bf16: str = "bf16") -> str:
    return KERNELS.replace("@MEANS@", means).replace("@FP16@", fp16).replace("@BF16@", bf16)


def _matrix(tmp_path: Path, *, means: bool, auto: bool) -> Matrix:
    root = tmp_path / f"m_{means}_{auto}"
    root.mkdir()
    (root / "axes.yaml").write_text(AXES, encoding="utf-8")
    text = _kernels(MEANS if means else "", "[auto, fp16]" if auto else "fp16",
                    "[auto, bfloat16]" if auto else "bf16")
    (root / "k.yaml").write_text(text, encoding="utf-8")
    return capmatrix.load(root)


def _findings(matrix: Matrix) -> dict[str, Finding]:
    return {f.code: f for f in check(matrix) if f.code in {"C111", "C112"}}


def _cells_of(finding: Finding | None) -> set[tuple[AxisValue, ...]]:
    if finding is None:
        return set()
    return {c for area in finding.regions for c in product(*area.values.values())}


# --------------------------------------------------------------------------------------------------
# The mapping


def test_meant_reads_auto_as_the_query_dtype() -> None:
    guard = Guard(targets=("k",), location=HERE, means={"kv": {"auto": ValueOf("dtype")}})
    assert guard.meant({"dtype": "fp16", "kv": "auto"}) == {"dtype": "fp16", "kv": "fp16"}
    assert guard.meant({"dtype": "bf16", "kv": "auto"}) == {"dtype": "bf16", "kv": "bf16"}
    # Words the table does not name keep their value; so does a word whose read axis is not given.
    assert guard.meant({"dtype": "bf16", "kv": "fp8"}) == {"dtype": "bf16", "kv": "fp8"}
    assert guard.meant({"kv": "auto"}) == {"kv": "auto"}
    assert guard.meant({"dtype": "fp16"}) == {"dtype": "fp16"}


def test_meant_takes_named_values_and_does_not_chain() -> None:
    guard = Guard(targets=("k",), location=HERE, means={
        "kv": {"auto": ValueOf("dtype"), "fp32": "fp16"}, "dtype": {"fp32": "bf16"}})
    # kv reads dtype as the gate sees it (fp32), not as dtype's own meaning turns it (bf16).
    assert guard.meant({"dtype": "fp32", "kv": "auto"}) == {"dtype": "bf16", "kv": "fp32"}
    assert guard.meant({"dtype": "fp16", "kv": "fp32"}) == {"dtype": "fp16", "kv": "fp16"}
    assert Guard(targets=("k",), location=HERE).meant({"kv": "auto"}) == {"kv": "auto"}


def test_means_is_read_with_spellings_folded(tmp_path: Path) -> None:
    root = tmp_path / "m"
    root.mkdir()
    (root / "axes.yaml").write_text(AXES, encoding="utf-8")
    means = "      means: {kv: {auto: {value_of: dtype}, float16: bfloat16}, dtype: {fp32: bf16}}\n"
    (root / "k.yaml").write_text(_kernels(means), encoding="utf-8")
    guard = capmatrix.load(root).kernels["g"].guards
    assert guard is not None
    # Axes in the universe's order, words as the axis spells them.
    assert list(guard.means) == ["dtype", "kv"]
    assert dict(guard.means["kv"]) == {"auto": ValueOf("dtype"), "fp16": "bf16"}
    assert dict(guard.means["dtype"]) == {"fp32": "bf16"}


# --------------------------------------------------------------------------------------------------
# An auto query out of step with its kernel


def test_an_auto_query_out_of_step_is_reported(tmp_path: Path) -> None:
    """Without ``means`` the auto queries are outside the guard's boxes and nothing is said of them;
    with it, g admitting fp16 auto on SM80 (k: fp16 on SM90 only) is C112 and g refusing bf16 auto on
    SM90 is C111, as for the explicit KV dtypes."""
    before = _findings(_matrix(tmp_path, means=False, auto=False))
    assert not any("auto" in c for f in before.values() for c in _cells_of(f))
    assert _cells_of(before["C112"])  # the explicit fp16 cache on SM80 is found either way
    matrix = _matrix(tmp_path, means=True, auto=True)
    after = _findings(matrix)
    names = list(matrix.axes)
    over = [dict(zip(names, c, strict=True)) for c in _cells_of(after["C112"])]
    under = [dict(zip(names, c, strict=True)) for c in _cells_of(after["C111"])]
    # fp16 on SM80 (k has fp16 on SM90 only), and bf16 with sinks where g does not refuse bf16.
    assert {(c["sm"], c["dtype"], c["sinks"]) for c in over if c["kv"] == "auto"} == {
        (80, "fp16", False), (80, "fp16", True), (80, "bf16", True)}
    assert {(c["sm"], c["dtype"], c["kv"], c["sinks"]) for c in under if c["kv"] == "auto"} == {
        (90, "bf16", "auto", False)}
    assert "serves the same query (kv auto read as dtype)" in after["C112"].message
    assert after["C111"].rules == ("g.no_bf16_sm90",)
    # The auto cell, asked as a user would: the gate admits it, the kernel refuses what it means.
    cell = {"sm": 80, "dtype": "fp16", "kv": "auto", "sinks": False}
    assert capmatrix.resolve(KernelQuery("g", **cell), matrix=matrix)  # type: ignore[arg-type]
    assert not capmatrix.resolve(KernelQuery("k", **{**cell, "kv": "fp16"}), matrix=matrix)  # type: ignore[arg-type]
    # Boxes that hold auto but no `means`: the kernel is asked for auto, which it never serves.
    unread = _findings(_matrix(tmp_path, means=False, auto=True))
    assert "C111" not in unread or not any("auto" in c for c in _cells_of(unread["C111"]))
    assert any("auto" in c for c in _cells_of(unread["C112"]))


def _brute(matrix: Matrix) -> dict[str, set[tuple[AxisValue, ...]]]:
    """C111 / C112 cell by cell: each cell's guarded query is ``Guard.meant`` of it, then pinned."""
    gate, kernel = matrix.kernels["g"], matrix.kernels["k"]
    guard = gate.guards
    assert guard is not None
    want: dict[str, set[tuple[AxisValue, ...]]] = {"C111": set(), "C112": set()}
    for cell in cells(matrix):
        if not any(all(cond.contains(cell[a]) for a, cond in box.items()) for box in guard.when):
            continue
        query = {**guard.meant(cell), **pinned(matrix, "k", guard.axes)}
        admits, serves = supported_at(gate, cell), supported_at(kernel, query)
        if admits != serves:
            want["C112" if admits else "C111"].add(tuple(cell.values()))
    return want


@pytest.mark.parametrize(
    ("means", "axes"),
    [
        (MEANS, ""),
        ("      means: {kv: {auto: {value_of: dtype}, fp8: bf16}, dtype: {fp16: bf16}}\n", ""),
        ("      means: {kv: {auto: {value_of: dtype}}, dtype: {bf16: fp16}}\n", ""),
        (MEANS, "      axes: {kv: fp8}\n"),
        (MEANS, "      axes: {dtype: bf16}\n"),
    ],
)
def test_meant_regions_equal_brute_force(tmp_path: Path, means: str, axes: str) -> None:
    """Meanings on one axis or two (one read by the other), and pins over them: the same cells."""
    root = tmp_path / "m"
    root.mkdir()
    (root / "axes.yaml").write_text(AXES, encoding="utf-8")
    text = _kernels(means + axes, "[auto, fp16]", "[auto, bf16]")
    (root / "k.yaml").write_text(text, encoding="utf-8")
    matrix = capmatrix.load(root)
    found = _findings(matrix)
    for code, cells_wanted in _brute(matrix).items():
        assert _cells_of(found.get(code)) == cells_wanted, code


# --------------------------------------------------------------------------------------------------
# Reading `means`: located errors, the shape, the cache


def _gate(means: str) -> str:
    return _kernels(f"      means: {means}\n")


@pytest.mark.parametrize(
    ("means", "code", "where", "gist"),
    [
        ("{kvv: {auto: fp16}}", "E230", ":20:15:", "kernels.g.guards.means.kvv: unknown axis 'kvv'"),
        ("{kv: {auto: {value_of: dtyp}}}", "E230", ":20:37:", "unknown axis 'dtyp' (did you mean 'dtype'?)"),
        ("{sm: {auto: fp16}}", "E246", ":20:15:", "'means' names words of enum axes; 'sm' is of type int"),
        ("{kv: {auto: {value_of: sinks}}}", "E246", ":20:37:", "'means' names words of enum axes"),
        ("{dtype: {fp16: {value_of: kv}}}", "E246", ":20:40:",
         "fp8, auto of axis 'kv' are not values of axis 'dtype'"),
        ("{kv: {autoo: fp16}}", "E231", ":20:20:", "'autoo' is not a value of axis 'kv'"),
        ("{kv: {auto: fp17}}", "E231", ":20:26:", "'fp17' is not a value of axis 'kv'"),
    ],
)
def test_means_errors_are_located(tmp_path: Path, means: str, code: str, where: str, gist: str) -> None:
    (tmp_path / "axes.yaml").write_text(AXES, encoding="utf-8")
    (tmp_path / "k.yaml").write_text(_gate(means), encoding="utf-8")
    problems = list(capmatrix.iter_problems(tmp_path))
    assert [p.code for p in problems] == [code], [str(p) for p in problems]
    text = str(problems[0])
    assert f"k.yaml{where}" in text, text
    assert gist in text, text
    assert problems[0].hint or code == "E230", text


def test_e246_hint_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "axes.yaml").write_text(AXES, encoding="utf-8")
    (tmp_path / "k.yaml").write_text(_gate("{dtype: {fp16: {value_of: kv}}}"), encoding="utf-8")
    (problem,) = capmatrix.iter_problems(tmp_path)
    assert problem.hint == "add them to dtype's values, or map the word to a value"
    (tmp_path / "k.yaml").write_text(_gate("{sm: {auto: fp16}}"), encoding="utf-8")
    (problem,) = capmatrix.iter_problems(tmp_path)
    assert problem.hint == "pin the value with 'axes' instead"
    (tmp_path / "k.yaml").write_text(_gate("{kv: {auto: {value_of: sinks}}}"), encoding="utf-8")
    (problem,) = capmatrix.iter_problems(tmp_path)
    assert problem.hint == "read an enum axis, or name a value"


@pytest.mark.parametrize(
    ("means", "gist"),
    [
        ("{kv: {auto: {value: dtype}}}", "{'value': 'dtype'} is not valid under any of the given schemas"),
        ("{kv: {}}", "{} should be non-empty"),
        ("{kv: [auto]}", "['auto'] is not of type 'object'"),
    ],
)
def test_a_bad_means_shape_is_a_schema_error(tmp_path: Path, means: str, gist: str) -> None:
    (tmp_path / "axes.yaml").write_text(AXES, encoding="utf-8")
    (tmp_path / "k.yaml").write_text(_gate(means), encoding="utf-8")
    (problem,) = capmatrix.iter_problems(tmp_path)
    assert (problem.code, problem.line, problem.column) == ("E103", 19, 7), str(problem)
    assert "optionally 'when', 'axes', 'refused', 'means'" in str(problem)
    assert problem.hint is not None
    assert gist in problem.hint


def test_means_round_trips_through_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAPMATRIX_CACHE", raising=False)
    monkeypatch.setenv("CAPMATRIX_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "m"
    root.mkdir()
    (root / "axes.yaml").write_text(AXES, encoding="utf-8")
    (root / "k.yaml").write_text(_gate("{kv: {auto: {value_of: dtype}, fp32: fp16}}"), encoding="utf-8")
    cold = capmatrix.load(root)
    hit = capmatrix.load(root)
    assert hit is not cold
    assert hit.kernels["g"].guards == cold.kernels["g"].guards
    guard = hit.kernels["g"].guards
    assert guard is not None
    assert dict(guard.means["kv"]) == {"auto": ValueOf("dtype"), "fp32": "fp16"}
    # An entry whose meaning is neither a value nor {value_of: name} is refused and parsed again.
    (entry,) = (tmp_path / "cache" / "entries").glob("matrix-*.json")
    head, _nl, payload = entry.read_bytes().partition(b"\n")
    data = json.loads(payload)
    (gate,) = (k for k in data["kernels"] if k[0] == "g")
    gate[-1][5][0][1][0][1] = {"value_of": 3}  # the guard's sixth field: means
    body = json.dumps(data).encode()
    magic, fmt, wanted, _sum = head.decode().split(" ")
    entry.write_bytes(f"{magic} {fmt} {wanted} {hashlib.sha256(body).hexdigest()}\n".encode() + body)
    again = capmatrix.load(root)
    assert again.kernels["g"].guards == cold.kernels["g"].guards


# --------------------------------------------------------------------------------------------------
# The shipped matrix: vLLM's default KV dtype is guarded


def _holds(finding: Finding, **values: AxisValue) -> bool:
    return any(all(v in area.values[a] for a, v in values.items()) for area in finding.regions)


def test_shipped_vllm_auto_queries_are_guarded() -> None:
    matrix = capmatrix.load()
    found = {(f.code, f.kernels[0]): f for f in check(matrix) if f.code in {"C111", "C112"}}
    gates = [k for k in matrix.kernels.values() if k.engine == "vllm" and k.guards is not None]
    assert gates
    for gate in gates:
        assert gate.guards is not None
        assert dict(gate.guards.means) == {"kv_cache_dtype": {"auto": ValueOf("dtype")}}, gate.name
    # FA3's fp16 sinks refusal, for the default KV dtype as for an explicit fp16 cache.
    fa = found["C112", "vllm_flash_attn"]
    assert _holds(fa, sm=90, dtype="fp16", kv_cache_dtype="auto", attention_sinks=True)
    cell: Mapping[str, AxisValue] = {
        "sm": 90, "attention": "gqa", "dtype": "fp16", "head_dim": 128, "q_per_kv": 4,
        "attention_sinks": True, "kv_cache_dtype": "auto"}
    assert capmatrix.resolve(KernelQuery("vllm_flash_attn", **cell), matrix=matrix)  # type: ignore[arg-type]
    assert not capmatrix.resolve(KernelQuery("flash_attn_3", **{**cell, "kv_cache_dtype": "fp16"}),  # type: ignore[arg-type]
                                 matrix=matrix)
    # FlashInfer's sinks on SM8x (C111) and fp32 models on Triton at head 576 in prefill (C112).
    assert _holds(found["C111", "vllm_flashinfer"], sm=80, kv_cache_dtype="auto", attention_sinks=True)
    assert _holds(found["C112", "vllm_triton_attn"], dtype="fp32", kv_cache_dtype="auto", head_dim=576)
    assert not _holds(found["C112", "vllm_flash_attn"], dtype="bf16", kv_cache_dtype="auto",
                      attention_sinks=True)


def test_means_on_a_derived_axis_is_located(tmp_path: Path) -> None:
    derived = AXES + (
        "  x:\n    type: enum\n    description: d\n    values: [p, q]\n    derive:\n"
        "      - when: {sm: 90}\n        value: p\n      - value: q\n")
    (tmp_path / "axes.yaml").write_text(derived, encoding="utf-8")
    (tmp_path / "k.yaml").write_text(_gate("{x: {p: q}}"), encoding="utf-8")
    (problem,) = capmatrix.iter_problems(tmp_path)
    assert (problem.code, problem.line, problem.column) == ("E230", 20, 15), str(problem)
    assert "a guard's 'means' reads base axes; 'x' is a derived axis" in str(problem)
    assert problem.hint == "name the axes its table reads"
