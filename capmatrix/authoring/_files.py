"""Reading one file's bytes, with the limits every reader applies: capability YAML and JSON data files.

The loader reads each capability file once: the bytes it hashes for the compiled-matrix cache are the
bytes it parses on a miss. The JSON files beside the YAML (a ``check`` baseline, probe evidence) are read
the same way, then parsed as strict JSON within a nesting bound (:func:`read_json`).
"""

from __future__ import annotations

import os
import stat

from capmatrix._core.nesting import depth
from capmatrix.errors import CapabilityError, CapabilityErrors, InvalidFile

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["MAX_FILE_BYTES", "MAX_JSON_BYTES", "MAX_JSON_DEPTH", "read_bytes", "read_json"]

#: Files above this size are refused before parsing (a capability file is a few kB).
MAX_FILE_BYTES = 2 * 1024 * 1024
#: A JSON data file above this size is refused before parsing (the largest evidence file is about 1 MB).
MAX_JSON_BYTES = 16 * 1024 * 1024
#: Objects and arrays a JSON data file may nest (evidence nests 6 levels, a baseline 3).
MAX_JSON_DEPTH = 64
_INFINITY = float("inf")


class _Refused(Exception):
    """What is wrong with a file before its reader words it; ``oversized``: above the size bound."""

    def __init__(self, message: str, *, oversized: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.oversized = oversized


def _regular_bytes(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    :raises _Refused: for anything but a regular file (a FIFO, a device: opened without blocking and
        never read), or one above ``limit`` bytes.
    :raises OSError: when it cannot be opened or read.
    """
    # O_NONBLOCK: opening a FIFO must not hang; fstat then refuses anything but a regular file.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _Refused("not a regular file")
        if info.st_size > limit:
            raise _Refused(f"file is {info.st_size} bytes, above the limit of {limit} bytes", oversized=True)
        raw = handle.read(limit + 1)
    if len(raw) > limit:  # it grew after fstat
        raise _Refused(f"file is above the limit of {limit} bytes", oversized=True)
    return raw


def read_bytes(path: str | Path, name: str) -> bytes:
    """The bytes of one regular file of at most :data:`MAX_FILE_BYTES` (``name`` is its display name).

    :raises capmatrix.CapabilityErrors: for an unreadable, oversized or non-regular file.
    """
    try:
        return _regular_bytes(path, MAX_FILE_BYTES)
    except _Refused as exc:
        message, hint = exc.message, "split it" if exc.oversized else "capability files are plain YAML files"
    except OSError as exc:
        message, hint = f"cannot read file: {exc.strerror or exc}", None
    raise CapabilityErrors([CapabilityError(name, None, None, "", message, hint=hint, code="E001")])


def read_json(path: str | Path, name: str, *, hint: str | None = None) -> object:
    """The JSON value of one regular file (``name`` is how messages show it), read as strict JSON.

    Within :data:`MAX_JSON_BYTES` and :data:`MAX_JSON_DEPTH`, UTF-8, and JSON as RFC 8259 has it: no
    ``NaN`` or ``Infinity`` and no number too large for a float. ``hint`` ends every message (what the
    file should be, how to make one).

    :raises capmatrix.errors.InvalidFile: for a file that cannot be read, is not a regular file (a FIFO
        or a device is refused without blocking), is too large, not UTF-8 (with the line and column),
        not JSON (the same), or nested too deeply.
    """
    try:
        raw = _regular_bytes(path, MAX_JSON_BYTES)
    except _Refused as exc:
        raise InvalidFile(name, exc.message, hint=hint) from None
    except OSError as exc:
        raise InvalidFile(name, str(exc.strerror or exc), hint=hint) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        column = len(before[before.rfind(b"\n") + 1:].decode("utf-8", "replace")) + 1
        raise InvalidFile(name, f"not UTF-8 (byte 0x{raw[exc.start]:02x})", line=before.count(b"\n") + 1,
                          column=column, hint=hint) from None
    import json  # noqa: PLC0415 - a load the cache answers reads no JSON file

    try:
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise InvalidFile(name, f"not valid JSON ({exc.msg})", line=exc.lineno, column=exc.colno,
                          hint=hint) from None
    except _Refused as exc:
        raise InvalidFile(name, exc.message, hint=hint) from None
    except RecursionError:
        raise InvalidFile(name, f"objects and arrays nested deeper than {MAX_JSON_DEPTH} levels",
                          hint=hint) from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise InvalidFile(name, f"not JSON capmatrix reads ({exc})", hint=hint) from None
    if depth(data, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise InvalidFile(name, f"objects and arrays nested deeper than {MAX_JSON_DEPTH} levels", hint=hint)
    return data


def _no_constant(word: str) -> object:
    raise _Refused(f"not valid JSON ({word} is no JSON number: JSON has no NaN or Infinity)")


def _finite(text: str) -> float:
    value = float(text)
    if value in (_INFINITY, -_INFINITY):
        raise _Refused(f"not valid JSON ({text[:20]} is too large for a number)")
    return value
