"""TensorRT-LLM release 1.2 spec-dec conditionals, written as plain predicates (before and after PR #10765).

This is the hardcoded logic capmatrix replaces, re-expressed from the project's conditional notes
(P3, P4, P6-P9) with the device query turned into an ``sm`` argument, so that it can be compared with the
matrix over the whole SM universe. ``*_before`` is release 1.2 before the fix (P7: one-model spec-dec mode
off on SM>=120 for every attention type); ``*_after`` is after it (P8: only for MLA).

- attention_need_spec_dec_mode: SpeculativeDecodingMode.attention_need_spec_dec_mode (interface.py)
- extend_ctx: SpeculativeDecodingMode.extend_ctx (interface.py; unchanged by the fix, P6)
- effective_spec_dec_mode: what TrtllmAttentionMetadata.update_spec_dec_param keeps (trtllm.py, P3/P4);
  other backends' metadata ignore the flag (the base hook does nothing)
- xqa_spec_dec_mode_before/after, xqa_spec_dec_kept, xqa_extend_ctx: the decisions over axis values, for
  ``capmatrix compare-legacy`` and ``capmatrix test`` (capabilities/expect/legacy.yaml)
"""

from __future__ import annotations

ONE_MODEL = "one_model"
TWO_MODEL = "two_model"
TRTLLM = "trtllm"


def _is_sm_version_trtllm_gen_kernel(sm: int) -> bool:
    # P3: Python's notion of a trtllm-gen SM (includes 110 and later SMs except 120/121).
    return not (sm < 100 or sm in [120, 121])


def _need(
    *, xqa_supported_one_model: bool, spec_dec: str, is_draft_model: bool, is_first_draft: bool,
    use_chain_drafter: bool, attention_backend: str,
) -> bool:
    is_trtllm_attention = attention_backend == TRTLLM
    use_one_engine = spec_dec == ONE_MODEL
    use_case_1 = use_one_engine and xqa_supported_one_model
    use_case_2 = (
        spec_dec == TWO_MODEL
        and (not is_draft_model or (is_first_draft and use_chain_drafter))
        and is_trtllm_attention
    )
    return use_case_1 or use_case_2


def attention_need_spec_dec_mode_before(
    *, spec_dec, sm, is_mla, is_draft_model, is_first_draft, use_chain_drafter, attention_backend,
) -> bool:
    # P7: before the fix, xqa_supported compared the SM with 120 only (no MLA input yet).
    xqa_supported = sm < 120
    return _need(
        xqa_supported_one_model=xqa_supported, spec_dec=spec_dec, is_draft_model=is_draft_model,
        is_first_draft=is_first_draft, use_chain_drafter=use_chain_drafter,
        attention_backend=attention_backend,
    )


def attention_need_spec_dec_mode_after(
    *, spec_dec, sm, is_mla, is_draft_model, is_first_draft, use_chain_drafter, attention_backend,
) -> bool:
    # P8: after the fix only MLA models lose the one-model mode on SM120 and later.
    xqa_supported = not is_mla or sm < 120
    return _need(
        xqa_supported_one_model=xqa_supported, spec_dec=spec_dec, is_draft_model=is_draft_model,
        is_first_draft=is_first_draft, use_chain_drafter=use_chain_drafter,
        attention_backend=attention_backend,
    )


def extend_ctx_before(*, spec_dec, sm, attention_backend) -> bool:
    # P6: one-model never; two-model on SM>=120 or on a non-TRTLLM backend.
    if spec_dec != TWO_MODEL:
        return False
    xqa_supported = sm < 120
    return attention_backend != TRTLLM or not xqa_supported


extend_ctx_after = extend_ctx_before  # the fix left extend_ctx alone


def _effective(need: bool, *, sm: int, attention_backend: str) -> bool:
    # P4: only TrtllmAttentionMetadata keeps the flag, and not on trtllm-gen SMs.
    return need and attention_backend == TRTLLM and not _is_sm_version_trtllm_gen_kernel(sm)


def effective_spec_dec_mode_before(**kwargs) -> bool:
    return _effective(
        attention_need_spec_dec_mode_before(**kwargs), sm=kwargs["sm"],
        attention_backend=kwargs["attention_backend"],
    )


def effective_spec_dec_mode_after(**kwargs) -> bool:
    return _effective(
        attention_need_spec_dec_mode_after(**kwargs), sm=kwargs["sm"],
        attention_backend=kwargs["attention_backend"],
    )


def _pass_flags(spec_dec_pass: str) -> tuple[bool, bool, bool]:
    """(is_draft_model, is_first_draft, use_chain_drafter) for a spec_dec_pass axis value."""
    if spec_dec_pass == "target":  # noqa: S105 - an axis value
        return False, False, False
    if spec_dec_pass == "first_chain_draft":  # noqa: S105 - an axis value
        return True, True, True
    return True, False, False


def xqa_spec_dec_mode_before(
    *, sm, attention, spec_dec, attention_backend="trtllm", spec_dec_pass="target", **_  # noqa: S107
) -> bool:
    if spec_dec not in (ONE_MODEL, TWO_MODEL):
        return False
    is_draft_model, is_first_draft, use_chain_drafter = _pass_flags(spec_dec_pass)
    return attention_need_spec_dec_mode_before(
        spec_dec=spec_dec, sm=sm, is_mla=attention == "mla", is_draft_model=is_draft_model,
        is_first_draft=is_first_draft, use_chain_drafter=use_chain_drafter,
        attention_backend=attention_backend,
    )


def xqa_spec_dec_mode_after(
    *, sm, attention, spec_dec, attention_backend="trtllm", spec_dec_pass="target", **_  # noqa: S107
) -> bool:
    if spec_dec not in (ONE_MODEL, TWO_MODEL):
        return False
    is_draft_model, is_first_draft, use_chain_drafter = _pass_flags(spec_dec_pass)
    return attention_need_spec_dec_mode_after(
        spec_dec=spec_dec, sm=sm, is_mla=attention == "mla", is_draft_model=is_draft_model,
        is_first_draft=is_first_draft, use_chain_drafter=use_chain_drafter,
        attention_backend=attention_backend,
    )


def xqa_spec_dec_kept(*, sm, attention_backend="trtllm", **_) -> bool:
    # P4 over axis values: whether the metadata keeps the flag (TRTLLM backend, not a trtllm-gen SM);
    # the fix left it alone, so it is every release-1.2 release's.
    return attention_backend == TRTLLM and not _is_sm_version_trtllm_gen_kernel(sm)


def xqa_extend_ctx(*, spec_dec, sm, attention_backend="trtllm", **_) -> bool:
    # P6 over axis values (unchanged by the fix).
    return extend_ctx_after(spec_dec=spec_dec, sm=sm, attention_backend=attention_backend)
