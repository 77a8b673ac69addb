"""Value classes of open int axes: the matrix's own conditions cut the integers into classes.

An int axis lists known values (for docs, grids and examples), but a query may give any int. Two ints
that meet exactly the same conditions of the matrix (every rule, table and role order that names the
axis) are answered alike, so the integers fall into finitely many classes: the cells between the
conditions' breakpoints (listed values, range bounds), each split further by the residues the
``multiple_of`` moduli tell apart. A class that holds a known value is stood for by it; every other
class gets one representative, appended to the axis's values, so that everything that ranges over an
axis's values (compiled rules, the expansion of derived axes, the analyses) covers every int. A query's
int is placed by its signature (:meth:`capmatrix.model.Axis.locate`).
"""

from __future__ import annotations

import itertools
import math

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    class _Bounds(Protocol):  # capmatrix.model.Interval, as far as classes read it
        @property
        def low(self) -> int | None: ...
        @property
        def high(self) -> int | None: ...

    class Condition(Protocol):  # capmatrix.model.Condition, as far as classes read it (below it)
        @property
        def values(self) -> frozenset[int | str | bool]: ...
        @property
        def intervals(self) -> tuple[_Bounds, ...]: ...
        @property
        def moduli(self) -> tuple[int, ...]: ...
        def contains(self, value: int | str | bool) -> bool: ...
        def mask(self, values: Sequence[int | str | bool]) -> int: ...


__all__ = ["LCM_LIMIT", "Bounds", "describe_class", "representatives", "signature", "signatures"]


AxisValue = int | str | bool


def signature(value: int, cuts: Sequence[Condition]) -> int:
    """Which of ``cuts`` an int meets, as a bit set: ints with one signature are answered alike."""
    out = 0
    for i, cut in enumerate(cuts):
        if cut.contains(value):
            out |= 1 << i
    return out

#: Per (cuts, values): the signatures of the values. The expanded rules of one derived axis have
#: equal cuts, and compiling each rule's box asks the signature of every value of the axis: once per
#: cuts instead of once per rule.
#: How many (cuts, values) the memo keeps before it starts again.
SIGNATURES_KEPT = 4096
_SIGNATURES: dict[tuple[tuple[Condition, ...], tuple[AxisValue, ...]], tuple[int | None, ...]] = {}


def signatures(values: Sequence[AxisValue], cuts: Sequence[Condition]) -> tuple[int | None, ...]:
    """:func:`signature` of each int of ``values`` over ``cuts`` (None for a value that is not an int)."""
    key = (tuple(cuts), tuple(values))
    found = _SIGNATURES.get(key)
    if found is None:
        # One mask per cut (bit i: whether the cut admits values[i], as ``contains`` answers), then
        # the bits of each value gathered: one test per cut and value, without a call for each.
        masks = [cut.mask(values) for cut in cuts]
        found = tuple(
            sum((mask >> i & 1) << k for k, mask in enumerate(masks)) if type(v) is int else None
            for i, v in enumerate(values)
        )
        if len(_SIGNATURES) >= SIGNATURES_KEPT:  # a long-lived process that loads many matrices
            _SIGNATURES.clear()
        _SIGNATURES[key] = found
    return found


#: Moduli whose least common multiple exceeds this are sampled only up to it (a residue pattern with a
#: longer period may then go without a representative; its ints are still answered by the conditions).
LCM_LIMIT = 1 << 12
#: How far past the outermost breakpoints :func:`describe_class` looks for a class's members.
_WINDOW = 1 << 12


#: The ints an axis takes at all: (minimum, maximum), None for unbounded.
Bounds = tuple[int | None, int | None]
_UNBOUNDED: Bounds = (None, None)


def _inside(value: int, bounds: Bounds) -> bool:
    low, high = bounds
    return (low is None or value >= low) and (high is None or value <= high)


def _breakpoints(known: Sequence[AxisValue], cuts: Sequence[Condition],
                 bounds: Bounds = _UNBOUNDED) -> list[int]:
    points = {v for v in known if type(v) is int}
    points.update(b for b in bounds if b is not None)  # a class is cut where the axis's ints end
    for cut in cuts:
        points.update(v for v in cut.values if type(v) is int)
        for interval in cut.intervals:
            points.update(b for b in (interval.low, interval.high) if b is not None)
    out: set[int] = set()
    for p in points or (0,):  # moduli alone cut no gap: 0 anchors the residues
        out.update((p - 1, p, p + 1))
    return sorted(out)


def _period(cuts: Sequence[Condition]) -> int:
    period = 1
    for cut in cuts:
        for m in cut.moduli:
            period = min(math.lcm(period, m), LCM_LIMIT)
    return period


