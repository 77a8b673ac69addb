"""Static analysis of a capability matrix: findings as data, each with a stable code.

:func:`check` looks at a loaded matrix; :func:`check_path` also turns loading problems into findings, so
a broken matrix yields located findings instead of an exception. Nothing here prints: the CLI renders.
Every analysis works on boxes and regions (never cell by cell); see ``docs/analysis.md`` for the codes.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from capmatrix._partition import PartitionLimit, find, measure, mostly_disjoint, partition, uncovered
from capmatrix.analysis._boxes import (
    Area,
    BoxIndex,
    KernelBoxes,
    areas,
    reduce_kernel,
    supported_region,
    witness_of,
)
from capmatrix.analysis._diagram import EMPTY, FULL, Diagram, axis_order
from capmatrix.analysis._gates import gate_reports
from capmatrix.errors import CapabilityErrors, CapmatrixError
from capmatrix.loader import default_path, load
from capmatrix.model import AxisType, Effect, Location, ValueOf, _StrEnum, format_value
from capmatrix.regions import Region, bits

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from capmatrix.errors import CapabilityError
    from capmatrix.matrix import Matrix
    from capmatrix.model import Axis, AxisValue, Condition, Role, Rule
    from capmatrix.regions import Box, Space

__all__ = [
    "CODES",
    "MAX_REGIONS",
    "CheckResult",
    "Finding",
    "Gap",
    "Severity",
    "TooManyRegions",
    "Witness",
    "bounded_gap",
    "check",
    "check_path",
    "problem_findings",
    "role_gap",
    "role_regions",
]


class Severity(_StrEnum):
    """How bad a finding is: errors fail ``capmatrix check``; warnings fail it under ``--strict``."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}

#: code -> (default severity, short title). ``docs/analysis.md`` documents each with an example.
CODES: dict[str, tuple[Severity, str]] = {
    "C001": (Severity.ERROR, "invalid capability data"),
    "C002": (Severity.ERROR, "unknown axis"),
    "C003": (Severity.ERROR, "unknown value, family or range"),
    "C004": (Severity.ERROR, "unknown kernel"),
    "C101": (Severity.ERROR, "dead grant"),
    "C102": (Severity.WARNING, "dead exclusion"),
    "C103": (Severity.ERROR, "vacuous rule"),
    "C104": (Severity.WARNING, "duplicate rule"),
    "C105": (Severity.INFO, "subsumed rule"),
    "C106": (Severity.WARNING, "open-ended range"),
    "C107": (Severity.WARNING, "family siblings split"),
    "C108": (Severity.INFO, "role gap"),
    "C109": (Severity.WARNING, "shadowed role candidate"),
    "C110": (Severity.ERROR, "kernel supports nothing"),
    "C111": (Severity.WARNING, "over-restrictive gate"),
    "C112": (Severity.ERROR, "over-permissive gate"),
}

#: The most merged regions one finding (or a role's gap) lists; past it the finding says how many it
#: shows, and the share of the universe stays exact. ``check(..., max_regions=N)`` / ``--max-regions``.
MAX_REGIONS = 1_000

