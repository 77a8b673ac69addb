"""What would work: the smallest changes of a query's values that make its kernel supported.

A search over the compiled index, never over the YAML: a change sets one axis to one known value, and
a candidate set of changes is answered with the same bitset ANDs (and, for axes left open, the same
region test) as :meth:`capmatrix.Resolver.resolve`. Changes of one axis are tried first, then of two;
a set of two is kept only when neither of its changes works alone, so every suggestion is minimal.
The resolve path itself is untouched: suggestions are computed only when asked for.

Only axes some rule of the kernel names are changed (no other axis can change the answer). A set of
changes that leaves axes open is answered by the resolver itself (the question "supported for every
value of the open axes" is a walk over their values, which can grow exponentially with them). One
call spends at most :data:`MAX_WORK` steps: a step per set of changes tried, and a step per node of
the resolver's walks (and per box of a residual). Single changes are tried first, then pairs; when
the budget runs out, the sets not yet tried are left out and the result's ``truncated`` is true. The
budget counts steps, not time, so a truncated answer is the same on every machine.
"""

from __future__ import annotations

from itertools import combinations

from capmatrix._core.partition import Work, WorkLimit
from capmatrix._core.record import record
from capmatrix.errors import InvalidQuery, UnknownName
from capmatrix.model import format_value
from capmatrix.resolver import Verdict

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping

    from capmatrix._core.bitsets import _CompiledKernel
    from capmatrix.model import Axis, AxisValue
    from capmatrix.query import KernelQuery
    from capmatrix.resolver import Resolver

__all__ = [
    "GEOMETRY", "MAX_CHANGES", "MAX_WORK", "PRECISION", "Suggestion", "Suggestions", "default_vary",
    "suggestions",
]

#: The model's own geometry: never varied unless asked for with ``vary``.
GEOMETRY = ("attention", "head_dim", "q_per_kv")
#: Axes a model sets that are still the deployment's choice (quantised weights or KV cache).
PRECISION = ("dtype", "kv_cache_dtype")
#: The most axes one suggestion changes (the search is bounded by it).
MAX_CHANGES = 2
#: Steps one call spends (sets of changes tried, nodes of the resolver's walks over open axes); past it,
#: the sets not yet tried are left out (:attr:`Suggestions.truncated`). A step is some tens of
#: microseconds at most, so a search ends within a few seconds on any matrix.
MAX_WORK = 200_000


