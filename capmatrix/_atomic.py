"""Atomic file writes: a temporary file in the same directory, then ``os.replace``."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = ["write_text_atomic"]


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a part.

    A new file gets the usual permissions (0o666 less the umask); a replaced file keeps its mode.

    :raises OSError: when the directory is not writable; the old file is then left untouched.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp = _create_temporary(target)
    try:
        if mode is not None and hasattr(os, "fchmod"):
            os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _create_temporary(target: Path) -> tuple[int, Path]:
    """A new, exclusively created file next to ``target`` (mode 0o666 less the umask, as open() does).

    ``tempfile.mkstemp`` would create it 0o600, and ``os.replace`` would carry that onto the target.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    msg = f"cannot create a temporary file next to {target}"
    raise FileExistsError(msg)
