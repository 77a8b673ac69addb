"""The compiled-matrix cache (capmatrix.authoring._cache): used only when it provably matches the YAML."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import math
import os
import random
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import capmatrix
from capmatrix import resolver
from capmatrix.authoring import _cache, loader
from capmatrix.authoring.export import export
from capmatrix.errors import CapabilityError, CapabilityErrors
from capmatrix.query import KernelQuery

if TYPE_CHECKING:
    from collections.abc import Callable

HOSTILE = Path(__file__).parent / "hostile"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache on, in a fresh directory."""
    directory = tmp_path / "cache"
    monkeypatch.delenv("CAPMATRIX_CACHE", raising=False)
    monkeypatch.setenv("CAPMATRIX_CACHE_DIR", str(directory))
    return directory


def entries(directory: Path) -> list[Path]:
    """The cache's entries under cache directory ``directory``."""
    sub = directory / _cache.SUBDIR
    return sorted(sub.glob("matrix-*.json")) if sub.is_dir() else []


def deep(value: object) -> object:
    """Every field of a model value, also those equality leaves out (locations of axes).

    Memos (fields ``__init__`` does not take: what an axis rendered so far) are not the value.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, *(
            (f.name, deep(getattr(value, f.name)))
            for f in dataclasses.fields(value) if f.name != "_compiled" and f.init
        ))
    if isinstance(value, dict):
        return tuple((deep(k), deep(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *(deep(v) for v in value))
    if isinstance(value, frozenset):
        return ("frozenset", *sorted(repr(v) for v in value))
    return (type(value).__name__, value)


def answers(matrix: capmatrix.Matrix, count: int = 300) -> list[object]:
    """Verdicts, reasons and selections of random queries over every kernel and role."""
    rng = random.Random(7)  # noqa: S311 - reproducible test inputs
    out: list[object] = []
    for _ in range(count):
        values: dict[str, Any] = {
            name: rng.choice(axis.values) for name, axis in matrix.axes.items() if rng.random() < 0.7
        }
        kernel = rng.choice(sorted(matrix.kernels))
        resolution = capmatrix.resolve(KernelQuery(kernel, **values), matrix)
        out.append(resolution.as_dict())
        query = KernelQuery("", **values)
        out.extend(capmatrix.select(role, query, matrix).as_dict() for role in matrix.roles)
    return out


def load_without_cache(path: Path | None, monkeypatch: pytest.MonkeyPatch) -> capmatrix.Matrix:
    with monkeypatch.context() as m:
        m.setenv("CAPMATRIX_CACHE", "off")
        return capmatrix.load(path)


def parse_forbidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a load that parses the YAML fail: what loads must come from the cache."""

    def boom(*_args: object) -> None:
        msg = "parsed although the cache should have answered"
        raise AssertionError(msg)

    monkeypatch.setattr(loader, "_parse", boom)


# --------------------------------------------------------------------------------------------------
# a hit is the matrix a cold load gives



