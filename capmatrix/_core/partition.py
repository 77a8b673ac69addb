"""Label every cell of a box by which of a set of boxes contain it, without visiting cells.

The analyses ask questions such as "where is this kernel supported", "where does no candidate of a role
apply" or "where do two matrices pick different kernels". Each answer is a function of *which rule boxes
contain a cell*. :func:`partition` computes, for every label such a function takes, the exact region
where it takes it, as disjoint boxes.

It splits the universe one axis at a time, like a decision tree. At a node it picks the open axis on
which most undecided live boxes (those containing the node's sub-box prefix but not all of it) are
constrained, groups that axis's values into classes the live boxes cannot tell apart, and recurses once
per class, so the work grows with the number of distinct situations the rules create, not with the
number of cells. What keeps it small:

- a branch stops as soon as every live box covers the rest of the sub-box (the label is then constant),
  and the caller's ``relevant`` hook drops boxes that can no longer change the answer;
- results are memoised per (open axes, live set), so equal sub-problems are solved once;
- sibling results with equal tails are merged on the way up (merge as you go), and an axis whose
  classes all merge back is not even recorded, so the output does not fragment into one box per
  class combination.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from capmatrix.errors import CapmatrixError
from capmatrix.regions import bits

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from typing import TypeVar

    from capmatrix.regions import Box, Space

    L = TypeVar("L", bound=Hashable)  # for the type checker alone: annotations are not evaluated

__all__ = [
    "TABLE_SAMPLE_MIN",
    "PartitionLimit",
    "Work",
    "WorkLimit",
    "find",
    "measure",
    "mostly_disjoint",
    "partition",
    "reduce_kernel",
    "uncovered",
]

#: A node's result: interned entries (a label and the (axis, mask) pairs the node's subtree narrowed).
_Tails = tuple[int, ...]

#: With a ``limit``, :func:`partition` also gives up when all labels together pass this many times it.
TOTAL_FACTOR = 8


class PartitionLimit(CapmatrixError):
    """:func:`partition` gave up: the answer needs more than ``limit`` boxes.

    That is, the watched label needs more than ``limit`` boxes (or the whole answer more than
    ``TOTAL_FACTOR`` times that). The caller reports a truncated answer (:func:`find`).
    """

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


class WorkLimit(CapmatrixError):
    """A :class:`Work` budget ran out: the walk stopped before its answer."""


class Work:
    """A budget of steps (nodes of a walk) shared by several walks; spending past it raises WorkLimit.

    Counted in steps, never in time, so that a bounded answer is the same on every machine.
    """

    __slots__ = ("left", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def spend(self, steps: int = 1) -> None:
        """Take ``steps`` from the budget; raise :class:`WorkLimit` once it is spent."""
        self.left -= steps
        if self.left < 0:
            raise WorkLimit(f"work budget of {self.limit:,} steps spent")


def partition(
    space: Space,
    boxes: Sequence[Box],
    label: Callable[[int], L],
    *,
    root: Box | None = None,
    relevant: Callable[[int, int], int] | None = None,
    local: bool | None = None,
    limit: int | None = None,
    watch: Hashable = None,
    work: Work | None = None,
) -> dict[L, list[Box]]:
    """Map each label to the disjoint boxes of ``root`` (default: the universe) where it holds.

    ``label`` receives the set of boxes containing a cell, as a bit set over positions in ``boxes``,
    and returns a hashable label; it is called once per distinct situation, not once per cell. The
    regions of all labels are pairwise disjoint and together cover ``root`` exactly.

    ``relevant(live, covering)`` may drop boxes that cannot change the label below the current
    prefix (``covering``: the live boxes that contain the whole rest of the sub-box); it must return a
    subset of ``live`` on which ``label`` answers the same for every cell below. It prunes the
    recursion and makes equal sub-problems meet in the memo.

    ``local`` picks the split axis per node (good for decision-table-shaped, mostly disjoint rules)
    instead of one global order (good for overlapping rules); None decides from ``boxes`` with
    :func:`mostly_disjoint`.

    ``limit`` bounds time and memory: the boxes of label ``watch`` (of every label when ``watch`` is
    None) never pass ``limit`` at any node (a node's count never exceeds its parent's, so this bounds
    the answer), nor all labels ``TOTAL_FACTOR`` times that, else :class:`PartitionLimit` is raised.
    ``work`` (optional) is spent one step per node; :class:`WorkLimit` when it runs out.
    """
    width = len(space.axes)
    top = space.full_box() if root is None else root
    if 0 in top:
        return {}
    clipped, live0, rows, whole = _index(boxes, top)
    # Axis choice. Overlapping rule sets split best in one global order (most-constrained axis
    # first): sibling results then have equal tails and merge. Decision-table-shaped rule sets (boxes
    # mostly disjoint) split best like the table itself: each node takes the axis most of its
    # undecided boxes constrain.
    partial = [~w for w in whole]  # per axis, the boxes that constrain it
    counts = [(live0 & partial[a]).bit_count() for a in range(width)]
    priority = sorted(range(width), key=lambda a: -counts[a])
    per_node = mostly_disjoint(clipped) if local is None else local
    memo: dict[tuple[int, int], _Tails] = {}
    open_info: dict[int, tuple[list[int], int]] = {}
    # A node's result lists its entries: a label with the (axis, mask) pairs its subtree narrowed
    # (axes not in it take the root's values). Entries are interned as ints, so merging siblings
    # hashes ints only: entry n stands for decode[n], either (-1, label id, 0) for a bare label or
    # (axis, mask, entry id) for one more narrowed axis on top of an entry.
    label_ids: dict[Hashable, int] = {}
    label_list: list[Hashable] = []
    leaf_of: dict[int, int] = {}  # live set -> entry of its label
    decode: list[tuple[int, int, int]] = []
    watched: list[bool] = []  # per entry: whether its label is the watched one
    total_cap = None if limit is None else limit * TOTAL_FACTOR
    shift_axis = max(width, 1).bit_length()
    shift_mask = shift_axis + max((m.bit_length() for m in top), default=0)
    intern: dict[int, int] = {}  # (entry << shift_mask | mask << shift_axis | axis) -> entry

    def info(open_axes: int) -> tuple[list[int], int]:
        axes = [a for a in priority if open_axes >> a & 1]
        all_whole = -1
        for a in axes:
            all_whole &= whole[a]
        found = open_info[open_axes] = (axes, all_whole)
        return found

    def leaf(live: int) -> int:
        found = label(live)
        lab_id = label_ids.get(found)
        if lab_id is None:
            lab_id = label_ids[found] = len(label_list)
            label_list.append(found)
            at = len(decode)
            decode.append((-1, lab_id, 0))
            watched.append(watch is None or found == watch)
            intern[~lab_id] = at
        entry = leaf_of[live] = intern[~lab_id]
        return entry

    # The result for a node as reached (before ``relevant``): ``relevant`` sees only the live set
    # and its covering part, both fixed by (open axes, live), so a repeat skips it.
    reached: dict[tuple[int, int], _Tails] = {}
    reached_get = reached.get

    def node(open_axes: int, live: int) -> _Tails:
        # Callers look ``reached`` up first: this runs for new (open axes, live) pairs only.
        if work is not None:
            work.spend()
        raw = (open_axes, live)
        axes, all_whole = open_info.get(open_axes) or info(open_axes)
        cover = live & all_whole
        if relevant is not None:
            live = relevant(live, cover)
            cover &= live
        key = (open_axes, live)
        cached = memo.get(key)
        if cached is not None:
            reached[raw] = cached
            return cached
        undecided = live & ~cover
        if not undecided:
            found = leaf_of.get(live)
            result: _Tails = (leaf(live) if found is None else found,)
        else:
            split = -1
            if per_node:
                best = -1
                for a in axes:
                    count = (undecided & partial[a]).bit_count()
                    if count > best:
                        best, split = count, a
            else:
                for a in axes:
                    if undecided & partial[a]:
                        split = a
                        break
            classes: dict[int, int] = {}
            for flag, admitting in rows[split]:
                sig = live & admitting
                classes[sig] = classes.get(sig, 0) | flag
            rest = open_axes & ~(1 << split)
            # Classes whose children answer with the same (memoised) result are OR-ed first; the
            # entries still come out in the order of their first class.
            child_of: dict[int, _Tails] = {}
            mask_of: dict[int, int] = {}
            for sig, mask in classes.items():
                child = reached_get((rest, sig)) or node(rest, sig)
                ident = id(child)
                if ident in mask_of:
                    mask_of[ident] |= mask
                else:
                    child_of[ident] = child
                    mask_of[ident] = mask
            merged: dict[int, int] = {}
            get = merged.get
            for ident, child in child_of.items():
                mask = mask_of[ident]
                for entry in child:
                    merged[entry] = get(entry, 0) | mask
            full_mask = top[split]
            out_entries: list[int] = []
            add = out_entries.append
            interned = intern.get
            for entry, mask in merged.items():
                if mask == full_mask:
                    add(entry)
                    continue
                code = entry << shift_mask | mask << shift_axis | split
                at = interned(code)
                if at is None:
                    at = intern[code] = len(decode)
                    decode.append((split, mask, entry))
                    watched.append(watched[entry])
                add(at)
            result = tuple(out_entries)
            if limit is not None and total_cap is not None and (
                len(result) > total_cap or sum(watched[e] for e in result) > limit
            ):
                raise PartitionLimit(limit)
        memo[key] = reached[raw] = result
        return result

    out: dict[L, list[Box]] = {}
    for entry in node((1 << width) - 1, live0):
        flat = list(top)
        axis, mask, at = decode[entry]
        while axis >= 0:
            flat[axis] = mask
            axis, mask, at = decode[at]
        out.setdefault(label_list[mask], []).append(tuple(flat))  # type: ignore[arg-type]
    return out


#: Fewer boxes than this are never called decision-table-shaped (too few to sample).
TABLE_SAMPLE_MIN = 16


def mostly_disjoint(boxes: Sequence[Box]) -> bool:
    """Whether a deterministic sample of box pairs shows mostly disjoint boxes (a decision table)."""
    members = [i for i, box in enumerate(boxes) if 0 not in box]
    n = len(members)
    if n < TABLE_SAMPLE_MIN:
        return False
    pairs = hits = 0
    for k in range(min(n, 256)):
        i, j = members[k * 7 % n], members[(k * 13 + n // 2 + 1) % n]
        if i == j:
            continue
        pairs += 1
        hits += all(x & y for x, y in zip(boxes[i], boxes[j], strict=True))
    return hits * 4 < pairs


def _index(
    boxes: Sequence[Box], top: Box
) -> tuple[list[Box], int, list[list[tuple[int, int]]], list[int]]:
    """Clip ``boxes`` to ``top`` and index them for the axis-by-axis split.

    Returns the clipped boxes, the bitset of those left non-empty, per axis the pairs (value bit,
    boxes admitting it) over ``top``'s values, and per axis the boxes whole on it.
    """
    clipped = [tuple(m & r for m, r in zip(box, top, strict=True)) for box in boxes]
    live0 = 0
    for i, box in enumerate(clipped):
        if 0 not in box:
            live0 |= 1 << i
    members = bits(live0)
    rows: list[list[tuple[int, int]]] = []
    whole: list[int] = []
    for a in range(len(top)):
        admitting: dict[int, int] = {}
        full = 0
        for i in members:
            mask = clipped[i][a]
            if mask == top[a]:
                full |= 1 << i
            for v in bits(mask):
                admitting[v] = admitting.get(v, 0) | 1 << i
        rows.append([(1 << v, admitting.get(v, 0)) for v in bits(top[a])])
        whole.append(full)
    return clipped, live0, rows, whole


def uncovered(space: Space, root: Box, boxes: Sequence[Box]) -> Box | None:
    """A sub-box of ``root`` that none of ``boxes`` touches, or None when they cover ``root``.

    The same axis-by-axis split as :func:`partition`, stopping at the first uncovered sub-box.
    """
    width = len(space.axes)
    if 0 in root:
        return None
    _clipped, live0, rows, whole = _index(boxes, root)
    covered: set[tuple[int, int]] = set()

    def walk(open_axes: int, live: int) -> list[tuple[int, int]] | None:
        if not live:
            return []
        axes = [a for a in range(width) if open_axes >> a & 1]
        cover = live
        for a in axes:
            cover &= whole[a]
        if cover or (open_axes, live) in covered:
            return None
        best, split = -1, 0
        for a in axes:
            count = (live & ~whole[a]).bit_count()
            if count > best:
                best, split = count, a
        classes: dict[int, int] = {}
        for flag, admitting in rows[split]:
            sig = live & admitting
            classes[sig] = classes.get(sig, 0) | flag
        rest = open_axes & ~(1 << split)
        for sig, mask in sorted(classes.items(), key=lambda kv: kv[0].bit_count()):
            found = walk(rest, sig)
            if found is not None:
                return [(split, mask), *found]
        covered.add((open_axes, live))
        return None

    path = walk((1 << width) - 1, live0)
    if path is None:
        return None
    out = list(root)
    for axis, mask in path:
        out[axis] = mask
    return tuple(out)


def _priority(width: int, live0: int, whole: list[int]) -> list[int]:
    return sorted(range(width), key=lambda a: -(live0 & ~whole[a]).bit_count())


def measure(
    space: Space,
    boxes: Sequence[Box],
    label: Callable[[int], L],
    *,
    root: Box | None = None,
    relevant: Callable[[int, int], int] | None = None,
) -> dict[L, int]:
    """How many cells of ``root`` (default: the universe) each label of :func:`partition` holds.

    The same split as :func:`partition`, memoised per (open axes, live set), without building boxes:
    exact sizes (shares of the universe) even where the boxes themselves are too many to list.
    """
    width = len(space.axes)
    top = space.full_box() if root is None else root
    if 0 in top:
        return {}
    _clipped, live0, rows, whole = _index(boxes, top)
    priority = _priority(width, live0, whole)
    sizes = [m.bit_count() for m in top]
    memo: dict[tuple[int, int], dict[L, int]] = {}

    def node(open_axes: int, live: int) -> dict[L, int]:
        axes = [a for a in priority if open_axes >> a & 1]
        cover = live
        for a in axes:
            cover &= whole[a]
        if relevant is not None:
            live = relevant(live, cover)
            cover &= live
        key = (open_axes, live)
        found = memo.get(key)
        if found is not None:
            return found
        undecided = live & ~cover
        split = next((a for a in axes if undecided & ~whole[a]), -1)
        out: dict[L, int] = {}
        if split < 0:
            count = 1
            for a in axes:
                count *= sizes[a]
            out[label(live)] = count
        else:
            classes: dict[int, int] = {}
            for flag, admitting in rows[split]:
                sig = live & admitting
                classes[sig] = classes.get(sig, 0) | flag
            rest = open_axes & ~(1 << split)
            for sig, mask in classes.items():
                times = mask.bit_count()
                for lab, count in node(rest, sig).items():
                    out[lab] = out.get(lab, 0) + count * times
        memo[key] = out
        return out

    return node((1 << width) - 1, live0)


def find(
    space: Space,
    boxes: Sequence[Box],
    label: Callable[[int], L],
    *,
    want: L,
    limit: int,
    root: Box | None = None,
    relevant: Callable[[int, int], int] | None = None,
    work: Work | None = None,
) -> tuple[list[Box], bool]:
    """Up to ``limit`` disjoint boxes of ``root`` where ``label`` is ``want``, in a fixed order.

    A depth-first walk of :func:`partition`'s split that stops after ``limit`` boxes and skips
    sub-problems known to hold no ``want`` cell: the bounded way to show part of an answer too large
    to list. Returns the boxes (not merged) and whether they are all of them.
    """
    width = len(space.axes)
    top = space.full_box() if root is None else root
    if 0 in top or limit <= 0:
        return [], limit > 0 or 0 in top
    _clipped, live0, rows, whole = _index(boxes, top)
    priority = _priority(width, live0, whole)
    barren: set[tuple[int, int]] = set()  # sub-problems with no ``want`` cell
    out: list[Box] = []
    path: list[tuple[int, int]] = []

    def walk(open_axes: int, live: int) -> bool:
        """Collect ``want`` boxes below; False once past ``limit`` (one more proves there are more)."""
        if work is not None:
            work.spend()
        axes = [a for a in priority if open_axes >> a & 1]
        cover = live
        for a in axes:
            cover &= whole[a]
        if relevant is not None:
            live = relevant(live, cover)
            cover &= live
        key = (open_axes, live)
        if key in barren:
            return True
        undecided = live & ~cover
        split = next((a for a in axes if undecided & ~whole[a]), -1)
        before = len(out)
        if split < 0:
            if label(live) == want:
                flat = list(top)
                for axis, mask in path:
                    flat[axis] = mask
                out.append(tuple(flat))
        else:
            classes: dict[int, int] = {}
            for flag, admitting in rows[split]:
                sig = live & admitting
                classes[sig] = classes.get(sig, 0) | flag
            rest = open_axes & ~(1 << split)
            for sig, mask in classes.items():
                path.append((split, mask))
                going = walk(rest, sig)
                path.pop()
                if not going:
                    return False
        if len(out) == before:
            barren.add(key)
        return len(out) <= limit

    walk((1 << width) - 1, live0)
    return out[:limit], len(out) <= limit


def reduce_kernel(live: int, covering: int, grants: int, exclusions: int) -> tuple[int, bool]:
    """The boxes of one kernel that still matter below a prefix, and whether it is surely supported.

    A covering exclusion decides "unsupported" (it alone is kept, so the answer stays "unsupported"
    whatever other boxes a caller keeps); no live grant decides it too; a covering grant makes the
    other grants irrelevant, and with no live exclusion decides "supported".
    """
    if not live & grants:
        return 0, False
    covering_excl = covering & exclusions
    if covering_excl:
        return covering_excl & -covering_excl, False
    live_excl = live & exclusions
    covering_grants = covering & grants
    if covering_grants:
        return (covering_grants & -covering_grants) | live_excl, not live_excl
    return live & (grants | exclusions), False
