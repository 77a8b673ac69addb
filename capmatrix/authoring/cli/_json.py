"""Indented JSON written as it is made, for reports too large to hold as one string.

``json.dumps(data, indent=2)`` takes the standard library's pure-Python encoder (its C encoder
does not indent) and joins every piece into one string: a diff that lists 1,000 boxes per change
makes a 400 MB string out of some 20 million pieces, several GB at its peak. :func:`write_json`
writes the same text (byte for byte, as ``json.dumps(data, indent=indent, default=str)``) in
chunks of about :data:`CHUNK` pieces, encoding strings with the C encoder's helper, and takes
any iterator (a generator of a report's entries) where a list may stand: the caller need not
build the whole tree first.
"""

from __future__ import annotations

try:  # the C helper itself: importing json.encoder would import json, its decoder and their patterns
    from _json import encode_basestring_ascii
except ImportError:  # pragma: no cover - an interpreter built without it
    from json.encoder import encode_basestring_ascii

TYPE_CHECKING = False  # not typing's: every command would import it for annotations only
if TYPE_CHECKING:
    from typing import TextIO

__all__ = ["CHUNK", "write_json"]

#: Pieces gathered before a write.
CHUNK = 1 << 12

_INFINITY = float("inf")


def _float(value: float) -> str:
    if value != value:  # noqa: PLR0124 - NaN is the one value unequal to itself
        return "NaN"
    if value == _INFINITY:
        return "Infinity"
    if value == -_INFINITY:
        return "-Infinity"
    return float.__repr__(value)


def _scalar(value: object) -> str | None:
    """The text of a JSON scalar (None for containers and iterators)."""
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    return None


def _key(key: object) -> str:
    """A dict key as JSON does: strings as they are, scalars by their JSON text."""
    if isinstance(key, str):
        return encode_basestring_ascii(key)
    if isinstance(key, float):
        return encode_basestring_ascii(_float(key))
    if key is True or key is False or key is None or isinstance(key, int):
        return encode_basestring_ascii(_scalar(key) or "")
    msg = f"keys must be str, int, float, bool or None, not {type(key).__name__}"
    raise TypeError(msg)


def write_json(data: object, out: TextIO, *, indent: int = 2) -> None:
    """Write ``data`` to ``out`` as ``json.dumps(data, indent=indent, default=str)`` would.

    Lists, tuples and any other iterator that is not a str, bytes or dict are written as arrays;
    other values JSON does not know are written as their ``str()``. A container inside itself
    raises ValueError, as json does.
    """
    pieces: list[str] = []
    put = pieces.append
    active: set[int] = set()

    def flush() -> None:
        out.write("".join(pieces))
        pieces.clear()

    def value(item: object, depth: int) -> None:
        text = _scalar(item)
        if text is not None:
            put(text)
        elif isinstance(item, dict):
            mapping(item, depth)
        elif isinstance(item, (list, tuple)) or (
            hasattr(item, "__next__") and not isinstance(item, (bytes, bytearray))
        ):
            array(item, depth)
        else:
            put(encode_basestring_ascii(str(item)))

    def enter(item: object) -> None:
        marker = id(item)
        if marker in active:
            msg = "Circular reference detected"
            raise ValueError(msg)
        active.add(marker)

    def array(item: object, depth: int) -> None:
        inner = "\n" + " " * (indent * (depth + 1))
        close = "\n" + " " * (indent * depth) + "]"
        if isinstance(item, (list, tuple)):
            if not item:
                put("[]")
                return
            texts: list[str] = []
            for member in item:
                text = _scalar(member)
                if text is None:
                    break  # a container inside: written piece by piece below
                texts.append(text)
            else:  # a list of scalars (a region's values): one piece
                put("[" + inner + ("," + inner).join(texts) + close)
                return
        enter(item)
        first = True
        for member in item:  # type: ignore[attr-defined]
            put("[" + inner if first else "," + inner)
            first = False
            value(member, depth + 1)
        put("[]" if first else close)
        active.discard(id(item))
        if len(pieces) >= CHUNK:
            flush()

    def mapping(item: dict[object, object], depth: int) -> None:
        if not item:
            put("{}")
            return
        enter(item)
        inner = "\n" + " " * (indent * (depth + 1))
        lead = "{" + inner
        for key, member in item.items():
            put(lead)
            lead = "," + inner
            put(_key(key) + ": ")
            value(member, depth + 1)
        put("\n" + " " * (indent * depth) + "}")
        active.discard(id(item))
        if len(pieces) >= CHUNK:
            flush()

    value(data, 0)
    put("\n")
    flush()
