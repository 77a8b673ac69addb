"""A JSON Schema compiled to one Python predicate: is this document valid, yes or no.

The loader asks this first; only when the answer is no does jsonschema walk the document to say why
(with the same errors, codes and positions as before). The compiler knows the keywords the capability
schema uses, with Draft 2020-12's meaning as jsonschema implements it (``integer`` admits ``1.0`` but
not ``True``; ``pattern`` searches; a keyword ignores instances of other types; ``$ref`` applies beside
its siblings). A schema with any other keyword is refused (:class:`Unsupported`), and the caller then
asks jsonschema alone: a predicate exists only where it can agree with jsonschema everywhere.
"""

from __future__ import annotations

import re

from capmatrix.errors import CapmatrixError

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Check = Callable[[Any], bool]

__all__ = ["Unsupported", "compile_schema"]

#: Keywords that only annotate (they never make an instance invalid).
_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "$defs", "examples"})
_KEYWORDS = frozenset(
    {
        "$ref", "type", "enum", "pattern", "minLength", "minItems", "items", "minProperties",
        "required", "properties", "additionalProperties", "propertyNames", "oneOf",
    }
)


class Unsupported(CapmatrixError, ValueError):
    """The schema uses a keyword (or a form of one) this compiler does not implement."""


def _is_integer(x: Any) -> bool:  # noqa: ANN401 - any YAML value
    if isinstance(x, bool):
        return False
    return isinstance(x, int) or (isinstance(x, float) and x.is_integer())


def _is_number(x: Any) -> bool:  # noqa: ANN401
    return isinstance(x, (int, float)) and not isinstance(x, bool)


