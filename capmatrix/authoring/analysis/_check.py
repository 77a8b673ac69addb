"""Static analysis of a capability matrix: findings as data, each with a stable code.

:func:`check` looks at a loaded matrix; :func:`check_path` also turns loading problems into findings, so
a broken matrix yields located findings instead of an exception. Nothing here prints: the CLI renders.
Every analysis works on boxes and regions (never cell by cell); see ``docs/analysis.md`` for the codes.
"""

from __future__ import annotations

import dataclasses
import os
from functools import partial
from typing import TYPE_CHECKING

from capmatrix.authoring.analysis._boxes import (
    Area,
    BoxIndex,
    KernelBoxes,
    areas,
    supported_region,
    table_shaped,
    witness_of,
)
from capmatrix.authoring.analysis._diagram import EMPTY, collection_paused
from capmatrix.authoring.analysis._findings import (
    MAX_REGIONS,
    CheckResult,
    Finding,
    Severity,
    Witness,
    finding,
)
from capmatrix.authoring.analysis._gates import gate_reports
from capmatrix.authoring.analysis._roles import (
    diagram_for,
    role_findings,
    role_kernels,
    role_regions,
    supported_node,
    table_role_findings,
)
from capmatrix.authoring.loader import default_path, load
from capmatrix.errors import CapabilityErrors
from capmatrix.model import AxisType, Effect, Location, ValueOf, format_value
from capmatrix.regions import Region, bits

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from capmatrix.errors import CapabilityError
    from capmatrix.matrix import Matrix
    from capmatrix.model import Axis, AxisValue, Condition, Role, Rule
    from capmatrix.regions import Box, Space

__all__ = ["check", "check_path", "problem_findings"]


#: Loader problem codes that map to a specific finding code (others become C001).
_LOADER_CODES = {"E221": "C002", "E230": "C002", "E222": "C003", "E231": "C003", "E240": "C004"}


# --------------------------------------------------------------------------------------------------
# Entry points


def check_path(path: str | os.PathLike[str] | None = None) -> CheckResult:
    """Load the matrix at ``path`` (default: the shipped one) and check it.

    Loading problems (unknown axes, values, kernels, schema errors) come back as findings with
    ``loaded=False`` instead of raising.
    """
    root = str(path if path is not None else default_path())
    try:
        matrix = load(path)
    except CapabilityErrors as exc:
        return CheckResult(path=root, findings=problem_findings(exc.errors), loaded=False)
    return CheckResult(path=root, findings=check(matrix), loaded=True)


def problem_findings(problems: Iterable[CapabilityError]) -> tuple[Finding, ...]:
    """Loader problems as findings (C002 unknown axis, C003 unknown value, C004 unknown kernel, C001)."""
    out = []
    for p in problems:
        code = _LOADER_CODES.get(p.code, "C001")
        where = f"{p.json_path}: " if p.json_path else ""
        hint = f" ({p.hint})" if p.hint else ""
        out.append(
            finding(
                code,
                f"{where}{p.message}{hint} [{p.code}]",
                locations=(Location(path=p.path, line=p.line, column=p.column),),
            )
        )
    return tuple(sorted(out, key=Finding.sort_key))


@collection_paused()
def check(matrix: Matrix, *, max_regions: int = MAX_REGIONS) -> tuple[Finding, ...]:
    """Every finding for a loaded matrix, errors first.

    ``max_regions`` bounds the regions a finding lists (and the work of listing them): a role's gap
    with more boxes is reported by its first ones, with its exact share of the universe.
    """
    space = matrix.space
    findings: list[Finding] = []
    compiled = {name: KernelBoxes.of(kernel, space) for name, kernel in matrix.kernels.items()}
    # One analysis per role (its candidates' rules) and per kernel no role names, each taking the
    # route its own rules' shape calls for: decision-table-shaped rules (mostly disjoint boxes) the
    # partition split like the table (a fixed-order decision diagram of a table can be far larger
    # than the table), overlapping rules one diagram store in the axis order they suggest (as
    # bounded_gap builds it; a store of every kernel's nodes would grow with the whole matrix and
    # slow every walk in it). Each kernel's own findings are read where its region is first built;
    # they are exact booleans, the same on either route.
    pending = dict(compiled)
    groups: list[tuple[Role | None, list[str]]] = [
        (role, role_kernels(matrix, role)) for role in matrix.roles.values()]
    in_roles = {name for _role, names in groups for name in names}
    groups += [(None, [name]) for name in compiled if name not in in_roles]
    for owner, names in groups:
        if table_shaped([compiled[name] for name in names]):
            regions = {name: supported_region(space, compiled[name], local=True) for name in names}
            for name in names:
                if name in pending:
                    region = regions[name]
                    findings.extend(_kernel_findings(
                        space, pending.pop(name), nowhere=not region, alive=_meets_region(region)))
            if owner is not None:
                findings.extend(table_role_findings(matrix, owner, compiled, regions, limit=max_regions))
            continue
        with diagram_for(space, (compiled[name] for name in names)) as diagram:
            supported = {name: supported_node(diagram, compiled[name]) for name in names}
            for name in names:
                if name in pending:
                    boxes, node = pending.pop(name), supported[name]
                    findings.extend(_kernel_findings(
                        space, boxes, nowhere=node == EMPTY, alive=partial(diagram.meets, node)))
            if owner is not None:
                findings.extend(role_findings(matrix, owner, diagram, supported, limit=max_regions))
    findings.extend(_gate_findings(matrix, limit=max_regions))
    return tuple(sorted((_with_releases(matrix, f) for f in findings), key=Finding.sort_key))