@record(kw_only=True)
class Suggestion:
    """A minimal set of axis changes under which the query's kernel is supported.

    ``changes`` maps each changed axis to its new value (in axis order); ``previous`` to the value it
    had, or None where the axis was open; ``query`` is the original query with the changes applied.
    """

    changes: Mapping[str, AxisValue]
    previous: Mapping[str, AxisValue | None]
    query: KernelQuery

    def __str__(self) -> str:
        return "set " + " and ".join(f"{k}={format_value(v)}" for k, v in self.changes.items())

    def command(self) -> str:
        """The ``capmatrix query`` command line of the changed query."""
        parts = ["capmatrix", "query", str(self.query.kernel)]
        if self.query.model is not None:
            parts += ["--model", self.query.model]
        for name, value in self.query.axes.items():
            parts += ["--" + name.replace("_", "-"), format_value(value)]
        return " ".join(parts)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready form: ``changes``, ``from`` (None where the axis was open), ``command``."""
        return {
            "changes": dict(self.changes),
            "from": dict(self.previous),
            "command": self.command(),
        }


class Suggestions(tuple[Suggestion, ...]):  # noqa: SLOT001 - a tuple with one flag needs a __dict__
    """The suggestions of one query, a tuple; ``truncated`` says the search's budget ran out.

    When it is true, the work budget (:data:`MAX_WORK`) ran out before every set of changes was tried:
    those found are minimal, but others may exist.
    """

    truncated: bool

    def __new__(  # noqa: PYI034 - typing.Self needs Python 3.11
        cls, items: Iterable[Suggestion] = (), *, truncated: bool = False
    ) -> Suggestions:
        made = super().__new__(cls, items)
        made.truncated = truncated
        return made


def default_vary(resolver: Resolver, query: KernelQuery) -> tuple[str, ...]:
    """The axes a caller may change by default: all but the model's own geometry.

    That is every axis except :data:`GEOMETRY` and the other axes the query's model sets, save its
    :data:`PRECISION` (a checkpoint's dtypes are a deployment choice).
    """
    fixed = set(GEOMETRY)
    if query.model is not None:
        model = resolver.matrix.model(query.model)
        if model is not None:
            fixed.update(name for name in model.axes if name not in PRECISION)
    return tuple(name for name in resolver.matrix.axes if name not in fixed)


def _check_vary(resolver: Resolver, vary: Iterable[str]) -> tuple[str, ...]:
    if isinstance(vary, str):
        raise InvalidQuery(f"vary is a collection of axis names, got the string {vary!r}")
    names = list(vary)
    for name in names:
        if name not in resolver.matrix.axes:
            raise UnknownName("axis", name, resolver.matrix.axes)
    return tuple(n for n in resolver.matrix.axes if n in set(names))


class _Search:
    """One kernel's compiled rules against one query's admitted rule sets."""

    def __init__(self, compiled: _CompiledKernel, axes: tuple[Axis, ...],
                 admits: dict[int, int], open_axes: list[int],
                 decide: Callable[[Mapping[int, int]], bool]) -> None:
        self.compiled = compiled
        self.axes = axes
        self.admits = admits
        self.open = open_axes
        self.all_rules = (1 << len(compiled.rules)) - 1
        self.decide = decide  # the resolver's verdict of the changed query (axes left open)

    def supported(self, changes: Mapping[int, int]) -> bool:
        """Whether the query with axis ``position -> value index`` changes is supported."""
        compiled = self.compiled
        candidates = self.all_rules
        for ai, admit in self.admits.items():
            if ai not in changes:
                candidates &= admit
        for ai, vi in changes.items():
            candidates &= compiled.by_value[ai][vi]
        grants = candidates & compiled.grants
        if not grants:
            return False
        exclusions = candidates & compiled.exclusions
        if not any(p not in changes for p in self.open):
            return not exclusions
        # Axes left open: supported when the grants minus the exclusions cover every combination of
        # their values, which the resolver answers (a region test here can grow exponentially).
        return self.decide(changes)


def _admits(
    compiled: _CompiledKernel, axes: tuple[Axis, ...], values: Mapping[str, AxisValue]
) -> dict[int, int]:
    """Per fixed axis position, the rules admitting its value (as the resolver computes them)."""
    admits: dict[int, int] = {}
    for ai, axis in enumerate(axes):
        if axis.name not in values:
            continue
        value = values[axis.name]
        vi = axis.locate(value)
        if vi is not None:
            admits[ai] = compiled.by_value[ai][vi]
            continue
        admit = compiled.unconstrained[ai]  # a value outside the universe: the rules' ranges decide
        for bit, rule in enumerate(compiled.rules):
            cond = rule.conditions.get(axis.name)
            if cond is not None and cond.contains(value):
                admit |= 1 << bit
        admits[ai] = admit
    return admits


def suggestions(
    resolver: Resolver, query: KernelQuery, vary: Collection[str] | None = None
) -> Suggestions:
    """The minimal changes of at most :data:`MAX_CHANGES` axes in ``vary`` that make ``query`` supported.

    Empty when the query is already supported, or when no such change exists. Ordered by the number
    of changes, then by axis order, then by value order. ``truncated`` when the work budget
    (:data:`MAX_WORK`) left sets of changes untried.

    :raises InvalidQuery: for a bad query or an unknown axis in ``vary``.
    """
    resolution = resolver.resolve(query)
    if resolution.verdict is Verdict.SUPPORTED:
        return Suggestions()
    # Axes by their names: a change of tokens_per_block replaces a query's block_size, not joins it.
    query = resolver._canonical(query)  # noqa: SLF001 - the resolver's own reading of the query
    names = default_vary(resolver, query) if vary is None else _check_vary(resolver, vary)
    compiled: _CompiledKernel = resolver._kernels[resolution.kernel]  # noqa: SLF001 - the index
    axes = tuple(resolver.matrix.axes.values())
    positions = {a.name: i for i, a in enumerate(axes)}
    values = resolution.values
    open_axes = [i for i, a in enumerate(axes) if a.name not in values]

    def named(changes: Mapping[int, int]) -> dict[str, AxisValue]:
        return {axes[ai].name: axes[ai].values[vi] for ai, vi in sorted(changes.items())}

    work = Work(MAX_WORK)

    def decide(changes: Mapping[int, int]) -> bool:
        verdict = resolver._verdict_within(query.replace(**named(changes)), work)  # noqa: SLF001
        return verdict is Verdict.SUPPORTED

    search = _Search(compiled, axes, _admits(compiled, axes, values), open_axes, decide)

    def options(ai: int) -> list[int]:
        """The value indices that change axis ``ai`` (every value of an open axis)."""
        axis = axes[ai]
        current = axis.locate(values[axis.name]) if axis.name in values else None
        return [vi for vi in range(len(axis.known)) if vi != current]

    # An axis no rule of the kernel names cannot change the answer.
    varied = [positions[n] for n in names if compiled.unconstrained[positions[n]] != search.all_rules]
    found: list[dict[int, int]] = []
    singles: set[tuple[int, int]] = set()
    single_changes = ({ai: vi} for ai in varied for vi in options(ai))
    pairs = ({a: va, b: vb} for a, b in combinations(varied, 2) for va in options(a)
             if (a, va) not in singles for vb in options(b) if (b, vb) not in singles)
    truncated = False
    try:
        for changes in single_changes:
            work.spend()
            if search.supported(changes):
                found.append(changes)
                singles.update(changes.items())
        for changes in pairs if MAX_CHANGES >= 2 else ():
            work.spend()
            if search.supported(changes):
                found.append(changes)
    except WorkLimit:  # the sets not yet tried are left out
        truncated = True
    out = []
    for changes in found:
        shown = named(changes)
        out.append(Suggestion(
            changes=shown,
            previous={name: values.get(name) for name in shown},
            query=query.replace(**shown),
        ))
    return Suggestions(out, truncated=truncated)
