#!/usr/bin/env python3
"""Track a new release of an engine: download it, compare it with the newest modelled release, report.

    python tools/track_release.py vllm 0.34.0                 # download, compare, print the report
    python tools/track_release.py vllm 0.34.0 --dl /work/dl   # where wheels and sources go (default:
                                                              # ~/.cache/capmatrix-releases)
    python tools/track_release.py vllm 0.34.0 --out report.md
    python tools/track_release.py vllm 0.34.0 --against 0.33.0   # against an older modelled release

What it does, in order (nothing in the repository is written; the report says what must change):

1. ``pip download ENGINE==VERSION --no-deps`` and unpacks the package's Python sources (no extension
   module is loaded or run). The wheel's name and sha256 and the commit the wheel names are the pins
   ``capabilities/releases.yaml`` takes.
2. Reads the release's own words with :mod:`ast` (vLLM: the ``AttentionBackendEnum`` members, the
   ``CacheDType`` words) and compares them with the newest modelled release's words in
   ``releases.yaml``: every word added or removed is a data change (a ``since`` / ``until``).
3. Runs the engine's importers against the new sources (vLLM: ``tools/import_vllm_backends.py extract``)
   and compares their table with the recorded table of the newest modelled release: every backend the
   table has no record for, and every class attribute that changed, is listed with its file:line.
4. Prints the commands that re-record the engine's own selection on CPU (vLLM:
   ``tools/record_vllm_selection.py``), whose records the differential tests then hold the new
   release's rules to.

The exit status is 0 when the release changes nothing the matrix records, 1 when it does (the report
lists each change), 2 when the release cannot be read (a stub wheel, no network, an unknown engine).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: How each engine's release is read: its package, the sources unpacked, where its words live.
PACKAGES = {"vllm": "vllm", "sglang": "sglang", "tensorrt_llm": "tensorrt-llm"}


class TrackError(RuntimeError):
    """The release cannot be read; the message says why and what to do."""


@dataclass
class Report:
    """What a release changes, section by section (each a list of lines)."""

    engine: str
    version: str
    pins: dict[str, str] = field(default_factory=dict)
    sections: dict[str, list[str]] = field(default_factory=dict)
    changed: bool = False

    def add(self, section: str, line: str, *, change: bool = True) -> None:
        """Add ``line`` to ``section``; ``change``: it is a change the data must follow."""
        self.sections.setdefault(section, []).append(line)
        self.changed = self.changed or change

    def markdown(self) -> str:
        """The report as Markdown: the pins, then each section, then the verdict."""
        lines = [f"# {self.engine} {self.version}", ""]
        if self.pins:
            lines += ["Pins (for `capabilities/releases.yaml`):", ""]
            lines += [f"- {k}: `{v}`" for k, v in self.pins.items()]
            lines.append("")
        for title, body in self.sections.items():
            lines += [f"## {title}", "", *body, ""]
        lines.append("Verdict: " + ("the data must change (above)." if self.changed
                                    else "nothing the matrix records changed."))
        return "\n".join(lines)


def download(engine: str, version: str, dl: Path) -> Path:
    """The release's wheel, downloaded once into ``dl``."""
    package = PACKAGES[engine]
    dl.mkdir(parents=True, exist_ok=True)
    stem = package.replace("-", "_")
    found = sorted(dl.glob(f"{stem}-{version}-*.whl"))
    if found:
        return found[0]
    run = subprocess.run(  # noqa: S603 - a fixed argument list
        [sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-deps", "--only-binary",
         ":all:", "-d", str(dl), "-q"], capture_output=True, text=True, check=False)
    found = sorted(dl.glob(f"{stem}-{version}-*.whl"))
    if run.returncode != 0 or not found:
        tail = (run.stderr or run.stdout).strip().splitlines()[-3:]
        raise TrackError(f"pip download {package}=={version} gave no wheel: {' | '.join(tail)} "
                         "(a stub package that fetches its wheel elsewhere cannot be tracked here; "
                         "read the tagged sources instead)")
    return found[0]


def unpack(wheel: Path, top: str, dl: Path) -> Path:
    """The wheel's Python sources under ``dl/<wheel stem>/`` (extension modules left out)."""
    dest = dl / wheel.name.removesuffix(".whl")
    marker = dest / ".unpacked"
    if marker.exists():
        return dest
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(f"{top}/") and name.endswith(".py"):
                z.extract(name, dest)
    marker.write_text("ok\n", encoding="utf-8")
    return dest


