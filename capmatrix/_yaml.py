"""Safe YAML reading with a side table of source positions and strict key handling."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from capmatrix.errors import CapabilityError

__all__ = ["MAX_FILE_BYTES", "MAX_NODES", "SourceMap", "read", "read_text"]

#: Files above this size are refused before parsing (a capability file is a few kB).
MAX_FILE_BYTES = 2 * 1024 * 1024
#: Bound on the nodes one document may expand to; stops alias bombs ("billion laughs").
MAX_NODES = 200_000

JsonPath = tuple[str | int, ...]

# Plain scalars that YAML 1.1 turns into booleans although an author meant a word.
_YAML11_BOOL_WORDS = frozenset(
    {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"}
)


@dataclass(frozen=True, slots=True)
class SourceMap:
    """Positions (1-based line, column) of every value and mapping key of one document."""

    path: str
    values: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    #: Paths whose plain scalar YAML 1.1 read as a boolean from a word such as ``no``/``on``.
    yaml11_bools: frozenset[JsonPath] = frozenset()
    #: Paths whose plain scalar was read as a float (``1.10`` silently becomes ``1.1``).
    floats: frozenset[JsonPath] = frozenset()
    #: Problems that did not stop the parse (duplicate keys, unsafe tags); reported with the rest.
    problems: tuple[CapabilityError, ...] = ()

    def locate(self, path: JsonPath, *, key: bool = False) -> tuple[int | None, int | None]:
        """Return the position of ``path``, walking up to the nearest ancestor that has one."""
        table = self.keys if key else self.values
        probe = tuple(path)
        if key and probe in table:
            return table[probe]
        while True:
            if probe in self.values:
                return self.values[probe]
            if not probe:
                return (None, None)
            probe = probe[:-1]

    def error(
        self,
        path: JsonPath,
        message: str,
        *,
        key: bool = False,
        hint: str | None = None,
        code: str = "E000",
    ) -> CapabilityError:
        """Build a located error for ``path``."""
        line, column = self.locate(path, key=key)
        return CapabilityError(
            self.path, line, column, format_path(path), message, hint=hint, code=code
        )


def format_path(path: JsonPath) -> str:
    """Render a path tuple as ``kernels.xqa.rules[3].grant.sm``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


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
        self.count = 0

    def _pos(self, node: yaml.Node) -> tuple[int, int]:
        return (node.start_mark.line + 1, node.start_mark.column + 1)

    def _fail(self, node: yaml.Node, path: JsonPath, message: str, hint: str | None = None) -> None:
        line, col = self._pos(node)
        self.errors.append(
            CapabilityError(self.path, line, col, format_path(path), message, hint=hint, code="E002")
        )

    def build(self, node: yaml.Node, path: JsonPath) -> Any:  # noqa: ANN401 - plain YAML data
        self.count += 1
        if self.count > MAX_NODES:
            msg = f"document expands to more than {MAX_NODES} nodes (alias bomb?)"
            raise _TooLargeError(msg, node)
        self.values[path] = self._pos(node)
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
                self._fail(key_node, path, "merge keys ('<<') are not supported; write the keys out")
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._fail(key_node, path, "mapping keys must be plain strings")
                continue
            key = str(self._scalar(key_node, (*path, "<key>")))
            if key in seen:
                first = seen[key].start_mark.line + 1
                self._fail(
                    key_node,
                    (*path, key),
                    f"duplicate key {key!r} (first defined on line {first})",
                    hint="YAML would silently keep only the last one; remove or rename one",
                )
                continue
            seen[key] = key_node
            key_path = (*path, key)
            self.keys[key_path] = self._pos(key_node)
            out[key] = self.build(value_node, (*path, key))
        return out

    def _scalar(self, node: yaml.Node, path: JsonPath) -> Any:  # noqa: ANN401 - plain YAML data
        try:
            value = self.constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            self._fail(
                node,
                path,
                f"cannot read this value: {exc.problem}",
                hint="only plain YAML is accepted (no !!python tags)",
            )
            return None
        if isinstance(node, yaml.ScalarNode) and node.style is None:
            if isinstance(value, bool) and node.value in _YAML11_BOOL_WORDS:
                self.yaml11.add(path)
            elif isinstance(value, float):
                self.floats.add(path)
        return value


class _TooLargeError(Exception):
    def __init__(self, message: str, node: yaml.Node) -> None:
        super().__init__(message)
        self.message = message
        self.node = node


def read_text(text: str, path: str) -> tuple[Any, SourceMap]:
    """Parse one YAML document from ``text``; raise :class:`CapabilityError` group members.

    :raises capmatrix.CapabilityErrors: on any syntax or structure problem (all of them).
    """
    from capmatrix.errors import CapabilityErrors  # noqa: PLC0415 - avoid a cycle in docs

    if "\t" in text:
        line_no = text[: text.index("\t")].count("\n") + 1
        tab_col = text.index("\t") - (text.rfind("\n", 0, text.index("\t")) + 1) + 1
        lines = text.splitlines()
        if lines and lines[line_no - 1][: tab_col - 1].strip() == "":
            raise CapabilityErrors(
                [
                    CapabilityError(
                        path, line_no, tab_col, "", "tab used for indentation",
                        hint="YAML indents with spaces only", code="E001",
                    )
                ]
            )
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line: int | None = mark.line + 1 if mark else None
        col: int | None = mark.column + 1 if mark else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise CapabilityErrors(
            [CapabilityError(path, line, col, "", f"YAML syntax error: {problem}", code="E001")]
        ) from None
    except yaml.YAMLError as exc:
        raise CapabilityErrors(
            [CapabilityError(path, None, None, "", f"YAML error: {exc}", code="E001")]
        ) from None
    if node is None:
        raise CapabilityErrors(
            [
                CapabilityError(
                    path, 1, 1, "", "empty file",
                    hint="add an axes, kernels, models or roles section, or delete the file",
                    code="E001",
                )
            ]
        )
    builder = _Builder(path)
    try:
        data = builder.build(node, ())
    except _TooLargeError as exc:
        mark = exc.node.start_mark
        raise CapabilityErrors(
            [CapabilityError(path, mark.line + 1, mark.column + 1, "", exc.message, code="E001")]
        ) from None
    return data, SourceMap(
        path,
        builder.values,
        builder.keys,
        frozenset(builder.yaml11),
        frozenset(builder.floats),
        tuple(builder.errors),
    )


def read(path: Path, display: str | None = None) -> tuple[Any, SourceMap]:
    """Read and parse one YAML file (size-limited, UTF-8 only).

    :raises capmatrix.CapabilityErrors: on unreadable, oversized, non-UTF-8 or malformed files.
    """
    from capmatrix.errors import CapabilityErrors  # noqa: PLC0415

    name = display or str(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            msg = f"file is {size} bytes, above the limit of {MAX_FILE_BYTES} bytes"
            raise CapabilityErrors(
                [CapabilityError(name, None, None, "", msg, hint="split it", code="E001")]
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise CapabilityErrors(
            [CapabilityError(name, None, None, "", f"cannot read file: {exc.strerror}", code="E001")]
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise CapabilityErrors(
            [
                CapabilityError(
                    name, line, col, "", f"not UTF-8 (byte 0x{raw[exc.start]:02x})",
                    hint="save the file as UTF-8", code="E001",
                )
            ]
        ) from None
    return read_text(text, name)
