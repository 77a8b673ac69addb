"""Bound decisions: a kernel resolved once at engine start for every combination of the dynamic axes.

The per-step call is then one dict lookup (:attr:`BoundDecision.lookup`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence

from capmatrix._core.record import field, record
from capmatrix._shipped.default import default_matrix, resolve
from capmatrix.errors import CapmatrixError, InvalidQuery, UnknownName
from capmatrix.query import KernelQuery
from capmatrix.resolver import Verdict

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue
    from capmatrix.resolver import Resolution

__all__ = ["BoundDecision", "DynamicSpec", "UnboundAxes", "bind"]


class UnboundAxes(CapmatrixError, ValueError):
    """A bound decision would depend on axes that neither the static nor the dynamic part fixes."""

    def __init__(self, kernel: str, key: object, residual: str) -> None:
        super().__init__(kernel, key, residual)
        self.kernel = kernel
        self.key = key
        self.residual = residual

    def __str__(self) -> str:
        return (
            f"{self.kernel}: the answer for dynamic key {self.key!r} depends on axes left open "
            f"(supported when {self.residual}); bind them statically or make them dynamic"
        )


DynamicSpec = Sequence[str] | Mapping[str, Mapping[Hashable, "AxisValue"]]


@record(kw_only=True)
class BoundDecision:
    """One kernel's or gate's answers for an engine, precomputed for every dynamic key.

    ``lookup(key)`` is ``table.__getitem__``: the per-step cost is one dict lookup. With one dynamic
    axis the key is that axis's engine value; with several it is a tuple in ``dynamic`` order; with
    none, ``value`` holds the answer and ``lookup`` takes the empty tuple.
    """

    kernel: str
    query: KernelQuery
    dynamic: tuple[str, ...]
    table: Mapping[Hashable, bool]
    resolutions: Mapping[Hashable, Resolution]
    lookup: Callable[[Hashable], bool] = field(repr=False)
    value: bool | None = None

    def __call__(self, *key: Hashable) -> bool:
        """Answer for a dynamic key (slower than ``lookup``; raises KeyError for an unknown key)."""
        if len(self.dynamic) == 1:
            return self.table[key[0]]
        return self.table[key]

    def explain(self, *key: Hashable) -> Resolution:
        """The resolution (verdict and reasons) behind the answer for ``key``."""
        if len(self.dynamic) == 1:
            return self.resolutions[key[0]]
        return self.resolutions[key]


def _dynamic_keys(
    matrix: Matrix, dynamic: DynamicSpec
) -> tuple[tuple[str, ...], list[list[tuple[Hashable, AxisValue]]]]:
    if isinstance(dynamic, str) or not isinstance(dynamic, (Mapping, list, tuple)):
        raise InvalidQuery(
            f"dynamic must be a list of axis names or a mapping axis -> {{engine value: axis value}}, "
            f"got {type(dynamic).__name__}"
        )
    names: tuple[str, ...] = tuple(dynamic)
    choices: list[list[tuple[Hashable, AxisValue]]] = []
    for name in names:
        axis = matrix.axes.get(name) if isinstance(name, str) else None
        if axis is None:
            raise UnknownName("axis", name, matrix.axes)
        if isinstance(dynamic, Mapping):
            mapping = dynamic[name]
            if not isinstance(mapping, Mapping) or not mapping:
                raise InvalidQuery(
                    f"dynamic[{name!r}] must be a non-empty mapping of engine values to values of "
                    f"axis {name!r}, got {mapping!r}"
                )
            choices.append(list(mapping.items()))
        else:
            choices.append([(v, v) for v in axis.known])
    return names, choices


def bind(
    kernel: str,
    *,
    dynamic: DynamicSpec = (),
    model: str | None = None,
    matrix: Matrix | None = None,
    strict: bool = True,
    **static: AxisValue,
) -> BoundDecision:
    """Resolve ``kernel`` for the static axis values and every combination of the dynamic ones.

    ``dynamic`` names the axes that change per step: a sequence of axis names (the keys are the axis's
    known values), or a mapping from axis name to ``{engine value: axis value}`` so that the engine
    looks up with its own values (e.g. ``{"spec_dec_pass": {False: "draft", True: "first_chain_draft"}}``).

    :raises InvalidQuery: for an unknown kernel, axis or value (a static axis also named dynamic).
    :raises UnboundAxes: when ``strict`` and some answer depends on axes left open.
    """
    m = default_matrix() if matrix is None else matrix
    names, choices = _dynamic_keys(m, dynamic)
    clash = sorted(set(names) & set(static))
    if clash:
        raise InvalidQuery(f"axes {clash} are both static and dynamic")
    base = KernelQuery(kernel, model=model, **static)
    table: dict[Hashable, bool] = {}
    resolutions: dict[Hashable, Resolution] = {}
    for combo in itertools.product(*choices):
        key: Hashable = combo[0][0] if len(names) == 1 else tuple(k for k, _ in combo)
        query = base.replace(**{n: v for n, (_, v) in zip(names, combo, strict=True)})
        resolution = resolve(query, matrix=m)
        if strict and resolution.verdict is Verdict.DEPENDS:
            raise UnboundAxes(kernel, key, str(resolution.residual))
        table[key] = bool(resolution)
        resolutions[key] = resolution
    value = table[()] if not names else None
    return BoundDecision(
        kernel=kernel,
        query=base,
        dynamic=names,
        table=table,
        resolutions=resolutions,
        lookup=table.__getitem__,
        value=value,
    )
