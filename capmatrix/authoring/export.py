"""The compiled matrix as a documented, versioned JSON artifact for readers without Python.

:func:`export` turns a :class:`~capmatrix.matrix.Matrix` into plain JSON data: the axes with their
universes, every kernel's rules as boxes (per named axis, the known values the rule admits) with the
structured condition for values outside the universe, reason, source and status, the checks an engine
asks at start once it chose a kernel (``start_checks``), the roles, the model
families and a summary of the evidence. ``capmatrix/schema/export.schema.json`` describes it and
``docs/export.md`` gives the evaluation semantics and the compatibility rules of ``format_version``.

The output is deterministic: matrix order, no timestamps, every path relative to the matrix root
(written ``capabilities/...``).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capmatrix.authoring._files import read_json
from capmatrix.authoring.evidence import EVIDENCE_FORMAT, compare
from capmatrix.errors import CapmatrixError, InvalidFile

if TYPE_CHECKING:
    from capmatrix.matrix import Matrix
    from capmatrix.model import Axis, Boxes, Condition, Location, Rule

__all__ = ["FORMAT", "FORMAT_VERSION", "SCHEMA_PATH", "dumps", "export"]

#: The ``format`` field of every artifact.
FORMAT = "capmatrix-export"
#: ``MAJOR.MINOR``: MINOR grows when fields are added (readers ignore fields they do not know);
#: MAJOR grows when a field changes meaning or goes away (readers refuse a MAJOR they do not know).
FORMAT_VERSION = "1.5"
#: The JSON Schema of the artifact, shipped in the package.
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "export.schema.json"


class _Paths:
    def __init__(self, matrix: Matrix) -> None:
        self.show = matrix.show_path

    def location(self, location: Location) -> dict[str, object]:
        out: dict[str, object] = {"file": self.show(location.path)}
        if location.line is not None:
            out["line"] = location.line
        if location.column is not None:
            out["column"] = location.column
        return out


def _text(value: str | None) -> str:
    return " ".join((value or "").split())


def _axis(axis: Axis) -> dict[str, object]:
    out: dict[str, object] = {
        "type": str(axis.type),
        "values": list(axis.known),
        "description": _text(axis.description),
    }
    if axis.default is not None:
        out["default"] = axis.default
    if axis.optional:
        out["optional"] = True
    if axis.environment:
        out["environment"] = True
    if axis.minimum is not None:
        out["min"] = axis.minimum
    if axis.maximum is not None:
        out["max"] = axis.maximum
    if axis.families:
        out["families"] = {name: list(members) for name, members in axis.families.items()}
    if axis.cuts:
        out["cuts"] = [_condition(cut) for cut in axis.cuts]
    if axis.extra:
        # An axis left open ranges over every class of ints, not only the listed values: a reader
        # deciding it over ``values`` alone would call sm open supported where sm 48 is not.
        out["classes"] = [
            {"value": v, "text": axis.describe(v)} for v in axis.values[len(axis.values) - axis.extra:]
        ]
    if axis.spellings:
        out["spellings"] = dict(axis.spellings)
    if axis.aliases:
        out["aliases"] = dict(axis.aliases)
    return out


def _condition(cond: Condition) -> dict[str, object]:
    intervals = []
    for interval in cond.intervals:
        item: dict[str, object] = {}
        if interval.low is not None:
            item["low"] = interval.low
            item["low_inclusive"] = interval.low_inclusive
        if interval.high is not None:
            item["high"] = interval.high
            item["high_inclusive"] = interval.high_inclusive
        intervals.append(item)
    # Sets of values print in universe-independent order: by type name, then value.
    values = sorted(cond.values, key=lambda v: (type(v).__name__, v))
    out: dict[str, object] = {
        "text": cond.text, "values": values, "intervals": intervals, "negated": cond.negated,
        "multiple_of": list(cond.moduli),
    }
    if cond.optional:
        out["admits_none"] = cond.admits_none
    if cond.cuts:  # a class condition: an int's signature over its axis's cuts decides
        out["axis"] = cond.axis
        out["signatures"] = [hex(s) for s in sorted(cond.signatures)]
    return out


def _when(boxes: Boxes, axes: dict[str, Axis]) -> list[dict[str, object]]:
    """A union of boxes (a derived row's or a role order's ``when``), as data.

    Per box, per axis it names: the universe values admitted and the condition (for values outside).
    """
    return [
        {
            name: {"values": [v for v in axes[name].known if cond.contains(v)],
                   "condition": _condition(cond)}
            for name, cond in box.items()
        }
        for box in boxes
    ]


def _rule(rule: Rule, axes: dict[str, Axis], paths: _Paths) -> dict[str, object]:
    box = {
        name: [v for v in axes[name].known if cond.contains(v)]
        for name, cond in rule.conditions.items()
    }
    out: dict[str, object] = {
        "id": rule.id,
        "effect": str(rule.effect),
        "box": box,
        "conditions": {name: _condition(cond) for name, cond in rule.conditions.items()},
        "reason": _text(rule.reason),
        "source": _text(rule.source),
        "status": str(rule.status),
        "location": paths.location(rule.location),
    }
    if rule.verified:
        out["verified"] = dict(rule.verified)
    return out


def _evidence_file(path: Path, matrix: Matrix, paths: _Paths) -> dict[str, object]:
    out: dict[str, object] = {"file": paths.show(str(path))}
    try:
        data = read_json(path, str(out["file"]))
    except InvalidFile as exc:
        out["problem"] = f"not readable as JSON: {exc}"
        return out
    if not isinstance(data, dict):
        out["problem"] = "not a JSON object"
        return out
    env = data.get("environment")
    if isinstance(env, dict):
        out["environment"] = {
            k: env[k] for k in ("gpu", "sm", "torch", "cuda", "cudnn") if env.get(k) is not None
        }
    cases = data.get("cases")
    if isinstance(cases, list):
        out["cases"] = len(cases)
    kernels = data.get("kernels")
    if isinstance(kernels, list):
        out["kernels"] = [str(k) for k in kernels]
    if data.get("format") != EVIDENCE_FORMAT:
        # A recorded source (a cubin listing, an engine's selection table), not probe results.
        out["kind"] = "record"
        if isinstance(data.get("format"), str):
            out["record_format"] = data["format"]
        return out
    out["kind"] = "probe"
    try:
        result = compare(data, matrix)
    except (ValueError, KeyError, TypeError, CapmatrixError) as exc:
        out["problem"] = " ".join(f"not compared with the matrix: {exc}".split())
    else:
        out["checks"] = result.checks
        out["disagreements"] = len(result.disagreements)
        out["notes"] = len(result.notes)
    return out


def export(matrix: Matrix) -> dict[str, Any]:
    """The artifact of ``matrix``, as JSON-ready data (see ``docs/export.md``)."""
    paths = _Paths(matrix)
    axes = dict(matrix.axes)
    every_axis = {**axes, **{name: d.axis for name, d in matrix.derived.items()}}
    derived = {
        name: {
            **_axis(d.axis),
            "rows": [{"value": row.value, "when": _when(row.when, every_axis)} for row in d.rows],
        }
        for name, d in matrix.derived.items()
    }
    kernels: dict[str, object] = {}
    for kernel in matrix.kernels.values():
        named = {a for rule in kernel.rules for a in rule.conditions}
        entry: dict[str, object] = {
            "kind": kernel.kind,
            "description": _text(kernel.description),
            "relevant_axes": [a for a in axes if a in named],
            "location": paths.location(kernel.location),
            "rules": [_rule(rule, axes, paths) for rule in kernel.rules],
        }
        if kernel.engine is not None:
            entry["engine"] = kernel.engine
        pins = matrix.pins(kernel)
        if pins:
            entry["axes"] = pins
        if kernel.source is not None:
            entry["source"] = _text(kernel.source)
        if kernel.guards is not None and kernel.guards.caught_by:
            # Asked by the engine at start after it chose this kernel (docs/export.md, step 6).
            entry["start_checks"] = list(kernel.guards.caught_by)
        kernels[kernel.name] = entry
    roles: dict[str, object] = {}
    for role in matrix.roles.values():
        item: dict[str, object] = {
            "description": _text(role.description),
            "candidates": list(role.candidates),
            "axes": matrix.pins(role),
            "location": paths.location(role.location),
        }
        if role.source is not None:
            item["source"] = _text(role.source)
        if role.asks_first:  # already composed into the orders: for readers that list roles
            item["asks_first"] = list(role.asks_first)
        if role.orders:
            item["orders"] = [
                {"when": _when(order.when, every_axis), "candidates": list(order.candidates),
                 "location": paths.location(order.location)}
                for order in role.orders
            ]
        roles[role.name] = item
    models: dict[str, object] = {}
    for model in matrix.models.values():
        models[model.name] = {
            "description": _text(model.description),
            "axes": dict(model.axes),
            "hf_ids": list(model.hf_ids),
            "hf_model_types": list(model.hf_model_types),
            "source": _text(model.source),
            "location": paths.location(model.location),
        }
    statuses = Counter(str(rule.status) for rule in matrix.rules)
    folder = Path(matrix.root) / "evidence"
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "generator": "capmatrix",
        "files": [paths.show(f) for f in matrix.files],
        "axes": {name: _axis(axis) for name, axis in axes.items()},
        "derived": derived,
        "kernels": kernels,
        "roles": roles,
        "models": models,
        "evidence": {
            "rule_status": {status: statuses[status] for status in sorted(statuses)},
            "files": [_evidence_file(f, matrix, paths) for f in files],
        },
    }


def dumps(data: dict[str, Any]) -> str:
    """The artifact as text: UTF-8 JSON, one space of indentation, a final newline."""
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"
