"""Prebuild the shipped matrix's entry for a wheel: the build hook's second step, and a script.

A fresh install has no compiled-matrix cache yet (and some never get one: a read-only home, a
container started once), so its first ``load()`` would parse, check and build every YAML file. The
wheel carries instead ``capmatrix/_shipped_matrix.entry``: the shipped matrix loaded here, through the
loader with every check, and written in the cache's entry format under a key of the files' names
and bytes and of the package's modules (``capmatrix._cache.prebuilt_key``). The installed package
reads it only while its files are byte for byte those it was built from (``capmatrix._cache.prebuilt``).

``python tools/prebuild_matrix.py OUT`` writes the entry of this checkout's matrix to OUT.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The entry's path inside the wheel.
ENTRY = "capmatrix/_shipped_matrix.entry"


class InvalidMatrix(Exception):
    """The shipped matrix does not validate: no wheel may carry it (the message lists each problem)."""


def prebuild(
    out: Path, *, source: Path = ROOT / "capabilities", package: Path = ROOT / "capmatrix"
) -> str | None:
    """Write the entry of the matrix in ``source`` to ``out`` (whole or not at all); why not, or None.

    ``package`` is the capmatrix package the wheel ships (its modules enter the key); the matrix is
    loaded by this checkout's loader, from a copy named as the installed package names it, so that
    its files carry the names an installed load gives them (``capabilities/...``).
    """
    quiet = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # modules imported here (lazily too) leave no bytecode in the checkout
    try:
        return _prebuild(out, source, package)
    finally:
        sys.dont_write_bytecode = quiet


def _prebuild(out: Path, source: Path, package: Path) -> str | None:
    try:
        import yaml  # noqa: F401, PLC0415 - the loader's parser; a build without it ships no entry
    except ImportError:
        return "PyYAML is not installed where the wheel is built"
    sys.path.insert(0, str(ROOT))
    try:
        from capmatrix import _cache, errors, loader  # noqa: PLC0415 - this checkout's package, not an installed one
        from capmatrix._record import replace  # noqa: PLC0415
        from capmatrix.matrix import ROOT_LABEL  # noqa: PLC0415
    finally:
        sys.path.remove(str(ROOT))
    with tempfile.TemporaryDirectory(prefix="capmatrix-prebuild-") as tmp:
        shipped = Path(tmp) / "_capabilities"
        shutil.copytree(source, shipped)
        root = str(shipped)

        def read() -> list[tuple[str, bytes]]:
            return [(display, Path(path).read_bytes()) for path, display in loader._discover(root)]  # noqa: SLF001

        before = os.environ.get("CAPMATRIX_CACHE")
        os.environ["CAPMATRIX_CACHE"] = "off"  # parsed and checked here, never read from a cache
        try:
            files = read()
            matrix = loader.load(root)
            again = read()
        except errors.CapabilityErrors as exc:  # fail closed: a matrix with a problem is never shipped
            raise InvalidMatrix(f"the shipped matrix does not validate; fix each problem (`capmatrix "
                                f"validate {source}`) and build again:\n{exc}") from None
        except ModuleNotFoundError as exc:  # jsonschema words a shape problem: the matrix has one
            raise InvalidMatrix(f"the shipped matrix does not validate, and {exc} is needed to say where; "
                                f"run `capmatrix validate {source}`") from None
        except Exception as exc:  # noqa: BLE001 - anything else: no entry, the package works without it
            return f"the shipped matrix could not be loaded: {type(exc).__name__}: {exc}"
        finally:
            if before is None:
                del os.environ["CAPMATRIX_CACHE"]
            else:
                os.environ["CAPMATRIX_CACHE"] = before
    if files != again or tuple(name for name, _raw in files) != matrix.files:
        return "the matrix's files changed while it was built"
    text = _cache.entry_text(replace(matrix, root=ROOT_LABEL), _cache.prebuilt_key(str(package), files))
    if text is None:
        return "the shipped matrix holds a value the entry format cannot"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    partial.write_text(text, encoding="ascii")
    partial.replace(out)
    return None


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/prebuild_matrix.py OUT")
    try:
        problem = prebuild(Path(sys.argv[1]))
    except InvalidMatrix as exc:
        sys.exit(f"capmatrix: {exc}")
    if problem is not None:
        sys.exit(f"capmatrix: no prebuilt entry: {problem}")
    print(f"wrote {sys.argv[1]}")
