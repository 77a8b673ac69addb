"""Safe YAML reading with a side table of source positions and strict key handling."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from capmatrix._files import MAX_FILE_BYTES, read_bytes
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
    "read_raw",
    "read_text",
]

#: Bound on the nodes one document may hold or expand to (a shipped file has under 500); it bounds
#: parse time and memory and stops alias bombs ("billion laughs").
MAX_NODES = 50_000
#: Bound on the characters of text (keys and strings) one document may expand to. A document without
#: aliases stays below its byte size; aliases of a long string would otherwise multiply it, and every
#: error message that quotes it, without bound.
MAX_TEXT_CHARS = MAX_FILE_BYTES
#: Deepest nesting of mappings and sequences (a rule's condition list sits at depth 7).
MAX_DEPTH = 32
#: The deepest path whose position an outline read keeps (``kernels.K.rules[i]``, ``roles.R.orders[k]``).
OUTLINE_DEPTH = 4
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

_STR_TAG = "tag:yaml.org,2002:str"



def _libyaml_parser() -> Any:  # noqa: ANN401 - a C extension type
    """Libyaml's C parser (the same events and marks, parsed many times faster), if PyYAML has it."""
    try:
        from yaml._yaml import CParser  # noqa: PLC0415 - absent when PyYAML was built without libyaml
    except ImportError:
        return None
    return CParser


#: None without libyaml: the pure-Python parser alone.
_CParser: Any = _libyaml_parser()
#: The one spelling of an integer a capability file may use: ASCII decimal digits, an optional sign.
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")

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
        if node.tag == _STR_TAG and isinstance(node, yaml.ScalarNode):
            # What SafeConstructor makes of a str scalar, without its bookkeeping (the common case).
            value = node.value
            self.chars += len(value)
            if self.chars > MAX_TEXT_CHARS:
                msg = f"document expands to more than {MAX_TEXT_CHARS} characters of text (alias bomb?)"
                raise _TooLargeError(msg, node, path)
            bad = _CONTROL.search(value)
            if bad is not None:
                return self._control(node, path, bad)
            return value
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
            self.chars += len(value)
            if self.chars > MAX_TEXT_CHARS:
                msg = f"document expands to more than {MAX_TEXT_CHARS} characters of text (alias bomb?)"
                raise _TooLargeError(msg, node, path)
            bad = _CONTROL.search(value)
            if bad is not None:
                return self._control(node, path, bad)
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


class _LimitError(Exception):
    """The composer met more nodes or deeper nesting than the limits allow."""

    def __init__(self, message: str, mark: yaml.Mark, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark
        self.hint = hint


#: Tags of plain scalars already resolved (value -> tag); bounded, it only skips repeated regex work.
_PLAIN_TAGS: dict[str, str] = {}
_PLAIN_TAGS_MAX = 4096


def _resolve_scalar(value: str, implicit: tuple[bool, bool]) -> str:
    """The tag PyYAML's safe resolver gives an untagged scalar (the loaders add no path resolvers)."""
    if not implicit[0]:  # quoted or block: a string
        return _STR_TAG
    tag = _PLAIN_TAGS.get(value)
    if tag is not None:
        return tag
    tag = _STR_TAG
    table = yaml.resolver.Resolver.yaml_implicit_resolvers
    for candidate, regexp in (*table.get(value[:1], ()), *table.get(None, ())):
        if regexp.match(value):
            tag = candidate
            break
    if len(_PLAIN_TAGS) < _PLAIN_TAGS_MAX:
        _PLAIN_TAGS[value] = tag
    return tag


class _Limits(yaml.composer.Composer):
    """A composer that counts nodes and nesting, so hostile input fails early.

    The count bounds time and memory before any alias is expanded; the depth bound keeps the
    recursive composer (and everything after it) far from Python's (and the C stack's) limits. Mixed
    into both event sources: libyaml's C parser and PyYAML's pure-Python one.
    """

    def _start_limits(self) -> None:
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:  # noqa: ARG002
        # PyYAML's Composer.compose_node, with the limits, without the path-resolver hooks (the
        # loaders have no path resolvers) and with one look at the next event instead of four.
        self._nodes += 1
        if self._nodes > MAX_NODES:
            msg = f"document has more than {MAX_NODES} nodes"
            raise _LimitError(msg, self._mark(), "split the file")
        if self._depth >= MAX_DEPTH:
            msg = f"nesting deeper than {MAX_DEPTH} levels"
            raise _LimitError(msg, self._mark(), "capability files nest about 7 levels deep")
        event: Any = self.peek_event()  # type: ignore[attr-defined]
        anchor = event.anchor
        if isinstance(event, yaml.AliasEvent):
            self.get_event()  # type: ignore[attr-defined]
            if anchor not in self.anchors:
                msg = f"found undefined alias {anchor!r}"
                where: Any = event.start_mark
                raise yaml.composer.ComposerError(None, None, msg, where)
            return self.anchors[anchor]
        if anchor is not None and anchor in self.anchors:
            first: Any = self.anchors[anchor].start_mark
            raise yaml.composer.ComposerError(
                f"found duplicate anchor {anchor!r}; first occurrence", first, "second occurrence",
                event.start_mark,
            )
        self._depth += 1
        try:
            if isinstance(event, yaml.ScalarEvent):
                return self.compose_scalar_node(anchor)
            if isinstance(event, yaml.SequenceStartEvent):
                return self.compose_sequence_node(anchor)
            return self.compose_mapping_node(anchor)
        finally:
            self._depth -= 1

    def compose_scalar_node(self, anchor: Any) -> yaml.ScalarNode:  # noqa: ANN401 - as PyYAML's
        event = self.get_event()  # type: ignore[attr-defined]
        tag = event.tag
        if tag is None or tag == "!":
            tag = _resolve_scalar(event.value, event.implicit)
        # libyaml marks a plain scalar with style '' where PyYAML uses None: one form for both.
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style or None)
        if anchor is not None:
            self.anchors[anchor] = node
        return node

    def _mark(self) -> yaml.Mark:
        event = self.peek_event()  # type: ignore[attr-defined]
        mark: yaml.Mark = event.start_mark
        return mark


