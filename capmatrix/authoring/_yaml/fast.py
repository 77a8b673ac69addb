"""The fast reader: a plain document straight from libyaml's events, as the full reader would build it."""

from __future__ import annotations

import copy

import yaml

from capmatrix.authoring._yaml.limits import (
    _CONTROL,
    _DECIMAL,
    _PLAIN_TAGS,
    _PLAIN_TAGS_MAX,
    _STR_TAG,
    _YAML11_BOOL_WORDS,
    MAX_DEPTH,
    MAX_INT_BITS,
    MAX_NODES,
    MAX_TEXT_CHARS,
    _CParser,
    _resolve_scalar,
)
from capmatrix.authoring._yaml.source import JsonPath, SourceMap

TYPE_CHECKING = False  # not typing's: imported for annotations only
if TYPE_CHECKING:
    from typing import Any

__all__ = ["OUTLINE_DEPTH"]

#: The deepest path whose position an outline read keeps (``kernels.K.rules[i]``, ``roles.R.orders[k]``).
OUTLINE_DEPTH = 4


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
