"""What ``capmatrix check`` reports: findings as data, each with a stable code, and their witnesses.

Nothing here analyses or prints: the analyses (``_check``, ``_roles``, ``_diff``) make these values and
the CLI renders them.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from capmatrix.model import Location, _StrEnum, format_value

if TYPE_CHECKING:
    from collections.abc import Mapping

    from capmatrix.authoring.analysis._boxes import Area
    from capmatrix.model import AxisValue
    from capmatrix.regions import Space

__all__ = ["CODES", "MAX_REGIONS", "CheckResult", "Finding", "Severity", "Witness", "finding"]


class Severity(_StrEnum):
    """How bad a finding is: errors fail ``capmatrix check``; warnings fail it under ``--strict``."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}

#: code -> (default severity, short title). ``docs/analysis.md`` documents each with an example.
CODES: dict[str, tuple[Severity, str]] = {
    "C001": (Severity.ERROR, "invalid capability data"),
    "C002": (Severity.ERROR, "unknown axis"),
    "C003": (Severity.ERROR, "unknown value, family or range"),
    "C004": (Severity.ERROR, "unknown kernel"),
    "C101": (Severity.ERROR, "dead grant"),
    "C102": (Severity.WARNING, "dead exclusion"),
    "C103": (Severity.ERROR, "vacuous rule"),
    "C104": (Severity.WARNING, "duplicate rule"),
    "C105": (Severity.INFO, "subsumed rule"),
    "C106": (Severity.WARNING, "open-ended range"),
    "C107": (Severity.WARNING, "family siblings split"),
    "C108": (Severity.INFO, "role gap"),
    "C109": (Severity.WARNING, "shadowed role candidate"),
    "C110": (Severity.ERROR, "kernel supports nothing"),
    "C111": (Severity.WARNING, "over-restrictive gate"),
    "C112": (Severity.ERROR, "over-permissive gate"),
    "C113": (Severity.INFO, "refused at engine start"),
}

#: The most merged regions one finding (or a role's gap) lists; past it the finding says how many it
#: shows, and the share of the universe stays exact. ``check(..., max_regions=N)`` / ``--max-regions``.
MAX_REGIONS = 1_000



