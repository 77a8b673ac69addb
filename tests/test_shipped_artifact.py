"""The compiled matrix the runtime reads (capmatrix._shipped.artifact) and its build (prebuild_matrix)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from test_authoring_cache import deep

import capmatrix
from capmatrix._shipped import artifact as _artifact
from capmatrix._shipped import default as _default
from capmatrix.authoring import loader
from capmatrix.errors import InvalidFile
from capmatrix.query import KernelQuery

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parent.parent
QUERY = KernelQuery("xqa", sm=121, model="llama", spec_dec="one_model")

sys.path.insert(0, str(ROOT / "tools"))
try:
    from prebuild_matrix import InvalidMatrix, prebuild
finally:
    sys.path.remove(str(ROOT / "tools"))


def _package_copy(dest: Path) -> Path:
    """The package's loading modules and schema under ``dest/capmatrix`` (what the artifact reads)."""
    package = dest / "capmatrix"
    (package / "schema").mkdir(parents=True)
    for folder in _artifact.CODE_DIRS:
        (package / folder).mkdir(parents=True, exist_ok=True)
        for source in (ROOT / "capmatrix" / folder).glob("*.py"):
            shutil.copy(source, package / folder / source.name)
    for source in (ROOT / "capmatrix" / "schema").glob("*.json"):
        shutil.copy(source, package / "schema" / source.name)
    return package


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """A package laid out as a wheel installs it: modules, schema, ``_capabilities`` and the artifact."""
    package = _package_copy(Path(os.path.realpath(tmp_path)) / "site")
    shutil.copytree(ROOT / "capabilities", package / "_capabilities")
    prebuild(package / _artifact.NAME, package=package)
    return package


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A source checkout: ``pyproject.toml``, ``capabilities/`` and the package with a fresh artifact."""
    top = Path(os.path.realpath(tmp_path)) / "checkout"
    package = _package_copy(top)
    (top / "pyproject.toml").write_text("[project]\nname = 'capmatrix'\n", encoding="utf-8")
    shutil.copytree(ROOT / "capabilities", top / "capabilities")
    prebuild(package / _artifact.NAME, source=top / "capabilities", package=package)
    return package


def _parsed(root: Path, monkeypatch: pytest.MonkeyPatch) -> capmatrix.Matrix:
    with monkeypatch.context() as patch:
        patch.setenv("CAPMATRIX_CACHE", "off")
        return capmatrix.load(root)


def test_the_artifact_is_the_matrix_the_loader_builds(
    installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _artifact.shipped(str(installed))
    assert found is not None
    parsed = _parsed(installed / "_capabilities", monkeypatch)
    assert found.root == parsed.root == str(installed / "_capabilities")
    assert found.files == parsed.files
    assert found.files[0] == "capabilities/axes.yaml"  # the names an installed load gives them
    assert deep(found) == deep(parsed)  # every field, locations included
    answer = capmatrix.resolve(QUERY, found)
    assert answer.verdict == capmatrix.resolve(QUERY, parsed).verdict
    assert answer.reasons[0].path == "capabilities/kernels/xqa.yaml"


def test_an_installed_artifact_is_read_without_its_yaml(installed: Path) -> None:
    """The runtime never reads the YAML of an install: the artifact alone answers."""
    shutil.rmtree(installed / "_capabilities")
    found = _artifact.shipped(str(installed))
    assert found is not None
    assert capmatrix.resolve(QUERY, found).verdict == "supported"


def test_an_install_without_an_artifact_is_left_to_the_loader(installed: Path) -> None:
    (installed / _artifact.NAME).unlink()
    assert _artifact.shipped(str(installed)) is None


def _flip_payload(path: Path) -> None:
    blob = bytearray(path.read_bytes())
    blob[-10] ^= 1
    path.write_bytes(bytes(blob))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def _other_format(path: Path) -> None:
    head, _, payload = path.read_bytes().partition(b"\n")
    parts = head.split(b" ")
    parts[1] = b"%d" % (_artifact.FORMAT + 1)
    path.write_bytes(b" ".join(parts) + b"\n" + payload)


def _not_an_artifact(path: Path) -> None:
    path.write_bytes(b'{"root": "x"}')


@pytest.mark.parametrize(("spoil", "says"), [
    (_flip_payload, "checksum"), (_truncate, "checksum"), (_other_format, "artifact format"),
    (_not_an_artifact, "not a compiled capmatrix matrix"),
], ids=["flipped", "truncated", "format", "foreign"])
def test_a_damaged_installed_artifact_is_refused_naming_it(
    installed: Path, spoil: Callable[[Path], None], says: str
) -> None:
    """An install has no YAML to fall back on that it can trust more: a damaged artifact is an error."""
    spoil(installed / _artifact.NAME)
    with pytest.raises(InvalidFile, match=says) as caught:
        _artifact.shipped(str(installed))
    assert caught.value.path == str(installed / _artifact.NAME)
    assert "prebuild_matrix.py" in str(caught.value)  # what to do


def test_a_fresh_checkout_artifact_is_read(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = _artifact.shipped(str(checkout))
    assert found is not None
    root = checkout.parent / "capabilities"
    assert found.root == str(root)
    monkeypatch.chdir(checkout.parent)  # a load names the files from the working directory
    assert deep(found.kernels) == deep(_parsed(root, monkeypatch).kernels)


def _edit_yaml(package: Path) -> None:
    gates = package.parent / "capabilities" / "kernels" / "trtllm_gates.yaml"
    gates.write_bytes(gates.read_bytes() + b"\n# an edit\n")


def _add_yaml(package: Path) -> None:
    (package.parent / "capabilities" / "kernels" / "new.yaml").write_text("kernels: {}\n", encoding="utf-8")


def _edit_module(package: Path, name: str = "authoring/_validate/values.py") -> None:
    module = package / name
    module.write_bytes(module.read_bytes() + b"\n# an edit\n")


def _remove(package: Path) -> None:
    (package / _artifact.NAME).unlink()


@pytest.mark.parametrize("spoil", [
    _edit_yaml, _add_yaml, _edit_module, lambda p: _edit_module(p, "_core/tables.py"),
    lambda p: _edit_module(p, "model.py"), _remove,
    lambda p: _flip_payload(p / _artifact.NAME), lambda p: _other_format(p / _artifact.NAME),
], ids=["yaml", "new-file", "module", "core-module", "top-module", "removed", "flipped", "format"])
def test_a_stale_or_damaged_checkout_artifact_leaves_it_to_the_loader(
    checkout: Path, spoil: Callable[[Path], None]
) -> None:
    assert _artifact.shipped(str(checkout)) is not None
    spoil(checkout)
    assert _artifact.shipped(str(checkout)) is None


def test_an_edit_of_the_expectations_keeps_the_artifact_fresh(checkout: Path) -> None:
    """``expect/`` holds expectation cases, not matrix data: the loader skips it, and so does the digest."""
    seed = checkout.parent / "capabilities" / "expect" / "seed.yaml"
    seed.write_bytes(seed.read_bytes() + b"\n# an edit\n")
    assert _artifact.shipped(str(checkout)) is not None


def test_the_face_falls_back_to_the_loader_only_without_an_artifact(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = loader.load

    def counted(path: object = None) -> capmatrix.Matrix:
        calls.append(path)
        return real(path)  # type: ignore[arg-type]

    monkeypatch.setattr(loader, "load", counted)
    monkeypatch.setattr(_artifact, "shipped", lambda: None)
    fallback = _default._shipped()
    assert calls == [None]
    built = loader.load()
    monkeypatch.setattr(_artifact, "shipped", lambda: built)
    assert _default._shipped() is built
    assert calls == [None, None]  # the second: this test's own load
    assert capmatrix.resolve(QUERY, fallback).verdict == "supported"


def test_a_matrix_with_problems_fails_the_build_naming_each_problem(tmp_path: Path) -> None:
    """Fail closed: a wheel never carries a matrix that does not validate."""
    source = tmp_path / "caps"
    shutil.copytree(ROOT / "capabilities", source)
    gates = source / "kernels" / "trtllm_gates.yaml"
    text = gates.read_text(encoding="utf-8").replace("spec_dec: one_model\n", "spec_dec: one_modle\n", 1)
    gates.write_text(text, encoding="utf-8")
    out = tmp_path / "out" / _artifact.NAME
    with pytest.raises(InvalidMatrix) as caught:
        prebuild(out, source=source)
    text = str(caught.value)
    assert "does not validate" in text
    assert re.search(r"^capabilities/kernels/trtllm_gates\.yaml:\d+:\d+: .*'one_modle'", text, re.MULTILINE)
    assert not out.parent.exists()  # nothing written, not even a partial file


def test_a_build_without_jsonschema_still_refuses_the_matrix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(*_args: object, **_kwargs: object) -> None:
        raise ModuleNotFoundError("No module named 'jsonschema'")

    monkeypatch.setattr(loader, "load", missing)
    out = tmp_path / _artifact.NAME
    with pytest.raises(InvalidMatrix, match="cannot be checked: No module named 'jsonschema'"):
        prebuild(out)
    assert not out.exists()


def test_the_artifact_is_the_same_bytes_whatever_the_hash_seed(tmp_path: Path) -> None:
    """Sets are written in a fixed order and the root is a label: a wheel built twice carries one artifact."""
    blobs = []
    for seed in ("1", "2"):
        out = tmp_path / f"artifact-{seed}"
        subprocess.run([sys.executable, str(ROOT / "tools" / "prebuild_matrix.py"), str(out)], check=True,
                       capture_output=True, env={**os.environ, "PYTHONHASHSEED": seed})
        blobs.append(out.read_bytes())
    assert blobs[0] == blobs[1]
    assert b"capmatrix-prebuild" not in blobs[0]  # no scratch path of the build


# --------------------------------------------------------------------------------------------------
# The wheel's build hook (tools/build_hook.py)


def _hook() -> object:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import build_hook
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return build_hook.MatrixBuildHook.__new__(build_hook.MatrixBuildHook)  # no hatchling project here


def test_a_wheel_build_hands_the_artifact_over_and_leaves_no_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    hook: Any = _hook()
    data: dict[str, Any] = {"force_include": {}}
    hook.initialize("standard", data)
    inside = {where: Path(built) for built, where in data["force_include"].items()}
    assert list(inside) == ["capmatrix/_matrix.json"]
    built = inside["capmatrix/_matrix.json"]
    assert built.parent.parent == tmp_path
    assert _artifact.read(str(built), root="x").kernels.keys() == loader.load().kernels.keys()
    hook.finalize("standard", data, str(tmp_path / "capmatrix.whl"))
    assert list(tmp_path.iterdir()) == []
    hook.finalize("standard", data, str(tmp_path / "capmatrix.whl"))  # twice: nothing left to remove


def test_a_wheel_whose_matrix_does_not_validate_is_not_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import prebuild_matrix  # the module the hook's own import finds

    def invalid(_out: Path) -> None:
        raise prebuild_matrix.InvalidMatrix("capabilities/kernels/trtllm_gates.yaml:42:20: bad value")

    monkeypatch.setattr(prebuild_matrix, "prebuild", invalid)
    hook: Any = _hook()
    with pytest.raises(prebuild_matrix.InvalidMatrix, match=r"trtllm_gates\.yaml:42:20"):
        hook.initialize("standard", {"force_include": {}})
    assert list(tmp_path.iterdir()) == []  # the scratch directory is gone with the build


def test_an_editable_build_compiles_no_artifact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    hook: Any = _hook()
    data: dict[str, Any] = {"force_include": {}}
    hook.initialize("editable", data)
    assert data["force_include"] == {}
    assert list(tmp_path.iterdir()) == []
