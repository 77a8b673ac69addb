"""TensorRT-LLM release 1.2 speculative-decoding decisions, answered from the matrix's engine gates.

The three decisions of ``tensorrt_llm/_torch/speculative/interface.py`` and
``attention_backend/trtllm.py`` (``attention_need_spec_dec_mode``, ``extend_ctx`` and the flag that
``update_spec_dec_param`` finally hands to the attention op) come from the gates in
``capabilities/kernels/trtllm_gates.yaml``; this module only maps the engine's arguments to axis values.
Bind once per engine with :func:`bind_spec_dec`; the module-level functions cache a binding per
argument tuple.

:func:`xqa_plan` answers the user's question "will TensorRT-LLM run XQA for this model and mode" from
both halves of the matrix: the gates say whether release 1.2 hands XQA multi-token queries, and
``resolve("xqa", ...)`` says whether an XQA kernel serves the query it is then handed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping

from capmatrix._core.record import field, record
from capmatrix._shipped.default import default_matrix, resolve
from capmatrix.engine.bind import BoundDecision, bind
from capmatrix.engine.hf import ATTENTION_MLA
from capmatrix.errors import CapmatrixError
from capmatrix.query import KernelQuery
from capmatrix.releases import release

TYPE_CHECKING = False  # not typing's: the engine's start imports neither typing nor dataclasses
if TYPE_CHECKING:
    from typing import Any, Final

    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue
    from capmatrix.resolver import Resolution

__all__ = [
    "ENGINE",
    "GATES",
    "AmbiguousGate",
    "SpecDecDecisions",
    "XqaPlan",
    "attention_need_spec_dec_mode",
    "bind_spec_dec",
    "effective_spec_dec_mode",
    "extend_ctx",
    "spec_dec_pass",
    "xqa_plan",
]

#: Which gate of the matrix answers which decision (the only place gate names appear).
#: The engine's name in ``releases.yaml``.
ENGINE: Final = "tensorrt_llm"
GATES: Final[Mapping[str, str]] = {
    "need": "trtllm_spec_dec_mode",
    "extend_ctx": "trtllm_extend_ctx",
    "kept": "trtllm_spec_dec_kept",
}

#: spec_dec_pass values: the target's verification pass, the first step of a chain drafter, any other
#: draft step.
PASS_TARGET: Final = "target"  # noqa: S105 - an axis value, not a secret
PASS_FIRST_CHAIN_DRAFT: Final = "first_chain_draft"  # noqa: S105 - an axis value, not a secret
PASS_DRAFT: Final = "draft"  # noqa: S105 - an axis value, not a secret


class AmbiguousGate(CapmatrixError, ValueError):
    """A gate tells apart attention types that the engine's ``is_mla`` flag cannot express."""

    def __init__(self, gate: str, attentions: tuple[str, ...]) -> None:
        super().__init__(gate, attentions)
        self.gate = gate
        self.attentions = attentions

    def __str__(self) -> str:
        return (
            f"gate {self.gate!r} answers differently for attention types {list(self.attentions)}, "
            "which is_mla=False does not tell apart; pass the attention type instead"
        )


@record(kw_only=True)
class SpecDecDecisions:
    """The spec-dec decisions of one engine, bound at start.

    ``need(is_first_draft)`` and ``effective(is_first_draft)`` are dict lookups; ``extend_ctx`` is a
    constant (it depends only on static inputs). ``need_static`` / ``effective_static`` hold the answer
    when it does not depend on ``is_first_draft`` (target and one-model engines), else None, so that an
    engine can hoist the decision out of its step entirely.
    """

    need: Callable[[bool], bool] = field(repr=False)
    effective: Callable[[bool], bool] = field(repr=False)
    extend_ctx: bool
    kept: bool
    need_decision: BoundDecision = field(repr=False)
    extend_ctx_decision: BoundDecision = field(repr=False)
    kept_decision: BoundDecision = field(repr=False)
    need_table: Mapping[bool, bool]
    effective_table: Mapping[bool, bool]
    need_static: bool | None
    effective_static: bool | None


def spec_dec_pass(*, is_draft_model: bool, is_first_draft: bool, use_chain_drafter: bool) -> str:
    """Map the engine's draft flags to a spec_dec_pass value.

    The target engine runs the verification pass; a draft engine's first step under a chain drafter is
    ``first_chain_draft`` (``spec_resource_manager.is_first_draft and use_chain_drafter``, P9); every
    other draft step is ``draft``.
    """
    if not is_draft_model:
        return PASS_TARGET
    if is_first_draft and use_chain_drafter:
        return PASS_FIRST_CHAIN_DRAFT
    return PASS_DRAFT


