"""The diagram core: the node store and its walks.

A *core* holds the nodes of one :class:`~capmatrix.authoring.analysis._diagram.Diagram`: per node its
level and its children (one per value of the level's axis), hash-consed and reduced, with the memoised walks
that build regions (union, intersection, difference, a kernel's rules) and read them (cells, box
counts, the canonical boxes, containment, overlap).

Nodes are ints: 0 is the empty region, 1 the whole universe; the rest are numbered as they are built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["Core"]


class Core:
    """Nodes over levels of ``sizes[level]`` values each; level ``l`` tests axis ``axes[l]``."""

    __slots__ = ("_and", "_apart", "_cell_memo", "_join", "_kids", "_level", "_meet", "_minus", "_or",
                 "_paths", "_skip", "_subtract", "_unique", "_within", "axes", "kids", "level", "sizes",
                 "width")

    def __init__(self, sizes: Sequence[int], axes: Sequence[int]) -> None:
        self.sizes = tuple(sizes)
        self.axes = tuple(axes)
        self.width = len(self.sizes)
        # Node -> level (terminals: past the last level) and its children (one per value).
        self._level: list[int] = [self.width, self.width]
        self._kids: list[tuple[int, ...]] = [(), ()]
        #: The level and the children of a node (subscripts of the store's lists: no call per read).
        self.level: Callable[[int], int] = self._level.__getitem__
        self.kids: Callable[[int], tuple[int, ...]] = self._kids.__getitem__
        self._unique: list[dict[tuple[int, ...], int]] = [{} for _ in self.sizes]
        self._or: dict[tuple[int, int], int] = {}
        self._and: dict[tuple[int, int], int] = {}
        self._minus: dict[tuple[int, int], int] = {}
        self._within: set[tuple[int, int]] = set()
        self._apart: set[tuple[int, int]] = set()
        self._cell_memo: dict[int, int] = {}
        self._paths: tuple[dict[int, int], dict[int, int]] = ({0: 0, 1: 1}, {0: 1, 1: 0})
        # _skip[l][m]: cells of the levels from l up to (not including) m.
        self._skip = [[1] * (self.width + 1) for _ in range(self.width + 1)]
        for low in range(self.width + 1):
            for high in range(low + 1, self.width + 1):
                self._skip[low][high] = self._skip[low][high - 1] * self.sizes[high - 1]
        self._join, self._meet, self._subtract = _operations(self)

    def __len__(self) -> int:
        """Nodes built so far, terminals included."""
        return len(self._level)

    def release(self) -> None:
        """Empty the tables (the nodes are then unusable) without waiting for a collection."""
        pairs: tuple[dict[tuple[int, int], int], ...] = (self._or, self._and, self._minus)
        for memo in pairs:
            memo.clear()
        self._cell_memo.clear()
        for counts, (empty, full) in zip(self._paths, ((0, 1), (1, 0)), strict=True):
            counts.clear()
            counts.update({0: empty, 1: full})  # the terminals' own counts stay
        for unique in self._unique:
            unique.clear()
        self._within.clear()
        self._apart.clear()
        del self._level[2:], self._kids[2:]

    def node(self, level: int, kids: tuple[int, ...]) -> int:
        """The node testing ``level`` with these children (the one child itself if they are all equal)."""
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

    def rules(self, constrained: Sequence[int], admit: Sequence[Sequence[int]], pending: Sequence[int],
              grants: int, exclusions: int) -> int:
        """The node where some box of ``grants`` holds and none of ``exclusions`` does (bit sets over boxes).

        Per level: ``constrained`` the live boxes that test it, ``admit`` per value the live boxes that
        admit it, ``pending`` the boxes tested at it or below. The walk goes top-down over the levels,
        the boxes still live below a node being its state, and builds only the result's nodes.
        """
        width = self.width
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
                return 0
            covering = live & grants & ~rest
            if covering:
                if not e:
                    return 1
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
                        kid = 0
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

        found = walk(0, grants | exclusions)
        for table in memo:  # ``walk`` refers to itself: free its memo without a collection
            table.clear()
        return found

    def join(self, a: int, b: int) -> int:
        """The union of two regions."""
        if 1 in (a, b):
            return 1
        if a in (0, b):
            return b
        if b == 0:
            return a
        if a > b:
            a, b = b, a
        found = self._or.get((a, b))
        if found is not None:
            return found
        return self._join(a, b)

    def meet(self, a: int, b: int) -> int:
        """The intersection of two regions."""
        if 0 in (a, b):
            return 0
        if a in (1, b):
            return b
        if b == 1:
            return a
        if a > b:
            a, b = b, a
        found = self._and.get((a, b))
        if found is not None:
            return found
        return self._meet(a, b)

    def minus(self, a: int, b: int) -> int:
        """The cells of ``a`` not in ``b``."""
        if a == 0 or b in (1, a):
            return 0
        if b == 0:
            return a
        found = self._minus.get((a, b))
        if found is not None:
            return found
        return self._subtract(a, b)

    def _align(self, a: int, b: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        la, lb = self._level[a], self._level[b]
        if la == lb:
            return self._kids[a], self._kids[b]
        if la < lb:
            return self._kids[a], (b,) * self.sizes[la]
        return (a,) * self.sizes[lb], self._kids[b]

    # ----------------------------------------------------------------------------------------------
    # reading

    def cells_below(self, node: int) -> int:
        """Cells of a non-terminal ``node`` over the levels from its own down (memoised)."""
        memo, levels, kids, skip = self._cell_memo, self._level, self._kids, self._skip
        found = memo.get(node)
        if found is not None:
            return found
        row = skip[levels[node] + 1]
        total = 0
        for kid in kids[node]:
            if kid == 1:
                total += row[self.width]
            elif kid != 0:
                total += (memo.get(kid) or self.cells_below(kid)) * row[levels[kid]]
        memo[node] = total
        return total

    def count_paths(self, node: int, negated: bool) -> int:
        """How many paths lead from ``node`` to terminal 1 (``negated``: to terminal 0)."""
        kids = self._kids
        memo = self._paths[negated]

        def paths(n: int) -> int:
            found = memo.get(n)
            if found is None:
                found = memo[n] = sum(paths(k) for k in dict.fromkeys(kids[n]))
            return found

        return paths(node)

    def boxes(self, node: int, limit: int, negated: bool, full: Sequence[int]) -> list[tuple[int, ...]]:
        """The first ``limit`` (-1: all) canonical boxes of ``node`` (``negated``: of its complement).

        Masks in axis order; ``full`` per level the mask of the whole axis.
        """
        out: list[tuple[int, ...]] = []
        inside, outside = (0, 1) if negated else (1, 0)
        if node == outside or limit == 0:
            return out
        axes, levels, kids, width = self.axes, self._level, self._kids, self.width
        masks: list[int] = [*full]  # per level, the mask of the current path

        def emit() -> None:
            flat = [0] * width
            for level, axis in enumerate(axes):
                flat[axis] = masks[level]
            out.append(tuple(flat))

        def walk(n: int) -> bool:
            """Append ``n``'s paths (the current prefix fixed); False once ``limit`` is reached."""
            if n == inside:
                emit()
                return limit < 0 or len(out) < limit
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
        if a == 0 or b in (1, a):
            return True
        if b == 0 or a == 1:
            return False
        key = (a, b)
        if key in self._within:
            return True
        found = self._minus.get(key)
        if found is not None:
            return found == 0
        kids_a, kids_b = self._align(a, b)
        if all(map(self.within, kids_a, kids_b)):
            self._within.add(key)
            return True
        return False

    def intersects(self, a: int, b: int) -> bool:
        """Whether the regions share a cell (stops at the first shared cell; builds nothing)."""
        if 0 in (a, b):
            return False
        if a in (1, b) or b == 1:
            return True
        if a > b:
            a, b = b, a
        key = (a, b)
        if key in self._apart:
            return False
        found = self._and.get(key)
        if found is not None:
            return found != 0
        kids_a, kids_b = self._align(a, b)
        if any(map(self.intersects, kids_a, kids_b)):
            return True
        self._apart.add(key)
        return False


def _operations(store: Core) -> tuple[Callable[[int, int], int], Callable[[int, int], int],
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
