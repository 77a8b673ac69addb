"""Compare a legacy predicate (the hard-coded conditional an engine used) with the matrix's verdicts.

A legacy predicate takes axis values as keyword arguments and returns a bool, for example::

    def xqa_spec_dec_mode_after(*, sm, attention, spec_dec, **_):
        return spec_dec != "none" and (attention != "mla" or sm < 120)

:func:`compare_legacy` reports, as merged regions with a witness each, where the predicate says True
and the matrix says the kernel is unsupported (``legacy_only``) and the reverse (``matrix_only``).

How the predicate is evaluated (it is a black box, so it is the only part done value by value):

- it is called for every combination of the values of the axes its signature **names**;
- an axis it does not name reaches it only through ``**kwargs``, if it has one. Each such axis is
  passed a representative value (the axis default, else its first value). To catch a predicate that
  reads ``kwargs[axis]`` anyway, every named-axis combination is re-run once per other value of each
  such axis, one axis at a time; an axis whose value changes an answer is then enumerated as if named.
  (A predicate that reacts only to two unnamed axes changing together is not caught: name them.)
- the matrix side is never enumerated: the kernel's supported region is computed from its rules with
  region algebra, and both sides meet in one region partition.

``--where`` narrows the universe on both sides (and so the number of calls).
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from capmatrix.analysis._boxes import Area, KernelBoxes, areas, reduce_kernel
from capmatrix.analysis._partition import partition
from capmatrix.errors import CapmatrixError, InvalidValue, UnknownName
from capmatrix.model import AxisType, format_value
from capmatrix.regions import Region

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from capmatrix.matrix import Matrix
    from capmatrix.model import Axis, AxisValue
    from capmatrix.regions import Box

__all__ = [
    "MAX_CALLS",
    "LegacyComparison",
    "LegacyError",
    "compare_legacy",
    "load_predicate",
    "parse_where",
]

#: Refuse to call a predicate more often than this (narrow with ``where``, or name fewer axes).
MAX_CALLS = 2_000_000


class LegacyError(CapmatrixError):
    """The predicate could not be loaded or evaluated; ``cell`` is the call that failed, if any."""

    def __init__(self, message: str, *, cell: Mapping[str, AxisValue] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cell = dict(cell) if cell is not None else None

    def __str__(self) -> str:
        if self.cell is None:
            return self.message
        return f"{self.message} (at {self.cell})"


@dataclass(frozen=True, slots=True, kw_only=True)
class LegacyComparison:
    """Where a legacy predicate and the matrix disagree about one kernel."""

    kernel: str
    function: str
    where: Mapping[str, tuple[AxisValue, ...]]
    named_axes: tuple[str, ...]
    kwargs_axes: tuple[str, ...]
    evaluated_axes: tuple[str, ...]
    calls: int
    legacy_only: tuple[Area, ...]
    matrix_only: tuple[Area, ...]

    @property
    def agree(self) -> bool:
        """True when the predicate and the matrix agree everywhere (within ``where``)."""
        return not self.legacy_only and not self.matrix_only

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form (documented in docs/analysis.md)."""
        return {
            "kernel": self.kernel,
            "function": self.function,
            "agree": self.agree,
            "where": {k: list(v) for k, v in self.where.items()},
            "named_axes": list(self.named_axes),
            "kwargs_axes": list(self.kwargs_axes),
            "evaluated_axes": list(self.evaluated_axes),
            "calls": self.calls,
            "legacy_only": [a.as_dict() for a in self.legacy_only],
            "matrix_only": [a.as_dict() for a in self.matrix_only],
        }


