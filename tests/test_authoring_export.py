"""The exported artifact round-trips: an evaluator written here, over the JSON alone, answers like Python.

The evaluator below reads only the artifact (axes, rule boxes and conditions, models, roles) and follows
the semantics of docs/export.md; it shares no code with the resolver. It is checked against
``resolve`` / ``select``:

- every cell of every kernel's universe (the product of the axes its rules name), block by block: the
  resolver answers a block with its trailing axes left open (verdict and residual region), the evaluator
  answers each cell from the rule boxes; both become bitmaps over the block and must be equal;
- random complete queries (some with int values outside the universe), verdict and deciding rules;
- every model (and one Hugging Face id of each) with every kernel and SM, leaving open what the model
  leaves open (supported / unsupported / depends);
- every role with every model, SM and speculative-decoding mode, and random complete queries: the
  chosen kernel and the selection's verdict;
- the start checks (step 6) of vLLM's roles and kernels over SMs, KV-cache dtypes and models: the
  refusing gate and the verdict after it, as ``capmatrix select`` answers them.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import stride

import capmatrix
from capmatrix import ANY, KernelQuery, Verdict
from capmatrix._core.start import refused_at_start
from capmatrix._shipped.default import _resolver
from capmatrix.authoring.cli import main
from capmatrix.authoring.export import FORMAT_VERSION, SCHEMA_PATH, dumps, export
from capmatrix.resolver import CLOSEST_GRANTS

#: The open part of a block is at most this many cells (by default; tests/test_authoring_codegen_cpp.py's
#: driver prints each cell of a block on one line).
BLOCK_CELLS = 10_000
#: The open part of a block of the round trip here: the resolver answers a block in one call and the
#: evaluator as a few big-integer operations per rule, so wide blocks cost little more than narrow
#: ones and far fewer of them are needed (every cell is still compared).
ROUND_TRIP_BLOCK_CELLS = 1_000_000
SAMPLES_PER_KERNEL = 150
Value = str | int | bool


# --------------------------------------------------------------------------------------------------
# The independent evaluator (artifact only)


def _same(a: Value, b: Value) -> bool:
    return a == b and type(a) is type(b)


def _in_interval(interval: dict[str, Any], value: Value) -> bool:
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    if "low" in interval:
        low = interval["low"]
        if value < low or (value == low and not interval["low_inclusive"]):
            return False
    if "high" in interval:
        high = interval["high"]
        if value > high or (value == high and not interval["high_inclusive"]):
            return False
    return True


def _signature(cuts: list[dict[str, Any]], value: Value) -> int:
    """Which of an axis's cuts an int meets, as a bit set."""
    return sum(1 << i for i, cut in enumerate(cuts) if _holds(cut, value, {}))


def _holds(cond: dict[str, Any], value: Value, axes: dict[str, Any]) -> bool:
    """A condition, for a value outside the axis's universe."""
    if "admits_none" in cond and _same(value, "none"):
        return bool(cond["admits_none"])
    if "signatures" in cond and type(value) is int:
        wanted = {int(s, 16) for s in cond["signatures"]}
        return _signature(axes[cond["axis"]]["cuts"], value) in wanted
    hit = (
        any(_same(v, value) for v in cond["values"])
        or any(_in_interval(i, value) for i in cond["intervals"])
        or (type(value) is int and any(value % m == 0 for m in cond["multiple_of"]))
    )
    return hit != bool(cond["negated"])


