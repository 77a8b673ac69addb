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

The work is counted before the first call: when the predicate may need more than ``max_calls``
calls, nothing is called and the error says how many calls which axes would take. The probe of the
``**kwargs`` axes is counted as if no axis were found to matter; when some do, the enumeration that
follows is counted again before it starts.

:func:`compare_legacy_file` (what ``capmatrix compare-legacy`` runs) **imports and executes** the
file, in a child process: the predicate's prints do not reach our output (they are returned), an
exit or a crash in it is an error, and a wall-clock timeout bounds it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import itertools
import math
import multiprocessing
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capmatrix._core.partition import partition
from capmatrix.authoring.analysis._boxes import Area, KernelBoxes, areas, reduce_kernel
from capmatrix.errors import CapmatrixError, InvalidValue, UnknownName, echo
from capmatrix.model import AxisType, format_value
from capmatrix.regions import Region

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from capmatrix.matrix import Matrix
    from capmatrix.model import Axis, AxisValue
    from capmatrix.regions import Box

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_CALLS",
    "LegacyComparison",
    "LegacyError",
    "PredicateOutput",
    "compare_legacy",
    "compare_legacy_file",
    "load_predicate",
    "parse_where",
]

#: Refuse to call a predicate more often than this (narrow with ``where``, or name fewer axes).
MAX_CALLS = 2_000_000
#: Seconds :func:`compare_legacy_file` gives the predicate's process (import and every call).
DEFAULT_TIMEOUT = 120.0
#: Characters of the predicate's own output kept (the rest is cut, and says so).
MAX_OUTPUT = 20_000


def _describe(exc: BaseException) -> str:
    """``Type: message`` of an exception raised by user code, cut to a readable length."""
    text = str(exc)
    if isinstance(exc, SystemExit):
        text = f"exit status {echo(exc.code)}"
    if len(text) > 500:
        text = f"{text[:500]}... ({len(text)} characters)"
    return f"{type(exc).__name__}: {text}"


