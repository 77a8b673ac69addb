"""One rule picks the matrix of every command: --matrix, else $CAPMATRIX_MATRIX, else a checkout's
capabilities/ found from the current directory up, else the shipped matrix; and it is announced."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capmatrix import loader
from capmatrix.cli import _common, run
from capmatrix.cli._common import MATRIX_ENV, choose_matrix

if TYPE_CHECKING:
    from conftest import WriteMatrix


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(explicit=st.booleans(), env=st.booleans(), tree_level=st.one_of(st.none(), st.integers(0, 3)),
       without_axes=st.booleans())
def test_the_rule_in_order(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
    explicit: bool, env: bool, tree_level: int | None, without_axes: bool,
) -> None:
    base = tmp_path_factory.mktemp("choice")
    cwd = base / "a" / "b" / "c"
    cwd.mkdir(parents=True)
    if tree_level is not None:
        tree = [cwd, *cwd.parents][tree_level] / "capabilities"
        tree.mkdir()
        if not without_axes:
            (tree / "axes.yaml").write_text("axes: {}\n", encoding="utf-8")
    if env:
        monkeypatch.setenv(MATRIX_ENV, str(base / "from-env"))
    else:
        monkeypatch.delenv(MATRIX_ENV, raising=False)
    choice = choose_matrix(str(base / "named") if explicit else None, cwd=cwd)
    if explicit:
        assert (choice.path, choice.source) == (base / "named", "the command line")
    elif env:
        assert (choice.path, choice.source) == (base / "from-env", MATRIX_ENV)
    elif tree_level is not None and not without_axes:
        assert (choice.path, choice.source) == (tree, "the working tree")
    else:
        assert (choice.path, choice.source) == (loader.default_path(), "the shipped matrix")


@pytest.fixture
def installed_elsewhere(
    write_matrix: WriteMatrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A non-editable install (its matrix lives elsewhere) run inside a checkout with a broken tree."""
    shipped = write_matrix()
    monkeypatch.setattr(loader, "default_path", lambda: shipped)
    monkeypatch.setattr(_common, "default_path", lambda: shipped)
    monkeypatch.delenv(MATRIX_ENV, raising=False)
    checkout = tmp_path / "checkout"
    shutil.copytree(shipped, checkout / "capabilities")
    kernels = checkout / "capabilities" / "kernels" / "test.yaml"
    kernels.write_text(kernels.read_text(encoding="utf-8").replace('sm: ">=80"', 'smm: ">=80"', 1)
                       .replace("sm: '>=80'", "smm: '>=80'", 1), encoding="utf-8")
    (checkout / "sub").mkdir()
    monkeypatch.chdir(checkout / "sub")
    return checkout / "capabilities"


COMMANDS = [
    ["validate"], ["validate", "--json"], ["check"], ["check", "--json"], ["test"],
    ["query", "xqa", "--sm", "90"], ["select", "gen"], ["render", "--check", "--out-dir", "."],
    ["diff", "HEAD"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_command_uses_the_working_tree(installed_elsewhere: Path, argv: list[str]) -> None:
    assert "smm" in (installed_elsewhere / "kernels" / "test.yaml").read_text(encoding="utf-8")
    if argv[0] == "diff":
        argv = ["diff", str(loader.default_path())]  # NEW defaults to the same rule
    code, out, err = cli(*argv)
    assert code == 2 if argv[0] != "check" else code in {1, 2}
    if argv[0] in {"query", "select"}:  # the matrix loads before the command runs: errors name it
        assert f"{installed_elsewhere}/kernels/test.yaml:" in err
    else:
        assert f"capmatrix: matrix {installed_elsewhere} (from the working tree)\n" in err
    assert "unknown axis 'smm'" in out + err


def test_shipped_or_named_matrices_are_not_announced(
    write_matrix: WriteMatrix, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = write_matrix()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(MATRIX_ENV, raising=False)
    code, out, err = cli("validate", str(root))
    assert (code, err) == (0, "")
    assert out.startswith("ok: ")


def test_the_environment_variable(write_matrix: WriteMatrix, monkeypatch: pytest.MonkeyPatch,
                                  tmp_path: Path) -> None:
    root = write_matrix()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(MATRIX_ENV, str(root))
    code, out, err = cli("query", "xqa", "--sm", "90", "--json")
    assert code in {0, 1, 3}
    assert err == f"capmatrix: matrix {root} (from {MATRIX_ENV})\n"
    assert out.startswith("{")
    code, _out, err = cli("query", "xqa", "--matrix", str(root))
    assert err == ""
