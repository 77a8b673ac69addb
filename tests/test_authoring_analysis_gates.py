"""Gates against the kernels they guard (C111, C112): the shipped findings, the seed found again with
no legacy predicate, every witness re-run through the resolver, and the regions equal to brute force."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from analysis_synthetic import cells, supported_at

import capmatrix
from capmatrix import KernelQuery
from capmatrix.authoring.analysis import Finding, Severity, check, check_path
from capmatrix.authoring.analysis._gates import pinned
from capmatrix.authoring.cli import run
from capmatrix.authoring.loader import default_path

if TYPE_CHECKING:
    from collections.abc import Mapping

    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue, Kernel

CASES = Path(__file__).parent / "analysis_cases"
GATE = "trtllm_spec_dec_mode"


@pytest.fixture(scope="module")
def shipped() -> Matrix:
    return capmatrix.load()


@pytest.fixture(scope="module")
def seed_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped matrix with the before-fix gate in every release: sm12x_one_model loses its ``until``.

    (The shipped matrix has the before-fix gate as TensorRT-LLM 1.2.0rc8; this copy asks what ``check``
    says of a matrix that knows only that gate, as the engine's code read before the fix.)
    """
    root = tmp_path_factory.mktemp("seed") / "capabilities"
    shutil.copytree(default_path(), root)
    path = root / "kernels" / "trtllm_gates.yaml"
    text = path.read_text(encoding="utf-8")
    before = ('        exclude:\n          spec_dec: one_model\n          sm: ">=120"\n'
              '        until: 1.2.0\n')
    assert text.count(before) == 1
    path.write_text(text.replace(before, before.replace("        until: 1.2.0\n", "")), encoding="utf-8")
    return root


def _gate_findings(matrix: Matrix) -> dict[tuple[str, str], Finding]:
    out = {}
    for f in check(matrix):
        if f.code in {"C111", "C112", "C113"}:
            assert (f.code, f.kernels[0]) not in out  # one finding per gate and code
            out[f.code, f.kernels[0]] = f
    return out


def _guarded(matrix: Matrix, gate: Kernel, values: Mapping[str, AxisValue], *, refused: bool) -> bool:
    """Whether some target of ``gate`` serves ``values`` in the admitted (or refused) form: asked
    of the resolver, one query per target, as a user would (the guard's ``means`` read first)."""
    guard = gate.guards
    assert guard is not None
    pins = guard.refused if refused else guard.axes
    assert pins is not None
    for target in guard.targets:
        query = {**guard.meant(values), **pinned(matrix, target, pins)}
        if target in matrix.kernels:
            if capmatrix.resolve(KernelQuery(target, **query), matrix=matrix):  # type: ignore[arg-type]
                return True
        elif capmatrix.select(target, KernelQuery(**query), matrix=matrix).kernel is not None:  # type: ignore[arg-type]
            return True
    return False


def _rerun(matrix: Matrix, finding: Finding) -> int:
    """Resolve the gate and its targets on the finding's witness and every region's; return how many."""
    gate = matrix.kernels[finding.kernels[0]]
    assert gate.guards is not None
    assert finding.witness is not None
    assert finding.witness.kernel == gate.name
    witnesses = [finding.witness.values, *(a.witness for a in finding.regions)]
    for values in witnesses:
        admits = bool(capmatrix.resolve(KernelQuery(gate.name, **values), matrix=matrix))  # type: ignore[arg-type]
        serves = _guarded(matrix, gate, values, refused=False)
        if finding.code == "C111":
            assert (admits, serves) == (False, True), values
        else:
            assert (admits, serves) == (True, False), values
            if gate.guards.refused is not None:
                assert _guarded(matrix, gate, values, refused=True), values
            # C113 where a start check of caught_by refuses the same query, C112 where none does
            stopped = [not capmatrix.resolve(KernelQuery(check, **values), matrix=matrix)  # type: ignore[arg-type]
                       for check in gate.guards.caught_by]
            assert any(stopped) is (finding.code == "C113"), values
    return len(witnesses)


def _in_regions(finding: Finding, values: Mapping[str, AxisValue]) -> bool:
    return any(all(values[a] in vs for a, vs in area.values.items()) for area in finding.regions)


