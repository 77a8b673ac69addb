"""KernelQuery is immutable, hashable, normalised and picklable."""

from __future__ import annotations

import pickle

import pytest
from conftest import Integer, Number, disguises, str_enum
from hypothesis import given
from hypothesis import strategies as st

from capmatrix import ANY, InvalidQuery, KernelQuery


def test_equal_queries_hash_equal_regardless_of_order() -> None:
    a = KernelQuery("xqa", sm=120, spec_dec="one_model", model="llama")
    b = KernelQuery("xqa", model="llama", spec_dec="one_model", sm=120)
    assert a == b
    assert hash(a) == hash(b)
    assert {a: 1}[b] == 1


def test_bool_and_int_are_different_values() -> None:
    assert KernelQuery("k", x=1) != KernelQuery("k", x=True)


def test_immutable_and_replace() -> None:
    q = KernelQuery("xqa", sm=120)
    with pytest.raises(AttributeError):
        q.kernel = "mmha"
    r = q.replace(sm=121, attention="gqa")
    assert r.axes == {"sm": 121, "attention": "gqa"}
    assert q.axes == {"sm": 120}
    assert r.replace(attention=None).axes == {"sm": 121}
    assert q.with_kernel("mmha") == KernelQuery("mmha", sm=120)
    assert q.with_kernel("xqa") is q


def test_repr_and_pickle() -> None:
    q = KernelQuery("xqa", model="llama", sm=120, beam_width=ANY)
    assert repr(q) == "KernelQuery('xqa', model='llama', beam_width=ANY, sm=120)"
    assert pickle.loads(pickle.dumps(q)) == q


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sm": None}, "axis 'sm' is None"),
        ({"sm": 1.5}, "type float"),
        ({"sm": [120]}, "type list"),
    ],
)
def test_bad_values(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidQuery, match=message):
        KernelQuery("xqa", **kwargs)  # type: ignore[arg-type]


def test_bad_kernel_and_model_types() -> None:
    with pytest.raises(InvalidQuery):
        KernelQuery(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidQuery):
        KernelQuery("x", model=3)  # type: ignore[arg-type]


def test_unknown_name_with_nothing_declared() -> None:
    from capmatrix import UnknownName

    error = UnknownName("role", "gen", [])
    assert str(error) == "unknown role 'gen'; the matrix declares no roles"
    assert error.suggestion is None


# --------------------------------------------------------------------------------------------------
# values normalised at the boundary: subclasses and integer-likes answer as the plain value


class _BrokenIndex(Integer):
    def __index__(self) -> int:
        raise RuntimeError("broken")


@given(st.one_of(st.text(max_size=8), st.integers(-(2**63) + 1, 2**63 - 1)), st.data())
def test_disguised_values_equal_the_plain_value(value: str | int, data: st.DataObject) -> None:
    """A StrEnum, (str, Enum), str subclass, IntEnum, int subclass or integer-like becomes the plain
    value: equal queries, equal hashes, and the stored value has exactly the plain type."""
    disguised = data.draw(st.sampled_from(disguises(value)))
    q = KernelQuery("k", x=disguised)  # type: ignore[arg-type]
    plain = KernelQuery("k", x=value)
    assert q == plain
    assert hash(q) == hash(plain)
    assert type(q.axes["x"]) is type(value)
    assert repr(q) == repr(plain)


def test_disguised_kernel_and_model_names_become_plain() -> None:
    xqa, llama = str_enum("XQA", "xqa"), str_enum("LLAMA", "llama")
    q = KernelQuery(xqa, model=llama, sm=90)  # type: ignore[arg-type]
    assert q == KernelQuery("xqa", model="llama", sm=90)
    assert type(q.kernel) is str
    assert type(q.model) is str
    assert type(KernelQuery("k").with_kernel(xqa).kernel) is str  # type: ignore[arg-type]
    with pytest.raises(InvalidQuery, match="kernel must be a string"):
        KernelQuery("k").with_kernel(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (120.0, r"type float.*pass int\(120.0\)"),
        (float("nan"), "type float"),
        (b"gqa", "type bytes"),
        (_BrokenIndex(3), "cannot be read as an integer"),
        (Integer(2**63), "integer out of range"),
        (Number(-(2**63)), "integer out of range"),
        (2**63, "integer out of range"),
        ({"a": 1}, "type dict"),
    ],
)
def test_values_that_cannot_be_normalised_are_refused(value: object, message: str) -> None:
    with pytest.raises(InvalidQuery, match=message):
        KernelQuery("xqa", sm=value)  # type: ignore[arg-type]


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_value_whose_repr_fails_is_still_refused_cleanly() -> None:
    with pytest.raises(InvalidQuery, match="whose repr"):
        KernelQuery("xqa", sm=_BadRepr())  # type: ignore[arg-type]