def sha256(path: Path) -> str:
    """The hex SHA-256 of a file (the pin browser-compat-data's releases lack and wheels have)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _commit(src: Path, top: str) -> str | None:
    version = src / top / "_version.py"
    if not version.exists():
        return None
    match = re.search(r"commit_id\s*=\s*['\"]g?([0-9a-f]{7,40})['\"]", version.read_text(encoding="utf-8"))
    return match.group(1) if match else None


# --------------------------------------------------------------------------------------------------
# vLLM's words, read with ast


def enum_members(path: Path, cls: str) -> list[str]:
    """The member names of class ``cls`` in ``path``, in order."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return [t.id for stmt in node.body if isinstance(stmt, ast.Assign)
                    for t in stmt.targets if isinstance(t, ast.Name) and t.id.isupper()]
    raise TrackError(f"{path}: no class {cls}")


def literal_words(path: Path, name: str) -> list[str]:
    """The strings of ``name = Literal[...]`` in ``path``, in order."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign | ast.AnnAssign)
                and any(isinstance(t, ast.Name) and t.id == name
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
                and isinstance(node.value, ast.Subscript)):
            return [c.value for c in ast.walk(node.value.slice)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    raise TrackError(f"{path}: no {name} = Literal[...]")


def _backends(path: Path) -> list[str]:
    return enum_members(path, "AttentionBackendEnum")


def _kv_words(path: Path) -> list[str]:
    return literal_words(path, "CacheDType")


#: vLLM's vocabularies in releases.yaml: the file each is read from, and how.
VLLM_WORDS: dict[str, tuple[str, Callable[[Path], list[str]]]] = {
    "backends": ("vllm/v1/attention/backends/registry.py", _backends),
    "kv_cache_dtypes": ("vllm/config/cache.py", _kv_words),
}


def compare_words(report: Report, engine: str, src: Path, matrix: Any, newest: str) -> None:  # noqa: ANN401
    """Each vocabulary of the new release against the words of modelled release ``newest``."""
    releases = matrix.releases[engine]
    for vocabulary, (rel, read) in VLLM_WORDS.items():
        now = read(src / rel)
        before = list(releases.words_at(vocabulary, newest))
        added = [w for w in now if w not in before]
        removed = [w for w in before if w not in now]
        title = f"Words: {vocabulary} ({rel})"
        if not added and not removed and now == before:
            report.add(title, f"- unchanged since {newest} ({len(now)} words)", change=False)
            continue
        for w in added:
            after = now[now.index(w) - 1] if now.index(w) else None
            report.add(title, f"- added `{w}`" + (f" (after `{after}`)" if after else "")
                       + f": add `{{word: {w}, since: {report.version}}}` to releases.yaml")
        for w in removed:
            report.add(title, f"- removed `{w}`: add `until: {report.version}` to it in releases.yaml")
        if not added and not removed:
            report.add(title, "- the same words in another order: releases.yaml keeps the engine's order")


_LINE = re.compile(r":\d+\b")


def _unmoved(value: object) -> str:
    """``value`` as text without line numbers: a class that only moved is no change."""
    return _LINE.sub("", json.dumps(value, sort_keys=True))


def compare_importer(report: Report, src: Path, newest: str) -> None:
    """The backend table of vLLM at the new release against modelled release ``newest``'s record."""
    recorded = ROOT / "capabilities" / "evidence" / "sources" / f"vllm_{newest}_backends.json"
    tool = ROOT / "tools" / "import_vllm_backends.py"
    run = subprocess.run([sys.executable, str(tool), "extract", "--vllm-src", str(src)],  # noqa: S603
                         capture_output=True, text=True, check=False)
    title = "Importer: tools/import_vllm_backends.py"
    if run.returncode != 0:
        report.add(title, f"- the importer failed at the new release (exit {run.returncode}): "
                   + " | ".join(run.stderr.strip().splitlines()[-3:]))
        return
    now = json.loads(run.stdout)["backends"]
    before = json.loads(recorded.read_text(encoding="utf-8"))["backends"]
    for name in now.keys() - before.keys():
        report.add(title, f"- {name}: a backend the table has no record for ({now[name].get('class')})")
    for name in before.keys() - now.keys():
        report.add(title, f"- {name}: recorded at {newest}, gone from the new sources")
    for name in sorted(now.keys() & before.keys()):
        for fact, value in now[name].items():
            old = before[name].get(fact)
            if isinstance(value, dict) and isinstance(old, dict):
                if value.get("value") != old.get("value"):
                    report.add(title, f"- {name}.{fact}: {old.get('value')} -> {value.get('value')} "
                               f"({value.get('path')}:{value.get('line')})")
            elif _unmoved(value) != _unmoved(old) and fact not in {"line", "path"}:
                report.add(title, f"- {name}.{fact}: {old} -> {value}")
    if title not in report.sections:
        report.add(title, f"- no change against {recorded.name}", change=False)