_TYPES: dict[str, Check] = {
    "string": lambda x: isinstance(x, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda x: isinstance(x, bool),
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "null": lambda x: x is None,
}


#: One value of each type whose answer to every type test depends on the type alone.
_SAMPLES: dict[type, Any] = {str: "", int: 0, bool: False, dict: {}, list: [], type(None): None}


def _always(_x: Any) -> bool:  # noqa: ANN401
    return True


def _never(_x: Any) -> bool:  # noqa: ANN401
    return False


def compile_schema(schema: Mapping[str, Any]) -> Check:
    """Compile ``schema`` (local ``$ref``s into ``#/$defs/...`` only) into ``valid(instance) -> bool``.

    :raises Unsupported: for a keyword or reference the compiler does not implement.
    """
    return _Compiler(schema).compile(schema)


class _Compiler:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, target: str) -> Check:
        found = self.refs.get(target)
        if found is not None:
            return found
        prefix = "#/$defs/"
        defs = self.root.get("$defs", {})
        name = target[len(prefix):]
        if not target.startswith(prefix) or "/" in name or name not in defs:
            msg = f"reference {target!r}"
            raise Unsupported(msg)
        slot: list[Check] = []
        # Placeholder first, so a recursive reference compiles (it calls through the slot).

        def forward(x: Any) -> bool:  # noqa: ANN401
            return slot[0](x)

        self.refs[target] = forward
        compiled = self.compile(defs[name])
        slot.append(compiled)
        self.refs[target] = compiled
        return compiled

    def compile(self, schema: Any) -> Check:  # noqa: ANN401 - a schema is a bool or a mapping
        if schema is True:
            return _always
        if schema is False:
            return _never
        if not isinstance(schema, dict):
            msg = f"schema {schema!r}"
            raise Unsupported(msg)
        unknown = set(schema) - _KEYWORDS - _ANNOTATIONS
        if unknown:
            msg = f"keywords {sorted(unknown)}"
            raise Unsupported(msg)
        checks: list[Check] = []
        if "$ref" in schema:
            checks.append(self.ref(schema["$ref"]))
        if "type" in schema:
            checks.append(self._type(schema["type"]))
        if "enum" in schema:
            checks.append(self._enum(schema["enum"]))
        string = self._string(schema)
        if string is not None:
            checks.append(string)
        array = self._array(schema)
        if array is not None:
            checks.append(array)
        obj = self._object(schema)
        if obj is not None:
            checks.append(obj)
        if "oneOf" in schema:
            checks.append(self._one_of(schema["oneOf"]))
        return _all(checks)

    def _type(self, spec: Any) -> Check:  # noqa: ANN401
        names = [spec] if isinstance(spec, str) else spec
        if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
            msg = f"type {spec!r}"
            raise Unsupported(msg)
        if len(names) == 1:
            return _TYPES[names[0]]
        tests = tuple(_TYPES[n] for n in names)
        # The answer for a value of each plain YAML type, by its exact type (a float depends on its
        # value, a subclass on its bases: those are asked of the tests).
        known = {kind: any(t(sample) for t in tests) for kind, sample in _SAMPLES.items()}

        def check(x: Any) -> bool:  # noqa: ANN401
            found = known.get(type(x))
            if found is not None:
                return found
            return any(t(x) for t in tests)

        return check

    def _enum(self, values: Any) -> Check:  # noqa: ANN401
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            msg = f"enum {values!r} (only strings)"
            raise Unsupported(msg)
        allowed = frozenset(values)
        # jsonschema compares a string with a string by ==; any other instance differs from each.
        return lambda x: isinstance(x, str) and x in allowed

    def _string(self, schema: Mapping[str, Any]) -> Check | None:
        if "pattern" not in schema and "minLength" not in schema:
            return None
        search = re.compile(schema["pattern"]).search if "pattern" in schema else None
        min_length = schema.get("minLength", 0)

        def check(x: Any) -> bool:  # noqa: ANN401
            if not isinstance(x, str):
                return True
            return len(x) >= min_length and (search is None or search(x) is not None)

        return check

    def _array(self, schema: Mapping[str, Any]) -> Check | None:
        if "items" not in schema and "minItems" not in schema:
            return None
        min_items = schema.get("minItems", 0)
        item = self.compile(schema["items"]) if "items" in schema else None

        def check(x: Any) -> bool:  # noqa: ANN401
            if not isinstance(x, list):
                return True
            if len(x) < min_items:
                return False
            if item is not None:
                for value in x:
                    if not item(value):
                        return False
            return True

        return check

    def _object(self, schema: Mapping[str, Any]) -> Check | None:
        keys = ("minProperties", "required", "properties", "additionalProperties", "propertyNames")
        if not any(k in schema for k in keys):
            return None
        min_props = schema.get("minProperties", 0)
        required = tuple(schema.get("required", ()))
        props = {k: self.compile(v) for k, v in schema.get("properties", {}).items()}
        extra_spec = schema.get("additionalProperties", True)
        no_extra = extra_spec is False
        extra = None if extra_spec is True or no_extra else self.compile(extra_spec)
        names = self.compile(schema["propertyNames"]) if "propertyNames" in schema else None

        def check(x: Any) -> bool:  # noqa: ANN401
            if not isinstance(x, dict):
                return True
            if len(x) < min_props:
                return False
            for key in required:
                if key not in x:
                    return False
            for key, value in x.items():
                if names is not None and not names(key):
                    return False
                sub = props.get(key)
                if sub is not None:
                    if not sub(value):
                        return False
                elif no_extra or (extra is not None and not extra(value)):
                    return False
            return True

        return check

    def _one_of(self, subs: Any) -> Check:  # noqa: ANN401
        if not isinstance(subs, list) or not subs:
            msg = f"oneOf {subs!r}"
            raise Unsupported(msg)
        tests = tuple(self.compile(s) for s in subs)

        def check(x: Any) -> bool:  # noqa: ANN401
            hits = 0
            for test in tests:
                if test(x):
                    hits += 1
                    if hits > 1:
                        return False
            return hits == 1

        return check


def _all(checks: list[Check]) -> Check:
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    tests = tuple(checks)

    def check(x: Any) -> bool:  # noqa: ANN401
        for test in tests:  # noqa: SIM110 - a loop is faster than all() over a generator
            if not test(x):
                return False
        return True

    return check