def _parses(monkeypatch: pytest.MonkeyPatch, root: Path) -> int:
    """How many times loading ``root`` parses YAML (0: answered from the cache)."""
    calls = []
    real = loader._parse

    def counting(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(loader, "_parse", counting)
    capmatrix.load(root)
    monkeypatch.setattr(loader, "_parse", real)
    return len(calls)

@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_the_shipped_matrix_from_the_cache_equals_a_cold_load(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = load_without_cache(None, monkeypatch)
    assert entries(cache) == []
    first = capmatrix.load()  # a miss: loads and writes the entry
    assert len(entries(cache)) == 1
    parse_forbidden(monkeypatch)
    hit = capmatrix.load()
    assert hit is not first
    assert hit == cold
    assert deep(hit) == deep(cold)
    assert export(hit) == export(cold)
    assert answers(hit) == answers(cold)


def test_iter_problems_of_a_cached_matrix_is_empty_without_parsing(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert list(capmatrix.iter_problems()) == []  # a clean validation writes the entry
    assert len(entries(cache)) == 1
    parse_forbidden(monkeypatch)
    assert list(capmatrix.iter_problems()) == []
    capmatrix.load()


def test_a_matrix_with_derived_axes_orders_and_optional_axes_round_trips(
    cache: Path, monkeypatch: pytest.MonkeyPatch, write_matrix: Callable[..., Path]
) -> None:
    """Every kind of value the model holds (the shipped matrix may not use them all) survives."""
    root = write_matrix({
        "axes.yaml": """\
            axes:
              sm: {type: int, description: sm, values: [80, 90, 120], families: {hopper: [90]}}
              kind: {type: enum, description: kind, values: [a, b], optional: true}
              env: {type: enum, description: env, values: [x, y], default: x, environment: true}
              flag: {type: bool, description: flag, default: false}
              ver:
                type: int
                description: derived
                values: [2, 3]
                derive:
                  - {when: {sm: ">=90"}, value: 3}
                  - {value: 2}
            """,
        "kernels/test.yaml": """\
            kernels:
              k:
                description: one
                kind: gate
                engine: trtllm
                source: somewhere
                rules:
                  - id: k.a
                    grant: {sm: {not: [80]}, kind: a, flag: true}
                    reason: r
                    source: s
                    status: verified
                    verified: {evidence: probe.json, gpu: h100, date: "2026-01-01", software: x}
                  - id: k.b
                    exclude: {ver: 3, sm: [{multiple_of: 40}, "[100, 130)"]}
                    reason: r
                    source: s
                    status: known_issue
              j:
                description: two
                rules:
                  - id: j.a
                    grant: {sm: hopper}
                    reason: r
                    source: s
                    status: untested
            """,
        "models.yaml": """\
            models:
              m:
                description: model
                axes: {sm: 90, kind: b}
                source: s
                hf_model_types: [mm]
                hf_ids: [org/m-1]
                hf_config: {hidden: 4096, ratio: 0.5, names: [a, b], nested: {x: null}}
            """,
        "roles.yaml": """\
            roles:
              r:
                description: role
                axes: {flag: true}
                orders:
                  - when: {sm: 120}
                    candidates: [j, k]
                  - candidates: [k]
            """,
    })
    cold = load_without_cache(root, monkeypatch)
    assert cold.derived
    assert any(role.orders for role in cold.roles.values())
    capmatrix.load(root)
    parse_forbidden(monkeypatch)
    hit = capmatrix.load(root)
    assert deep(hit) == deep(cold)
    assert answers(hit) == answers(cold)


# --------------------------------------------------------------------------------------------------
# a miss whenever the input or the loader differs


def test_changed_bytes_are_a_miss(cache: Path, write_matrix: Callable[..., Path]) -> None:
    root = write_matrix()
    first = capmatrix.load(root)
    kernels = root / "kernels" / "test.yaml"
    text = kernels.read_text(encoding="utf-8")
    changed = text.replace("generic path", "generic pata")  # the same size, other bytes
    assert changed != text
    assert len(changed) == len(text)
    kernels.write_text(changed, encoding="utf-8")
    second = capmatrix.load(root)
    assert second.rule("xqa.hmma").reason == "generic pata"
    assert first.rule("xqa.hmma").reason == "generic path"
    assert len(entries(cache)) == 1  # the same slot, rewritten


def test_an_added_file_or_another_root_is_a_miss(
    cache: Path, write_matrix: Callable[..., Path], tmp_path: Path
) -> None:
    root = write_matrix()
    assert "m" not in capmatrix.load(root).models
    (root / "more_models.yaml").write_text(
        "models:\n  m:\n    description: d\n    axes: {sm: 90}\n    source: s\n", encoding="utf-8"
    )
    assert "m" in capmatrix.load(root).models
    other = tmp_path / "other"
    shutil.copytree(root, other)
    moved = capmatrix.load(other)
    assert moved.root == str(other)
    assert moved.rule("xqa.hmma").location.path.startswith(str(other))


def test_a_bad_matrix_is_never_cached_and_its_errors_are_unchanged(
    cache: Path, write_matrix: Callable[..., Path]
) -> None:
    root = write_matrix({"kernels/bad.yaml": "kernels:\n  bad:\n    description: d\n    rules: 3\n"})
    with pytest.raises(CapabilityErrors) as info:
        capmatrix.load(root)
    assert entries(cache) == []
    with pytest.raises(CapabilityErrors) as again:
        capmatrix.load(root)
    assert [str(e) for e in again.value.errors] == [str(e) for e in info.value.errors]
    assert entries(cache) == []


def pins(errors: list[CapabilityError] | tuple[CapabilityError, ...]) -> list[tuple[object, ...]]:
    return [(e.path, e.line, e.column, e.json_path, e.code, e.message, e.hint) for e in errors]


@pytest.mark.parametrize("name", sorted(p.name for p in HOSTILE.iterdir() if p.is_file()))
def test_hostile_files_give_the_same_problems_with_the_cache_on(
    name: str, cache: Path, write_matrix: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_matrix()
    monkeypatch.chdir(root.parent)
    capmatrix.load("caps")  # the clean base is cached: the hostile file must still be read
    assert len(entries(cache)) == 1
    shutil.copyfile(HOSTILE / name, root / name)
    with monkeypatch.context() as m:
        m.setenv("CAPMATRIX_CACHE", "off")
        expected = pins(list(capmatrix.iter_problems("caps")))
    assert pins(list(capmatrix.iter_problems("caps"))) == expected
    if expected:
        with pytest.raises(CapabilityErrors) as info:
            capmatrix.load("caps")
        assert pins(info.value.errors) == expected
        assert len(entries(cache)) == 1  # the base's entry only: a bad matrix is never written
    else:  # a file the loader accepts (comments only are refused; a clean extra file is cached)
        capmatrix.load("caps")


def _stamped(directory: Path) -> str:
    digest = _cache._digest()
    _cache._stamp(digest, str(directory), ".py")
    return digest.hexdigest()


def test_an_edited_module_changes_the_code_digest(tmp_path: Path) -> None:
    """The package's files enter the key by path, size and mtime: an edit or a new install is a miss."""
    module = tmp_path / "loader.py"
    module.write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a module", encoding="utf-8")
    os.utime(module, ns=(10**18, 10**18))
    first = _stamped(tmp_path)
    assert _stamped(tmp_path) == first
    (tmp_path / "notes.txt").write_text("other", encoding="utf-8")  # not a module: not read
    assert _stamped(tmp_path) == first
    module.write_text("x = 2\n", encoding="utf-8")  # same size, edited later
    assert _stamped(tmp_path) != first
    os.utime(module, ns=(10**18, 10**18))
    assert _stamped(tmp_path) == first
    module.write_text("x = 10\n", encoding="utf-8")
    os.utime(module, ns=(10**18, 10**18))  # same mtime, another size
    assert _stamped(tmp_path) != first
    (tmp_path / "new.py").write_text("", encoding="utf-8")
    assert len({first, _stamped(tmp_path)}) == 2
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (moved / "loader.py").write_text("x = 1\n", encoding="utf-8")
    os.utime(moved / "loader.py", ns=(10**18, 10**18))
    assert _stamped(moved) != first  # another install's path


def test_another_loader_is_a_miss(cache: Path, write_matrix: Callable[..., Path],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_matrix()
    capmatrix.load(root)
    monkeypatch.setattr(_cache, "_code", b"an edited loader")
    assert _parses(monkeypatch, root) == 1


# --------------------------------------------------------------------------------------------------
# a damaged entry is ignored and written again


def _damage_cases() -> dict[str, Callable[[bytes], bytes]]:
    def flip(blob: bytes) -> bytes:
        i = len(blob) - 10
        return blob[:i] + bytes([blob[i] ^ 1]) + blob[i + 1 :]

    def resealed(blob: bytes, body: bytes) -> bytes:
        """``blob``'s header with ``body`` and the checksum of ``body``."""
        magic, fmt, wanted, _check = blob.partition(b"\n")[0].decode().split(" ")
        return f"{magic} {fmt} {wanted} {hashlib.blake2b(body, digest_size=32).hexdigest()}\n".encode() + body

    def forged(blob: bytes) -> bytes:
        """A payload of the wrong shape with a correct checksum: the decoder refuses it."""
        data = json.loads(blob.partition(b"\n")[2])
        data["conditions"][0][2] = [1.5]  # a float among an axis's values
        return resealed(blob, json.dumps(data).encode())

    def nan(blob: bytes) -> bytes:
        """NaN where a value was, with a correct checksum: JSON the cache never writes."""
        data = json.loads(blob.partition(b"\n")[2])
        data["conditions"][0][2] = [math.nan]
        return resealed(blob, json.dumps(data).encode())

    return {
        "truncated": lambda blob: blob[: len(blob) // 2],
        "empty": lambda _blob: b"",
        "flipped byte": flip,
        "garbage": lambda _blob: os.urandom(300),
        "no header": lambda blob: blob.partition(b"\n")[2],
        "other format": lambda blob: blob.replace(f" {_cache.FORMAT} ".encode(), b" 999 ", 1),
        "forged payload": forged,
        "not json": lambda blob: blob.partition(b"\n")[0] + b"\n{",
        "NaN payload": nan,
        "trailing data": lambda blob: resealed(blob, blob.partition(b"\n")[2] + b" []"),
        "not ASCII": lambda blob: resealed(blob, blob.partition(b"\n")[2].replace(b'"', b'"\xc3\xa9', 1)),
    }


@pytest.mark.parametrize("case", sorted(_damage_cases()))
def test_a_damaged_entry_is_ignored_and_rewritten(
    case: str, cache: Path, write_matrix: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_matrix()
    cold = load_without_cache(root, monkeypatch)
    capmatrix.load(root)
    (entry,) = entries(cache)
    good = entry.read_bytes()
    entry.write_bytes(_damage_cases()[case](good))
    loaded = capmatrix.load(root)
    assert deep(loaded) == deep(cold)
    assert entry.read_bytes() == good  # written again


def test_a_foreign_entry_is_ignored(cache: Path, write_matrix: Callable[..., Path],
                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another matrix's entry (a valid one) copied into this matrix's slot is not used."""
    root = write_matrix()
    other = tmp_path / "other"
    shutil.copytree(root, other)
    (other / "kernels" / "test.yaml").write_text(
        (other / "kernels" / "test.yaml").read_text(encoding="utf-8").replace("generic path", "other"),
        encoding="utf-8",
    )
    capmatrix.load(other)
    (foreign,) = entries(cache)
    slot_name = foreign.name
    foreign.rename(cache / "kept.json")
    capmatrix.load(root)
    (entry,) = entries(cache)
    assert entry.name != slot_name
    shutil.copyfile(cache / "kept.json", entry)
    loaded = capmatrix.load(root)
    assert loaded.rule("xqa.hmma").reason == "generic path"
    assert deep(loaded) == deep(load_without_cache(root, monkeypatch))


# --------------------------------------------------------------------------------------------------
# off, unwritable, concurrent


def test_cache_off_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  write_matrix: Callable[..., Path]) -> None:
    directory = tmp_path / "cache"
    monkeypatch.setenv("CAPMATRIX_CACHE_DIR", str(directory))
    for off in ("off", "0", "no", "false", "OFF"):
        monkeypatch.setenv("CAPMATRIX_CACHE", off)
        assert _cache.cache_dir() is None
        capmatrix.load(write_matrix())
        capmatrix.load()
    assert not directory.exists()


def test_the_cache_directory_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CAPMATRIX_CACHE", raising=False)
    monkeypatch.delenv("CAPMATRIX_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _cache.cache_dir() == str(tmp_path / "xdg" / "capmatrix")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _cache.cache_dir() == str(tmp_path / "home" / ".cache" / "capmatrix")
    monkeypatch.setenv("CAPMATRIX_CACHE_DIR", str(tmp_path / "mine"))
    assert _cache.cache_dir() == str(tmp_path / "mine")


def test_an_unwritable_cache_directory_still_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_matrix: Callable[..., Path]
) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory", encoding="utf-8")
    monkeypatch.delenv("CAPMATRIX_CACHE", raising=False)
    monkeypatch.setenv("CAPMATRIX_CACHE_DIR", str(blocker / "cache"))  # cannot be created
    root = write_matrix()
    cold = load_without_cache(root, monkeypatch)
    assert deep(capmatrix.load(root)) == deep(cold)
    assert deep(capmatrix.load(root)) == deep(cold)
    assert blocker.read_text(encoding="utf-8") == "not a directory"


def test_old_entries_are_pruned(cache: Path, monkeypatch: pytest.MonkeyPatch,
                                write_matrix: Callable[..., Path], tmp_path: Path) -> None:
    monkeypatch.setattr(_cache, "MAX_ENTRIES", 3)
    root = write_matrix()
    for i in range(6):
        copy = tmp_path / f"copy{i}"
        shutil.copytree(root, copy)
        capmatrix.load(copy)
    assert len(entries(cache)) == 3


def test_concurrent_loads_and_writes_agree(cache: Path, write_matrix: Callable[..., Path],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads loading (and so writing the entry) at once all get the cold matrix."""
    root = write_matrix()
    expected = deep(load_without_cache(root, monkeypatch))
    inputs = [(display, path.read_bytes()) for path, display in loader.discover(root)]
    wanted = _cache.key(str(root), inputs)
    seen: list[object] = []
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(15):
                matrix = capmatrix.load(root)
                _cache.store(matrix, wanted, [display for display, _raw in inputs])
                seen.append(deep(matrix))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(seen) == 8 * 15
    assert all(s == expected for s in seen)
    assert len(entries(cache)) == 1
    assert not list((cache / _cache.SUBDIR).glob(".*.tmp"))


def test_concurrent_processes_share_one_entry(cache: Path, write_matrix: Callable[..., Path]) -> None:
    root = write_matrix()
    code = (
        "import sys, json, capmatrix\n"
        "for _ in range(5):\n"
        "    m = capmatrix.load(sys.argv[1])\n"
        "print(json.dumps(sorted(r.id for r in m.rules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _out, err in outputs]
    assert len({out for out, _err in outputs}) == 1
    assert len(entries(cache)) == 1
    assert not list((cache / _cache.SUBDIR).glob(".*.tmp"))


def test_a_value_json_cannot_hold_is_not_cached(cache: Path, write_matrix: Callable[..., Path]) -> None:
    """A date in a model's hf_config would come back as text: such a matrix is not cached."""
    root = write_matrix({"more_models.yaml": (
        "models:\n  m:\n    description: d\n    axes: {sm: 90}\n    source: s\n"
        "    hf_config: {released: 2024-01-01}\n"
    )})
    released = capmatrix.load(root).models["m"].hf_config
    assert released is not None
    assert type(released["released"]).__name__ == "date"
    assert entries(cache) == []


def test_an_entry_past_the_size_limit_is_a_miss(
    cache: Path, write_matrix: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_matrix()
    capmatrix.load(root)
    monkeypatch.setattr(_cache, "MAX_ENTRY_BYTES", 100)
    assert _parses(monkeypatch, root) == 1


# --------------------------------------------------------------------------------------------------
# the cache touches only what is its own, and trusts only a private directory


def _forge(blob: bytes, old: bytes, new: bytes) -> bytes:
    """An entry whose payload says something else, with the right key and a correct checksum."""
    head, _nl, payload = blob.partition(b"\n")
    assert old in payload
    body = payload.replace(old, new)
    magic, fmt, wanted, _check = head.decode().split(" ")
    return f"{magic} {fmt} {wanted} {hashlib.blake2b(body, digest_size=32).hexdigest()}\n".encode() + body


def test_a_forged_entry_in_a_private_directory_is_what_the_trust_rests_on(
    cache: Path, write_matrix: Callable[..., Path]
) -> None:
    """The key is public: a well-formed forged entry is read when the directory is private (the
    check below is what the refusals of shared directories protect against)."""
    root = write_matrix()
    capmatrix.load(root)
    (entry,) = entries(cache)
    entry.write_bytes(_forge(entry.read_bytes(), b'"generic path"', b'"forged"'))
    assert capmatrix.load(root).rule("xqa.hmma").reason == "forged"


@pytest.mark.parametrize("where", ["cache directory", "entries directory"])
@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_a_directory_others_can_write_is_not_used(
    where: str, mode: int, cache: Path, write_matrix: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_matrix()
    cold = load_without_cache(root, monkeypatch)
    capmatrix.load(root)
    (entry,) = entries(cache)
    forged = _forge(entry.read_bytes(), b'"generic path"', b'"forged"')
    entry.write_bytes(forged)
    (cache if where == "cache directory" else cache / _cache.SUBDIR).chmod(mode)
    for _ in range(2):
        loaded = capmatrix.load(root)
        assert loaded.rule("xqa.hmma").reason == "generic path"
        assert deep(loaded) == deep(cold)
    assert entry.read_bytes() == forged  # nothing written into a shared directory either


@pytest.mark.parametrize("where", ["cache directory", "entries directory", "entry"])
def test_what_another_user_owns_is_not_used(
    where: str, cache: Path, write_matrix: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_matrix()
    cold = load_without_cache(root, monkeypatch)
    capmatrix.load(root)
    (entry,) = entries(cache)
    entry.write_bytes(_forge(entry.read_bytes(), b'"generic path"', b'"forged"'))
    target = {"cache directory": cache, "entries directory": cache / _cache.SUBDIR, "entry": entry}[where]
    owner = target.stat().st_uid
    real_geteuid = os.geteuid
    monkeypatch.setattr(os, "geteuid", lambda: real_geteuid() + 1 if owner == real_geteuid() else owner + 1)
    loaded = capmatrix.load(root)
    assert loaded.rule("xqa.hmma").reason == "generic path"
    assert deep(loaded) == deep(cold)


def test_an_entries_directory_that_is_a_link_is_not_used(
    cache: Path, write_matrix: Callable[..., Path], tmp_path: Path
) -> None:
    root = write_matrix()
    capmatrix.load(root)
    (entry,) = entries(cache)
    elsewhere = tmp_path / "elsewhere"
    (cache / _cache.SUBDIR).rename(elsewhere)
    (cache / _cache.SUBDIR).symlink_to(elsewhere)
    entry.write_bytes(_forge(entry.read_bytes(), b'"generic path"', b'"forged"'))
    assert capmatrix.load(root).rule("xqa.hmma").reason == "generic path"


def _run_bounded(work: Callable[[], object], seconds: float = 60) -> object:
    """``work()`` in a thread that must finish within ``seconds`` (a hang fails, not blocks, the test)."""
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "hung"
    return out[0]


def test_an_entry_that_is_a_fifo_is_a_miss_not_a_hang(
    cache: Path, write_matrix: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_matrix()
    cold = load_without_cache(root, monkeypatch)
    capmatrix.load(root)
    (entry,) = entries(cache)
    entry.unlink()
    os.mkfifo(entry)
    loaded = _run_bounded(lambda: capmatrix.load(root))
    assert deep(loaded) == deep(cold)
    assert entry.is_file()  # the FIFO in the cache's own slot gave way to the entry


@pytest.mark.parametrize("kind", ["link to /dev/zero", "link to a big file", "character device"])
def test_an_entry_that_is_not_a_regular_file_is_a_miss(
    kind: str, cache: Path, write_matrix: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    root = write_matrix()
    cold = load_without_cache(root, monkeypatch)
    capmatrix.load(root)
    (entry,) = entries(cache)
    good = entry.read_bytes()
    entry.unlink()
    if kind == "link to /dev/zero":
        entry.symlink_to("/dev/zero")
    elif kind == "link to a big file":  # the real entry behind a link: still not read
        real = tmp_path / "real.json"
        real.write_bytes(good)
        entry.symlink_to(real)
        assert _parses(monkeypatch, root) == 1
        return
    else:
        try:
            os.mknod(entry, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
        except PermissionError:
            pytest.skip("creating a device node needs CAP_MKNOD")
    loaded = _run_bounded(lambda: capmatrix.load(root))
    assert deep(loaded) == deep(cold)


def test_a_read_error_is_a_miss(cache: Path, write_matrix: Callable[..., Path],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_matrix()
    capmatrix.load(root)

    def failing(*_args: object) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_cache, "_read_entry", failing)
    assert _parses(monkeypatch, root) == 1


def test_an_entry_that_grew_while_read_is_a_miss(cache: Path, write_matrix: Callable[..., Path],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_matrix()
    capmatrix.load(root)
    (entry,) = entries(cache)
    real_fstat = os.fstat

    def shrunk(fd: int) -> os.stat_result:  # as if the file had been this size when opened
        st = real_fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_size == entry.stat().st_size:
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid,
                                   st.st_size - 5, int(st.st_atime), int(st.st_mtime), int(st.st_ctime)))
        return st

    monkeypatch.setattr(os, "fstat", shrunk)
    assert _parses(monkeypatch, root) == 1


def test_the_cache_prunes_and_replaces_only_its_own_entries(
    cache: Path, monkeypatch: pytest.MonkeyPatch, write_matrix: Callable[..., Path], tmp_path: Path
) -> None:
    """Other files, in the cache directory and among the entries, survive any number of writes."""
    monkeypatch.setattr(_cache, "MAX_ENTRIES", 2)
    root = write_matrix()
    sub = cache / _cache.SUBDIR
    sub.mkdir(parents=True, mode=0o700)
    cache.chmod(0o700)
    theirs: dict[Path, bytes] = {}
    for i in range(20):
        theirs[cache / f"user{i}.json"] = f'{{"n": {i}}}'.encode()
        theirs[sub / f"user{i}.json"] = f'{{"n": {i}}}'.encode()
    theirs[sub / ("matrix-" + "0" * 32 + ".json")] = b"my own notes, named like an entry"
    theirs[sub / ("." + "matrix-" + "0" * 32 + ".json.0123456789ab.tmp")] = b"fresh: a write under way"
    for path, data in theirs.items():
        path.write_bytes(data)
    (sub / ("matrix-" + "1" * 32 + ".json")).symlink_to(cache / "user0.json")
    old = time.time() - 10 * 24 * 3600
    for path in theirs:
        os.utime(path, (old, old))
    os.utime(sub / ("." + "matrix-" + "0" * 32 + ".json.0123456789ab.tmp"))  # fresh again
    stale = sub / ("." + "matrix-" + "2" * 32 + ".json.ba9876543210.tmp")
    stale.write_bytes(b"left by a write that died")
    os.utime(stale, (old, old))
    for i in range(5):
        copy = tmp_path / f"copy{i}"
        shutil.copytree(root, copy)
        capmatrix.load(copy)
    for path, data in theirs.items():
        assert path.read_bytes() == data, path
    assert (sub / ("matrix-" + "1" * 32 + ".json")).is_symlink()
    assert not stale.exists()  # the cache's own temporary file, long dead
    ours = [p for p in entries(cache)
            if not p.is_symlink() and p.read_bytes().startswith(b"capmatrix-cache ")]
    assert len(ours) == 2


def test_entries_are_private_files(cache: Path, write_matrix: Callable[..., Path]) -> None:
    capmatrix.load(write_matrix())
    (entry,) = entries(cache)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE((cache / _cache.SUBDIR).stat().st_mode) == 0o700
    assert entry.read_bytes().startswith(f"capmatrix-cache {_cache.FORMAT} ".encode())


def test_without_descriptor_relative_calls_there_is_no_cache(
    cache: Path, write_matrix: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_cache, "_SUPPORTED", False)
    capmatrix.load(write_matrix())
    assert not cache.exists()


def test_a_failed_write_leaves_no_temporary_file(
    cache: Path, write_matrix: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(*_args: object, **_kw: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "rename", failing)
    capmatrix.load(write_matrix())
    assert entries(cache) == []
    assert list((cache / _cache.SUBDIR).iterdir()) == []


@pytest.mark.parametrize("was_on", [True, False])
def test_a_load_leaves_the_garbage_collector_as_it_found_it(
    cache: Path, write_matrix: Callable[..., Path], was_on: bool
) -> None:
    """The collector is paused while an entry is decoded and the index compiled, and only then."""
    root = write_matrix()
    capmatrix.load(root)  # a miss that writes the entry; the next load decodes it
    seen: list[bool] = []
    real_lookup, real_compile = _cache.lookup, resolver.compile_matrix

    def lookup(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return real_lookup(*args)

    def compile_matrix(matrix: Any) -> Any:
        seen.append(gc.isenabled())
        return real_compile(matrix)

    (gc.enable if was_on else gc.disable)()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_cache, "lookup", lookup)
            patch.setattr(loader, "compile_matrix", compile_matrix)
            matrix = capmatrix.load(root)
            assert gc.isenabled() is was_on
            (root / "axes.yaml").write_text("axes: [", encoding="utf-8")
            with pytest.raises(CapabilityErrors):
                capmatrix.load(root)
            assert gc.isenabled() is was_on
    finally:
        gc.enable()
    assert seen == [False, False, False]  # the hit's lookup and compilation, the broken file's lookup
    assert matrix._compiled is not None


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
def test_reading_an_entry_that_is_a_directory_leaks_no_descriptor(tmp_path: Path, cache: Path) -> None:
    def open_descriptors() -> int:
        return len(list(Path("/proc/self/fd").iterdir()))

    root = tmp_path / "caps"
    shutil.copytree(ROOT / "capabilities", root)
    inputs = [(display, Path(path).read_bytes()) for path, display in loader._discover(str(root))]
    slot = cache / _cache.SUBDIR / _cache._slot(str(root), [name for name, _raw in inputs])
    slot.mkdir(parents=True, mode=0o700)  # the entry a directory
    cache.chmod(0o700)
    before = open_descriptors()
    for _ in range(20):
        assert _cache.lookup(str(root), inputs)[0] is None
    assert open_descriptors() == before