def _with_releases(matrix: Matrix, finding: Finding) -> Finding:
    """``finding`` with the releases of each engine its regions cover (where some release is left out)."""
    if not finding.regions or not matrix.releases:
        return finding
    spans = []
    for engine, releases in matrix.releases.items():
        if releases.axis not in finding.regions[0].values:
            continue
        held = {v for area in finding.regions for v in area.values[releases.axis]}
        if len(held) < len(releases.names):
            spans.append((engine, tuple(v for v in releases.names if v in held),
                          tuple(v for v in releases.names if v not in held)))
    return dataclasses.replace(finding, releases=tuple(spans)) if spans else finding


def _meets_region(region: Region) -> Callable[[Box], bool]:
    """Whether a box meets ``region`` (through a per-axis index of its boxes)."""
    every = (1 << len(region.boxes)) - 1
    index = BoxIndex(region.space, region.boxes, every)

    def meets(box: Box) -> bool:
        return bool(index.intersecting(box, every))

    return meets


# --------------------------------------------------------------------------------------------------
# Per-kernel analyses


def _rule_area(space: Space, box: Box) -> tuple[Area, ...]:
    return areas(Region(space, [box], disjoint=True))


def _kernel_findings(
    space: Space, compiled: KernelBoxes, *, nowhere: bool, alive: Callable[[Box], bool]
) -> Iterator[Finding]:
    """The findings about one kernel's rules.

    ``nowhere``: the kernel is supported nowhere; ``alive(box)``: it is supported somewhere in ``box``.
    """
    kernel = compiled.kernel
    rules = kernel.rules
    boxes = compiled.boxes
    name = kernel.name
    vacuous = 0
    for i, box in enumerate(boxes):
        if 0 in box:
            vacuous |= 1 << i
    nonvacuous_grants = compiled.grants & ~vacuous
    nonvacuous_excl = compiled.exclusions & ~vacuous

    def wit(box: Box) -> Witness:
        return Witness.at(space, witness_of(space, box), kernel=name)

    # C103 vacuous rules
    for i in bits(vacuous):
        rule = rules[i]
        empty = [a.name for a, m in zip(space.axes, boxes[i], strict=True) if m == 0]
        conds = "; ".join(f"{a} {rule.conditions[a].text}" for a in empty)
        yield finding(
            "C103",
            f"{rule.id} matches nothing in the universe: no declared value satisfies {conds}",
            locations=(rule.location,), rules=(rule.id,), kernels=(name,),
        )
    # C110 kernel supports nothing
    if nowhere:
        yield finding(
            "C110",
            f"kernel {name} is supported nowhere in the universe"
            + ("" if nonvacuous_grants else " (it has no grant that matches anything)"),
            locations=(kernel.location,), kernels=(name,),
        )
    # C101 dead grants: g ∩ supported = ∅ (supported ∩ g is exactly g minus the exclusions).
    excl_index = BoxIndex(space, boxes, nonvacuous_excl)
    for i in bits(nonvacuous_grants):
        box = boxes[i]
        if alive(box):
            continue
        rule = rules[i]
        killers = [rules[j] for j in bits(excl_index.intersecting(box, nonvacuous_excl))]
        by = ", ".join(f"{r.id} ({r.location})" for r in killers)
        yield finding(
            "C101",
            f"{rule.id} grants nothing: every cell it grants is removed by {by}",
            locations=(rule.location, *(r.location for r in killers)),
            rules=(rule.id, *(r.id for r in killers)), kernels=(name,),
            witness=wit(box), regions=_rule_area(space, box),
        )
    # C102 dead exclusions: no grant intersects them.
    grant_index = BoxIndex(space, boxes, nonvacuous_grants)
    for i in bits(nonvacuous_excl):
        box = boxes[i]
        if grant_index.intersecting(box, nonvacuous_grants):
            continue
        rule = rules[i]
        yield finding(
            "C102",
            f"{rule.id} removes nothing: no grant of {name} reaches its region "
            f"({rule.describe_region()})",
            locations=(rule.location,), rules=(rule.id,), kernels=(name,),
            witness=wit(box), regions=_rule_area(space, box),
        )
    # C104 duplicates and C105 subsumed rules (same effect).
    yield from _redundant(space, compiled, vacuous, wit)
    # C106 open-ended ranges and C107 family splits, rule by rule.
    for i, rule in enumerate(rules):
        if vacuous >> i & 1:
            continue
        for a, axis in enumerate(space.axes):
            cond = rule.conditions.get(axis.name)
            if cond is None or axis.type is not AxisType.INT:
                continue
            yield from _open_ended(axis, cond, rule, boxes[i], space)
            yield from _family_split(axis, a, rule, boxes[i], space)