def _attentions(matrix: Matrix, *, is_mla: bool) -> tuple[str, ...]:
    """The attention values an ``is_mla`` flag stands for (MLA, or every other type of the axis)."""
    values = tuple(str(v) for v in matrix.axes["attention"].values)
    mla = (ATTENTION_MLA,)
    other = tuple(v for v in values if v not in mla)
    return {True: mla, False: other}[bool(is_mla)]


def bind_spec_dec(
    *,
    spec_dec: str,
    sm: int,
    is_mla: bool,
    is_draft_model: bool,
    use_chain_drafter: bool,
    attention_backend: str,
    matrix: Matrix | None = None,
    version: str | None = None,
) -> SpecDecDecisions:
    """Bind the spec-dec decisions of one engine (everything but ``is_first_draft`` is static).

    :param spec_dec: ``one_model`` or ``two_model`` (``none`` turns every gate off).
    :param attention_backend: ``trtllm``, ``flashinfer`` or ``vanilla``.
    :param version: the TensorRT-LLM release (``capmatrix list versions``); None is the newest modelled.
    :raises capmatrix.InvalidQuery: for a value the matrix does not know.
    :raises InvalidArgument: for a release the matrix does not model (it lists the modelled ones).
    :raises AmbiguousGate: when a gate answers differently for non-MLA attention types.
    """
    m = default_matrix() if matrix is None else matrix
    released: dict[str, Any] = (
        {m.releases[ENGINE].axis: release(m, ENGINE, version)} if ENGINE in m.releases else {})
    passes: dict[Hashable, AxisValue] = {
        first: spec_dec_pass(
            is_draft_model=is_draft_model, is_first_draft=first, use_chain_drafter=use_chain_drafter
        )
        for first in (False, True)
    }
    attentions = _attentions(m, is_mla=is_mla)
    decisions = [
        bind(
            GATES["need"],
            dynamic={"spec_dec_pass": passes},
            matrix=m,
            sm=sm,
            attention=attention,
            spec_dec=spec_dec,
            attention_backend=attention_backend,
            **released,
        )
        for attention in attentions
    ]
    need = decisions[0]
    if any(d.table != need.table for d in decisions):
        raise AmbiguousGate(GATES["need"], attentions)
    # The other two gates are asked as the need is: a gate may tell MLA from the rest (the seed's fix
    # keeps XQA's spec-dec on SM12x for non-MLA models only), which is_mla says.
    ctx = _one(GATES["extend_ctx"], attentions, matrix=m, sm=sm, spec_dec=spec_dec,
               attention_backend=attention_backend, **released)
    kept = _one(GATES["kept"], attentions, matrix=m, sm=sm, attention_backend=attention_backend, **released)
    need_table = {bool(k): v for k, v in need.table.items()}
    effective_table = {k: v and bool(kept.value) for k, v in need_table.items()}
    return SpecDecDecisions(
        need=need_table.__getitem__,
        effective=effective_table.__getitem__,
        extend_ctx=bool(ctx.value),
        kept=bool(kept.value),
        need_decision=need,
        extend_ctx_decision=ctx,
        kept_decision=kept,
        need_table=need_table,
        effective_table=effective_table,
        need_static=_constant(need_table),
        effective_static=_constant(effective_table),
    )


def _one(gate: str, attentions: tuple[str, ...], **axes: Any) -> BoundDecision:  # noqa: ANN401
    """``gate`` bound for each attention type ``is_mla`` stands for: one answer, or AmbiguousGate."""
    first, *others = [bind(gate, attention=attention, **axes) for attention in attentions]
    if any(d.value != first.value for d in others):
        raise AmbiguousGate(gate, attentions)
    return first


def _constant(table: Mapping[bool, bool]) -> bool | None:
    """The table's single answer, or None when the answers differ."""
    answers = set(table.values())
    first = next(iter(answers))
    return first if answers == {first} else None


# --------------------------------------------------------------------------------------------------
# Drop-in functions with the release-1.2 inputs (cached per argument tuple)

_lock = threading.Lock()
_cache: dict[tuple[object, ...], tuple[object, SpecDecDecisions]] = {}