def _cell(matrix: Matrix, **given: AxisValue | str) -> dict[str, AxisValue]:
    """Every axis of a query: a model's values, then the given ones, then the axis defaults."""
    model = given.pop("model", None)
    values: dict[str, AxisValue] = {}
    if model is not None:
        values.update(matrix.models[str(model)].axes)
    values.update(given)
    for axis in matrix.axes.values():
        if axis.name not in values:
            assert axis.default is not None, axis.name
            values[axis.name] = axis.default
    return values


# --------------------------------------------------------------------------------------------------
# The shipped matrix


def test_shipped_c112_spec_dec_at_sm12x_for_groups_xqa_cannot_serve(shipped: Matrix) -> None:
    found = _gate_findings(shipped)
    over = found["C112", GATE]
    assert over.severity is Severity.ERROR
    assert over.kernels == (GATE,)
    assert over.rules == ("trtllm_spec_dec_mode.one_model",)
    assert over.locations[-1] == shipped.kernels[GATE].guards.location  # type: ignore[union-attr]
    for sm in (120, 121):
        cell = _cell(shipped, model="qwen2_5_7b", sm=sm, spec_dec="one_model", phase="generation")
        assert cell["q_per_kv"] == 7
        assert _in_regions(over, cell)
        assert capmatrix.resolve(KernelQuery(GATE, **cell), matrix=shipped)  # type: ignore[arg-type]
        assert not capmatrix.resolve(KernelQuery("xqa", **cell), matrix=shipped)  # type: ignore[arg-type]
        plain = {**cell, "spec_dec": "none"}
        assert capmatrix.resolve(KernelQuery("xqa", **plain), matrix=shipped)  # type: ignore[arg-type]
    # Groups that divide 64 are served (the fix of PR #10765 holds), and MLA is not admitted there.
    llama = _cell(shipped, model="llama3_1_8b", sm=120, spec_dec="one_model", phase="generation")
    assert not _in_regions(over, llama)
    assert all("attention=mla" not in a.description for a in over.regions)
    assert "witness: model qwen2" in over.message
    assert _rerun(shipped, over) == 1 + len(over.regions)


def test_shipped_c111_spec_dec_at_sm12x_is_the_seed_bug_before_its_fix_and_mla_fp8_after(
    shipped: Matrix,
) -> None:
    under = _gate_findings(shipped)["C111", GATE]
    assert under.severity is Severity.WARNING
    assert under.rules == ("trtllm_spec_dec_mode.sm12x_one_model", "trtllm_spec_dec_mode.mla_sm12x_one_model")
    releases = shipped.releases["tensorrt_llm"]
    seen = set()
    for area in under.regions:
        assert set(area.values["sm"]) == {120, 121}
        if area.values["attention"] == ("mla",):  # every release: XQA-MLA serves FP8 MTP queries
            assert area.values["dtype"] == area.values["kv_cache_dtype"] == ("fp8",)
            assert set(area.values[releases.axis]) == set(releases.names)
            seen.add("mla")
        else:  # the seed bug: 1.2.0rc8 refuses every attention type, fixed in 1.2.0
            assert area.values[releases.axis] == ("1.2.0rc8",)
            seen.add("seed")
    assert seen == {"mla", "seed"}
    for sm in (120, 121):
        cell = _cell(shipped, model="deepseek_v3", sm=sm, spec_dec="one_model", phase="generation",
                     dtype="fp8", kv_cache_dtype="fp8")
        assert _in_regions(under, cell)
        llama = {"model": "llama3_1_8b", "sm": sm, "spec_dec": "one_model", "phase": "generation"}
        assert _in_regions(under, _cell(shipped, **llama, trtllm_release="1.2.0rc8"))
        assert not _in_regions(under, _cell(shipped, **llama, trtllm_release="1.2.0"))
    assert "xqa serves the same query" in under.message
    _rerun(shipped, under)


def test_max_regions_bounds_what_a_gate_finding_lists(shipped: Matrix) -> None:
    whole = _gate_findings(shipped)["C112", GATE]
    (cut,) = (f for f in check(shipped, max_regions=5) if f.code == "C112" and f.kernels == (GATE,))
    assert [a.box for a in cut.regions] == [a.box for a in whole.regions[:5]]
    assert f"admits {len(whole.regions)} regions, first 5 shown" in cut.message
    assert f"admits {len(whole.regions)} regions where" in whole.message


