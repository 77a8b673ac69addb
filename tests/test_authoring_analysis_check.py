"""capmatrix check: planted bugs trip the right code at the right line; results equal brute force."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from unittest.mock import patch

import pytest
from analysis_synthetic import cells, random_matrix, rule_applies, supported_at
from hypothesis import example, given, settings
from hypothesis import strategies as st

import capmatrix
from capmatrix._core.partition import mostly_disjoint, partition, uncovered
from capmatrix.authoring.analysis import (
    CODES,
    Finding,
    Severity,
    TooManyRegions,
    Witness,
    bounded_gap,
    check,
    check_path,
    diff,
    role_gap,
    role_regions,
)
from capmatrix.authoring.analysis._boxes import Area, KernelBoxes, supported_region, witness_of
from capmatrix.authoring.cli import run
from capmatrix.model import Effect, format_value
from capmatrix.regions import Region, box_of

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from capmatrix.model import AxisValue

CASES = Path(__file__).parent / "analysis_cases"
PLANTED = sorted(p for p in CASES.glob("*.yaml") if p.name != "axes.yaml")
MARK = re.compile(r"#\s*expect:\s*((?:C\d{3}\s*)+)")


def _materialise(case: Path, tmp_path: Path) -> Path:
    root = tmp_path / "caps"
    (root / "kernels").mkdir(parents=True)
    shutil.copy(CASES / "axes.yaml", root / "axes.yaml")
    shutil.copy(case, root / "kernels" / case.name)
    return root


def _marks(case: Path) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for number, line in enumerate(case.read_text().splitlines(), start=1):
        found = MARK.search(line)
        if found:
            for code in found.group(1).split():
                out.setdefault(code, set()).add(number)
    return out


@pytest.mark.parametrize("case", PLANTED, ids=lambda p: p.stem)
def test_planted_bug_trips_its_code_at_its_line(case: Path, tmp_path: Path) -> None:
    root = _materialise(case, tmp_path)
    result = check_path(root)
    marks = _marks(case)
    assert marks, "every planted case marks at least one expected finding"
    for code, lines in marks.items():
        found = {
            f.locations[0].line
            for f in result.findings
            if f.code == code and f.locations[0].path.endswith(case.name)
        }
        assert found == lines, (code, [f.message for f in result.findings if f.code == code])
    loader_codes = {"C001", "C002", "C003", "C004"}
    if loader_codes & set(marks):
        assert not result.loaded
        assert result.exit_status() == 2
    else:
        assert result.loaded
        has_error = any(CODES[c][0] is Severity.ERROR for c in marks)
        assert result.exit_status() == (1 if has_error else 0)


def test_dead_grant_names_the_exclusion_that_kills_it(tmp_path: Path) -> None:
    result = check_path(_materialise(CASES / "dead_grant.yaml", tmp_path))
    dead = next(f for f in result.findings if f.code == "C101" and "k.mla_sm12x" in f.rules)
    assert dead.rules == ("k.mla_sm12x", "k.no_sm12x")
    assert [loc.line for loc in dead.locations] == [11, 16]
    assert dead.severity is Severity.ERROR
    assert dead.witness is not None
    assert dead.witness.values["sm"] in {120, 121}
    assert dead.witness.values["attention"] == "mla"
    matrix = capmatrix.load(_materialise(CASES / "dead_grant.yaml", tmp_path / "again"))
    query = capmatrix.KernelQuery("k", **dead.witness.values)  # type: ignore[arg-type]
    assert not capmatrix.resolve(query, matrix=matrix)
    assert dead.regions[0].description == "sm in {120, 121} and attention=mla"


def test_open_ended_severity_depends_on_effect(tmp_path: Path) -> None:
    matrix = capmatrix.load(_materialise(CASES / "open_ended.yaml", tmp_path))
    findings = [f for f in check(matrix) if f.code == "C106"]
    assert {f.rules[0] for f in findings} == {"k.blackwell_on", "k.not_hopper"}
    assert all(f.severity is Severity.WARNING for f in findings)
    first = next(f for f in findings if f.rules[0] == "k.blackwell_on")
    assert first.witness is not None
    assert first.witness.values["sm"] == 122  # the first SM above the declared universe
    assert "reaches past the known universe" in first.message


def test_family_split_witness_is_the_missing_sibling(tmp_path: Path) -> None:
    matrix = capmatrix.load(_materialise(CASES / "family_split.yaml", tmp_path))
    split = next(f for f in check(matrix) if f.code == "C107" and "k.sm120_mla_spec" in f.rules)
    assert split.witness is not None
    assert split.witness.values["sm"] == 121
    assert "sm_12x" in split.message
    assert "121" in split.message


def test_role_gap_is_a_merged_region(tmp_path: Path) -> None:
    matrix = capmatrix.load(_materialise(CASES / "roles.yaml", tmp_path))
    gap = next(f for f in check(matrix) if f.code == "C108")
    assert gap.severity is Severity.INFO
    assert [a.description for a in gap.regions] == ["sm in {80, 90} and attention=mla"]
    assert gap.witness is not None
    assert gap.witness.role == "gen"
    query = capmatrix.KernelQuery(**gap.witness.values)  # type: ignore[arg-type]
    selection = capmatrix.select("gen", query, matrix=matrix)
    assert selection.kernel is None


def test_shipped_matrix_passes_check() -> None:
    """The shipped matrix's errors are the engine findings it documents (docs/analysis.md,
    docs/sglang-differential.md): gates that admit queries their kernels fail (C112), which its
    check-baseline.json accepts. Release 1.2's spec-dec gate asks XQA for multi-token queries it has no
    kernel for; SGLang 0.5.23 sends MLA decode to FlashMLA on SM8x, trtllm_mla prefill and DeepSeek-V3.2's
    DSA decode to trtllm-gen off SM100/103; vLLM 0.33.0's FLASH_ATTN, FLEX_ATTENTION and TRITON_ATTN
    admit what FA3, flex_attention and the Triton kernels fail. TRITON_ATTN and TRITON_MLA's FP8 caches
    below SM89 are refused at engine start instead (C113, info)."""
    result = check_path()
    assert result.loaded
    errors = [f for f in result.findings if f.severity is Severity.ERROR]
    assert sorted((f.code, f.kernels) for f in errors) == [
        ("C112", ("sglang_dsa",)), ("C112", ("sglang_flashmla",)), ("C112", ("sglang_trtllm_mla",)),
        ("C112", ("trtllm_spec_dec_mode",)), ("C112", ("vllm_flash_attn",)),
        ("C112", ("vllm_flex_attention",)), ("C112", ("vllm_triton_attn",)),
    ]
    # FP8 caches below SM89 on TRITON_ATTN / TRITON_MLA: refused at engine start by the backends' init
    start = sorted((f.code, f.kernels) for f in result.findings if f.code == "C113")
    assert start == [("C113", ("vllm_triton_attn",)), ("C113", ("vllm_triton_mla",))]
    assert result.exit_status() == 1
    assert all(f.code in CODES for f in result.findings)


def test_codes_are_documented() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "analysis.md").read_text()
    for code, (severity, title) in CODES.items():
        assert f"| {code} |" in doc, code
        assert title in doc, title
        assert str(severity) in doc


# --------------------------------------------------------------------------------------------------
# CLI


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


def test_cli_check_exit_statuses(tmp_path: Path) -> None:
    status, out, _ = _run("check")
    assert status == 0  # the shipped C112s, accepted by the baseline the matrix carries
    assert "0 errors," in out
    status, out, _ = _run("check", "--no-baseline")
    assert status == 1  # the shipped C112s (test_shipped_matrix_passes_check)
    assert "7 errors," in out
    broken = _materialise(CASES / "dead_grant.yaml", tmp_path / "a")
    status, out, _ = _run("check", str(broken))
    assert status == 1
    assert re.search(r"dead_grant.yaml:11: error C101 dead grant: k.mla_sm12x", out)
    assert f"--matrix {broken}" in out
    warnings_only = _materialise(CASES / "open_ended.yaml", tmp_path / "b")
    assert _run("check", str(warnings_only))[0] == 0
    assert _run("check", str(warnings_only), "--strict")[0] == 1
    unloadable = _materialise(CASES / "unknown_refs.yaml", tmp_path / "c")
    status, out, _ = _run("check", str(unloadable))
    assert status == 2
    assert "unknown_refs.yaml:8: error C002" in out
    assert "did not load" in out


def test_cli_check_json(tmp_path: Path) -> None:
    root = _materialise(CASES / "roles.yaml", tmp_path)
    status, out, _ = _run("check", str(root), "--json")
    data = json.loads(out)
    assert status == 0
    assert data["loaded"] is True
    gap = next(f for f in data["findings"] if f["code"] == "C108")
    assert gap["severity"] == "info"
    assert gap["locations"][0]["line"] == 25
    assert gap["regions"][0]["region"]["attention"] == ["mla"]
    assert gap["regions"][0]["region"]["sm"] == [80, 90]
    assert gap["witness"]["role"] == "gen"
    assert gap["witness"]["command"].startswith("capmatrix select gen --sm 80")


def test_cli_check_json_streams_the_text_json_would_write(tmp_path: Path) -> None:
    root = _materialise(CASES / "roles.yaml", tmp_path)
    status, out, _ = _run("check", str(root), "--json")
    assert status == 0
    result = check_path(root)
    announced = {"matrix": json.loads(out)["matrix"]}  # the matrix that answered, as every command says
    assert out == json.dumps({**result.as_dict(str(root)), **announced}, indent=2) + "\n"
    lazy = result.as_dict(str(root), lazy=True)
    assert not isinstance(lazy["findings"], list)
    assert {**lazy, "findings": list(cast("Iterator[object]", lazy["findings"]))} == result.as_dict(str(root))


def test_witness_command_leaves_defaults_out(small: capmatrix.Matrix) -> None:
    values: dict[str, AxisValue] = {
        "sm": 120, "attention": "mla", "spec_dec": "none", "kv": "fp8", "beam": 1, "causal": False,
    }
    witness = Witness.at(small.space, values, kernel="xqa")
    assert witness.implicit == ("beam",)
    assert witness.command() == (
        "capmatrix query xqa --sm 120 --attention mla --spec-dec none --kv fp8 --causal false"
    )
    assert witness.as_dict()["query"] == values


def test_finding_as_dict_round_trips_through_json(small: capmatrix.Matrix) -> None:
    finding = Finding(code="C105", severity=Severity.INFO, message="m")
    data = json.loads(json.dumps(finding.as_dict()))
    assert data == {
        "code": "C105", "key": "C105 m", "severity": "info", "title": "subsumed rule", "message": "m",
        "locations": [], "rules": [], "kernels": [], "witness": None, "regions": [],
    }


# --------------------------------------------------------------------------------------------------
# Brute force: every analysis equals a cell-by-cell reference on small universes

SMALL = (4, 3, 3, 2)


def _cell_key(matrix: capmatrix.Matrix, cell: Mapping[str, AxisValue]) -> tuple[object, ...]:
    return tuple(cell[a] for a in matrix.axes)


def _region_cells(region: Region) -> set[tuple[object, ...]]:
    out: set[tuple[object, ...]] = set()
    for box in region.boxes:
        out.update(product(*(a.values_of(m) for a, m in zip(region.space.axes, box, strict=True))))
    return out


def _rule_cells(matrix: capmatrix.Matrix, rule: capmatrix.Rule) -> frozenset[tuple[object, ...]]:
    return frozenset(_cell_key(matrix, c) for c in cells(matrix) if rule_applies(rule, c))


matrices = st.builds(
    lambda seed, n, per, share: random_matrix(
        seed, sizes=SMALL, rules=n, per_kernel=per, grant_share=share, role_size=3
    ),
    st.integers(0, 10**9),
    st.integers(1, 24),
    st.integers(1, 8),
    st.sampled_from([0.3, 0.6, 0.9]),
)


@settings(max_examples=60, deadline=None)
@given(matrices)
def test_supported_region_equals_brute_force(matrix: capmatrix.Matrix) -> None:
    space = matrix.space
    for kernel in matrix.kernels.values():
        region = supported_region(space, KernelBoxes.of(kernel, space))
        expected = {_cell_key(matrix, c) for c in cells(matrix) if supported_at(kernel, c)}
        assert _region_cells(region) == expected
        assert region.cells() == len(expected)  # boxes are disjoint


@settings(max_examples=60, deadline=None)
@given(matrices)
# two repeats of one region (k1.r3 and k1.r5 repeat k1.r2) make a single C104 finding
@example(random_matrix(241715, sizes=SMALL, rules=14, per_kernel=8, grant_share=0.3, role_size=3))
def test_rule_findings_equal_brute_force(matrix: capmatrix.Matrix) -> None:
    findings = check(matrix)

    def ids(code: str) -> set[str]:
        return {f.rules[0] for f in findings if f.code == code}

    dead_grants: set[str] = set()
    dead_excl: set[str] = set()
    vacuous: set[str] = set()
    duplicates: set[str] = set()
    subsumed: set[str] = set()
    empty_kernels: set[str] = set()
    for kernel in matrix.kernels.values():
        sets = {r.id: _rule_cells(matrix, r) for r in kernel.rules}
        supported = {_cell_key(matrix, c) for c in cells(matrix) if supported_at(kernel, c)}
        granted = frozenset().union(*(sets[r.id] for r in kernel.grants))
        if not supported:
            empty_kernels.add(kernel.name)
        seen: dict[tuple[Effect, frozenset[object]], str] = {}
        firsts = []
        for rule in kernel.rules:
            mine = sets[rule.id]
            if not mine:
                vacuous.add(rule.id)
                continue
            if rule.effect is Effect.GRANT and not mine & supported:
                dead_grants.add(rule.id)
            if rule.effect is Effect.EXCLUDE and not mine & granted:
                dead_excl.add(rule.id)
            key = (rule.effect, mine)
            if key in seen:
                duplicates.add(rule.id)
            else:
                seen[key] = rule.id
                firsts.append(rule)
        for rule in firsts:
            if any(
                other.effect is rule.effect and sets[rule.id] < sets[other.id]
                for other in firsts
            ):
                subsumed.add(rule.id)
    assert ids("C101") == dead_grants
    assert ids("C102") == dead_excl
    assert ids("C103") == vacuous
    # one C104 finding names every repeat of a region, then the rule it repeats
    assert {r for f in findings if f.code == "C104" for r in f.rules[:-1]} == duplicates
    assert ids("C105") == subsumed
    assert {f.kernels[0] for f in findings if f.code == "C110"} == empty_kernels
    # open-ended and family findings, from the conditions
    sm = matrix.axes["a0"]
    top = max(int(v) for v in sm.values)
    families = {frozenset(m) for m in sm.families.values()}
    open_ended: set[str] = set()
    split: set[str] = set()
    for rule in matrix.rules:
        cond = rule.conditions.get("a0")
        if cond is None or rule.id in vacuous:
            continue
        if any(cond.contains(v) for v in range(top + 1, top + 1000)):
            open_ended.add(rule.id)
        admitted = {v for v in sm.values if cond.contains(v)}
        if any(0 < len(admitted & fam) < len(fam) for fam in families):
            split.add(rule.id)
    assert ids("C106") == open_ended
    assert ids("C107") == split


@settings(max_examples=60, deadline=None)
@given(matrices)
def test_role_regions_and_gaps_equal_brute_force(matrix: capmatrix.Matrix) -> None:
    findings = check(matrix)
    for role in matrix.roles.values():
        regions = role_regions(matrix, role)
        winners: dict[str | None, set[tuple[object, ...]]] = {}
        for c in cells(matrix):
            won = next(
                (k for k in role.candidates if supported_at(matrix.kernels[k], c)), None
            )
            winners.setdefault(won, set()).add(_cell_key(matrix, c))
        assert {k: _region_cells(v) for k, v in regions.items()} == winners
        gap = next((f for f in findings if f.code == "C108" and role.location == f.locations[0]),
                   None)
        if None in winners:
            assert gap is not None
            assert set().union(*(_area_cells(a) for a in gap.regions)) == winners[None]
        else:
            assert gap is None
        shadowed = {f.kernels[0] for f in findings
                    if f.code == "C109" and f.locations[0] == role.location}
        expected = {
            k for k in role.candidates
            if k not in winners
            and any(supported_at(matrix.kernels[k], c) for c in cells(matrix))
        }
        assert shadowed == expected


def _area_cells(area: Area) -> set[tuple[object, ...]]:
    return set(product(*area.values.values()))


@settings(max_examples=40, deadline=None)
@given(matrices, st.integers(0, 2**16))
def test_partition_with_root_covers_root_exactly(matrix: capmatrix.Matrix, pick: int) -> None:
    space = matrix.space
    kernel = next(iter(matrix.kernels.values()))
    boxes = [box_of(r, space) for r in kernel.rules]
    root = tuple(
        (m & (pick >> (3 * i))) or m for i, m in enumerate(space.full_box())
    )
    found = partition(space, boxes, lambda live: live.bit_count() % 3, root=root)
    everything = Region(space, [b for v in found.values() for b in v], disjoint=True)
    assert everything == Region(space, [root], disjoint=True)
    assert everything.cells() == space.cells(root)
    for count, found_boxes in found.items():
        for c in _region_cells(Region(space, found_boxes, disjoint=True)):
            cell: dict[str, AxisValue] = dict(zip(matrix.axes, c, strict=True))  # type: ignore[arg-type]
            live = sum(rule_applies(r, cell) for r in kernel.rules)
            assert live % 3 == count


def test_witness_prefers_axis_defaults(small: capmatrix.Matrix) -> None:
    space = small.space
    box = space.full_box()
    assert witness_of(space, box)["beam"] == 1
    narrowed = tuple(m if a.name != "beam" else 0b10 for a, m in zip(space.axes, box, strict=True))
    assert witness_of(space, narrowed)["beam"] == 4


@settings(max_examples=60, deadline=None)
@given(matrices, st.booleans())
def test_partition_strategies_agree_with_brute_force(matrix: capmatrix.Matrix, local: bool) -> None:
    space = matrix.space
    rules = [r for k in matrix.kernels.values() for r in k.rules]
    boxes = [box_of(r, space) for r in rules]
    found = partition(space, boxes, lambda live: live.bit_count() % 4, local=local)
    for count, found_boxes in found.items():
        for c in _region_cells(Region(space, found_boxes, disjoint=True)):
            cell: dict[str, AxisValue] = dict(zip(matrix.axes, c, strict=True))  # type: ignore[arg-type]
            assert sum(rule_applies(r, cell) for r in rules) % 4 == count
    total = Region(space, [b for v in found.values() for b in v], disjoint=True)
    assert total.cells() == space.cells(space.full_box())


@settings(max_examples=60, deadline=None)
@given(matrices, st.integers(0, 2**16))
def test_uncovered_equals_brute_force(matrix: capmatrix.Matrix, pick: int) -> None:
    space = matrix.space
    rules = [r for k in matrix.kernels.values() for r in k.rules][:6]
    boxes = [box_of(r, space) for r in rules]
    root = tuple((m & (pick >> (3 * i))) or m for i, m in enumerate(space.full_box()))
    hole = uncovered(space, root, boxes)
    root_cells = _region_cells(Region(space, [root], disjoint=True))
    covered = {
        c for c in root_cells
        if any(rule_applies(r, dict(zip(matrix.axes, c, strict=True))) for r in rules)  # type: ignore[arg-type]
    }
    if covered == root_cells:
        assert hole is None
    else:
        assert hole is not None
        hole_cells = _region_cells(Region(space, [hole], disjoint=True))
        assert hole_cells
        assert hole_cells <= root_cells - covered


def test_mostly_disjoint_tells_tables_from_overlaps(small: capmatrix.Matrix) -> None:
    space = small.space
    full = space.full_box()
    table = [
        (1 << i, 1 << j, *full[2:])
        for i in range(space.axes[0].full_mask.bit_length())
        for j in range(3)
    ]
    assert len(table) >= 16
    assert mostly_disjoint(table)
    assert not mostly_disjoint([full] * 20)
    assert not mostly_disjoint(table[:4])  # too few boxes to tell: global order


@settings(max_examples=60, deadline=None)
@given(matrices, st.booleans())
def test_supported_region_strategies_equal_brute_force(matrix: capmatrix.Matrix, local: bool) -> None:
    space = matrix.space
    for kernel in matrix.kernels.values():
        region = supported_region(space, KernelBoxes.of(kernel, space), local=local)
        expected = {_cell_key(matrix, c) for c in cells(matrix) if supported_at(kernel, c)}
        assert _region_cells(region) == expected
        assert region.cells() == len(expected)


def test_check_missing_directory_is_unloadable(tmp_path: Path) -> None:
    result = check_path(tmp_path / "nope")
    assert not result.loaded
    assert result.exit_status() == 2
    assert [f.code for f in result.findings] == ["C001"]
    assert "matrix directory not found" in result.findings[0].message


def test_check_bounds_a_gap_of_exponentially_many_regions() -> None:
    """12 grants whose role gap needs 2**12 boxes: reported truncated, with the exact count and share."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks import synth

    m = synth.pairs_matrix(12).load()
    findings = check(m, max_regions=100)
    gaps = [f for f in findings if f.code == "C108"]
    assert len(gaps) == 1
    assert "in 4,096 boxes, first 100 shown" in gaps[0].message
    assert 0 < len(gaps[0].regions) <= 100
    # The gap is "some axis of every pair at its first value": 3**12 of 4**12 cells.
    assert f"({3**12 / 4**12:.1%} of the universe)" in gaps[0].message
    gap = bounded_gap(m, m.roles["gappy"], limit=100)
    assert gap.truncated
    assert gap.total is None
    assert gap.boxes == 2**12  # the fewest disjoint boxes that can describe it
    assert gap.cells == 3**12
    for area in gaps[0].regions[:10]:  # every region shown lies in the gap
        cell = cast("dict[str, Any]", area.witness)
        assert not capmatrix.resolve(capmatrix.KernelQuery("pairs", **cell), m)
    with pytest.raises(TooManyRegions, match="4,096 boxes, first 100 shown"):
        role_gap(m, m.roles["gappy"], limit=100)
    four = synth.pairs_matrix(4).load()
    small = bounded_gap(four, four.roles["gappy"], limit=100)
    assert not small.truncated
    assert small.total == 2**4