class Evaluator:
    def __init__(self, data: dict[str, Any]) -> None:
        assert data["format"] == "capmatrix-export"
        assert data["format_version"].split(".")[0] == "1"
        self.axes: dict[str, Any] = data["axes"]
        self.kernels: dict[str, Any] = data["kernels"]
        self.models: dict[str, Any] = data["models"]
        self.roles: dict[str, Any] = data["roles"]
        self.derived: dict[str, Any] = data["derived"]
        # The same (rule, axis, value) is asked for in every block of a kernel's cells: remembered.
        self._admits: dict[tuple[int, str, str, Value], bool] = {}
        # So is a rule's spread over a block's open axes (it reads no fixed value): remembered.
        self._spreads: dict[tuple[int, tuple[str, ...], bool], int] = {}

    def known(self, axis: str, value: Value) -> int | None:
        return next((i for i, v in enumerate(self.axes[axis]["values"]) if _same(v, value)), None)

    def universe(self, axis: str) -> list[Value]:
        """What an open axis ranges over: the listed values, then an int of each unlisted class."""
        spec = self.axes[axis]
        return [*spec["values"], *(c["value"] for c in spec.get("classes", ()))]

    def admits(self, rule: dict[str, Any], axis: str, value: Value) -> bool:
        if axis not in rule["box"]:
            return True
        key = (id(rule), axis, type(value).__name__, value)
        found = self._admits.get(key)
        if found is None:
            if self.known(axis, value) is not None:
                found = any(_same(v, value) for v in rule["box"][axis])
            else:
                found = _holds(rule["conditions"][axis], value, self.axes)
            self._admits[key] = found
        return found

    def model(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] | None = self.models.get(name)
        if found is not None:
            return found
        for entry in self.models.values():
            if "/" in name and name.lower() in (h.lower() for h in entry["hf_ids"]):
                return dict(entry)
        raise LookupError(name)

    def values(
        self, given: dict[str, Value], model: str | None, role_axes: dict[str, Value] | None = None
    ) -> dict[str, Value]:
        """Effective values: the query, the role's (or kernel's) axes, the model, then the default."""
        from_model = self.model(model)["axes"] if model is not None else {}
        out: dict[str, Value] = {}
        for name, axis in self.axes.items():
            for layer in (given, role_axes or {}, from_model):
                if name in layer:
                    out[name] = layer[name]
                    break
            else:
                if "default" in axis:
                    out[name] = axis["default"]
        for name, value in out.items():
            if self.axes[name]["type"] == "enum" and self.known(name, value) is None:
                raise ValueError(f"{value!r} is not a value of {name}")
        return out

    def bitmap(
        self, kernel: str, values: dict[str, Value], open_axes: list[str], *, classes: bool = True
    ) -> int:
        """The supported cells over ``open_axes`` (first axis fastest), as one big integer.

        Over each open axis's universe, or without ``classes`` over its listed values alone.
        """
        granted = removed = 0
        for rule in self.kernels[kernel]["rules"]:
            # An axis the rule's box does not name admits every value: only the named ones are asked.
            if not all(self.admits(rule, a, values[a]) for a in rule["box"]
                       if a in values and a not in open_axes):
                continue
            cells = self.spread(rule, open_axes, classes=classes)
            if rule["effect"] == "grant":
                granted |= cells
            else:
                removed |= cells
        return granted & ~removed

    def spread(self, rule: dict[str, Any], open_axes: list[str], *, classes: bool = True) -> int:
        """The cells over ``open_axes`` (first axis fastest) that ``rule`` admits, as one big integer.

        Over each open axis's universe, or without ``classes`` over its listed values alone.
        """
        key = (id(rule), tuple(open_axes), classes)
        found = self._spreads.get(key)
        if found is None:
            found, width = 1, 1
            for axis in open_axes:
                universe = self.universe(axis) if classes else self.axes[axis]["values"]
                found *= sum(1 << (j * width) for j, v in enumerate(universe) if self.admits(rule, axis, v))
                width *= len(universe)
            self._spreads[key] = found
        return found

    def resolve(self, kernel: str, values: dict[str, Value]) -> str:
        named = self.kernels[kernel]["relevant_axes"]
        open_axes = [a for a in named if a not in values]
        full = (1 << math.prod(len(self.universe(a)) for a in open_axes)) - 1
        got = self.bitmap(kernel, values, open_axes)
        return "supported" if got == full else "unsupported" if got == 0 else "depends"

    def deciding(self, kernel: str, values: dict[str, Value]) -> tuple[set[str], set[str]]:
        """For a complete query: the grants and the exclusions that apply."""
        grants: set[str] = set()
        excludes: set[str] = set()
        for rule in self.kernels[kernel]["rules"]:
            if all(self.admits(rule, a, values[a]) for a in rule["box"]):
                (grants if rule["effect"] == "grant" else excludes).add(rule["id"])
        return grants, excludes

    def in_when(self, when: list[dict[str, Any]], values: dict[str, Value]) -> bool | None:
        """Whether ``values`` lie in a union of boxes; None when an axis it needs is open."""
        undecided = False
        for box in when:
            inside: bool | None = True
            for axis, part in box.items():
                if axis not in values:
                    inside = None
                    continue
                value = values[axis]
                universe = (self.axes.get(axis) or self.derived[axis])["values"]
                if any(_same(v, value) for v in universe):
                    hit = any(_same(v, value) for v in part["values"])
                else:
                    hit = _holds(part["condition"], value, self.axes)
                if not hit:
                    inside = False
                    break
            if inside:
                return True
            if inside is None:
                undecided = True
        return None if undecided else False

    def candidates(self, role: str, values: dict[str, Value]) -> tuple[list[str], bool]:
        """The role's candidate list for ``values`` and whether the choice of list was decided."""
        entry = self.roles[role]
        if "orders" not in entry:
            return list(entry["candidates"]), True
        full = dict(values)
        for name, table in self.derived.items():
            for row in table["rows"]:
                inside = self.in_when(row["when"], full) if row["when"] else True
                if inside is None:
                    break
                if inside:
                    full[name] = row["value"]
                    break
        for order in entry["orders"]:
            inside = self.in_when(order["when"], full) if order["when"] else True
            if inside is None:
                return [], False
            if inside:
                return list(order["candidates"]), True
        return [], True

    def select(self, role: str, given: dict[str, Value], model: str | None) -> tuple[str | None, str]:
        entry = self.roles[role]
        values = self.values(given, model, entry["axes"])
        candidates, decided = self.candidates(role, values)
        depends, winner = not decided, None
        for candidate in candidates:
            verdict = self.resolve(candidate, values)
            depends = depends or verdict == "depends"
            if verdict == "supported":
                winner = candidate
                break
        return winner, "depends" if depends else "supported" if winner else "unsupported"

    def start_refusal(self, kernel: str, given: dict[str, Value], model: str | None,
                      role_axes: dict[str, Value] | None = None) -> tuple[str, str] | None:
        """Step 6: the first start check of ``kernel`` that is not supported, with its verdict; or None.

        Each check is asked alone with the same question: its own axes fill what the query and the
        role's axes leave unset.
        """
        for gate in self.kernels[kernel].get("start_checks", ()):
            pins = {**self.kernels[gate].get("axes", {}), **(role_axes or {})}
            verdict = self.resolve(gate, self.values(given, model, pins))
            if verdict != "supported":
                return gate, verdict
        return None

    def select_at_start(
        self, role: str, given: dict[str, Value], model: str | None
    ) -> tuple[str | None, str, str | None]:
        """``select`` with the winner's start checks after it: winner, verdict, refusing gate."""
        winner, verdict = self.select(role, given, model)
        role_axes = self.roles[role]["axes"]
        refusal = None if winner is None else self.start_refusal(winner, given, model, role_axes)
        if refusal is None:
            return winner, verdict, None
        return winner, refusal[1] if verdict == "supported" else verdict, refusal[0]