class _Loader(_Limits, yaml.SafeLoader):
    """PyYAML's pure-Python parser (the reference, and the fallback without libyaml)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._start_limits()


if _CParser is not None:

    class _CLoader(_Limits, _CParser, yaml.resolver.Resolver):  # type: ignore[misc]
        """libyaml's C parser under the same composer and limits."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self._start_limits()


def _compose(text: str, *, fast: bool = True) -> yaml.Node | None:
    loader: _Limits = _CLoader(text) if fast and _CParser is not None else _Loader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()  # type: ignore[attr-defined]


#: Tags the fast reader constructs itself; any other sends the document to the full reader.
_SIMPLE_TAGS = frozenset(
    {_STR_TAG, "tag:yaml.org,2002:int", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:float",
     "tag:yaml.org,2002:null"}
)
#: Values of non-string plain scalars already constructed ((tag, text) -> value; all immutable).
_CONSTRUCTED: dict[tuple[str, str], Any] = {}
_FALLBACK = object()


def _construct(tag: str, event: Any) -> Any:  # noqa: ANN401 - a libyaml event; plain YAML data
    """The value SafeConstructor makes of a simple non-string scalar, or ``_FALLBACK``."""
    key = (tag, event.value)
    value = _CONSTRUCTED.get(key, _FALLBACK)
    if value is not _FALLBACK:
        return value
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style or None)
    try:
        value = yaml.constructor.SafeConstructor().construct_object(node, deep=True)
    except (yaml.constructor.ConstructorError, ValueError):
        return _FALLBACK
    if isinstance(value, int) and not isinstance(value, bool) and (
        value.bit_length() > MAX_INT_BITS or not _DECIMAL.match(event.value)
    ):
        return _FALLBACK  # the full reader refuses it, located
    if len(_CONSTRUCTED) < _PLAIN_TAGS_MAX:
        _CONSTRUCTED[key] = value
    return value


def _fast_read(text: str, path: str, *, outline: bool = False) -> tuple[Any, SourceMap] | None:
    """Read a plain document straight from libyaml's events, or None to leave it to the full reader.

    The common case of a capability file has no tags, merge keys, duplicate or non-string keys,
    control characters or odd scalars, and stays within the limits; anchors and aliases are replayed
    (the same values, positions and counts as the full reader's expansion). For such a
    document this builds exactly what the full reader (composer, then :class:`_Builder`) builds, in one
    loop over the events without node objects; at the first thing outside that case it gives up
    (None), and the full reader reads the document from the start, with all its checks and errors.
    A syntax error also gives up.
    """
    if _CParser is None:
        return None
    parser = _CParser(text)
    try:
        return _fast_events(parser, path, OUTLINE_DEPTH if outline else MAX_DEPTH + 1)
    except yaml.YAMLError:
        return None
    finally:
        parser.dispose()


