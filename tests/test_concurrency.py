"""Thread safety: resolve, select and bind from many threads, with the default matrix reloaded meanwhile.

Two matrices A and B differ in one rule and one model. While a reloader thread keeps swapping the
default between them (``capmatrix.reload``), 16 threads resolve, select and bind against the default;
every answer must equal the sequential answer of the matrix whose files it cites: one whole matrix,
old or new, never a mix.
"""

from __future__ import annotations

import random
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import capmatrix
from capmatrix import resolver
from capmatrix._shipped import default as _default
from capmatrix.engine import bind
from capmatrix.query import ANY, KernelQuery

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

THREADS = 16
OPS_PER_THREAD = 300
MAX_OPS_PER_THREAD = 20 * OPS_PER_THREAD
MIN_RELOADS = 20
#: Only stops a deadlock from hanging the suite; not a performance assertion.
JOIN_GUARD_S = 300

AXIS_CHOICES: dict[str, list[Any]] = {
    "sm": [80, 90, 100, 103, 120, 121, 75, 130],  # 75 and 130 lie outside the declared universe
    "attention": ["mha", "gqa", "mla"],
    "spec_dec": ["none", "one_model"],
    "kv": ["bf16", "fp8"],
    "beam": [1, 4],
    "causal": [False, True],
}


def _random_axes(rng: random.Random) -> dict[str, Any]:
    axes: dict[str, Any] = {}
    for name, values in AXIS_CHOICES.items():
        roll = rng.random()
        if roll < 0.6:
            axes[name] = rng.choice(values)
        elif roll < 0.7:
            axes[name] = ANY
    return axes


def _queries(seed: int, count: int) -> list[KernelQuery]:
    rng = random.Random(seed)  # noqa: S311 - reproducible test data
    out = []
    for _ in range(count):
        model = rng.choice([None, "llama", "dsv3"])
        out.append(KernelQuery(rng.choice(["xqa", "fallback"]), model=model, **_random_axes(rng)))
    return out


BIND_SPECS: list[dict[str, Any]] = [
    {"kernel": "xqa", "dynamic": ["spec_dec"], "sm": 121, "model": "dsv3", "beam": 1, "causal": True},
    {"kernel": "fallback", "dynamic": ["sm"], "attention": "gqa", "spec_dec": "none", "kv": "bf16",
     "causal": False},
    {"kernel": "xqa", "dynamic": ["sm", "attention"], "spec_dec": "one_model", "kv": "fp8",
     "causal": True},
    {"kernel": "xqa", "dynamic": ["sm", "beam"], "model": "llama", "spec_dec": "none", "causal": True},
]


def _bind(spec: dict[str, Any], matrix: capmatrix.Matrix | None) -> dict[str, Any]:
    args = dict(spec)
    decision = bind(args.pop("kernel"), dynamic=args.pop("dynamic"), model=args.pop("model", None),
                    matrix=matrix, strict=False, **args)
    return {"table": dict(decision.table),
            "resolutions": {k: r.as_dict() for k, r in decision.resolutions.items()}}


