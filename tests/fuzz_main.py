"""``make fuzz``: run every fuzz target of test_fuzz.py far longer than the normal suite does.

Usage: ``python tests/fuzz_main.py [EXAMPLES]`` (default 2000 examples per target, fresh random
seeds each run). Prints how many inputs each target tried and what the loader made of them; exits 1
when a target finds a failure (Hypothesis prints the shrunk input).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

DEFAULT_EXAMPLES = 2000


def say(line: str) -> None:
    """One line of the report, flushed at once (a long run shows progress)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    """Run the targets; return 0 when none failed."""
    examples = int(argv[0]) if argv else DEFAULT_EXAMPLES
    os.environ["CAPMATRIX_FUZZ_EXAMPLES"] = str(examples)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import test_fuzz

    failed = []
    started = time.perf_counter()
    for name, target in test_fuzz.TARGETS:
        began = time.perf_counter()
        try:
            target()
        except Exception:  # noqa: BLE001 - report every target, then fail
            traceback.print_exc()
            failed.append(name)
        took = time.perf_counter() - began
        status = "FAILED" if name in failed else "ok"
        say(f"{name:14} {test_fuzz.TRIED[name]:7} inputs  {took:7.1f}s  {status}")
    total = sum(test_fuzz.TRIED.values())
    say(f"{'total':14} {total:7} inputs  {time.perf_counter() - started:7.1f}s")
    outcomes = ", ".join(f"{k}={v}" for k, v in sorted(test_fuzz.OUTCOMES.items()))
    say(f"loader outcomes: {outcomes}")
    if failed:
        say(f"failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
