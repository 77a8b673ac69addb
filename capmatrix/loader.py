"""Load capability YAML files into a validated :class:`Matrix`: discovery and reading.

Then the shape (:mod:`capmatrix.schema`), the values (:mod:`capmatrix._values`) and the references
(:mod:`capmatrix._references`), with the compiled-matrix cache (:mod:`capmatrix._cache`) in front.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import stat

from capmatrix import _artifact, _cache
from capmatrix._files import read_bytes
from capmatrix.errors import CapabilityError, CapabilityErrors
from capmatrix.resolver import compile_matrix

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any

    from capmatrix import _yaml
    from capmatrix._values import ENUM_VALUE, RESERVED_AXIS_NAMES, open_domains
    from capmatrix.matrix import Matrix

__all__ = [
    "ENUM_VALUE",
    "EXPECT_DIR",
    "MAX_DIR_DEPTH",
    "MAX_FILES",
    "MAX_TOTAL_BYTES",
    "RESERVED_AXIS_NAMES",
    "default_path",
    "discover",
    "iter_problems",
    "load",
    "open_domains",
]

_FROM_VALUES = frozenset({"ENUM_VALUE", "RESERVED_AXIS_NAMES", "open_domains"})


def __getattr__(name: str) -> object:
    """The value layer's names, imported on first use (PEP 562): a cached load never needs them."""
    if name in _FROM_VALUES:
        from capmatrix import _values  # noqa: PLC0415

        return getattr(_values, name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


#: Sub-directory of a matrix that holds expectation cases, not matrix data.
EXPECT_DIR = "expect"
#: Refuse to read matrices with more files than this (a shipped matrix has a dozen).
MAX_FILES = 2000
#: Refuse to read matrices whose YAML files add up to more bytes than this (a shipped one has 70 kB).
MAX_TOTAL_BYTES = 8 * 1024 * 1024
#: Refuse directory trees nested deeper than this below the matrix root.
MAX_DIR_DEPTH = 16


def default_path() -> Path:
    """The shipped ``capabilities/``: the source tree's when running from a checkout, else the wheel's."""
    from pathlib import Path  # noqa: PLC0415 - the loader itself works on strings (a cold start)

    return Path(_default_root())


def _default_root() -> str:
    package = os.path.dirname(os.path.realpath(__file__))  # noqa: PTH120
    checkout = os.path.join(os.path.dirname(package), "capabilities")  # noqa: PTH118, PTH120
    if (os.path.isfile(os.path.join(checkout, "axes.yaml"))  # noqa: PTH113, PTH118
            and os.path.isfile(os.path.join(os.path.dirname(package), "pyproject.toml"))):  # noqa: PTH113, PTH118, PTH120
        return checkout
    return os.path.join(package, "_capabilities")  # noqa: PTH118


# The loader works on path strings, not pathlib (whose imports are a tenth of a cold start), written
# the way pathlib would show them, so that every name and message reads as before.
_MISSING_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


def _normal(path: str) -> str:
    """``path`` as ``str(PurePosixPath(path))``: empty and ``.`` components dropped, ``..`` kept."""
    if path.startswith("/"):  # POSIX keeps exactly two leading slashes apart
        root = "//" if path.startswith("//") and not path.startswith("///") else "/"
    else:
        root = ""
    return root + "/".join(p for p in path.split("/") if p and p != ".") or "."


def _join(directory: str, name: str) -> str:
    """``directory / name`` as pathlib joins a normal path and a plain name."""
    if directory == ".":
        return name
    return directory + name if directory.endswith("/") else f"{directory}/{name}"


def _below(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` (both normal), ``""`` for the root itself, None when not below it."""
    if path == root:
        return ""
    if root == ".":  # every relative path is below it, as pathlib reads parts (``..`` included)
        return None if path.startswith("/") else path
    prefix = root if root.endswith("/") else root + "/"
    return path[len(prefix):] if path.startswith(prefix) else None


def _resolved(path: str) -> str | None:
    """The real path of ``path`` as ``Path.resolve()`` finds it, or None for a symbolic link loop."""
    try:
        real = os.path.realpath(path)  # non-strict: a missing tail is kept
    except OSError:
        return None
    try:
        os.stat(real)  # noqa: PTH116 - realpath does not report a loop; stat does
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
    return real


def _kind(path: str) -> int | None:
    """The file type bits of ``path`` (links followed), or None where pathlib says it does not exist.

    :raises OSError: as ``Path.is_file`` raises: for an error other than a missing path or a loop.
    """
    try:
        return stat.S_IFMT(os.stat(path).st_mode)  # noqa: PTH116
    except OSError as exc:
        if exc.errno in _MISSING_ERRNOS:
            return None
        raise
    except ValueError:  # a NUL in the path
        return None


def _display_base(root: str) -> str:
    """How the display names of a matrix's files begin: its root as seen from the working directory."""
    if os.path.basename(root) == "_capabilities":  # noqa: PTH119
        return "capabilities"
    real = _resolved(root)
    rel = None if real is None else _below(real, os.path.realpath(os.getcwd()))  # noqa: PTH109
    if rel is None:
        return root
    return rel or "."


def _display(path: str, root: str, base: str | None = None) -> str:
    """The display name of ``path`` below ``root``.

    ``base`` is :func:`_display_base` of ``root``, worked out once per matrix by the caller (else here).
    """
    rel = _below(path, root) or "."
    if base is None:
        base = _display_base(root)
    shown = rel if base == "." else f"{base}/{rel}"
    return shown if shown.isprintable() else _yaml_printable(shown)


def _yaml_printable(text: str) -> str:
    from capmatrix._yaml import printable  # noqa: PLC0415 - PyYAML loads on first use

    return printable(text)


def discover(root: Path) -> list[tuple[Path, str]]:
    """The YAML files of a matrix directory, sorted, with their display names.

    :raises CapabilityErrors: for a missing or unreadable directory, too many files, too many
        bytes, or too deep a tree (symlink loops are walked once).
    """
    from pathlib import Path  # noqa: PLC0415

    return [(Path(file), shown) for file, shown in _discover(_root(root))]


def _discover(root: str) -> list[tuple[str, str]]:
    """:func:`discover` on a normal path string (:func:`_normal`), giving path strings."""

    def fail(where: str, message: str, hint: str | None = None) -> CapabilityError:
        return CapabilityError(where, None, None, "", message, hint=hint, code="E001")

    try:
        kind = _kind(root)
    except OSError as exc:  # e.g. a path component that is too long
        raise CapabilityErrors([fail(root, f"cannot read: {exc.strerror or exc}")]) from None
    if kind == stat.S_IFREG:
        return [(root, root)]
    if kind != stat.S_IFDIR:
        what = "matrix directory not found" if kind is None else "not a directory or a file"
        raise CapabilityErrors(
            [fail(root, what, hint="pass a directory of capability YAML files")]
        )
    found: list[str] = []
    sizes: dict[str, int] = {}
    total = 0
    walk_errors: list[CapabilityError] = []
    seen_dirs: set[tuple[int, int]] = set()
    real_root = _resolved(root) or root

    def leaves(path: str) -> bool:
        """Whether ``path`` (a link, or below one) resolves outside the matrix directory."""
        real = _resolved(path)
        return real is not None and _below(real, real_root) is None  # a loop: reported when read

    def outside(path: str, what: str) -> CapabilityError:
        return fail(
            _normal(_display(path, root)),
            f"{what} is a symbolic link that leads outside the matrix directory; it is not read",
            hint="copy the file into the matrix directory, or link only within it",
        )

    def on_error(exc: OSError) -> None:
        where = _normal(os.fsdecode(exc.filename)) if exc.filename else root
        walk_errors.append(fail(where, f"cannot read directory: {exc.strerror or exc}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=on_error, followlinks=True):
        here = _normal(dirpath)
        try:
            info = os.stat(here)  # noqa: PTH116
        except OSError as exc:
            walk_errors.append(fail(here, f"cannot read directory: {exc.strerror or exc}"))
            dirnames[:] = []
            continue
        if (info.st_dev, info.st_ino) in seen_dirs:
            dirnames[:] = []
            continue
        if here != root and leaves(here):
            walk_errors.append(outside(here, "this directory"))
            dirnames[:] = []
            continue
        seen_dirs.add((info.st_dev, info.st_ino))
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and not (here == root and d == EXPECT_DIR)
        )
        rel = _below(here, root)
        if dirnames and rel and rel.count("/") + 1 >= MAX_DIR_DEPTH:
            raise CapabilityErrors(
                [fail(here, f"directories nested deeper than {MAX_DIR_DEPTH} levels")]
            )
        for name in filenames:
            if not name.endswith((".yaml", ".yml")):
                continue
            file = _join(here, name)
            if leaves(file):
                walk_errors.append(outside(file, "this file"))
                continue
            found.append(file)
            with contextlib.suppress(OSError):  # reported with its name when the file is read
                sizes[file] = os.stat(file).st_size  # noqa: PTH116
                total += sizes[file]
        if len(found) > MAX_FILES:
            raise CapabilityErrors(
                [
                    fail(
                        root, f"more than {MAX_FILES} YAML files",
                        hint="point at the capabilities directory itself",
                    )
                ]
            )
        if total > MAX_TOTAL_BYTES:
            raise CapabilityErrors(
                [
                    fail(
                        root, f"YAML files add up to more than {MAX_TOTAL_BYTES} bytes",
                        hint=f"the largest: {_largest(sizes, root)}; "
                        "point at the capabilities directory itself",
                    )
                ]
            )
    if walk_errors:
        raise CapabilityErrors(walk_errors)
    base = _display_base(root)
    return sorted(((p, _display(p, root, base)) for p in found), key=lambda item: item[1])


def _largest(sizes: dict[str, int], root: str, count: int = 3) -> str:
    """The ``count`` largest files, biggest first, as ``path (N bytes)``: what to look at first."""
    top = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))[:count]
    return ", ".join(f"{_display(path, root)} ({size} bytes)" for path, size in top)


def load(path: str | os.PathLike[str] | None = None) -> Matrix:
    """Load, validate and compile a matrix (default: the shipped one).

    An installed package's shipped matrix is its compiled artifact, validated when the wheel was built
    (:mod:`capmatrix._artifact`); ``CAPMATRIX_CACHE=off`` parses and checks its YAML instead, as a
    source checkout always does.

    :raises CapabilityErrors: with every problem found, each located at ``file:line:col``.
    """
    if path is None and not _cache.turned_off() and _artifact.checkout_root() is None:
        shipped = _artifact.shipped()
        if shipped is not None:
            return shipped
    root = _root(path)
    problems: list[CapabilityError] = []
    matrix = _build(root, problems)
    if problems or matrix is None:
        raise CapabilityErrors(problems)
    with _gc_paused():
        object.__setattr__(matrix, "_compiled", compile_matrix(matrix))
    return matrix


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building objects that hold no cycles.

    Decoding a cache entry and compiling the index allocate tens of thousands of objects, each of
    which counts towards a collection; the collections they trigger find nothing to free (the values
    are trees), yet cost a sixth of a cached load. The collector is turned on again afterwards only
    when it was on before.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def iter_problems(path: str | os.PathLike[str] | None = None) -> Iterator[CapabilityError]:
    """Yield every problem of a matrix directory, sorted by location (nothing when it is clean)."""
    root = _root(path)
    problems: list[CapabilityError] = []
    try:
        _build(root, problems)
    except CapabilityErrors as exc:
        problems.extend(exc.errors)
    yield from sorted(problems, key=CapabilityError.sort_key)


def _root(path: str | os.PathLike[str] | None) -> str:
    """The matrix root of ``load(path)`` as a normal path string (the shipped matrix for None)."""
    if path is None:
        return _default_root()
    text = os.fspath(path)
    if not isinstance(text, str):
        msg = f"argument should be a str object or an os.PathLike object returning str, not {type(text)!r}"
        raise TypeError(msg)
    return _normal(text)


def _build(root: str, problems: list[CapabilityError]) -> Matrix | None:
    """The validated matrix of ``root`` (from the cache when its entry provably matches the files).

    Problems go to ``problems``; a matrix with any is never cached, and a cached one has none.
    """
    files = _discover(root)
    raws: list[tuple[str, str, bytes | None]] = []
    for file, display in files:
        try:
            raws.append((file, display, read_bytes(file, display)))
        except CapabilityErrors as exc:  # noqa: PERF203 - each file's problem is reported
            problems.extend(exc.errors)
            raws.append((file, display, None))
    inputs = [(display, raw) for _file, display, raw in raws if raw is not None]
    readable = len(inputs) == len(raws) and bool(inputs)
    if readable:
        with _gc_paused():
            cached, key = _cache.lookup(root, inputs)
        if cached is not None:
            return cached
    # A clean matrix needs the positions of entries and rules only; a problem anywhere reads the
    # files again with every position, so that each error is placed exactly as always.
    before = len(problems)  # the files that could not be read
    matrix = _parse(root, raws, problems, outline=True)
    if len(problems) > before:
        del problems[before:]
        matrix = _parse(root, raws, problems)
    if readable and matrix is not None and not problems:
        _cache.store(matrix, key, [display for display, _raw in inputs])
    return matrix


def _parse(
    root: str, raws: list[tuple[str, str, bytes | None]], problems: list[CapabilityError],
    *, outline: bool = False,
) -> Matrix | None:
    # PyYAML, the schema and the builders load on first use: a load the cache answers needs none of them
    from capmatrix import _hints, _yaml  # noqa: PLC0415
    from capmatrix._references import _Semantics  # noqa: PLC0415
    from capmatrix.schema import shape_problems  # noqa: PLC0415

    _hints.reset()
    docs: list[tuple[dict[str, Any], _yaml.SourceMap]] = []
    broken_paths: dict[str, set[tuple[str | int, ...]]] = {}
    for _file, display, raw in raws:
        if raw is None:
            continue  # reported when it was read
        try:
            data, smap = _yaml.read_raw(raw, display, outline=outline)
        except CapabilityErrors as exc:
            problems.extend(exc.errors)
            continue
        problems.extend(smap.problems)
        broken = set()
        for problem, path in shape_problems(data, smap):
            if path not in smap.rejected:  # a refused value is reported once, by the reader
                problems.append(problem)
            broken.add(path)
        if not isinstance(data, dict) or any(len(p) < 2 for p in broken):
            continue  # the file's outline is wrong: nothing below it can be trusted
        docs.append((data, smap))
        broken_paths[smap.path] = broken
    if not docs and not problems:
        problems.append(
            CapabilityError(str(root), None, None, "", "no capability files found", code="E001")
        )
    builder = _Semantics(problems, broken_paths)
    return builder.build(root, docs)
