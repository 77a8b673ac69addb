"""capmatrix diff: the seed fix shows up as exactly the SM120/121 non-MLA one-model region."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import random
import shutil
import subprocess
import sys
from itertools import cycle, product
from pathlib import Path
from typing import TYPE_CHECKING, cast
from unittest.mock import patch

import pytest
import yaml
from analysis_synthetic import cells, random_matrix, supported_at
from hypothesis import given, settings
from hypothesis import strategies as st

import capmatrix
from capmatrix.authoring.analysis import Change, MatrixDiff, diff, union_space
from capmatrix.authoring.analysis._boxes import KernelBoxes, supported_region
from capmatrix.authoring.cli import run
from capmatrix.authoring.cli._analysis import render_diff_markdown, render_diff_text
from capmatrix.authoring.cli._git import RevisionError, _unsafe, extract_revision
from capmatrix.authoring.loader import default_path
from capmatrix.model import Condition, Location, Role, RoleOrder
from capmatrix.regions import Region

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from conftest import WriteMatrix

    from capmatrix.model import AxisValue

SHIPPED = default_path()
NON_MLA = {"mha", "gqa", "mqa"}


def make_before_fix(dest: Path) -> Path:
    """The shipped matrix as the release answered before the fix: XQA spec-dec off on SM12x in
    one-model mode for the non-MLA attention types too. The shipped matrix keeps that switch in the
    release-1.2 gate (MLA only); here it is widened into an XQA exclusion so that the kernel diff and
    the role shift show the region the fix gave back."""
    shutil.copytree(SHIPPED, dest)
    gates = yaml.safe_load((dest / "kernels" / "trtllm_gates.yaml").read_text())
    fixed = next(r for r in gates["kernels"]["trtllm_spec_dec_mode"]["rules"]
                 if r["id"] == "trtllm_spec_dec_mode.mla_sm12x_one_model")
    # Check what the shipped switch says before widening it.
    assert fixed["exclude"]["sm"] == ">=120"
    assert fixed["exclude"]["attention"] == "mla"
    assert fixed["exclude"]["spec_dec"] == "one_model"
    path = dest / "kernels" / "xqa.yaml"
    data = yaml.safe_load(path.read_text())
    rules = data["kernels"]["xqa"]["rules"]
    rules.append(
        {
            "id": "xqa.sm12x_spec_dec_before_fix",
            "exclude": {"sm": "sm_12x", "spec_dec": "one_model", "attention": sorted(NON_MLA)},
            "reason": "before PR #10765: XQA spec-dec off on SM120 for every model",
            "source": "test fixture",
            "status": "untested",
        }
    )
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


@pytest.fixture(scope="module")
def before_after(tmp_path_factory: pytest.TempPathFactory) -> tuple[capmatrix.Matrix, capmatrix.Matrix]:
    before = capmatrix.load(make_before_fix(tmp_path_factory.mktemp("m") / "before"))
    return before, capmatrix.load(SHIPPED)


def _only_seed_region(values: Mapping[str, tuple[object, ...]]) -> None:
    assert set(values["sm"]) <= {120, 121}
    assert set(values["attention"]) <= NON_MLA
    assert values["spec_dec"] == ("one_model",)


def test_seed_fix_is_exactly_the_sm12x_non_mla_one_model_region(
    before_after: tuple[capmatrix.Matrix, capmatrix.Matrix],
) -> None:
    before, after = before_after
    result = diff(before, after)
    changed = {k.kernel: k for k in result.kernels if k.change is not Change.EQUIVALENT}
    assert list(changed) == ["xqa"]
    xqa = changed["xqa"]
    assert xqa.change is Change.WIDER
    assert xqa.presence == "both"
    assert xqa.lost == ()
    assert xqa.gained
    for area in xqa.gained:
        _only_seed_region(area.values)
        query = capmatrix.KernelQuery("xqa", **area.witness)  # type: ignore[arg-type]
        assert capmatrix.resolve(query, matrix=after)
        assert not capmatrix.resolve(query, matrix=before)
    # Exactly: the seed box intersected with where XQA is supported after the fix.
    space = after.space
    wanted: dict[str, set[AxisValue]] = {
        "sm": {120, 121}, "attention": set(NON_MLA), "spec_dec": {"one_model"}
    }
    seed_box = tuple(
        a.mask_of(wanted[a.name]) if a.name in wanted else a.full_mask for a in space.axes
    )
    supported = supported_region(space, KernelBoxes.of(after.kernels["xqa"], space))
    gained = Region(space, [tuple(a.mask_of(set(v)) for a, v in
                                  zip(space.axes, area.values.values(), strict=True))
                            for area in xqa.gained])
    assert gained == supported & Region(space, [seed_box], disjoint=True)
    sms = {v for area in xqa.gained for v in area.values["sm"]}
    assert sms == {120, 121}  # SM121 is listed wherever SM120 is


def test_seed_fix_role_moves_to_xqa(before_after: tuple[capmatrix.Matrix, capmatrix.Matrix]) -> None:
    before, after = before_after
    result = diff(before, after)
    roles = {r.role: r for r in result.roles if r.changed}
    assert set(roles) == {"trtllm_generation"}
    role = roles["trtllm_generation"]
    assert role.coverage in {Change.WIDER, Change.EQUIVALENT}
    assert {s.new for s in role.shifts} == {"xqa"}
    for shift in role.shifts:
        for area in shift.areas:
            _only_seed_region(area.values)
            query = capmatrix.KernelQuery(**area.witness)  # type: ignore[arg-type]
            assert capmatrix.select("trtllm_generation", query, matrix=after).kernel == "xqa"
            assert capmatrix.select("trtllm_generation", query, matrix=before).kernel == shift.old


def test_reverse_diff_is_narrower(before_after: tuple[capmatrix.Matrix, capmatrix.Matrix]) -> None:
    before, after = before_after
    xqa = next(k for k in diff(after, before).kernels if k.kernel == "xqa")
    assert xqa.change is Change.NARROWER
    assert xqa.gained == ()
    assert [a.description for a in xqa.lost] == [
        a.description for a in next(k for k in diff(before, after).kernels if k.kernel == "xqa").gained
    ]


def test_identical_matrices_are_equivalent() -> None:
    matrix = capmatrix.load()
    result = diff(matrix, matrix)
    assert not result.changed
    assert all(k.change is Change.EQUIVALENT for k in result.kernels)
    assert not any(r.changed for r in result.roles)


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


def test_cli_diff_directories(tmp_path: Path) -> None:
    before = make_before_fix(tmp_path / "before")
    status, out, _ = _run("diff", str(before), str(SHIPPED), "--json")
    assert status == 0
    data = json.loads(out)
    assert data["changed"] is True
    xqa = next(k for k in data["kernels"] if k["kernel"] == "xqa")
    assert xqa["change"] == "wider"
    assert xqa["lost"] == []
    assert all(set(g["region"]["sm"]) <= {120, 121} for g in xqa["gained"])
    assert _run("diff", str(before), str(SHIPPED), "--exit-code")[0] == 1
    status, out, _ = _run("diff", str(before), str(SHIPPED), "--markdown")
    assert status == 0
    assert "| `xqa` | **wider** |" in out
    assert "witness: `capmatrix query xqa --sm 120 --attention mha --spec-dec one_model" in out
    status, out, _ = _run("diff", str(SHIPPED), str(SHIPPED), "--markdown")
    assert "No semantic change" in out
    status, out, _ = _run("diff", str(before), str(SHIPPED))
    assert "kernel xqa: wider" in out
    # Open domains: the head sizes and groups XQA lacks (classes no list names) stay out of the gain.
    assert "+ gained: sm in {120, 121} and attention in {mha, gqa, mqa} and spec_dec=one_model and " in out


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_cli_diff_git_revisions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    make_before_fix(repo / "capabilities")
    _git(repo, "add", "capabilities")
    _git(repo, "commit", "-qm", "before")
    shutil.rmtree(repo / "capabilities")
    shutil.copytree(SHIPPED, repo / "capabilities")
    _git(repo, "add", "-A", "capabilities")
    _git(repo, "commit", "-qm", "after")
    monkeypatch.chdir(repo)
    status, out, _ = _run("diff", "HEAD~1", "HEAD", "--json")
    assert status == 0, out
    data = json.loads(out)
    assert data["old"] == "HEAD~1"
    assert [k["kernel"] for k in data["kernels"] if k["change"] != "equivalent"] == ["xqa"]
    status, out, _ = _run("diff", "HEAD~1", "--json")  # NEW: this repository's working tree
    assert json.loads(out)["new"] == "working tree"
    assert [k["kernel"] for k in json.loads(out)["kernels"] if k["change"] != "equivalent"] == ["xqa"]
    status, out, _ = _run("diff", "HEAD", "--json")  # the working tree is HEAD
    assert status == 0
    assert json.loads(out)["changed"] is False
    extracted = extract_revision("HEAD~1", tmp_path / "x")
    assert (extracted / "kernels" / "xqa.yaml").is_file()
    with pytest.raises(RevisionError, match="no-such-rev"):
        extract_revision("no-such-rev", tmp_path / "y")
    status, _, err = _run("diff", "no-such-rev")
    assert status == 2
    assert "cannot read revision 'no-such-rev'" in err


def test_union_space_answers_new_values_with_old_ranges(write_matrix: WriteMatrix) -> None:
    old = capmatrix.load(write_matrix())
    axes = (Path(old.root) / "axes.yaml").read_text().replace(
        "values: [80, 90, 100, 103, 120, 121]", "values: [80, 90, 100, 103, 110, 120, 121]"
    )
    new_root = Path(old.root).parent / "new"
    shutil.copytree(old.root, new_root)
    (new_root / "axes.yaml").write_text(axes)
    new = capmatrix.load(new_root)
    space, notes = union_space(old, new)
    assert notes == ("axis sm: values added [110]",)
    assert 110 in space.axes[0].values
    result = diff(old, new)
    # xqa.hmma is sm ">=80" on both sides, fallback "[80, 120)": 110 was already covered by ranges.
    assert result.axes == notes  # the universe changed, the answers did not
    assert all(k.change is Change.EQUIVALENT for k in result.kernels)
    assert not any(r.changed for r in result.roles)


def test_moving_a_bound_adds_no_values(write_matrix: WriteMatrix) -> None:
    """Only a rule changed: the open sm axis's class representatives move with the cut, but the declared
    universe is the same, so no "values added" (it said "axis sm: values added [125]")."""
    old = capmatrix.load(write_matrix())
    kernels = (Path(old.root) / "kernels/test.yaml").read_text()
    assert 'grant: {sm: "[80, 120)"}' in kernels
    new_root = Path(old.root).parent / "new"
    shutil.copytree(old.root, new_root)
    (new_root / "kernels/test.yaml").write_text(kernels.replace('"[80, 120)"', '"[80, 125)"'))
    new = capmatrix.load(new_root)
    sm_old, sm_new = old.axes["sm"], new.axes["sm"]
    assert sm_old.known == sm_new.known
    assert sm_old.values != sm_new.values  # the representatives differ: the case the note got wrong
    _space, notes = union_space(old, new)
    assert notes == ()
    result = diff(old, new)
    assert result.axes == ()
    assert result.changed  # the rule's change is reported as the kernel's
    assert "values added" not in render_diff_text(result)
    # a value the YAML stops listing is a change of the universe, and said
    (new_root / "axes.yaml").write_text((new_root / "axes.yaml").read_text().replace(
        "values: [80, 90, 100, 103, 120, 121]", "values: [80, 100, 103, 120, 121]"))
    _space, notes = union_space(old, capmatrix.load(new_root))
    assert notes == ("axis sm: values removed [90]",)


# --------------------------------------------------------------------------------------------------
# Brute force


SMALL = (4, 3, 3, 2)


def _routed_diff(old: capmatrix.Matrix, new: capmatrix.Matrix, local: bool | str | None) -> MatrixDiff:
    """``diff`` on one route, or with ``local="mixed"`` each group on the route it is dealt in turn
    (partition, diagrams, ...), as the per-group choice may mix them in one diff."""
    if local != "mixed":
        assert not isinstance(local, str)
        return diff(old, new, local=local)
    with patch("capmatrix.authoring.analysis._diff.table_shaped", side_effect=cycle([True, False])) as dealt:
        result = diff(old, new)
    assert dealt.call_count >= len(result.roles)  # a group per role, then per kernel left
    return result


ROUTES = st.sampled_from([None, True, False, "mixed"])


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10**9), st.integers(0, 10**9), st.integers(1, 16), ROUTES)
def test_diff_equals_brute_force(seed_a: int, seed_b: int, rules: int, local: bool | str | None) -> None:
    old = random_matrix(seed_a, sizes=SMALL, rules=rules, per_kernel=4, role_size=2)
    new = random_matrix(seed_b, sizes=SMALL, rules=rules + seed_b % 3, per_kernel=4, role_size=2)
    result = _routed_diff(old, new, local)
    for kd in result.kernels:
        a, b = old.kernels.get(kd.kernel), new.kernels.get(kd.kernel)
        gained, lost = set(), set()
        for c in cells(old):
            was = a is not None and supported_at(a, c)
            now = b is not None and supported_at(b, c)
            key = tuple(c.values())
            if now and not was:
                gained.add(key)
            if was and not now:
                lost.add(key)
        assert {x for area in kd.gained for x in product(*area.values.values())} == gained
        assert {x for area in kd.lost for x in product(*area.values.values())} == lost
        assert kd.change is Change.of(bool(gained), bool(lost))
    for rd in result.roles:
        expected: dict[tuple[str | None, str | None], set[tuple[object, ...]]] = {}
        for c in cells(old):
            picks = []
            for matrix in (old, new):
                role = matrix.roles.get(rd.role)
                cands = role.candidates if role else ()
                picks.append(next((k for k in cands if supported_at(matrix.kernels[k], c)), None))
            if picks[0] != picks[1]:
                expected.setdefault((picks[0], picks[1]), set()).add(tuple(c.values()))
        got = {
            (s.old, s.new): {x for area in s.areas for x in product(*area.values.values())}
            for s in rd.shifts
        }
        assert got == expected


def test_added_and_removed_kernels_roles_and_axes(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    old_root = write_matrix()
    new_root = tmp_path / "new"
    shutil.copytree(old_root, new_root)
    axes = (new_root / "axes.yaml").read_text()
    axes = axes.replace("    values: [bf16, fp8]\n", "    values: [bf16, fp8, int8]\n")
    axes = axes.replace(
        "  causal:\n    type: bool\n    description: causal mask\n",
        "  phase:\n    type: enum\n    description: phase\n    values: [context, generation]\n",
    )
    (new_root / "axes.yaml").write_text(axes)
    kernels = (new_root / "kernels" / "test.yaml").read_text()
    kernels = kernels.replace(
        "  fallback:\n    description: slow path\n", "  slow:\n    description: renamed\n"
    )
    kernels = kernels.replace("fallback.all", "slow.all").replace("[xqa, fallback]", "[xqa, slow]")
    kernels += "  other:\n    description: new role\n    candidates: [slow]\n"
    (new_root / "kernels" / "test.yaml").write_text(kernels)
    old, new = capmatrix.load(old_root), capmatrix.load(new_root)
    result = diff(old, new, old_label="a", new_label="b")
    assert result.axes == (
        "axis kv: values added ['int8']", "axis phase added", "axis causal removed",
    )
    by_kernel = {k.kernel: k for k in result.kernels}
    assert by_kernel["fallback"].presence == "removed"
    assert by_kernel["fallback"].change is Change.NARROWER
    assert by_kernel["slow"].presence == "added"
    assert by_kernel["slow"].change is Change.WIDER
    roles = {r.role: r for r in result.roles}
    assert roles["other"].presence == "added"
    assert roles["gen"].changed
    assert {(s.old, s.new) for s in roles["gen"].shifts} == {("fallback", "slow")}
    text = render_diff_text(result)
    assert "kernel fallback: narrower (kernel removed)" in text
    assert "axis phase added" in text
    markdown = render_diff_markdown(result)
    assert "**Universe:** axis kv: values added ['int8']" in markdown
    assert "| `slow` | **wider** (added) |" in markdown
    assert "`fallback` → `slow`:" in markdown


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9), st.integers(0, 10**6), ROUTES)
def test_diff_of_a_small_edit_equals_brute_force(seed: int, pick: int, local: bool | str | None) -> None:
    old = random_matrix(seed, sizes=SMALL, rules=12, per_kernel=4, role_size=3)
    other = random_matrix(seed + 1, sizes=SMALL, rules=12, per_kernel=4, role_size=3)
    # Replace one rule's region by another matrix's: most rules are shared by both sides.
    name = sorted(old.kernels)[pick % len(old.kernels)]
    kernel = old.kernels[name]
    i = pick % len(kernel.rules)
    donor = other.rules[pick % len(other.rules)]
    rules = list(kernel.rules)
    rules[i] = dataclasses.replace(rules[i], conditions=donor.conditions)
    kernels = {**old.kernels, name: dataclasses.replace(kernel, rules=tuple(rules))}
    new = dataclasses.replace(old, kernels=kernels)
    result = _routed_diff(old, new, local)
    for kd in result.kernels:
        a, b = old.kernels[kd.kernel], new.kernels[kd.kernel]
        gained = {tuple(c.values()) for c in cells(old) if supported_at(b, c) and not supported_at(a, c)}
        lost = {tuple(c.values()) for c in cells(old) if supported_at(a, c) and not supported_at(b, c)}
        assert {x for area in kd.gained for x in product(*area.values.values())} == gained
        assert {x for area in kd.lost for x in product(*area.values.values())} == lost
        if kd.kernel != name:
            assert kd.change is Change.EQUIVALENT
    for rd in result.roles:
        role = old.roles[rd.role]
        moved: dict[tuple[str | None, str | None], set[tuple[object, ...]]] = {}
        for c in cells(old):
            was = next((k for k in role.candidates if supported_at(old.kernels[k], c)), None)
            now = next((k for k in role.candidates if supported_at(new.kernels[k], c)), None)
            if was != now:
                moved.setdefault((was, now), set()).add(tuple(c.values()))
        got = {
            (s.old, s.new): {x for area in s.areas for x in product(*area.values.values())}
            for s in rd.shifts
        }
        assert got == moved


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("/etc/passwd", "is a symbolic link to an absolute path"),
        ("../../outside.yaml", "is a symbolic link that leads outside capabilities/"),
    ],
)
def test_cli_diff_revision_with_a_link_out_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, message: str
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    make_before_fix(repo / "capabilities")
    (repo / "capabilities" / "kernels" / "stolen.yaml").symlink_to(target)
    _git(repo, "add", "capabilities")
    _git(repo, "commit", "-qm", "link")
    monkeypatch.chdir(repo)
    with pytest.raises(RevisionError, match=message):
        extract_revision("HEAD", tmp_path / "x")
    assert not (tmp_path / "x" / "capabilities" / "kernels" / "stolen.yaml").is_symlink()
    status, out, err = _run("diff", "HEAD", str(SHIPPED))
    assert status == 2
    assert out == ""
    assert "Traceback" not in err
    assert "cannot read revision 'HEAD': 'capabilities/kernels/stolen.yaml' " + message in err


@pytest.mark.parametrize(
    ("name", "mode", "linkname", "refused"),
    [
        ("capabilities/axes.yaml", "100644", None, False),
        ("capabilities/run.yaml", "100755", None, False),
        ("capabilities/kernels/a.yaml", "120000", None, False),  # listed: its target is read later
        ("capabilities/kernels/a.yaml", "120000", "../axes.yaml", False),
        ("capabilities/kernels/a.yaml", "120000", "../../README.md", True),
        ("capabilities/kernels/a.yaml", "120000", "/etc/passwd", True),
        ("capabilities/sub", "160000", None, True),
        ("/capabilities/axes.yaml", "100644", None, True),
        ("capabilities/../x.yaml", "100644", None, True),
        ("capabilities", "100644", None, True),
        ("other/axes.yaml", "100644", None, True),
    ],
)
def test_only_plain_entries_within_the_matrix_are_extracted(
    name: str, mode: str, linkname: str | None, refused: bool
) -> None:
    assert (_unsafe(name, mode, "capabilities", linkname) is not None) is refused


def test_role_orders_in_diff(tmp_path: Path) -> None:
    """A role whose candidate list depends on the query: the diff follows each side's orders, value by
    value against select() over every cell of the small universe.
    """
    from test_authoring_loader_features import AXES, CELLS, KERNELS

    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    changed = KERNELS.replace("candidates: [tri, fa, slow]", "candidates: [fa, slow]")
    for root, kernels in ((old_dir, KERNELS), (new_dir, changed)):
        root.mkdir()
        (root / "axes.yaml").write_text(AXES, encoding="utf-8")
        (root / "k.yaml").write_text(kernels, encoding="utf-8")
    old, new = capmatrix.load(old_dir), capmatrix.load(new_dir)
    assert not any(r.changed for r in diff(old, old).roles)
    role = next(r for r in diff(old, new).roles if r.role == "pick")
    want = set()
    for sm, head, block, mla, lib in CELLS:
        query = capmatrix.KernelQuery(sm=sm, head=head, block=block, mla=mla, lib=lib)
        pair = (capmatrix.select("pick", query, old).kernel, capmatrix.select("pick", query, new).kernel)
        if pair[0] != pair[1]:
            want.add(pair)
    assert want  # the change moves some cells
    assert {(s.old, s.new) for s in role.shifts} == want
    for shift in role.shifts:  # only where the SM >= 100 order applies, never for MLA
        assert all(set(area.values["sm"]) <= {100, 120} and area.values["mla"] == (False,)
                   for area in shift.areas)


def test_cli_diff_json_streams_the_text_json_would_write(tmp_path: Path) -> None:
    """``diff --json`` writes its report as it makes it: the same text as the whole form dumped."""
    before = make_before_fix(tmp_path / "before")
    status, out, _ = _run("diff", str(before), str(SHIPPED), "--json")
    assert status == 0
    result = diff(capmatrix.load(before), capmatrix.load(SHIPPED), old_label=str(before),
                  new_label=str(SHIPPED))
    assert out == json.dumps(result.as_dict(), indent=2) + "\n"
    lazy = result.as_dict(lazy=True)
    assert not isinstance(lazy["kernels"], list)
    kernels, roles = (cast("Iterator[object]", lazy[k]) for k in ("kernels", "roles"))
    assert {**lazy, "kernels": list(kernels), "roles": list(roles)} == result.as_dict()


def test_a_large_change_lists_its_first_boxes_and_counts_them_all() -> None:
    """Past ``max_regions`` a gain, loss or move shows its first canonical boxes and their exact count."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks import synth

    base = synth.boxes_matrix(200)
    old, new = base.build(), synth.mutate(base, 0.2).build()
    whole = diff(old, new, local=False, max_regions=10**9)
    bounded = diff(old, new, local=False, max_regions=3)
    assert whole.as_dict()["roles"] != bounded.as_dict()["roles"]  # something was cut
    cut = 0
    pairs = []
    for k_whole, k_part in zip(whole.kernels, bounded.kernels, strict=True):
        pairs += [(k_whole.gained, k_whole.gained_total, k_part.gained, k_part.gained_total),
                  (k_whole.lost, k_whole.lost_total, k_part.lost, k_part.lost_total)]
    for r_whole, r_part in zip(whole.roles, bounded.roles, strict=True):
        pairs += [(x.areas, x.total, y.areas, y.total)
                  for x, y in zip(r_whole.shifts, r_part.shifts, strict=True)]
    space = union_space(old, new)[0]
    for full, full_total, part, part_total in pairs:
        assert full_total == len(full)  # listed whole: the merged regions
        region = Region(space, [a.box for a in full], disjoint=True)
        assert all(Region(space, [a.box], disjoint=True) <= region for a in part)  # inside the change
        if part_total <= 3:
            assert part == full
            continue
        cut += 1
        assert len(part) == 3
        assert part_total >= len(full)  # canonical boxes: at least as many as merged regions
        assert all(any(x & y == 0 for x, y in zip(a.box, b.box, strict=True))
                   for i, a in enumerate(part) for b in part[i + 1:])  # disjoint
    assert cut
    text = render_diff_text(bounded)
    assert "more boxes (the first 3 in --json)" in text