def test_cli_check_json_witnesses_name_the_matrix(tmp_path: Path) -> None:
    """The JSON witness command asks the same matrix as the text form: --matrix DIR included."""
    broken = _materialise(CASES / "dead_grant.yaml", tmp_path / "with space")
    status, out, _ = _run("check", str(broken), "--json")
    assert status == 1
    commands = [f["witness"]["command"] for f in json.loads(out)["findings"] if f["witness"]]
    assert commands
    for command in commands:
        words = shlex.split(command)
        assert words[-2:] == ["--matrix", str(broken)]
    _status, text, _ = _run("check", str(broken))
    for command in commands:
        assert f"witness: {command}" in text
    shipped = json.loads(_run("check", "--json", "--no-baseline")[1])
    assert all("--matrix" not in f["witness"]["command"] for f in shipped["findings"] if f["witness"])


WORDS = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
                min_size=1, max_size=10)


@given(WORDS, st.dictionaries(st.from_regex(r"\A[a-z][a-z0-9_]{0,6}\Z"),
                              st.one_of(WORDS, st.integers(), st.booleans()), max_size=4),
       st.one_of(st.none(), WORDS), st.booleans())
def test_witness_commands_are_shell_quoted(
    name: str, values: dict[str, Any], matrix: str | None, role: bool
) -> None:
    """Whatever the names and values hold ($(...), spaces, quotes, ;), the shell reads the command
    back word for word: copying a witness never runs anything."""
    witness = Witness(values=values, role=name) if role else Witness(values=values, kernel=name)
    words = shlex.split(witness.command(matrix))
    expected = ["capmatrix", "select" if role else "query", name]
    for axis, value in values.items():
        expected += [f"--{axis.replace('_', '-')}", format_value(value)]
    if matrix:
        expected += ["--matrix", matrix]
    assert words == expected
    assert witness.as_dict(matrix)["command"] == witness.command(matrix)