def _fast_events(parser: Any, path: str, depth: int) -> tuple[Any, SourceMap] | None:  # noqa: ANN401 - CParser
    get = parser.get_event
    if type(get()) is not yaml.StreamStartEvent or type(get()) is not yaml.DocumentStartEvent:
        return None
    scalar_event, seq_event, map_event = yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent
    alias_event, end_events = yaml.AliasEvent, (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    values: dict[JsonPath, tuple[int, int]] = {}
    keys: dict[JsonPath, tuple[int, int]] = {}
    yaml11: set[JsonPath] = set()
    floats: set[JsonPath] = set()
    tables: tuple[Any, ...] = (values, keys, yaml11, floats)
    nodes = chars = 0
    # Anchored values: anchor -> (value, position, what its subtree recorded, characters of text).
    # An entry is (0 value / 1 key / 2 YAML 1.1 bool / 3 float, path below the anchor, position).
    anchors: dict[str, tuple[Any, tuple[int, int], list[tuple[int, JsonPath, Any]], int]] = {}
    # While an anchored collection is open, every entry is also logged, to be replayed by aliases.
    log: list[tuple[int, JsonPath, Any]] | None = None
    recording = 0
    # Open collections: [container, its path, the key awaiting its value, its anchor's bookkeeping].
    stack: list[list[Any]] = []
    strings: dict[str, str] = {}
    plain, control = _PLAIN_TAGS, _CONTROL.search
    root: Any = _FALLBACK
    while root is _FALLBACK:
        event = get()
        kind = type(event)
        if kind in end_events:
            done = stack.pop()
            if done[3] is not None:
                name, apos, start, chars0 = done[3]
                cut = len(done[1])
                assert log is not None  # noqa: S101 - recording since the anchor opened
                entries = [(which, where[cut:], pos) for which, where, pos in log[start:]]
                anchors[name] = (done[0], apos, entries, chars - chars0)
                recording -= 1
                if not recording:
                    log = None
            if not stack:
                root = done[0]
            continue
        anchor = event.anchor
        if kind is not scalar_event and kind is not seq_event and kind is not map_event:
            if kind is not alias_event:
                return None  # an empty or second document: the full reader
            nodes += 1
            found = anchors.get(anchor)
            if found is None or not stack or (stack[-1][2] is None and type(stack[-1][0]) is dict):
                return None  # undefined (or still open), the whole document, or a key
            value, pos, entries, more = found
            chars += more
            if nodes > MAX_NODES or chars > MAX_TEXT_CHARS or len(values) + len(entries) >= MAX_NODES:
                return None  # the full reader reports the limit
            if type(value) is dict or type(value) is list:
                value = copy.deepcopy(value)  # each alias builds its own copy, as the full reader
        else:
            if event.tag is not None or (anchor is not None and anchor in anchors):
                return None  # a tag, or an anchor defined twice: the full reader
            nodes += 1
            if nodes > MAX_NODES or len(stack) >= MAX_DEPTH:
                return None
            mark = event.start_mark
            pos = (mark.line + 1, mark.column + 1)
        node_path: JsonPath = ()
        lazy = False
        container = None
        if stack:
            frame = stack[-1]
            container = frame[0]
            if type(container) is dict:
                key = frame[2]
                if key is None:  # this node is a key
                    if kind is not scalar_event or anchor is not None:
                        return None
                    key = event.value
                    implicit = event.implicit
                    if implicit[0] and (plain.get(key) or _resolve_scalar(key, implicit)) != _STR_TAG:
                        return None
                    key = strings.setdefault(key, key)  # one object per distinct text: less memory
                    chars += len(key)
                    if key in container or control(key) is not None:
                        return None
                    frame[2] = key
                    if log is not None or len(frame[1]) < depth:  # else nothing records its path
                        key_path = (*frame[1], key)
                        if len(key_path) <= depth:
                            keys[key_path] = pos
                        if log is not None:
                            log.append((1, key_path, pos))
                    continue
                frame[2] = None
            else:
                key = len(container)
            if kind is scalar_event and log is None and len(frame[1]) >= depth:
                lazy = True  # a deep scalar: its path is built only if a flag records it
            else:
                node_path = (*frame[1], key)
        if not lazy and len(node_path) <= depth:
            values[node_path] = pos
        if log is not None:
            log.append((0, node_path, pos))
        if kind is alias_event:
            for which, below, where in entries:
                full = (*node_path, *below)
                table = tables[which]
                if which < 2:
                    table[full] = where
                else:
                    table.add(full)
                if log is not None:
                    log.append((which, full, where))
        elif kind is scalar_event:
            text = event.value
            implicit = event.implicit
            tag = (plain.get(text) or _resolve_scalar(text, implicit)) if implicit[0] else _STR_TAG
            flag = 0
            if tag == _STR_TAG:
                value = strings.setdefault(text, text)
                chars += len(text)
                if chars > MAX_TEXT_CHARS or control(text) is not None:
                    return None
            elif tag in _SIMPLE_TAGS:
                value = _construct(tag, event)
                if value is _FALLBACK:
                    return None
                if not event.style:  # plain, as the full reader records it
                    if isinstance(value, bool):
                        if text in _YAML11_BOOL_WORDS:
                            flag = 2
                    elif isinstance(value, float):
                        flag = 3
                    if flag:
                        tables[flag].add((*frame[1], key) if lazy else node_path)
                        if log is not None:
                            log.append((flag, node_path, None))
            else:
                return None
            if anchor is not None:
                anchors[anchor] = (
                    value, pos, [(flag, (), None)] if flag else [], len(value) if type(value) is str else 0
                )
        else:
            value = {} if kind is map_event else []
        if container is not None:  # the collection this node is in (the stack has not changed)
            if type(container) is dict:
                container[key] = value
            else:
                container.append(value)
        elif kind is scalar_event:
            root = value
        if kind is seq_event or kind is map_event:
            opened = None
            if anchor is not None:
                if log is None:
                    log = []
                recording += 1
                opened = (anchor, pos, len(log), chars)
            stack.append([value, node_path, None, opened])
    if type(get()) is not yaml.DocumentEndEvent or type(get()) is not yaml.StreamEndEvent:
        return None
    return root, SourceMap(path, values, keys, frozenset(yaml11), frozenset(floats))


def _parse(text: str, *, libyaml: bool = True) -> yaml.Node | None:
    """Compose ``text``, with libyaml when present.

    A document libyaml refuses is read again by PyYAML's own parser, so that every syntax error is
    worded (and placed) the same with or without libyaml.
    """
    if _CParser is None or not libyaml:
        return _compose(text, fast=False)
    try:
        return _compose(text)
    except yaml.YAMLError:
        return _compose(text, fast=False)


def _code_point(character: int | str | bytes) -> int:
    if isinstance(character, int):
        return character
    return ord(character[:1] or "\0")


def _text_position(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of character ``index`` of ``text``."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def read_text(text: str, path: str, *, outline: bool = False) -> tuple[Any, SourceMap]:
    """Parse one YAML document from ``text``; raise :class:`CapabilityError` group members.

    With ``outline``, the source map of a document the fast reader takes holds the positions of the
    paths at most :data:`OUTLINE_DEPTH` deep only (entries and rules, what a clean load cites); a
    caller that finds a problem reads the document again without it, to place every error exactly.

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
    fast = _fast_read(text, path, outline=True) if outline else _fast_read(text, path)
    if fast is not None:
        return fast
    return _read_nodes(text, path)


def _read_nodes(text: str, path: str, *, libyaml: bool = True) -> tuple[Any, SourceMap]:
    """The full reader: compose a node graph (with the limits), then build data and positions."""
    try:
        node = _parse(text, libyaml=libyaml)
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
    return read_raw(read_bytes(path, name), name)


def read_raw(raw: bytes, name: str, *, outline: bool = False) -> tuple[Any, SourceMap]:
    """Parse the bytes of one YAML file (read by :func:`capmatrix._files.read_bytes`): UTF-8 only.

    :raises capmatrix.CapabilityErrors: on non-UTF-8 or malformed text.
    """
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
    return read_text(text, name, outline=outline)