def track(engine: str, version: str, dl: Path, against: str | None = None) -> Report:
    """Download, read and compare one release; the report of what the data must change.

    ``against`` is the modelled release to compare with (default: the newest).
    """
    import capmatrix  # noqa: PLC0415 - the checkout's package, after sys.path is set

    if engine not in PACKAGES:
        raise TrackError(f"unknown engine {engine!r}; known: {', '.join(PACKAGES)}")
    matrix = capmatrix.load(ROOT / "capabilities")
    report = Report(engine=engine, version=version)
    if engine in matrix.releases and version in matrix.releases[engine].names:
        report.add("Modelled", f"- {engine} {version} is already a modelled release", change=False)
    known = matrix.releases[engine].names if engine in matrix.releases else ()
    if against is not None and against not in known:
        raise TrackError(f"--against {against!r} is not a modelled release of {engine}; "
                         f"modelled: {', '.join(known) or 'none'}")
    base = against or (matrix.releases[engine].newest if engine in matrix.releases else None)
    wheel = download(engine, version, dl)
    top = engine if engine != "tensorrt_llm" else "tensorrt_llm"
    src = unpack(wheel, top, dl)
    report.pins = {"wheel": wheel.name, "sha256": sha256(wheel)}
    commit = _commit(src, top)
    if commit:
        report.pins["commit"] = commit
    if engine == "vllm":
        compare_words(report, engine, src, matrix, str(base))
        compare_importer(report, src, str(base))
        title = "Re-record vLLM's own selection (then the differential tests hold the rules to it)"
        grid = (f"python tools/record_vllm_selection.py --vllm-src {src} "
                f"--out capabilities/evidence/vllm_{version}_selection.json")
        sample = (f"python tools/record_vllm_selection.py --vllm-src {src} --sample 1000 --seed SEED "
                  f"--out capabilities/evidence/vllm_{version}_sample.json.gz")
        report.add(title, f"```sh\n{grid}\n{sample}\n```", change=False)
    elif engine == "sglang":
        record = (f"python tools/record_sglang_selection.py --sglang-src {src} "
                  f"--out capabilities/evidence/sglang_{version}_selection.json.gz")
        report.add("Re-record SGLang's own resolution", f"```sh\n{record}\n```", change=False)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 nothing changed, 1 changes, 2 unreadable)."""
    parser = argparse.ArgumentParser(prog="track_release.py", description=__doc__.split("\n")[0])
    parser.add_argument("engine", help=f"one of {', '.join(PACKAGES)}")
    parser.add_argument("version", help="the release to track, e.g. 0.34.0")
    parser.add_argument("--dl", type=Path, default=Path(os.environ.get(
        "XDG_CACHE_HOME", Path.home() / ".cache")) / "capmatrix-releases",
        help="where wheels and unpacked sources go (outside the repository)")
    parser.add_argument("--out", type=Path, help="write the report here (Markdown) instead of stdout")
    parser.add_argument("--against", metavar="VERSION",
                        help="the modelled release to compare with (default: the newest)")
    args = parser.parse_args(argv)
    try:
        report = track(args.engine, args.version, args.dl, args.against)
    except (TrackError, OSError, zipfile.BadZipFile) as exc:
        sys.stderr.write(f"track_release.py: {exc}\n")
        return 2
    text = report.markdown() + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        with tempfile.NamedTemporaryFile("w", dir=args.out.parent, delete=False, encoding="utf-8") as tmp:
            tmp.write(text)
        Path(tmp.name).replace(args.out)
    return 1 if report.changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
