"""Citations of rules in the page model, and the numbered notes cells share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from capmatrix.authoring.render.page import (
    Citation,
    Note,
)
from capmatrix.matrix import ROOT_LABEL, Matrix
from capmatrix.model import Status

if TYPE_CHECKING:
    from collections.abc import Sequence

    from capmatrix.model import Rule

__all__: list[str] = []

class _Paths:
    """Show every path relative to the matrix root, as ``capabilities/...``."""

    def __init__(self, matrix: Matrix) -> None:
        self.show = matrix.show_path

    def location(self, path: str, line: int | None) -> tuple[str, str | None]:
        """``capabilities/x.yaml:12`` and a link to it from ``docs/`` (None outside the root)."""
        shown = self.show(path)
        text = shown if line is None else f"{shown}:{line}"
        if not shown.startswith(f"{ROOT_LABEL}/"):
            return text, None
        return text, f"../{shown}" + (f"#L{line}" if line is not None else "")


def _verification(rule: Rule) -> str:
    if rule.status is Status.VERIFIED:
        info = rule.verified or {}
        parts = [info[k] for k in ("gpu", "software", "date") if info.get(k)]
        text = "verified" + (f" on {', '.join(parts)}" if parts else "")
        if info.get("evidence"):
            text += f" (evidence: {info['evidence']})"
        return text
    if rule.status is Status.DERIVED:
        return "derived from a recorded source table"
    if rule.status is Status.READ_FROM_CODE:
        return "read from the code"
    if rule.status is Status.KNOWN_ISSUE:
        return "known issue"
    return "untested"


def _citation(rule: Rule, paths: _Paths, open_axes: Sequence[str] | None = None) -> Citation:
    location, link = paths.location(rule.location.path, rule.location.line)
    shown = rule.conditions if open_axes is None else {
        a: c for a, c in rule.conditions.items() if a in open_axes
    }
    requires = ", ".join(f"{a} {c.text}" for a, c in shown.items())
    return Citation(
        rule_id=rule.id,
        effect=str(rule.effect),
        location=location,
        link=link,
        region=rule.describe_region(),
        requires=requires,
        reason=" ".join(rule.reason.split()),
        source=" ".join(rule.source.split()),
        status=str(rule.status),
        verification=_verification(rule),
    )


class _Notes:
    """Numbered notes of one grid; cells with the same explanation share one."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.by_key: dict[tuple[object, ...], Note] = {}

    def get(
        self, summary: str, citations: Sequence[Citation], details: Sequence[str] = ()
    ) -> Note:
        key = (summary, tuple(c.rule_id for c in citations), tuple(details))
        found = self.by_key.get(key)
        if found is None:
            number = len(self.by_key) + 1
            found = Note(
                anchor=f"{self.prefix}-{number}", number=number, summary=summary,
                citations=tuple(citations), details=tuple(details),
            )
            self.by_key[key] = found
        return found

    @property
    def notes(self) -> tuple[Note, ...]:
        return tuple(self.by_key.values())
