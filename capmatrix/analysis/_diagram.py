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
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import TYPE_CHECKING

from capmatrix.regions import bits

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from typing_extensions import Self

    from capmatrix.regions import Box, Space

__all__ = ["EMPTY", "FULL", "Diagram", "axis_order", "collection_paused"]

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


class Diagram:
    """A store of decision-diagram nodes over ``space``, in the axis order ``order`` (positions).

    Nodes are ints; :data:`EMPTY` and :data:`FULL` are the terminals. Every node built by one store
    can be combined with every other of the same store; the store only grows.
    """

    __slots__ = ("_and", "_apart", "_cell_memo", "_join", "_kids", "_level", "_meet", "_minus", "_or",
                 "_paths", "_skip", "_subtract", "_unique", "_within", "axes", "full", "sizes", "space",
                 "width")

    def __init__(self, space: Space, order: Sequence[int] | None = None) -> None:
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
        # Node -> level (terminals: past the last level) and its children (one per value).
        self._level: list[int] = [self.width, self.width]
        self._kids: list[tuple[int, ...]] = [(), ()]
        self._unique: list[dict[tuple[int, ...], int]] = [{} for _ in self.axes]
        self._or: dict[tuple[int, int], int] = {}
        self._and: dict[tuple[int, int], int] = {}
        self._minus: dict[tuple[int, int], int] = {}
        self._within: set[tuple[int, int]] = set()
        self._apart: set[tuple[int, int]] = set()
        self._cell_memo: dict[int, int] = {}
        self._paths: tuple[dict[int, int], dict[int, int]] = ({EMPTY: 0, FULL: 1}, {EMPTY: 1, FULL: 0})
        # _skip[l][m]: cells of the levels from l up to (not including) m.
        self._skip = [[1] * (self.width + 1) for _ in range(self.width + 1)]
        for low in range(self.width + 1):
            for high in range(low + 1, self.width + 1):
                self._skip[low][high] = self._skip[low][high - 1] * self.sizes[high - 1]
        self._join, self._meet, self._subtract = _operations(self)

    def __len__(self) -> int:
        """Nodes built so far, terminals included."""
        return len(self._level)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Empty the store's tables (its nodes are then unusable) without waiting for a collection.

        The store's walks are closures that refer to themselves, so the store is only freed by the
        cyclic collector, which an analysis pauses: an analysis that builds one store per role hands
        each back this way, keeping its memory to one role's. A store left to the collector costs
        more: the first collection after the pause walks every tuple it holds (``with Diagram(...)``
        releases on the way out).
        """
        pairs: tuple[dict[tuple[int, int], int], ...] = (self._or, self._and, self._minus)
        for memo in pairs:
            memo.clear()
        for counts in (self._cell_memo, *self._paths):
            counts.clear()
        for unique in self._unique:
            unique.clear()
        self._within.clear()
        self._apart.clear()
        del self._level[2:], self._kids[2:]

    def _node(self, level: int, kids: tuple[int, ...]) -> int:
        first = kids[0]
        if kids.count(first) == len(kids):
            return first
        table = self._unique[level]
        found = table.get(kids)
        if found is None:
            found = table[kids] = len(self._level)
            self._level.append(level)
            self._kids.append(kids)
        return found

    # ----------------------------------------------------------------------------------------------
    # building

    def box(self, box: Box) -> int:
        """The node of one box (masks in the space's axis order)."""
        node = FULL
        for level in range(self.width - 1, -1, -1):
            mask = box[self.axes[level]]
            if mask == self.full[level]:
                continue
            if not mask:
                return EMPTY
            node = self._node(level, tuple(node if mask >> v & 1 else EMPTY
                                           for v in range(self.sizes[level])))
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
        # Per level, the node of each live set met there (after the levels nobody tests are skipped
        # and a covering grant stands for all; both keys are kept).
        memo: list[dict[int, int]] = [{} for _ in range(width + 1)]
        levels, kids_of, unique = self._level, self._kids, self._unique

        def walk(level: int, live: int) -> int:
            """The node of ``live`` (some grant among them) from ``level`` down."""
            while level < width and not live & constrained[level]:
                level += 1  # no live box tests this level: the node skips it
            rest = pending[level]
            e = live & exclusions
            if e & ~rest:
                return EMPTY
            covering = live & grants & ~rest
            if covering:
                if not e:
                    return FULL
                live = (covering & -covering) | e  # one covering grant decides as well as all
            here = memo[level]
            found = here.get(live)
            if found is not None:
                return found
            below = level + 1
            under = memo[below]
            seen: dict[int, int] = {}
            kids: list[int] = []
            add = kids.append
            for admits in admit[level]:
                sub = live & admits
                kid = seen.get(sub)
                if kid is None:
                    if not sub & grants:
                        kid = EMPTY
                    else:
                        kid = under.get(sub)
                        if kid is None:
                            kid = under[sub] = walk(below, sub)
                    seen[sub] = kid
                add(kid)
            first = kids[0]
            if kids.count(first) == len(kids):
                found = first
            else:
                key = tuple(kids)
                table = unique[level]
                found = table.get(key)
                if found is None:
                    found = table[key] = len(levels)
                    levels.append(level)
                    kids_of.append(key)
            here[live] = found
            return found

        found = walk(0, live)
        for table in memo:  # ``walk`` refers to itself: free its memo without a collection
            table.clear()
        return found

    def union(self, nodes: Iterable[int]) -> int:
        """The union of ``nodes``, combined pairwise in a balanced tree (small intermediate results)."""
        layer = [n for n in nodes if n != EMPTY]
        if not layer:
            return EMPTY
        while len(layer) > 1:
            paired = [self.join(layer[i], layer[i + 1]) for i in range(0, len(layer) - 1, 2)]
            if len(layer) % 2:
                paired.append(layer[-1])
            layer = paired
        return layer[0]

    def join(self, a: int, b: int) -> int:
        """The union of two regions."""
        if FULL in (a, b):
            return FULL
        if a in (EMPTY, b):
            return b
        if b == EMPTY:
            return a
        if a > b:
            a, b = b, a
        found = self._or.get((a, b))
        if found is not None:
            return found
        return self._join(a, b)

    def meet(self, a: int, b: int) -> int:
        """The intersection of two regions."""
        if EMPTY in (a, b):
            return EMPTY
        if a in (FULL, b):
            return b
        if b == FULL:
            return a
        if a > b:
            a, b = b, a
        found = self._and.get((a, b))
        if found is not None:
            return found
        return self._meet(a, b)

    def minus(self, a: int, b: int) -> int:
        """The cells of ``a`` not in ``b``."""
        if a == EMPTY or b in (FULL, a):
            return EMPTY
        if b == EMPTY:
            return a
        found = self._minus.get((a, b))
        if found is not None:
            return found
        return self._subtract(a, b)

    def _align(self, a: int, b: int) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        la, lb = self._level[a], self._level[b]
        if la == lb:
            return la, self._kids[a], self._kids[b]
        if la < lb:
            return la, self._kids[a], (b,) * self.sizes[la]
        return lb, (a,) * self.sizes[lb], self._kids[b]

    # ----------------------------------------------------------------------------------------------
    # reading

    def cells(self, node: int, *, negated: bool = False) -> int:
        """How many cells the region holds (exact); ``negated``: the cells it does not hold."""
        total = 1
        for size in self.sizes:
            total *= size
        if node in (EMPTY, FULL):
            held = total if node == FULL else 0
        else:
            held = self._cells_below(node) * self._skip[0][self._level[node]]
        return total - held if negated else held

    def _cells_below(self, node: int) -> int:
        """Cells of ``node`` over the levels from its own down (memoised in the store)."""
        memo, levels, kids, skip = self._cell_memo, self._level, self._kids, self._skip
        found = memo.get(node)
        if found is not None:
            return found
        row = skip[levels[node] + 1]
        total = 0
        for kid in kids[node]:
            if kid == FULL:
                total += row[self.width]
            elif kid != EMPTY:
                total += (memo.get(kid) or self._cells_below(kid)) * row[levels[kid]]
        memo[node] = total
        return total

    def count_boxes(self, node: int, *, negated: bool = False) -> int:
        """How many canonical boxes the region (or, ``negated``, its complement) has, exactly.

        Counted on the diagram, without listing them.
        """
        kids = self._kids
        memo = self._paths[negated]

        def paths(n: int) -> int:
            found = memo.get(n)
            if found is None:
                found = memo[n] = sum(paths(k) for k in dict.fromkeys(kids[n]))
            return found

        return paths(node)

    def boxes(self, node: int, limit: int | None = None, *, negated: bool = False) -> list[Box]:
        """The canonical boxes of the region (``negated``: of its complement) in their fixed order.

        Only the first ``limit`` if given. The work is bounded by the boxes returned (times the
        number of axes): a truncated listing of a huge region costs no more than its first boxes.
        """
        out: list[Box] = []
        inside, outside = (EMPTY, FULL) if negated else (FULL, EMPTY)
        if node == outside or (limit is not None and limit <= 0):
            return out
        axes, levels, kids = self.axes, self._level, self._kids
        masks: list[int] = [*self.full]  # per level, the mask of the current path
        full = self.full

        def emit() -> None:
            flat = [0] * self.width
            for level, axis in enumerate(axes):
                flat[axis] = masks[level]
            out.append(tuple(flat))

        def walk(n: int) -> bool:
            """Append ``n``'s paths (the current prefix fixed); False once ``limit`` is reached."""
            if n == inside:
                emit()
                return limit is None or len(out) < limit
            level = levels[n]
            by_kid: dict[int, int] = {}
            for v, kid in enumerate(kids[n]):
                if kid != outside:
                    by_kid[kid] = by_kid.get(kid, 0) | 1 << v
            going = True
            for kid, mask in by_kid.items():  # first-seen order: by the lowest value of each mask
                masks[level] = mask
                going = walk(kid)
                if not going:
                    break
            masks[level] = full[level]
            return going

        walk(node)
        return out

    def within(self, a: int, b: int) -> bool:
        """Whether every cell of ``a`` is in ``b`` (stops at the first cell that is not)."""
        if a == EMPTY or b in (FULL, a):
            return True
        if b == EMPTY or a == FULL:
            return False
        key = (a, b)
        if key in self._within:
            return True
        found = self._minus.get(key)
        if found is not None:
            return found == EMPTY
        _level, kids_a, kids_b = self._align(a, b)
        if all(map(self.within, kids_a, kids_b)):
            self._within.add(key)
            return True
        return False

    def covered(self, node: int, others: Sequence[int]) -> bool:
        """Whether every cell of ``node`` is in some region of ``others`` (builds nothing).

        The same answer as ``within(node, union(others))``, walking the regions side by side and
        stopping at the first cell of ``node`` that none of them holds.
        """
        levels, kids_of, within = self._level, self._kids, self.within
        held: set[tuple[int, tuple[int, ...]]] = set()

        def walk(n: int, group: tuple[int, ...]) -> bool:
            if n == EMPTY or FULL in group:
                return True
            if len(group) <= 1:
                return bool(group) and within(n, group[0])
            key = (n, group)
            if key in held:
                return True
            level = min(levels[n], *(levels[g] for g in group))
            own = kids_of[n] if levels[n] == level else None
            rows = [kids_of[g] if levels[g] == level else None for g in group]
            for v in range(self.sizes[level]):
                below = {g if row is None else row[v] for g, row in zip(group, rows, strict=True)}
                below.discard(EMPTY)
                if not walk(n if own is None else own[v], tuple(sorted(below))):
                    return False
            held.add(key)
            return True

        found = walk(node, tuple(sorted({g for g in others if g != EMPTY})))
        held.clear()  # ``walk`` refers to itself: free its memo without a collection
        return found

    def intersects(self, a: int, b: int) -> bool:
        """Whether the regions share a cell (stops at the first shared cell; builds nothing)."""
        if EMPTY in (a, b):
            return False
        if a in (FULL, b) or b == FULL:
            return True
        if a > b:
            a, b = b, a
        key = (a, b)
        if key in self._apart:
            return False
        found = self._and.get(key)
        if found is not None:
            return found != EMPTY
        _level, kids_a, kids_b = self._align(a, b)
        if any(map(self.intersects, kids_a, kids_b)):
            return True
        self._apart.add(key)
        return False

    def contains(self, node: int, box: Box) -> bool:
        """Whether the region holds every cell of ``box``."""
        return self.within(self.box(box), node)

    def meets(self, node: int, box: Box) -> bool:
        """Whether the region holds some cell of ``box`` (a walk inside the box; nothing is built)."""
        masks = [box[a] for a in self.axes]
        if EMPTY in masks:
            return False
        levels, kids = self._level, self._kids
        barren: set[int] = set()

        def walk(n: int) -> bool:
            if n == FULL:
                return True
            if n == EMPTY or n in barren:
                return False
            row = kids[n]
            mask = masks[levels[n]]
            while mask:
                low = mask & -mask
                if walk(row[low.bit_length() - 1]):
                    return True
                mask ^= low
            barren.add(n)
            return False

        found = walk(node)
        barren.clear()  # ``walk`` refers to itself: free its memo without a collection
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


def _operations(store: Diagram) -> tuple[Callable[[int, int], int], Callable[[int, int], int],
                                         Callable[[int, int], int]]:
    """The memoised walks of union, intersection and difference over ``store``'s nodes.

    Closures over the store's tables (which are only ever appended to), with the alignment of two
    nodes and the building of a node written out inline: these walks visit every pair of nodes the
    result is built from, millions for a role of overlapping candidates, so each lookup saved counts.
    Each takes two non-terminal nodes (``a < b`` for the symmetric two) whose pair is not memoised.
    """
    levels, kids_of, unique, sizes = store._level, store._kids, store._unique, store.sizes  # noqa: SLF001
    or_memo, and_memo, minus_memo = store._or, store._and, store._minus  # noqa: SLF001
    or_get, and_get, minus_get = or_memo.get, and_memo.get, minus_memo.get

    # join, meet and subtract repeat the alignment of their operands and the building of the result
    # inline, on purpose: they are the innermost loops of check and diff, where a helper call per node
    # pair shows in the profile. The terminals are compared as the literals 0 (EMPTY) and 1 (FULL):
    # a global lookup or a tuple per comparison costs as much again.
    def join(a: int, b: int) -> int:
        la, lb = levels[a], levels[b]
        if la == lb:
            level, kids_a, kids_b = la, kids_of[a], kids_of[b]
        elif la < lb:
            level, kids_a, kids_b = la, kids_of[a], (b,) * sizes[la]
        else:
            level, kids_a, kids_b = lb, (a,) * sizes[lb], kids_of[b]
        out: list[int] = []
        add = out.append
        for x, y in zip(kids_a, kids_b, strict=False):  # equal lengths: one level's values
            if y == x or y == 0:  # noqa: PLR1714 - no tuple per comparison (above)
                add(x)
            elif x == 0:
                add(y)
            elif x == 1 or y == 1:
                add(1)
            else:
                pair = (x, y) if x < y else (y, x)
                found = or_get(pair)
                add(join(*pair) if found is None else found)
        first = out[0]
        if out.count(first) == len(out):
            found = first
        else:
            kids = tuple(out)
            table = unique[level]
            found = table.get(kids)
            if found is None:
                found = table[kids] = len(levels)
                levels.append(level)
                kids_of.append(kids)
        or_memo[(a, b)] = found
        return found

    def meet(a: int, b: int) -> int:
        la, lb = levels[a], levels[b]
        if la == lb:
            level, kids_a, kids_b = la, kids_of[a], kids_of[b]
        elif la < lb:
            level, kids_a, kids_b = la, kids_of[a], (b,) * sizes[la]
        else:
            level, kids_a, kids_b = lb, (a,) * sizes[lb], kids_of[b]
        out: list[int] = []
        add = out.append
        for x, y in zip(kids_a, kids_b, strict=False):  # equal lengths: one level's values
            if x == 0 or y == 0:
                add(0)
            elif x == y or x == 1:  # noqa: PLR1714
                add(y)
            elif y == 1:
                add(x)
            else:
                pair = (x, y) if x < y else (y, x)
                found = and_get(pair)
                add(meet(*pair) if found is None else found)
        first = out[0]
        if out.count(first) == len(out):
            found = first
        else:
            kids = tuple(out)
            table = unique[level]
            found = table.get(kids)
            if found is None:
                found = table[kids] = len(levels)
                levels.append(level)
                kids_of.append(kids)
        and_memo[(a, b)] = found
        return found

    def subtract(a: int, b: int) -> int:
        la, lb = levels[a], levels[b]
        if la == lb:
            level, kids_a, kids_b = la, kids_of[a], kids_of[b]
        elif la < lb:
            level, kids_a, kids_b = la, kids_of[a], (b,) * sizes[la]
        else:
            level, kids_a, kids_b = lb, (a,) * sizes[lb], kids_of[b]
        out: list[int] = []
        add = out.append
        for x, y in zip(kids_a, kids_b, strict=False):  # equal lengths: one level's values
            if x == 0 or y == 1 or y == x:  # noqa: PLR1714
                add(0)
            elif y == 0:
                add(x)
            else:
                found = minus_get((x, y))
                add(subtract(x, y) if found is None else found)
        first = out[0]
        if out.count(first) == len(out):
            found = first
        else:
            kids = tuple(out)
            table = unique[level]
            found = table.get(kids)
            if found is None:
                found = table[kids] = len(levels)
                levels.append(level)
                kids_of.append(kids)
        minus_memo[(a, b)] = found
        return found

    return join, meet, subtract
