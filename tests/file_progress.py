"""Per-file progress: one line per test file, printed when its last test is done.

pytest prints a dot per test, and with xdist the dots of every file interleave on lines without a file
name, which tells a reader nothing about where the run is. Unless ``-v`` is given, this plugin blanks
the dots and prints instead, as each file's last test finishes (on whichever worker)::

    [ 12/95   2:13] tests/test_authoring_cli.py  42 passed, 1 skipped  3.1 s

``12/95`` counts files done, ``2:13`` is the wall time since the session started and ``3.1 s`` is the
time spent in that file's tests (setup, call and teardown, summed over the workers that ran them).
Failures and errors are still reported in full at the end, by pytest's own summary; ``-v`` restores
pytest's line per test.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Generator, Sequence

    from _pytest.terminal import TerminalReporter

#: The outcomes, in the order a file's line lists them; the colour a line takes from its worst one.
_ORDER = ("failed", "error", "xpassed", "passed", "skipped", "xfailed")
_BAD = {"failed", "error", "xpassed"}


@dataclass(slots=True)
class _File:
    """What is known of one test file: its tests, those done and how, and the seconds they took."""

    total: int = 0
    outcome: dict[str, str] = field(default_factory=dict)  # nodeid -> outcome of a test done so far
    seen: dict[str, str] = field(default_factory=dict)  # nodeid -> outcome of its phases so far
    seconds: float = 0.0
    printed: bool = False


class Progress:
    """The plugin: counts each file's tests at collection and prints its line when all have reported."""

    def __init__(self, reporter: TerminalReporter) -> None:
        self._reporter = reporter
        self._files: dict[str, _File] = {}
        self._done = 0
        self._start = time.monotonic()
        self._collected = False

    # -- what is to be run ---------------------------------------------------------------------

    def _expect(self, nodeids: Sequence[str]) -> None:
        if self._collected:  # every xdist worker collects the same tests; count them once
            return
        self._collected = True
        for nodeid in nodeids:
            self._file(nodeid).total += 1

    def _file(self, nodeid: str) -> _File:
        return self._files.setdefault(nodeid.split("::", 1)[0], _File())

    @pytest.hookimpl
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._expect([item.nodeid for item in session.items])

    # Registered only where xdist is installed (see ``register``).
    def pytest_xdist_node_collection_finished(self, node: object, ids: Sequence[str]) -> None:
        self._expect(ids)

    # -- what has run --------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_report_teststatus(
        self, report: pytest.TestReport | pytest.CollectReport
    ) -> Generator[None, tuple[str, str, object], tuple[str, str, object]]:
        category, letter, word = yield
        if isinstance(report, pytest.TestReport):
            self._record(report, category)
            letter = ""  # no dot: the file's line tells the progress (the word stays for summaries)
        return category, letter, word

    def _record(self, report: pytest.TestReport, category: str) -> None:
        entry = self._file(report.nodeid)
        entry.seconds += report.duration
        if category == "failed" and report.when != "call":
            category = "error"  # as pytest counts a setup or teardown failure
        # The first phase with an outcome names it, unless a later phase fails.
        if (category and report.nodeid not in entry.seen) or category in {"error", "failed"}:
            entry.seen[report.nodeid] = category
        # A test is done at its teardown, or at the report xdist makes for a crashed worker's test
        # (its phase "???").
        if report.when in {"teardown", "???"}:
            entry.outcome[report.nodeid] = entry.seen.get(report.nodeid, "passed")
            if entry.total and len(entry.outcome) >= entry.total:
                self._print(report.nodeid.split("::", 1)[0], entry)

    def _print(self, path: str, entry: _File) -> None:
        if entry.printed:
            return
        entry.printed = True
        self._done += 1
        counts = Counter(entry.outcome.values())
        words = ", ".join(f"{counts[o]} {o}" for o in _ORDER if counts[o])
        minutes, seconds = divmod(int(time.monotonic() - self._start), 60)
        width = len(str(len(self._files)))
        head = f"[{self._done:>{width}}/{len(self._files)} {minutes:>3}:{seconds:02d}]"
        bad = bool(_BAD & set(counts))
        markup = {"red": True} if bad else {"yellow": True} if not counts["passed"] else {"green": True}
        tw = self._reporter._tw  # the reporter.s own writer keeps lines whole
        self._reporter.ensure_newline()
        tw.write(f"{head} {path}  ")
        tw.write(words or "nothing run", **markup)
        tw.line(f"  {entry.seconds:.1f} s")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        # Files left unfinished (an interrupted run, a worker that died): say what they had.
        for path, entry in self._files.items():
            if not entry.printed and entry.outcome:
                self._print(path, entry)


def register(config: pytest.Config) -> None:
    """Register the plugin on the controlling process of a run without ``-v`` (not on xdist's workers)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    quiet = config.get_verbosity() <= 0 and not config.getoption("collectonly")
    if reporter is None or not quiet or hasattr(config, "workerinput"):
        return
    config.pluginmanager.register(Progress(reporter), "capmatrix-progress")
    # The reporter's "[ 42%]" would be printed after dots that are no longer there.
    reporter._show_progress_info = False  # no public switch for it