def _random_role(rnd: random.Random, name: str, kernels: list[str]) -> Role:
    """A role over ``kernels`` (some maybe absent from a side): one list, or orders on axis ``a1``."""
    here = Location(path="roles.yaml", line=1)

    def some() -> tuple[str, ...]:
        return tuple(rnd.sample(kernels, rnd.randint(0, len(kernels))))

    if rnd.random() < 0.4:
        return Role(name=name, description="r", candidates=some(), location=here)
    values = ("v0", "v1", "v2")  # a1 of SMALL
    orders, taken = [], 0
    for _ in range(rnd.randint(1, 3)):
        chosen = frozenset(rnd.sample(values, rnd.randint(1, 2)))
        if rnd.random() < 0.25:
            when: tuple[dict[str, Condition], ...] = ()
            mask = 0b111
        else:
            when = ({"a1": Condition(axis="a1", text=str(sorted(chosen)), values=chosen)},)
            mask = sum(1 << values.index(v) for v in chosen)
        area = ((0b1111, mask & ~taken, 0b111, 0b11),) if mask & ~taken else ()
        taken |= mask
        orders.append(RoleOrder(when=when, candidates=some(), text="o", location=here, area=area))
        if not when:
            break
    return Role(name=name, description="r", location=here, orders=tuple(orders),
                candidates=tuple(dict.fromkeys(c for o in orders for c in o.candidates)))