class LegacyError(CapmatrixError):
    """The predicate could not be loaded or evaluated; ``cell`` is the call that failed, if any."""

    def __init__(self, message: str, *, cell: Mapping[str, AxisValue] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cell = dict(cell) if cell is not None else None
        #: What the predicate printed before the error (:func:`compare_legacy_file` only).
        self.output: PredicateOutput | None = None

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
    except (Exception, SystemExit, GeneratorExit) as exc:  # noqa: BLE001 - user code: all reported
        sys.modules.pop(module_name, None)
        raise LegacyError(f"{file}: import failed: {_describe(exc)}") from None
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


@dataclass(frozen=True, slots=True)
class _Plan:
    """What the predicate is called over: computed before the first call."""

    names: tuple[str, ...]
    values: dict[str, tuple[AxisValue, ...]]
    representative: dict[str, AxisValue]
    named: tuple[str, ...]
    others: tuple[str, ...]
    max_calls: int

    @property
    def named_cells(self) -> int:
        return math.prod(len(self.values[n]) for n in self.named)

    @property
    def probe_calls(self) -> int:
        """The most calls the first pass makes (every kwargs axis probed from every named cell)."""
        return self.named_cells * (1 + sum(len(self.values[o]) - 1 for o in self.others))

    def refuse(self, calls: int, axes: Sequence[str], what: str) -> LegacyError:
        sizes = ", ".join(f"{a} ({len(self.values[a])} values)" for a in axes) or "no axis"
        widest = sorted(axes, key=lambda a: -len(self.values[a]))[:2]
        example = " ".join(f"--where {a}={format_value(self.values[a][0])}" for a in widest)
        return LegacyError(
            f"comparing needs up to {calls:,} predicate calls, above the limit of "
            f"{self.max_calls:,}; nothing was called. {what}: {sizes}. Narrow the universe with "
            f"--where AXIS=V1,V2 on the widest axes (e.g. {example}), or name fewer axes"
        )

    def check(self) -> None:
        """Refuse, before any call, a first pass above ``max_calls``."""
        if self.probe_calls > self.max_calls:
            what = "the predicate names"
            if self.others:
                what = (
                    f"the predicate names {', '.join(self.named) or 'no axis'} and is probed "
                    f"once per other value of each axis its **kwargs receives; axes"
                )
            raise self.refuse(self.probe_calls, [*self.named, *self.others], what)


def _plan(
    matrix: Matrix,
    named: Sequence[str],
    var_keyword: bool,
    root: Box,
    max_calls: int,
) -> _Plan:
    axes = matrix.space.axes
    names = tuple(a.name for a in axes)
    values = {a.name: a.values_of(m) for a, m in zip(axes, root, strict=True)}
    representative = {
        a.name: a.default if a.default in values[a.name] else values[a.name][0] for a in axes
    }
    others = tuple(n for n in names if n not in named) if var_keyword else ()
    return _Plan(names, values, representative, tuple(named), others, max_calls)


@dataclass(frozen=True, slots=True)
class _Answers:
    """What the predicate said: the axes found to matter, and one bit per evaluated cell."""

    dependent: tuple[str, ...]
    evaluated: tuple[str, ...]
    bits: bytes
    calls: int


def _evaluate(plan: _Plan, predicate: Callable[..., object]) -> _Answers:
    """Call ``predicate`` as :mod:`the module docstring <capmatrix.authoring.analysis._legacy>` describes.

    Answers of the first pass are cached by cell number (an int), so that memory stays small.
    """
    plan.check()
    names, values, others = plan.names, plan.values, plan.others
    radix = [len(values[n]) + 1 for n in names]  # the last digit: an axis the call does not pass
    index = {n: {v: i for i, v in enumerate(values[n])} for n in names}
    cache: dict[int, bool] = {}

    def key(cell: Mapping[str, AxisValue]) -> int:
        number = 0
        for n, size in zip(names, radix, strict=True):
            number = number * size + (index[n][cell[n]] if n in cell else size - 1)
        return number

    def call(cell: dict[str, AxisValue], *, keep: bool) -> bool:
        number = key(cell)
        found = cache.get(number)
        if found is not None:
            return found
        try:
            found = bool(predicate(**cell))
        except (Exception, SystemExit, GeneratorExit) as exc:  # noqa: BLE001 - user code: which call
            raise LegacyError(f"the predicate raised {_describe(exc)}", cell=cell) from None
        if keep:
            cache[number] = found
        return found

    def combos(chosen: Sequence[str]) -> Iterable[dict[str, AxisValue]]:
        for combo in itertools.product(*(values[n] for n in chosen)):
            yield dict(zip(chosen, combo, strict=True))

    calls = 0
    dependent: list[str] = []
    for base in combos(plan.named):
        for n in others:
            if n in dependent:
                continue
            cell = {**base, **{o: plan.representative[o] for o in others}}
            answer = call(cell, keep=True)
            for value in values[n]:
                if value != plan.representative[n] and call({**cell, n: value}, keep=True) != answer:
                    dependent.append(n)
                    break
    calls = len(cache)
    evaluated = tuple(n for n in names if n in plan.named or n in dependent)
    total = math.prod(len(values[n]) for n in evaluated)
    if dependent and total > plan.max_calls:
        raise plan.refuse(
            total, evaluated,
            f"the predicate's answer changes with {', '.join(dependent)} (read through **kwargs), "
            "so every combination is needed; axes",
        )
    fixed = {o: plan.representative[o] for o in others if o not in dependent}
    bits = bytearray((total + 7) // 8)
    for i, cell in enumerate(combos(evaluated)):
        full = {**cell, **fixed}
        if key(full) not in cache:
            calls += 1
        if call(full, keep=False):
            bits[i >> 3] |= 1 << (i & 7)
    return _Answers(tuple(dependent), evaluated, bytes(bits), calls)


def compare_legacy(
    matrix: Matrix,
    predicate: Callable[..., object],
    kernel: str,
    *,
    where: Mapping[str, Sequence[AxisValue]] | None = None,
    function: str | None = None,
    max_calls: int = MAX_CALLS,
) -> LegacyComparison:
    """Compare ``predicate`` with the matrix's verdicts for ``kernel`` over the universe.

    For a kernel of an engine with releases, the universe is the newest release's unless ``where``
    names the release axis: a predicate is the code of one release.

    The predicate runs in this process; :func:`compare_legacy_file` runs a file's in a child.

    :raises LegacyError: for an unusable signature, a predicate that raises (or exits), or more
        than ``max_calls`` calls needed (refused before the first call).
    :raises UnknownName: for an unknown kernel.
    """
    if kernel not in matrix.kernels:
        raise UnknownName("kernel", kernel, matrix.kernels)
    where = _one_release(matrix, kernel, where)
    root = _root(matrix, where)
    named, var_keyword = _signature(predicate, list(matrix.space.names))
    plan = _plan(matrix, named, var_keyword, root, max_calls)
    answers = _evaluate(plan, predicate)
    name = function or str(getattr(predicate, "__qualname__", repr(predicate)))
    return _compare(matrix, kernel, where, plan, answers, root, name)


def _one_release(
    matrix: Matrix, kernel: str, where: Mapping[str, Sequence[AxisValue]] | None,
) -> Mapping[str, Sequence[AxisValue]] | None:
    """``where``, pinned to the newest release of the kernel's engine unless it names one.

    A legacy predicate is one release's code: it is compared with that release, the newest unless
    ``where`` names others (``trtllm_release=1.2.0rc8``).
    """
    releases = matrix.releases.get(matrix.kernels[kernel].engine or "")
    if releases is None or releases.axis in (where or {}):
        return where
    return {**(where or {}), releases.axis: [releases.newest]}


def _root(matrix: Matrix, where: Mapping[str, Sequence[AxisValue]] | None) -> Box:
    restriction = dict(where or {})
    return tuple(
        a.mask_of(set(restriction[a.name])) if a.name in restriction else a.full_mask
        for a in matrix.space.axes
    )


def _compare(
    matrix: Matrix,
    kernel: str,
    where: Mapping[str, Sequence[AxisValue]] | None,
    plan: _Plan,
    answers: _Answers,
    root: Box,
    function: str,
) -> LegacyComparison:
    """Meet the predicate's answers and the kernel's supported region in one partition."""
    space = matrix.space
    axes = list(space.axes)
    positions = {n: i for i, n in enumerate(plan.names)}
    true_boxes: list[Box] = []
    chosen = answers.evaluated
    for i, combo in enumerate(itertools.product(*(plan.values[n] for n in chosen))):
        if answers.bits[i >> 3] >> (i & 7) & 1:
            box = list(root)
            for n, value in zip(chosen, combo, strict=True):
                box[positions[n]] = 1 << axes[positions[n]].index(value)  # type: ignore[operator]
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
        function=function,
        where={k: tuple(v) for k, v in dict(where or {}).items()},
        named_axes=plan.named,
        kwargs_axes=plan.others,
        evaluated_axes=answers.evaluated,
        calls=answers.calls,
        legacy_only=areas(Region(space, found.get((True, False), []), disjoint=True)),
        matrix_only=areas(Region(space, found.get((False, True), []), disjoint=True)),
    )


# --------------------------------------------------------------------------------------------------
# The predicate in a child process


@dataclass(frozen=True, slots=True, kw_only=True)
class PredicateOutput:
    """What the predicate's process wrote to its stdout and stderr (cut to :data:`MAX_OUTPUT`)."""

    stdout: str
    stderr: str

    def __bool__(self) -> bool:
        return bool(self.stdout or self.stderr)


def compare_legacy_file(
    matrix: Matrix,
    spec: str,
    kernel: str,
    *,
    where: Mapping[str, Sequence[AxisValue]] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_calls: int = MAX_CALLS,
) -> tuple[LegacyComparison, PredicateOutput]:
    """Import ``FILE.py:FUNCTION`` **in a child process** and compare it with ``kernel``.

    The file is executed: only pass files you trust. Its output is captured (returned, never
    written to ours); an exception, an exit or a crash at import or in any call is an error;
    ``timeout`` seconds bound the whole run (import and calls).

    :raises LegacyError: as :func:`compare_legacy`, and for a timeout or a process that died;
        ``output`` on the error holds what the predicate printed.
    :raises UnknownName: for an unknown kernel.
    """
    if kernel not in matrix.kernels:
        raise UnknownName("kernel", kernel, matrix.kernels)
    file, sep, name = spec.rpartition(":")
    if not sep or not file or not name:
        raise LegacyError(f"expected FILE.py:FUNCTION, got {echo(spec)}")
    if not Path(file).is_file():
        raise LegacyError(f"{file}: no such file")
    where = _one_release(matrix, kernel, where)
    root = _root(matrix, where)
    deadline = time.monotonic() + timeout
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="capmatrix-legacy-") as tmp:
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        parent, child = context.Pipe()
        process = context.Process(
            target=_serve, args=(child, spec, list(matrix.space.names), str(out_path), str(err_path)),
            daemon=True,
        )
        process.start()
        child.close()
        try:
            try:
                named, var_keyword = _receive(parent, process, deadline, timeout)
                plan = _plan(matrix, named, var_keyword, root, max_calls)
                plan.check()  # refuse before the first call
                parent.send(plan)
                answers = _receive(parent, process, deadline, timeout)
            finally:
                _stop(process, parent)
        except LegacyError as exc:
            exc.output = _output(out_path, err_path)
            raise
        output = _output(out_path, err_path)
    return _compare(matrix, kernel, where, plan, answers, root, spec), output


