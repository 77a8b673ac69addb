"""The full reader's second half: a composed node graph to plain data, with positions and checks."""

from __future__ import annotations

import re

import yaml

from capmatrix.authoring._yaml.limits import (
    _CONTROL,
    _DECIMAL,
    _STR_TAG,
    _YAML11_BOOL_WORDS,
    MAX_INT_BITS,
    MAX_NODES,
    MAX_TEXT_CHARS,
)
from capmatrix.authoring._yaml.source import JsonPath, format_path, printable
from capmatrix.errors import CapabilityError, echo

TYPE_CHECKING = False  # not typing's: imported for annotations only
if TYPE_CHECKING:
    from typing import Any

__all__: list[str] = []

#: Stands for "the key itself" at the end of a path while a key is read.
_KEY = "<key>"
#: Tags a mapping or a sequence may carry; any other (``!!python/...``, ``!!set``, ...) is refused.
_COLLECTION_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})


class _Builder:
    """Turns a composed node graph into plain data while recording positions."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.constructor = yaml.constructor.SafeConstructor()
        self.values: dict[JsonPath, tuple[int, int]] = {}
        self.keys: dict[JsonPath, tuple[int, int]] = {}
        self.yaml11: set[JsonPath] = set()
        self.floats: set[JsonPath] = set()
        self.errors: list[CapabilityError] = []
        self.rejected: set[JsonPath] = set()
        self.count = 0
        self.chars = 0

    def _pos(self, node: yaml.Node) -> tuple[int, int]:
        return (node.start_mark.line + 1, node.start_mark.column + 1)

    def _fail(self, node: yaml.Node, path: JsonPath, message: str, hint: str | None = None) -> None:
        line, col = self._pos(node)
        if path and path[-1] == _KEY:  # a refused key: name the mapping it is in
            path = path[:-1]
            message = f"key: {message}"
        self.errors.append(
            CapabilityError(self.path, line, col, format_path(path), message, hint=hint, code="E002")
        )

    def _reject(self, node: yaml.Node, path: JsonPath, message: str, hint: str | None = None) -> None:
        """Report a value (or key) that is dropped; schema errors at ``path`` then are not reported."""
        self._fail(node, path, message, hint)
        self.rejected.add(path)

    def build(self, node: yaml.Node, path: JsonPath) -> Any:  # noqa: ANN401 - plain YAML data
        self.count += 1
        if self.count > MAX_NODES:
            msg = f"document expands to more than {MAX_NODES} nodes (alias bomb?)"
            raise _TooLargeError(msg, node, path)
        self.values[path] = self._pos(node)
        if not isinstance(node, yaml.ScalarNode) and node.tag not in _COLLECTION_TAGS:
            self._reject(
                node, path, f"tag {echo(node.tag)} is not allowed",
                hint="only plain YAML is accepted (no !!python or other tags)",
            )
            return None
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self._scalar(node, path)

    def _mapping(self, node: yaml.MappingNode, path: JsonPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        seen: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._reject(key_node, path, "merge keys ('<<') are not supported; write the keys out")
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._reject(key_node, path, "mapping keys must be plain strings")
                continue
            problems = len(self.errors)
            key = str(self._scalar(key_node, (*path, _KEY)))
            if len(self.errors) > problems:  # the key itself was refused; its entry is dropped
                self.rejected.add(path)
                self.build(value_node, (*path, str(key_node.value)))  # still report what is inside
                continue
            if key in seen:
                first = seen[key].start_mark.line + 1
                self._fail(
                    key_node,
                    (*path, key),
                    f"duplicate key {echo(key)} (first defined on line {first})",
                    hint="YAML would silently keep only the last one; remove or rename one",
                )
                continue
            seen[key] = key_node
            key_path = (*path, key)
            self.keys[key_path] = self._pos(key_node)
            out[key] = self.build(value_node, (*path, key))
        return out

    def _text(self, value: str, node: yaml.Node, path: JsonPath) -> Any:  # noqa: ANN401 - plain YAML data
        """A text value, counted against the document's text budget and refused with control characters."""
        self.chars += len(value)
        if self.chars > MAX_TEXT_CHARS:
            msg = f"document expands to more than {MAX_TEXT_CHARS} characters of text (alias bomb?)"
            raise _TooLargeError(msg, node, path)
        bad = _CONTROL.search(value)
        if bad is not None:
            return self._control(node, path, bad)
        return value

    def _scalar(self, node: yaml.Node, path: JsonPath) -> Any:  # noqa: ANN401 - plain YAML data
        if node.tag == _STR_TAG and isinstance(node, yaml.ScalarNode):
            # What SafeConstructor makes of a str scalar, without its bookkeeping (the common case).
            return self._text(node.value, node, path)
        try:
            value = self.constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            self._reject(
                node,
                path,
                f"cannot read this value: {exc.problem}",
                hint="only plain YAML is accepted (no !!python tags)",
            )
            return None
        except ValueError:  # e.g. an integer literal above Python's int_max_str_digits
            self._reject(node, path, "cannot read this value: number too long")
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
            self._reject(node, path, f"integer out of range (more than {MAX_INT_BITS} bits)")
            return None
        if (
            isinstance(value, int) and not isinstance(value, bool)
            and not _DECIMAL.match(str(node.value))
        ):
            # YAML 1.1 reads 0x5a, 0o17, 017 (octal), 0b101, 9_0 and 1:30 (sexagesimal: 90) as
            # integers; an author almost never means that, and the value would be read silently.
            self._reject(
                node, path,
                f"{printable(repr(str(node.value)))} is a YAML 1.1 integer form (read as {value})",
                hint=f"write the decimal number ({value}), or quote it if text is meant",
            )
            return None
        if isinstance(value, str):
            return self._text(value, node, path)
        if isinstance(node, yaml.ScalarNode) and node.style is None:
            if isinstance(value, bool) and node.value in _YAML11_BOOL_WORDS:
                self.yaml11.add(path)
            elif isinstance(value, float):
                self.floats.add(path)
        return value


    def _control(self, node: yaml.Node, path: JsonPath, bad: re.Match[str]) -> None:
        # Double-quoted escapes ("\e", "\a", ...) can smuggle terminal control sequences into
        # names and messages; text fields only need newlines and tabs.
        self._reject(
            node, path, f"control character U+{ord(bad.group()):04X} in a string",
            hint="remove it (escapes such as \\e or \\a are not text)",
        )


class _TooLargeError(Exception):
    def __init__(self, message: str, node: yaml.Node, path: JsonPath) -> None:
        super().__init__(message)
        self.message = message
        self.node = node
        self.path = path
