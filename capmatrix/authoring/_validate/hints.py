"""The hint budget of one load: spelling guesses ("did you mean ...?") and lists of choices.

A hostile matrix could otherwise ask for millions of comparisons (10k typos x 10k axes); each load
starts with a fresh budget (per thread) and hints degrade to counts once it is spent.
"""

from __future__ import annotations

import heapq
import threading

from capmatrix.errors import did_you_mean, echo

__all__ = ["MAX_LISTED", "MAX_SUGGESTIONS", "MAX_SUGGEST_CHOICES", "close", "reset", "suggest"]

#: Spelling guesses per load, and the most choices one guess compares with.
MAX_SUGGESTIONS = 200
MAX_SUGGEST_CHOICES = 1000
#: Names a hint lists before "...".
MAX_LISTED = 16
#: The guesses left to the load running in this thread.
_suggestions = threading.local()


def reset() -> None:
    """Give the load starting in this thread a full budget."""
    _suggestions.left = MAX_SUGGESTIONS


def _spend() -> bool:
    """Take one costly hint from the load's budget; False when it is spent."""
    left: int = getattr(_suggestions, "left", MAX_SUGGESTIONS)
    if left <= 0:
        return False
    _suggestions.left = left - 1
    return True


def close(word: str, choices: set[str] | list[str]) -> str | None:
    """did_you_mean within the load's budget (a guess compares ``word`` with every choice)."""
    if len(choices) > MAX_SUGGEST_CHOICES or not _spend():
        return None
    return did_you_mean(word, choices)


def suggest(word: str, choices: set[str] | list[str], label: str) -> str:
    """A hint for an unknown ``word``: the close choice, else the choices listed (within the budget)."""
    close_match = close(word, choices)
    if close_match:
        return f"did you mean {echo(close_match)}?"
    if len(choices) <= MAX_LISTED:
        return f"{label}: {', '.join(sorted(choices))}"
    if _spend():
        first = ", ".join(heapq.nsmallest(MAX_LISTED, choices))
        return f"{label}: {first}, ... ({len(choices)} in all)"
    return f"{label}: {len(choices)} in all"
