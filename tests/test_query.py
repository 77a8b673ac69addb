"""KernelQuery is immutable, hashable, normalised and picklable."""

from __future__ import annotations

import pickle

import pytest

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