def test_shipped_gate_findings_all_rerun(shipped: Matrix) -> None:
    found = _gate_findings(shipped)
    assert set(found) == {
        ("C112", GATE), ("C111", GATE),
        ("C111", "trtllm_mla_chunked_prefill"), ("C111", "trtllm_mla_kv_cache_reuse"),
        ("C112", "vllm_flash_attn"), ("C112", "vllm_triton_attn"),
        ("C113", "vllm_triton_attn"), ("C113", "vllm_triton_mla"),
        ("C112", "vllm_flex_attention"), ("C111", "vllm_flashinfer"),
        # (no C111 on sglang_dsa: that one was the matrix's own guard missing `sglang_dsa: true`)
        ("C112", "sglang_dsa"), ("C112", "sglang_trtllm_mla"),
        ("C111", "sglang_trtllm_mla"), ("C112", "sglang_flashmla"),
    }
    for finding in found.values():
        _rerun(shipped, finding)
    # The SM121 allowlist split, found as a gate against the context kernels it guards.
    chunked = found["C111", "trtllm_mla_chunked_prefill"]
    assert {v for a in chunked.regions for v in a.values["sm"]} == {121}
    # An allowlist refuses by omission: the finding cites the grant that stops short (the SM list).
    assert chunked.rules == ("trtllm_mla_chunked_prefill.mla_allowlist",)
    assert found["C111", "trtllm_mla_kv_cache_reuse"].rules == ("trtllm_mla_kv_cache_reuse.mla_allowlist",)
    assert chunked.locations[0] == shipped.rule("trtllm_mla_chunked_prefill.mla_allowlist").location


def _answer(matrix: Matrix, kernel: str, values: Mapping[str, AxisValue]) -> bool:
    return bool(capmatrix.resolve(KernelQuery(kernel, **values), matrix=matrix))  # type: ignore[arg-type]


def _holds_somewhere(finding: Finding, **values: AxisValue) -> bool:
    return any(all(v in area.values[a] for a, v in values.items()) for area in finding.regions)


def test_shipped_vllm_gate_findings_are_the_issue_cases(shipped: Matrix) -> None:
    """vLLM 0.33.0 against its kernels, as measured on the H200: each case is a region of its finding,
    and the gate and the kernel answer it as the finding says."""
    found = _gate_findings(shipped)
    fa = found["C112", "vllm_flash_attn"]
    assert _holds_somewhere(fa, sm=90, dtype="fp16", kv_cache_dtype="fp8")
    assert _holds_somewhere(fa, sm=90, dtype="fp16", attention_sinks=True, kv_cache_dtype="fp16")
    assert not _holds_somewhere(fa, dtype="bf16", attention_sinks=True, kv_cache_dtype="bf16")
    cell: dict[str, AxisValue] = {
        "sm": 90, "attention": "gqa", "dtype": "fp16", "head_dim": 128, "q_per_kv": 4}
    fp8 = {**cell, "kv_cache_dtype": "fp8"}
    assert _answer(shipped, "vllm_flash_attn", fp8)
    assert not _answer(shipped, "flash_attn_3", fp8)
    triton = found["C112", "vllm_triton_attn"]
    assert _holds_somewhere(triton, sm=90, dtype="fp32", head_dim=576, phase="context")
    assert not _holds_somewhere(
        triton, sm=90, dtype="fp32", kv_cache_dtype="fp32", head_dim=576, phase="generation")
    # FP8 below SM89: refused at engine start by TritonAttentionImpl / TritonMLAImpl.__init__ (C113)
    for gate in ("vllm_triton_attn", "vllm_triton_mla"):
        start = found["C113", gate]
        assert _holds_somewhere(start, sm=86, kv_cache_dtype="fp8")
        assert not _holds_somewhere(start, sm=89)
        assert f"{gate}_init.fp8_below_sm89" in start.rules
        assert shipped.rule(f"{gate}_init.fp8_below_sm89").location in start.locations
        assert start.severity is Severity.INFO
    assert not _holds_somewhere(triton, sm=86, kv_cache_dtype="fp8")
    assert ("C112", "vllm_triton_mla") not in found
    fi = found["C111", "vllm_flashinfer"]
    assert _holds_somewhere(fi, sm=90, attention_sinks=True, flashinfer_trtllm=False)
    assert not _holds_somewhere(fi, sm=90, attention_sinks=True, flashinfer_trtllm=True)
    sinks = {**cell, "dtype": "bf16", "kv_cache_dtype": "bf16", "attention_sinks": True,
             "phase": "generation", "flashinfer_trtllm": False}
    assert not _answer(shipped, "vllm_flashinfer", sinks)
    assert _answer(shipped, "flashinfer_xqa", sinks)
    # FA2's heads 80 and 96 (flashinfer#4299) are no vLLM finding: its head list keeps them out.
    assert not _holds_somewhere(fi, head_dim=80)
    assert not _answer(shipped, "vllm_flashinfer", {**cell, "head_dim": 80})