@dataclass(frozen=True, slots=True, kw_only=True)
class Witness:
    """A concrete query that shows a finding: a kernel (or role) and one value per axis."""

    values: Mapping[str, AxisValue]
    kernel: str | None = None
    role: str | None = None
    #: Axes whose value is the axis default: the command line may leave them out.
    implicit: tuple[str, ...] = ()

    @classmethod
    def at(
        cls, space: Space, values: Mapping[str, AxisValue], *, kernel: str | None = None,
        role: str | None = None,
    ) -> Witness:
        """A witness for ``values``, noting which of them are axis defaults."""
        implicit = tuple(
            a.name for a in space.axes
            if a.default is not None and a.name in values
            and values[a.name] == a.default and type(values[a.name]) is type(a.default)
        )
        return cls(values=dict(values), kernel=kernel, role=role, implicit=implicit)

    def command(self, matrix: str | None = None) -> str:
        """The ``capmatrix query`` / ``select`` command line that asks it (defaults left out).

        Every word is shell-quoted, so a pasted witness never runs anything; ``matrix`` (a matrix
        directory other than the shipped one) adds ``--matrix DIR``.
        """
        words = ["capmatrix", "select", self.role] if self.role else ["capmatrix", "query", str(self.kernel)]
        for name, value in self.values.items():
            if name in self.implicit:
                continue
            words += [f"--{name.replace('_', '-')}", format_value(value)]
        if matrix:
            words += ["--matrix", matrix]
        return " ".join(shlex.quote(word) for word in words)

    def as_dict(self, matrix: str | None = None) -> dict[str, object]:
        """JSON-ready form (``command`` with ``--matrix DIR`` when ``matrix`` is given)."""
        out: dict[str, object] = {}
        if self.kernel is not None:
            out["kernel"] = self.kernel
        if self.role is not None:
            out["role"] = self.role
        out["query"] = dict(self.values)
        out["command"] = self.command(matrix)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One problem or observation about a matrix.

    ``locations`` are the files and lines involved (rules, roles, kernels, or the loader's position);
    ``witness`` is a query showing it (None where no cell exists, e.g. a vacuous rule); ``regions``
    are the merged boxes it is about.
    """

    code: str
    severity: Severity
    message: str
    locations: tuple[Location, ...] = ()
    rules: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()
    witness: Witness | None = None
    regions: tuple[Area, ...] = field(default=())
    #: What the finding is about beyond its rules and kernels, where they do not tell two findings
    #: apart: the axis of an open-ended range, the family split, the role (and candidate).
    subject: str = ""
    #: For an engine whose releases its regions name: the releases in which the finding holds, oldest
    #: first, and the modelled releases in which it does not (``("1.2.0rc8",), ("1.2.0", "1.2.1")``).
    releases: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()

    def releases_text(self) -> str:
        """``tensorrt_llm 1.2.0rc8 (not in 1.2.0, 1.2.1)``; empty when it holds in every release."""
        parts = []
        for engine, held, not_held in self.releases:
            if not_held:
                parts.append(f"{engine} {', '.join(held)} (not in {', '.join(not_held)})")
        return "; ".join(parts)

    @property
    def key(self) -> str:
        """A key that names this finding across edits: code, subject, rules (else kernels).

        It holds no line, count or region, so a finding keeps its key while the files around it
        change; a finding with none of those (a loading problem) is keyed by its file and message.
        """
        parts = [self.code]
        if self.subject:
            parts.append(self.subject)
        if self.rules:
            parts.append(",".join(self.rules))
        elif self.kernels and not self.subject:
            parts.append(",".join(self.kernels))
        elif not self.subject:
            first = self.locations[0].path if self.locations else ""
            parts.append(f"{first}: {self.message}" if first else self.message)
        return " ".join(parts)

    @property
    def title(self) -> str:
        """The short name of the code."""
        return CODES.get(self.code, (self.severity, self.code))[1]

    def sort_key(self) -> tuple[int, str, str, int, str]:
        """Errors first, then by code, file, line."""
        first = self.locations[0] if self.locations else Location(path="")
        return (_RANK[self.severity], self.code, first.path, first.line or 0, self.message)

    def as_dict(self, matrix: str | None = None) -> dict[str, object]:
        """JSON-ready form (witness commands name ``--matrix DIR`` when ``matrix`` is given)."""
        return {
            "code": self.code,
            "key": self.key,
            "severity": str(self.severity),
            "title": self.title,
            "message": self.message,
            "locations": [
                {"file": loc.path, "line": loc.line, "column": loc.column} for loc in self.locations
            ],
            "rules": list(self.rules),
            "kernels": list(self.kernels),
            "witness": None if self.witness is None else self.witness.as_dict(matrix),
            "regions": [a.as_dict() for a in self.regions],
            **({"releases": {engine: {"holds": list(held), "not": list(not_held)}
                             for engine, held, not_held in self.releases}} if self.releases else {}),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """The findings for one matrix directory; ``loaded`` is False when the data did not load."""

    path: str
    findings: tuple[Finding, ...]
    loaded: bool

    def count(self, severity: Severity) -> int:
        """How many findings have ``severity``."""
        return sum(1 for f in self.findings if f.severity is severity)

    def exit_status(self, *, strict: bool = False) -> int:
        """0 clean (warnings allowed unless strict), 1 with errors, 2 when the data did not load."""
        if not self.loaded:
            return 2
        if self.count(Severity.ERROR) or (strict and self.count(Severity.WARNING)):
            return 1
        return 0

    def as_dict(self, matrix: str | None = None, *, lazy: bool = False) -> dict[str, object]:
        """JSON-ready form; ``matrix`` (a non-default matrix directory) goes into witness commands.

        ``lazy``: ``findings`` is an iterator of their forms, made as a streaming writer reads it
        (``capmatrix check --json`` on a matrix with thousands of findings).
        """
        findings = (f.as_dict(matrix) for f in self.findings)
        return {
            "path": self.path,
            "loaded": self.loaded,
            "summary": {str(s): self.count(s) for s in Severity},
            "findings": findings if lazy else list(findings),
        }


def finding(code: str, message: str, **kw: object) -> Finding:
    severity = kw.pop("severity", None) or CODES[code][0]
    return Finding(code=code, severity=severity, message=message, **kw)  # type: ignore[arg-type]