#: Loader problem codes that map to a specific finding code (others become C001).
_LOADER_CODES = {"E221": "C002", "E230": "C002", "E222": "C003", "E231": "C003", "E240": "C004"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Witness:
    """A concrete query that shows a finding: a kernel (or role) and one value per axis."""

    values: Mapping[str, AxisValue]
    kernel: str | None = None
    role: str | None = None
    #: Axes whose value is the axis default: the command line may leave them out.
    implicit: tuple[str, ...] = ()

    @classmethod
    def at(
        cls, space: Space, values: Mapping[str, AxisValue], *, kernel: str | None = None,
        role: str | None = None,
    ) -> Witness:
        """A witness for ``values``, noting which of them are axis defaults."""
        implicit = tuple(
            a.name for a in space.axes
            if a.default is not None and a.name in values
            and values[a.name] == a.default and type(values[a.name]) is type(a.default)
        )
        return cls(values=dict(values), kernel=kernel, role=role, implicit=implicit)

    def command(self, matrix: str | None = None) -> str:
        """The ``capmatrix query`` / ``select`` command line that asks it (defaults left out).

        Every word is shell-quoted, so a pasted witness never runs anything; ``matrix`` (a matrix
        directory other than the shipped one) adds ``--matrix DIR``.
        """
        words = ["capmatrix", "select", self.role] if self.role else ["capmatrix", "query", str(self.kernel)]
        for name, value in self.values.items():
            if name in self.implicit:
                continue
            words += [f"--{name.replace('_', '-')}", format_value(value)]
        if matrix:
            words += ["--matrix", matrix]
        return " ".join(shlex.quote(word) for word in words)

    def as_dict(self, matrix: str | None = None) -> dict[str, object]:
        """JSON-ready form (``command`` with ``--matrix DIR`` when ``matrix`` is given)."""
        out: dict[str, object] = {}
        if self.kernel is not None:
            out["kernel"] = self.kernel
        if self.role is not None:
            out["role"] = self.role
        out["query"] = dict(self.values)
        out["command"] = self.command(matrix)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One problem or observation about a matrix.

    ``locations`` are the files and lines involved (rules, roles, kernels, or the loader's position);
    ``witness`` is a query showing it (None where no cell exists, e.g. a vacuous rule); ``regions``
    are the merged boxes it is about.
    """

    code: str
    severity: Severity
    message: str
    locations: tuple[Location, ...] = ()
    rules: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()
    witness: Witness | None = None
    regions: tuple[Area, ...] = field(default=())
    #: What the finding is about beyond its rules and kernels, where they do not tell two findings
    #: apart: the axis of an open-ended range, the family split, the role (and candidate).
    subject: str = ""

    @property
    def key(self) -> str:
        """A key that names this finding across edits: code, subject, rules (else kernels).

        It holds no line, count or region, so a finding keeps its key while the files around it
        change; a finding with none of those (a loading problem) is keyed by its file and message.
        """
        parts = [self.code]
        if self.subject:
            parts.append(self.subject)
        if self.rules:
            parts.append(",".join(self.rules))
        elif self.kernels and not self.subject:
            parts.append(",".join(self.kernels))
        elif not self.subject:
            first = self.locations[0].path if self.locations else ""
            parts.append(f"{first}: {self.message}" if first else self.message)
        return " ".join(parts)

    @property
    def title(self) -> str:
        """The short name of the code."""
        return CODES.get(self.code, (self.severity, self.code))[1]

    def sort_key(self) -> tuple[int, str, str, int, str]:
        """Errors first, then by code, file, line."""
        first = self.locations[0] if self.locations else Location(path="")
        return (_RANK[self.severity], self.code, first.path, first.line or 0, self.message)

    def as_dict(self, matrix: str | None = None) -> dict[str, object]:
        """JSON-ready form (witness commands name ``--matrix DIR`` when ``matrix`` is given)."""
        return {
            "code": self.code,
            "key": self.key,
            "severity": str(self.severity),
            "title": self.title,
            "message": self.message,
            "locations": [
                {"file": loc.path, "line": loc.line, "column": loc.column} for loc in self.locations
            ],
            "rules": list(self.rules),
            "kernels": list(self.kernels),
            "witness": None if self.witness is None else self.witness.as_dict(matrix),
            "regions": [a.as_dict() for a in self.regions],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """The findings for one matrix directory; ``loaded`` is False when the data did not load."""

    path: str
    findings: tuple[Finding, ...]
    loaded: bool

    def count(self, severity: Severity) -> int:
        """How many findings have ``severity``."""
        return sum(1 for f in self.findings if f.severity is severity)

    def exit_status(self, *, strict: bool = False) -> int:
        """0 clean (warnings allowed unless strict), 1 with errors, 2 when the data did not load."""
        if not self.loaded:
            return 2
        if self.count(Severity.ERROR) or (strict and self.count(Severity.WARNING)):
            return 1
        return 0

    def as_dict(self, matrix: str | None = None) -> dict[str, object]:
        """JSON-ready form; ``matrix`` (a non-default matrix directory) goes into witness commands."""
        return {
            "path": self.path,
            "loaded": self.loaded,
            "summary": {str(s): self.count(s) for s in Severity},
            "findings": [f.as_dict(matrix) for f in self.findings],
        }


def _finding(code: str, message: str, **kw: object) -> Finding:
    severity = kw.pop("severity", None) or CODES[code][0]
    return Finding(code=code, severity=severity, message=message, **kw)  # type: ignore[arg-type]


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
            _finding(
                code,
                f"{where}{p.message}{hint} [{p.code}]",
                locations=(Location(path=p.path, line=p.line, column=p.column),),
            )
        )
    return tuple(sorted(out, key=Finding.sort_key))


def check(matrix: Matrix, *, max_regions: int = MAX_REGIONS) -> tuple[Finding, ...]:
    """Every finding for a loaded matrix, errors first.

    ``max_regions`` bounds the regions a finding lists (and the work of listing them): a role's gap
    with more boxes is reported by its first ones, with its exact share of the universe.
    """
    space = matrix.space
    findings: list[Finding] = []
    compiled = {name: KernelBoxes.of(kernel, space) for name, kernel in matrix.kernels.items()}
    if mostly_disjoint([b for c in compiled.values() for b in c.boxes]):
        # Decision-table-shaped rules: regions as disjoint boxes, from the partition split like the
        # table itself (a fixed-order decision diagram of a table can be far larger than the table).
        regions = {name: supported_region(space, boxes, local=True) for name, boxes in compiled.items()}
        for name, boxes in compiled.items():
            region = regions[name]
            findings.extend(_kernel_findings(
                space, boxes, nowhere=not region, alive=_meets_region(region)))
        for role in matrix.roles.values():
            findings.extend(_table_role_findings(matrix, role, compiled, regions, limit=max_regions))
        findings.extend(_gate_findings(matrix, limit=max_regions))
        return tuple(sorted(findings, key=Finding.sort_key))
    diagram = _diagram_for(space, compiled.values())
    supported = {name: _supported(diagram, boxes) for name, boxes in compiled.items()}
    for name, boxes in compiled.items():
        node = supported[name]
        findings.extend(_kernel_findings(
            space, boxes, nowhere=node == EMPTY, alive=partial(diagram.meets, node)))
    for role in matrix.roles.values():
        findings.extend(_role_findings(matrix, role, diagram, supported, limit=max_regions))
    findings.extend(_gate_findings(matrix, limit=max_regions))
    return tuple(sorted(findings, key=Finding.sort_key))


def _meets_region(region: Region) -> Callable[[Box], bool]:
    """Whether a box meets ``region`` (through a per-axis index of its boxes)."""
    every = (1 << len(region.boxes)) - 1
    index = BoxIndex(region.space, region.boxes, every)

    def meets(box: Box) -> bool:
        return bool(index.intersecting(box, every))

    return meets


def _diagram_for(space: Space, compiled: Iterable[KernelBoxes]) -> Diagram:
    """One diagram store for the kernels' rules, in the axis order their boxes suggest."""
    return Diagram(space, axis_order(space, (b for c in compiled for b in c.boxes)))


def _supported(diagram: Diagram, compiled: KernelBoxes) -> int:
    """The node of the kernel's supported region: some grant applies and no exclusion does."""
    return diagram.rules(compiled.boxes, compiled.grants, compiled.exclusions)


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
        yield _finding(
            "C103",
            f"{rule.id} matches nothing in the universe: no declared value satisfies {conds}",
            locations=(rule.location,), rules=(rule.id,), kernels=(name,),
        )
    # C110 kernel supports nothing
    if nowhere:
        yield _finding(
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
        yield _finding(
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
        yield _finding(
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
                yield _finding(
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
            yield _finding(
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
    yield _finding(
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
        yield _finding(
            "C107",
            f"{rule.id} ({rule.effect}) covers {axis.name} {named} of family {family} but not "
            f"its sibling{'s' if missing_mask.bit_count() > 1 else ''} {missing} "
            f"({axis.name} {rule.conditions[axis.name].text})",
            locations=(rule.location,), rules=(rule.id,), kernels=(rule.kernel,),
            witness=Witness.at(space, values, kernel=rule.kernel),
            regions=_rule_area(space, box), subject=f"{axis.name} {family}",
        )


# --------------------------------------------------------------------------------------------------
# Gates against the kernels they guard (capmatrix.analysis._gates)


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
    """C111 over-restrictive and C112 over-permissive gates, one finding per gate and code."""
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
        else:
            refused = guard.refused
            also = ("" if refused is None else
                    f", though {', '.join(report.serving)} serves it with {_pins_text(refused)} "
                    "(what the gate's refusal sends)")
            message = (
                f"gate {gate.name} admits {count} where no guarded kernel ({targets}) serves {query}"
                f"{also}, e.g. {found[report.at].description}{model}"
            )
        yield _finding(
            report.code, message,
            locations=(*(r.location for r in report.rules), guard.location),
            rules=tuple(r.id for r in report.rules), kernels=(gate.name,),
            witness=Witness.at(space, report.witness, kernel=gate.name), regions=shown,
        )


# --------------------------------------------------------------------------------------------------
# Roles


def role_regions(
    matrix: Matrix, role: Role, *, space: Space | None = None
) -> dict[str | None, Region]:
    """Where each candidate of ``role`` is selected (key None: where none is), as merged regions.

    Candidates that are not kernels of the matrix never win. Over a ``space`` other than the
    matrix's, a role whose order depends on the query is read as its default candidate list.
    """
    sp = matrix.space if space is None else space
    names = _role_kernels(matrix, role)
    compiled = {name: KernelBoxes.of(matrix.kernels[name], sp) for name in names}
    diagram = _diagram_for(sp, compiled.values())
    supported = {name: _supported(diagram, boxes) for name, boxes in compiled.items()}
    ordered = bool(role.orders) and sp.names == matrix.space.names
    return {
        name: Region(sp, diagram.boxes(node), disjoint=True).merged()
        for name, node in _winners(diagram, matrix, role, supported, ordered=ordered).items()
    }


def _role_kernels(matrix: Matrix, role: Role) -> list[str]:
    """Every candidate of ``role`` (any order) that is a kernel of the matrix, once, in order."""
    names = dict.fromkeys([*role.candidates, *(c for o in role.orders for c in o.candidates)])
    return [name for name in names if name in matrix.kernels]


def _layers(
    diagram: Diagram, role: Role, *, ordered: bool
) -> Iterator[tuple[tuple[str, ...], int]]:
    """Each candidate list of ``role`` with the node of where it applies.

    The first order whose area holds a cell decides; where none does, no candidate is tried.
    """
    if not ordered:
        yield role.candidates, FULL
        return
    applied = EMPTY
    for order in role.orders:
        area = diagram.minus(diagram.union(diagram.box(b) for b in order.area), applied)
        applied = diagram.join(applied, area)
        yield order.candidates, area
    yield (), diagram.minus(FULL, applied)


def _winners(
    diagram: Diagram, matrix: Matrix, role: Role, supported: Mapping[str, int], *, ordered: bool
) -> dict[str | None, int]:
    """Per candidate (None: no candidate), the node of where ``role`` selects it; empty ones left out."""
    def support(candidate: str) -> int:
        return supported.get(candidate, EMPTY) if candidate in matrix.kernels else EMPTY

    return diagram.winners(_layers(diagram, role, ordered=ordered), support)


def _gap_and_shadowed(
    diagram: Diagram, matrix: Matrix, role: Role, supported: Mapping[str, int]
) -> tuple[int, bool, list[str]]:
    """Where no candidate of ``role`` is supported, and the supported candidates it never selects.

    The gap comes as a node and whether it is that node's complement (a role without orders: the
    complement of its candidates' union, read without building it).
    """
    if role.orders:
        winners = _winners(diagram, matrix, role, supported, ordered=True)
        never = [c for c in role.candidates
                 if c in matrix.kernels and supported[c] != EMPTY and c not in winners]
        return winners.get(None, EMPTY), False, never
    present = [c for c in role.candidates if c in matrix.kernels]
    nodes = [supported[c] for c in present]
    # Shadowed: every cell of its own region is some earlier candidate's (asked without building
    # the earlier candidates' union; the gap is their balanced union, smaller to build than prefixes).
    never = [c for k, c in enumerate(present)
             if k and nodes[k] != EMPTY and diagram.covered(nodes[k], nodes[:k])]
    return diagram.union(nodes), True, never


@dataclass(frozen=True, slots=True)
class Gap:
    """A role's gap within a bound: its regions (all, or the first ones), how many, its exact size.

    The gap's canonical boxes (``docs/analysis.md``) are counted exactly. When there are at most
    ``limit``, ``region`` holds all of them merged and ``total`` is the number of merged regions;
    else ``region`` holds the first ``limit`` canonical boxes and ``total`` is None.
    """

    #: Merged: every region of the gap; or its first ``limit`` canonical boxes when there are more.
    region: Region
    #: How many merged regions the whole gap has; None when it has more than ``limit`` boxes.
    total: int | None
    #: Cells of the whole gap (exact, truncated or not).
    cells: int
    limit: int
    #: Canonical boxes of the whole gap (exact); None where not counted (a decision-table-shaped
    #: matrix whose gap passed the bound: it has more than ``limit`` boxes).
    boxes: int | None = None

    @property
    def truncated(self) -> bool:
        """Whether ``region`` holds only part of the gap."""
        return self.total is None or self.total > len(self.region.boxes)

    def count(self) -> str:
        """``12 regions``, ``4,096 boxes, first 1,000 shown`` or ``more than 1,000 boxes, ...``."""
        shown = len(self.region.boxes)
        if self.total is None:
            if self.boxes is None:
                return f"more than {self.limit:,} boxes, first {shown:,} shown"
            return f"{self.boxes:,} boxes, first {shown:,} shown"
        plural = "s" if self.total != 1 else ""
        if self.total > shown:
            return f"{self.total:,} region{plural}, first {shown:,} shown"
        return f"{self.total:,} region{plural}"


class TooManyRegions(CapmatrixError):
    """An exact answer needs more regions than the bound allows."""


def role_gap(matrix: Matrix, role: Role, *, limit: int = MAX_REGIONS) -> Region:
    """Where no candidate of ``role`` is supported (merged).

    :raises TooManyRegions: when the gap has more than ``limit`` canonical boxes (see
        :func:`bounded_gap` for the first ones, the count and the exact size).
    """
    gap = bounded_gap(matrix, role, limit=limit)
    if gap.truncated:
        msg = f"role {role.name}: the gap has {gap.count()}; raise the limit or use bounded_gap"
        raise TooManyRegions(msg)
    return gap.region


def bounded_gap(matrix: Matrix, role: Role, *, limit: int = MAX_REGIONS) -> Gap:
    """Where no candidate of ``role`` is supported, within ``limit`` boxes (see :class:`Gap`).

    The work is bounded too: the gap's cells and boxes are counted on its decision diagram, and only
    the boxes returned are listed.
    """
    space = matrix.space
    compiled = {name: KernelBoxes.of(matrix.kernels[name], space) for name in _role_kernels(matrix, role)}
    diagram = _diagram_for(space, compiled.values())
    supported = {name: _supported(diagram, boxes) for name, boxes in compiled.items()}
    node, negated, _never = _gap_and_shadowed(diagram, matrix, role, supported)
    return _bounded(diagram, node, limit, negated=negated)


def _bounded(diagram: Diagram, node: int, limit: int, *, negated: bool = False) -> Gap:
    """The region of ``node`` (its complement when ``negated``) within ``limit`` boxes."""
    space = diagram.space
    boxes = diagram.count_boxes(node, negated=negated)
    cells = diagram.cells(node, negated=negated)
    if boxes <= limit:
        region = Region(space, diagram.boxes(node, negated=negated), disjoint=True).merged()
        return Gap(region, len(region.boxes), cells, limit, boxes)
    shown = diagram.boxes(node, limit, negated=negated)
    return Gap(Region(space, shown, disjoint=True), None, cells, limit, boxes)


def _role_findings(
    matrix: Matrix, role: Role, diagram: Diagram, supported: Mapping[str, int], *, limit: int
) -> Iterator[Finding]:
    node, negated, never = _gap_and_shadowed(diagram, matrix, role, supported)
    gap = _bounded(diagram, node, limit, negated=negated)
    shadowed = [(c, areas(Region(matrix.space, diagram.boxes(supported[c], limit), disjoint=True)))
                for c in never]
    return _role_report(matrix, role, gap, shadowed)


def _role_report(
    matrix: Matrix, role: Role, gap: Gap, shadowed: list[tuple[str, tuple[Area, ...]]]
) -> Iterator[Finding]:
    """C108 for the gap and C109 for each candidate never selected (with where it is supported)."""
    space = matrix.space
    if gap.region:
        found = tuple(Area(space, box) for box in gap.region.boxes)
        share = gap.cells / space.cells(space.full_box())
        yield _finding(
            "C108",
            f"role {role.name}: no candidate is supported in {gap.count()} "
            f"({share:.1%} of the universe), e.g. {found[0].description}",
            locations=(role.location,), kernels=tuple(role.candidates),
            witness=Witness.at(space, found[0].witness, role=role.name), regions=found,
            subject=f"role {role.name}",
        )
    for candidate, found in shadowed:
        kernel = matrix.kernels[candidate]
        yield _finding(
            "C109",
            f"role {role.name}: candidate {candidate} is never selected: earlier candidates "
            f"cover everywhere it is supported",
            locations=(role.location, kernel.location), kernels=(candidate,),
            witness=Witness.at(space, found[0].witness, role=role.name), regions=found,
            subject=f"role {role.name} candidate {candidate}",
        )


# --------------------------------------------------------------------------------------------------
# Roles of decision-table-shaped matrices: the partition, split like the table


def _table_role_findings(
    matrix: Matrix, role: Role, compiled: Mapping[str, KernelBoxes], supported: Mapping[str, Region],
    *, limit: int,
) -> Iterator[Finding]:
    space = matrix.space
    if role.orders:
        shown: list[Box] = []
        cells = 0
        counted: int | None = 0
        applied: list[Box] = []
        for order in role.orders:
            present = [c for c in order.candidates if c in compiled]
            for root in order.area:
                part = _gap_within(space, [compiled[c] for c in present], [supported[c] for c in present],
                                   root, limit)
                shown.extend(part.region.boxes[: max(0, limit - len(shown))])
                cells += part.cells
                counted = None if counted is None or part.total is None else counted + part.total
            applied.extend(order.area)
        rest = Region.full(space) - Region(space, applied, disjoint=True)
        shown.extend(rest.boxes[: max(0, limit - len(shown))])
        cells += rest.cells()
        counted = None if counted is None else counted + len(rest.boxes)
        region = Region(space, shown, disjoint=True).merged()
        total = len(region.boxes) if counted is not None and counted <= limit else None
        gap = Gap(region, total, cells, limit)
        winners = role_regions(matrix, role)
        never = [c for c in role.candidates if c in compiled and supported[c] and c not in winners]
    else:
        present = [c for c in role.candidates if c in compiled]
        gap = _gap_within(space, [compiled[c] for c in present], [supported[c] for c in present],
                          None, limit)
        never = []
        earlier: list[Box] = []
        for candidate in present:
            own = supported[candidate]
            if own and earlier and all(uncovered(space, box, earlier) is None for box in own.boxes):
                never.append(candidate)
            earlier.extend(own.boxes)
    return _role_report(matrix, role, gap, [(c, areas(supported[c])) for c in never])


def _gap_within(
    space: Space, compiled: list[KernelBoxes], regions: list[Region], root: Box | None, limit: int
) -> Gap:
    """Where none of the candidates is supported within ``root``, bounded (see :class:`Gap`)."""
    label: Callable[[int], bool]
    relevant: Callable[[int, int], int]
    boxes_of: list[Box] = []
    merged = [r.merged() for r in regions]
    # The smaller input wins: the candidates' supported boxes, or their rules' boxes.
    if sum(len(r.boxes) for r in merged) <= sum(len(c.boxes) for c in compiled):
        for region in merged:
            boxes_of.extend(region.boxes)

        def label(live: int) -> bool:
            return bool(live)

        def relevant(live: int, covering: int) -> int:
            return covering & -covering if covering else live
    else:
        parts: list[tuple[int, int]] = []
        for c in compiled:
            offset = len(boxes_of)
            boxes_of.extend(c.boxes)
            parts.append((c.grants << offset, c.exclusions << offset))

        def label(live: int) -> bool:
            return any(live & g and not live & e for g, e in parts)

        def relevant(live: int, covering: int) -> int:
            keep = 0
            for g, e in parts:
                kept, decided = reduce_kernel(live, covering, g, e)
                keep |= kept
                if decided:
                    break
            return keep

    try:
        found = partition(space, boxes_of, label, relevant=relevant, local=True, root=root,
                          limit=limit, watch=False)
    except PartitionLimit:
        first, _ = find(space, boxes_of, label, want=False, limit=limit, root=root, relevant=relevant)
        cells = measure(space, boxes_of, label, root=root, relevant=relevant).get(False, 0)
        return Gap(Region(space, first, disjoint=True).merged(), None, cells, limit)
    whole = Region(space, found.get(False, []), disjoint=True).merged()
    total = len(whole.boxes)
    if total <= limit:
        return Gap(whole, total, whole.cells(), limit, total)
    shown = Region(space, whole.boxes[:limit], disjoint=True).merged()
    return Gap(shown, total, whole.cells(), limit, total)
