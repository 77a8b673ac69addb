"""What a resolution answers: verdicts, reasons, where each value came from, resolutions, selections.

Plain values produced by :class:`capmatrix.resolver.Resolver` (which re-exports them); an explanation
is worked out on first read, from the resolver that bound it.
"""

from __future__ import annotations

from capmatrix._core.record import field, record
from capmatrix.model import _StrEnum

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from capmatrix.model import AxisValue
    from capmatrix.query import KernelQuery
    from capmatrix.regions import Region

__all__ = ["CLOSEST_GRANTS", "MAX_NEAR_MISSES", "Origin", "OriginKind", "Reason", "ReasonKind", "Resolution",
           "Selection", "Verdict"]

#: How many grants an explanation lists (k): the closest first, ranked by how many axes of the query
#: they miss (grants that apply miss none); the rest are counted in one ``more`` reason. Every
#: exclusion that applies is always listed. Per answer: ``Resolution.explain(closest=k)``.
CLOSEST_GRANTS = 8
#: The former name of :data:`CLOSEST_GRANTS`.
MAX_NEAR_MISSES = CLOSEST_GRANTS


class Verdict(_StrEnum):
    """The answer to a query."""

    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    DEPENDS = "depends"


class ReasonKind(_StrEnum):
    """What one :class:`Reason` explains; the value is its JSON spelling."""

    #: a grant that applies
    GRANT = "grant"
    #: an exclusion that applies
    EXCLUDE = "exclude"
    #: a grant that does not apply (``axis``, ``required``, ``actual`` say why)
    MISMATCH = "mismatch"
    #: a value outside the declared universe, answered by the rules' ranges
    OUTSIDE = "outside"
    #: a value the model family set
    MODEL = "model"
    #: a value from the axis default
    DEFAULT = "default"
    #: where the kernel is supported when the verdict depends on open axes
    RESIDUAL = "residual"
    #: how many grants the explanation leaves out (past the closest ``CLOSEST_GRANTS``)
    MORE = "more"


class OriginKind(_StrEnum):
    """Where a resolved axis value came from."""

    QUERY = "query"
    MODEL = "model"
    DEFAULT = "default"


class Origin(str):
    """Where one resolved axis value came from: ``kind``, and ``model`` for a model family's value.

    The text is the JSON form (``query``, ``model:llama``, ``default``); read ``kind`` and ``model``
    rather than parsing it.

    >>> Origin(OriginKind.MODEL, "llama").model, Origin(OriginKind.MODEL, "llama") == "model:llama"
    ('llama', True)
    """

    __slots__ = ("kind", "model")

    kind: OriginKind
    model: str | None

    def __new__(cls, kind: OriginKind, model: str | None = None) -> Origin:  # noqa: PYI034
        text = f"{kind}:{model}" if kind is OriginKind.MODEL else str(kind)
        self = super().__new__(cls, text)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "model", model if kind is OriginKind.MODEL else None)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Origin is immutable ({name!r})")

    def __reduce__(self) -> tuple[object, ...]:
        return (Origin, (self.kind, self.model))

    def __repr__(self) -> str:
        return f"Origin({str(self)!r})"


_QUERY = Origin(OriginKind.QUERY)
_DEFAULT = Origin(OriginKind.DEFAULT)


