"""The evidence file format of ``capmatrix probe``: cases, observations, and their comparison with a matrix.

Reading, comparing and writing evidence needs no torch: the renderer summarises committed evidence
files with :func:`compare`. :mod:`capmatrix.authoring.probe` is the torch runner that produces them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capmatrix._shipped.default import resolve
from capmatrix.authoring._atomic import write_text_atomic
from capmatrix.query import KernelQuery

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping

    from capmatrix.matrix import Matrix

__all__ = [
    "EVIDENCE_FORMAT",
    "Comparison",
    "Disagreement",
    "Observation",
    "ProbeCase",
    "annotate",
    "compare",
    "dumps_evidence",
    "read_evidence",
    "write_evidence",
]

#: Version of the evidence file layout written by :func:`capmatrix.authoring.probe.collect`.
EVIDENCE_FORMAT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeCase:
    """One SDPA query: the axis values besides ``sm``."""

    dtype: str
    head_dim: int
    attention: str
    causal: bool
    attn_mask: bool
    dropout: bool

    def axes(self) -> dict[str, str | int | bool]:
        """Return the case as ``{axis: value}``."""
        return {
            "dtype": self.dtype,
            "head_dim": self.head_dim,
            "attention": self.attention,
            "causal": self.causal,
            "attn_mask": self.attn_mask,
            "dropout": self.dropout,
        }

    @classmethod
    def from_axes(cls, axes: Mapping[str, object]) -> ProbeCase:
        """Build a case from ``{axis: value}`` (as stored in an evidence file).

        :raises ValueError: when an axis is missing or has the wrong type.
        """
        try:
            dtype, head_dim, attention = axes["dtype"], axes["head_dim"], axes["attention"]
            causal, attn_mask, dropout = axes["causal"], axes["attn_mask"], axes["dropout"]
        except KeyError as exc:
            raise ValueError(f"probe case {dict(axes)!r} lacks axis {exc.args[0]!r}") from None
        if not (
            isinstance(dtype, str)
            and isinstance(attention, str)
            and isinstance(head_dim, int)
            and not isinstance(head_dim, bool)
            and all(isinstance(v, bool) for v in (causal, attn_mask, dropout))
        ):
            raise ValueError(f"probe case {dict(axes)!r} has a value of the wrong type")
        return cls(
            dtype=dtype,
            head_dim=head_dim,
            attention=attention,
            causal=bool(causal),
            attn_mask=bool(attn_mask),
            dropout=bool(dropout),
        )

    def label(self) -> str:
        """Return a short, stable text form, e.g. ``bf16/d128/gqa/causal``."""
        flags = [
            n
            for n, on in (("causal", self.causal), ("mask", self.attn_mask), ("dropout", self.dropout))
            if on
        ]
        return "/".join([self.dtype, f"d{self.head_dim}", self.attention, *flags])


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """What PyTorch said and did for one kernel on one case."""

    kernel: str
    #: ``torch.backends.cuda.can_use_*`` (None for math, which has no predicate, or on error).
    can_use: bool | None
    #: Forcing the backend with ``sdpa_kernel([backend])`` returned without error.
    ran: bool
    #: Largest absolute difference to the float32 reference (None when not run or not compared).
    max_abs_err: float | None = None
    #: Within tolerance of the reference (None when not compared: not run, or dropout).
    matches: bool | None = None
    #: First line of the error that forcing raised, if any.
    error: str | None = None

    @property
    def usable(self) -> bool:
        """Return the ground truth the matrix models: forcing ran and gave a right answer."""
        return self.ran and self.matches is not False

    def to_json(self) -> dict[str, object]:
        """Return the observation as JSON-ready data (fields that are None are left out)."""
        data: dict[str, object] = {
            "can_use": self.can_use,
            "ran": self.ran,
            "max_abs_err": self.max_abs_err,
            "matches": self.matches,
            "error": self.error,
        }
        return {**{k: v for k, v in data.items() if v is not None}, "usable": self.usable}

    @classmethod
    def from_json(cls, kernel: str, data: Mapping[str, Any]) -> Observation:
        """Read an observation back from :meth:`to_json` data."""
        return cls(
            kernel=kernel,
            can_use=data.get("can_use"),
            ran=bool(data["ran"]),
            max_abs_err=data.get("max_abs_err"),
            matches=data.get("matches"),
            error=data.get("error"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Disagreement:
    """The matrix and the GPU disagree on one kernel and case."""

    kernel: str
    case: ProbeCase
    #: ``forced`` (matrix vs forcing the backend: counts) or ``can_use`` (matrix vs the predicate).
    against: str
    matrix: str
    observed: bool
    detail: str = ""

    def __str__(self) -> str:
        seen = "usable" if self.observed else "not usable"
        what = "forcing it" if self.against == "forced" else "torch can_use_*"
        tail = f" ({self.detail})" if self.detail else ""
        return f"{self.kernel} {self.case.label()}: matrix says {self.matrix}, {what}: {seen}{tail}"


def read_evidence(
    data: Mapping[str, Any],
) -> tuple[int, list[tuple[ProbeCase, tuple[Observation, ...]]]]:
    """Return ``(sm, [(case, observations)])`` from evidence data.

    :raises ValueError: when the data is not probe evidence of a known format.
    """
    if data.get("format") != EVIDENCE_FORMAT:
        raise ValueError(f"unknown evidence format {data.get('format')!r} (expected {EVIDENCE_FORMAT})")
    try:
        sm = data["environment"]["sm"]
        raw_rows = list(data["cases"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"evidence lacks environment.sm or cases: {exc!r}") from None
    if type(sm) is not int or sm < 0:  # as the probe writes it: 90, not 90.0, "90", true or Infinity
        raise ValueError(f"evidence environment.sm must be an integer such as 90, got {sm!r}")
    rows = []
    for i, row in enumerate(raw_rows):
        try:
            case = ProbeCase.from_axes(row["query"])
            obs = tuple(Observation.from_json(k, r) for k, r in sorted(row["results"].items()))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"evidence cases[{i}]: {exc}") from None
        rows.append((case, obs))
    return sm, rows


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """The matrix against the evidence: disagreements (counted), notes and every verdict."""

    #: The matrix's verdict differs from forcing the backend (what "usable" means).
    disagreements: tuple[Disagreement, ...] = ()
    #: The matrix's verdict differs from ``can_use_*`` (reported, not counted).
    notes: tuple[Disagreement, ...] = ()
    #: ``(kernel, case) -> verdict`` for every comparison made.
    verdicts: Mapping[tuple[str, ProbeCase], str] = field(default_factory=dict)

    @property
    def checks(self) -> int:
        """Return how many (kernel, case) pairs were compared."""
        return len(self.verdicts)


def compare(data: Mapping[str, Any], matrix: Matrix | None = None) -> Comparison:
    """Compare evidence data with the matrix's verdicts for the same queries (at the evidence's SM).

    :raises ValueError: when the data is not probe evidence.
    :raises capmatrix.InvalidQuery: when a case names a kernel or value the matrix lacks.
    """
    sm, rows = read_evidence(data)
    disagreements: list[Disagreement] = []
    notes: list[Disagreement] = []
    verdicts: dict[tuple[str, ProbeCase], str] = {}
    for case, observations in rows:
        for obs in observations:
            query = KernelQuery(obs.kernel, sm=sm).replace(**case.axes())
            verdict = str(resolve(query, matrix=matrix).verdict)
            verdicts[obs.kernel, case] = verdict
            said = verdict == "supported"
            if verdict not in {"supported", "unsupported"} or said != obs.usable:
                disagreements.append(
                    Disagreement(
                        kernel=obs.kernel,
                        case=case,
                        against="forced",
                        matrix=verdict,
                        observed=obs.usable,
                        detail=obs.error or "",
                    )
                )
            if obs.can_use is not None and obs.can_use != said:
                notes.append(
                    Disagreement(
                        kernel=obs.kernel,
                        case=case,
                        against="can_use",
                        matrix=verdict,
                        observed=obs.can_use,
                    )
                )
    return Comparison(disagreements=tuple(disagreements), notes=tuple(notes), verdicts=verdicts)


def annotate(data: Mapping[str, Any], comparison: Comparison) -> dict[str, Any]:
    """Return a copy of evidence data with the matrix's verdicts and a summary added."""
    rows = []
    for row in data["cases"]:
        case = ProbeCase.from_axes(row["query"])
        matrix = {
            k: comparison.verdicts[k, case]
            for k in sorted(row["results"])
            if (k, case) in comparison.verdicts
        }
        rows.append({**row, "matrix": matrix})
    summary = {
        "cases": len(rows),
        "checks": comparison.checks,
        "disagreements": [str(d) for d in comparison.disagreements],
        "can_use_differs": [str(d) for d in comparison.notes],
        "agree": not comparison.disagreements,
    }
    return {**data, "cases": rows, "summary": summary}


def dumps_evidence(data: Mapping[str, Any]) -> str:
    """Render evidence data as JSON text: the header indented, then one case per line."""
    head = json.dumps({k: v for k, v in data.items() if k != "cases"}, indent=2, sort_keys=True)
    lines = [json.dumps(row, sort_keys=True) for row in data.get("cases", ())]
    cases = "[\n" + ",\n".join(f"    {line}" for line in lines) + "\n  ]" if lines else "[]"
    if head == "{}":
        return f'{{\n  "cases": {cases}\n}}\n'
    return f'{head[:-2]},\n  "cases": {cases}\n}}\n'


def write_evidence(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """Write evidence data as JSON atomically (a temporary file, then ``os.replace``).

    :raises OSError: when the file cannot be written; an old file is then left untouched.
    """
    write_text_atomic(path, dumps_evidence(data))
    return Path(path)
