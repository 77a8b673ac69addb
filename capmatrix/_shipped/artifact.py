"""The compiled matrix: the shipped matrix as one versioned JSON artifact, read with the standard library.

The build (``tools/prebuild_matrix.py``, the wheel's build hook) loads ``capabilities/`` through the
loader with every check, and writes the validated model as ``capmatrix/_matrix.json``: a header line
``capmatrix-matrix FORMAT INPUTS CHECK`` and the :mod:`capmatrix._shipped.payload` payload (every field of the
model, conditions written once). The runtime (:func:`capmatrix.resolve`, ``select``, the engine
adapters) decodes it and compiles the resolver index; it never imports PyYAML, jsonschema or the
loader. A matrix with a problem is never written: the build fails instead (fail closed).

``INPUTS`` is a BLAKE2b-256 digest of the YAML files (each one's name and bytes) and of the package's
own top-level modules and schema (their names, sizes and modification times): in a source checkout,
where ``capabilities/`` and the loader change under the artifact, an artifact whose digest differs is
stale and :func:`shipped` returns None (the face then builds the matrix with the loader, the authoring
side). An installed package reads its artifact without that check: the build wrote both.
``CHECK`` is a digest of the payload, so a truncated or damaged artifact is refused, never half read.
"""

from __future__ import annotations

import gc
import os

try:  # hashlib's own BLAKE2 module: importing hashlib would load OpenSSL first (2 ms of a cold start)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

from capmatrix._shipped.payload import decode, loads
from capmatrix.errors import InvalidFile
from capmatrix.resolver import compile_matrix

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from capmatrix.matrix import Matrix

__all__ = ["FORMAT", "NAME", "checkout_root", "inputs_digest", "read", "shipped", "text"]

#: The artifact's layout; bump it whenever the header or the payload (``_cache_json``) changes.
FORMAT = 2
#: Its file name inside the package.
NAME = "_matrix.json"
_MAGIC = "capmatrix-matrix"
#: Sub-directory of a matrix that holds expectation cases (the loader skips it too).
_EXPECT_DIR = "expect"


_REBUILD = "reinstall capmatrix, or rebuild the artifact: python tools/prebuild_matrix.py"


#: The package's folders whose modules turn YAML into a matrix (the model, the runtime's mechanics, the
#: loader and its checks), below the package: an edit to any of their modules makes a checkout's artifact
#: stale, and the loader's cache entries with it. The wings (analyses, render, CLI, engines) never do.
CODE_DIRS = (".", "_core", "_shipped", "authoring", "authoring/_yaml", "authoring/_validate")


def _package() -> str:
    return os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # noqa: PTH120 - pathlib is a tenth of a cold start


def checkout_root(package: str | None = None) -> str | None:
    """The ``capabilities/`` of the source checkout this package runs from, or None when installed."""
    package = _package() if package is None else package
    top = os.path.dirname(package)  # noqa: PTH120
    checkout = os.path.join(top, "capabilities")  # noqa: PTH118
    if (os.path.isfile(os.path.join(checkout, "axes.yaml"))  # noqa: PTH113, PTH118
            and os.path.isfile(os.path.join(top, "pyproject.toml"))):  # noqa: PTH113, PTH118
        return checkout
    return None


