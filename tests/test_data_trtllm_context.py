"""TensorRT-LLM's context path: the trtllm_context role and the engine gates in front of it."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

import pytest

import capmatrix
from capmatrix import KernelQuery, Matrix, Verdict
from capmatrix.authoring.analysis import check
from capmatrix.model import AxisType
from capmatrix.resolver import compile_matrix

if TYPE_CHECKING:
    from capmatrix.model import Condition

FP8 = {"dtype": "fp8", "kv_cache_dtype": "fp8"}


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return capmatrix.load()


class Pick(NamedTuple):
    model: str
    axes: dict[str, object]
    kernel: str | None


PICKS: tuple[Pick, ...] = (
    Pick("llama", {"sm": 100}, "trtllm_gen"),
    Pick("llama", {"sm": 100, "head_dim": 80}, "fmha_v2"),       # FmhaDispatcher: head 80 -> fmha_v2
    Pick("llama", {"sm": 100, "head_dim": 80, **FP8}, None),     # no E4M3 fmha_v2 kernel on SM100
    Pick("llama", {"sm": 90}, "fmha_v2"),
    Pick("llama", {"sm": 121}, "fmha_v2"),
    Pick("llama", {"sm": 80, "head_dim": 144}, "unfused_mha"),   # no fmha_v2 cubin for head 144
    Pick("llama", {"sm": 87}, "unfused_mha"),                    # no fmha_v2 cubins for SM87
    Pick("llama", {"sm": 80, "position_bias": "relative"}, "unfused_mha"),
    Pick("llama", {"sm": 100, "position_bias": "alibi"}, "unfused_mha"),
    Pick("llama", {"sm": 120, "kv_cache_dtype": "nvfp4"}, None),  # NVFP4 KV needs FP8 context FMHA (init)
    Pick("llama", {"sm": 100, "kv_cache_dtype": "nvfp4"}, None),
    Pick("llama", {"sm": 120, "dtype": "fp8", "kv_cache_dtype": "nvfp4"}, "fmha_v2"),
    Pick("deepseek_v3", {"sm": 90}, "fmha_v2"),
    Pick("deepseek_v3", {"sm": 100}, "trtllm_gen"),
    Pick("deepseek_v3", {"sm": 86}, None),                       # MLA needs a fused context kernel
    # AttentionOp::initialize stops the op: INT8 KV on SM100/103, a head size MMHA lacks, FP8 KV with paged
    # context FMHA below SM89
    Pick("llama", {"sm": 100, "kv_cache_dtype": "int8"}, None),
    Pick("llama", {"sm": 90, "kv_cache_dtype": "int8"}, "fmha_v2"),
    Pick("llama", {"sm": 90, "head_dim": 512}, None),
    Pick("llama", {"sm": 80, "head_dim": 72}, "fmha_v2"),         # 72 is let through for fmha_v2
    Pick("llama", {"sm": 86, "kv_cache_dtype": "fp8", "paged_context_fmha": True}, None),
    # FP8 KV with paged context FMHA forces the FP8 context kernel with the model's (BF16) output; fmha_v2
    # builds that pair for head 192 only (SM89/120/121) and for no non-MLA head on SM90, so Llama (head
    # 128) falls back to unfused MHA there (setup.py @ 03dd9bb8; issue #17911 reports heads 64/128 added
    # later, head 256 still falling back); trtllm-gen has it on SM100/103
    Pick("llama", {"sm": 89, "kv_cache_dtype": "fp8", "paged_context_fmha": True}, "unfused_mha"),
    Pick("llama", {"sm": 90, "kv_cache_dtype": "fp8"}, "unfused_mha"),
    Pick("llama", {"sm": 120, "kv_cache_dtype": "fp8"}, "unfused_mha"),
    Pick("llama", {"sm": 121, "kv_cache_dtype": "fp8", "head_dim": 192}, "fmha_v2"),
    Pick("llama", {"sm": 89, "kv_cache_dtype": "fp8", "head_dim": 192}, "fmha_v2"),
    Pick("llama", {"sm": 100, "kv_cache_dtype": "fp8"}, "trtllm_gen"),
    Pick("llama", {"sm": 100, "kv_cache_dtype": "fp8", "head_dim": 80}, "unfused_mha"),
    Pick("llama", {"sm": 89, "kv_cache_dtype": "fp8", "paged_context_fmha": False}, "fmha_v2"),
    Pick("llama", {"sm": 90, "kv_cache_dtype": "fp8", "dtype": "fp8"}, "fmha_v2"),  # the FP8 workflow
    # Llama 4's chunked layers: fmha_v2 serves them on SM90 only and stops elsewhere
    Pick("llama4_scout", {"sm": 90}, "fmha_v2"),
    Pick("llama4_scout", {"sm": 80}, None),
    Pick("llama4_scout", {"sm": 89}, None),
    Pick("llama4_scout", {"sm": 120}, None),
    Pick("llama4_scout", {"sm": 80, "chunked_attention": False}, "fmha_v2"),
    # ALiBi: trtllm-gen refuses it in context too
    Pick("llama", {"sm": 90, "position_bias": "alibi"}, "fmha_v2"),
    # SM100/103: FmhaDispatcher builds trtllm-gen alone (fmha_v2 only for head 80), then unfused MHA
    Pick("llama", {"sm": 103, "head_dim": 80}, "fmha_v2"),
    # trtllm-gen's kernel table (tools/import_trtllm_gen.py): no head-96 cubin, and FmhaDispatcher has no
    # fmha_v2 step there, so Phi-3-mini prefills with unfused MHA on SM100/103 (fmha_v2 on SM90)
    Pick("phi3_mini", {"sm": 100}, "unfused_mha"),
    Pick("phi3_mini", {"sm": 103}, "unfused_mha"),
    Pick("phi3_mini", {"sm": 90}, "fmha_v2"),
    Pick("llama", {"sm": 100, "paged_context_fmha": True, "tokens_per_block": 128}, "unfused_mha"),
    Pick("llama", {"sm": 100, "paged_context_fmha": True, "tokens_per_block": 64}, "trtllm_gen"),
)


@pytest.mark.parametrize("p", PICKS, ids=[f"{p.model}-{p.axes}" for p in PICKS])
def test_trtllm_context_role(p: Pick, matrix: Matrix) -> None:
    query = KernelQuery(None, model=p.model, **p.axes)  # type: ignore[arg-type]
    selection = capmatrix.select("trtllm_context", query, matrix=matrix)
    assert selection.kernel == p.kernel
    order, decided = matrix.roles["trtllm_context"].order_for(compile_matrix(matrix).derived_values(query))
    assert decided
    assert [r.kernel for r in selection.trace] == list(order[: len(selection.trace)])
    if p.kernel is None:
        assert selection.trace  # the refusal comes with the candidates' reasons


def test_unfused_fallback_is_last(matrix: Matrix) -> None:
    orders = matrix.roles["trtllm_context"].orders
    assert orders[-1].candidates == ("trtllm_gen", "fmha_v2", "unfused_mha")
    assert orders[-2].candidates == ("trtllm_gen", "unfused_mha")  # SM100/103 but head 80
    assert all(o.candidates[-1] == "unfused_mha" for o in orders if "trtllm_gen" in o.candidates)
    assert matrix.roles["trtllm_context"].axes == {"phase": "context"}


INIT_AXES = ("sm", "kv_cache_dtype", "head_dim", "attention", "paged_context_fmha", "dtype")


def _boxes_read(matrix: Matrix, kernel: str, role: str) -> list[Mapping[str, Condition]]:
    """Every box an answer of ``kernel`` (with its guard's targets) and of ``role``'s orders reads.

    The kernels' rules, guards and the role's orders, and the tables of the derived axes they name.
    """
    boxes: list[Mapping[str, Condition]] = [o_box for o in matrix.roles[role].orders for o_box in o.when]
    kernels, seen = [kernel], set()
    while kernels:
        k = matrix.kernels[kernels.pop()]
        seen.add(k.name)
        boxes += [r.conditions for r in k.rules]
        if k.guards is not None:
            boxes += k.guards.when
            kernels += [t for t in k.guards.targets if t in matrix.kernels and t not in seen]
            assert not set(k.guards.targets) & set(matrix.roles), "a guard sending to a role: read its orders"
    named = {a for box in boxes for a in box}
    while derived := [matrix.derived[a] for a in named if a in matrix.derived]:
        named = set()
        for d in derived:
            boxes += [box for row in d.rows for box in row.when]
            named |= {a for row in d.rows for box in row.when for a in box}
    return boxes


def _stand_ins(
    matrix: Matrix, axis: str, boxes: list[Mapping[str, Condition]], own: tuple[object, ...] = ()
) -> tuple[list[object], Callable[[object], object]]:
    """One value of ``axis`` per class of the conditions of ``boxes`` on it, and each value's stand-in.

    Each word a model pins or ``own`` names is a class of its own. Two values of one class meet every
    condition alike, so whatever reads only ``boxes`` answers them alike. The stand-in of any value,
    listed or not (an int no list names), is the first listed value of its class.
    """
    singles = set(own) | {m.axes[axis] for m in matrix.models.values() if axis in m.axes}
    cuts = list(dict.fromkeys(box[axis] for box in boxes if axis in box))

    def signature(value: object) -> tuple[object, ...]:
        return (value,) if value in singles else tuple(c.contains(value) for c in cuts)  # type: ignore[arg-type]

    first: dict[tuple[object, ...], object] = {}
    for value in matrix.axes[axis].values or (False, True):
        first.setdefault(signature(value), value)
    return list(first.values()), lambda value: first[signature(value)]


@pytest.mark.parametrize("role", ["trtllm_context", "trtllm_generation"])
def test_init_orders_are_the_init_gate_refusals(role: str, matrix: Matrix) -> None:
    """A role offers the init gate alone exactly where the gate refuses: the orders cannot drift from it.

    Every combination of the axes' value classes (over the conditions the gate and the role's orders
    read) is asked, one value standing for each class, and a seeded sample of the full product checks
    that each value is answered as its class's stand-in.
    """
    resolver = compile_matrix(matrix)
    phase = matrix.roles[role].axes["phase"]

    def answer(combo: tuple[object, ...]) -> tuple[bool, tuple[str, ...]] | None:
        axes = dict(zip(INIT_AXES, combo, strict=True))
        if axes["attention"] == "mla" and axes["head_dim"] != 576:
            return None  # MLA is DeepSeek-shaped only (C7)
        query = KernelQuery(None, phase=phase, **axes)  # type: ignore[arg-type]
        gate = resolver.resolve(query.with_kernel("trtllm_attention_init"))
        order, _ = matrix.roles[role].order_for(resolver.derived_values(query))
        refuses = gate.verdict is Verdict.UNSUPPORTED
        assert refuses == (order == ("trtllm_attention_init",)), (axes, gate.rules, order)
        return refuses, order

    # MLA and 576, its one head size, are classes of their own: the skip above reads values, not classes
    own = {"head_dim": (576,), "attention": ("mla",)}
    boxes = _boxes_read(matrix, "trtllm_attention_init", role)
    reps, stand_in = zip(*(_stand_ins(matrix, a, boxes, own.get(a, ())) for a in INIT_AXES), strict=True)
    assert sum(map(len, reps)) < sum(len(matrix.axes[a].values or (0, 1)) for a in INIT_AXES)
    refusals = sum(bool(a and a[0]) for a in map(answer, itertools.product(*reps)))
    assert refusals > 10
    # The sample: listed values, and on the int axes (sm, head_dim) ints no list names, a third of the time.
    rng = random.Random(7)  # noqa: S311 - a reproducible sample, not a secret
    universe = [matrix.axes[a].values or (False, True) for a in INIT_AXES]
    ints = [matrix.axes[a].type is AxisType.INT for a in INIT_AXES]
    lows = [matrix.axes[a].minimum or 1 for a in INIT_AXES]  # an int an axis takes at all (sm >= 10)
    for _ in range(3000):
        combo = tuple(
            rng.randint(lows[i], 1100) if ints[i] and rng.random() < 1 / 3 else rng.choice(universe[i])
            for i in range(len(INIT_AXES)))
        got = answer(combo)
        if got is not None:
            assert got == answer(tuple(s(v) for s, v in zip(stand_in, combo, strict=True))), combo


class Gate(NamedTuple):
    gate: str
    model: str
    axes: dict[str, object]
    expected: Verdict
    rule: str


S, U = Verdict.SUPPORTED, Verdict.UNSUPPORTED
GATES: tuple[Gate, ...] = (
    Gate("trtllm_mla_kv_cache_reuse", "llama", {"sm": 121}, S, "trtllm_mla_kv_cache_reuse.non_mla"),
    Gate("trtllm_mla_kv_cache_reuse", "deepseek_v3", {"sm": 120}, S,
         "trtllm_mla_kv_cache_reuse.mla_allowlist"),
    # issue #15344: the raw Python SM of GB10 is not in the allowlist
    Gate("trtllm_mla_kv_cache_reuse", "deepseek_v3", {"sm": 121}, U,
         "trtllm_mla_kv_cache_reuse.mla_allowlist"),
    Gate("trtllm_mla_kv_cache_reuse", "deepseek_v3", {"sm": 90, "kv_cache_dtype": "int8"}, U,
         "trtllm_mla_kv_cache_reuse.mla_allowlist"),
    Gate("trtllm_mla_chunked_prefill", "llama", {"sm": 80}, S, "trtllm_mla_chunked_prefill.non_mla"),
    Gate("trtllm_mla_chunked_prefill", "deepseek_v3", {"sm": 103}, S,
         "trtllm_mla_chunked_prefill.mla_allowlist"),
    Gate("trtllm_mla_chunked_prefill", "deepseek_v3", {"sm": 121}, U,
         "trtllm_mla_chunked_prefill.mla_allowlist"),
    Gate("trtllm_attention_init", "llama", {"sm": 86, "phase": "context"}, S,
         "trtllm_attention_init.accepts"),
    Gate("trtllm_attention_init", "llama",
         {"sm": 86, "phase": "context", "paged_context_fmha": True, "kv_cache_dtype": "fp8"}, U,
         "trtllm_attention_init.fp8_kv_paged_context_needs_fp8_fmha"),
    Gate("trtllm_attention_init", "llama",
         {"sm": 89, "phase": "context", "paged_context_fmha": True, "kv_cache_dtype": "fp8"}, S,
         "trtllm_attention_init.accepts"),
    Gate("trtllm_attention_init", "llama", {"sm": 100, "phase": "context", "kv_cache_dtype": "int8"}, U,
         "trtllm_attention_init.int8_kv_sm100f"),
    Gate("trtllm_attention_init", "llama", {"sm": 90, "phase": "context", "kv_cache_dtype": "int8"}, S,
         "trtllm_attention_init.accepts"),
    # the gate answers the generation phase too (one AttentionOp serves both phases of a layer)
    Gate("trtllm_attention_init", "llama", {"sm": 103, "phase": "generation", "kv_cache_dtype": "int8"}, U,
         "trtllm_attention_init.int8_kv_sm100f"),
    Gate("trtllm_attention_init", "llama",
         {"sm": 80, "phase": "generation", "paged_context_fmha": True, "kv_cache_dtype": "fp8"}, U,
         "trtllm_attention_init.fp8_kv_paged_context_needs_fp8_fmha"),
    Gate("trtllm_attention_init", "llama", {"sm": 90, "phase": "context", "head_dim": 512}, U,
         "trtllm_attention_init.mmha_head_size"),
    Gate("trtllm_attention_init", "llama", {"sm": 90, "phase": "generation", "head_dim": 40}, U,
         "trtllm_attention_init.mmha_head_size"),  # a head size the axis does not list
    Gate("trtllm_attention_init", "llama", {"sm": 90, "phase": "context", "head_dim": 72}, S,
         "trtllm_attention_init.accepts"),
    Gate("trtllm_attention_init", "deepseek_v3", {"sm": 90, "phase": "context"}, S,
         "trtllm_attention_init.accepts"),  # MLA (576) skips the MMHA check
)


@pytest.mark.parametrize("g", GATES, ids=[f"{g.gate}-{g.model}-{g.axes}" for g in GATES])
def test_context_gates(g: Gate, matrix: Matrix) -> None:
    r = capmatrix.resolve(KernelQuery(g.gate, model=g.model, **g.axes), matrix=matrix)  # type: ignore[arg-type]
    assert r.verdict is g.expected, [str(x) for x in r.reasons]
    assert g.rule in r.rules


def test_gates_are_gates(matrix: Matrix) -> None:
    for name in ("trtllm_mla_kv_cache_reuse", "trtllm_mla_chunked_prefill", "trtllm_attention_init"):
        assert str(matrix.kernels[name].kind) == "gate"


def test_check_reports_the_sm121_allowlist_split(matrix: Matrix) -> None:
    """capmatrix check flags issue #15344 (SM120 without SM121) as a family split, for both allowlists."""
    split = {rule for f in check(matrix) if f.code == "C107" for rule in f.rules}
    assert {"trtllm_mla_kv_cache_reuse.mla_allowlist", "trtllm_mla_chunked_prefill.mla_allowlist"} <= split


def test_new_axes_default_off(matrix: Matrix) -> None:
    """New axes default to the value under which today's queries were written, except paged context FMHA,
    which defaults to the engine's default (on: the PyTorch flow turns it on for KV-cache reuse, on by
    default)."""
    defaults = {name: matrix.axes[name].default for name in (
        "logit_softcapping", "position_bias", "per_layer_window", "chunked_attention", "attention_sinks",
        "paged_context_fmha")}
    assert defaults == {"logit_softcapping": False, "position_bias": "none", "per_layer_window": False,
                        "chunked_attention": False, "attention_sinks": False, "paged_context_fmha": True}