def _files_cited(data: object, found: set[str]) -> set[str]:
    """Every ``file`` a JSON-ready answer cites, anywhere inside it."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "file" and isinstance(value, str):
                found.add(value)
            else:
                _files_cited(value, found)
    elif isinstance(data, list | tuple):
        for item in data:
            _files_cited(item, found)
    return found


@pytest.fixture
def two_roots(write_matrix: Callable[..., Path], tmp_path: Path) -> dict[str, Path]:
    """Matrix A (the small test matrix) and B (one rule and one model changed), in sibling dirs."""
    a = write_matrix()
    b = tmp_path / "caps_b"
    shutil.copytree(a, b)
    kernels = b / "kernels" / "test.yaml"
    text = kernels.read_text(encoding="utf-8")
    assert 'grant: {sm: "[80, 120)"}' in text
    kernels.write_text(text.replace('grant: {sm: "[80, 120)"}', 'grant: {sm: "[80, 121]"}')
                       .replace("axes: {attention: gqa, kv: bf16}", "axes: {attention: mha, kv: fp8}"),
                       encoding="utf-8")
    return {"a": a, "b": b}


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads often so that reloads land in the middle of resolutions."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)
        _default.set_default_matrix(None)


class _Reference:
    """Sequential answers of each matrix, computed on fresh loads before any thread starts."""

    def __init__(self, roots: dict[str, Path], queries: list[KernelQuery]) -> None:
        self.prefix = {name: root.as_posix() + "/" for name, root in roots.items()}
        self.resolve: dict[str, dict[KernelQuery, dict[str, Any]]] = {}
        self.select: dict[str, dict[KernelQuery, dict[str, Any]]] = {}
        self.bind: dict[str, list[dict[str, Any]]] = {}
        for name, root in roots.items():
            m = capmatrix.load(root)
            self.resolve[name] = {q: capmatrix.resolve(q, m).as_dict() for q in queries}
            self.select[name] = {
                q: capmatrix.select("gen", q.with_kernel(None), m).as_dict() for q in queries
            }
            self.bind[name] = [_bind(spec, m) for spec in BIND_SPECS]

    def which(self, answer: object) -> set[str]:
        """The matrices whose files an answer cites."""
        names = set()
        for file in _files_cited(answer, set()):
            owners = [n for n, p in self.prefix.items() if file.startswith(p)]
            assert len(owners) == 1, file
            names.add(owners[0])
        return names


def test_the_two_matrices_answer_differently(two_roots: dict[str, Path]) -> None:
    queries = _queries(7, 400)
    ref = _Reference(two_roots, queries)
    verdicts = [(ref.resolve["a"][q]["verdict"], ref.resolve["b"][q]["verdict"]) for q in queries]
    assert any(a != b for a, b in verdicts)
    assert ref.bind["a"] != ref.bind["b"]


def test_resolve_select_bind_during_reloads(
    two_roots: dict[str, Path], fast_switching: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    del fast_switching
    monkeypatch.setattr(resolver, "CACHE_LIMIT", 16)  # keep resolving for real, not from the cache
    queries = _queries(11, 120)
    ref = _Reference(two_roots, queries)
    capmatrix.reload(two_roots["a"])
    stop = threading.Event()
    reloads = 0
    seen: dict[str, int] = {"a": 0, "b": 0}
    seen_lock = threading.Lock()

    preloaded = {name: capmatrix.load(root) for name, root in two_roots.items()}

    def reloader() -> None:
        """Swap A and B: every 5th time a fresh load from disk (cold caches), else a preloaded one.

        The period is odd so that disk loads alternate between A and B (the old matrix stays the
        default while the new one loads); the short sleep spreads swaps over the whole run.
        """
        nonlocal reloads
        turn = 0
        while not stop.is_set() or reloads < MIN_RELOADS:
            turn ^= 1
            name = "b" if turn else "a"
            if reloads % 5 == 0:
                capmatrix.reload(two_roots[name])
            else:
                _default.set_default_matrix(preloaded[name])
            reloads += 1
            time.sleep(0.0005)

    def check(kind: str, answer: dict[str, Any], expected: dict[str, dict[str, Any]]) -> str:
        """The matrix the answer cites (A or B), after checking it is that matrix's whole answer."""
        cited = ref.which(answer)
        assert len(cited) <= 1, f"{kind} mixes matrices: {sorted(cited)}"
        for name in sorted(cited) or ["a", "b"]:
            if answer == expected[name]:
                return name
        pytest.fail(f"{kind} answer matches neither matrix it could have used: {answer}")

    def worker(seed: int) -> int:
        rng = random.Random(seed)  # noqa: S311 - reproducible test data
        done = 0
        # Go on until both matrices have answered (bounded: a starved reloader fails the test below).
        while done < MAX_OPS_PER_THREAD and (
            done < OPS_PER_THREAD or reloads < MIN_RELOADS or not (seen["a"] and seen["b"])
        ):
            op = rng.random()
            if op < 0.6:
                q = rng.choice(queries)
                name = check("resolve", capmatrix.resolve(q).as_dict(),
                             {n: ref.resolve[n][q] for n in ref.resolve})
            elif op < 0.85:
                q = rng.choice(queries)
                name = check("select", capmatrix.select("gen", q.with_kernel(None)).as_dict(),
                             {n: ref.select[n][q] for n in ref.select})
            else:
                i = rng.randrange(len(BIND_SPECS))
                name = check("bind", _bind(BIND_SPECS[i], None),
                             {n: ref.bind[n][i] for n in ref.bind})
            with seen_lock:
                seen[name] += 1
            done += 1
        return done

    thread = threading.Thread(target=reloader, daemon=True)
    thread.start()
    try:
        with ThreadPoolExecutor(max_workers=THREADS) as pool:
            futures = [pool.submit(worker, seed) for seed in range(THREADS)]
            results = [f.result(timeout=JOIN_GUARD_S) for f in futures]
    finally:
        stop.set()
        thread.join(JOIN_GUARD_S)
    assert not thread.is_alive()
    assert all(r >= OPS_PER_THREAD for r in results)
    assert reloads >= MIN_RELOADS
    # Both matrices really answered while the default kept changing.
    assert seen["a"] > 0, (seen, reloads)
    assert seen["b"] > 0, (seen, reloads)


