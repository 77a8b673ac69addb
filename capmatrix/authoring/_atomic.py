"""Atomic file writes: a temporary file in the same directory, then ``os.replace``.

Only a regular file is ever replaced: a path that exists as anything else (a symbolic link, a FIFO,
a device, a directory, a socket) is refused with an :class:`OSError` naming it, and left as it is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

__all__ = ["check_replaceable", "write_text_atomic"]

_KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
}


def check_replaceable(path: str | os.PathLike[str]) -> os.stat_result | None:
    """The status of the regular file at ``path`` (not following a link), or None when nothing is there.

    :raises OSError: when ``path`` exists and is not a regular file, naming what it is; or when it
        cannot be examined.
    """
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # nothing there (the write reports a bad parent)
        return None
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        msg = f"exists and is {kind}, not a regular file; remove it or choose another path"
        raise OSError(errno.EEXIST, msg, os.fspath(path))
    return st


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a part.

    A new file gets the usual permissions (0o666 less the umask); a replaced file keeps its mode.

    :raises OSError: when the directory is not writable, or ``path`` exists and is not a regular file
        (:func:`check_replaceable`); whatever stands at ``path`` is then left untouched.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    existing = check_replaceable(target)
    mode = None if existing is None else stat.S_IMODE(existing.st_mode)
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
