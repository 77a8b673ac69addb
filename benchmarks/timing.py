"""Timing helpers: timeit-style loops (min of N and median) and wall-clock runs of fresh processes."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import timeit
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: The checkout: child processes run in it.
ROOT = Path(__file__).resolve().parent.parent

__all__ = [
    "Spawned", "Timing", "compile_bytecode", "engine_bench", "finished", "per_call", "process_wall",
    "repeat_wall", "run_timings", "spawn", "spawn_alternating", "spawn_many",
]


@dataclass(frozen=True, slots=True)
class Timing:
    """Seconds per call (or per run): the minimum and the median of ``repeat`` samples."""

    best: float
    median: float
    loops: int
    repeat: int

    def as_dict(self) -> dict[str, float | int]:
        return {"best_s": self.best, "median_s": self.median, "loops": self.loops, "repeat": self.repeat}


def per_call(
    stmt: str, namespace: dict[str, Any], *, repeat: int = 7, min_time: float = 0.2
) -> Timing:
    """Time ``stmt`` like ``python -m timeit``: loops calibrated to ``min_time``, ``repeat`` samples."""
    timer = timeit.Timer(stmt, globals=namespace)
    loops = 1
    while True:
        if timer.timeit(loops) >= min_time:
            break
        loops *= 2 if loops < 8 else 4
    samples = [t / loops for t in timer.repeat(repeat, loops)]
    return Timing(min(samples), statistics.median(samples), loops, repeat)


def repeat_wall(fn: Callable[[], object], *, repeat: int = 5) -> Timing:
    """Wall time of whole calls of ``fn`` (for work that takes milliseconds or more)."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return Timing(min(samples), statistics.median(samples), 1, repeat)


def process_wall(argv: Sequence[str], *, repeat: int = 15, env: dict[str, str] | None = None) -> Timing:
    """Wall time of running ``argv`` to completion (output discarded); fails on a non-zero status
    other than the CLI's documented verdict statuses 1 and 3."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, check=False, env=env)
        samples.append(time.perf_counter() - start)
        if done.returncode not in (0, 1, 3):
            msg = f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-2000:]}"
            raise RuntimeError(msg)
    return Timing(min(samples), statistics.median(samples), 1, repeat)


def engine_bench(tool: str, python_var: str, src_var: str, src_flag: str) -> dict[str, Any] | None:
    """An engine's own side of a selection benchmark: ``tool --bench`` run in that engine's environment.

    ``python_var`` and ``src_var`` name the environment variables giving that environment's interpreter
    and the unpacked wheel (passed as ``src_flag``); None when either is unset (the side is skipped).
    """
    python, src = os.environ.get(python_var), os.environ.get(src_var)
    if not python or not src:
        return None
    done = subprocess.run([python, tool, src_flag, src, "--bench"], capture_output=True, text=True,
                          check=True, timeout=900)
    data: dict[str, Any] = json.loads(done.stdout)
    return data


@dataclass(frozen=True, slots=True)
class Spawned:
    """One finished child process: wall and CPU seconds (user + system) and its peak RSS in bytes."""

    wall: float
    cpu: float
    peak_rss: int


def finished(argv: list[str], start: float, status: int, usage: Any, ok: tuple[int, ...]) -> Spawned:
    """A child reaped by ``wait4``: its wall time since ``start``, CPU time and peak RSS; an exit status
    outside ``ok`` raises."""
    code = os.waitstatus_to_exitcode(status)
    if code not in ok:
        msg = f"{' '.join(argv)} exited {code}"
        raise RuntimeError(msg)
    return Spawned(time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024)


def spawn(argv: list[str], *, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0, 1, 3),
          cwd: Path = ROOT) -> Spawned:
    """Run ``argv`` to completion (output discarded) and read its own resource usage (``wait4``)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _pid, status, usage = os.wait4(proc.pid, 0)
    return finished(argv, start, status, usage, ok)


def spawn_many(argv: list[str], repeat: int, **kw: Any) -> tuple[Timing, Timing, int]:
    """Wall and CPU timings (min, median) of ``repeat`` runs, and the largest peak RSS among them."""
    return run_timings([spawn(argv, **kw) for _ in range(repeat)])


def run_timings(runs: list[Spawned]) -> tuple[Timing, Timing, int]:
    walls, cpus = [r.wall for r in runs], [r.cpu for r in runs]
    return (Timing(min(walls), statistics.median(walls), 1, len(runs)),
            Timing(min(cpus), statistics.median(cpus), 1, len(runs)), max(r.peak_rss for r in runs))


def spawn_alternating(
    baseline: list[str], argv: list[str], repeat: int, **kw: Any
) -> tuple[tuple[Timing, Timing, int], tuple[Timing, Timing, int]]:
    """:func:`spawn_many` of ``baseline`` and of ``argv`` (with ``kw``), their runs alternating.

    A difference of two medians taken minutes apart reads the machine's drift as the difference; runs
    taken in turns see the same machine.
    """
    pairs = [(spawn(baseline), spawn(argv, **kw)) for _ in range(repeat)]
    return run_timings([a for a, _b in pairs]), run_timings([b for _a, b in pairs])


def compile_bytecode() -> None:
    """Byte-compile the package, as installing a wheel does (with PYTHONDONTWRITEBYTECODE set, every
    fresh interpreter would otherwise compile the sources again)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "capmatrix")], check=True,
                   capture_output=True)
