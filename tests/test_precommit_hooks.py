"""The pre-commit hooks of .pre-commit-hooks.yaml, run by the real pre-commit against a scratch repository.

``pre-commit try-repo`` installs this checkout (as a snapshot commit: uncommitted work included) into
an isolated virtualenv with pip, as a user's ``pre-commit install`` would; that needs PyPI for the
build backend and capmatrix's dependencies, and nothing else. The environment is built once per run.

Each run of pre-commit costs seconds to a minute: ``make test`` runs the four hooks passing on a clean
matrix and failing together on one bad value; each hook's own failures run in ``make exhaustive``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HOOKS_FILE = ROOT / ".pre-commit-hooks.yaml"
HOOK_IDS = ("capmatrix-validate", "capmatrix-check", "capmatrix-render-check", "capmatrix-test")

AXES = """\
axes:
  sm:
    type: int
    description: compute capability
    values: [80, 90, 120]
  attention:
    type: enum
    description: attention type
    values: [gqa, mla]
    default: gqa
"""

KERNEL = """\
kernels:
  k:
    description: a kernel
    rules:
      - id: k.gqa
        grant: {sm: [80, 90, 120], attention: gqa}
        reason: the GQA path
        source: test
        status: untested
"""

ROLES = """\
roles:
  job:
    description: the one job
    candidates: [k]
"""

CASES = """\
cases:
  - kernel: k
    query: {sm: 90}
    expect: supported
    because: [k.gqa]
"""


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return env


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=_git_env(), capture_output=True, text=True,
                          check=True, timeout=120)
    return done.stdout


def _in_git_checkout() -> bool:
    if shutil.which("git") is None:
        return False
    done = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=ROOT, env=_git_env(),
                          capture_output=True, text=True, check=False)
    return done.returncode == 0 and Path(done.stdout.strip()).resolve() == ROOT


needs_git = pytest.mark.skipif(not _in_git_checkout(), reason="needs git and a git checkout")


def test_hooks_file_declares_the_four_hooks() -> None:
    hooks = yaml.safe_load(HOOKS_FILE.read_text(encoding="utf-8"))
    assert [h["id"] for h in hooks] == list(HOOK_IDS)
    for hook in hooks:
        assert hook["language"] == "python"
        assert hook["pass_filenames"] is False
        assert hook["entry"].split()[0] == "capmatrix"


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A one-commit copy of this checkout as it is now (tracked and new files, not ignored ones)."""
    repo = tmp_path_factory.mktemp("hook-repo")
    listed = _git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = repo / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "snapshot")
    return repo, _git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One pre-commit store for the module: the hook environment is installed once."""
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A user's repository with a small, clean matrix, its pages rendered and everything committed."""
    repo = tmp_path / "user"
    caps = repo / "capabilities"
    (caps / "kernels").mkdir(parents=True)
    (caps / "expect").mkdir()
    (caps / "axes.yaml").write_text(AXES, encoding="utf-8")
    (caps / "kernels" / "k.yaml").write_text(KERNEL, encoding="utf-8")
    (caps / "roles.yaml").write_text(ROLES, encoding="utf-8")
    (caps / "expect" / "cases.yaml").write_text(CASES, encoding="utf-8")
    rendered = subprocess.run(
        [sys.executable, "-m", "capmatrix", "render", "--matrix", "capabilities", "--out-dir", "docs"],
        cwd=repo, capture_output=True, text=True, check=False, timeout=120,
    )
    assert rendered.returncode == 0, rendered.stderr
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "matrix")
    return repo


def _try_repo(
    scratch: Path, hook_repo: tuple[Path, str], home: Path, *hook: str
) -> subprocess.CompletedProcess[str]:
    path, ref = hook_repo
    env = _git_env()
    env["PRE_COMMIT_HOME"] = str(home)
    env.pop("PRE_COMMIT", None)
    _git(scratch, "add", "-A")
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(path), *hook, "--ref", ref,
         "--all-files", "--color", "never"],
        cwd=scratch, env=env, capture_output=True, text=True, check=False, timeout=900,
    )


