"""Timing helpers: timeit-style loops (min of N and median) and wall-clock runs of fresh processes."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
import timeit
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["Timing", "engine_bench", "per_call", "process_wall", "repeat_wall"]


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
