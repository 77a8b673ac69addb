"""The compiled schema predicate agrees with jsonschema on every input, valid or not.

The loader trusts the predicate's "valid" and asks jsonschema to explain anything else, so the two must
agree exactly: on the shipped matrix, on every hostile file, on generated matrices and on mutations of
them. Errors are then identical with and without the predicate.
"""

from __future__ import annotations

import collections
import datetime as dt
import enum
from pathlib import Path
from typing import Any

import pytest
import test_fuzz
from hypothesis import given

from capmatrix.authoring import schema
from capmatrix.authoring._validate.fastschema import Unsupported, compile_schema
from capmatrix.authoring._yaml import read as _yaml
from capmatrix.authoring.loader import default_path
from capmatrix.errors import CapabilityErrors

HOSTILE = Path(__file__).parent / "hostile"


def jsonschema_valid(data: Any) -> bool:
    return not any(True for _ in schema.validator().iter_errors(data))


def documents() -> list[tuple[str, Any]]:
    """Every shipped file and every hostile file that reads as YAML, as data."""
    out = []
    for path in sorted([*default_path().rglob("*.yaml"), *HOSTILE.glob("*.yaml")]):
        try:
            data, _smap = _yaml.read(path, path.name)
        except CapabilityErrors:
            continue
        out.append((path.name, data))
    return out


DOCUMENTS = documents()


def test_the_capability_schema_compiles() -> None:
    assert schema._predicate() is not None


def test_corpus_has_valid_and_invalid_documents() -> None:
    verdicts = {jsonschema_valid(data) for _name, data in DOCUMENTS}
    assert verdicts == {True, False}


@pytest.mark.parametrize(("name", "data"), DOCUMENTS, ids=[n for n, _ in DOCUMENTS])
def test_predicate_agrees_with_jsonschema_on_the_corpus(name: str, data: Any) -> None:
    assert schema.is_valid(data) is jsonschema_valid(data), name


@pytest.mark.parametrize(("name", "data"), DOCUMENTS, ids=[n for n, _ in DOCUMENTS])
def test_shape_problems_are_identical_without_the_predicate(
    name: str, data: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    smap = _yaml.SourceMap(name)
    fast = [(str(e), p) for e, p in schema.shape_problems(data, smap)]
    monkeypatch.setattr(schema, "_predicate", lambda: None)
    slow = [(str(e), p) for e, p in schema.shape_problems(data, smap)]
    assert fast == slow


@test_fuzz.FUZZ
@given(test_fuzz.matrices())
def test_predicate_accepts_generated_matrices(files: dict[str, dict[str, Any]]) -> None:
    for data in files.values():
        assert schema.is_valid(data)
        assert jsonschema_valid(data)


@test_fuzz.FUZZ
@given(test_fuzz.matrices().flatmap(test_fuzz.data_mutations))
def test_predicate_agrees_with_jsonschema_on_mutations(files: dict[str, str | bytes]) -> None:
    for name, text in files.items():
        try:
            data, _smap = _yaml.read_text(str(text), name)
        except CapabilityErrors:
            continue
        assert schema.is_valid(data) is jsonschema_valid(data)


@pytest.mark.parametrize(
    ("spec", "instance", "valid"),
    [
        ({"type": "integer"}, 1, True),
        ({"type": "integer"}, 1.0, True),  # Draft 2020-12: an integral float is an integer
        ({"type": "integer"}, 1.5, False),
        ({"type": "integer"}, True, False),
        ({"type": "number"}, False, False),
        ({"type": ["string", "null"]}, None, True),
        ({"type": "string"}, b"x", False),
        ({"type": "string"}, dt.date(2024, 1, 1), False),
        ({"enum": ["a", "b"]}, "a", True),
        ({"enum": ["a", "b"]}, ["a"], False),
        ({"pattern": "^a$"}, "a\n", True),  # re.search, as jsonschema: '$' matches before a final newline
        ({"pattern": "^a$"}, 5, True),  # string keywords ignore other types
        ({"minLength": 2}, "é", False),
        ({"minItems": 1, "items": {"type": "integer"}}, [1, 2.0], True),
        ({"minItems": 1}, {}, True),
        ({"required": ["a"], "minProperties": 1}, {"a": 0}, True),
        ({"additionalProperties": False, "properties": {"a": True}}, {"b": 1}, False),
        ({"additionalProperties": {"type": "string"}, "properties": {"a": True}}, {"a": 1, "b": "x"}, True),
        ({"propertyNames": {"pattern": "^[a-z]+$"}}, {"A": 1}, False),
        ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 1, None),  # minimum: unsupported
        ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, 1, False),
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, "s", True),
        (False, 1, False),
    ],
)
def test_keywords_mean_what_jsonschema_means(spec: Any, instance: Any, valid: bool | None) -> None:
    import jsonschema

    if valid is None:
        with pytest.raises(Unsupported):
            compile_schema(spec)
        return
    draft = "https://json-schema.org/draft/2020-12/schema"
    full = spec if isinstance(spec, bool) else {"$schema": draft, **spec}
    assert jsonschema.Draft202012Validator(full).is_valid(instance) is valid
    assert compile_schema({"$defs": {"s": spec}, "$ref": "#/$defs/s"})(instance) is valid


def test_recursive_references_compile() -> None:
    tree = {"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"}
    check = compile_schema(tree)
    assert check([[], [[]]])
    assert not check([[], [1]])


@pytest.mark.parametrize(
    "spec", [{"$ref": "other.json#/x"}, {"$ref": "#/$defs/missing"}, {"type": "float"}, {"enum": [1]}, []]
)
def test_unsupported_forms_are_refused(spec: Any) -> None:
    with pytest.raises(Unsupported):
        compile_schema(spec)


def test_without_a_predicate_jsonschema_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema, "_predicate", lambda: None)
    assert schema.is_valid({"axes": {"sm": {"type": "int", "description": "d"}}})
    assert not schema.is_valid({"axes": {}})


class _Text(str):
    __slots__ = ()


class _Level(enum.IntEnum):
    ONE = 1


@pytest.mark.parametrize(
    "types",
    [["string", "integer", "boolean"], ["integer", "null"], ["number", "string"], ["array", "object"],
     ["boolean", "null"], ["integer", "number"]],
)
def test_a_list_of_types_means_what_jsonschema_means(types: list[str]) -> None:
    """Answered by the value's exact type where that decides, else by each type's test."""
    import jsonschema

    draft = "https://json-schema.org/draft/2020-12/schema"
    spec = {"type": types}
    valid = jsonschema.Draft202012Validator({"$schema": draft, **spec}).is_valid
    check = compile_schema({"$defs": {"s": spec}, "$ref": "#/$defs/s"})
    instances: list[Any] = [1, 0, 1.0, 1.5, True, False, "s", "", None, [], [1], {}, {"a": 1},
                            _Text("t"), _Level.ONE, collections.OrderedDict(a=1), b"x", dt.date(2024, 1, 1)]
    for instance in instances:
        assert check(instance) is valid(instance), (types, instance)
