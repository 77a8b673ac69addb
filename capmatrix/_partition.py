"""Label every cell of a box by which of a set of boxes contain it, without visiting cells.

The analyses ask questions such as "where is this kernel supported", "where does no candidate of a role
apply" or "where do two matrices pick different kernels". Each answer is a function of *which rule boxes
contain a cell*. :func:`partition` computes, for every label such a function takes, the exact region
where it takes it, as disjoint boxes.

It splits the universe axis by axis. At one axis it groups the values into classes that the live boxes
(those containing the current prefix) cannot tell apart, and recurses once per class, so the work grows
with the number of distinct situations the rules create, not with the number of cells. Three things keep
it small:

- a branch stops as soon as every live box covers the rest of the universe (the label is then constant);
- results are memoised per (axis, live set), so equal sub-problems are solved once;
- sibling results with equal tails are merged on the way up (merge as you go), so the output does not
  fragment into one box per class combination.

Axes are visited most-constrained first, which makes the early stop fire high up the tree.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from capmatrix.regions import Box, Space

__all__ = ["bits", "partition"]

L = TypeVar("L", bound=Hashable)

_Tails = tuple[tuple[Hashable, object], ...]


def bits(value: int) -> list[int]:
    """Positions of the set bits of ``value``, lowest first."""
    out = []
    while value:
        low = value & -value
        out.append(low.bit_length() - 1)
        value ^= low
    return out


def partition(
    space: Space,
    boxes: Sequence[Box],
    label: Callable[[int], L],
    *,
    root: Box | None = None,
    relevant: Callable[[int, int], int] | None = None,
) -> dict[L, list[Box]]:
    """Map each label to the disjoint boxes of ``root`` (default: the universe) where it holds.

    ``label`` receives the set of boxes containing a cell, as a bit set over positions in ``boxes``,
    and returns a hashable label; it is called once per distinct situation, not once per cell. The
    regions of all labels are pairwise disjoint and together cover ``root`` exactly.

    ``relevant(live, covering)`` may drop boxes that cannot change the label below the current
    prefix (``covering``: the live boxes that contain the whole rest of the sub-box); it must return a
    subset of ``live`` on which ``label`` answers the same for every cell below. It prunes the
    recursion and makes equal sub-problems meet in the memo.
    """
    width = len(space.axes)
    top = space.full_box() if root is None else root
    if 0 in top:
        return {}
    clipped = [tuple(m & r for m, r in zip(box, top, strict=True)) for box in boxes]
    live0 = 0
    for i, box in enumerate(clipped):
        if 0 not in box:
            live0 |= 1 << i
    # Most-constrained axes first: the early stop then fires near the root of the recursion.
    constrained = [
        sum(1 for i in bits(live0) if clipped[i][a] != top[a]) for a in range(width)
    ]
    order = sorted(range(width), key=lambda a: -constrained[a])
    # Per depth: (value bit, boxes admitting it) for the values of the root mask on that axis.
    by_value: list[list[tuple[int, int]]] = []
    for a in order:
        rows = []
        for v in bits(top[a]):
            flag = 1 << v
            admitting = 0
            for i in bits(live0):
                if clipped[i][a] & flag:
                    admitting |= 1 << i
            rows.append((flag, admitting))
        by_value.append(rows)
    # covers_from[d]: boxes equal to the root on every axis at depth >= d.
    covers_from = [0] * (width + 1)
    covers_from[width] = live0
    for d in range(width - 1, -1, -1):
        a = order[d]
        full = 0
        for i in bits(covers_from[d + 1]):
            if clipped[i][a] == top[a]:
                full |= 1 << i
        covers_from[d] = full
    # Tails are cons lists (mask, rest) over the axes from a depth on: O(1) to extend on the way up.
    tails_of: list[object] = [()] * (width + 1)
    for d in range(width - 1, -1, -1):
        tails_of[d] = (top[order[d]], tails_of[d + 1])
    memo: list[dict[int, _Tails]] = [{} for _ in range(width + 1)]
    labels: dict[int, Hashable] = {}

    def leaf(live: int) -> Hashable:
        if live in labels:
            return labels[live]
        found = labels[live] = label(live)
        return found

    def node(d: int, live: int) -> _Tails:
        if relevant is not None:
            live = relevant(live, live & covers_from[d])
        table = memo[d]
        cached = table.get(live)
        if cached is not None:
            return cached
        if live & ~covers_from[d] == 0:
            result: _Tails = ((leaf(live), tails_of[d]),)
        else:
            classes: dict[int, int] = {}
            for flag, admitting in by_value[d]:
                sig = live & admitting
                classes[sig] = classes.get(sig, 0) | flag
            if len(classes) == 1:
                (sig, mask), = classes.items()
                result = tuple((lab, (mask, tail)) for lab, tail in node(d + 1, sig))
            else:
                merged: dict[tuple[Hashable, object], int] = {}
                for sig, mask in classes.items():
                    for k in node(d + 1, sig):
                        merged[k] = merged.get(k, 0) | mask
                result = tuple((lab, (mask, tail)) for (lab, tail), mask in merged.items())
        table[live] = result
        return result

    out: dict[L, list[Box]] = {}
    for lab, tail in node(0, live0):
        flat = [0] * width
        d = 0
        rest: Any = tail
        while rest:
            flat[order[d]] = rest[0]
            rest = rest[1]
            d += 1
        out.setdefault(lab, []).append(tuple(flat))  # type: ignore[arg-type]
    return out
