"""Regions as reduced ordered decision diagrams: exact set algebra whose cost follows structure, not cells.

A diagram node tests one axis (the axes in one fixed order, a *level* each) and has one child per
value of that axis; two terminals stand for "nowhere" (0) and "everywhere" (1). Nodes are hash-consed
(an equal node is never built twice) and reduced (a node whose children are all equal is that child),
so a region has exactly one diagram for a given axis order: two regions are equal iff their node ids
are, and emptiness is ``node == 0``. Union, intersection and difference are memoised walks over two
diagrams; the number of cells and of boxes is read in one pass over the nodes.

The *canonical boxes* of a region are the paths of its diagram from the root to terminal 1: at each
node, the values whose children are the same node share one box mask; an axis the path skips is
whole. They are disjoint, determined by the cells and the axis order alone (not by the rules that
produced the region, nor by the order in which they were combined), and listed in a fixed order (at
each node, by the lowest value of each mask). ``docs/analysis.md`` documents the form.

The axis order is the analysis's choice (:func:`axis_order`): axes constrained by more rule boxes
first, ties in declared order. A good order keeps diagrams small; any order gives the same cells.

The nodes live in a *core*, ``_pycore``: the node store and its walks. (A compiled twin in C was
removed: on the shipped and the five-release matrix it saved about 40 ms of a 150-190 ms ``check``,
which did not pay for a platform-specific wheel; docs/architecture.md has the figures.)
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from capmatrix.authoring.analysis import _pycore
from capmatrix.regions import bits

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from typing_extensions import Self

    from capmatrix.regions import Box, Space

__all__ = ["CORES", "EMPTY", "FULL", "Diagram", "axis_order", "collection_paused"]

#: The terminal node of the empty region.
EMPTY = 0
#: The terminal node of the whole universe.
FULL = 1


@contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration (as it was before, after).

    A diagram store holds millions of tuples and memo entries, none of them in a reference cycle;
    each full collection walks all of them, which cost a third of the time of a role's union. The
    walks below break their own closures' cycles, so nothing they build waits for a collection.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def axis_order(space: Space, boxes: Iterable[Box]) -> tuple[int, ...]:
    """Axis positions, the axes that more of ``boxes`` constrain first (ties: declared order)."""
    full = space.full_box()
    counts = [0] * len(full)
    for box in boxes:
        for a, (mask, whole) in enumerate(zip(box, full, strict=True)):
            if mask != whole:
                counts[a] += 1
    return tuple(sorted(range(len(full)), key=lambda a: (-counts[a], a)))


class Store(Protocol):
    """What a diagram needs of its core (``_pycore.Core`` is one)."""

    def __len__(self) -> int: ...
    def node(self, level: int, kids: tuple[int, ...], /) -> int: ...
    def level(self, node: int, /) -> int: ...
    def kids(self, node: int, /) -> tuple[int, ...]: ...
    def join(self, a: int, b: int, /) -> int: ...
    def meet(self, a: int, b: int, /) -> int: ...
    def minus(self, a: int, b: int, /) -> int: ...
    def within(self, a: int, b: int, /) -> bool: ...
    def intersects(self, a: int, b: int, /) -> bool: ...
    def rules(self, constrained: Sequence[int], admit: Sequence[Sequence[int]], pending: Sequence[int],
              grants: int, exclusions: int, /) -> int: ...
    def cells_below(self, node: int, /) -> int: ...
    def count_paths(self, node: int, negated: bool, /) -> int: ...
    def boxes(self, node: int, limit: int, negated: bool, full: Sequence[int], /) -> list[tuple[int, ...]]: ...  # noqa: E501
    def release(self) -> None: ...


#: The cores at hand by name, the one a diagram uses by default first.
CORES: dict[str, Callable[[Sequence[int], Sequence[int]], Store]] = {"python": _pycore.Core}


class Diagram:
    """A store of decision-diagram nodes over ``space``, in the axis order ``order`` (positions).

    Nodes are ints; :data:`EMPTY` and :data:`FULL` are the terminals. Every node built by one store
    can be combined with every other of the same store; the store only grows. ``core`` names one of
    :data:`CORES` (default: the first).
    """

    __slots__ = ("_core", "_skip", "axes", "full", "intersects", "join", "meet", "minus", "sizes",
                 "space", "width", "within")

    def __init__(self, space: Space, order: Sequence[int] | None = None, *, core: str | None = None) -> None:
        self.space = space
        self.width = len(space.axes)
        #: Level -> axis position.
        self.axes: tuple[int, ...] = tuple(range(self.width)) if order is None else tuple(order)
        if sorted(self.axes) != list(range(self.width)):
            msg = f"order {self.axes} is not a permutation of the {self.width} axes"
            raise ValueError(msg)
        #: Level -> number of values of its axis.
        self.sizes = tuple(len(space.axes[a].values) for a in self.axes)
        self.full = tuple(space.axes[a].full_mask for a in self.axes)
        kind = CORES[next(iter(CORES)) if core is None else core]
        self._core: Store = kind(self.sizes, self.axes)
        #: The union, intersection and difference of two regions; whether every cell of the first is
        #: in the second; whether they share a cell (the last two stop early and build nothing).
        self.join: Callable[[int, int], int] = self._core.join
        self.meet: Callable[[int, int], int] = self._core.meet
        self.minus: Callable[[int, int], int] = self._core.minus
        self.within: Callable[[int, int], bool] = self._core.within
        self.intersects: Callable[[int, int], bool] = self._core.intersects
        # _skip[l]: cells of the levels above l (the levels a node at l skipped count whole).
        self._skip = [1] * (self.width + 1)
        for level in range(1, self.width + 1):
            self._skip[level] = self._skip[level - 1] * self.sizes[level - 1]

    def __len__(self) -> int:
        """Nodes built so far, terminals included."""
        return len(self._core)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    @property
    def core(self) -> str:
        """The name of the core behind this store (a key of :data:`CORES`)."""
        return next(name for name, kind in CORES.items() if type(self._core) is kind)

    def release(self) -> None:
        """Empty the store's tables (its nodes are then unusable) without waiting for a collection.

        The Python core's walks are closures that refer to themselves, so its store is only freed by
        the cyclic collector, which an analysis pauses: an analysis that builds one store per role
        hands each back this way, keeping its memory to one role's. A store left to the collector
        costs more: the first collection after the pause walks every tuple it holds (``with
        Diagram(...)`` releases on the way out).
        """
        self._core.release()

    # ----------------------------------------------------------------------------------------------
    # building

    def box(self, box: Box) -> int:
        """The node of one box (masks in the space's axis order)."""
        node = FULL
        make = self._core.node
        for level in range(self.width - 1, -1, -1):
            mask = box[self.axes[level]]
            if mask == self.full[level]:
                continue
            if not mask:
                return EMPTY
            node = make(level, tuple(node if mask >> v & 1 else EMPTY for v in range(self.sizes[level])))
        return node

    def rules(self, boxes: Sequence[Box], grants: int, exclusions: int = 0) -> int:
        """The node of the cells where some box of ``grants`` holds and no box of ``exclusions`` does.

        ``grants`` and ``exclusions`` are bit sets over ``boxes``: the same node as the union of the
        grants minus the union of the exclusions, built top-down in one walk over the levels, the
        boxes still live below a node being its state. Only nodes of the result are built, where
        combining box by box builds every partial union first (for many overlapping boxes far more
        nodes than the result has, each kept by the store).
        """
        grants &= ~exclusions
        live = grants | exclusions
        if not grants:
            return EMPTY
        width, axes, full = self.width, self.axes, self.full
        # Per level: the live boxes constrained there, and per value the live boxes admitting it.
        constrained = [0] * (width + 1)
        for i in bits(live):
            for level in range(width):
                if boxes[i][axes[level]] != full[level]:
                    constrained[level] |= 1 << i
        admit = [[live & ~constrained[level]] * self.sizes[level] for level in range(width)]
        for i in bits(live):
            for level in range(width):
                mask = boxes[i][axes[level]]
                if mask != full[level]:
                    row = admit[level]
                    for v in bits(mask):
                        row[v] |= 1 << i
        # pending[l]: the boxes constrained at some level from l on; a live box not among them
        # holds every cell below.
        pending = [0] * (width + 1)
        for level in range(width - 1, -1, -1):
            pending[level] = pending[level + 1] | constrained[level]
        return self._core.rules(constrained, admit, pending, grants, exclusions)

    def union(self, nodes: Iterable[int]) -> int:
        """The union of ``nodes``, combined pairwise in a balanced tree (small intermediate results)."""
        layer = [n for n in nodes if n != EMPTY]
        if not layer:
            return EMPTY
        join = self.join
        while len(layer) > 1:
            paired = [join(layer[i], layer[i + 1]) for i in range(0, len(layer) - 1, 2)]
            if len(layer) % 2:
                paired.append(layer[-1])
            layer = paired
        return layer[0]

    # ----------------------------------------------------------------------------------------------
    # reading

    def cells(self, node: int, *, negated: bool = False) -> int:
        """How many cells the region holds (exact); ``negated``: the cells it does not hold."""
        total = self._skip[self.width]
        if node in (EMPTY, FULL):
            held = total if node == FULL else 0
        else:
            held = self._core.cells_below(node) * self._skip[self._core.level(node)]
        return total - held if negated else held

    def count_boxes(self, node: int, *, negated: bool = False) -> int:
        """How many canonical boxes the region (or, ``negated``, its complement) has, exactly.

        Counted on the diagram, without listing them.
        """
        return self._core.count_paths(node, negated)

    def boxes(self, node: int, limit: int | None = None, *, negated: bool = False) -> list[Box]:
        """The canonical boxes of the region (``negated``: of its complement) in their fixed order.

        Only the first ``limit`` if given. The work is bounded by the boxes returned (times the
        number of axes): a truncated listing of a huge region costs no more than its first boxes.
        """
        if limit is not None and limit <= 0:
            return []
        return self._core.boxes(node, -1 if limit is None else limit, negated, self.full)

    def covered(self, node: int, others: Sequence[int]) -> bool:
        """Whether every cell of ``node`` is in some region of ``others`` (builds nothing).

        The same answer as ``within(node, union(others))``, walking the regions side by side and
        stopping at the first cell of ``node`` that none of them holds.
        """
        level_of, kids_of, within = self._core.level, self._core.kids, self.within
        held: set[tuple[int, tuple[int, ...]]] = set()

        def walk(n: int, group: tuple[int, ...]) -> bool:
            if n == EMPTY or FULL in group:
                return True
            if len(group) <= 1:
                return bool(group) and within(n, group[0])
            key = (n, group)
            if key in held:
                return True
            levels = [level_of(g) for g in group]
            here = level_of(n)
            level = min(here, *levels)
            own = kids_of(n) if here == level else None
            rows = [kids_of(g) if at == level else None for g, at in zip(group, levels, strict=True)]
            for v in range(self.sizes[level]):
                below = {g if row is None else row[v] for g, row in zip(group, rows, strict=True)}
                below.discard(EMPTY)
                if not walk(n if own is None else own[v], tuple(sorted(below))):  # noqa: F821 - see del
                    return False
            held.add(key)
            return True

        found = walk(node, tuple(sorted({g for g in others if g != EMPTY})))
        # ``walk`` refers to itself (and, through its closure, to this store): emptying its cell
        # breaks the cycle, so neither waits for a collection, which the analyses pause
        del walk
        return found

    def contains(self, node: int, box: Box) -> bool:
        """Whether the region holds every cell of ``box``."""
        return self.within(self.box(box), node)

    def meets(self, node: int, box: Box) -> bool:
        """Whether the region holds some cell of ``box`` (a walk inside the box; nothing is built)."""
        masks = [box[a] for a in self.axes]
        if EMPTY in masks:
            return False
        level_of, kids_of = self._core.level, self._core.kids
        barren: set[int] = set()

        def walk(n: int) -> bool:
            if n == FULL:
                return True
            if n == EMPTY or n in barren:
                return False
            row = kids_of(n)
            mask = masks[level_of(n)]
            while mask:
                low = mask & -mask
                if walk(row[low.bit_length() - 1]):  # noqa: F821 - deleted below, breaking the cycle
                    return True
                mask ^= low
            barren.add(n)
            return False

        found = walk(node)
        del walk  # ``walk`` refers to itself: break the cycle (as in covered)
        return found

    def winners(
        self, layers: Iterable[tuple[Sequence[str], int]], support: Callable[[str], int]
    ) -> dict[str | None, int]:
        """Where each candidate of a role wins (None: where no candidate is supported); empty ones left out.

        Per layer (candidates, area), a candidate takes the part of its ``support`` in the area that no
        earlier candidate of the layer took.
        """
        out: dict[str | None, int] = {}
        for candidates, area in layers:
            taken = EMPTY
            for candidate in candidates:
                own = self.meet(support(candidate), area)
                won = self.minus(own, taken)
                if won != EMPTY:
                    out[candidate] = self.join(out.get(candidate, EMPTY), won)
                taken = self.join(taken, own)
            rest = self.minus(area, taken)
            if rest != EMPTY:
                out[None] = self.join(out.get(None, EMPTY), rest)
        return out