def _finding_cells(finding: Finding) -> tuple[object, ...]:
    shown = frozenset(x for area in finding.regions for x in _area_cells(area))
    return (finding.code, finding.rules, finding.kernels, finding.locations, shown)


@settings(max_examples=40, deadline=None)
@given(matrices, st.integers(0, 10**6))
def test_table_route_finds_what_the_diagram_route_finds(matrix: capmatrix.Matrix, seed: int) -> None:
    """Decision-table-shaped matrices take the partition route: same findings, same cells."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks import synth

    table = synth.dmn_matrix(20 + seed % 40, n_axes=4, values_per_axis=3, seed=seed).build()
    for m in (matrix, table):
        with patch("capmatrix.authoring.analysis._check.table_shaped", return_value=True):
            by_table = sorted(map(_finding_cells, check(m)), key=repr)
        with patch("capmatrix.authoring.analysis._check.table_shaped", return_value=False):
            by_diagram = sorted(map(_finding_cells, check(m)), key=repr)
        assert by_table == by_diagram


def test_check_and_diff_are_the_same_in_every_process(tmp_path: Path) -> None:
    """Two interpreters with different string hashing print byte-identical findings and diffs."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks import synth

    base = synth.boxes_matrix(150)
    old = base.write(tmp_path / "old")
    new = synth.mutate(base, 0.1).write(tmp_path / "new")
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        runs = [
            subprocess.run([sys.executable, "-m", "capmatrix", *args], capture_output=True, text=True,
                           env=env, check=False, cwd=root)
            for args in (["check", str(old), "--json"], ["diff", str(old), str(new), "--json"])
        ]
        assert [r.returncode for r in runs] == [1, 0]
        outputs.append([r.stdout for r in runs])
    assert outputs[0] == outputs[1]
    assert '"C108"' in outputs[0][0]
    assert '"shifts"' in outputs[0][1]


