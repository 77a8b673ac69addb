"""The peers: one capmatrix kernel's rules as a zen-engine JDM decision table and as a Cedar policy set.

Both translations are generic (any kernel of any matrix) and keep capmatrix's semantics: a kernel
supports a query when some grant applies and no exclusion does.

- zen-engine: one decision table, hit policy ``first``, exclusion rows before grant rows, output
  ``effect``; supported when the first hit is a grant.
- Cedar: a ``permit`` per grant and a ``forbid`` per exclusion, on resource ``Kernel::"<name>"``, with
  the axis values in the request context (Cedar's default deny and forbid-overrides-permit are exactly
  capmatrix's rule semantics).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capmatrix import Matrix
    from capmatrix.model import AxisValue, Condition, Interval, Rule

__all__ = ["CedarDecision", "ZenDecision", "cedar_policies", "zen_table"]


def _literal(value: AxisValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value)


def _interval_test(iv: Interval, subject: str, conj: str) -> str:
    parts = []
    if iv.low is not None:
        parts.append(f"{subject} {'>=' if iv.low_inclusive else '>'} {iv.low}")
    if iv.high is not None:
        parts.append(f"{subject} {'<=' if iv.high_inclusive else '<'} {iv.high}")
    return f" {conj} ".join(parts) if parts else "true"


def _ordered(values: frozenset[AxisValue]) -> list[AxisValue]:
    return sorted(values, key=lambda v: (type(v).__name__, str(v)))


# --------------------------------------------------------------------------------------------------
# zen-engine


def _zen_cell(cond: Condition) -> str:
    tests = []
    values = _ordered(cond.values)
    if len(values) == 1:
        tests.append(f"$ == {_literal(values[0])}")
    elif values:
        tests.append(f"$ in [{', '.join(_literal(v) for v in values)}]")
    tests.extend(f"({_interval_test(iv, '$', 'and')})" for iv in cond.intervals)
    body = " or ".join(tests) or "false"
    return f"not ({body})" if cond.negated else body


def zen_table(matrix: Matrix, kernel: str) -> dict[str, Any]:
    """The JDM graph (input -> decision table -> output) of ``kernel``'s rules."""
    rules: list[Rule] = sorted(matrix.kernels[kernel].rules, key=lambda r: str(r.effect) != "exclude")
    axes = [a for a in matrix.axes if any(a in r.conditions for r in rules)]
    inputs = [{"id": f"in_{a}", "name": a, "type": "expression", "field": a} for a in axes]
    rows = []
    for rule in rules:
        row = {"_id": rule.id, "out_effect": json.dumps(str(rule.effect))}
        for a in axes:
            cond = rule.conditions.get(a)
            row[f"in_{a}"] = "" if cond is None else _zen_cell(cond)
        rows.append(row)
    table = {
        "id": "table",
        "type": "decisionTableNode",
        "name": kernel,
        "position": {"x": 200, "y": 0},
        "content": {
            "hitPolicy": "first",
            "inputs": inputs,
            "outputs": [{"id": "out_effect", "name": "effect", "type": "expression", "field": "effect"}],
            "rules": rows,
        },
    }
    return {
        "contentType": "application/vnd.gorules.decision",
        "nodes": [
            {"id": "request", "type": "inputNode", "name": "Request", "position": {"x": 0, "y": 0}},
            table,
            {"id": "response", "type": "outputNode", "name": "Response", "position": {"x": 400, "y": 0}},
        ],
        "edges": [
            {"id": "e1", "sourceId": "request", "targetId": "table", "type": "edge"},
            {"id": "e2", "sourceId": "table", "targetId": "response", "type": "edge"},
        ],
    }


class ZenDecision:
    """A compiled zen-engine decision for one kernel; ``decide(values)`` returns the verdict as a bool."""

    def __init__(self, matrix: Matrix, kernel: str) -> None:
        import zen  # noqa: PLC0415 - optional benchmark dependency

        self.engine = zen.ZenEngine()
        self.decision = self.engine.create_decision(json.dumps(zen_table(matrix, kernel)))

    def decide(self, values: dict[str, AxisValue]) -> bool:
        """Evaluate the table for a context of axis values."""
        return bool(self.decision.evaluate(values)["result"].get("effect") == "grant")


# --------------------------------------------------------------------------------------------------
# Cedar


def _cedar_test(cond: Condition) -> str:
    subject = f"context.{cond.axis}"
    tests = []
    values = _ordered(cond.values)
    if len(values) == 1:
        tests.append(f"{subject} == {_literal(values[0])}")
    elif values:
        tests.append(f"[{', '.join(_literal(v) for v in values)}].contains({subject})")
    tests.extend(f"({_interval_test(iv, subject, '&&')})" for iv in cond.intervals)
    body = " || ".join(tests) or "false"
    return f"!({body})" if cond.negated else f"({body})"


def cedar_policies(matrix: Matrix, kernel: str) -> str:
    """Cedar source: one permit per grant and one forbid per exclusion of ``kernel``."""
    out = []
    for rule in matrix.kernels[kernel].rules:
        verb = "permit" if str(rule.effect) == "grant" else "forbid"
        when = " && ".join(_cedar_test(c) for c in rule.conditions.values()) or "true"
        out.append(
            f'@id("{rule.id}")\n{verb} (principal, action == Action::"use", '
            f'resource == Kernel::"{kernel}")\nwhen {{ {when} }};'
        )
    return "\n".join(out)


class CedarDecision:
    """A parsed Cedar policy set for one kernel; ``decide(values)`` returns the verdict as a bool."""

    def __init__(self, matrix: Matrix, kernel: str) -> None:
        import cedarpy  # noqa: PLC0415 - optional benchmark dependency

        self._is_authorized = cedarpy.is_authorized
        self.policies = cedarpy.PolicySet.from_str(cedar_policies(matrix, kernel))
        self.entities = cedarpy.Entities.from_json_str("[]")
        self.kernel = kernel

    def request(self, values: dict[str, AxisValue]) -> dict[str, Any]:
        """The authorization request for a context of axis values."""
        return {
            "principal": 'Engine::"bench"',
            "action": 'Action::"use"',
            "resource": f'Kernel::"{self.kernel}"',
            "context": values,
        }

    def decide(self, values: dict[str, AxisValue]) -> bool:
        """Ask Cedar whether the kernel may be used."""
        result = self._is_authorized(self.request(values), self.policies, self.entities)
        return bool(result.allowed)