def load_predicate(spec: str) -> Callable[..., object]:
    """Import ``FILE.py:FUNCTION`` and return the function.

    :raises LegacyError: for a malformed spec, a missing file or function, or an import error.
    """
    file, sep, name = spec.rpartition(":")
    if not sep or not file or not name:
        raise LegacyError(f"expected FILE.py:FUNCTION, got {spec!r}")
    path = Path(file)
    if not path.is_file():
        raise LegacyError(f"{file}: no such file")
    module_name = f"_capmatrix_legacy_{abs(hash(str(path.resolve())))}"
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise LegacyError(f"{file}: not a Python module")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any import-time failure of user code is reported
        sys.modules.pop(module_name, None)
        raise LegacyError(f"{file}: import failed: {type(exc).__name__}: {exc}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise LegacyError(f"{file} has no function {name!r}")
    return function  # type: ignore[no-any-return]


#: How a restriction names what an axis of each type takes.
_TAKES = {AxisType.INT: "integers", AxisType.BOOL: "true or false", AxisType.ENUM: "its values"}


def _convert(axis: Axis, text: str) -> AxisValue:
    """Read one value with the axis's parser (the one ``capmatrix query --AXIS`` uses)."""
    try:
        return axis.parse(text)
    except InvalidValue:
        raise LegacyError(f"axis {axis.name!r} takes {_TAKES[axis.type]}, got {text!r}") from None


def parse_where(matrix: Matrix, items: Iterable[str]) -> dict[str, tuple[AxisValue, ...]]:
    """Parse ``AXIS=V1,V2`` items into a restriction (values must be in the universe)."""
    out: dict[str, tuple[AxisValue, ...]] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not raw:
            raise LegacyError(f"expected AXIS=VALUES, got {item!r}")
        axis = matrix.axes.get(name.strip())
        if axis is None:
            raise UnknownName("axis", name.strip(), matrix.axes)
        values = []
        for text in raw.split(","):
            value = _convert(axis, text.strip())
            if axis.index(value) is None:
                known = ", ".join(map(format_value, axis.values))
                raise LegacyError(f"{value!r} is not a value of axis {axis.name!r} ({known})")
            values.append(value)
        out[axis.name] = tuple(values)
    return out


def _signature(function: Callable[..., object], axes: Sequence[str]) -> tuple[list[str], bool]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise LegacyError(f"cannot read the signature of the predicate: {exc}") from None
    named: list[str] = []
    var_keyword = False
    for param in signature.parameters.values():
        if param.kind is param.VAR_KEYWORD:
            var_keyword = True
        elif param.kind is param.VAR_POSITIONAL:
            continue
        elif param.name in axes:
            if param.kind is param.POSITIONAL_ONLY:
                raise LegacyError(f"parameter {param.name!r} is positional-only; axes are keywords")
            named.append(param.name)
        elif param.default is param.empty:
            raise LegacyError(
                f"parameter {param.name!r} is not an axis and has no default "
                f"(axes: {', '.join(axes)})"
            )
    return named, var_keyword


def compare_legacy(
    matrix: Matrix,
    predicate: Callable[..., object],
    kernel: str,
    *,
    where: Mapping[str, Sequence[AxisValue]] | None = None,
    function: str | None = None,
) -> LegacyComparison:
    """Compare ``predicate`` with the matrix's verdicts for ``kernel`` over the universe.

    :raises LegacyError: for an unusable signature, a predicate that raises, or too many calls.
    :raises UnknownName: for an unknown kernel.
    """
    if kernel not in matrix.kernels:
        raise UnknownName("kernel", kernel, matrix.kernels)
    space = matrix.space
    axes = list(space.axes)
    names = [a.name for a in axes]
    named, var_keyword = _signature(predicate, names)
    restriction = dict(where or {})
    root: Box = tuple(
        a.mask_of(set(restriction[a.name])) if a.name in restriction else a.full_mask for a in axes
    )
    values_in_root = {a.name: a.values_of(m) for a, m in zip(axes, root, strict=True)}
    representative: dict[str, AxisValue] = {}
    for a in axes:
        options = values_in_root[a.name]
        representative[a.name] = a.default if a.default in options else options[0]
    others = [n for n in names if n not in named] if var_keyword else []
    cache: dict[tuple[tuple[str, AxisValue], ...], bool] = {}

    def call(cell: dict[str, AxisValue]) -> bool:
        key = tuple(sorted(cell.items()))
        found = cache.get(key)
        if found is None:
            if len(cache) >= MAX_CALLS:
                raise LegacyError(
                    f"more than {MAX_CALLS} predicate calls needed; narrow the universe with where"
                )
            try:
                found = bool(predicate(**cell))
            except Exception as exc:  # noqa: BLE001 - user code: report which call failed
                raise LegacyError(
                    f"the predicate raised {type(exc).__name__}: {exc}", cell=cell
                ) from None
            cache[key] = found
        return found

    def combos(chosen: Sequence[str]) -> Iterable[dict[str, AxisValue]]:
        for combo in itertools.product(*(values_in_root[n] for n in chosen)):
            yield dict(zip(chosen, combo, strict=True))

    # Probe the **kwargs axes one at a time from every named-axis combination.
    dependent: list[str] = []
    for base in combos(named):
        for n in others:
            if n in dependent:
                continue
            cell = {**base, **{o: representative[o] for o in others}}
            answer = call(cell)
            for value in values_in_root[n]:
                if value != representative[n] and call({**cell, n: value}) != answer:
                    dependent.append(n)
                    break
    evaluated = [n for n in names if n in named or n in dependent]
    fixed = {o: representative[o] for o in others if o not in dependent}
    positions = {n: i for i, n in enumerate(names)}
    true_boxes: list[Box] = []
    for cell in combos(evaluated):
        if call({**cell, **fixed}):
            box = list(root)
            for n, value in cell.items():
                i = axes[positions[n]].index(value)
                box[positions[n]] = 1 << i  # type: ignore[operator]
            true_boxes.append(tuple(box))
    legacy = Region(space, true_boxes, disjoint=True).merged()
    compiled = KernelBoxes.of(matrix.kernels[kernel], space)
    boxes = [*compiled.boxes, *legacy.boxes]
    legacy_bits = ((1 << len(legacy.boxes)) - 1) << len(compiled.boxes)
    g, e = compiled.grants, compiled.exclusions

    def label(live: int) -> tuple[bool, bool]:
        return bool(live & legacy_bits), bool(live & g) and not live & e

    def relevant(live: int, covering: int) -> int:
        return reduce_kernel(live, covering, g, e)[0] | (live & legacy_bits)

    found = partition(space, boxes, label, root=root, relevant=relevant)
    return LegacyComparison(
        kernel=kernel,
        function=function or str(getattr(predicate, "__qualname__", repr(predicate))),
        where={k: tuple(v) for k, v in restriction.items()},
        named_axes=tuple(named),
        kwargs_axes=tuple(others),
        evaluated_axes=tuple(evaluated),
        calls=len(cache),
        legacy_only=areas(Region(space, found.get((True, False), []), disjoint=True)),
        matrix_only=areas(Region(space, found.get((False, True), []), disjoint=True)),
    )
