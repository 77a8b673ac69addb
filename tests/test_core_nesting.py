"""capmatrix._core.nesting: the depth bound of parsed JSON."""

from __future__ import annotations

import json

import pytest

from capmatrix._core.nesting import depth


@pytest.mark.parametrize(("text", "want"), [
    ("1", 1), ('"[[["', 1), ("null", 1), ("[]", 1), ("{}", 1), ('{"a": 1, "b": "x"}', 1),
    ('{"a": [1, {"b": []}]}', 4), ("[[], [[]], [[[]]]]", 4), ('[{"a": {"b": {"c": [0]}}}, []]', 5),
])
def test_depth_of_parsed_json(text: str, want: int) -> None:
    assert depth(json.loads(text), 64) == want


def test_a_deeper_value_stops_just_past_the_limit() -> None:
    nested: object = 0
    for _ in range(100_000):  # deeper than any recursion limit: the walk does not recurse
        nested = [nested]
    assert depth(nested, 64) == 65
    assert depth(nested, 10**6) == 100_000


def test_only_json_containers_count() -> None:
    """Tuples, sets and objects are no JSON containers (a parser never gives them)."""
    assert depth({"a": ((1,),), "b": {1, 2}}, 64) == 1