# --------------------------------------------------------------------------------------------------
# The seed: the before-fix gate, found with no legacy predicate


def test_before_fix_gate_is_c111_for_every_non_mla_one_model_at_sm12x(seed_copy: Path) -> None:
    matrix = capmatrix.load(seed_copy)
    found = _gate_findings(matrix)
    seed = found["C111", GATE]
    assert seed.rules[0] == "trtllm_spec_dec_mode.sm12x_one_model"
    kinds = {v for a in seed.regions for v in a.values["attention"]}
    assert kinds == {"mha", "gqa", "mqa", "mla"}
    assert {v for a in seed.regions for v in a.values["sm"]} == {120, 121}
    for model in ("llama3_1_8b", "qwen3_8b", "mistral"):
        cell = _cell(matrix, model=model, sm=121, spec_dec="one_model", phase="generation")
        assert _in_regions(seed, cell), model
    _rerun(matrix, seed)
    # The C112 at SM12x is gone with the before-fix gate: it asked for nothing there.
    assert all(not ({120, 121} & set(a.values["sm"])) for a in found["C112", GATE].regions)


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_before_fix_gate_in_the_text_json_and_github_forms(seed_copy: Path) -> None:
    # --no-baseline: the copy carries the shipped baseline, whose keys name these findings too.
    for argv in (["check", str(seed_copy), "--no-baseline"],
                 ["check", str(seed_copy), "--json", "--no-baseline"],
                 ["check", str(seed_copy), "--format", "github", "--no-baseline"]):
        out, err = io.StringIO(), io.StringIO()
        assert run(argv, out, err) == 1
        text = out.getvalue()
        if "--json" in argv:
            findings = json.loads(text)["findings"]
            seed = next(f for f in findings if f["code"] == "C111" and f["kernels"] == [GATE])
            assert seed["rules"][0] == "trtllm_spec_dec_mode.sm12x_one_model"
            assert seed["title"] == "over-restrictive gate"
            assert all(r["witness"]["sm"] in {120, 121} for r in seed["regions"])
            assert seed["witness"]["command"].endswith(f"--matrix {seed_copy}")
        elif "github" in argv:
            lines = text.splitlines()
            assert any(line.startswith("::warning file=")
                       and "title=capmatrix C111 over-restrictive gate" in line for line in lines)
            assert any(line.startswith("::error file=")
                       and "title=capmatrix C112 over-permissive gate" in line for line in lines)
        else:
            assert "warning C111 over-restrictive gate: gate trtllm_spec_dec_mode refuses" in text


# --------------------------------------------------------------------------------------------------
# A small planted matrix: the regions are exactly the brute-force cells


def _planted(tmp_path: Path, case: str = "gates.yaml") -> Matrix:
    root = tmp_path / "caps"
    (root / "kernels").mkdir(parents=True)
    shutil.copy(CASES / "axes.yaml", root / "axes.yaml")
    shutil.copy(CASES / case, root / "kernels" / case)
    return capmatrix.load(root)


def test_planted_regions_equal_brute_force(tmp_path: Path) -> None:
    matrix = _planted(tmp_path)
    gate, kernel = matrix.kernels["g"], matrix.kernels["k"]
    found = _gate_findings(matrix)
    want: dict[str, set[tuple[AxisValue, ...]]] = {"C111": set(), "C112": set()}
    for cell in cells(matrix):
        if cell["spec_dec"] != "one_model":
            continue
        admits = supported_at(gate, cell)
        on = supported_at(kernel, cell)
        off = supported_at(kernel, {**cell, "spec_dec": "none"})
        key = tuple(cell.values())
        if not admits and on:
            want["C111"].add(key)
        if admits and not on and off:
            want["C112"].add(key)
    for code, expected in want.items():
        got = set()
        for area in found[code, "g"].regions:
            got |= set(_product(area.values))
        assert got == expected, code
        _rerun(matrix, found[code, "g"])
    assert found["C112", "g"].rules == ("g.one_model",)
    assert found["C111", "g"].rules == ("g.no_mla_sm12x",)


