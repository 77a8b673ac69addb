"""The compiled-matrix cache: a validated matrix kept as plain JSON, keyed by the bytes it came from.

A clean load writes the validated model (axes, rules with their conditions and locations, models,
roles, derived tables) to ``<cache dir>/entries/matrix-<slot>.json``. A later load of the same files
reads it back instead of parsing, checking and building them again, but only when the entry's key
equals the key of the input now: a BLAKE2b-256 digest over a format version, the package's own files
(each one's path, size and modification time, as the interpreter checks its bytecode cache: so a new
capmatrix, or an edited checkout, never reads an entry an older one wrote), the PyYAML that would
parse the files, the matrix root, and every file's display path and bytes. Whatever is wrong
with an entry (truncated, corrupt, another key, another format, a value of an unknown kind) makes it
a miss: the files are loaded as if there were no cache and the entry is written again. A matrix with
a problem is never written, so every error comes from the full loader, exactly as without a cache.

The key binds an entry to the bytes of the YAML against staleness and damage, not against forgery:
it is computed from public inputs, so whoever can write an entry can give it the right key and
checksum. What makes an entry trustworthy is where it lies: the cache directory and its ``entries``
subdirectory must be owned by this user and writable by nobody else (else the cache is not used at
all, and the matrix loads uncached), so only this user's own processes, which write only validated
matrices, can have written it; whoever could forge one could edit the YAML itself. Only a regular
file of this user within :data:`MAX_ENTRY_BYTES` is read (never through a link, never waiting on a
FIFO), and only files of the cache's own name pattern and header are replaced or pruned.

The entry is data (JSON, checked against a BLAKE2b-256 digest of itself in its first line), never
code: reading one cannot run anything. ``CAPMATRIX_CACHE=off`` turns the cache off;
``CAPMATRIX_CACHE_DIR`` moves it (default: ``$XDG_CACHE_HOME/capmatrix``, else
``~/.cache/capmatrix``). A cache directory that cannot be written is ignored. See
docs/architecture.md, "The compiled-matrix cache".
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import time

try:  # hashlib's own BLAKE2 module: importing hashlib would load OpenSSL first (2 ms of a cold start)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

from capmatrix._shipped.artifact import CODE_DIRS
from capmatrix._shipped.payload import decode, dumps, loads

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from capmatrix.matrix import Matrix

__all__ = [
    "FORMAT", "MAX_ENTRIES", "cache_dir", "entry_text", "key", "lookup", "store", "turned_off",
]

#: The layout of an entry; bump it whenever the payload (``_cache_json``) or the digest changes.
FORMAT = 8
#: Entries kept in the cache directory (one per matrix directory and working directory); the oldest
#: beyond this are removed when one is written.
MAX_ENTRIES = 32
#: An entry larger than this is not read (a 10,000-rule matrix makes about 2 MiB).
MAX_ENTRY_BYTES = 64 * 1024 * 1024
#: The subdirectory of the cache directory that holds the entries (and nothing else).
SUBDIR = "entries"
#: A temporary file of a write that did not finish is removed once it is this old (seconds).
STALE_SECONDS = 3600
_MAGIC = "capmatrix-cache"
_HEAD = f"{_MAGIC} ".encode()
_PREFIX = "matrix-"
# Patterns of the names this cache writes, compiled (by re, which a read does not need) when writing.
_ENTRY_NAME = r"matrix-[0-9a-f]{32}\.json"
_TEMP_NAME = r"\.matrix-[0-9a-f]{32}\.json\.[0-9a-f]{12}\.tmp"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC
#: Descriptor-relative opens, renames and listings, and links not followed (POSIX); else no cache.
_SUPPORTED = (
    hasattr(os, "O_NOFOLLOW")
    and {os.open, os.mkdir, os.rename, os.unlink} <= os.supports_dir_fd
    and os.scandir in os.supports_fd
)
_OFF = frozenset({"off", "0", "no", "false", "disable", "disabled"})


def _digest(data: bytes = b"") -> blake2b:
    """A 256-bit BLAKE2b hash object over ``data`` (the keys, slots and checksums of entries)."""
    return blake2b(data, digest_size=32)


class _Mismatch(Exception):
    """An entry that does not hold what its key says (control flow inside this module)."""


def turned_off() -> bool:
    """Whether ``CAPMATRIX_CACHE=off`` (or no, 0, false, disable...): every file is then parsed."""
    return os.environ.get("CAPMATRIX_CACHE", "").strip().lower() in _OFF


def cache_dir() -> str | None:
    """The cache directory, or None when the cache is off (``CAPMATRIX_CACHE=off``).

    A path string: pathlib's imports would be a tenth of a cached start.
    """
    if turned_off():
        return None
    explicit = os.environ.get("CAPMATRIX_CACHE_DIR")
    if explicit:
        return explicit
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec: a relative value is ignored  # noqa: PTH117
        return os.path.join(xdg, "capmatrix")  # noqa: PTH118
    home = os.path.expanduser("~")  # noqa: PTH111
    if home.startswith("~"):  # no home directory: no cache
        return None
    return os.path.join(home, ".cache", "capmatrix")  # noqa: PTH118


_code: bytes | None = None


def _code_digest() -> bytes:
    """A digest of what turns files into a matrix: this package's modules and schema, and PyYAML.

    Computed once per process. Each source file enters by its path, size and modification time, as
    the interpreter's own bytecode cache checks a module, not by its bytes: reading and hashing the
    package's 400 kB of source was the largest step of a cached load. Installing another capmatrix
    or PyYAML (another path or other files), or editing a checkout, changes it.
    """
    global _code  # noqa: PLW0603 - computed once per process
    if _code is None:
        digest = _digest(f"{_MAGIC} {FORMAT} python {sys.version_info[:2]}".encode())
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # noqa: PTH100, PTH120
        for folder in CODE_DIRS:
            _stamp(digest, os.path.normpath(os.path.join(package, folder)), ".py")  # noqa: PTH118
        _stamp(digest, os.path.join(package, "schema"), ".json")  # noqa: PTH118
        for entry in sys.path:  # PyYAML's files (version, libyaml or not), without importing it
            yaml_dir = os.path.join(entry or ".", "yaml")  # noqa: PTH118
            if os.path.isfile(os.path.join(yaml_dir, "__init__.py")):  # noqa: PTH113, PTH118
                _stamp(digest, os.path.abspath(yaml_dir), "")  # noqa: PTH100
                break
        _code = digest.digest()
    return _code


def _stamp(digest: Any, directory: str, suffix: str) -> None:  # noqa: ANN401 - a hashlib object
    """Add each file of ``directory`` whose name ends with ``suffix``: its path, size and mtime."""
    with os.scandir(directory) as listing:
        found = sorted((e.name, e.stat()) for e in listing if e.name.endswith(suffix) and e.is_file())
    for name, st in found:
        text = f"{directory}/{name} {st.st_size} {st.st_mtime_ns}"
        _frame(digest, text.encode("utf-8", "surrogateescape"))


def _frame(digest: Any, data: bytes) -> None:  # noqa: ANN401 - a hashlib object
    digest.update(b"%d:" % len(data))
    digest.update(data)


def key(root: str, files: Sequence[tuple[str, bytes]]) -> str:
    """The key of a matrix: its root, every file's display path and bytes, and :func:`_code_digest`."""
    digest = _digest(_code_digest())
    _frame(digest, root.encode("utf-8", "surrogateescape"))
    for name, raw in files:
        _frame(digest, name.encode("utf-8", "surrogateescape"))
        _frame(digest, raw)
    return digest.hexdigest()