def _candidates(known: Sequence[AxisValue], cuts: Sequence[Condition],
                bounds: Bounds = _UNBOUNDED) -> list[int]:
    """Ints that meet every signature the cuts can give, within ``bounds``.

    Each breakpoint and, in every gap between breakpoints (and beyond the outermost ones), one int of
    each residue pattern the moduli tell apart.
    """
    points = _breakpoints(known, cuts, bounds)
    period = _period(cuts)
    # Residues alike for every modulus are alike everywhere in a gap: one of each pattern suffices.
    patterns: dict[tuple[bool, ...], list[int]] = {}
    moduli = sorted({m for cut in cuts for m in cut.moduli})
    for r in range(period):
        patterns.setdefault(tuple(r % m == 0 for m in moduli), []).append(r)
    out = list(points)
    gaps: list[tuple[int | None, int | None]] = [(None, points[0] - 1)]
    gaps += [(a + 1, b - 1) for a, b in itertools.pairwise(points) if b - a > 1]
    gaps.append((points[-1] + 1, None))
    for low, high in gaps:
        for residues in patterns.values():
            if low is None:
                assert high is not None  # noqa: S101 - the first gap is bounded above
                out.append(max(high - (high - r) % period for r in residues))
                continue
            best = min(low + (r - low) % period for r in residues)
            if high is None or best <= high:
                out.append(best)
    return [v for v in out if _inside(v, bounds)]


def representatives(known: Sequence[AxisValue], cuts: Sequence[Condition],
                    bounds: Bounds = _UNBOUNDED) -> tuple[int, ...]:
    """One int for each class of ``cuts`` that holds no known value, ascending (smallest member found).

    Only ints within ``bounds`` (the axis's ``min`` / ``max``) stand for a class: a class wholly
    outside them has no representative.
    """
    if not cuts:
        return ()
    seen = {signature(v, cuts) for v in known if type(v) is int}
    out = []
    # The representatives the unbounded axis would have, where they lie inside the bounds; then, for a
    # class whose one lay outside, its first member inside (a bound is a breakpoint of its own).
    plain = sorted({v for v in _candidates(known, cuts) if _inside(v, bounds)})
    extra = sorted(set(_candidates(known, cuts, bounds)) - set(plain)) if bounds != _UNBOUNDED else []
    for value in (*plain, *extra):
        sig = signature(value, cuts)
        if sig not in seen:
            seen.add(sig)
            out.append(value)
    return tuple(sorted(out))


def describe_class(value: int, cuts: Sequence[Condition], known: Sequence[AxisValue],
                   bounds: Bounds = _UNBOUNDED) -> str:
    """The class a representative stands for, as text.

    ``[257, 319]``, ``>=577``, ``[257, 511], not a multiple of 8``; ``like V`` when it is scattered
    wider than that.

    Built from the breakpoints and the gaps between them: every int of a gap meets the same range and
    list conditions, so a gap is wholly in the class, not at all, or by the residues of one modulus.
    """
    points = _breakpoints(known, cuts, bounds)
    period = _period(cuts)
    moduli = sorted({m for cut in cuts for m in cut.moduli})
    mine = signature(value, cuts)
    pieces: list[tuple[int | None, int | None, str]] = []  # (low, high, residue text); None: unbounded
    spans: list[tuple[int | None, int | None]] = [(None, points[0] - 1)]
    for a, b in itertools.pairwise(points):
        spans.append((a, a))
        if b - a > 1:
            spans.append((a + 1, b - 1))
    spans += [(points[-1], points[-1]), (points[-1] + 1, None)]
    below, above = bounds  # the bounds are breakpoints: a span is wholly inside them or wholly out
    spans = [(low, high) for low, high in spans
             if not (below is not None and high is not None and high < below)
             and not (above is not None and low is not None and low > above)]
    for low, high in spans:
        if low is not None and high is not None and high - low < period:
            members = [v for v in range(low, high + 1) if signature(v, cuts) == mine]
            if len(members) == high - low + 1:
                _add(pieces, low, high, "")
            else:
                for v in members:
                    _add(pieces, v, v, "")
            continue
        start = low if low is not None else (high or 0) - period + 1
        hits = {v % period for v in range(start, start + period) if signature(v, cuts) == mine}
        if len(hits) == period:
            _add(pieces, low, high, "")
        elif hits:
            text = _residues(hits, period, moduli)
            if text is None:
                return f"like {value}"
            _add(pieces, low, high, text)
    if len(pieces) > 3:
        return f"like {value}"
    return " or ".join(_piece_text(*piece) for piece in pieces)


def _add(pieces: list[tuple[int | None, int | None, str]], low: int | None, high: int | None,
         text: str) -> None:
    """Append a piece, merged with the previous one when it continues it with the same residues."""
    if pieces and not text and not pieces[-1][2]:
        last = pieces[-1][1]
        if last is not None and low is not None and last == low - 1:
            pieces[-1] = (pieces[-1][0], high, "")
            return
    pieces.append((low, high, text))


def _residues(hits: set[int], period: int, moduli: list[int]) -> str | None:
    """``a multiple of m`` / ``not a multiple of m`` when that is exactly the residues ``hits``."""
    for m in moduli:
        multiples = {r for r in range(period) if r % m == 0}
        if hits == multiples:
            return f"a multiple of {m}"
        if hits == set(range(period)) - multiples:
            return f"not a multiple of {m}"
    return None


def _piece_text(low: int | None, high: int | None, residues: str) -> str:
    if low is None and high is None:
        text = "any"
    elif low is None:
        text = f"<={high}"
    elif high is None:
        text = f">={low}"
    elif low == high:
        text = str(low)
    else:
        text = f"[{low}, {high}]"
    return f"{text}, {residues}" if residues else text
