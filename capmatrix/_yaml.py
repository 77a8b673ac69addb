"""Safe YAML reading with a side table of source positions and strict key handling."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from capmatrix.errors import MAX_ECHO, CapabilityError, CapabilityErrors, echo

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_INT_BITS",
    "MAX_NODES",
    "MAX_TEXT_CHARS",
    "SourceMap",
    "format_path",
    "printable",
    "read",
    "read_text",
]

#: Files above this size are refused before parsing (a capability file is a few kB).
MAX_FILE_BYTES = 2 * 1024 * 1024
#: Bound on the nodes one document may hold or expand to (a shipped file has under 500); it bounds
#: parse time and memory and stops alias bombs ("billion laughs").
MAX_NODES = 50_000
#: Bound on the characters of text (keys and strings) one document may expand to. A document without
#: aliases stays below its byte size; aliases of a long string would otherwise multiply it, and every
#: error message that quotes it, without bound.
MAX_TEXT_CHARS = MAX_FILE_BYTES
#: Deepest nesting of mappings and sequences (a rule's condition list sits at depth 7).
MAX_DEPTH = 32
#: Integers must fit in a signed 64-bit word (larger ones are typos or attacks on ``str(int)``).
MAX_INT_BITS = 63
#: Stands for "the key itself" at the end of a path while a key is read.
_KEY = "<key>"
#: Keys printed as they are in a JSON path; any other is quoted (``kernels['a.b']``).
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")
#: C0 and C1 control characters other than tab and newline (never text in a capability file).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Line breaks YAML honours although many editors do not: NEL, U+2028, U+2029 and a lone CR.
_ODD_LINE_BREAK = re.compile("[\x85\u2028\u2029]|\r(?!\n)")
#: Tags a mapping or a sequence may carry; any other (``!!python/...``, ``!!set``, ...) is refused.
_COLLECTION_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})

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
    #: Paths whose value the reader refused and replaced with None (a tag, an overlong number, a
    #: control character), or whose mapping lost a refused key; schema errors there are not repeated.
    rejected: frozenset[JsonPath] = frozenset()

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
    """Render a path tuple as ``kernels.xqa.rules[3].grant.sm`` (odd keys as ``kernels['a.b']``)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif len(part) > MAX_ECHO:  # a key of any length is shown cut, like every echoed value
            out += f"[{echo(part)}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{printable(repr(part))}]"
    return out


def printable(text: str) -> str:
    """``text`` with control and other unprintable characters escaped (safe to print to a terminal)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


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

    def _scalar(self, node: yaml.Node, path: JsonPath) -> Any:  # noqa: ANN401 - plain YAML data
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
        if isinstance(value, str):
            self.chars += len(value)
            if self.chars > MAX_TEXT_CHARS:
                msg = f"document expands to more than {MAX_TEXT_CHARS} characters of text (alias bomb?)"
                raise _TooLargeError(msg, node, path)
            bad = _CONTROL.search(value)
            if bad is not None:
                # Double-quoted escapes ("\e", "\a", ...) can smuggle terminal control sequences into
                # names and messages; text fields only need newlines and tabs.
                self._reject(
                    node, path, f"control character U+{ord(bad.group()):04X} in a string",
                    hint="remove it (escapes such as \\e or \\a are not text)",
                )
                return None
        if isinstance(node, yaml.ScalarNode) and node.style is None:
            if isinstance(value, bool) and node.value in _YAML11_BOOL_WORDS:
                self.yaml11.add(path)
            elif isinstance(value, float):
                self.floats.add(path)
        return value


class _TooLargeError(Exception):
    def __init__(self, message: str, node: yaml.Node, path: JsonPath) -> None:
        super().__init__(message)
        self.message = message
        self.node = node
        self.path = path


class _LimitError(Exception):
    """The composer met more nodes or deeper nesting than the limits allow."""

    def __init__(self, message: str, mark: yaml.Mark, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark
        self.hint = hint


class _Loader(yaml.SafeLoader):
    """A SafeLoader whose composer counts nodes and nesting, so hostile input fails early.

    The count bounds time and memory before any alias is expanded; the depth bound keeps the
    recursive composer (and everything after it) far from Python's recursion limit.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._nodes += 1
        if self._nodes > MAX_NODES:
            msg = f"document has more than {MAX_NODES} nodes"
            raise _LimitError(msg, self._mark(), "split the file")
        if self._depth >= MAX_DEPTH:
            msg = f"nesting deeper than {MAX_DEPTH} levels"
            raise _LimitError(msg, self._mark(), "capability files nest about 7 levels deep")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _mark(self) -> yaml.Mark:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        mark: yaml.Mark = event.start_mark
        return mark