def _selected(matrix: capmatrix.Matrix, role: Role | None, cell: dict[str, AxisValue]) -> str | None:
    if role is None:
        return None
    candidates, decided = role.order_for(cell)
    assert decided
    return next((k for k in candidates if k in matrix.kernels and supported_at(matrix.kernels[k], cell)),
                None)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10**9), ROUTES)
def test_role_moves_with_changed_lists_and_unchanged_candidates_equal_brute_force(
    seed: int, local: bool | str | None
) -> None:
    """Roles whose candidate lists or orders change (reordered, added, dropped candidates; kernels
    absent from one side), and roles whose candidates are partly or wholly unchanged: every move
    against the winner of each side cell by cell."""
    rnd = random.Random(seed)  # noqa: S311 - test data, not secrets
    old = random_matrix(seed, sizes=SMALL, rules=15, per_kernel=3, role_size=5)
    donor = random_matrix(seed + 1, sizes=SMALL, rules=15, per_kernel=3, role_size=5)
    kernels = dict(old.kernels)
    for name in sorted(kernels):
        roll = rnd.random()
        if roll < 0.4:
            continue  # unchanged: the same rules on both sides
        if roll < 0.6:
            del kernels[name]
        elif roll < 0.8:
            rules = list(kernels[name].rules)
            i = rnd.randrange(len(rules))
            rules[i] = dataclasses.replace(rules[i], conditions=rnd.choice(donor.rules).conditions)
            kernels[name] = dataclasses.replace(kernels[name], rules=tuple(rules))
        else:
            kernels[name] = dataclasses.replace(donor.kernels[name], name=name)
    if rnd.random() < 0.5:
        kernels["extra"] = dataclasses.replace(donor.kernels["k0"], name="extra")
    names = [*old.kernels, "extra"]
    old_roles = {f"r{i}": _random_role(rnd, f"r{i}", names) for i in range(3)}
    new_roles = {name: role if rnd.random() < 0.4 else _random_role(rnd, name, names)
                 for name, role in old_roles.items() if rnd.random() < 0.9}
    old = dataclasses.replace(old, roles=old_roles)
    new = dataclasses.replace(old, kernels=kernels, roles=new_roles)
    result = _routed_diff(old, new, local)
    assert [r.role for r in result.roles] == list(old_roles)
    for rd in result.roles:
        expected: dict[tuple[str | None, str | None], set[tuple[object, ...]]] = {}
        for c in cells(old):
            pair = (_selected(old, old.roles.get(rd.role), c), _selected(new, new.roles.get(rd.role), c))
            if pair[0] != pair[1]:
                expected.setdefault(pair, set()).add(tuple(c.values()))
        got = {
            (s.old, s.new): {x for area in s.areas for x in product(*area.values.values())}
            for s in rd.shifts
        }
        assert got == expected
        assert [(s.old, s.new) for s in rd.shifts] == sorted(got, key=lambda p: (str(p[0]), str(p[1])))


