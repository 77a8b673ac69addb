"""Compilation of a kernel's rules to bit sets: per axis and value, the rules that admit it.

One bit per rule, one bitset per value of each axis (the open int axes' class representatives
included), so that resolving a query is a handful of big-integer ANDs whatever the rule count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from capmatrix.model import Effect
from capmatrix.regions import Box, Space, bits, box_of

if TYPE_CHECKING:

    from capmatrix._answers import Reason
    from capmatrix.model import Axis, Kernel, Rule


__all__: list[str] = []



@dataclass(frozen=True, slots=True)
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
    space = Space(axes)
    names = [a.name for a in axes]
    grants = exclusions = 0
    unconstrained = [0] * len(axes)
    # Per axis: the rules (a bitset) of each distinct mask; an axis has few distinct masks, so the
    # bitsets per value are ORs of a handful of groups instead of one update per rule and value.
    groups: list[dict[int, int]] = [{} for _ in axes]
    exclusion_bits: list[int] = []
    boxes = []
    for bit, rule in enumerate(rules):
        flag = 1 << bit
        box = box_of(rule, space, masks)
        if rule.effect is Effect.GRANT:
            grants |= flag
        else:
            exclusions |= flag
            exclusion_bits.append(bit)
        conditions = rule.conditions
        for ai, mask in enumerate(box):
            if names[ai] not in conditions:
                unconstrained[ai] |= flag
            group = groups[ai]
            group[mask] = group.get(mask, 0) | flag
        boxes.append(box)
    constrained = tuple(ai for ai, free in enumerate(unconstrained) if free != grants | exclusions)
    by_value = _by_value(groups, axes)
    return _CompiledKernel(
        kernel=kernel,
        rules=rules,
        grants=grants,
        exclusions=exclusions,
        by_value=by_value,
        unconstrained=tuple(unconstrained),
        constrained=constrained,
        scan=tuple((ai, names[ai], by_value[ai]) for ai in constrained),
        boxes=tuple(boxes),
        labels=tuple((f"{rule.id} ({rule.location})", str(rule.status)) for rule in rules),
        exclusion_bits=tuple(exclusion_bits),
        exclusion_by_value=_exclusion_index(boxes, exclusion_bits, constrained, axes),
    )


def _by_value(groups: list[dict[int, int]], axes: tuple[Axis, ...]) -> tuple[tuple[int, ...], ...]:
    """Per axis, per value index: the OR of the rule bitsets of every mask (group) admitting it."""
    return tuple(_value_row(group, len(axis.values)) for group, axis in zip(groups, axes, strict=True))


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