def _compose(text: str) -> yaml.Node | None:
    loader = _Loader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def _code_point(character: int | str | bytes) -> int:
    if isinstance(character, int):
        return character
    return ord(character[:1] or "\0")


def _text_position(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of character ``index`` of ``text``."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def read_text(text: str, path: str) -> tuple[Any, SourceMap]:
    """Parse one YAML document from ``text``; raise :class:`CapabilityError` group members.

    :raises capmatrix.CapabilityErrors: on any syntax or structure problem (all of them).
    """
    tab = text.find("\t")
    if tab >= 0 and text[text.rfind("\n", 0, tab) + 1 : tab].strip(" ") == "":
        line_no, tab_col = _text_position(text, tab)
        raise CapabilityErrors(
            [
                CapabilityError(
                    path, line_no, tab_col, "", "tab used for indentation",
                    hint="YAML indents with spaces only", code="E001",
                )
            ]
        )
    # YAML also breaks lines at NEL, U+2028, U+2029 and a lone CR; with them, reported positions
    # would disagree with what the author's editor shows, so such files are refused.
    odd = _ODD_LINE_BREAK.search(text)
    if odd is not None:
        odd_break = odd.start()
        line_no, break_col = _text_position(text, odd_break)
        raise CapabilityErrors(
            [
                CapabilityError(
                    path, line_no, break_col, "",
                    f"line break U+{ord(text[odd_break]):04X} is not allowed",
                    hint="end lines with \\n (or \\r\\n)", code="E001",
                )
            ]
        )
    try:
        node = _compose(text)
    except _LimitError as exc:
        limit_line, limit_col = exc.mark.line + 1, exc.mark.column + 1
        raise CapabilityErrors(
            [CapabilityError(path, limit_line, limit_col, "", exc.message, hint=exc.hint, code="E001")]
        ) from None
    except yaml.reader.ReaderError as exc:
        char_line, char_col = _text_position(text, exc.position)
        raise CapabilityErrors(
            [
                CapabilityError(
                    path, char_line, char_col, "",
                    f"character U+{_code_point(exc.character):04X} is not allowed in YAML",
                    hint="remove control characters", code="E001",
                )
            ]
        ) from None
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
            [
                CapabilityError(
                    path, mark.line + 1, mark.column + 1, format_path(exc.path), exc.message,
                    hint="each alias (*name) copies its anchor's whole value", code="E001",
                )
            ]
        ) from None
    return data, SourceMap(
        path,
        builder.values,
        builder.keys,
        frozenset(builder.yaml11),
        frozenset(builder.floats),
        tuple(builder.errors),
        frozenset(builder.rejected),
    )


def read(path: Path, display: str | None = None) -> tuple[Any, SourceMap]:
    """Read and parse one YAML file (size-limited, UTF-8 only).

    :raises capmatrix.CapabilityErrors: on unreadable, oversized, non-UTF-8 or malformed files.
    """
    name = display or str(path)

    def fail(message: str, hint: str | None = None) -> CapabilityErrors:
        return CapabilityErrors([CapabilityError(name, None, None, "", message, hint=hint, code="E001")])

    try:
        # O_NONBLOCK: opening a FIFO must not hang; fstat then refuses anything but a regular file.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise fail("not a regular file", hint="capability files are plain YAML files")
            if info.st_size > MAX_FILE_BYTES:
                msg = f"file is {info.st_size} bytes, above the limit of {MAX_FILE_BYTES} bytes"
                raise fail(msg, hint="split it")
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise fail(f"cannot read file: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:  # it grew after fstat
        raise fail(f"file is above the limit of {MAX_FILE_BYTES} bytes", hint="split it")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        line_start = before.rfind(b"\n") + 1
        col = len(raw[line_start : exc.start].decode("utf-8", "replace")) + 1
        raise CapabilityErrors(
            [
                CapabilityError(
                    name, line, col, "", f"not UTF-8 (byte 0x{raw[exc.start]:02x})",
                    hint="save the file as UTF-8", code="E001",
                )
            ]
        ) from None
    return read_text(text, name)