# --------------------------------------------------------------------------------------------------
# Fixtures and helpers


@pytest.fixture(scope="module")
def matrix() -> capmatrix.Matrix:
    return capmatrix.load()


@pytest.fixture(scope="module")
def data(matrix: capmatrix.Matrix) -> dict[str, Any]:
    # Through the text form, as a reader in another language gets it.
    return json.loads(dumps(export(matrix)))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def evaluator(data: dict[str, Any]) -> Evaluator:
    return Evaluator(data)


def _residual_bitmap(resolution: capmatrix.Resolution, open_axes: list[str],
                     matrix: capmatrix.Matrix, *, classes: bool = False,
                     picks: dict[str, list[int]] | None = None) -> int:
    """The resolver's answer over the block's open axes, as a bitmap in the evaluator's cell order.

    Over each open axis's listed values, and with ``classes`` its classes' representatives after them
    (the artifact's ``values``, then its ``classes``: the resolver's order too); with ``picks``, over
    the values of those indices only, in that order.
    """
    def chosen(axis: str) -> list[int]:
        if picks is not None:
            return picks[axis]
        return list(range(len(matrix.axes[axis].values if classes else matrix.axes[axis].known)))

    full = (1 << math.prod(len(chosen(a)) for a in open_axes)) - 1
    if resolution.verdict is Verdict.SUPPORTED:
        return full
    if resolution.verdict is Verdict.UNSUPPORTED:
        return 0
    assert resolution.residual is not None
    assert not resolution.residual_truncated, "the block is too large for an exact residual"
    assert list(resolution.residual.space.names) == open_axes
    out = 0
    for box in resolution.residual.boxes:
        cells, width = 1, 1
        for axis, mask in zip(open_axes, box, strict=True):
            cells *= sum(1 << (p * width) for p, j in enumerate(chosen(axis)) if mask >> j & 1)
            width *= len(chosen(axis))
        out |= cells
    return out


