"""Legacy-style predicates for the compare-legacy tests (over the small test universe of conftest.py)."""

from __future__ import annotations


def mla_spec_only_off_sm12x(*, sm: int, attention: str, spec_dec: str, **_: object) -> bool:
    return not (sm >= 120 and attention == "mla" and spec_dec == "one_model")


def reads_kwargs(*, sm: int, **kwargs: object) -> bool:
    return sm >= 90 and kwargs["attention"] != "mla"


def no_kwargs(sm: int, scale: int = 1) -> bool:
    return sm * scale >= 100


def raises(*, sm: int, **_: object) -> bool:
    if sm == 120:
        raise ZeroDivisionError("boom")
    return True


def extra_param(*, sm: int, threshold: int) -> bool:
    return sm >= threshold


def positional_only(sm: int, /, **_: object) -> bool:
    return True


NOT_A_FUNCTION = 3
