"""Section 7: the commands' garbage collector, tuned (capmatrix/authoring/_heap.py) against CPython's default.

Each workload is a whole ``capmatrix`` command in a fresh process, run in turns with the interpreter's
own thresholds (the baseline) and with :data:`capmatrix.authoring._heap.THRESHOLDS` (what the command
sets), so both see the same machine. Wall and CPU time are the minimum of the runs, peak memory the
largest; the ratio is tuned / default CPU time.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from benchmarks.report import Row, Section, fmt_bytes, fmt_timing, ratio
from benchmarks.timing import ROOT, compile_bytecode, run_timings, spawn

if TYPE_CHECKING:
    from benchmarks.timing import Timing

#: The child: the command line as the ``capmatrix`` script runs it (its environment says which
#: thresholds: ``CAPMATRIX_GC=default`` for the baseline, in the worker processes too).
_CHILD = "import sys; from capmatrix.authoring.cli import main; sys.exit(main(sys.argv[1:]))"

#: (what a user runs, its arguments); ``--jobs 1`` keeps the gate's work in the timed process.
WORKLOADS = (
    ("capmatrix test (the whole data gate)", ["test", "--jobs", "1"]),
    ("capmatrix render --check", ["render", "--check"]),
    ("capmatrix check", ["check"]),
)
QUICK_WORKLOADS = (
    ("capmatrix test --records-every 8", ["test", "--jobs", "1", "--records-every", "8"]),
    ("capmatrix test --only legacy", ["test", "--jobs", "1", "--only", "legacy"]),
    ("capmatrix render --check", ["render", "--check"]),
)


def section_heap(quick: bool) -> Section:
    """Section 7 of the report."""
    sec = Section(
        "7. The commands' garbage collector",
        "A `capmatrix` command keeps most of what it builds to its end, and CPython's default thresholds "
        "walk that whole heap again and again to find almost no cycles; the command sets its own "
        "(`capmatrix/authoring/_heap.py`). Each workload runs in a fresh process, in turns with the "
        "interpreter's default thresholds (baseline) and with the command's (value); the compiled-matrix "
        "cache warm. Times are wall (CPU) minimum (median) of the runs; the ratio is of CPU time.",
    )
    compile_bytecode()
    # the repository's package; the compiled-matrix cache as users have it (on, in its usual place)
    env = {k: v for k, v in os.environ.items() if k not in ("CAPMATRIX_CACHE", "CAPMATRIX_GC")}
    env["PYTHONPATH"] = str(ROOT)
    default = {**env, "CAPMATRIX_GC": "default"}
    repeat = 2 if quick else 3
    for name, args in QUICK_WORKLOADS if quick else WORKLOADS:
        argv = [sys.executable, "-c", _CHILD, *args]
        spawn(argv, env=env)  # the compiled-matrix cache written, the files in the page cache
        pairs = [(spawn(argv, env=default), spawn(argv, env=env)) for _ in range(repeat)]
        b_wall, b_cpu, b_rss = run_timings([b for b, _t in pairs])
        t_wall, t_cpu, t_rss = run_timings([t for _b, t in pairs])
        sec.rows.append(Row(
            name, _both(t_wall, t_cpu), _both(b_wall, b_cpu), ratio(t_cpu.best, b_cpu.best),
            note=f"peak memory {fmt_bytes(t_rss)} (default {fmt_bytes(b_rss)})",
        ))
    return sec


def _both(wall: Timing, cpu: Timing) -> str:
    return f"{fmt_timing(wall)}; CPU {fmt_timing(cpu)}"