def _yaml_files(root: str) -> list[str]:
    """The YAML files of a matrix directory as the loader discovers them, by relative path, sorted."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and not (rel == "." and d == _EXPECT_DIR))
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        found.extend(prefix + name for name in filenames if name.endswith((".yaml", ".yml")))
    return sorted(found)


def _frame(digest: blake2b, data: bytes) -> None:
    digest.update(b"%d:" % len(data))
    digest.update(data)


def inputs_digest(root: str, package: str | None = None) -> str:
    """The digest of what the artifact is compiled from: the matrix's YAML and the package's loader code.

    Each YAML file enters by its path below ``root`` and its bytes; each module of :data:`CODE_DIRS` and
    each schema of the package by its path, size and modification time (as the interpreter checks its
    bytecode).
    """
    package = _package() if package is None else package
    digest = blake2b(f"{_MAGIC} {FORMAT}".encode(), digest_size=32)
    folders = [(folder, ".py") for folder in CODE_DIRS]
    for folder, suffix in (*folders, ("schema", ".json")):
        with os.scandir(os.path.normpath(os.path.join(package, folder))) as listing:  # noqa: PTH118
            stamps = sorted((e.name, e.stat()) for e in listing if e.name.endswith(suffix) and e.is_file())
        for name, st in stamps:
            text = f"{folder}/{name} {st.st_size} {st.st_mtime_ns}"
            _frame(digest, text.encode("utf-8", "surrogateescape"))
    for rel in _yaml_files(root):
        _frame(digest, rel.encode("utf-8", "surrogateescape"))
        with open(os.path.join(root, rel), "rb") as handle:  # noqa: PTH118, PTH123
            _frame(digest, handle.read())
    return digest.hexdigest()


def text(payload: str, inputs: str) -> str:
    """The artifact's text: its header (format, ``inputs``, the payload's checksum) and ``payload``."""
    check = blake2b(payload.encode("ascii"), digest_size=32).hexdigest()
    return f"{_MAGIC} {FORMAT} {inputs} {check}\n{payload}"


def read(path: str, *, inputs: str | None = None, root: str) -> Matrix:
    """The matrix of the artifact at ``path``, its root named ``root``.

    ``inputs``: the digest the artifact must have been compiled from (None: any, as installed).

    :raises OSError: when the file cannot be read.
    :raises capmatrix.errors.InvalidFile: for another format, another ``inputs``, a bad checksum or a
        payload in doubt.
    """
    with open(path, "rb") as handle:  # noqa: PTH123
        blob = handle.read()
    head, newline, payload = blob.partition(b"\n")
    parts = head.decode("ascii", "replace").split(" ")
    if not newline or len(parts) != 4 or parts[0] != _MAGIC:
        raise InvalidFile(path, "not a compiled capmatrix matrix", hint=_REBUILD)
    if parts[1] != str(FORMAT):
        raise InvalidFile(path, f"artifact format {parts[1]}, this capmatrix reads format {FORMAT}",
                          hint=_REBUILD)
    if inputs is not None and parts[2] != inputs:
        raise InvalidFile(path, "stale: compiled from other files than the matrix's now", hint=_REBUILD)
    if blake2b(payload, digest_size=32).hexdigest() != parts[3]:
        raise InvalidFile(path, "damaged: its checksum does not match", hint=_REBUILD)
    # The decoded model is a tree of tens of thousands of objects and holds no cycles: the collections
    # its allocations would trigger free nothing (as in the loader's ``_gc_paused``).
    was_on = gc.isenabled()
    gc.disable()
    try:
        data = loads(payload.decode("ascii"))
        data["root"] = root
        return decode(data)
    except Exception as exc:  # noqa: BLE001 - whatever a payload in doubt raises, it is refused by name
        message = f"payload not readable ({type(exc).__name__}: {exc})"
        raise InvalidFile(path, message, hint=_REBUILD) from None
    finally:
        if was_on:
            gc.enable()


def shipped(package: str | None = None) -> Matrix | None:
    """The shipped matrix from the package's artifact, or None where the loader must build it.

    None in a source checkout whose artifact is missing, stale or unreadable (the authoring side loads
    ``capabilities/`` then), and in an install that carries no artifact.

    :raises capmatrix.errors.InvalidFile: for an installed artifact that is damaged or of another format.
    """
    package = _package() if package is None else package
    path = os.path.join(package, NAME)  # noqa: PTH118
    checkout = checkout_root(package)
    if checkout is not None:
        if not os.path.isfile(path):  # noqa: PTH113
            return None
        try:
            return _compiled(read(path, inputs=inputs_digest(checkout, package), root=checkout))
        except (OSError, InvalidFile):
            return None
    try:
        matrix = read(path, root=os.path.join(package, "_capabilities"))  # noqa: PTH118
    except FileNotFoundError:
        return None
    return _compiled(matrix)


def _compiled(matrix: Matrix) -> Matrix:
    object.__setattr__(matrix, "_compiled", compile_matrix(matrix))
    return matrix