def test_planted_start_check_splits_c112_into_c113(tmp_path: Path) -> None:
    """A start check named in ``caught_by`` takes the part of C112's region where it refuses (C113): the
    cells are exactly the brute-force ones, and the rest stays C112."""
    root = tmp_path / "caps"
    (root / "kernels").mkdir(parents=True)
    shutil.copy(CASES / "axes.yaml", root / "axes.yaml")
    text = (CASES / "gates.yaml").read_text(encoding="utf-8")
    guard = "      targets: [k]\n"
    assert text.count(guard) == 1
    start = (
        "  g_init:\n    kind: gate\n    description: the engine's check at start\n    rules:\n"
        "      - id: g_init.all\n        grant: {spec_dec: [none, one_model]}\n"
        "        reason: r\n        source: s\n        status: untested\n"
        "      - id: g_init.no_gqa_one_model\n        exclude: {attention: gqa, spec_dec: one_model}\n"
        "        reason: the engine says no, with a remedy\n        source: s\n        status: untested\n")
    text = text.replace(guard, guard + "      caught_by: [g_init]\n") + start
    (root / "kernels" / "gates.yaml").write_text(text, encoding="utf-8")
    matrix = capmatrix.load(root)
    gate, kernel, check_gate = matrix.kernels["g"], matrix.kernels["k"], matrix.kernels["g_init"]
    found = _gate_findings(matrix)
    want: dict[str, set[tuple[AxisValue, ...]]] = {"C112": set(), "C113": set()}
    for cell in cells(matrix):
        if cell["spec_dec"] != "one_model" or not supported_at(gate, cell):
            continue
        if not supported_at(kernel, cell) and supported_at(kernel, {**cell, "spec_dec": "none"}):
            want["C112" if supported_at(check_gate, cell) else "C113"].add(tuple(cell.values()))
    assert want["C112"]
    assert want["C113"]
    for code, expected in want.items():
        got = set()
        for area in found[code, "g"].regions:
            got |= set(_product(area.values))
        assert got == expected, code
        _rerun(matrix, found[code, "g"])
    assert found["C113", "g"].rules == ("g.one_model", "g_init.no_gqa_one_model")
    assert found["C113", "g"].severity is Severity.INFO
    assert "refuses there at start (g_init.no_gqa_one_model)" in found["C113", "g"].message


def test_caught_by_names_another_gate(tmp_path: Path) -> None:
    """``caught_by`` naming a kernel that is no gate, or the gate itself, is refused (E247)."""
    root = tmp_path / "caps"
    (root / "kernels").mkdir(parents=True)
    shutil.copy(CASES / "axes.yaml", root / "axes.yaml")
    text = (CASES / "gates.yaml").read_text(encoding="utf-8")
    text = text.replace("      targets: [k]\n", "      targets: [k]\n      caught_by: [k, g]\n")
    (root / "kernels" / "gates.yaml").write_text(text, encoding="utf-8")
    problems = list(capmatrix.iter_problems(root))
    assert [(p.code, p.json_path) for p in problems] == [
        ("E247", "kernels.g.guards.caught_by[0]"), ("E247", "kernels.g.guards.caught_by[1]")]


def test_a_when_list_is_the_union_of_its_boxes(tmp_path: Path) -> None:
    """The planted guard's box split in two (MLA and the rest): the same cells, found the same way."""
    whole = _gate_findings(_planted(tmp_path / "a"))
    root = tmp_path / "b" / "caps"
    (root / "kernels").mkdir(parents=True)
    shutil.copy(CASES / "axes.yaml", root / "axes.yaml")
    text = (CASES / "gates.yaml").read_text(encoding="utf-8")
    split = ("      when:\n        - {spec_dec: one_model, attention: mla}\n"
             "        - {spec_dec: one_model, attention: {not: mla}}\n")
    assert "      when: {spec_dec: one_model}\n" in text
    (root / "kernels" / "gates.yaml").write_text(text.replace("      when: {spec_dec: one_model}\n", split),
                                                 encoding="utf-8")
    matrix = capmatrix.load(root)
    guard = matrix.kernels["g"].guards
    assert guard is not None
    assert len(guard.when) == 2
    parts = _gate_findings(matrix)
    assert set(parts) == set(whole)
    for key, finding in whole.items():
        cells = {c for area in finding.regions for c in _product(area.values)}
        assert {c for area in parts[key].regions for c in _product(area.values)} == cells, key
        assert parts[key].rules == finding.rules
        _rerun(matrix, parts[key])


