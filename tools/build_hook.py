"""The wheel's build hook: compile the shipped matrix into the package's artifact, ``capmatrix/_matrix.json``.

A wheel carries the artifact the runtime reads (:mod:`capmatrix._shipped.artifact`); building one from
a matrix that does not validate fails with every problem at ``file:line:col`` (``tools/prebuild_matrix.py``).
An editable install reads the checkout's matrix, which changes under it, and gets no artifact (the
checkout builds from YAML until ``python tools/prebuild_matrix.py`` writes a fresh one).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent

if TYPE_CHECKING:
    BuildHookInterface = object
else:
    try:
        from hatchling.builders.hooks.plugin.interface import BuildHookInterface
    except ImportError:  # imported outside a build (the tests)
        BuildHookInterface = object


def compile_artifact(scratch: Path, build_data: dict[str, Any]) -> None:
    """Compile the artifact into ``scratch`` and hand it to the wheel.

    :raises InvalidMatrix: the shipped matrix has a problem (each at file:line:col): the build fails.
    """
    sys.path.insert(0, str(ROOT / "tools"))
    quiet, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no bytecode left in the checkout
    try:
        from prebuild_matrix import ARTIFACT, prebuild  # noqa: PLC0415 - beside this hook
    finally:
        sys.path.remove(str(ROOT / "tools"))
        sys.dont_write_bytecode = quiet
    artifact = scratch / Path(ARTIFACT).name
    prebuild(artifact)
    build_data["force_include"][str(artifact)] = ARTIFACT


class MatrixBuildHook(BuildHookInterface):
    """Compile the matrix artifact into a wheel (not into an editable install)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile the artifact for this wheel, in a scratch directory :meth:`finalize` removes."""
        if version == "editable":
            return
        self._scratch: str = tempfile.mkdtemp(prefix="capmatrix-build-")
        try:
            compile_artifact(Path(self._scratch), build_data)
        except BaseException:  # fail closed, and leave no scratch behind
            shutil.rmtree(self._scratch, ignore_errors=True)
            del self._scratch
            raise

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:  # noqa: ARG002
        """The wheel holds its copy of the artifact now: remove the scratch directory."""
        scratch: str | None = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
            del self._scratch
