"""Legacy-style predicates for the compare-legacy tests (over the small test universe of conftest.py)."""

from __future__ import annotations


def mla_spec_only_off_sm12x(*, sm, attention, spec_dec, **_):
    return not (sm >= 120 and attention == "mla" and spec_dec == "one_model")


def reads_kwargs(*, sm, **kwargs):
    return sm >= 90 and kwargs["attention"] != "mla"


def no_kwargs(sm, scale=1):
    return sm * scale >= 100


def raises(*, sm, **_):
    if sm == 120:
        raise ZeroDivisionError("boom")
    return True


def extra_param(*, sm, threshold):
    return sm >= threshold


def positional_only(sm, /, **_):
    return True


NOT_A_FUNCTION = 3
