"""Resolve queries against a compiled matrix: verdicts with reasons, residuals and role selection.

Compilation (:mod:`capmatrix._core.bitsets`) turns every kernel's rules into per-axis bitsets (one bit per
rule, one bitset per value), so a query costs a handful of big-integer ANDs whatever the rule count,
and each answer (:mod:`capmatrix._core.answers`) is cached per query; its reasons are built by
:mod:`capmatrix._core.explain` when first read. The YAML is never walked again after
loading; this module knows no files (the process-wide default matrix lives in
:mod:`capmatrix._shipped.default`).
"""

from __future__ import annotations

import threading
from functools import partial

from capmatrix._core.answers import (
    _DEFAULT,
    _QUERY,
    CLOSEST_GRANTS,
    MAX_NEAR_MISSES,
    Origin,
    OriginKind,
    Reason,
    ReasonKind,
    Resolution,
    Selection,
    Verdict,
)
from capmatrix._core.bitsets import KernelIndex, _CompiledKernel
from capmatrix._core.explain import MAX_RESIDUAL_BOXES, Explainer
from capmatrix._core.partition import PartitionLimit, Work, find, partition, reduce_kernel
from capmatrix._core.tables import NO_ROW, Table
from capmatrix.errors import CapabilityErrors, InvalidQuery, UnknownName, did_you_mean
from capmatrix.model import NONE, AxisType
from capmatrix.query import ANY, KernelQuery, _Any, _short
from capmatrix.regions import Region, Space, bits

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from capmatrix.matrix import Matrix
    from capmatrix.model import Axis, AxisValue, Role

__all__ = [
    "CLOSEST_GRANTS",
    "MAX_NEAR_MISSES",
    "MAX_RESIDUAL_BOXES",
    "Origin",
    "OriginKind",
    "Reason",
    "ReasonKind",
    "Resolution",
    "Resolver",
    "Selection",
    "Verdict",
    "check_query",
    "compile_matrix",
]

#: Cached resolutions per matrix before the cache is cleared (bounds memory under hostile input).
CACHE_LIMIT = 1 << 16

#: A query's effective axis values, where each came from, its open axes, the axes whose value is
#: outside the known values, and per axis position the index of its value among the known ones (-1:
#: outside them; None: open). Shared by the candidates of a selection, never mutated.
_Effective = tuple[dict[str, "AxisValue"], dict[str, "Origin"], list[str], list[str], list["int | None"]]
#: The same for a model and a set of given axes, without their values (those in place, unchecked),
#: and per given axis in axis order: its index among the query's items, its position, the axis, the
#: type its values have when they need no check, its known values by (type, value), and whether a
#: value may lie outside them.
_Shape = tuple[
    dict[str, "AxisValue"], dict[str, "Origin"], list[str], list[str], list["int | None"],
    tuple[tuple[int, int, "Axis", "type | None", "dict[tuple[type, AxisValue], int]", bool], ...],
]


def check_query(query: object) -> None:
    """Raise unless ``query`` is a :class:`KernelQuery`.

    :raises InvalidQuery: for anything else.
    """
    if not isinstance(query, KernelQuery):
        raise InvalidQuery(f"expected a KernelQuery, got {type(query).__name__}: {_short(query)}")


def compile_matrix(matrix: Matrix) -> Resolver:
    """Build the resolver (index and cache) of a matrix; :func:`capmatrix.load` does this once."""
    return Resolver(matrix)


# --------------------------------------------------------------------------------------------------
# Resolution


