"""Compilation of a kernel's rules to bit sets: per axis and value, the rules that admit it.

One bit per rule, one bitset per value of each axis (the open int axes' class representatives
included), so that resolving a query is a handful of big-integer ANDs whatever the rule count.
"""

from __future__ import annotations

from capmatrix._core.record import field, record
from capmatrix.model import Effect
from capmatrix.regions import Box, bits

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:

    from collections.abc import Iterator, Mapping

    from capmatrix._core.answers import Reason
    from capmatrix.model import Axis, Kernel, Rule


__all__: list[str] = []



@record
class _CompiledKernel:
    kernel: Kernel
    rules: tuple[Rule, ...]
    grants: int
    exclusions: int
    #: per axis position: per known-value index, the bitset of rules admitting that value
    by_value: tuple[tuple[int, ...], ...]
    #: per axis position: rules with no condition on the axis
    unconstrained: tuple[int, ...]
    #: the axis positions some rule has a condition on, in axis order
    constrained: tuple[int, ...]
    #: per constrained axis: its position, name and ``by_value`` row
    scan: tuple[tuple[int, str, tuple[int, ...]], ...]
    #: per rule: its box over the known universe
    boxes: tuple[tuple[int, ...], ...]
    #: per rule: ``"<id> (<file>:<line>)"`` and its status, rendered once for the reasons
    labels: tuple[tuple[str, str], ...] = ()
    #: the rule bit of each exclusion, in rule order: exclusion ``k`` of the compact index below
    exclusion_bits: tuple[int, ...] = ()
    #: per axis position: per known-value index, the exclusions admitting that value, as a bitset over
    #: ``exclusion_bits`` (bit ``k`` is exclusion ``k``): the hits of an answer are read from it
    exclusion_by_value: tuple[tuple[int, ...], ...] = ()
    #: the Reason of each grant that applies (by its bit), built on first use
    reason_cache: dict[int, Reason] = field(default_factory=dict, compare=False)
    #: the Reason of exclusion ``k``, for listing the hits in one C-level pass: all built together
    #: when the kernel first lists its exclusions (together, they also lie together in memory)
    exclusion_reasons: list[Reason] = field(default_factory=list, compare=False)
    #: why a grant misses a value: by (rule bit, axis position, value index), built on first use
    mismatch_cache: dict[tuple[int, int, int], Reason] = field(default_factory=dict, compare=False)


def _compile_kernel(kernel: Kernel, axes: tuple[Axis, ...], masks: dict[int, int]) -> _CompiledKernel:
    rules = kernel.rules
    full = [(1 << len(axis.values)) - 1 for axis in axes]
    positions = {axis.name: ai for ai, axis in enumerate(axes)}
    every = (1 << len(rules)) - 1
    grants = exclusions = 0
    # Per axis some rule names: the rules (a bitset) of each distinct mask. An axis has few distinct
    # masks, so the bitsets per value are ORs of a handful of groups instead of one update per rule
    # and value; the axes no rule names (most of them) are whole for every rule and cost nothing.
    groups: dict[int, dict[int, int]] = {}
    named: dict[int, int] = {}  # per axis some rule names: the rules that name it
    exclusion_bits: list[int] = []
    boxes = []
    for bit, rule in enumerate(rules):
        flag = 1 << bit
        if rule.effect is Effect.GRANT:
            grants |= flag
        else:
            exclusions |= flag
            exclusion_bits.append(bit)
        box = full.copy()
        for name, cond in rule.conditions.items():
            ai = positions.get(name)
            if ai is None:  # not an axis of the space (a hand-built matrix): it narrows nothing
                continue
            mask = masks.get(id(cond))
            if mask is None:
                mask = masks[id(cond)] = cond.mask(axes[ai].values)
            box[ai] = mask
            group = groups.get(ai)
            if group is None:
                group = groups[ai] = {}
            group[mask] = group.get(mask, 0) | flag
            named[ai] = named.get(ai, 0) | flag
        boxes.append(tuple(box))
    constrained = tuple(sorted(named))
    unconstrained = [every] * len(axes)
    by_value: list[tuple[int, ...]] = [(every,) * len(axis.values) for axis in axes]
    for ai in constrained:
        unconstrained[ai] = every ^ named[ai]
        group = groups[ai]
        if unconstrained[ai]:  # the rules without a condition on the axis admit every value
            group[full[ai]] = group.get(full[ai], 0) | unconstrained[ai]
        by_value[ai] = _value_row(group, len(axes[ai].values))
    names = [a.name for a in axes]
    return _CompiledKernel(
        kernel=kernel,
        rules=rules,
        grants=grants,
        exclusions=exclusions,
        by_value=tuple(by_value),
        unconstrained=tuple(unconstrained),
        constrained=constrained,
        scan=tuple((ai, names[ai], by_value[ai]) for ai in constrained),
        boxes=tuple(boxes),
        labels=tuple((f"{rule.id} ({rule.location})", str(rule.status)) for rule in rules),
        exclusion_bits=tuple(exclusion_bits),
        exclusion_by_value=_exclusion_index(boxes, exclusion_bits, constrained, axes),
    )


def _value_row(group: dict[int, int], size: int) -> tuple[int, ...]:
    """Per value index of one axis: the OR of the bitsets of the masks in ``group`` admitting it."""
    row = [0] * size
    for mask, flags in group.items():
        for vi in bits(mask):
            row[vi] |= flags
    return tuple(row)


def _exclusion_index(
    boxes: list[Box], exclusion_bits: list[int], constrained: tuple[int, ...], axes: tuple[Axis, ...]
) -> tuple[tuple[int, ...], ...]:
    """``_CompiledKernel.exclusion_by_value``: only the constrained axes have rows (no other narrows)."""
    if not exclusion_bits:
        return ()
    rows: list[tuple[int, ...]] = [()] * len(axes)
    for ai in constrained:
        group: dict[int, int] = {}
        for k, bit in enumerate(exclusion_bits):
            mask = boxes[bit][ai]
            group[mask] = group.get(mask, 0) | 1 << k
        rows[ai] = _value_row(group, len(axes[ai].values))
    return tuple(rows)


class KernelIndex:
    """The compiled kernels of a matrix by name, each compiled the first time it is asked for.

    A process that loads the matrix and asks about one kernel compiles that kernel only (cold start);
    every later answer is a dict lookup. Two threads asking first may both compile a kernel: the
    results are equal, and the first one stored is kept.
    """

    __slots__ = ("_axes", "_compiled", "_kernels", "_masks")

    def __init__(self, kernels: Mapping[str, Kernel], axes: tuple[Axis, ...]) -> None:
        self._kernels = kernels
        self._axes = axes
        self._compiled: dict[str, _CompiledKernel] = {}
        self._masks: dict[int, int] = {}  # conditions shared between kernels: their masks, once

    def get(self, name: str) -> _CompiledKernel | None:
        """The compiled kernel ``name`` (None: the matrix has no such kernel)."""
        found = self._compiled.get(name)
        if found is None:
            kernel = self._kernels.get(name)
            if kernel is None:
                return None
            found = self._compiled.setdefault(name, _compile_kernel(kernel, self._axes, self._masks))
        return found

    def __getitem__(self, name: str) -> _CompiledKernel:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def compiled(self) -> Iterator[_CompiledKernel]:
        """The kernels compiled so far."""
        return iter(list(self._compiled.values()))
