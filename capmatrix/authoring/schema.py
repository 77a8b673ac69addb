"""The JSON Schema layer: the shape every capability file must have, and its problems located.

The first of the loader's three layers (shape, values, references). A valid file is recognised by a
predicate compiled from the schema (:mod:`capmatrix.authoring._validate.fastschema`); jsonschema,
imported on the first invalid file only, explains what is wrong. So ``import capmatrix`` stays light and a
clean load never imports jsonschema.
"""

from __future__ import annotations

import json
import os
from functools import cache

from capmatrix.authoring._validate.fastschema import Unsupported, compile_schema
from capmatrix.authoring._validate.hints import suggest
from capmatrix.errors import MAX_ECHO, echo

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    import jsonschema

    from capmatrix.authoring._yaml import read as _yaml
    from capmatrix.errors import CapabilityError

__all__ = ["is_valid", "schema", "shape_problems", "validator"]


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema (Draft 2020-12) of one capability file."""
    # os.path, not pathlib: a load the cache misses should not import pathlib for one file name
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "schema", "capabilities.schema.json"),  # noqa: PTH118, PTH120, PTH123
              encoding="utf-8") as f:
        text = f.read()
    data: dict[str, Any] = json.loads(text)
    return data


@cache
def _predicate() -> Callable[[Any], bool] | None:
    try:
        return compile_schema(schema())
    except Unsupported:  # a keyword the compiler lacks: jsonschema decides every file
        return None


def is_valid(data: Any) -> bool:  # noqa: ANN401 - plain YAML data
    """Whether ``data`` meets the schema (the compiled predicate; jsonschema where there is none)."""
    check = _predicate()
    if check is not None:
        return check(data)
    return not any(True for _ in validator().iter_errors(data))


@cache
def validator() -> jsonschema.protocols.Validator:
    """The validator of :func:`schema` (built once)."""
    import jsonschema  # noqa: PLC0415 - jsonschema loads on first validation: `import capmatrix` stays light

    cls = jsonschema.validators.validator_for(schema())
    return cls(schema())


def shape_problems(
    data: Any,  # noqa: ANN401 - plain YAML data
    smap: _yaml.SourceMap,
) -> Iterator[tuple[CapabilityError, tuple[str | int, ...]]]:
    """Yield each shape problem of one file's data with the path it makes untrustworthy."""
    if not isinstance(data, dict):
        # Not a capability file (a list, a string, perhaps a file that was never meant to be one):
        # say what it holds, never quote it.
        yield smap.error(
            (),
            f"a capability file is a mapping of sections, not {_KINDS.get(type(data), 'this value')}",
            hint="start it with one of axes:, kernels:, models:, roles: or gpus:",
            code="E103",
        ), ()
        return
    check = _predicate()
    if check is not None and check(data):
        return  # the common case: valid, and jsonschema is not needed (nor imported)
    errors = sorted(validator().iter_errors(data), key=lambda e: (list(map(str, e.absolute_path))))
    for error in errors:
        path = tuple(error.absolute_path)
        if error.validator == "oneOf" and isinstance(error.instance, dict) and "id" in error.instance:
            has_grant = "grant" in error.instance
            has_exclude = "exclude" in error.instance
            message = (
                "a rule needs exactly one of 'grant' or 'exclude'"
                if has_grant == has_exclude
                else "invalid rule"
            )
            if has_grant != has_exclude:
                # The rule has one effect but something inside it is off: report the inner error.
                from jsonschema.exceptions import best_match  # noqa: PLC0415 - jsonschema loads lazily

                inner = best_match(error.context or [])
                if inner is not None:
                    path = (*path, *inner.absolute_path)
                    message = _message(inner)
            yield smap.error(path, message, code="E100"), tuple(error.absolute_path)
            continue
        if error.validator == "oneOf" and ("grant" in path or "exclude" in path):
            hint = "YAML reads 1.10 as the float 1.1; quote it" if path in smap.floats else None
            yield smap.error(
                path,
                f"{echo(error.instance)} is not a condition: use a value, a list of values, a range "
                "string such as '>=80', or {not: ...}",
                hint=hint,
                code="E104",
            ), path
            continue
        if error.validator == "oneOf" and path[-1:] == ("guards",):
            from jsonschema.exceptions import best_match  # noqa: PLC0415 - jsonschema loads lazily

            branch = 1 if isinstance(error.instance, dict) else 0  # the form the value has a go at
            inner = best_match(e for e in error.context or [] if e.relative_schema_path[0] == branch)
            yield smap.error(
                path,
                "'guards' is a list of kernel or role names, or a mapping with 'targets' (and "
                "optionally 'when', 'axes', 'refused', 'means', 'caught_by')",
                hint=None if inner is None else _message(inner), code="E103",
            ), path
            continue
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = set(error.schema.get("properties", {})) if isinstance(error.schema, dict) else set()
            for extra in sorted(k for k in error.instance if k not in allowed):
                yield smap.error(
                    (*path, extra),
                    f"unknown key {echo(extra)}",
                    key=True,
                    hint=suggest(extra, allowed, "allowed keys"),
                    code="E101",
                ), (*path, extra)
            continue
        if error.validator == "required":
            yield smap.error(path, _message(error), code="E102"), path
            continue
        hint = None
        if path in smap.yaml11_bools:
            hint = "YAML 1.1 reads unquoted yes/no/on/off as booleans; quote the word"
        elif path in smap.floats:
            hint = "YAML reads this as a float (1.10 becomes 1.1); quote it or use an int"
        yield smap.error(path, _message(error), hint=hint, code="E103"), path


#: What a top-level value that is not a mapping is called in the message that refuses it.
_KINDS: dict[type, str] = {
    list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean",
    bytes: "binary data", type(None): "null",
}


def _message(error: jsonschema.ValidationError) -> str:
    """The validator's message with the offending value cut to :data:`~capmatrix.errors.MAX_ECHO`."""
    message: str = error.message
    shown = repr(error.instance)
    if len(shown) > MAX_ECHO + 2:
        message = message.replace(shown, echo(error.instance))
    return message