@needs_git
def test_every_hook_passes_on_a_clean_matrix(
    scratch: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    done = _try_repo(scratch, hook_repo, pre_commit_home)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    for name in ("capmatrix validate", "capmatrix check", "capmatrix render --check", "capmatrix test"):
        assert any(line.startswith(name + ".") and line.endswith("Passed") for line in out.splitlines()), out


@needs_git
@pytest.mark.exhaustive  # one hook's failure; make test runs all four failing at once, below
def test_validate_hook_fails_on_a_broken_yaml_file(
    scratch: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    kernel = scratch / "capabilities" / "kernels" / "k.yaml"
    kernel.write_text(KERNEL.replace("reason: the GQA path", "reasn: the GQA path"), encoding="utf-8")
    done = _try_repo(scratch, hook_repo, pre_commit_home, "capmatrix-validate")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "capmatrix validate" in out
    assert "Failed" in out
    assert "capabilities/kernels/k.yaml:7:9: kernels.k.rules[0].reasn: unknown key 'reasn'" in out


@needs_git
@pytest.mark.exhaustive  # one hook's failure; make test runs all four failing at once, below
def test_validate_hook_fails_on_a_yaml_syntax_error(
    scratch: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    kernel = scratch / "capabilities" / "kernels" / "k.yaml"
    kernel.write_text(KERNEL.replace("attention: gqa}", "attention: gqa"), encoding="utf-8")
    done = _try_repo(scratch, hook_repo, pre_commit_home, "capmatrix-validate")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "capabilities/kernels/k.yaml:" in out
    assert "YAML syntax error" in out


@needs_git
@pytest.mark.exhaustive  # one hook's failure; make test runs all four failing at once, below
def test_render_check_hook_fails_on_stale_pages(
    scratch: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    kernel = scratch / "capabilities" / "kernels" / "k.yaml"
    kernel.write_text(KERNEL.replace("[80, 90, 120]", "[90, 120]"), encoding="utf-8")
    done = _try_repo(scratch, hook_repo, pre_commit_home, "capmatrix-render-check")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    stale = "capmatrix: stale in docs: support-matrix.md"
    assert f"{stale}; run `capmatrix render` and commit the result" in out
    assert len(out) < 10_000  # the short diffs, never the page's embedded data


@needs_git
@pytest.mark.exhaustive  # one hook's failure; make test runs all four failing at once, below
def test_test_hook_fails_on_a_broken_expectation(
    scratch: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    cases = scratch / "capabilities" / "expect" / "cases.yaml"
    cases.write_text(CASES.replace("expect: supported", "expect: unsupported"), encoding="utf-8")
    done = _try_repo(scratch, hook_repo, pre_commit_home, "capmatrix-test")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "FAIL capabilities/expect/cases.yaml:2" in out


@needs_git
@pytest.mark.exhaustive  # one hook's failure; make test runs all four failing at once, below
def test_check_hook_fails_on_a_dead_rule(
    scratch: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    kernel = scratch / "capabilities" / "kernels" / "k.yaml"
    dead = KERNEL + (
        "      - id: k.mla\n"
        "        grant: {sm: 80, attention: mla}\n"
        "        reason: granted, then taken away whole\n"
        "        source: test\n"
        "        status: untested\n"
        "      - id: k.no_sm80\n"
        "        exclude: {sm: 80}\n"
        "        reason: nothing on SM80\n"
        "        source: test\n"
        "        status: untested\n"
    )
    kernel.write_text(dead, encoding="utf-8")
    done = _try_repo(scratch, hook_repo, pre_commit_home, "capmatrix-check")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "error C101 dead grant: k.mla" in out


@needs_git
def test_a_bad_value_is_reported_once_across_the_four_hooks(
    scratch: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    kernel = scratch / "capabilities" / "kernels" / "k.yaml"
    kernel.write_text(KERNEL.replace("status: untested", "status: untestd"), encoding="utf-8")
    done = _try_repo(scratch, hook_repo, pre_commit_home)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    lines = out.splitlines()
    for name in ("capmatrix validate", "capmatrix check", "capmatrix render --check", "capmatrix test"):
        assert any(line.startswith(name + ".") and line.endswith("Failed") for line in lines), out
    # The problem itself once (from capmatrix-validate); each other hook says so in one line.
    assert len([line for line in lines if "untestd" in line]) == 1, out
    assert "capabilities/kernels/k.yaml:9:" in next(line for line in lines if "untestd" in line)
    brief = [line for line in lines if line.startswith("capmatrix: the matrix does not load (1 problem")]
    assert len(brief) == 3, out
