"""The streaming JSON writer: the same text as ``json.dumps(indent=..., default=str)``, written in chunks."""

from __future__ import annotations

import io
import json
import math
from pathlib import PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capmatrix.authoring.cli import _json
from capmatrix.authoring.cli._json import write_json

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**63, max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True), st.text(),
    st.builds(PurePosixPath, st.text(alphabet="ab/é", max_size=6)),  # written as its str()
)
KEYS = st.one_of(st.text(max_size=5), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(KEYS, inner, max_size=4),
    ),
    max_leaves=30,
)


def written(data: object, indent: int = 2) -> str:
    out = io.StringIO()
    write_json(data, out, indent=indent)
    return out.getvalue()


@settings(max_examples=400)
@given(VALUES, st.sampled_from([0, 1, 2, 4]))
def test_the_text_is_json_dumps_text(data: object, indent: int) -> None:
    assert written(data, indent) == json.dumps(data, indent=indent, default=str) + "\n"


def test_iterators_are_written_as_arrays() -> None:
    data = {"kernels": (k for k in ({"a": 1}, {"b": [1, 2]})), "empty": iter(()), "roles": map(str, [1])}
    assert json.loads(written(data)) == {"kernels": [{"a": 1}, {"b": [1, 2]}], "empty": [], "roles": ["1"]}
    assert written({"k": iter([[1, "x"]])}) == json.dumps({"k": [[1, "x"]]}, indent=2) + "\n"


def test_a_large_document_is_written_in_many_chunks_with_the_same_text() -> None:
    data = {"rows": [{"name": f"r{i}", "values": list(range(i % 7)), "w": {"x": i}} for i in range(5000)]}
    writes: list[str] = []

    class Sink:
        def write(self, text: str) -> None:
            writes.append(text)

    write_json(data, Sink())  # type: ignore[arg-type]
    assert len(writes) > 10
    assert max(len(w) for w in writes) < len("".join(writes)) // 10
    assert "".join(writes) == json.dumps(data, indent=2) + "\n"


def test_special_floats_read_as_json_writes_them() -> None:
    assert written([math.nan, math.inf, -math.inf, -0.0, 1e300]) == json.dumps(
        [math.nan, math.inf, -math.inf, -0.0, 1e300], indent=2) + "\n"


def test_a_container_inside_itself_is_refused_as_json_refuses_it() -> None:
    loop: list[object] = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        written(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        json.dumps(loop, indent=2)
    shared = [1, 2]
    assert json.loads(written({"a": shared, "b": shared})) == {"a": [1, 2], "b": [1, 2]}


def test_a_key_json_cannot_write_is_refused() -> None:
    with pytest.raises(TypeError, match="keys must be"):
        written({(1, 2): 3})
    with pytest.raises(TypeError, match="keys must be"):
        json.dumps({(1, 2): 3}, indent=2)


def test_chunks_are_bounded_by_the_piece_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_json, "CHUNK", 4)
    writes: list[str] = []

    class Sink:
        def write(self, text: str) -> None:
            writes.append(text)

    data = [[{"a": i}] for i in range(50)]
    write_json(data, Sink())  # type: ignore[arg-type]
    assert len(writes) > 5
    assert "".join(writes) == json.dumps(data, indent=2) + "\n"
