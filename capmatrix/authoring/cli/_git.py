"""The git plumbing of ``capmatrix diff REV``: a revision's ``capabilities/`` written to a directory.

The revision's files are read with ``git ls-tree`` and ``git cat-file``, which see the committed
objects only: no ``.gitattributes`` of the revision (``export-ignore``, ``export-subst``) and no
filters can hide or change a file, as they could through ``git archive``. The loader's limits
apply before a blob is read: its size comes from the tree listing.
"""

from __future__ import annotations

import posixpath
import shutil
import subprocess
from pathlib import Path, PurePosixPath

from capmatrix.authoring._files import MAX_FILE_BYTES
from capmatrix.authoring.loader import MAX_FILES, MAX_TOTAL_BYTES
from capmatrix.errors import CapmatrixError, echo

__all__ = ["RevisionError", "extract_revision", "working_tree_dir"]

#: Entries of any kind a revision's matrix directory may list (the YAML files are bounded by the
#: loader's own MAX_FILES; other files are not written).
MAX_ENTRIES = 20 * MAX_FILES
#: The longest symbolic link target read.
MAX_LINK_BYTES = 4096
_FILE_MODES = frozenset({"100644", "100755"})
_LINK_MODE = "120000"


def extract_revision(
    revision: str, dest: Path, *, repo: Path | None = None, subdir: str = "capabilities"
) -> Path:
    """Write ``subdir`` of git ``revision`` under ``dest`` and return it.

    What the loader may read is written: the YAML files, the symbolic links that stay below
    ``subdir`` and the files they name; other files are left out.

    :raises RevisionError: when git is missing, the revision is unknown, it has no ``subdir``, an
        entry is unsafe (a link out, a submodule) or the files exceed the loader's limits.
    """
    cwd = repo if repo is not None else Path.cwd()
    git = shutil.which("git")
    if git is None:
        raise RevisionError(revision, "git is not installed")
    top = Path(_git(git, cwd, revision, "rev-parse", "--show-toplevel").strip())
    _git(git, top, revision, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    entries = _list(git, top, revision, subdir)
    for mode, _oid, _size, name in entries:
        problem = _unsafe(name, mode, subdir)
        if problem is not None:
            raise RevisionError(revision, f"{echo(name)} {problem}")
    links = [(name, oid, size) for mode, oid, size, name in entries if mode == _LINK_MODE]
    for name, _oid, size in links:
        if size > MAX_LINK_BYTES:
            raise RevisionError(revision, f"{echo(name)} is a symbolic link of {size} bytes")
    targets = {oid: data.decode("utf-8", "surrogateescape")
               for oid, data in _cat(git, top, revision, [oid for _name, oid, _size in links]).items()}
    linked = set()
    for name, oid, _size in links:
        problem = _unsafe(name, _LINK_MODE, subdir, targets[oid])
        if problem is not None:
            raise RevisionError(revision, f"{echo(name)} {problem}")
        linked.add(posixpath.normpath(posixpath.join(posixpath.dirname(name), targets[oid])))
    # The YAML files, and the files a link names (whatever their names): what the loader may read.
    wanted: list[tuple[str, str, str]] = [(name, _LINK_MODE, oid) for name, oid, _size in links]
    total = files = 0
    for mode, oid, size, name in entries:
        if mode == _LINK_MODE or not (name.endswith((".yaml", ".yml")) or name in linked):
            continue
        if size > MAX_FILE_BYTES:
            raise RevisionError(
                revision, f"{echo(name)} is {size} bytes; a capability file has at most {MAX_FILE_BYTES}"
            )
        files += 1
        total += size
        if files > MAX_FILES or total > MAX_TOTAL_BYTES:
            raise RevisionError(
                revision, f"{subdir}/ holds more than {MAX_FILES} YAML files or "
                f"{MAX_TOTAL_BYTES} bytes of them; the loader reads no more"
            )
        wanted.append((name, mode, oid))
    blobs = _cat(git, top, revision, [oid for _name, mode, oid in wanted if mode != _LINK_MODE])
    for name, mode, oid in wanted:
        target = dest.joinpath(*PurePosixPath(name).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == _LINK_MODE:
            target.symlink_to(targets[oid])
        else:
            target.write_bytes(blobs[oid])
    return dest / subdir


def _list(git: str, top: Path, revision: str, subdir: str) -> list[tuple[str, str, int, str]]:
    """``(mode, object, size, path)`` of every entry below ``subdir`` at ``revision``.

    At most :data:`MAX_ENTRIES`, read as they come: a huge tree is refused, not held.
    """
    with subprocess.Popen(  # noqa: S603 - fixed argv, no shell
        [git, "ls-tree", "-r", "-z", "-l", "--full-tree", revision, "--", subdir],
        cwd=top, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None  # noqa: S101 - stdout=PIPE
        out: list[tuple[str, str, int, str]] = []
        pending = b""
        while chunk := proc.stdout.read(1 << 16):
            *done, pending = (pending + chunk).split(b"\0")
            for raw in done:
                meta, _tab, path = raw.partition(b"\t")
                mode, _kind, oid, size = meta.decode("ascii").split()
                out.append((mode, oid, int(size) if size.isdigit() else 0,
                            path.decode("utf-8", "surrogateescape")))
            if len(out) > MAX_ENTRIES:
                proc.kill()
                raise RevisionError(revision, f"{subdir}/ lists more than {MAX_ENTRIES} entries")
        error = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
    if proc.returncode != 0:
        raise RevisionError(revision, error or f"cannot list {subdir}/")
    if not out:
        raise RevisionError(revision, f"no {subdir}/ in this revision")
    return out


def _cat(git: str, top: Path, revision: str, oids: list[str]) -> dict[str, bytes]:
    """The raw bytes of these blobs (``git cat-file --batch``: no filters, no attributes)."""
    if not oids:
        return {}
    done = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [git, "cat-file", "--batch"], cwd=top, input="\n".join(oids).encode() + b"\n",
        capture_output=True, check=False,
    )
    if done.returncode != 0:
        raise RevisionError(revision, done.stderr.decode(errors="replace").strip() or "cannot read blobs")
    blobs: dict[str, bytes] = {}
    data, at = done.stdout, 0
    for oid in oids:
        end = data.index(b"\n", at)
        header = data[at:end].decode("ascii").split()
        if len(header) != 3 or header[1] != "blob":  # "<oid> blob <size>"
            raise RevisionError(revision, f"object {oid} is not a file")
        size = int(header[2])
        blobs[oid] = data[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return blobs


def _unsafe(name: str, mode: str, subdir: str, link: str | None = None) -> str | None:
    """Why entry ``name`` (git ``mode``; ``link``: a link's target) may not be written (None: it may).

    Only plain files below ``subdir``, and links that stay below it, are written: no absolute names,
    no ``..``, no links out of the matrix, no submodules.
    """
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or path.parts[:1] != (subdir,) or len(path.parts) < 2:
        return f"lies outside {subdir}/ in the revision"
    if mode in _FILE_MODES:
        return None
    if mode != _LINK_MODE:
        return "is neither a file nor a link (a submodule?); a matrix holds plain files"
    if link is None:
        return None
    if PurePosixPath(link).is_absolute():
        return "is a symbolic link to an absolute path; a matrix holds plain files"
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), link))
    if resolved.split("/")[0] != subdir:
        return f"is a symbolic link that leads outside {subdir}/; a matrix holds plain files"
    return None


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
