"""Build the compiled diagram core (``capmatrix/analysis/_core.c``): a hatchling build hook, and a script.

The package works without it (``capmatrix/analysis/_pycore.py`` is the same core in Python), so a
build with no C compiler at hand warns and goes on. The compiler is the one this Python was built
with (``sysconfig``'s ``CC``); the source's SHA-256 is compiled in, and the package uses the core only
while it matches the source beside it. A wheel carries the built module; an editable install builds
it next to the source, as ``python tools/build_core.py`` does.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "capmatrix" / "analysis" / "_core.c"
#: The module's path inside the package, with this interpreter's extension suffix.
MODULE = "capmatrix/analysis/_core" + str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def compile_core(out: Path) -> str | None:
    """Compile the core into ``out`` (written whole or not at all); the reason it was not, or None."""
    if sys.platform == "win32":
        return "the compiled core is built with a Unix C compiler; Windows uses the Python core"
    compiler = shlex.split(str(sysconfig.get_config_var("CC") or "cc"))
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    flags = ["-O2", "-fPIC", "-shared", "-std=c11", f"-I{sysconfig.get_paths()['include']}",
             f'-DCORE_SOURCE_SHA256="{digest}"']
    if sys.platform == "darwin":
        flags += ["-undefined", "dynamic_lookup"]
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=".core-", suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        done = subprocess.run([*compiler, *flags, str(SOURCE), "-o", partial],  # noqa: S603 - this Python's CC
                              capture_output=True, text=True, check=False)
    except OSError as exc:
        Path(partial).unlink(missing_ok=True)
        return f"no C compiler ({compiler[0]}: {exc.strerror})"
    if done.returncode != 0:
        Path(partial).unlink(missing_ok=True)
        return f"{compiler[0]} failed:\n{done.stderr.strip()}"
    Path(partial).replace(out)
    return None


def _warn(reason: str) -> None:
    print(f"capmatrix: the compiled diagram core was not built ({reason}); the analyses use the "
          "pure-Python core, the same answers more slowly.", file=sys.stderr)


def _prebuild_entry(scratch: Path, build_data: dict[str, Any]) -> None:
    """Put the shipped matrix's prebuilt entry in the wheel (a warning, and none, where it fails).

    :raises InvalidMatrix: the shipped matrix has a problem (each at file:line:col): the build fails.
    """
    sys.path.insert(0, str(ROOT / "tools"))
    quiet, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no bytecode left in the checkout
    try:
        from prebuild_matrix import ENTRY, InvalidMatrix, prebuild  # noqa: PLC0415 - beside this hook
    finally:
        sys.path.remove(str(ROOT / "tools"))
        sys.dont_write_bytecode = quiet
    entry = scratch / Path(ENTRY).name
    try:
        reason = prebuild(entry)
    except InvalidMatrix:  # fail closed: a wheel never carries a matrix that does not validate
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    except Exception as exc:  # noqa: BLE001 - the package works without the entry: never fail a build
        reason = f"{type(exc).__name__}: {exc}"
    if reason is None:
        build_data["force_include"][str(entry)] = ENTRY
    else:
        print(f"capmatrix: the wheel carries no prebuilt matrix ({reason}); its first load parses the "
              "YAML, as without a cache.", file=sys.stderr)


if TYPE_CHECKING:
    BuildHookInterface = object
else:
    try:
        from hatchling.builders.hooks.plugin.interface import BuildHookInterface
    except ImportError:  # run as a script, outside a build
        BuildHookInterface = object


class CoreBuildHook(BuildHookInterface):
    """Compile the core into the wheel (or, for an editable install, beside its source).

    A wheel also carries the shipped matrix's prebuilt entry (``tools/prebuild_matrix.py``); an
    editable install reads the checkout's matrix, which changes under it, and gets none.
    """

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Build the core for this wheel; ``CAPMATRIX_NO_CORE=1`` builds a pure-Python one."""
        if version != "editable":
            self._scratch: str = tempfile.mkdtemp(prefix="capmatrix-core-")
            _prebuild_entry(Path(self._scratch), build_data)
        if os.environ.get("CAPMATRIX_NO_CORE", "") not in ("", "0"):
            return
        if version == "editable":
            reason = compile_core(ROOT / MODULE)
        else:
            built = Path(self._scratch) / Path(MODULE).name
            reason = compile_core(built)
            if reason is None:
                build_data["force_include"][str(built)] = MODULE
                build_data["pure_python"] = False
                build_data["infer_tag"] = True
        if reason is not None:
            _warn(reason)

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:  # noqa: ARG002
        """The wheel holds its copy of the core now: remove the scratch directory it was built in."""
        scratch: str | None = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
            del self._scratch


if __name__ == "__main__":
    problem = compile_core(ROOT / MODULE)
    if problem is not None:
        _warn(problem)
        sys.exit(1)
    print(f"built {MODULE}")