# --------------------------------------------------------------------------------------------------
# diff REV reads the committed objects: no attributes, no filters, the loader's limits first


def _repo_with_two_commits(tmp_path: Path, attributes: str) -> Path:
    """before -> after (xqa changed), the revision carrying ``attributes`` in its .gitattributes."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    make_before_fix(repo / "capabilities")
    _git(repo, "add", "capabilities")
    _git(repo, "commit", "-qm", "before")
    shutil.rmtree(repo / "capabilities")
    shutil.copytree(SHIPPED, repo / "capabilities")
    (repo / ".gitattributes").write_text(attributes, encoding="utf-8")
    _git(repo, "add", "-A", ".")
    _git(repo, "commit", "-qm", "after")
    return repo


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("attributes", [
    "capabilities/kernels/xqa.yaml export-ignore\n",
    "capabilities/** export-ignore\n",
    "*.yaml export-subst\n",
    "capabilities/kernels/xqa.yaml filter=hide\n",
])
def test_a_revisions_attributes_hide_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attributes: str
) -> None:
    repo = _repo_with_two_commits(tmp_path, attributes)
    _git(repo, "config", "filter.hide.smudge", "true")  # a filter that would empty the file
    _git(repo, "config", "filter.hide.clean", "cat")
    monkeypatch.chdir(repo)
    status, out, err = _run("diff", "HEAD~1", "HEAD", "--json", "--exit-code")
    assert status == 1, err
    assert [k["kernel"] for k in json.loads(out)["kernels"] if k["change"] != "equivalent"] == ["xqa"]
    extracted = extract_revision("HEAD", tmp_path / "x")
    xqa = "kernels/xqa.yaml"
    assert (extracted / xqa).read_bytes() == (SHIPPED / xqa).read_bytes()
    assert not (extracted / "evidence").exists()  # what the loader does not read is not written


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_blob_past_the_loaders_limit_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from capmatrix.authoring.cli import _git as git_module

    repo = _repo_with_two_commits(tmp_path, "")
    largest = max(SHIPPED.rglob("*.yaml"), key=lambda p: p.stat().st_size)  # the one refused
    size = largest.stat().st_size
    monkeypatch.setattr(git_module, "MAX_FILE_BYTES", size - 1)

    def never(_git: str, _top: Path, _revision: str, oids: list[str]) -> dict[str, bytes]:
        if oids:
            raise AssertionError("a blob was read")
        return {}

    monkeypatch.setattr(git_module, "_cat", never)
    monkeypatch.chdir(repo)
    status, out, err = _run("diff", "HEAD")
    assert (status, out) == (2, "")
    shown = largest.relative_to(SHIPPED.parent).as_posix()
    assert (f"cannot read revision 'HEAD': '{shown}' is {size} bytes; "
            f"a capability file has at most {size - 1}") in err
    monkeypatch.setattr(git_module, "MAX_FILE_BYTES", 10**9)
    monkeypatch.setattr(git_module, "MAX_TOTAL_BYTES", 1000)
    with pytest.raises(RevisionError, match="more than 2000 YAML files or 1000 bytes"):
        extract_revision("HEAD", tmp_path / "y")
    monkeypatch.setattr(git_module, "MAX_ENTRIES", 3)
    with pytest.raises(RevisionError, match="lists more than 3 entries"):
        extract_revision("HEAD", tmp_path / "z")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_submodule_or_a_file_in_the_matrixs_place_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo_with_two_commits(tmp_path, "")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()
    _git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},capabilities/vendored")
    _git(repo, "commit", "-qm", "submodule")
    monkeypatch.chdir(repo)
    with pytest.raises(RevisionError, match="'capabilities/vendored' is neither a file nor a link"):
        extract_revision("HEAD", tmp_path / "x")
    _git(repo, "rm", "-rq", "--cached", "capabilities")
    (repo / "other").write_text("x\n", encoding="utf-8")
    _git(repo, "add", "other")
    _git(repo, "commit", "-qm", "no matrix")
    with pytest.raises(RevisionError, match="no capabilities/ in this revision"):
        extract_revision("HEAD", tmp_path / "y")
    shutil.rmtree(repo / "capabilities")
    (repo / "capabilities").write_text("not a directory\n", encoding="utf-8")
    _git(repo, "add", "capabilities")
    _git(repo, "commit", "-qm", "a file")
    with pytest.raises(RevisionError, match="'capabilities' lies outside capabilities/"):
        extract_revision("HEAD", tmp_path / "z")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_links_within_a_revision_are_written_with_what_they_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    caps = make_before_fix(repo / "capabilities")
    (caps / ".src").mkdir()
    (caps / "kernels" / "xqa.yaml").rename(caps / ".src" / "xqa.kernel")  # neither YAML nor seen
    (caps / "kernels" / "xqa.yaml").symlink_to("../.src/xqa.kernel")
    (caps / "notes.txt").write_text("not read\n", encoding="utf-8")
    _git(repo, "add", "capabilities")
    _git(repo, "commit", "-qm", "linked")
    monkeypatch.chdir(repo)
    extracted = extract_revision("HEAD", tmp_path / "x")
    assert (extracted / "kernels" / "xqa.yaml").is_symlink()
    assert capmatrix.load(extracted).kernels["xqa"].rules
    assert not (extracted / "notes.txt").exists()
    from capmatrix.authoring.cli import _git as git_module

    monkeypatch.setattr(git_module, "MAX_LINK_BYTES", 3)
    with pytest.raises(RevisionError, match=r"'capabilities/kernels/xqa\.yaml' is a symbolic link of 18"):
        extract_revision("HEAD", tmp_path / "y")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_revision_without_yaml_and_git_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from capmatrix.authoring.cli import _git as git_module

    repo = tmp_path / "repo"
    (repo / "capabilities").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "capabilities" / "README").write_text("no matrix yet\n", encoding="utf-8")
    _git(repo, "add", "capabilities")
    _git(repo, "commit", "-qm", "empty")
    monkeypatch.chdir(repo)
    assert list(extract_revision("HEAD", tmp_path / "x").glob("*")) == []
    real_run = subprocess.run

    def failing_cat(argv: list[str], **kw: object) -> object:
        if "cat-file" in argv:
            return subprocess.CompletedProcess(argv, 128, b"", b"fatal: broken object")
        return real_run(argv, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "run", failing_cat)
    with pytest.raises(RevisionError, match="broken object"):
        git_module._cat("git", repo, "HEAD", ["0" * 40])
    monkeypatch.setattr(subprocess, "run", real_run)
    tree = real_run(["git", "rev-parse", "HEAD^{tree}"], cwd=repo, capture_output=True, text=True,
                    check=True).stdout.strip()
    with pytest.raises(RevisionError, match=f"object {tree} is not a file"):
        git_module._cat("git", repo, "HEAD", [tree])
    with pytest.raises(RevisionError, match="HEAD~5"):
        git_module._list("git", repo, "HEAD~5", "capabilities")
