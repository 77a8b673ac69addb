"""One rule picks the matrix of every command: --matrix, else $CAPMATRIX_MATRIX, else a checkout's
capabilities/ found from the current directory up, else the shipped matrix; and it is announced."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capmatrix.authoring import loader
from capmatrix.authoring.cli import _common, run
from capmatrix.authoring.cli._common import MATRIX_ENV, choose_matrix

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


# --------------------------------------------------------------------------------------------------
# a working-tree matrix only from this user's own folders, up to the git work tree's root


def _tree(where: Path) -> Path:
    (where / "capabilities").mkdir(parents=True)
    (where / "capabilities" / "axes.yaml").write_text("axes: {}\n", encoding="utf-8")
    return where / "capabilities"


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MATRIX_ENV, raising=False)


@pytest.mark.usefixtures("no_env")
def test_a_matrix_planted_in_a_shared_folder_is_not_taken(tmp_path: Path) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    planted = _tree(shared)
    shared.chmod(0o1777)  # a /tmp: everyone may create entries in it
    (shared / "work").mkdir()
    choice = choose_matrix(None, cwd=shared / "work")
    assert (choice.path, choice.source) == (loader.default_path(), "the shipped matrix")
    assert choice.passed_over == (planted, "writable by every user")


@pytest.mark.usefixtures("no_env")
@pytest.mark.parametrize("whose", ["the capabilities folder", "the folder holding it", "the current folder"])
def test_a_matrix_in_another_users_folder_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whose: str
) -> None:
    planted = _tree(tmp_path / "top")
    cwd = tmp_path / "top" / "work"
    cwd.mkdir()
    other = {"the capabilities folder": planted, "the folder holding it": tmp_path / "top",
             "the current folder": cwd}[whose]
    real_stat = Path.stat
    me = os.geteuid()

    def stat(self: Path, *, follow_symlinks: bool = True) -> os.stat_result:
        st = real_stat(self, follow_symlinks=follow_symlinks)
        if self == other:  # as if another user owned it
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, me + 1, st.st_gid,
                                   st.st_size, int(st.st_atime), int(st.st_mtime), int(st.st_ctime)))
        return st

    monkeypatch.setattr(Path, "stat", stat)
    choice = choose_matrix(None, cwd=cwd)
    assert choice.source == "the shipped matrix"
    refused = None if whose == "the current folder" else (planted, "owned by another user")
    assert choice.passed_over == refused


@pytest.mark.usefixtures("no_env")
@pytest.mark.parametrize("git", ["directory", "file"])
def test_the_search_stops_at_the_git_work_tree_root(tmp_path: Path, git: str) -> None:
    _tree(tmp_path / "outer")
    repo = tmp_path / "outer" / "repo"
    (repo / "sub").mkdir(parents=True)
    if git == "directory":
        (repo / ".git").mkdir()
    else:  # a linked worktree or a submodule
        (repo / ".git").write_text("gitdir: /elsewhere\n", encoding="utf-8")
    choice = choose_matrix(None, cwd=repo / "sub")
    assert (choice.source, choice.passed_over) == ("the shipped matrix", None)
    inside = _tree(repo)
    assert choose_matrix(None, cwd=repo / "sub").path == inside


@pytest.mark.usefixtures("no_env")
def test_an_unexaminable_folder_ends_the_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path / "top")
    (tmp_path / "top" / "work").mkdir()
    real_exists = Path.exists

    def exists(self: Path) -> bool:
        if self.name == ".git" and self.parent.name == "work":
            raise PermissionError(13, "Permission denied")
        return real_exists(self)

    monkeypatch.setattr(Path, "exists", exists)
    assert choose_matrix(None, cwd=tmp_path / "top" / "work").source == "the shipped matrix"


def test_a_folder_that_cannot_be_examined_is_not_private(tmp_path: Path) -> None:
    assert _common._private_folder(tmp_path / "missing") == (
        "cannot be examined (No such file or directory)")


@pytest.mark.usefixtures("no_env")
def test_the_refusal_is_announced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    planted = _tree(shared)
    shared.chmod(0o777)
    (shared / "work").mkdir()
    monkeypatch.chdir(shared / "work")
    code, out, err = cli("validate")
    assert code == 0
    assert err == (f"capmatrix: not using {planted}: writable by every user; "
                   f"pass --matrix {planted} to use it\n")
    assert out.startswith("ok: ")


@pytest.mark.usefixtures("no_env")
@pytest.mark.parametrize("argv", [["query", "xqa", "--sm", "90", "--json"], ["select", "gen", "--json"],
                                  ["validate", "--json"], ["check", "--json"]], ids=" ".join)
def test_json_answers_name_the_matrix(
    argv: list[str], write_matrix: WriteMatrix, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = write_matrix()
    monkeypatch.chdir(tmp_path)  # tmp_path/caps is not named capabilities: only --matrix finds it
    code, out, _err = cli(*argv, "--matrix", str(root)) if argv[0] in {"query", "select"} else cli(
        *argv, str(root))
    assert code in {0, 1, 3}
    assert json.loads(out)["matrix"] == str(root)
    monkeypatch.setenv(MATRIX_ENV, str(root))
    _code, out, _err = cli(*argv)
    assert json.loads(out)["matrix"] == str(root)
    monkeypatch.delenv(MATRIX_ENV)
    if argv[0] == "query":
        _code, out, _err = cli(*argv)
        assert json.loads(out)["matrix"] == str(loader.default_path())


@pytest.mark.usefixtures("no_env")
def test_the_search_may_reach_the_filesystem_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(_common, "_private_folder", lambda _folder: None)
    assert choose_matrix(None, cwd=tmp_path).source == "the shipped matrix"


def test_print_json_names_the_matrix_only_in_an_object_without_one(tmp_path: Path) -> None:
    def printed(data: object) -> object:
        out = io.StringIO()
        _common.print_json(data, out)
        return json.loads(out.getvalue())

    _common.forget_matrix_choice()
    assert printed({"a": 1}) == {"a": 1}
    _common.announce_matrix(_common.MatrixChoice(tmp_path, "the command line"), io.StringIO())
    assert printed({"a": 1}) == {"a": 1, "matrix": str(tmp_path)}
    assert printed({"matrix": "its own"}) == {"matrix": "its own"}
    assert printed([1]) == [1]
    _common.forget_matrix_choice()
