"""Gates against the kernels they guard: over-restrictive, over-permissive, refused at engine start.

A gate (``kind: gate``) with ``guards`` names the kernels or roles it sends queries to. Its *scope* is
where it sends them: the guard's ``when``, a union of boxes (everywhere without one). The guarded query
of a cell is the cell with the guard's ``axes`` pinned (a role adds its own ``axes`` beneath them);
where the gate refuses, the targets get the cell with ``refused`` pinned instead, when the guard says
so. Then, as regions over the matrix's space (never cell by cell):

- over-restrictive (C111): scope, minus where the gate admits, within where some target serves the
  guarded query;
- over-permissive (C112): scope, within where the gate admits, minus where any target serves the guarded
  query; with ``refused``, only where some target serves the refused form (a query the targets would
  have run, which the gate's admission makes fail);
- refused at engine start (C113): the part of C112's region where a gate the guard names in
  ``caught_by`` refuses the same query: the engine admits, then stops cleanly at start with its own
  text (vLLM's ``TritonAttentionImpl.__init__`` below SM89 with an FP8 cache), and no kernel call fails.

Results are data (:class:`GateReport`); ``_check`` turns them into findings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from capmatrix.authoring.analysis._boxes import KernelBoxes, supported_region, witness_of
from capmatrix.model import CORE, Effect, ValueOf
from capmatrix.regions import Region, intersect

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue, Condition, Kernel, ModelFamily, Role, Rule
    from capmatrix.regions import Box, Space

__all__ = ["GateReport", "gate_reports", "pinned"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GateReport:
    """One gate-versus-kernel disagreement: its code, the gate, where (merged), the rules, a witness."""

    code: str
    gate: Kernel
    region: Region
    #: The gate's rules that decide the region: its exclusions (C111) or its grants (C112, C113).
    rules: tuple[Rule, ...]
    #: A cell to show: a model family's values where some region holds them, else the first region's.
    witness: Mapping[str, AxisValue]
    #: The index (in ``region.boxes``) of the box the witness lies in.
    at: int
    #: The model family whose values the witness takes, if any.
    model: str | None
    #: The targets that serve the witness's guarded query (C111) or its refused form (C112).
    serving: tuple[str, ...]
    #: C113: the exclusions of the ``caught_by`` gates that refuse in the region.
    caught: tuple[Rule, ...] = ()


def gate_reports(
    matrix: Matrix, role_served: Callable[[Role], Region]
) -> Iterator[GateReport]:
    """C111, C112 and C113 for every gate of ``matrix`` that declares ``guards``, gate by gate.

    ``role_served(role)`` is where a role selects some candidate (over the matrix's space).
    """
    space = matrix.space
    served: dict[str, Region] = {}

    def target_region(name: str) -> Region:
        found = served.get(name)
        if found is None:
            kernel = matrix.kernels.get(name)
            found = (supported_region(space, KernelBoxes.of(kernel, space)) if kernel is not None
                     else role_served(matrix.roles[name]))
            served[name] = found
        return found

    for gate in matrix.kernels.values():
        guard = gate.guards
        if guard is None:
            continue
        compiled = KernelBoxes.of(gate, space)
        admitted = supported_region(space, compiled)
        within = [_box(space, box) for box in guard.when] or [space.full_box()]
        scope = Region(space, within)
        on = {t: _pull(target_region(t), pinned(matrix, t, guard.axes), guard.means) for t in guard.targets}
        serves_on = _union(space, on.values())
        refused = scope - admitted
        yield from _report(matrix, "C111", gate, compiled, refused & serves_on, on, within)
        over = (scope & admitted) - serves_on
        if guard.refused is not None:
            off = {t: _pull(target_region(t), pinned(matrix, t, guard.refused), guard.means)
                   for t in guard.targets}
            over &= _union(space, off.values())
        else:
            off = {}
        if guard.caught_by:
            checks = [KernelBoxes.of(matrix.kernels[name], space) for name in guard.caught_by]
            stopped = _union(space, (Region(space, [space.full_box()]) - supported_region(space, c)
                                     for c in checks))
            yield from _report(matrix, "C113", gate, compiled, over & stopped, off, within, checks)
            over -= stopped
        yield from _report(matrix, "C112", gate, compiled, over, off, within)


def pinned(matrix: Matrix, target: str, values: Mapping[str, AxisValue]) -> dict[str, AxisValue]:
    """The values a guarded query of ``target`` gets: a role's own ``axes``, then the guard's."""
    role = matrix.roles.get(target) if target not in matrix.kernels else None
    return {**(role.axes if role is not None else {}), **values}


def _box(space: Space, conditions: Mapping[str, Condition]) -> Box:
    return tuple(
        axis.full_mask if (cond := conditions.get(axis.name)) is None else cond.mask(axis.values)
        for axis in space.axes
    )


def _union(space: Space, regions: Iterable[Region]) -> Region:
    out = Region(space)
    for region in regions:
        out = out | region
    return out


def _pull(
    region: Region, values: Mapping[str, AxisValue],
    means: Mapping[str, Mapping[AxisValue, AxisValue | ValueOf]] | None = None,
) -> Region:
    """The cells whose guarded query (``means`` read, then ``values`` pinned) lies in ``region``.

    Box by box: a pinned axis's value must lie in the box, and the cell's own value is free; a meant
    axis splits the cell's words into those that keep or name a value (one part) and those that read
    another axis (a part per axis read, which narrows that axis to the values the box holds). A cell
    has one guarded query, so the preimages of disjoint boxes stay disjoint, and so do the parts.
    """
    space = region.space
    if not values and not means:
        return region
    axes = space.axes
    where = {axis.name: i for i, axis in enumerate(axes)}
    out: list[Box] = []
    for box in region.boxes:
        base = list(box)
        if not all(box[where[a]] >> (axes[where[a]].index(v) or 0) & 1 for a, v in values.items()):
            continue
        meant = {a: table for a, table in (means or {}).items() if a not in values}  # a pin wins
        for a in (*values, *meant):  # the cell's own value is free, or read through the meanings alone
            base[where[a]] = axes[where[a]].full_mask
        parts = [base]
        for a, table in meant.items():
            i = where[a]
            parts = [narrowed for part in parts for alternative in _meanings(space, box, i, table)
                     if (narrowed := _narrow(part, alternative)) is not None]
        out.extend(tuple(part) for part in parts)
    return Region(space, out, disjoint=True)


def _meanings(
    space: Space, box: Box, i: int, table: Mapping[AxisValue, AxisValue | ValueOf]
) -> list[dict[int, int]]:
    """The ways a cell's word on axis ``i`` brings its guarded query into ``box``: masks of the cell.

    One alternative for the words that keep their value or name one inside the box; one per axis a
    meaning reads, with the words that read it and that axis's values the box holds on axis ``i``.
    """
    axis = space.axes[i]
    plain = 0
    reads: dict[int, int] = {}
    for j, word in enumerate(axis.values):
        meaning = table.get(word, word)
        if isinstance(meaning, ValueOf):
            k = space.position(meaning.axis)
            reads[k] = reads.get(k, 0) | 1 << j
        elif box[i] >> (axis.index(meaning) or 0) & 1:
            plain |= 1 << j
    out = [{i: plain}] if plain else []
    for k, words in reads.items():
        held = sum(1 << n for n, v in enumerate(space.axes[k].values) if box[i] >> (axis.index(v) or 0) & 1)
        if held:
            out.append({i: words, k: held})
    return out


def _narrow(part: list[int], masks: Mapping[int, int]) -> list[int] | None:
    """``part`` with each axis of ``masks`` cut to its mask; None where one becomes empty."""
    out = list(part)
    for k, mask in masks.items():
        out[k] &= mask
        if not out[k]:
            return None
    return out


def _holds(space: Space, region: Region, values: Mapping[str, AxisValue]) -> bool:
    """Whether the cell ``values`` (every axis given, known values) lies in ``region``."""
    cell = [1 << (axis.index(values[axis.name]) or 0) for axis in space.axes]
    return any(all(mask & bit for mask, bit in zip(box, cell, strict=True)) for box in region.boxes)


def _report(
    matrix: Matrix, code: str, gate: Kernel, compiled: KernelBoxes, region: Region,
    targets: Mapping[str, Region], scope: list[Box], checks: Iterable[KernelBoxes] = (),
) -> Iterator[GateReport]:
    if not region:
        return
    space = matrix.space
    merged = region.merged()
    caught = tuple(
        rule for check in checks for rule, box in zip(check.kernel.rules, check.boxes, strict=True)
        if rule.effect is Effect.EXCLUDE and any(intersect(box, b) is not None for b in merged.boxes)
    )
    effect = Effect.EXCLUDE if code == "C111" else Effect.GRANT
    rules = tuple(
        rule for rule, box in zip(gate.rules, compiled.boxes, strict=True)
        if rule.effect is effect and any(intersect(box, b) is not None for b in merged.boxes)
    )
    if not rules:
        # Refused where no grant reaches (an allowlist): the grants of the scope that stop short of a
        # region on one axis only, e.g. an SM list without SM121.
        rules = tuple(
            rule for rule, box in zip(gate.rules, compiled.boxes, strict=True)
            if rule.effect is Effect.GRANT and any(intersect(box, s) is not None for s in scope)
            and any(sum(1 for x, y in zip(box, b, strict=True) if not x & y) == 1 for b in merged.boxes)
        )
    at, witness, model = _witness(space, merged.boxes, matrix.models.values(), gate.engine)
    serving = tuple(t for t, r in targets.items() if _holds(space, r, witness))
    yield GateReport(code=code, gate=gate, region=merged, rules=rules, witness=witness, at=at,
                     model=model, serving=serving, caught=caught)


def _witness(
    space: Space, boxes: tuple[Box, ...], models: Iterable[ModelFamily], engine: str | None,
) -> tuple[int, dict[str, AxisValue], str | None]:
    """A cell to show, the index of its box and the model family it comes from.

    In the first box a model family's values lie in: those values over the box's own witness; else
    the first box's own witness. Only the model's values on the core axes and the gate engine's own
    count: another engine's words for the model (SGLang's architecture) say nothing of this gate.
    """
    read = {axis.name for axis in space.axes if axis.scope in (CORE, engine)}
    families = [(m, {a: v for a, v in m.axes.items() if a in read}) for m in models]
    for i, box in enumerate(boxes):
        for model, values in families:
            if all(box[a] >> (axis.index(value) or 0) & 1
                   for a, axis in enumerate(space.axes)
                   if (value := values.get(axis.name)) is not None):
                return i, {**witness_of(space, box), **values}, model.name
    return 0, witness_of(space, boxes[0]), None
