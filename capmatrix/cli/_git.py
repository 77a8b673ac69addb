"""The git plumbing of ``capmatrix diff REV``: a revision's ``capabilities/`` written to a directory."""

from __future__ import annotations

import io
import posixpath
import shutil
import subprocess
import tarfile
from pathlib import Path, PurePosixPath

from capmatrix.errors import CapmatrixError, echo

__all__ = ["RevisionError", "extract_revision", "working_tree_dir"]


def extract_revision(
    revision: str, dest: Path, *, repo: Path | None = None, subdir: str = "capabilities"
) -> Path:
    """Write ``subdir`` of git ``revision`` under ``dest`` (with ``git archive``) and return it.

    :raises RevisionError: when git is missing, the revision is unknown, or it has no ``subdir``.
    """
    cwd = repo if repo is not None else Path.cwd()
    git = shutil.which("git")
    if git is None:
        raise RevisionError(revision, "git is not installed")
    top = _git(git, cwd, revision, "rev-parse", "--show-toplevel").strip()
    _git(git, Path(top), revision, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    archive = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [git, "archive", "--format=tar", revision, "--", subdir],
        cwd=top, capture_output=True, check=False,
    )
    if archive.returncode != 0:
        message = archive.stderr.decode(errors="replace").strip()
        raise RevisionError(revision, message or f"no {subdir}/ in this revision")
    try:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            members = tar.getmembers()
            for member in members:
                problem = _unsafe(member, subdir)
                if problem is not None:
                    raise RevisionError(revision, f"{echo(member.name)} {problem}")
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, members=members, filter="data")
            else:  # pragma: no cover - Python without tarfile filters; every member was checked
                tar.extractall(dest, members=members)  # noqa: S202 - checked above
    except tarfile.TarError as exc:  # a filter's refusal or a damaged archive: a message
        raise RevisionError(revision, f"cannot unpack: {echo(str(exc), limit=200)}") from None
    return dest / subdir


def _unsafe(member: tarfile.TarInfo, subdir: str) -> str | None:
    """Why ``member`` of a revision's archive may not be written (None when it may).

    Only plain files and directories below ``subdir``, and links that stay below it, are written:
    no absolute names, no ``..``, no links out of the matrix, no devices or FIFOs.
    """
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts or name.parts[:1] != (subdir,):
        return f"lies outside {subdir}/ in the archive"
    if member.isfile() or member.isdir():
        return None
    if member.issym():
        target = PurePosixPath(member.linkname)
        if target.is_absolute():
            return "is a symbolic link to an absolute path; a matrix holds plain files"
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(member.name), member.linkname))
        if resolved.split("/")[0] != subdir:
            return f"is a symbolic link that leads outside {subdir}/; a matrix holds plain files"
        return None
    return "is neither a file, a directory nor a link within the matrix"


def working_tree_dir(*, repo: Path | None = None, subdir: str = "capabilities") -> Path | None:
    """``subdir`` of the git working tree around ``repo`` (default: the current directory), if any."""
    git = shutil.which("git")
    if git is None:
        return None
    done = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [git, "rev-parse", "--show-toplevel"], cwd=repo if repo is not None else Path.cwd(),
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        return None
    found = Path(done.stdout.strip()) / subdir
    return found if found.is_dir() else None


def _git(git: str, cwd: Path, revision: str, *args: str) -> str:
    done = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [git, *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RevisionError(revision, done.stderr.strip() or "not a git revision of this repository")
    return done.stdout


class RevisionError(CapmatrixError):
    """A git revision could not be read as a matrix."""

    def __init__(self, revision: str, message: str) -> None:
        super().__init__(revision, message)
        self.revision = revision
        self.message = message

    def __str__(self) -> str:
        return f"cannot read revision {echo(self.revision)}: {self.message}"
