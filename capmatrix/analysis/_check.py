"""Static analysis of a capability matrix: findings as data, each with a stable code.

:func:`check` looks at a loaded matrix; :func:`check_path` also turns loading problems into findings, so
a broken matrix yields located findings instead of an exception. Nothing here prints: the CLI renders.
Every analysis works on boxes and regions (never cell by cell); see ``docs/analysis.md`` for the codes.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
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
from capmatrix.errors import CapabilityErrors, CapmatrixError
from capmatrix.loader import default_path, load
from capmatrix.model import AxisType, Effect, Location, _StrEnum, format_value
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

    ``max_regions`` bounds every region computed (time and memory): a kernel's supported region
    or a role's gap that needs more merged boxes is reported by its first ones, with its exact share.
    """
    space = matrix.space
    findings: list[Finding] = []
    supported: dict[str, Region | None] = {}
    compiled = {name: KernelBoxes.of(kernel, space) for name, kernel in matrix.kernels.items()}
    local = mostly_disjoint([b for c in compiled.values() for b in c.boxes])
    for name, boxes in compiled.items():
        region = _bounded_supported(space, boxes, local=local, limit=max_regions)
        supported[name] = region
        findings.extend(_kernel_findings(space, boxes, region))
    for role in matrix.roles.values():
        findings.extend(_role_findings(matrix, role, supported, local=local, limit=max_regions))
    return tuple(sorted(findings, key=Finding.sort_key))


def _bounded_supported(
    space: Space, compiled: KernelBoxes, *, local: bool, limit: int
) -> Region | None:
    """The kernel's supported region, or None when it needs more than ``limit`` boxes."""
    if local:
        return supported_region(space, compiled, local=True)
    grants, exclusions = compiled.grants, compiled.exclusions
    try:
        found = partition(
            space, compiled.boxes, lambda live: bool(live & grants) and not live & exclusions,
            relevant=lambda live, cov: reduce_kernel(live, cov, grants, exclusions)[0],
            local=False, limit=limit, watch=True,
        )
    except PartitionLimit:
        return None
    return Region(space, found.get(True, []), disjoint=True)


# --------------------------------------------------------------------------------------------------
# Per-kernel analyses


def _rule_area(space: Space, box: Box) -> tuple[Area, ...]:
    return areas(Region(space, [box], disjoint=True))


def _kernel_findings(
    space: Space, compiled: KernelBoxes, supported: Region | None
) -> Iterator[Finding]:
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
    grants_of, excl_of = compiled.grants, compiled.exclusions

    def supported_in(root: Box) -> bool:
        """Whether some cell of ``root`` is supported (for a kernel whose region is too large)."""
        found, _ = find(space, boxes, lambda live: bool(live & grants_of) and not live & excl_of,
                        want=True, limit=1, root=root,
                        relevant=lambda live, cov: reduce_kernel(live, cov, grants_of, excl_of)[0])
        return bool(found)

    # C110 kernel supports nothing
    if not (supported_in(space.full_box()) if supported is None else supported):
        yield _finding(
            "C110",
            f"kernel {name} is supported nowhere in the universe"
            + ("" if nonvacuous_grants else " (it has no grant that matches anything)"),
            locations=(kernel.location,), kernels=(name,),
        )
    # C101 dead grants: g ∩ supported = ∅ (supported ∩ g is exactly g minus the exclusions).
    if supported is not None and supported.boxes and nonvacuous_grants:
        sup_index = BoxIndex(space, supported.boxes, (1 << len(supported.boxes)) - 1)
        all_supported = (1 << len(supported.boxes)) - 1
    else:
        sup_index = None
        all_supported = 0
    excl_index = BoxIndex(space, boxes, nonvacuous_excl)
    for i in bits(nonvacuous_grants):
        box = boxes[i]
        if sup_index is not None and sup_index.intersecting(box, all_supported):
            continue
        if supported is None and supported_in(box):
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
    top = max(v for v in axis.values if isinstance(v, int))
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
        regions=_rule_area(space, box),
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
            regions=_rule_area(space, box),
        )


# --------------------------------------------------------------------------------------------------
# Roles


def role_regions(
    matrix: Matrix, role: Role, *, space: Space | None = None
) -> dict[str | None, Region]:
    """Where each candidate of ``role`` is selected (key None: where none is), as merged regions.

    Candidates that are not kernels of the matrix never win.
    """
    sp = matrix.space if space is None else space
    out: dict[str | None, list[Box]] = {}
    for candidates, root in _orders(matrix, role, sp):
        for label, found in _role_partition(matrix, candidates, sp, root).items():
            out.setdefault(label, []).extend(found)
    if role.orders and sp.names == matrix.space.names:  # where no order applies, nothing is tried
        applied = Region(sp, [b for o in role.orders for b in o.area], disjoint=True)
        out.setdefault(None, []).extend((Region.full(sp) - applied).boxes)
    return {k: Region(sp, v, disjoint=True).merged() for k, v in out.items() if v}


