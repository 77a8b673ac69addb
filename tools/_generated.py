"""What the importers in tools/ share: a generated section between two marker lines, and its drift check.

Each importer derives rules from a recorded source table; the YAML holds them between a BEGIN and an
END line, so the hand-written rules around them stay as they are. ``--check`` (what ``make test`` runs)
compares the committed section with the one the table gives and prints the difference.
"""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path
from typing import Any


class MarkerError(ValueError):
    """The generated section's marker lines are missing or out of order."""


def splice(text: str, section: str, begin: str, end: str, *, where: str) -> str:
    """``text`` with the lines strictly between the ``begin`` and ``end`` lines replaced by ``section``.

    :raises MarkerError: when either marker line is missing, or the end comes first.
    """
    lines = text.splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip("\n") == begin)
        stop = next(i for i, line in enumerate(lines) if line.rstrip("\n") == end and i > start)
    except StopIteration:
        msg = f"{where}: the generated section's markers are missing; add the lines\n{begin}\n{end}"
        raise MarkerError(msg) from None
    return "".join([*lines[: start + 1], section, *lines[stop:]])


def update(path: Path, current: str, wanted: str, *, check: bool, tool: str) -> int:
    """Write ``wanted`` to ``path`` (or with ``check`` only compare); 1 when ``check`` finds it stale.

    A stale file under ``check`` is left untouched and its unified diff goes to stderr with the command
    that regenerates it; an up-to-date file is not rewritten.
    """
    if current == wanted:
        return 0
    if check:
        sys.stderr.writelines(difflib.unified_diff(
            current.splitlines(keepends=True), wanted.splitlines(keepends=True),
            f"{path} (committed)", f"{path} (generated)"))
        print(f"stale: run python {tool}", file=sys.stderr)
        return 1
    path.write_text(wanted, encoding="utf-8")
    print(f"wrote {path}")
    return 0


def folded(text: str, indent: str = "          ", width: int = 110) -> list[str]:
    """``text`` as the lines of a folded (``>-``) block scalar, each at most ``width`` characters.

    YAML folds the lines back with one space between them, so the value is ``text`` with its runs of
    whitespace made single spaces; a word longer than a line stays whole.
    """
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(indent) + len(line) + 1 + len(word) > width:
            lines.append(indent + line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, indent + line]


def emit_table(table: Any, path: Path, *, write: bool) -> None:  # noqa: ANN401 - any JSON value
    """An extracted table as sorted, indented JSON: written to ``path``, or printed to stdout."""
    text = json.dumps(table, indent=1, sort_keys=True) + "\n"
    if write:
        path.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