class Resolver:
    """The compiled form of one matrix: resolve and select by lookup, cached per query."""

    def __init__(self, matrix: Matrix) -> None:
        self.matrix = matrix
        self._axes = tuple(matrix.axes.values())
        self._positions = {a.name: i for i, a in enumerate(self._axes)}
        #: Another name of an axis (an engine's word, a former name) -> the axis.
        self._aliases = {alias: a.name for a in self._axes for alias in a.aliases}
        # Axis.index by lookup; the type is part of the key as there (True == 1, but not as a value).
        self._value_index = tuple({(type(v), v): i for i, v in enumerate(a.values)} for a in self._axes)
        # Only an int axis (or a bool axis that lists one value) can be given a value it does not list:
        # every other value is checked against the list when the query is made or the matrix loaded.
        self._may_be_outside = tuple(
            (ai, a) for ai, a in enumerate(self._axes)
            if a.type is AxisType.INT or (a.type is AxisType.BOOL and len(a.values) < 2)
        )
        # Per axis, for working out a query's values: its name, the type a given value of it has when
        # it needs no further check (an int axis takes any int; an enum axis has None: the value is
        # looked up), its default, its known values by (type, value), and whether a value may lie
        # outside them.
        outside_ok = {ai for ai, _a in self._may_be_outside}
        #: Per axis, how many of its values are listed (the rest stand for classes of unlisted ints).
        self._listed = tuple(len(a.values) - a.extra for a in self._axes)
        self._rows = tuple(
            (a.name, a, {AxisType.BOOL: bool, AxisType.INT: int}.get(a.type), a.default,
             self._value_index[ai], ai in outside_ok)
            for ai, a in enumerate(self._axes)
        )
        masks: dict[int, int] = {}  # shared conditions' masks, for this compilation only
        #: Each kernel compiled on first use (a cold start answers one kernel without compiling all).
        self._kernels = KernelIndex(matrix.kernels, self._axes)
        #: Per kernel, its engine's defaults (one dict per engine, read only); per role, those and the
        #: role's own values.
        engines = {kernel.engine: matrix.pins(kernel) for kernel in matrix.kernels.values()}
        self._kernel_pins = {name: engines[kernel.engine] for name, kernel in matrix.kernels.items()}
        self._pins = {name: matrix.pins(role) for name, role in matrix.roles.items()}
        self._explainer = Explainer(self._axes, self._positions, self._value_index)
        self._cache: dict[KernelQuery, Resolution] = {}
        self._select_cache: dict[tuple[str, KernelQuery], Selection] = {}
        # Decision tables (derived axes, role orders) compiled to bit sets with the kernels, so that
        # no answer pays for them: a lookup is an AND per axis read. A role's order comes with the
        # derived axes it needs.
        self._readable = {**matrix.axes, **{name: d.axis for name, d in matrix.derived.items()}}
        self._derived_tables = {
            name: Table([row.when for row in d.rows], self._readable, masks)
            for name, d in matrix.derived.items()
        }
        self._order_tables = {name: self._compile_order(role, masks) for name, role in matrix.roles.items()}
        self._effective_memo: dict[tuple[object, ...], _Effective] = {}
        self._shapes: dict[tuple[str | None, tuple[str, ...]], _Shape] = {}
        self._lock = threading.Lock()

    # -- public -------------------------------------------------------------------------------

    def resolve(self, query: KernelQuery) -> Resolution:
        """Answer ``query`` (cached).

        :raises InvalidQuery: for an unknown kernel, model, axis or value, or a value of the wrong type.
        """
        check_query(query)
        found = self._cache.get(query)  # the per-step path: one lookup, no further call
        return found if found is not None else self._cached_resolve(query, None)

    def _verdict_within(self, query: KernelQuery, work: Work) -> Verdict:
        """``resolve(query).verdict``, its walk over open axes spending ``work`` (cached once answered).

        :raises WorkLimit: when ``work`` runs out first (nothing is cached then).
        """
        return self._cached_resolve(query, None, work).verdict

    def _cached_resolve(self, query: KernelQuery, effective: _Effective | None,
                        work: Work | None = None) -> Resolution:
        found = self._cache.get(query)
        if found is None:
            found = self._resolve(query, effective, work)
            if len(self._cache) >= CACHE_LIMIT:
                self._cache.clear()
            self._cache[query] = found
        return found

    def select(self, role: str, query: KernelQuery) -> Selection:
        """The first supported candidate of ``role`` for ``query`` (cached).

        :raises InvalidQuery: for an unknown role or a bad query.
        """
        check_query(query)
        if type(role) is not str:
            if not isinstance(role, str):
                raise InvalidQuery(f"role must be a string, got {type(role).__name__}: {_short(role)}")
            role = str.__str__(role)  # a StrEnum member: its plain value
        key = (role, query)
        found = self._select_cache.get(key)
        if found is None:
            found = self._select(role, query)
            if len(self._select_cache) >= CACHE_LIMIT:
                self._select_cache.clear()
            self._select_cache[key] = found
        return found

    def forget(self) -> None:
        """Drop every remembered answer, memo and explanation, as if no query had been asked.

        For measuring first answers; the compiled index (the kernels' bit sets, the decision tables,
        the pins) stays.
        """
        self._cache.clear()
        self._select_cache.clear()
        self._effective_memo.clear()
        self._shapes.clear()
        for compiled in self._kernels.compiled():
            compiled.reason_cache.clear()
            compiled.mismatch_cache.clear()
            compiled.exclusion_reasons.clear()

    # -- internals ----------------------------------------------------------------------------

    def _unknown(self, kind: str, name: str, known: Iterable[str]) -> Exception:
        """The error of a name the matrix lacks: its problems where a load isolated it, else UnknownName."""
        problems = self.matrix.quarantine.get(name)
        if problems:
            return CapabilityErrors(problems)
        return UnknownName(kind, name, known)

    def _select(self, role_name: str, query: KernelQuery) -> Selection:
        role = self.matrix.roles.get(role_name)
        if role is None:
            raise self._unknown("role", role_name, self.matrix.roles)
        # The role's own axis values and its engine's defaults act as defaults the query may override.
        candidate_query = self._pinned(self._canonical(query), self._pins[role_name])
        candidates, decided = role.candidates, True
        open_axes: tuple[str, ...] = ()
        # The candidates' queries differ only in the kernel: their effective values are worked out once.
        effective = self._effective(candidate_query)
        if role.orders:
            values = effective[0]
            table, needed = self._order_table(role_name)
            if needed:
                values = self._add_derived(dict(values), needed)
            row = table.row(values)  # as role.order_for(values) answers
            candidates = () if row is None or row == NO_ROW else role.orders[row].candidates
            decided = row is not None
            if not decided:
                open_axes = self._order_open(table, needed, values)
        trace = []
        for candidate in candidates:
            resolution = self._cached_resolve(candidate_query.with_kernel(candidate), effective)
            trace.append(resolution)
            if resolution.verdict is Verdict.SUPPORTED:
                return Selection(
                    role=role_name, query=query, kernel=candidate, resolution=resolution,
                    trace=tuple(trace),
                )
        return Selection(role=role_name, query=query, kernel=None, resolution=None,
                         trace=tuple(trace), decided=decided, open_axes=open_axes)

    def _order_open(
        self, table: Table, needed: tuple[str, ...], values: Mapping[str, AxisValue]
    ) -> tuple[str, ...]:
        """The base axes a role's candidate order reads, directly or through its derived axes, left open."""
        reads = set(table.reads)
        for name in needed:
            reads.update(self._derived_table(name).reads)
        return tuple(name for name in self.matrix.axes if name in reads and name not in values)

    def derived_values(self, query: KernelQuery) -> dict[str, AxisValue]:
        """The query's effective axis values plus the derived axes their tables compute from them.

        A derived axis whose table reads an open axis is left out.

        :raises InvalidQuery: for an unknown model, axis or value.
        """
        return self._add_derived(self.effective_values(query)[0])

    def _add_derived(
        self, values: dict[str, AxisValue], only: tuple[str, ...] | None = None
    ) -> dict[str, AxisValue]:
        """Add the derived axes (``only`` these, default all) that ``values`` decide."""
        derived = self.matrix.derived
        for name in derived if only is None else only:
            row = self._derived_table(name).row(values)  # as DerivedAxis.value(values) answers
            if row is not None and row != NO_ROW:
                values[name] = derived[name].rows[row].value
        return values

    def _derived_table(self, name: str) -> Table:
        return self._derived_tables[name]

    def _order_table(self, role_name: str) -> tuple[Table, tuple[str, ...]]:
        return self._order_tables[role_name]

    def _compile_order(self, role: Role, masks: dict[int, int]) -> tuple[Table, tuple[str, ...]]:
        """The compiled orders of a role, and the derived axes (in declaration order) they need."""
        table = Table([o.when for o in role.orders], self._readable, masks)
        return table, self._needed(table.reads)

    def _needed(self, reads: Iterable[str]) -> tuple[str, ...]:
        """The derived axes (in declaration order) that reading ``reads`` needs.

        Those named, and those their tables read (a table reads derived axes declared before it).
        """
        wanted = set(reads)
        needed = []
        for name in reversed(list(self.matrix.derived)):
            if name in wanted:
                needed.append(name)
                wanted.update(self._derived_table(name).reads)
        return tuple(reversed(needed))

    def order_for(self, role_name: str, query: KernelQuery) -> tuple[tuple[str, ...], bool]:
        """The candidate list the orders of ``role_name`` give ``query``, and whether it is decided.

        The query's values as they stand (no role or engine pins): as ``Role.order_for`` on the query's
        derived values answers, through the compiled table.

        :raises InvalidQuery: for an unknown role, model, axis or value.
        """
        role = self.matrix.roles.get(role_name)
        if role is None:
            raise self._unknown("role", role_name, self.matrix.roles)
        if not role.orders:
            return role.candidates, True
        table, needed = self._order_table(role_name)
        values = self._add_derived(dict(self.effective_values(query)[0]), needed)
        row = table.row(values)
        return (() if row is None or row == NO_ROW else role.orders[row].candidates), row is not None

    def derived_value(self, query: KernelQuery, name: str) -> AxisValue | None:
        """The value derived axis ``name`` takes for ``query``; None where its table reads an open axis.

        :raises InvalidQuery: for an unknown derived axis, model, axis or value.
        """
        if name not in self.matrix.derived:
            raise UnknownName("derived axis", name, self.matrix.derived)
        return self._add_derived(dict(self.effective_values(query)[0]), self._needed((name,))).get(name)

    def _effective(self, query: KernelQuery) -> _Effective:
        # The same for every kernel: a page or a selection asks one configuration of many kernels.
        identity = query._typed  # noqa: SLF001 - the query's identity; the key leaves out its kernel
        key = (identity[1], identity[2], identity[3])
        found = self._effective_memo.get(key)
        if found is None:
            found = self._effective_values(query)
            if len(self._effective_memo) >= CACHE_LIMIT:
                self._effective_memo.clear()
            self._effective_memo[key] = found
        return found

    def effective_values(
        self, query: KernelQuery
    ) -> tuple[dict[str, AxisValue], dict[str, Origin], list[str]]:
        """The axis values a query resolves with, where each came from, and the open axes.

        :raises InvalidQuery: for an unknown model, axis or value.
        """
        return self._effective_values(query)[:3]

    def _effective_values(self, query: KernelQuery) -> _Effective:
        """:meth:`effective_values`, and the axes whose value lies outside the known values.

        What does not depend on the given values (the model's and the defaults, the open axes, where
        each came from) is worked out once per model and set of given axes: its shape.
        """
        query = self._canonical(query)
        items = query._axes  # noqa: SLF001 - the given (axis, value) pairs, sorted by axis name
        names = tuple([name for name, _value in items])
        key = (query.model, names)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shape(query.model, names, frozenset())
            if len(self._shapes) >= CACHE_LIMIT:
                self._shapes.clear()
            self._shapes[key] = shape
        found = self._fill(items, shape)
        if found is None:  # a value is ANY: its axis is open, a shape of its own
            anys = frozenset(name for name, value in items if value is ANY)
            found = self._fill(items, self._shape(query.model, names, anys))
        return found  # type: ignore[return-value] # the shape with the ANY axes open expects them

    @staticmethod
    def _pinned(query: KernelQuery, pins: Mapping[str, AxisValue]) -> KernelQuery:
        """``query`` (axes by their names) with the ``pins`` it does not give."""
        if not pins:
            return query
        given = query.axes
        missing = {k: v for k, v in pins.items() if k not in given}
        return query.replace(**missing) if missing else query

    def _canonical(self, query: KernelQuery) -> KernelQuery:
        """``query`` with each axis named by its name, not an alias (``block_size``: ``tokens_per_block``).

        :raises InvalidQuery: when a query names an axis twice, by its name and an alias.
        """
        aliases = self._aliases
        if not aliases:
            return query
        renamed = None
        for name, _value in query._axes:  # noqa: SLF001 - the given (axis, value) pairs
            if name in aliases:
                renamed = [name] if renamed is None else [*renamed, name]
        if renamed is None:
            return query
        axes = dict(query.axes)
        for alias in renamed:
            name = aliases[alias]
            if name in axes:
                raise InvalidQuery(f"axis {name!r} is given twice, also as {alias!r} (its other name); "
                                   "give one of them")
            axes[name] = axes.pop(alias)
        return KernelQuery(query.kernel, model=query.model, **axes)

    def _shape(self, model_name: str | None, names: tuple[str, ...], anys: frozenset[str]) -> _Shape:
        """The effective values of a query without its given values (``anys`` given as ANY).

        :raises InvalidQuery: for an unknown model or axis, or a derived axis.
        """
        model_values: Mapping[str, AxisValue] = {}
        from_model = _QUERY
        if model_name is not None:
            model = self.matrix.model(model_name)  # a short name or a Hugging Face id
            if model is None:
                raise UnknownName("model", model_name, self.matrix.models)
            model_values = model.axes
            from_model = Origin(OriginKind.MODEL, model.name)  # the canonical name, not the hub id
        positions = self._positions
        for name in names:
            if name not in positions:
                if name in self.matrix.derived:
                    raise InvalidQuery(
                        f"axis {name!r} is derived: its table computes it from other axes; "
                        "give those instead"
                    )
                raise UnknownName("axis", name, positions)
        given = {name: i for i, name in enumerate(names) if name not in anys}
        values: dict[str, AxisValue] = {}
        origins: dict[str, Origin] = {}
        open_axes = []
        outside = []
        checks = []
        at: list[int | None] = [None] * len(self._rows)
        for ai, (name, axis, kind, default, index, may_be_outside) in enumerate(self._rows):
            if name in given:
                values[name] = None  # type: ignore[assignment] # its place: the query's value goes there
                origins[name] = _QUERY
                checks.append((given[name], ai, axis, kind, index, may_be_outside))
                continue
            if name in anys:
                open_axes.append(name)
                continue
            if name in model_values:
                value = model_values[name]
                origins[name] = from_model
            elif default is not None:
                value = default
                origins[name] = _DEFAULT
            else:
                open_axes.append(name)
                continue
            values[name] = value
            at[ai] = index.get((type(value), value), -1)
            if may_be_outside and (at[ai] == -1 or at[ai] >= self._listed[ai]):  # type: ignore[operator]
                at[ai] = self._place(axis, value)
                outside.append(name)
        return values, origins, open_axes, outside, at, tuple(checks)

    def _fill(self, items: tuple[tuple[str, AxisValue | _Any], ...], shape: _Shape) -> _Effective | None:
        """A query's effective values: its given ``items`` put into ``shape``.

        None for an ANY the shape does not expect.

        :raises InvalidQuery: for a value of the wrong type or not listed by its axis.
        """
        base, origins, open_axes, outside, base_at, checks = shape
        values = base.copy()
        at = base_at.copy()
        late = None
        for i, ai, axis, kind, index, may_be_outside in checks:  # in axis order, as errors are raised
            name, value = items[i]
            # The common values need no further check: a bool or int of their axis's type, a listed
            # string; anything else is checked (and refused, or kept) as the axis says.
            if type(value) is not kind and (kind is not None or (str, value) not in index):
                if value is ANY:
                    return None
                value = self._check_value(axis, value)
            values[name] = value  # type: ignore[assignment] # not ANY: that returned above
            vi = at[ai] = index.get((type(value), value), -1)  # type: ignore[arg-type]
            if may_be_outside and (vi == -1 or vi >= self._listed[ai]):
                at[ai] = self._place(axis, value)  # type: ignore[arg-type]
                late = [name] if late is None else [*late, name]
        if late is not None:  # in axis order, with those of the model or the defaults
            outside = [name for name in self._positions if name in late or name in outside]
        return values, origins.copy(), open_axes.copy(), outside.copy(), at

    @staticmethod
    def _place(axis: Axis, value: AxisValue) -> int:
        """The position standing for a value no list names: its class's (-1: asked of each condition).

        :raises InvalidQuery: for an int outside the axis's ``min`` / ``max`` (no input at all).
        """
        if type(value) is int and (
            (axis.minimum is not None and value < axis.minimum)
            or (axis.maximum is not None and value > axis.maximum)
        ):
            low = "" if axis.minimum is None else f">= {axis.minimum}"
            high = "" if axis.maximum is None else f"<= {axis.maximum}"
            raise InvalidQuery(f"axis {axis.name!r} takes ints {' and '.join(filter(None, (low, high)))}; "
                               f"got {value!r}")
        found = axis.locate(value)
        return -1 if found is None else found

    @staticmethod
    def _check_value(axis: Axis, value: AxisValue) -> AxisValue:
        if axis.type is AxisType.BOOL:
            if not isinstance(value, bool):
                raise InvalidQuery(f"axis {axis.name!r} is bool; got {value!r}")
            return value
        if axis.type is AxisType.INT:
            if axis.optional and value == NONE:
                return value
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidQuery(f"axis {axis.name!r} is int; got {value!r}")
            return value
        if isinstance(value, str) and value not in axis.values and value in axis.spellings:
            return axis.spellings[value]  # an engine's own word for the value
        if not isinstance(value, str) or value not in axis.values:
            known = ", ".join(map(str, axis.values))
            raise InvalidQuery(
                f"{value!r} is not a value of axis {axis.name!r} ({known})",
                suggestion=did_you_mean(str(value), [str(v) for v in axis.values]),
            )
        return value

    def _resolve(self, query: KernelQuery, effective: _Effective | None = None,
                 work: Work | None = None) -> Resolution:
        if query.kernel is None:
            raise InvalidQuery("the query names no kernel; use select() for a role")
        compiled = self._kernels.get(query.kernel)
        if compiled is None:
            raise self._unknown("kernel", query.kernel, self._kernels)
        if effective is None:  # asked of this kernel alone: with its engine's defaults
            pins = self._kernel_pins[query.kernel]
            effective = self._effective(self._pinned(self._canonical(query), pins) if pins else query)
        values, origins, open_axes, outside, at = effective
        candidates = (1 << len(compiled.rules)) - 1
        admits: dict[int, int] = {}
        # Only the axes some rule of the kernel names can narrow the candidates (on the others every
        # rule admits every value, in the universe or not).
        for ai, name, row in compiled.scan:
            vi = at[ai]
            if vi is None:  # open
                continue
            if vi >= 0:
                admit = row[vi]
            else:  # outside the known values: asked of each rule's condition
                value = values[name]
                admit = compiled.unconstrained[ai]
                for bit, rule in enumerate(compiled.rules):
                    cond = rule.conditions.get(name)
                    if cond is not None and cond.contains(value):
                        admit |= 1 << bit
            admits[ai] = admit
            candidates &= admit
        grants = candidates & compiled.grants
        exclusions = candidates & compiled.exclusions
        residual: Region | None = None
        truncated = False
        if not grants:
            verdict = Verdict.UNSUPPORTED
        elif not open_axes or not self._constrains_open(compiled, open_axes, grants | exclusions):
            # No rule that applies names an open axis: every value of those axes answers alike.
            verdict = Verdict.SUPPORTED if not exclusions else Verdict.UNSUPPORTED
        else:
            verdict, residual, truncated = self._open(compiled, open_axes, grants, exclusions, work)

        return Resolution(
            query=query,
            kernel=query.kernel,
            verdict=verdict,
            _explain=partial(self._explainer.reasons, compiled, verdict, values, origins, outside, grants,
                             exclusions, admits, residual, truncated),
            values=values,
            origins=origins,
            residual=residual,
            residual_truncated=truncated,
            outside=tuple(outside),
        )

    def _constrains_open(self, compiled: _CompiledKernel, open_axes: list[str], applying: int) -> bool:
        """Whether a rule of ``applying`` has a condition on one of ``open_axes``."""
        unconstrained, positions = compiled.unconstrained, self._positions
        for name in open_axes:  # noqa: SIM110 - a loop: any() over a generator costs more on few axes
            if applying & ~unconstrained[positions[name]]:
                return True
        return False

    def _open(
        self, compiled: _CompiledKernel, open_axes: list[str], grants: int, exclusions: int,
        work: Work | None = None,
    ) -> tuple[Verdict, Region | None, bool]:
        """The verdict over the open axes, and the residual (at most ``MAX_RESIDUAL_BOXES`` boxes).

        A region partition of the applying rules' boxes restricted to the open axes (never box
        subtraction, which fragments exponentially): bounded by ``MAX_RESIDUAL_BOXES``; past it, a
        depth-first walk finds the verdict and the first boxes of the residual.
        """
        positions = [self._positions[n] for n in open_axes]
        space = Space(tuple(self._axes[p] for p in positions))
        members = bits(grants | exclusions)
        boxes = [tuple(compiled.boxes[b][p] for p in positions) for b in members]
        g = e = 0
        for i, b in enumerate(members):
            if grants >> b & 1:
                g |= 1 << i
            else:
                e |= 1 << i

        def label(live: int) -> bool:
            return bool(live & g) and not live & e

        def relevant(live: int, covering: int) -> int:
            return reduce_kernel(live, covering, g, e)[0]

        truncated = False
        try:
            found = partition(space, boxes, label, relevant=relevant, limit=MAX_RESIDUAL_BOXES,
                              watch=True, work=work)
            inside, outside = found.get(True, []), found.get(False, [])
        except PartitionLimit:
            inside, complete = find(space, boxes, label, want=True, limit=MAX_RESIDUAL_BOXES,
                                    relevant=relevant, work=work)
            outside, _ = find(space, boxes, label, want=False, limit=1, relevant=relevant, work=work)
            truncated = not complete
        if work is not None:
            work.spend(len(inside))  # merging the residual below: a step per box
        if not inside:
            return Verdict.UNSUPPORTED, None, False
        if not outside:
            return Verdict.SUPPORTED, None, False
        return Verdict.DEPENDS, Region(space, inside, disjoint=True).merged(), truncated