def _orders(
    matrix: Matrix, role: Role, space: Space
) -> list[tuple[tuple[str, ...], Box | None]]:
    """Each candidate list of ``role`` with a box where it applies (None: everywhere).

    A role whose order depends on the query answers one pair per box of each order's area; the areas
    are over the matrix's space, so a caller's narrower space gets the full role instead.
    """
    if not role.orders:
        return [(role.candidates, None)]
    if space.names != matrix.space.names:
        return [(role.candidates, None)]
    return [(order.candidates, box) for order in role.orders for box in order.area]


def _role_partition(
    matrix: Matrix, candidates: tuple[str, ...], sp: Space, root: Box | None
) -> dict[str | None, list[Box]]:
    boxes: list[Box] = []
    per_candidate: list[tuple[int, int]] = []
    for candidate in candidates:
        kernel = matrix.kernels.get(candidate)
        grants = exclusions = 0
        if kernel is not None:
            compiled = KernelBoxes.of(kernel, sp)
            offset = len(boxes)
            boxes.extend(compiled.boxes)
            grants = compiled.grants << offset
            exclusions = compiled.exclusions << offset
        per_candidate.append((grants, exclusions))

    def winner(live: int) -> str | None:
        for name, (g, e) in zip(candidates, per_candidate, strict=True):
            if live & g and not live & e:
                return name
        return None

    def relevant(live: int, covering: int) -> int:
        keep = 0
        for g, e in per_candidate:
            kept, decided = reduce_kernel(live, covering, g, e)
            keep |= kept
            if decided:
                break
        return keep

    return partition(sp, boxes, winner, relevant=relevant, root=root)


@dataclass(frozen=True, slots=True)
class Gap:
    """A role's gap within a bound: its first merged regions, how many there are, its exact size."""

    #: Merged: every region of the gap, or its first ``limit`` when there are more.
    region: Region
    #: How many merged regions the whole gap has; None when more than ``limit`` (not counted).
    total: int | None
    #: Cells of the whole gap (exact, truncated or not).
    cells: int
    limit: int

    @property
    def truncated(self) -> bool:
        """Whether ``region`` holds only part of the gap."""
        return self.total is None or self.total > len(self.region.boxes)

    def count(self) -> str:
        """``12 regions``, or ``more than 1,000 regions, first 1,000 shown``."""
        shown = len(self.region.boxes)
        if self.total is None:
            return f"more than {self.limit:,} regions, first {shown:,} shown"
        plural = "s" if self.total != 1 else ""
        if self.total > shown:
            return f"{self.total:,} region{plural}, first {shown:,} shown"
        return f"{self.total:,} region{plural}"


class TooManyRegions(CapmatrixError):
    """An exact answer needs more regions than the bound allows."""


def role_gap(
    matrix: Matrix,
    role: Role,
    supported: Mapping[str, Region | None] | None = None,
    *,
    local: bool | None = None,
    limit: int = MAX_REGIONS,
) -> Region:
    """Where no candidate of ``role`` is supported (merged).

    ``local``: the partition strategy (see :func:`capmatrix._partition.partition`); by default it is
    decided from the candidates' rules, not from their supported regions (which are disjoint boxes
    whatever the rules look like).

    :raises TooManyRegions: when the gap needs more than ``limit`` merged boxes (see
        :func:`bounded_gap` for the first ones, the count and the exact size).
    """
    gap = bounded_gap(matrix, role, supported, local=local, limit=limit)
    if gap.truncated:
        msg = f"role {role.name}: the gap has {gap.count()}; raise the limit or use bounded_gap"
        raise TooManyRegions(msg)
    return gap.region


