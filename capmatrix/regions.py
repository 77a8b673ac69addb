"""Regions of the query universe as unions of boxes (hyper-rectangles), with exact set algebra.

A box fixes, per axis, a set of values held as a bit mask over that axis's known values. A region is
a union of pairwise disjoint boxes. Everything the analyses and the resolver say about "where" is a
region: it is computed box by box, never cell by cell, so universes of 10^9 cells stay cheap.

This module is the one place where a rule becomes a box (:func:`box_of`) and where the set bits of
a mask or a rule bit set are listed (:func:`bits`); the resolver, the analyses and the renderer all
use these two.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate, count
from operator import add, and_

from capmatrix._core.record import field, record

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from capmatrix.model import Axis, AxisValue, Rule

__all__ = ["Box", "Region", "Space", "bits", "box_of"]

Box = tuple[int, ...]


def _small_bits(value: int) -> tuple[int, ...]:
    return tuple(i for i in range(8) if value >> i & 1)


#: Set-bit positions of every byte value: axis masks (8 values an axis is common) are decomposed
#: millions of times while the analyses index boxes.
_TABLE_SIZE = 256
_SMALL = tuple(_small_bits(v) for v in range(_TABLE_SIZE))
#: Up to this many set bits, peeling the lowest bit off is cheaper than scanning the binary text.
_PEEL_BITS = 16
#: ... and only up to this width: each peel works on the whole integer, while the text is made once.
_PEEL_WIDTH = 1024


def bits(value: int, limit: int | None = None) -> list[int]:
    """Positions of the set bits of ``value`` (>= 0), lowest first; only the lowest ``limit`` if given.

    Small masks come from a table; peeling costs one big-integer operation per set bit over the
    whole width, so a dense bit set over thousands of rules is read from its binary text instead
    (linear in the width).

    >>> bits(0b101101), bits(0b101101, 2)
    ([0, 2, 3, 5], [0, 2])
    """
    if limit is None and 0 <= value < _TABLE_SIZE:
        return list(_SMALL[value])
    out: list[int] = []
    if limit is not None and value.bit_length() > _PEEL_WIDTH:
        # The lowest few set bits of a wide bit set usually lie in its low words: read a low window
        # that holds ``limit`` of them (growing it 16-fold while it does not) instead of the whole.
        width = _PEEL_WIDTH
        while width < value.bit_length():
            low = value & ((1 << width) - 1)
            if low.bit_count() >= limit:
                value = low
                break
            width <<= 4
    if value.bit_length() <= _PEEL_WIDTH and (
        (limit is not None and limit <= _PEEL_BITS) or value.bit_count() <= _PEEL_BITS
    ):
        while value and (limit is None or len(out) < limit):
            low = value & -value
            out.append(low.bit_length() - 1)
            value ^= low
        return out
    text = bin(value)[:1:-1]  # bit i of value is character i
    if limit is None:
        # The k-th set bit sits after the zero runs before it and the k ones before it: the runs'
        # lengths are summed in C (split, accumulate) rather than found one by one.
        runs = text.split("1")
        runs.pop()  # the zeros above the top bit: none (the text ends in "1")
        return list(map(add, accumulate(map(len, runs)), count()))
    i = text.find("1")
    while i >= 0 and len(out) < limit:
        out.append(i)
        i = text.find("1", i + 1)
    return out


def _merge(boxes: set[Box], width: int) -> set[Box]:
    """Merge disjoint boxes that differ on one axis only, axis by axis, until no pair merges.

    The axes are taken in turn, round after round, and the walk stops once ``width`` passes in a row
    merged nothing (the set they saw is then the fixed point); a pass that merges nothing leaves the
    set as it is.
    """
    still = axis = 0
    while still < width:
        groups: dict[Box, int] = {}
        for box in boxes:
            key = box[:axis] + box[axis + 1 :]
            groups[key] = groups.get(key, 0) | box[axis]
        if len(groups) < len(boxes):
            boxes = {(*key[:axis], mask, *key[axis:]) for key, mask in groups.items()}
            still = 1
        else:
            still += 1
        axis = (axis + 1) % width
    return boxes


def box_of(rule: Rule, space: Space, masks: dict[int, int] | None = None) -> Box:
    """The box of ``rule`` over ``space``: per axis, the known values its condition admits.

    Axes the rule does not name are whole. ``masks`` remembers each condition's mask by the
    condition's identity (the loader builds equal conditions once and shares them, so the rules of a
    large matrix repeat a few hundred conditions); give one dict per space, and only while the rules
    are alive.
    """
    conditions = rule.conditions
    if masks is None:
        return tuple(
            (1 << len(axis.values)) - 1 if (cond := conditions.get(axis.name)) is None
            else cond.mask(axis.values)
            for axis in space.axes
        )
    box = []
    for axis in space.axes:
        cond = conditions.get(axis.name)
        if cond is None:
            box.append((1 << len(axis.values)) - 1)
            continue
        mask = masks.get(id(cond))
        if mask is None:
            mask = masks[id(cond)] = cond.mask(axis.values)
        box.append(mask)
    return tuple(box)


@record
class Space:
    """The axes a region ranges over, in a fixed order; each axis may carry extra (outside) values."""

    axes: tuple[Axis, ...]
    #: The whole box, made on first use (reports read it once per box they describe).
    _full: list[Box] = field(default_factory=list, init=False, compare=False, repr=False)

    @property
    def names(self) -> tuple[str, ...]:
        """Axis names in order."""
        return tuple(a.name for a in self.axes)

    def full_box(self) -> Box:
        """The box of the whole universe."""
        made = self._full
        if made:
            return made[0]
        box = tuple(a.full_mask for a in self.axes)
        made[:] = [box]  # one store of an immutable result: racing threads store equal ones
        return box

    def position(self, name: str) -> int:
        """Index of axis ``name``."""
        return self.names.index(name)

    def cells(self, box: Box) -> int:
        """Number of cells in ``box``."""
        count = 1
        for mask in box:
            count *= mask.bit_count()
        return count


def intersect(a: Box, b: Box) -> Box | None:
    """The intersection of two boxes, or None when they are disjoint."""
    if len(a) != len(b):
        msg = f"boxes of {len(a)} and {len(b)} axes"
        raise ValueError(msg)
    out = tuple(map(and_, a, b))  # map, not a generator: loading a matrix intersects thousands
    return None if 0 in out else out


def subtract(a: Box, b: Box) -> list[Box]:
    """``a - b`` as disjoint boxes (at most one per axis)."""
    if len(a) != len(b):
        msg = f"boxes of {len(a)} and {len(b)} axes"
        raise ValueError(msg)
    for x, y in zip(a, b):  # noqa: B905 - lengths checked above
        if not x & y:  # disjoint: nothing of ``a`` is taken
            return [a]
    pieces: list[Box] = []
    head = list(a)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        rest = x & ~y
        if rest:
            pieces.append((*head[:i], rest, *a[i + 1 :]))
        head[i] = x & y
    return pieces


def _contains(outer: Box, inner: Box) -> bool:
    return all(i & ~o == 0 for o, i in zip(outer, inner, strict=True))


class Region:
    """An exact set of cells: a union of disjoint boxes over a :class:`Space`."""

    __slots__ = ("_boxes", "_merged", "space")

    def __init__(self, space: Space, boxes: Iterable[Box] = (), *, disjoint: bool = False) -> None:
        self.space = space
        #: Whether the boxes are already the result of :meth:`merged` (which is then the identity).
        self._merged = False
        if disjoint:
            self._boxes = tuple(b for b in boxes if 0 not in b)
        else:
            acc: list[Box] = []
            for box in boxes:
                if 0 in box:
                    continue
                pieces = [box]
                for existing in acc:
                    pieces = [p for piece in pieces for p in subtract(piece, existing)]
                    if not pieces:
                        break
                acc.extend(pieces)
            self._boxes = tuple(acc)

    @classmethod
    def full(cls, space: Space) -> Region:
        """The whole universe."""
        return cls(space, [space.full_box()], disjoint=True)

    @property
    def boxes(self) -> tuple[Box, ...]:
        """The disjoint boxes of this region."""
        return self._boxes

    def __bool__(self) -> bool:
        return bool(self._boxes)

    def __iter__(self) -> Iterator[Box]:
        return iter(self._boxes)

    def cells(self) -> int:
        """Number of cells."""
        return sum(self.space.cells(b) for b in self._boxes)

    def __and__(self, other: Region) -> Region:
        out = []
        for a in self._boxes:
            for b in other._boxes:
                box = intersect(a, b)
                if box is not None:
                    out.append(box)
        return Region(self.space, out, disjoint=True)

    def __sub__(self, other: Region) -> Region:
        pieces = list(self._boxes)
        for b in other._boxes:
            nxt: list[Box] = []
            for p in pieces:
                nxt.extend(subtract(p, b))
            pieces = nxt
            if not pieces:
                break
        return Region(self.space, pieces, disjoint=True)

    def __or__(self, other: Region) -> Region:
        return Region(self.space, [*self._boxes, *(other - self).boxes], disjoint=True)

    def __le__(self, other: Region) -> bool:
        return not (self - other)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Region):
            return NotImplemented
        return not (self - other) and not (other - self)

    __hash__ = None  # type: ignore[assignment]  # regions are compared by content, not hashed

    def merged(self) -> Region:
        """An equal region in which boxes that differ on one axis only are merged together.

        The boxes are disjoint, so two boxes equal on every other axis have disjoint masks on the
        remaining one and merging them is exact. Repeats until no pair merges.
        """
        if self._merged:
            # A merged region is a fixed point: no two of its boxes merge and they are in order.
            return self
        boxes = set(self._boxes)
        if len(boxes) > 1:
            # Only the axes where the boxes differ can merge (on an axis where all agree, two boxes
            # equal elsewhere are one box): merge the boxes' projections on those, then put back the
            # common masks. Most axes of a wide space are whole in every box.
            first = next(iter(boxes))
            varying = [i for i in range(len(first)) if any(b[i] != first[i] for b in boxes)]
            merged = _merge({tuple(b[i] for i in varying) for b in boxes}, len(varying))
            template = list(first)
            boxes = set()
            for part in merged:
                for i, mask in zip(varying, part, strict=True):
                    template[i] = mask
                boxes.add(tuple(template))
        ordered = sorted(boxes, key=lambda b: ([-m.bit_count() for m in b], b))
        out = Region(self.space, ordered, disjoint=True)
        out._merged = True
        return out

    def witness(self, box: Box | None = None) -> dict[str, AxisValue]:
        """One cell of the region (of ``box`` when given) as ``{axis: value}``."""
        if box is None:
            if not self._boxes:
                msg = "an empty region has no witness"
                raise ValueError(msg)
            box = self._boxes[0]
        out: dict[str, AxisValue] = {}
        for axis, mask in zip(self.space.axes, box, strict=True):
            low = (mask & -mask).bit_length() - 1
            out[axis.name] = axis.values[low]
        return out

    def describe_box(self, box: Box, *, relative_to: Box | None = None) -> str:
        """Render one box as ``sm in {120, 121} and attention = mla`` (whole axes left out)."""
        parts = []
        base = relative_to or self.space.full_box()
        for axis, mask, full in zip(self.space.axes, box, base, strict=True):
            if mask != full:
                parts.append(axis.phrase(mask, full))
        return " and ".join(parts) or "everywhere"

    def describe(self, *, relative_to: Box | None = None) -> list[str]:
        """One line per (merged) box."""
        return [self.describe_box(b, relative_to=relative_to) for b in self.merged().boxes]

    def as_dicts(self) -> list[dict[str, list[AxisValue]]]:
        """JSON-ready boxes: a list of ``{axis: [values]}`` with every axis present."""
        return [
            {a.name: list(a.values_of(m)) for a, m in zip(self.space.axes, box, strict=True)}
            for box in self._boxes
        ]

    def __str__(self) -> str:
        lines = self.describe()
        if not lines:
            return "nowhere"
        return " or ".join(f"({line})" if len(lines) > 1 else line for line in lines)

    def __repr__(self) -> str:
        return f"<Region {self!s}>"


def union(space: Space, boxes: Sequence[Box]) -> Region:
    """The union of possibly overlapping boxes, as a region."""
    return Region(space, boxes)
