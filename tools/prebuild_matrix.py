"""Compile the shipped matrix into the package's artifact: the wheel's build hook step, and a script.

The runtime reads the shipped matrix from ``capmatrix/_matrix.json`` (:mod:`capmatrix._shipped.artifact`),
never from YAML. This loads ``capabilities/`` here, through the loader with every check, and writes the
validated model in the artifact's format. A matrix with a problem fails the build with every problem at
``file:line:col`` (:class:`InvalidMatrix`): no wheel carries a matrix that does not validate.

``python tools/prebuild_matrix.py [OUT]`` writes the artifact of this checkout's matrix to OUT (default:
``capmatrix/_matrix.json``, which a checkout then reads while it is fresh).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The artifact's path inside the wheel (and in a checkout).
ARTIFACT = "capmatrix/_matrix.json"


class InvalidMatrix(Exception):
    """The shipped matrix does not validate: no wheel may carry it (the message lists each problem)."""


def prebuild(
    out: Path, *, source: Path = ROOT / "capabilities", package: Path = ROOT / "capmatrix"
) -> None:
    """Write the artifact of the matrix in ``source`` to ``out`` (whole or not at all).

    ``package`` is the capmatrix package the artifact goes with (its loader code enters the digest a
    checkout checks); the matrix is loaded by this checkout's loader, from a copy named as the installed
    package names it, so that its files carry the names an installed load gives them (``capabilities/...``).

    :raises InvalidMatrix: the matrix has a problem, or PyYAML or jsonschema is missing to check it.
    """
    quiet = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # modules imported here (lazily too) leave no bytecode in the checkout
    try:
        _prebuild(out, source, package)
    finally:
        sys.dont_write_bytecode = quiet


def _prebuild(out: Path, source: Path, package: Path) -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from capmatrix import errors  # noqa: PLC0415 - this checkout's package
        from capmatrix._core.record import replace  # noqa: PLC0415
        from capmatrix._shipped import artifact as _artifact  # noqa: PLC0415 - this checkout's package
        from capmatrix._shipped import payload as _cache_json  # noqa: PLC0415 - this checkout's package
        from capmatrix.authoring import loader  # noqa: PLC0415 - this checkout's package
        from capmatrix.matrix import ROOT_LABEL  # noqa: PLC0415
    finally:
        sys.path.remove(str(ROOT))
    with tempfile.TemporaryDirectory(prefix="capmatrix-prebuild-") as tmp:
        shipped = Path(tmp) / "_capabilities"
        shutil.copytree(source, shipped)
        root = str(shipped)
        before = os.environ.get("CAPMATRIX_CACHE")
        os.environ["CAPMATRIX_CACHE"] = "off"  # parsed and checked here, never read from a cache
        try:
            inputs = _artifact.inputs_digest(root, str(package))
            matrix = loader.load(root)
        except errors.CapabilityErrors as exc:  # fail closed: a matrix with a problem is never shipped
            raise InvalidMatrix(f"the shipped matrix does not validate; fix each problem (`capmatrix "
                                f"validate {source}`) and build again:\n{exc}") from None
        except ModuleNotFoundError as exc:  # PyYAML reads the matrix, jsonschema words a shape problem
            msg = f"the shipped matrix cannot be checked: {exc} (the build requires it)"
            raise InvalidMatrix(msg) from None
        finally:
            if before is None:
                del os.environ["CAPMATRIX_CACHE"]
            else:
                os.environ["CAPMATRIX_CACHE"] = before
    payload = _cache_json.dumps(replace(matrix, root=ROOT_LABEL))  # the reader names its own root
    if payload is None:
        raise InvalidMatrix("the shipped matrix holds a value the artifact format cannot (JSON)")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    partial.write_text(_artifact.text(payload, inputs), encoding="ascii")
    partial.replace(out)


if __name__ == "__main__":
    if len(sys.argv) > 2:
        sys.exit("usage: python tools/prebuild_matrix.py [OUT]")
    target = Path(sys.argv[1]) if len(sys.argv) == 2 else ROOT / ARTIFACT
    try:
        prebuild(target)
    except InvalidMatrix as exc:
        sys.exit(f"capmatrix: {exc}")
    print(f"wrote {target}")
