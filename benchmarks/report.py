"""The benchmark report's pieces: rows, sections and the formatting of times, sizes and ratios.

Shared by the runner (``benchmarks.run``) and the sections it gathers from other modules
(``benchmarks.vllm_select``), which import them from here rather than from the runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.timing import Timing

__all__ = ["Row", "Section", "fmt_bytes", "fmt_time", "fmt_timing", "ratio"]


@dataclass(slots=True)
class Row:
    """One line of a report table."""

    name: str
    value: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    met: bool | None = None
    note: str = ""
    #: the value over the target's limit (1.7 = 70 % over), for a target not met
    over: float | None = None
    #: the workload (``benchmarks.profiles.WORKLOADS``) profiled when the target is not met
    profile: str = ""


@dataclass(slots=True)
class Section:
    """One report section: a title, a paragraph, a table and free notes."""

    title: str
    intro: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: markdown after the table and notes (the profiles' tables)
    body: list[str] = field(default_factory=list)


def fmt_time(seconds: float) -> str:
    """A duration with a unit that keeps three significant digits."""
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def fmt_timing(t: Timing) -> str:
    return f"{fmt_time(t.best)} (median {fmt_time(t.median)})"


def fmt_bytes(n: float) -> str:
    if abs(n) < 1024 * 1024:
        return f"{n / 1024:.0f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x"