def _redundant(
    space: Space, compiled: KernelBoxes, vacuous: int, wit: object
) -> Iterator[Finding]:
    rules = compiled.kernel.rules
    boxes = compiled.boxes
    name = compiled.kernel.name
    make = wit  # a Callable[[Box], Witness]; typed loosely to keep the signature short
    for effect_bits in (compiled.grants & ~vacuous, compiled.exclusions & ~vacuous):
        groups: dict[Box, list[int]] = {}
        for i in bits(effect_bits):
            groups.setdefault(boxes[i], []).append(i)
        representatives = 0
        for members in groups.values():
            representatives |= 1 << members[0]
            if len(members) > 1:
                first = rules[members[0]]
                dups = [rules[j] for j in members[1:]]
                yield finding(
                    "C104",
                    f"{', '.join(r.id for r in dups)} repeat{'s' if len(dups) == 1 else ''} the "
                    f"region of {first.id} ({first.effect}: {first.describe_region()})",
                    locations=tuple(r.location for r in (*dups, first)),
                    rules=tuple(r.id for r in (*dups, first)), kernels=(name,),
                    witness=make(boxes[members[0]]),  # type: ignore[operator]
                    regions=_rule_area(space, boxes[members[0]]),
                )
        index = BoxIndex(space, boxes, representatives)
        for i in bits(representatives):
            containers = index.containing(boxes[i], representatives) & ~(1 << i)
            if not containers:
                continue
            j = bits(containers)[0]
            inner, outer = rules[i], rules[j]
            yield finding(
                "C105",
                f"{inner.id} is subsumed by {outer.id}: its {inner.effect} region "
                f"({inner.describe_region()}) lies inside {outer.id}'s ({outer.describe_region()})",
                locations=(inner.location, outer.location), rules=(inner.id, outer.id),
                kernels=(name,), witness=make(boxes[i]),  # type: ignore[operator]
                regions=_rule_area(space, boxes[i]),
            )


def _beyond(axis: Axis, cond: Condition) -> int | None:
    """The smallest integer above the axis's known values that ``cond`` admits, if any."""
    top = max(v for v in axis.known if isinstance(v, int))
    probes = {top + 1}
    for iv in cond.intervals:
        if iv.low is not None:
            probes.add(iv.low + (0 if iv.low_inclusive else 1))
        if iv.high is not None:
            probes.add(iv.high + (1 if iv.high_inclusive else 0))
    probes.update(int(v) + 1 for v in cond.values if not isinstance(v, str))
    for probe in sorted(p for p in probes if p > top):
        if cond.contains(probe):
            return probe
    return None


def _open_ended(
    axis: Axis, cond: Condition, rule: Rule, box: Box, space: Space
) -> Iterator[Finding]:
    # A modulus (block sizes that are multiples of 16) speaks of every integer by intent: only ranges
    # and negations are reported for reaching past the universe.
    if not (cond.negated or any(i.open_ended for i in cond.intervals)):
        return
    future = _beyond(axis, cond)
    if future is None:
        return
    values = dict(witness_of(space, box))
    values[axis.name] = future
    grant = rule.effect is Effect.GRANT
    claim = "grants" if grant else "excludes"
    yield finding(
        "C106",
        f"{rule.id} {claim} {axis.name} {cond.text}, which reaches past the known universe "
        f"(e.g. {axis.name}={future}, not declared yet)",
        severity=Severity.WARNING if grant else Severity.INFO,
        locations=(rule.location,), rules=(rule.id,), kernels=(rule.kernel,),
        witness=Witness.at(space, values, kernel=rule.kernel),
        regions=_rule_area(space, box), subject=axis.name,
    )