def _receive(connection: Any, process: Any, deadline: float, timeout: float) -> Any:  # noqa: ANN401
    """The child's next message; a LegacyError for an error it reports, a timeout or its death."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise LegacyError(
                f"the predicate did not finish within {timeout:g} s (--timeout); it was stopped"
            )
        if connection.poll(min(left, 0.5)):
            try:
                kind, *payload = connection.recv()
            except (EOFError, OSError):
                break
            if kind == "error":
                message, cell = payload
                raise LegacyError(message, cell=cell)
            return payload[0] if len(payload) == 1 else tuple(payload)
        if not process.is_alive() and not connection.poll(0):
            break
    process.join(1)
    raise LegacyError(
        f"the predicate's process ended (exit status {process.exitcode}) without an answer"
    )


def _stop(process: Any, connection: Any) -> None:  # noqa: ANN401
    with contextlib.suppress(OSError):
        connection.close()
    process.join(0.5)
    if process.is_alive():
        process.kill()
        process.join(5)


def _output(out_path: Path, err_path: Path) -> PredicateOutput:
    def read(path: Path) -> str:
        try:
            with path.open("rb") as handle:
                raw = handle.read(MAX_OUTPUT + 1)
                size = os.fstat(handle.fileno()).st_size
        except OSError:
            return ""
        text = raw[:MAX_OUTPUT].decode("utf-8", errors="replace")
        return text if size <= MAX_OUTPUT else f"{text}\n... ({size} bytes in all)"

    return PredicateOutput(stdout=read(out_path), stderr=read(err_path))


def _serve(connection: Any, spec: str, names: list[str], out_path: str, err_path: str) -> None:  # noqa: ANN401
    """The child: import the predicate, send its signature, then run the plan it is sent."""
    for fd, path in ((1, out_path), (2, err_path)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    try:
        try:
            predicate = load_predicate(spec)
            connection.send(("signature", *_signature(predicate, names)))
            plan = connection.recv()
            connection.send(("answers", _evaluate(plan, predicate)))
        except LegacyError as exc:
            connection.send(("error", exc.message, exc.cell))
        except BaseException as exc:  # noqa: BLE001 - anything else in user code is still an error
            connection.send(("error", f"the predicate's process failed: {_describe(exc)}", None))
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