def test_shared_matrix_with_cold_cache_and_tiny_cache_limit(
    small: capmatrix.Matrix, monkeypatch: pytest.MonkeyPatch, fast_switching: None
) -> None:
    """Many threads fill (and keep clearing) one matrix's caches at once; answers stay exact."""
    del fast_switching
    queries = _queries(3, 200)
    reference = capmatrix.load(small.root)
    expected = {q: capmatrix.resolve(q, reference).as_dict() for q in queries}
    expected_sel = {q: capmatrix.select("gen", q.with_kernel(None), reference).as_dict()
                    for q in queries}
    monkeypatch.setattr(resolver, "CACHE_LIMIT", 8)
    barrier = threading.Barrier(THREADS)

    def worker(seed: int) -> list[str]:
        rng = random.Random(seed)  # noqa: S311 - reproducible test data
        problems = []
        barrier.wait()
        for _ in range(OPS_PER_THREAD):
            q = rng.choice(queries)
            if capmatrix.resolve(q, small).as_dict() != expected[q]:
                problems.append(f"resolve {q!r}")
            if capmatrix.select("gen", q.with_kernel(None), small).as_dict() != expected_sel[q]:
                problems.append(f"select {q!r}")
        return problems

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        problems = [p for f in [pool.submit(worker, s) for s in range(THREADS)]
                    for p in f.result(timeout=JOIN_GUARD_S)]
    assert problems == []
    assert len(small._compiled._cache) <= 8


def test_uncompiled_matrix_is_compiled_once(
    small: capmatrix.Matrix, fast_switching: None
) -> None:
    """A matrix without its index (built by hand) gets exactly one, whichever thread comes first."""
    del fast_switching
    object.__setattr__(small, "_compiled", None)
    barrier = threading.Barrier(THREADS)
    q = KernelQuery("xqa", sm=120, model="llama", spec_dec="one_model", causal=True)

    def worker(_: int) -> tuple[int, bool]:
        barrier.wait()
        r = capmatrix.resolve(q, small)
        return id(small._compiled), bool(r)

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        results = list(pool.map(worker, range(THREADS), timeout=JOIN_GUARD_S))
    assert len({r[0] for r in results}) == 1
    assert all(r[1] for r in results)


def test_resolve_reads_the_default_once(
    two_roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reload between the fast-path check and the slow path cannot switch matrices mid-call."""
    a = capmatrix.load(two_roots["a"])
    b = capmatrix.load(two_roots["b"])
    _default.set_default_matrix(a)
    real_resolver = _default._resolver
    used: list[capmatrix.Matrix] = []

    def swapping(matrix: capmatrix.Matrix | None) -> resolver.Resolver:
        _default.set_default_matrix(b)  # a reload lands in the middle of the call
        compiled = real_resolver(matrix)
        used.append(compiled.matrix)
        return compiled

    monkeypatch.setattr(_default, "_resolver", swapping)
    try:
        r = capmatrix.resolve(KernelQuery("fallback", sm=120, attention="gqa"))
    finally:
        _default.set_default_matrix(None)
    assert used == [a]
    assert r.verdict is capmatrix.Verdict.UNSUPPORTED  # A's answer; B grants sm 120
    assert all(reason.path is None or reason.path.startswith(two_roots["a"].as_posix())
               for reason in r.reasons)


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_concurrent_loads_of_good_and_hostile_matrices(
    write_matrix: Callable[..., Path], tmp_path: Path, fast_switching: None
) -> None:
    """Loading (validation, error hints and their budget included) is safe from many threads."""
    del fast_switching
    base = write_matrix()
    roots = [base]
    hostile = sorted((Path(__file__).parent / "hostile").iterdir())
    for i, file in enumerate(hostile):
        root = tmp_path / f"h{i}"
        shutil.copytree(base, root)
        shutil.copyfile(file, root / file.name)
        roots.append(root)

    def outcome(root: Path) -> list[str]:
        try:
            matrix = capmatrix.load(root)
        except capmatrix.CapabilityErrors as exc:
            return [str(e) for e in exc.errors]
        return [f"ok {len(matrix.kernels)} kernels"]

    expected = {root: outcome(root) for root in roots}
    work = roots * 4
    random.Random(5).shuffle(work)  # noqa: S311 - reproducible test data
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        results = list(pool.map(outcome, work, timeout=JOIN_GUARD_S))
    assert results == [expected[root] for root in work]