def _product(values: Mapping[str, tuple[AxisValue, ...]]) -> list[tuple[AxisValue, ...]]:
    return list(product(*values.values()))


def test_guard_without_refused_or_when_and_a_role_target(tmp_path: Path) -> None:
    """No ``refused``: C112 is wherever the gate admits and no target serves; no ``when``: everywhere;
    a role target is asked with its own axes (beneath the guard's)."""
    root = tmp_path / "caps"
    (root / "kernels").mkdir(parents=True)
    shutil.copy(CASES / "axes.yaml", root / "axes.yaml")
    (root / "kernels" / "k.yaml").write_text(
        (CASES / "gates.yaml").read_text(encoding="utf-8").replace(
            "    guards:\n      targets: [k]\n      when: {spec_dec: one_model}\n"
            "      refused: {spec_dec: none}\n",
            "    guards: [decode]\n"),
        encoding="utf-8")
    (root / "roles.yaml").write_text(
        "roles:\n  decode:\n    description: d\n    candidates: [k]\n    axes: {beam: 4}\n", encoding="utf-8")
    matrix = capmatrix.load(root)
    guard = matrix.kernels["g"].guards
    assert guard is not None
    assert (guard.targets, guard.when, dict(guard.axes), guard.refused) == (("decode",), (), {}, None)
    assert pinned(matrix, "decode", {}) == {"beam": 4}
    found = _gate_findings(matrix)
    over = found["C112", "g"]
    # Without `when`, spec_dec none is in scope too: g refuses it, so it is no C112; without
    # `refused`, MLA one-model below SM12x (k serves no MLA there in either form) is one.
    assert {v for a in over.regions for v in a.values["attention"]} == {"mha", "gqa", "mla"}
    assert all(a.values["spec_dec"] == ("one_model",) for a in over.regions)
    assert "though" not in over.message
    assert "witness: model" not in over.message
    for finding in found.values():
        _rerun(matrix, finding)


def test_check_path_keeps_gate_findings_in_the_result(tmp_path: Path) -> None:
    matrix_root = tmp_path / "caps"
    _planted(tmp_path)
    result = check_path(matrix_root)
    assert result.exit_status() == 1
    assert {f.code for f in result.findings} >= {"C111", "C112"}


# --------------------------------------------------------------------------------------------------
# Reading `guards`: located errors, and the cache keeps every field

AXES = (
    "axes:\n  sm:\n    type: int\n    description: d\n    values: [80, 90]\n"
    "  e:\n    type: enum\n    description: d\n    values: [a, b]\n"
    "  x:\n    type: int\n    description: d\n    values: [1, 2]\n    derive:\n"
    "      - when: {sm: 90}\n        value: 1\n      - value: 2\n"
)


def _gate_file(guards: str, *, kind: str = "gate") -> str:
    return (
        "kernels:\n  k:\n    description: d\n    rules:\n      - id: k.r\n        grant: {sm: 90}\n"
        "        reason: r\n        source: s\n        status: untested\n"
        f"  g:\n    kind: {kind}\n    description: d\n    guards: {guards}\n    rules:\n"
        "      - id: g.r\n        grant: {e: a}\n        reason: r\n        source: s\n"
        "        status: untested\n"
    )