@record(kw_only=True)
class Reason:
    """One piece of an explanation; ``kind`` (a :class:`ReasonKind`) says which."""

    kind: ReasonKind
    message: str
    rule_id: str | None = None
    path: str | None = None
    line: int | None = None
    axis: str | None = None
    required: str | None = None
    actual: AxisValue | None = None
    detail: str | None = None
    source: str | None = None
    status: str | None = None

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready form (``rule``, ``file``, ``line``, ``message``, ...)."""
        out: dict[str, object] = {"kind": str(self.kind), "message": self.message}
        optional = (
            ("rule", self.rule_id),
            ("file", self.path),
            ("line", self.line),
            ("axis", self.axis),
            ("required", self.required),
            ("actual", self.actual),
            ("reason", self.detail),
            ("source", self.source),
            ("status", self.status),
        )
        out.update((key, value) for key, value in optional if value is not None)
        return out

    def __str__(self) -> str:
        return self.message


@record(kw_only=True)
class Resolution:
    """A verdict for one query, with every reason behind it.

    The verdict, values and residual are computed when the query is resolved; the reasons are built
    on first access (an engine on its per-step path reads the verdict only) and kept.
    """

    query: KernelQuery
    kernel: str
    verdict: Verdict
    values: Mapping[str, AxisValue]
    origins: Mapping[str, Origin]
    residual: Region | None = None
    #: Whether the residual holds only the first ``MAX_RESIDUAL_BOXES`` boxes of a larger region.
    residual_truncated: bool = False
    outside: tuple[str, ...] = ()
    _explain: Callable[[int], tuple[Reason, ...]] | None = field(default=None, repr=False, compare=False)
    _reasons: tuple[Reason, ...] | None = field(default=None, repr=False, compare=False)

    def __bool__(self) -> bool:
        return self.verdict is Verdict.SUPPORTED

    @property
    def reasons(self) -> tuple[Reason, ...]:
        """Every reason behind the verdict: the rules that decided it, mismatches, value origins."""
        found = self._reasons
        if found is None:
            explain = self._explain
            # Two threads may both build the reasons; they are equal, and either may be kept.
            found = explain(CLOSEST_GRANTS) if explain is not None else ()
            object.__setattr__(self, "_reasons", found)
        return found

    def explain(self, *, closest: int = CLOSEST_GRANTS) -> tuple[Reason, ...]:
        """The reasons with the ``closest`` grants listed (every exclusion that applies is listed)."""
        if closest == CLOSEST_GRANTS:
            return self.reasons
        explain = self._explain
        return explain(max(0, closest)) if explain is not None else ()

    @property
    def rules(self) -> tuple[str, ...]:
        """Ids of the rules cited by the reasons."""
        return tuple(dict.fromkeys(r.rule_id for r in self.reasons if r.rule_id))

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready form (the CLI's ``--json``)."""
        return {
            "kernel": self.kernel,
            "verdict": str(self.verdict),
            "query": dict(self.values),
            "origins": dict(self.origins),
            "model": self.query.model,
            "reasons": [r.as_dict() for r in self.reasons],
            "residual": None if self.residual is None else self.residual.describe(),
            "residual_regions": None if self.residual is None else self.residual.as_dicts(),
            "residual_truncated": self.residual_truncated,
            "outside_universe": list(self.outside),
        }


@record(kw_only=True)
class Selection:
    """The first supported candidate of a role, with the trace of every candidate tried."""

    role: str
    query: KernelQuery
    kernel: str | None
    resolution: Resolution | None
    trace: tuple[Resolution, ...] = field(default=())
    #: False when the role picks its candidate order by an axis the query leaves open.
    decided: bool = True
    #: Where undecided: the axes the role's candidate order reads that the query leaves open.
    open_axes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.kernel is not None

    @property
    def verdict(self) -> Verdict:
        """The selection's verdict: ``depends`` when an earlier-ranked candidate depends on an axis.

        With that axis fixed, the choice could change; with no winner, any depending candidate counts.
        A role whose candidate order reads an open axis depends too.
        """
        if not self.decided:
            return Verdict.DEPENDS
        for resolution in self.trace:
            if resolution.verdict is Verdict.DEPENDS:
                return Verdict.DEPENDS
        return Verdict.SUPPORTED if self.kernel is not None else Verdict.UNSUPPORTED

    @property
    def rejected(self) -> tuple[Resolution, ...]:
        """Resolutions of the candidates passed over before the winner (or all, when none won)."""
        return tuple(r for r in self.trace if r.kernel != self.kernel)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready form."""
        return {
            "role": self.role,
            "kernel": self.kernel,
            "verdict": str(self.verdict),
            "trace": [r.as_dict() for r in self.trace],
            **({} if self.decided else {"order_reads_open": list(self.open_axes)}),
        }