def bounded_gap(
    matrix: Matrix,
    role: Role,
    supported: Mapping[str, Region | None] | None = None,
    *,
    local: bool | None = None,
    limit: int = MAX_REGIONS,
) -> Gap:
    """Where no candidate of ``role`` is supported, within ``limit`` merged boxes (see :class:`Gap`).

    From the candidates' supported regions when each is known (``supported``, or computed within the
    limit); else from their rules directly, with the first-supported-candidate label.
    """
    space = matrix.space
    names = dict.fromkeys([*role.candidates, *(c for o in role.orders for c in o.candidates)])
    kernels = [matrix.kernels[c] for c in names if c in matrix.kernels]
    compiled = [KernelBoxes.of(k, space) for k in kernels]
    if local is None:
        local = mostly_disjoint([b for c in compiled for b in c.boxes])
    known: dict[str, Region | None] = {}
    for kernel, boxes in zip(kernels, compiled, strict=True):
        if supported is not None and kernel.name in supported:
            known[kernel.name] = supported[kernel.name]
        else:
            known[kernel.name] = _bounded_supported(space, boxes, local=local, limit=limit)
    by_name = {k.name: c for k, c in zip(kernels, compiled, strict=True)}
    orders = _orders(matrix, role, space)
    if len(orders) == 1 and orders[0][1] is None:
        present = [c for c in orders[0][0] if c in by_name]
        return _gap_within(space, [by_name[c] for c in present], [known[c] for c in present],
                           None, local, limit)
    shown: list[Box] = []
    cells = 0
    counted: int | None = 0
    for candidates, root in orders:
        part = _gap_within(space, [by_name[c] for c in candidates if c in by_name],
                           [known[c] for c in candidates if c in by_name], root, local, limit)
        shown.extend(part.region.boxes[: max(0, limit - len(shown))])
        cells += part.cells
        counted = None if counted is None or part.total is None else counted + part.total
    if role.orders:  # where no order applies, no candidate is tried
        rest = Region.full(space) - Region(space, [b for o in role.orders for b in o.area],
                                           disjoint=True)
        shown.extend(rest.boxes[: max(0, limit - len(shown))])
        cells += rest.cells()
        counted = None if counted is None else counted + len(rest.boxes)
    region = Region(space, shown, disjoint=True).merged()
    # Several pieces (a query-dependent order): past the bound, the merged count is not known.
    total = len(region.boxes) if counted is not None and counted <= limit else None
    return Gap(region, total, cells, limit)


def _gap_within(
    space: Space,
    compiled: list[KernelBoxes],
    regions: list[Region | None],
    root: Box | None,
    local: bool,
    limit: int,
) -> Gap:
    """Where none of the candidates is supported within ``root``, bounded (see :func:`bounded_gap`)."""
    label: Callable[[int], bool]
    relevant: Callable[[int, int], int]
    boxes_of: list[Box] = []
    merged = [None if r is None else r.merged() for r in regions]
    # The smaller input wins: the candidates' supported boxes (when known), or their rules' boxes.
    if all(r is not None for r in merged) and sum(len(r.boxes) for r in merged if r is not None) <= sum(
        len(c.boxes) for c in compiled
    ):
        for region in merged:
            boxes_of.extend(region.boxes)  # type: ignore[union-attr]

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
        found = partition(space, boxes_of, label, relevant=relevant, local=local, root=root,
                          limit=limit, watch=False)
    except PartitionLimit:
        first, _ = find(space, boxes_of, label, want=False, limit=limit, root=root,
                        relevant=relevant)
        cells = measure(space, boxes_of, label, root=root, relevant=relevant).get(False, 0)
        return Gap(Region(space, first, disjoint=True).merged(), None, cells, limit)
    whole = Region(space, found.get(False, []), disjoint=True).merged()
    total = len(whole.boxes)
    if total <= limit:
        return Gap(whole, total, whole.cells(), limit)
    shown = Region(space, whole.boxes[:limit], disjoint=True).merged()
    return Gap(shown, total, whole.cells(), limit)


def _role_findings(
    matrix: Matrix, role: Role, supported: Mapping[str, Region | None], *, local: bool, limit: int
) -> Iterator[Finding]:
    space = matrix.space
    gap = bounded_gap(matrix, role, supported, local=local, limit=limit)
    if gap.region:
        found = areas(gap.region)
        share = gap.cells / space.cells(space.full_box())
        yield _finding(
            "C108",
            f"role {role.name}: no candidate is supported in {gap.count()} "
            f"({share:.1%} of the universe), e.g. {found[0].description}",
            locations=(role.location,), kernels=tuple(role.candidates),
            witness=Witness.at(space, found[0].witness, role=role.name), regions=found,
        )
    winners = role_regions(matrix, role) if role.orders else None
    earlier: list[Box] = []
    for candidate in role.candidates:
        kernel = matrix.kernels.get(candidate)
        if kernel is None:
            continue
        own = supported[candidate]
        if own is None:
            earlier = []  # too large to list: later candidates are not compared (a bound, not a claim)
            continue
        if winners is not None:  # a query-dependent order: never selected = wins nowhere
            never = bool(own) and candidate not in winners
        else:
            never = bool(own) and bool(earlier) and all(
                uncovered(space, box, earlier) is None for box in own.boxes)
        if never:
            found = areas(own)
            yield _finding(
                "C109",
                f"role {role.name}: candidate {candidate} is never selected: earlier candidates "
                f"cover everywhere it is supported",
                locations=(role.location, kernel.location), kernels=(candidate,),
                witness=Witness.at(space, found[0].witness, role=role.name), regions=found,
            )
        earlier.extend(own.boxes)
