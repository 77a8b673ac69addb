"""How a process capmatrix runs collects its cyclic garbage: young objects as usual, the whole heap seldom.

A command builds a matrix, its memos and its answers, and keeps most of them to its end: hundreds of
thousands of long-lived objects. CPython's default thresholds (700, 10, 10) walk that whole heap again
and again, to find almost no cycles. Only the processes capmatrix starts set their own: the
``capmatrix`` command and the data gate's worker processes (the legacy predicates' process, with a heap
of a few megabytes, keeps the interpreter's); a program that imports capmatrix keeps its settings.
``CAPMATRIX_GC=default`` keeps the interpreter's thresholds in those processes too (benchmarks/heap.py
compares the two on the commands users run).
"""

from __future__ import annotations

import gc
import os

from capmatrix.errors import CapmatrixError, echo

__all__ = ["ENV", "THRESHOLDS", "thresholds", "tune"]

#: ``gc.set_threshold`` arguments: the young and middle generations as CPython collects them (700, 10),
#: the whole heap after 10,000 middle collections instead of 10 (CPython also waits until a quarter of the
#: heap is new). A larger young generation was measured too (20,000, 50, 1,000): slower on every
#: command, and 1.1x the time in the legacy predicates' process, which makes short-lived dicts by the
#: hundred thousand.
THRESHOLDS = (700, 10, 10_000)
#: The environment variable that keeps the interpreter's own thresholds (``default``).
ENV = "CAPMATRIX_GC"


def thresholds() -> tuple[int, int, int] | None:
    """What :func:`tune` sets: :data:`THRESHOLDS`, or None under ``CAPMATRIX_GC=default``.

    :raises CapmatrixError: for any other value of ``CAPMATRIX_GC``.
    """
    setting = os.environ.get(ENV, "")
    if setting == "":
        return THRESHOLDS
    if setting == "default":
        return None
    msg = (f"{ENV}={echo(setting)}: not a setting; set it to 'default' to keep the interpreter's "
           "garbage-collector thresholds, or unset it")
    raise CapmatrixError(msg)


def tune() -> None:
    """Set this process's collector to :func:`thresholds` (for processes capmatrix itself runs).

    :raises CapmatrixError: for a bad ``CAPMATRIX_GC``.
    """
    chosen = thresholds()
    if chosen is not None:
        gc.set_threshold(*chosen)
