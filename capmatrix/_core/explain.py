"""Explanations of resolved queries: the reasons a verdict lists, built only when they are read.

A :class:`capmatrix.resolver.Resolver` answers a query with bit sets; the :class:`Reason` objects that
say why (the grants that apply, the exclusions that hit, the closest grants that miss and on which
axis, the residual, the values that came from a model or a default) are made here, from those bit sets
and the compiled kernel, the first time :attr:`Resolution.reasons` is read.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import compress

from capmatrix._core.answers import OriginKind, Reason, ReasonKind, Verdict
from capmatrix.model import format_value
from capmatrix.regions import bits

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from capmatrix._core.answers import Origin
    from capmatrix._core.bitsets import _CompiledKernel
    from capmatrix.model import Axis, AxisValue, Rule
    from capmatrix.regions import Region

__all__ = ["MAX_RESIDUAL_BOXES", "Explainer"]

#: The most boxes a residual lists; past it the residual holds the first ones and says so.
MAX_RESIDUAL_BOXES = 256
#: Explanations of missed grants kept per kernel before they are cleared (bounds memory under hostile
#: input, as the resolver's caches of answers are).
CACHE_LIMIT = 1 << 16

#: The binary text of a bit set as selector bytes for ``itertools.compress``: "0" -> 0, "1" -> 1.
_SELECTOR = bytes.maketrans(b"01", b"\x00\x01")


class Explainer:
    """The reasons of one compiled matrix's answers (its axes, their positions and value indexes)."""

    __slots__ = ("axes", "positions", "value_index")

    def __init__(
        self, axes: tuple[Axis, ...], positions: dict[str, int],
        value_index: tuple[dict[tuple[type, AxisValue], int], ...],
    ) -> None:
        self.axes = axes
        self.positions = positions
        self.value_index = value_index

    def class_value(self, name: str, value: AxisValue) -> AxisValue:
        """The value that stands for ``value``'s class on axis ``name`` (``value`` itself if none)."""
        axis = self.axes[self.positions[name]]
        found = axis.locate(value)
        return value if found is None else axis.values[found]

    def rule_reason(self, rule: Rule, kind: ReasonKind, verb: str, label: tuple[str, str]) -> Reason:
        return Reason(
            kind=kind,
            message=f"{label[0]} {verb}: {rule.reason}",
            rule_id=rule.id,
            path=rule.location.path,
            line=rule.location.line,
            detail=rule.reason,
            source=rule.source,
            status=label[1],
        )

    def reasons(
        self,
        compiled: _CompiledKernel,
        verdict: Verdict,
        values: dict[str, AxisValue],
        origins: dict[str, Origin],
        outside: list[str],
        grants: int,
        exclusions: int,
        admits: dict[int, int],
        residual: Region | None,
        truncated: bool,
        closest: int,
    ) -> tuple[Reason, ...]:
        """The explanation (bound with ``partial`` to all but ``closest`` when the query is resolved)."""
        reasons: list[Reason] = []
        cache = compiled.reason_cache
        # The closest grants: those that apply (they miss no axis), then the near misses. When the
        # verdict is "unsupported", the exclusions that decided it come first.
        applying = bits(grants, closest)
        granted: list[Reason] = []
        for b in applying:
            found = cache.get(b)
            if found is None:
                found = cache[b] = self.rule_reason(
                    compiled.rules[b], ReasonKind.GRANT, "grants", compiled.labels[b]
                )
            granted.append(found)
        if verdict is not Verdict.UNSUPPORTED:
            reasons.extend(granted)
        if verdict is Verdict.UNSUPPORTED and not grants:
            # No grant applies: the query is unsupported by default. An exclusion still says why where it
            # holds whatever the open axes are; one that only meets them somewhere would mislead.
            exclusions = sum(1 << b for b in bits(exclusions)
                             if all(axis in values for axis in compiled.rules[b].conditions))
        if verdict is not Verdict.SUPPORTED and exclusions:
            reasons.extend(self.hit_exclusions(compiled, values, admits, exclusions))
        if verdict is Verdict.UNSUPPORTED:
            reasons.extend(granted)
        listed = len(applying)
        if verdict is Verdict.UNSUPPORTED and listed < closest:
            near, shown = self.near_misses(compiled, values, admits, grants, closest - listed)
            reasons.extend(near)
            listed += shown
        rest = compiled.grants.bit_count() - listed if verdict is Verdict.UNSUPPORTED else (
            grants.bit_count() - listed
        )
        if rest > 0:
            what = "other grants of the kernel" if verdict is Verdict.UNSUPPORTED else "other grants apply"
            reasons.append(Reason(
                kind=ReasonKind.MORE,
                message=f"... and {rest:,} {what} (not listed; the {closest} closest are)",
            ))
        if residual is not None:
            more = (
                f" (more than {MAX_RESIDUAL_BOXES:,} regions, first {len(residual.boxes):,} shown)"
                if truncated else ""
            )
            reasons.append(
                Reason(kind=ReasonKind.RESIDUAL, message=f"supported when {residual}{more}")
            )
        reasons.extend(
            Reason(
                kind=ReasonKind.OUTSIDE,
                axis=name,
                actual=values[name],
                message=(
                    f"{name}={format_value(values[name])} is not a listed value of {name}; answered "
                    f"by the rules' conditions, like every value of its class "
                    f"({self.axes[self.positions[name]].describe(self.class_value(name, values[name]))})"
                ),
            )
            for name in outside
        )
        # Where a value came from matters only on the axes this kernel's rules read: an engine's
        # other axes (another engine's flags, say) decided nothing here.
        read = {name for _ai, name, _row in compiled.scan}
        for name, origin in origins.items():
            if origin.kind is OriginKind.QUERY or name not in read:
                continue
            if origin.kind is OriginKind.MODEL:
                kind, where = ReasonKind.MODEL, f"model {origin.model}"
            else:
                kind, where = ReasonKind.DEFAULT, "the axis default"
            reasons.append(
                Reason(kind=kind, axis=name, actual=values[name],
                       message=f"{name}={format_value(values[name])} from {where}")
            )
        return tuple(reasons)

    def hit_exclusions(
        self, compiled: _CompiledKernel, values: dict[str, AxisValue], admits: dict[int, int], exclusions: int
    ) -> list[Reason]:
        """The Reason of every exclusion in ``exclusions`` (those that hit), in rule order.

        Every hit is listed, on a dense layout hundreds: they are picked out of the kernel's exclusions
        by ``compress`` over one selector byte per exclusion, in C, rather than one by one.
        """
        table = compiled.exclusion_reasons
        if not table:  # two threads may both build it; the lists are equal
            table[:] = [
                self.rule_reason(compiled.rules[b], ReasonKind.EXCLUDE, "excludes", compiled.labels[b])
                for b in compiled.exclusion_bits
            ]
        hits = (1 << len(table)) - 1
        for ai in admits:  # the same axes that narrowed ``exclusions``, over the compact index
            value = values[self.axes[ai].name]
            vi = self.value_index[ai].get((type(value), value))
            if vi is None:  # outside the universe: the hits are the bits of ``exclusions``
                ordinals = compiled.exclusion_bits
                return [table[bisect_left(ordinals, b)] for b in bits(exclusions)]
            hits &= compiled.exclusion_by_value[ai][vi]
        selector = format(hits, f"0{len(table)}b").encode().translate(_SELECTOR)[::-1]
        return list(compress(table, selector))

    def mismatch(self, compiled: _CompiledKernel, bit: int, ai: int, values: dict[str, AxisValue],
                  shown: dict[int, str]) -> Reason:
        """Why grant ``bit`` does not apply: the query's value on axis ``ai`` is outside its condition."""
        rule = compiled.rules[bit]
        label, status = compiled.labels[bit]
        name = self.axes[ai].name
        required = rule.conditions[name].text
        actual = values[name]
        got = shown.get(ai)
        if got is None:
            got = shown[ai] = format_value(actual)
        return Reason(
            kind=ReasonKind.MISMATCH,
            message=f"{label} needs {name} {required}, got {got}",
            rule_id=rule.id,
            path=rule.location.path,
            line=rule.location.line,
            axis=name,
            required=required,
            actual=actual,
            detail=rule.reason,
            source=rule.source,
            status=status,
        )

    def near_misses(
        self,
        compiled: _CompiledKernel,
        values: dict[str, AxisValue],
        admits: dict[int, int],
        matched: int,
        limit: int,
    ) -> tuple[list[Reason], int]:
        """Explain up to ``limit`` grants that do not apply, closest first (fewest failing axes).

        Returns the reasons and how many grants they explain.
        """
        # Bitsets stay non-negative (x ^ (x & y) rather than x & ~y): CPython's big-integer AND of a
        # negative operand is several times slower.
        missing = compiled.grants ^ (compiled.grants & matched)
        if not missing or limit <= 0:
            return [], 0
        # Bit-sliced counters: counters[k] holds bit k of each grant's number of failing axes.
        counters: list[int] = []
        for admit in admits.values():
            carry = missing ^ (missing & admit)
            k = 0
            while carry:
                if k == len(counters):
                    counters.append(0)
                new = counters[k] ^ carry
                carry &= counters[k]
                counters[k] = new
                k += 1
        chosen: list[int] = []
        for failures in range(1, 1 << len(counters)):
            level = missing
            for k, counter in enumerate(counters):
                level = level & counter if failures >> k & 1 else level ^ (level & counter)
            chosen.extend(bits(level, limit - len(chosen)))
            if len(chosen) >= limit:
                break
        reasons: list[Reason] = []
        shown: dict[int, str] = {}  # per axis position: the query's value as the messages print it
        chosen = chosen[:limit]
        # Whether a rule admits the query's value is read from the rule's box (a small mask per axis),
        # not by shifting the wide per-axis bitsets; a value outside the universe has no bit there.
        value_bits = {ai: self.value_index[ai].get((type(values[self.axes[ai].name]),
                                                     values[self.axes[ai].name])) for ai in admits}
        cache = compiled.mismatch_cache
        for bit in chosen:
            box = compiled.boxes[bit]
            for ai, admit in admits.items():
                vi = value_bits[ai]
                if vi is None:  # outside the universe: asked of the rule's condition, never cached
                    if not admit >> bit & 1:
                        reasons.append(self.mismatch(compiled, bit, ai, values, shown))
                    continue
                if box[ai] >> vi & 1:
                    continue
                key = (bit, ai, vi)
                found = cache.get(key)
                if found is None:
                    found = self.mismatch(compiled, bit, ai, values, shown)
                    if len(cache) >= CACHE_LIMIT:
                        cache.clear()
                    cache[key] = found
                reasons.append(found)
        return reasons, len(chosen)
