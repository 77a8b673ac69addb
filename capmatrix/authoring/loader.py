"""Load capability YAML files into a validated :class:`Matrix`: discovery and reading.

Then the shape (:mod:`capmatrix.authoring.schema`), the values (:mod:`capmatrix.authoring._validate.values`)
and the references (:mod:`capmatrix.authoring._validate.references`), with the compiled-matrix cache
(:mod:`capmatrix.authoring._cache`) in front.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import stat

from capmatrix._core.record import replace
from capmatrix._shipped import artifact as _artifact
from capmatrix.authoring import _cache
from capmatrix.authoring._files import read_bytes
from capmatrix.errors import CapabilityError, CapabilityErrors
from capmatrix.resolver import compile_matrix

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Any

    from capmatrix.authoring._validate.values import ENUM_VALUE, RESERVED_AXIS_NAMES, open_domains
    from capmatrix.authoring._yaml import read as _yaml
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
        from capmatrix.authoring._validate import values as _values  # noqa: PLC0415

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
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # noqa: PTH120
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
    from capmatrix.authoring._yaml.read import printable  # noqa: PLC0415 - PyYAML loads on first use

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


def load(path: str | os.PathLike[str] | None = None, *, isolate: bool = False) -> Matrix:
    """Load, validate and compile a matrix (default: the shipped one).

    An installed package's shipped matrix is its compiled artifact, validated when the wheel was built
    (:mod:`capmatrix._shipped.artifact`); ``CAPMATRIX_CACHE=off`` parses and checks its YAML instead, as a
    source checkout always does.

    ``isolate``: where every problem lies in files whose kernels all name their engine (``engine:``),
    leave those engines out rather than fail: the rest is validated again without those files (and
    without the gates and roles that name their kernels), then every kernel and role of those engines
    is left out too. The matrix answers the other engines; a question about what it left out raises
    the problems (:attr:`Matrix.quarantine`, :attr:`Matrix.left_out`). Problems anywhere else (axes,
    models, roles, an engine-free kernel, a file that names no engine) still fail the whole load.

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
        partial = _isolated(root, problems) if isolate and problems else None
        if partial is None:
            raise CapabilityErrors(problems)
        matrix = partial
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
    *, outline: bool = False, prune: Callable[[list[dict[str, Any]]], None] | None = None,
) -> Matrix | None:
    # PyYAML, the schema and the builders load on first use: a load the cache answers needs none of them
    from capmatrix.authoring._validate import hints as _hints  # noqa: PLC0415
    from capmatrix.authoring._validate.references import _Semantics  # noqa: PLC0415
    from capmatrix.authoring._yaml import read as _yaml  # noqa: PLC0415
    from capmatrix.authoring.schema import shape_problems  # noqa: PLC0415

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
    if prune is not None:
        prune([data for data, _smap in docs])
    builder = _Semantics(problems, broken_paths)
    return builder.build(root, docs)


# --------------------------------------------------------------------------------------------------
# Isolating an engine whose files have problems (load(path, isolate=True))