@pytest.mark.parametrize(
    ("guards", "kind", "code", "where", "gist"),
    [
        ("[kk]", "gate", "E244", ":13:14:",
         "kernels.g.guards[0]: gate 'g' guards unknown kernel or role 'kk' (did you mean 'k'?)"),
        ("{targets: [k, nope]}", "gate", "E244", ":13:27:", "unknown kernel or role 'nope'"),
        ("[k]", "kernel", "E245", ":13:5:", "'g' is a kernel; only a gate (kind: gate) guards others"),
        ("{targets: [k], when: {sn: 90}}", "gate", "E230", ":13:35:", "unknown axis 'sn' (axes: e, sm)"),
        ("{targets: [k], when: {x: 1}}", "gate", "E230", ":13:35:", "'x' is a derived axis"),
        ("{targets: [k], when: [{sm: 90}, {x: 1}]}", "gate", "E230", ":13:46:", "'x' is a derived axis"),
        ("{targets: [k], when: [{sn: 90}]}", "gate", "E230", ":13:36:", "unknown axis 'sn'"),
        ("{targets: [k], axes: {q: 1}}", "gate", "E230", ":13:35:", "unknown axis 'q'"),
        ("{targets: [k], refused: {e: c}}", "gate", "E231", ":13:41:", "'c' is not a value of axis 'e'"),
    ],
)
def test_guard_errors_are_located(
    tmp_path: Path, guards: str, kind: str, code: str, where: str, gist: str
) -> None:
    (tmp_path / "axes.yaml").write_text(AXES, encoding="utf-8")
    (tmp_path / "k.yaml").write_text(_gate_file(guards, kind=kind), encoding="utf-8")
    problems = list(capmatrix.iter_problems(tmp_path))
    assert [p.code for p in problems] == [code], [str(p) for p in problems]
    text = str(problems[0])
    assert f"k.yaml{where}" in text, text
    assert gist in text, text


def test_a_bad_guard_shape_is_a_schema_error(tmp_path: Path) -> None:
    (tmp_path / "axes.yaml").write_text(AXES, encoding="utf-8")
    (tmp_path / "k.yaml").write_text(_gate_file("{when: {sm: 90}}"), encoding="utf-8")
    problems = list(capmatrix.iter_problems(tmp_path))
    assert [(p.code, p.line, p.column) for p in problems] == [("E103", 13, 13)]
    assert "'guards' is a list of kernel or role names, or a mapping with 'targets'" in str(problems[0])
    assert "'targets' is a required property" in str(problems[0])
    (tmp_path / "k.yaml").write_text(_gate_file("[Xqa]"), encoding="utf-8")
    (problem,) = capmatrix.iter_problems(tmp_path)
    assert problem.code == "E103"
    assert problem.hint is not None
    assert "'Xqa' does not match" in problem.hint


def test_guards_round_trip_through_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CAPMATRIX_CACHE", raising=False)
    monkeypatch.setenv("CAPMATRIX_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "axes.yaml").write_text(AXES, encoding="utf-8")
    for n, guards in enumerate(("[k]", "{targets: [k], when: {e: a}, axes: {sm: 90}, refused: {sm: 80}}")):
        (tmp_path / "m" / "k.yaml").write_text(_gate_file(guards), encoding="utf-8")
        cold = capmatrix.load(tmp_path / "m")  # a miss: parsed, then written
        assert len(list((tmp_path / "cache" / "entries").glob("matrix-*.json"))) == 1, n
        hit = capmatrix.load(tmp_path / "m")
        assert hit is not cold
        assert hit.kernels["g"].guards == cold.kernels["g"].guards
        assert hit.kernels["g"].guards is not None
        assert hit.kernels["k"].guards is None


def test_a_cache_entry_whose_guard_has_no_location_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CAPMATRIX_CACHE", raising=False)
    monkeypatch.setenv("CAPMATRIX_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "axes.yaml").write_text(AXES, encoding="utf-8")
    (tmp_path / "m" / "k.yaml").write_text(_gate_file("[k]"), encoding="utf-8")
    cold = capmatrix.load(tmp_path / "m")
    (entry,) = (tmp_path / "cache" / "entries").glob("matrix-*.json")
    head, _nl, payload = entry.read_bytes().partition(b"\n")
    data = json.loads(payload)
    (gate,) = (k for k in data["kernels"] if k[0] == "g")
    gate[-1][1] = None  # the guard's location
    body = json.dumps(data).encode()
    magic, fmt, wanted, _sum = head.decode().split(" ")
    entry.write_bytes(f"{magic} {fmt} {wanted} {hashlib.sha256(body).hexdigest()}\n".encode() + body)
    again = capmatrix.load(tmp_path / "m")  # the forged entry is refused: parsed again
    assert again.kernels["g"].guards == cold.kernels["g"].guards
    assert json.loads(entry.read_bytes().partition(b"\n")[2]) != data  # and written again