def _slot(root: str, names: Sequence[str]) -> str:
    """The name of the one entry of a matrix directory seen from one working directory (display names)."""
    digest = _digest(root.encode("utf-8", "surrogateescape"))
    for name in names:
        _frame(digest, name.encode("utf-8", "surrogateescape"))
    return f"{_PREFIX}{digest.hexdigest()[:32]}.json"


def _entries_dir(*, create: bool) -> int | None:
    """A descriptor of the entries' subdirectory, or None: the cache off, or a directory not private.

    Both the cache directory and its :data:`SUBDIR` must be directories owned by this user that
    neither the group nor others can write (the subdirectory is not followed as a link). The
    subdirectory is then used only through the descriptor, so it cannot be swapped under the reads.
    """
    base = cache_dir()
    if base is None or not _SUPPORTED:
        return None
    try:
        if create:
            os.makedirs(base, mode=0o700, exist_ok=True)  # noqa: PTH103
        top = os.open(base, _DIR_FLAGS)
    except OSError:
        return None
    try:
        if not _private(top):
            return None
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(SUBDIR, 0o700, dir_fd=top)
        sub = os.open(SUBDIR, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=top)
    except OSError:
        return None
    finally:
        os.close(top)
    if _private(sub):
        return sub
    os.close(sub)
    return None


def _private(fd: int) -> bool:
    """Whether ``fd`` is a directory of this user that neither the group nor others can write."""
    st = os.fstat(fd)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _read_entry(directory: int, name: str) -> bytes | None:
    """The bytes of entry ``name``: a regular file of this user within the size bound, else None.

    Opened without following a link and without blocking (a FIFO is refused, not waited on), and
    read no further than the size it had when opened.
    """
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=directory)
    except OSError:
        return None
    return _read_regular(fd, mine=True)