def test_each_kernel_once_and_each_gap_as_bounded_gap_counts_it() -> None:
    """check builds one diagram store per role: a kernel in two roles, or in none, is reported once,
    and every role gap has bounded_gap's size."""
    m = random_matrix(7, rules=140, per_kernel=10, role_size=4, grant_share=0.6)
    assert not mostly_disjoint([b for k in m.kernels.values() for b in KernelBoxes.of(k, m.space).boxes])
    names = list(m.kernels)
    shared = dataclasses.replace(m.roles["role0"], name="shared", candidates=(names[0], names[-1]))
    m = dataclasses.replace(m, roles={**m.roles, "shared": shared})
    assert names[-2] not in {c for r in m.roles.values() for c in r.candidates}  # in no role
    found = check(m)
    own = [f for f in found if f.code not in ("C108", "C109")]
    keys = [(f.code, f.message) for f in own]
    assert len(keys) == len(set(keys))
    assert {k for f in own for k in f.kernels} >= {names[0], names[-2]}
    for role in m.roles.values():
        gap = bounded_gap(m, role, limit=1_000)
        shown = [f for f in found if f.code == "C108" and f.subject == f"role {role.name}"]
        assert len(shown) == (1 if gap.region else 0)
        if shown:
            assert gap.count() in shown[0].message


def test_every_analysis_hands_its_diagram_stores_back() -> None:
    """check, bounded_gap, role_regions and diff release each store they build (a store left to the
    cyclic collector costs a walk over all its tuples at the first collection after the analysis)."""
    from capmatrix.authoring.analysis import _diagram

    made: list[_diagram.Diagram] = []
    init = _diagram.Diagram.__init__

    def recording(self: _diagram.Diagram, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    old = random_matrix(3, sizes=(4, 3, 3, 2), rules=40, per_kernel=4, role_size=3)
    new = random_matrix(4, sizes=(4, 3, 3, 2), rules=40, per_kernel=4, role_size=3)
    with patch.object(_diagram.Diagram, "__init__", recording):
        runs: list[Callable[[], object]] = [
            lambda: check(old),
            lambda: [bounded_gap(old, role) for role in old.roles.values()],
            lambda: [role_regions(old, role) for role in old.roles.values()],
            lambda: diff(old, new, local=False),
        ]
        for analysis in runs:
            made.clear()
            analysis()
            assert made
            assert [len(d) for d in made] == [2] * len(made)  # only the terminals left