def _family_split(axis: Axis, a: int, rule: Rule, box: Box, space: Space) -> Iterator[Finding]:
    mask = box[a]
    for family, members in axis.families.items():
        fmask = axis.mask_of(set(members))
        inside = mask & fmask
        if not inside or inside == fmask:
            continue
        named = axis.format_values(inside)
        missing_mask = fmask & ~mask
        missing = axis.format_values(missing_mask)
        values = dict(witness_of(space, box))
        values[axis.name] = axis.values[bits(missing_mask)[0]]
        yield finding(
            "C107",
            f"{rule.id} ({rule.effect}) covers {axis.name} {named} of family {family} but not "
            f"its sibling{'s' if missing_mask.bit_count() > 1 else ''} {missing} "
            f"({axis.name} {rule.conditions[axis.name].text})",
            locations=(rule.location,), rules=(rule.id,), kernels=(rule.kernel,),
            witness=Witness.at(space, values, kernel=rule.kernel),
            regions=_rule_area(space, box), subject=f"{axis.name} {family}",
        )


# --------------------------------------------------------------------------------------------------
# Gates against the kernels they guard (capmatrix.authoring.analysis._gates)


def _role_served(matrix: Matrix, role: Role) -> Region:
    """Where ``role`` selects some candidate."""
    out = Region(matrix.space)
    for name, region in role_regions(matrix, role).items():
        if name is not None:
            out = out | region
    return out


def _pins_text(values: Mapping[str, AxisValue]) -> str:
    return ", ".join(f"{a}={format_value(v)}" for a, v in values.items())


def _means_text(means: Mapping[str, Mapping[AxisValue, AxisValue | ValueOf]]) -> str:
    """A guard's ``means`` as text: ``kv_cache_dtype auto read as dtype``."""
    return ", ".join(
        f"{a} {format_value(w)} read as " + (m.axis if isinstance(m, ValueOf) else format_value(m))
        for a, table in means.items() for w, m in table.items()
    )


def _gate_findings(matrix: Matrix, *, limit: int) -> Iterator[Finding]:
    """C111, C112 and C113 (refused at engine start) of every guarding gate, one finding per gate and code."""
    space = matrix.space
    for report in gate_reports(matrix, partial(_role_served, matrix)):
        gate = report.gate
        guard = gate.guards
        assert guard is not None  # noqa: S101 - gate_reports reports only gates with guards
        found = tuple(Area(space, box) for box in report.region.boxes)
        shown = found[:limit]
        plural = "s" if len(found) != 1 else ""
        count = f"{len(found):,} region{plural}" + (
            f", first {len(shown):,} shown" if len(shown) < len(found) else "")
        read = _means_text(guard.means)
        query = (f"the query with {_pins_text(guard.axes)}" if guard.axes else "the same query") + (
            f" ({read})" if read else "")
        model = f" (witness: model {report.model})" if report.model else ""
        targets = ", ".join(guard.targets)
        if report.code == "C111":
            message = (
                f"gate {gate.name} refuses {count} where {', '.join(report.serving)} serves {query}, "
                f"e.g. {found[report.at].description}{model}"
            )
        elif report.code == "C113":
            checks = ", ".join(r.id for r in report.caught) or ", ".join(guard.caught_by)
            message = (
                f"gate {gate.name} admits {count} where no guarded kernel ({targets}) serves {query}, "
                f"and the engine refuses there at start ({checks}), e.g. {found[report.at].description}"
                f"{model}"
            )
        else:
            refused = guard.refused
            also = ("" if refused is None else
                    f", though {', '.join(report.serving)} serves it with {_pins_text(refused)} "
                    "(what the gate's refusal sends)")
            message = (
                f"gate {gate.name} admits {count} where no guarded kernel ({targets}) serves {query}"
                f"{also}, e.g. {found[report.at].description}{model}"
            )
        yield finding(
            report.code, message,
            locations=(*(r.location for r in report.rules), *(r.location for r in report.caught),
                       guard.location),
            rules=tuple(r.id for r in (*report.rules, *report.caught)), kernels=(gate.name,),
            witness=Witness.at(space, report.witness, kernel=gate.name), regions=shown,
        )