def _read_regular(fd: int, *, mine: bool) -> bytes | None:
    """The bytes of open file ``fd`` (closed here, whatever happens), or None.

    None unless it is a regular file (``mine``: of this user) within :data:`MAX_ENTRY_BYTES`; it is
    read no further than the size it had when opened (grown since: not a whole entry).
    """
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or (mine and st.st_uid != os.geteuid())
                or st.st_size > MAX_ENTRY_BYTES):
            return None
        chunks = []
        left = st.st_size + 1
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    blob = b"".join(chunks)
    return blob if len(blob) <= st.st_size else None


def lookup(root: str, files: Sequence[tuple[str, bytes]]) -> tuple[Matrix | None, str]:
    """The cached matrix of these files (None on a miss, the cache off or any doubt) and their key."""
    wanted = key(root, files)
    directory = _entries_dir(create=False)
    if directory is None:
        return None, wanted
    try:
        blob = _read_entry(directory, _slot(root, [name for name, _raw in files]))
    except OSError:
        blob = None
    finally:
        os.close(directory)
    if blob is None:
        return None, wanted
    try:
        matrix = _decode_entry(blob, wanted)
    except Exception:  # noqa: BLE001 - any doubt about an entry is a miss, and the files are loaded
        return None, wanted
    if matrix.root != root or matrix.files != tuple(name for name, _raw in files):
        return None, wanted
    return matrix, wanted


def store(matrix: Matrix, wanted: str, names: Sequence[str]) -> None:
    """Write ``matrix`` (validated, loaded from the files of key ``wanted``); failures are ignored."""
    if cache_dir() is None:
        return
    text = entry_text(matrix, wanted)
    if text is None:
        return
    directory = _entries_dir(create=True)
    if directory is None:
        return
    try:
        with contextlib.suppress(OSError):
            _write_entry(directory, _slot(matrix.root, names), text)
            _prune(directory)
    finally:
        os.close(directory)


def entry_text(matrix: Matrix, wanted: str) -> str | None:
    """The text of an entry of ``matrix`` under key ``wanted`` (None: a value JSON cannot hold)."""
    payload = dumps(matrix)
    if payload is None:
        return None
    check = _digest(payload.encode("ascii")).hexdigest()
    return f"{_MAGIC} {FORMAT} {wanted} {check}\n{payload}"


def _write_entry(directory: int, name: str, text: str) -> None:
    """Write entry ``name`` atomically: a new 0o600 file beside it, then a rename over it."""
    tmp = f".{name}.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=directory)  # 48 random bits: no retry needed
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("ascii"))
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=directory)
        raise


def _is_entry(directory: int, name: str) -> bool:
    """Whether ``name`` is an entry this cache wrote: its name, a regular file of this user, its header."""
    import re  # noqa: PLC0415 - only a write prunes

    if not re.fullmatch(_ENTRY_NAME, name):
        return False
    fd = os.open(name, _READ_FLAGS, dir_fd=directory)
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and handle.read(len(_HEAD)) == _HEAD


def _prune(directory: int) -> None:
    """Remove the oldest entries beyond :data:`MAX_ENTRIES`, and temporary files of failed writes.

    Only what this cache writes is removed: a file of its name pattern, regular, of this user and
    starting with its header (a temporary file: its pattern, and older than :data:`STALE_SECONDS`).
    Another process may remove them first.
    """
    import re  # noqa: PLC0415 - only a write prunes

    entries = []
    stale = time.time() - STALE_SECONDS
    with os.scandir(directory) as listing:
        for item in listing:
            with contextlib.suppress(OSError):
                st = item.stat(follow_symlinks=False)
                if _is_entry(directory, item.name):
                    entries.append((st.st_mtime_ns, item.name))
                elif (re.fullmatch(_TEMP_NAME, item.name) and stat.S_ISREG(st.st_mode)
                      and st.st_uid == os.geteuid() and st.st_mtime < stale):
                    os.unlink(item.name, dir_fd=directory)
    entries.sort()
    for _mtime, name in entries[: max(0, len(entries) - MAX_ENTRIES)]:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=directory)


def _decode_entry(blob: bytes, wanted: str) -> Matrix:
    """The matrix of an entry whose header names ``wanted`` and whose payload has its checksum.

    :raises Exception: of any kind, for anything else (the caller treats every one as a miss).
    """
    if len(blob) > MAX_ENTRY_BYTES:
        raise _Mismatch
    head, newline, payload = blob.partition(b"\n")
    parts = head.decode("ascii").split(" ")
    if not newline or len(parts) != 4 or parts[:3] != [_MAGIC, str(FORMAT), wanted]:
        raise _Mismatch
    if _digest(payload).hexdigest() != parts[3]:
        raise _Mismatch
    return decode(loads(payload.decode("ascii")))
