"""Reading one capability file's bytes, with the limits every reader applies (no YAML here).

The loader reads each file once: the bytes it hashes for the compiled-matrix cache are the bytes it
parses on a miss.
"""

from __future__ import annotations

import os
import stat

from capmatrix.errors import CapabilityError, CapabilityErrors

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["MAX_FILE_BYTES", "read_bytes"]

#: Files above this size are refused before parsing (a capability file is a few kB).
MAX_FILE_BYTES = 2 * 1024 * 1024


def read_bytes(path: str | Path, name: str) -> bytes:
    """The bytes of one regular file of at most :data:`MAX_FILE_BYTES` (``name`` is its display name).

    :raises capmatrix.CapabilityErrors: for an unreadable, oversized or non-regular file.
    """

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
    return raw