def _isolated(root: str, problems: list[CapabilityError]) -> Matrix | None:
    """The matrix without the engines of the files that have ``problems``, or None where it cannot be.

    None (the whole load fails) unless every problem lies in a file whose every kernel names its engine
    and which declares nothing but kernels, and the rest validates on its own: the broken files' kernels
    left out, with the gates and roles that name one of them (and so on). Of what validates, the kernels
    of those engines and the roles of only those engines are then left out too, so that every question
    about a broken engine raises its problems, not an answer from its healthy half.
    """
    try:
        files = {display: file for file, display in _discover(root)}
    except CapabilityErrors:
        return None
    by_file: dict[str, list[CapabilityError]] = {}
    for problem in problems:
        by_file.setdefault(problem.path, []).append(problem)
    engine_problems: dict[str, list[CapabilityError]] = {}
    went: dict[str, set[str]] = {}  # kernel or role left out -> the broken engines it went with
    for display, found in by_file.items():
        file = files.get(display)
        scope = None if file is None else _engine_scope(file, display)
        if scope is None:
            return None
        for name, engine in scope.items():
            went[name] = {engine}
            engine_problems.setdefault(engine, []).extend(found)

    def prune(docs: list[dict[str, Any]]) -> None:
        """Leave out, until none is left, each gate or role that names what was left out."""
        while True:
            before = len(went)
            for data in docs:
                for section, named in (("kernels", _guard_targets), ("roles", _role_candidates)):
                    entries = data.get(section)
                    if not isinstance(entries, dict):
                        continue
                    for name, raw in list(entries.items()):
                        hit = {e for n in named(raw) if n in went for e in went[n]}
                        if hit:
                            went[name] = hit
                            del entries[name]
            if len(went) == before:
                return

    raws: list[tuple[str, str, bytes | None]] = [
        (file, display, read_bytes(file, display))
        for display, file in files.items() if display not in by_file
    ]
    again: list[CapabilityError] = []
    try:
        matrix = _parse(root, raws, again, prune=prune)
    except CapabilityErrors:
        return None
    if again or matrix is None:
        return None
    engines = set(engine_problems)
    for name, kernel in matrix.kernels.items():
        if kernel.engine in engines:
            went[name] = {kernel.engine}
    kernels = {n: k for n, k in matrix.kernels.items() if n not in went}
    for name, role in matrix.roles.items():
        mine = {matrix.kernels[c].engine for c in role.candidates if c in matrix.kernels} - {None}
        hit = {e for c in role.candidates if c in went for e in went[c]}
        if hit or (mine and mine <= engines):
            went[name] = hit or {e for e in mine if e is not None}
    roles = {n: r for n, r in matrix.roles.items() if n not in went}

    def problems_of(engines: set[str]) -> tuple[CapabilityError, ...]:
        return tuple(sorted({p for e in engines for p in engine_problems[e]}, key=CapabilityError.sort_key))

    return replace(matrix, kernels=kernels, roles=roles,
                   left_out={engine: problems_of({engine}) for engine in sorted(engines)},
                   quarantine={name: problems_of(engines) for name, engines in went.items()})


def _guard_targets(raw: object) -> list[str]:
    """Every kernel or role name a kernel's ``guards`` names (a gate's targets)."""
    guards = raw.get("guards") if isinstance(raw, dict) else None
    targets = guards.get("targets") if isinstance(guards, dict) else guards
    return [t for t in targets if isinstance(t, str)] if isinstance(targets, list) else []


def _role_candidates(raw: object) -> list[str]:
    """Every name a role's entry lists: candidates, its orders' candidates, the roles it asks first.

    A role that asks a left-out role first goes with it, as one that names a left-out kernel does.
    """
    if not isinstance(raw, dict):
        return []
    lists = [raw.get("candidates"), raw.get("asks_first")]
    orders = raw.get("orders")
    if isinstance(orders, list):
        lists += [o.get("candidates") for o in orders if isinstance(o, dict)]
    return [c for candidates in lists if isinstance(candidates, list)
            for c in candidates if isinstance(c, str)]


def _engine_scope(file: str, display: str) -> dict[str, str] | None:
    """The engine of each kernel of ``file``; None unless it holds kernels only, each naming its engine.

    Read by the loader's own reader, within its limits (the file may be hostile); a file it refuses (a
    syntax error) is read line by line instead: its top-level keys, the kernels' names (two spaces in)
    and their ``engine:`` lines (four spaces in).
    """
    from capmatrix.authoring._yaml import read as _yaml  # noqa: PLC0415 - PyYAML loads on first use

    try:
        raw = read_bytes(file, display)
    except CapabilityErrors:
        return None
    try:
        data, _smap = _yaml.read_raw(raw, display)
    except CapabilityErrors:
        try:
            return _engine_scope_of_lines(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return None
    if not isinstance(data, dict) or set(data) != {"kernels"} or not isinstance(data["kernels"], dict):
        return None
    scope = {}
    for name, entry in data["kernels"].items():
        engine = entry.get("engine") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not isinstance(engine, str):
            return None
        scope[name] = engine
    return scope or None


def _engine_scope_of_lines(text: str) -> dict[str, str] | None:
    """:func:`_engine_scope` of a file PyYAML cannot read: its lines in the shipped files' layout."""
    import re  # noqa: PLC0415

    top = re.findall(r"^([A-Za-z_][\w-]*):", text, re.MULTILINE)
    if top != ["kernels"]:
        return None
    scope: dict[str, str | None] = {}
    current: str | None = None
    for line in text.splitlines():
        if (m := re.fullmatch(r"  ([A-Za-z_][\w.-]*):\s*(#.*)?", line)) is not None:
            current = m.group(1)
            scope[current] = None
        elif current is not None and (m := re.fullmatch(r"    engine:\s*([\w-]+)\s*(#.*)?", line)):
            scope[current] = m.group(1)
    if not scope or any(engine is None for engine in scope.values()):
        return None
    return {name: engine for name, engine in scope.items() if engine is not None}