def test_bitmap_cell_order_is_first_axis_fastest(evaluator: Evaluator) -> None:
    # sm fastest, then attention: cell (sm index i, attention index j) is bit i + j * len(sm).
    kernel = next(k for k, v in evaluator.kernels.items()
                  if {"sm", "attention"} <= set(v["relevant_axes"]))
    sms = evaluator.axes["sm"]["values"]
    atts = evaluator.axes["attention"]["values"]
    fixed = {a: evaluator.axes[a]["values"][0] for a in evaluator.axes if a not in {"sm", "attention"}}
    got = evaluator.bitmap(kernel, fixed, ["sm", "attention"])
    for j, att in enumerate(atts):
        for i, sm in enumerate(sms):
            values = {**fixed, "sm": sm, "attention": att}
            grants, excludes = evaluator.deciding(kernel, values)
            assert bool(got >> (i + j * len(sms)) & 1) == bool(grants and not excludes)


# --------------------------------------------------------------------------------------------------
# The artifact itself


def test_artifact_validates_against_its_schema(data: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(data)
    assert data["format_version"] == FORMAT_VERSION


def test_schema_rejects_a_broken_artifact(data: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    broken = json.loads(json.dumps(data))
    kernel = next(iter(broken["kernels"].values()))
    kernel["rules"][0]["effect"] = "allow"
    with pytest.raises(jsonschema.ValidationError, match="allow"):
        jsonschema.Draft202012Validator(schema).validate(broken)
    broken = json.loads(json.dumps(data))
    broken["format_version"] = "2.0"
    with pytest.raises(jsonschema.ValidationError, match=r"2\.0"):
        jsonschema.Draft202012Validator(schema).validate(broken)


def test_artifact_carries_the_matrix(matrix: capmatrix.Matrix, data: dict[str, Any]) -> None:
    assert list(data["axes"]) == list(matrix.axes)
    assert list(data["kernels"]) == list(matrix.kernels)
    assert list(data["roles"]) == list(matrix.roles)
    assert list(data["models"]) == list(matrix.models)
    for name, kernel in matrix.kernels.items():
        rules = data["kernels"][name]["rules"]
        assert [r["id"] for r in rules] == [r.id for r in kernel.rules]
        for rule, out in zip(kernel.rules, rules, strict=True):
            assert out["status"] == str(rule.status)
            assert out["reason"] == " ".join(rule.reason.split())
            assert out["location"]["file"].startswith("capabilities/")
            assert out["location"]["line"] == rule.location.line
    counted = sum(data["evidence"]["rule_status"].values())
    assert counted == len(matrix.rules)
    probes = [f for f in data["evidence"]["files"] if f.get("kind") == "probe"]
    assert probes
    assert all(f["disagreements"] == 0 and f["checks"] > 0 for f in probes)


@pytest.mark.parametrize(("text", "problem"), [
    ('{"format": 1, "environment": {"sm": Infinity}, "cases": []}', "Infinity is no JSON number"),
    ('{"format": 1, "environment": {"sm": 1e999}, "cases": []}', "1e999 is too large for a number"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
    ('{"format": 1, "environment": {"sm": 90.5}, "cases": []}', "environment.sm must be an integer"),
])
def test_an_evidence_file_capmatrix_cannot_use_is_a_problem_entry(
    write_matrix: Any, text: str, problem: str,
) -> None:
    """``"sm": Infinity`` was read, then compared: an OverflowError traceback instead of an artifact."""
    root = write_matrix()
    (root / "evidence").mkdir()
    (root / "evidence" / "bad.json").write_text(text, encoding="utf-8")
    (entry,) = export(capmatrix.load(root))["evidence"]["files"]
    assert entry["file"].endswith("evidence/bad.json")
    assert problem in entry["problem"]


def test_an_evidence_device_is_a_problem_entry_read_no_further(write_matrix: Any) -> None:
    root = write_matrix()
    (root / "evidence").mkdir()
    (root / "evidence" / "zero.json").symlink_to("/dev/zero")
    (entry,) = export(capmatrix.load(root))["evidence"]["files"]
    assert entry["problem"].endswith(": not a regular file")


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_export_is_deterministic(matrix: capmatrix.Matrix) -> None:
    assert dumps(export(matrix)) == dumps(export(capmatrix.load()))


def test_cli_writes_the_artifact(tmp_path: Path, data: dict[str, Any]) -> None:
    target = tmp_path / "out.json"
    assert main(["export", "--out", str(target)]) == 0
    assert json.loads(target.read_text(encoding="utf-8")) == data
    stdout, stderr = io.StringIO(), io.StringIO()
    from capmatrix.authoring.cli import run

    assert run(["export"], stdout, stderr) == 0
    assert json.loads(stdout.getvalue()) == data
    assert run(["export", "--matrix", str(tmp_path / "nowhere")], stdout, stderr) == 2
    assert "nowhere" in stderr.getvalue()


# --------------------------------------------------------------------------------------------------
# Round trip


def _blocks(data: dict[str, Any], kernel: str, limit: int = BLOCK_CELLS) -> tuple[list[str], list[str]]:
    """Fixed and open axes of the kernel's blocks: the longest suffix within ``limit`` cells is open."""
    named = data["kernels"][kernel]["relevant_axes"]
    open_axes: list[str] = []
    cells = 1
    for axis in reversed(named):
        size = len(data["axes"][axis]["values"])
        if cells * size > limit:
            break
        open_axes.insert(0, axis)
        cells *= size
    return named[: len(named) - len(open_axes)], open_axes


@pytest.mark.no_cover  # a sweep: the same lines thousands of times (see conftest.py)
@pytest.mark.sweep
@pytest.mark.parametrize("kernel", list(capmatrix.load().kernels))
def test_every_cell_of_every_kernel(
    kernel: str, matrix: capmatrix.Matrix, data: dict[str, Any], evaluator: Evaluator
) -> None:
    """Every block of cells (``make test``: every 4th block; ``make exhaustive``: all of them)."""
    fixed_axes, open_axes = _blocks(data, kernel, ROUND_TRIP_BLOCK_CELLS)
    named = set(data["kernels"][kernel]["relevant_axes"])
    # Axes no rule names take one value (the verdict cannot depend on them), so nothing else is open.
    rest = {a: axis["values"][0] for a, axis in data["axes"].items() if a not in named}
    combos = list(itertools.product(*(data["axes"][a]["values"] for a in fixed_axes)))
    blocks = 0
    for combo in combos[::stride(4)]:
        values = {**rest, **dict(zip(fixed_axes, combo, strict=True))}
        query = KernelQuery(kernel).replace(**values, **dict.fromkeys(open_axes, ANY))
        resolution = capmatrix.resolve(query, matrix)
        # Over the listed values (the classes would make the blocks several times as many; the test
        # below checks them on open int axes).
        expected = _residual_bitmap(resolution, open_axes, matrix)
        got = evaluator.bitmap(kernel, values, open_axes, classes=False)
        assert got == expected, (kernel, values)
        blocks += 1
    assert blocks == len(combos[::stride(4)]) > 0
    cells = math.prod(len(data["axes"][a]["values"]) for a in named)
    assert len(combos) * math.prod(len(data["axes"][a]["values"]) for a in open_axes) == cells


@pytest.mark.parametrize("kernel", list(capmatrix.load().kernels))
def test_an_open_int_axis_ranges_over_its_classes(
    kernel: str, matrix: capmatrix.Matrix, data: dict[str, Any], evaluator: Evaluator
) -> None:
    """Each int axis left open, the others given where some listed value of it is supported.

    Supported only when every class of ints is, listed or not (with sm open, sm 48 counts).
    """
    rng = random.Random(f"export-open-{kernel}")  # noqa: S311 - a reproducible sample
    named = data["kernels"][kernel]["relevant_axes"]
    ints = [a for a in named if data["axes"][a]["type"] == "int"]
    for _ in range(SAMPLES_PER_KERNEL if ints else 0):
        axis = rng.choice(ints)
        values = {a: rng.choice(spec["values"]) if a in named else spec["values"][0]
                  for a, spec in data["axes"].items() if a != axis}
        resolution = capmatrix.resolve(KernelQuery(kernel).replace(**values, **{axis: ANY}), matrix)
        assert evaluator.resolve(kernel, values) == str(resolution.verdict), (axis, values)
        expected = _residual_bitmap(resolution, [axis], matrix, classes=True)
        assert evaluator.bitmap(kernel, values, [axis]) == expected, (axis, values)


def _random_value(data: dict[str, Any], axis: str, rng: random.Random) -> Value:
    spec = data["axes"][axis]
    if spec["type"] == "int" and rng.random() < 0.1:
        # an int no list names, within the axis's validity range (one outside it is refused)
        low, high = spec.get("min", -(1 << 62)), spec.get("max", 1 << 62)
        return int(rng.choice([v for v in (-1, 0, 3, 40, 130, 1000) if low <= v <= high]))
    return rng.choice(spec["values"])  # type: ignore[no-any-return]


@pytest.mark.parametrize("kernel", list(capmatrix.load().kernels))
def test_random_complete_queries(
    kernel: str, matrix: capmatrix.Matrix, data: dict[str, Any], evaluator: Evaluator
) -> None:
    rng = random.Random(f"export-{kernel}")  # noqa: S311 - a reproducible sample
    for _ in range(SAMPLES_PER_KERNEL):
        values = {a: _random_value(data, a, rng) for a in data["axes"]}
        resolution = capmatrix.resolve(KernelQuery(kernel).replace(**values), matrix)
        assert evaluator.resolve(kernel, values) == str(resolution.verdict), values
        grants, excludes = evaluator.deciding(kernel, values)
        # The reasons name the grants that apply (at most CLOSEST_GRANTS of them) and, for an
        # unsupported answer, every exclusion that applies.
        cited_grants = {r.rule_id for r in resolution.reasons if r.kind == "grant"}
        cited_excludes = {r.rule_id for r in resolution.reasons if r.kind == "exclude"}
        assert cited_grants <= grants, values
        assert len(cited_grants) == min(len(grants), CLOSEST_GRANTS), values
        supported = resolution.verdict is Verdict.SUPPORTED
        assert cited_excludes == (set() if supported else excludes), values
        outside = {a for a, v in values.items() if evaluator.known(a, v) is None}
        assert set(resolution.outside) == outside


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_every_model_kernel_and_sm(
    matrix: capmatrix.Matrix, data: dict[str, Any], evaluator: Evaluator
) -> None:
    compared = 0
    for model, entry in data["models"].items():
        names = [model, *entry["hf_ids"][:1]]
        for name, kernel, sm in itertools.product(names, data["kernels"], data["axes"]["sm"]["values"]):
            resolution = capmatrix.resolve(KernelQuery(kernel, model=name, sm=sm), matrix)
            # a kernel asked alone takes its engine's defaults (its axes) where the query gives none
            values = evaluator.values({"sm": sm}, name, data["kernels"][kernel].get("axes"))
            assert values == dict(resolution.values), (name, kernel, sm)
            assert evaluator.resolve(kernel, values) == str(resolution.verdict), (name, kernel, sm)
            compared += 1
    assert compared >= len(data["models"]) * len(data["kernels"])


def test_every_role_model_sm_and_mode(
    matrix: capmatrix.Matrix, data: dict[str, Any], evaluator: Evaluator
) -> None:
    modes = data["axes"]["spec_dec"]["values"]
    for role, model, sm, mode in itertools.product(
        data["roles"], data["models"], data["axes"]["sm"]["values"], modes
    ):
        selection = capmatrix.select(role, KernelQuery(model=model, sm=sm, spec_dec=mode), matrix)
        got = evaluator.select(role, {"sm": sm, "spec_dec": mode}, model)
        assert got == (selection.kernel, str(selection.verdict)), (role, model, sm, mode)


@pytest.mark.parametrize("role", list(capmatrix.load().roles))
def test_random_complete_role_queries(
    role: str, matrix: capmatrix.Matrix, data: dict[str, Any], evaluator: Evaluator
) -> None:
    rng = random.Random(f"export-role-{role}")  # noqa: S311 - a reproducible sample
    winners = set()
    for _ in range(4 * SAMPLES_PER_KERNEL):
        values = {a: rng.choice(data["axes"][a]["values"]) for a in data["axes"]}
        # Half the time let the role's own axes apply (the query leaves them out).
        if rng.random() < 0.5:
            for axis in data["roles"][role]["axes"]:
                values.pop(axis, None)
        selection = capmatrix.select(role, KernelQuery(**values), matrix)
        got = evaluator.select(role, values, None)
        assert got == (selection.kernel, str(selection.verdict)), values
        winners.add(selection.kernel)
    assert len(winners) >= 2  # the sample reaches more than one outcome


def test_unknown_enum_value_is_refused_by_both(matrix: capmatrix.Matrix, evaluator: Evaluator) -> None:
    kernel = next(iter(evaluator.kernels))
    with pytest.raises(capmatrix.InvalidQuery):
        capmatrix.resolve(KernelQuery(kernel, attention="sparse"), matrix)
    with pytest.raises(ValueError, match="sparse"):
        evaluator.values({"attention": "sparse"}, None)


def test_artifact_carries_classes_spellings_and_aliases(
    matrix: capmatrix.Matrix, data: dict[str, Any]
) -> None:
    for name, axis in matrix.axes.items():
        out = data["axes"][name]
        assert out["values"] == list(axis.known)
        classes = out.get("classes", [])
        assert [c["value"] for c in classes] == list(axis.values[len(axis.known):])
        assert [c["text"] for c in classes] == [axis.describe(c["value"]) for c in classes]
        assert out.get("spellings", {}) == dict(axis.spellings)
        assert out.get("aliases", {}) == dict(axis.aliases)
    assert data["axes"]["sm"]["min"] == 10  # no sm below compute capability 1.0 is an input
    assert data["axes"]["sm"]["classes"][0] == {"value": 48, "text": "[10, 49]"}
    assert data["axes"]["dtype"]["spellings"]["bfloat16"] == "bf16"
    assert data["axes"]["tokens_per_block"]["aliases"] == {"block_size": "vllm"}


def test_artifact_carries_start_checks(matrix: capmatrix.Matrix, data: dict[str, Any]) -> None:
    """Each kernel whose guard names ``caught_by`` lists them; each is a gate of the artifact."""
    carried = {name: entry["start_checks"] for name, entry in data["kernels"].items()
               if "start_checks" in entry}
    expected = {name: list(k.guards.caught_by) for name, k in matrix.kernels.items()
                if k.guards is not None and k.guards.caught_by}
    assert carried == expected
    assert carried["vllm_triton_attn"] == ["vllm_triton_attn_init"]
    assert all(data["kernels"][gate]["kind"] == "gate" for gates in carried.values() for gate in gates)


def _python_at_start(role: str, given: dict[str, Value], model: str | None,
                     matrix: capmatrix.Matrix) -> tuple[str | None, str, str | None]:
    """What ``capmatrix select`` answers: the selection, then the winner's refusing start check."""
    selection = capmatrix.select(role, KernelQuery(model=model).replace(**given), matrix)
    if selection.resolution is None:
        return selection.kernel, str(selection.verdict), None
    refusal = refused_at_start(_resolver(matrix), selection.resolution.kernel, selection.resolution.query)
    if refusal is None:
        return selection.kernel, str(selection.verdict), None
    verdict = refusal.verdict if selection.verdict is Verdict.SUPPORTED else selection.verdict
    return selection.kernel, str(verdict), refusal.kernel


def test_start_checks_answer_as_python(
    matrix: capmatrix.Matrix, data: dict[str, Any], evaluator: Evaluator
) -> None:
    """vLLM's TRITON_ATTN and TRITON_MLA picked, then refused at start for FP8 below SM89 (T4, A100)."""
    roles = [r for r, e in data["roles"].items()
             if any("start_checks" in data["kernels"][k] for k in e["candidates"])]
    assert roles
    refused: set[tuple[str, str]] = set()
    kernels: set[str] = set()
    for role, model, sm, kv, dtype in itertools.product(
        roles, ["llama3_1_8b", "deepseek_v3", None], data["axes"]["sm"]["values"],
        ["fp8", "fp8_e5m2", "auto", "fp16"], ["fp16", "bf16"],
    ):
        given: dict[str, Value] = {"sm": sm, "kv_cache_dtype": kv, "dtype": dtype}
        expected = _python_at_start(role, given, model, matrix)
        assert evaluator.select_at_start(role, given, model) == expected, (role, model, given)
        if expected[2] is not None:
            refused.add((str(expected[0]), expected[2]))
        # The winner asked alone: its own verdict, then its checks as a kernel question asks them.
        if expected[0] is not None:
            query = KernelQuery(expected[0], model=model).replace(**given)
            resolution = capmatrix.resolve(query, matrix)
            check = refused_at_start(_resolver(matrix), expected[0], resolution.query)
            got = evaluator.start_refusal(expected[0], given, model)
            assert got == (None if check is None else (check.kernel, str(check.verdict))), (query, got)
            kernels.add(expected[0])
    assert ("vllm_triton_attn", "vllm_triton_attn_init") in refused
    assert len(kernels) >= 2