def _decisions(
    spec_dec: str, sm: int, is_mla: bool, is_draft_model: bool, use_chain_drafter: bool,
    attention_backend: str,
) -> SpecDecDecisions:
    matrix = default_matrix()
    key = (spec_dec, sm, bool(is_mla), bool(is_draft_model), bool(use_chain_drafter),
           attention_backend)
    found = _cache.get(key)
    if found is not None:
        cached_matrix, cached = found
        if cached_matrix is matrix:
            return cached
    bound = bind_spec_dec(
        spec_dec=spec_dec, sm=sm, is_mla=is_mla, is_draft_model=is_draft_model,
        use_chain_drafter=use_chain_drafter, attention_backend=attention_backend, matrix=matrix,
    )
    with _lock:
        _cache[key] = (matrix, bound)
    return bound


def attention_need_spec_dec_mode(
    *,
    spec_dec: str,
    sm: int,
    is_mla: bool,
    is_draft_model: bool,
    is_first_draft: bool,
    use_chain_drafter: bool,
    attention_backend: str,
) -> bool:
    """Whether the attention of this pass asks for multi-token (spec-dec) mode (gate trtllm_spec_dec_mode).

    :raises capmatrix.InvalidQuery: for a value the matrix does not know.
    """
    return _decisions(
        spec_dec, sm, is_mla, is_draft_model, use_chain_drafter, attention_backend
    ).need(bool(is_first_draft))


def effective_spec_dec_mode(
    *,
    spec_dec: str,
    sm: int,
    is_mla: bool,
    is_draft_model: bool,
    is_first_draft: bool,
    use_chain_drafter: bool,
    attention_backend: str,
) -> bool:
    """The spec-dec flag the attention op finally receives: the need, kept by trtllm_spec_dec_kept.

    :raises capmatrix.InvalidQuery: for a value the matrix does not know.
    """
    return _decisions(
        spec_dec, sm, is_mla, is_draft_model, use_chain_drafter, attention_backend
    ).effective(bool(is_first_draft))


def extend_ctx(*, spec_dec: str, sm: int, attention_backend: str) -> bool:
    """Whether draft-carrying generation requests become chunked-context requests (trtllm_extend_ctx).

    :raises capmatrix.InvalidQuery: for a value the matrix does not know.
    """
    return _decisions(spec_dec, sm, False, False, False, attention_backend).extend_ctx  # noqa: FBT003


# --------------------------------------------------------------------------------------------------
# Gate and kernel together: does TensorRT-LLM run XQA for this model and mode?


@record(kw_only=True)
class XqaPlan:
    """What release 1.2 does with the generation queries of one pass, and whether XQA serves them.

    ``multi_token``: the attention op receives the spec-dec (multi-token) flag (trtllm_spec_dec_mode and
    trtllm_spec_dec_kept). ``context``: draft-carrying requests are relabelled as chunked-context
    requests (trtllm_extend_ctx), so no generation kernel sees the drafts. ``kernel``: the XQA
    resolution of the query XQA is handed (spec_dec as given when ``multi_token``, else ``none``).
    ``runs``: XQA serves this pass's generation queries.
    """

    runs: bool
    multi_token: bool
    context: bool
    kernel: Resolution
    gates: Mapping[str, Resolution] = field(repr=False)

    def __bool__(self) -> bool:
        return self.runs


def xqa_plan(
    *,
    sm: int,
    spec_dec: str,
    model: str | None = None,
    pass_: str = PASS_TARGET,
    matrix: Matrix | None = None,
    **axes: AxisValue,
) -> XqaPlan:
    """Whether TensorRT-LLM runs XQA for this model, SM and speculative-decoding mode.

    Release 1.2, TRTLLM backend unless ``attention_backend`` says otherwise.
    ``resolve("xqa", ...)`` alone answers whether the kernel can serve a query; this also asks the
    engine gates whether the query reaches XQA as a multi-token query at all. With spec_dec ``none``
    it is the kernel's answer for single-token decode.

    :param pass_: the spec_dec_pass of the engine pass (``target``, ``first_chain_draft``, ``draft``).
    :raises capmatrix.InvalidQuery: for a value the matrix does not know.
    """
    m = default_matrix() if matrix is None else matrix
    gates: dict[str, Resolution] = {}
    multi_token = context = False
    if spec_dec != "none":
        gate_axes = {**axes, "sm": sm, "spec_dec": spec_dec, "spec_dec_pass": pass_}
        for key, gate in GATES.items():
            gates[key] = resolve(KernelQuery(gate, model=model, **gate_axes), m)
        multi_token = bool(gates["need"]) and bool(gates["kept"])
        context = bool(gates["extend_ctx"])
    seen = spec_dec if multi_token else "none"
    kernel = resolve(KernelQuery("xqa", model=model, **{**axes, "sm": sm, "spec_dec": seen}), m)
    return XqaPlan(runs=bool(kernel) and not context, multi_token=multi_token, context=context,
                   kernel=kernel, gates=gates)
