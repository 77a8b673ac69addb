"""The benchmark generators and baselines, checked cell by cell on small synthetic universes.

The benchmarks time the resolver, the analyses and two rules engines on synthetic matrices; these tests
make sure that what is timed is right: generators are deterministic and load, and every answer (resolver,
role regions, peers, the hardcoded conditional) equals a brute-force walk over every cell.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

import capmatrix
from capmatrix.authoring.analysis import role_regions
from capmatrix.model import Effect

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import shapes, synth  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from capmatrix.model import AxisValue, Kernel
    from capmatrix.regions import Region


def small_synthetics() -> list[synth.Synthetic]:
    base = synth.boxes_matrix(40, n_axes=4, values_per_axis=4, n_kernels=3, seed=3)
    return [
        base,
        synth.mutate(base, 0.3, seed=2),
        synth.dmn_matrix(24, n_axes=4, values_per_axis=4, noise=0.25, seed=5),
        synth.dmn_matrix(24, n_axes=4, values_per_axis=4, noise=0.25, single_kernel=True, seed=5),
        *(shapes.generate(replace(shape, n_axes=4, values_per_axis=4, per_kernel=8, role_size=3,
                                  list_size=(1, 3)), 48)
          for shape in shapes.family() if shape.name in ("issue", "open-ints", "sparse-roles")),
    ]


SMALL = small_synthetics()
IDS = [s.name for s in SMALL]


def cells(m: capmatrix.Matrix) -> list[dict[str, AxisValue]]:
    names = list(m.axes)
    return [dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(a.values for a in m.axes.values()))]


def query(kernel: str, axes: Mapping[str, AxisValue]) -> capmatrix.KernelQuery:
    """``KernelQuery(kernel, **axes)``; the cast only tells mypy that ``axes`` never feeds ``model``."""
    return capmatrix.KernelQuery(kernel, **cast("dict[str, Any]", axes))


def brute_supported(kernel: Kernel, cell: dict[str, AxisValue]) -> bool:
    hits = [r for r in kernel.rules
            if all(c.contains(cell[a]) for a, c in r.conditions.items())]
    return any(r.effect is Effect.GRANT for r in hits) and not any(
        r.effect is Effect.EXCLUDE for r in hits
    )


def region_cells(region: Region) -> set[tuple[AxisValue, ...]]:
    out: set[tuple[AxisValue, ...]] = set()
    for box in region.boxes:
        out.update(itertools.product(*(a.values_of(mask) for a, mask in zip(
            region.space.axes, box, strict=True))))
    return out


# --------------------------------------------------------------------------------------------------
# generators


@pytest.mark.parametrize("make", [
    lambda seed: synth.boxes_matrix(60, n_axes=5, values_per_axis=4, seed=seed),
    lambda seed: synth.dmn_matrix(60, n_axes=5, values_per_axis=4, seed=seed),
    lambda seed: synth.mutate(synth.boxes_matrix(60, n_axes=5, values_per_axis=4), 0.2, seed=seed),
], ids=["boxes", "dmn", "mutate"])
def test_generators_are_deterministic_and_seeded(
    make: Callable[[int], synth.Synthetic], tmp_path: Path
) -> None:
    one, two, other = make(1), make(1), make(2)
    assert one.documents == two.documents
    assert one.documents != other.documents
    a, b = one.write(tmp_path / "a"), two.write(tmp_path / "b")
    files = sorted(p.relative_to(a) for p in a.rglob("*.yaml"))
    assert files == sorted(p.relative_to(b) for p in b.rglob("*.yaml"))
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def test_benchmark_universes_have_a_billion_cells() -> None:
    assert synth.boxes_matrix(10).universe == 8**10 >= 10**9
    assert synth.dmn_matrix(10).universe == 6**15 >= 10**9
    assert len(synth.boxes_matrix(10).axes) == 10
    assert len(synth.dmn_matrix(10).axes) == 15


@pytest.mark.parametrize("syn", SMALL, ids=IDS)
def test_built_matrix_equals_loaded_matrix(syn: synth.Synthetic) -> None:
    built, loaded = syn.build(), syn.load()
    assert built.axes == loaded.axes
    assert list(built.kernels) == list(loaded.kernels)
    for name, kernel in built.kernels.items():
        other = loaded.kernels[name].rules
        assert [(r.id, r.effect, dict(r.conditions)) for r in kernel.rules] == [
            (r.id, r.effect, dict(r.conditions)) for r in other
        ]
    assert {n: r.candidates for n, r in built.roles.items()} == {
        n: r.candidates for n, r in loaded.roles.items()
    }
    assert len(built.rules) == syn.n_rules


def test_dmn_tree_without_noise_partitions_the_universe() -> None:
    syn = synth.dmn_matrix(30, n_axes=4, values_per_axis=4, noise=0.0, seed=9)
    m = syn.build()
    assert len(m.rules) == 30
    for cell in cells(m):
        hits = [r for r in m.rules if all(c.contains(cell[a]) for a, c in r.conditions.items())]
        assert len(hits) == 1, cell
    # a complete, overlap-free table: the role has no gap
    assert role_regions(m, m.roles["grade"]).get(None) is None


def test_dmn_noise_makes_gaps_or_overlaps() -> None:
    m = synth.dmn_matrix(30, n_axes=4, values_per_axis=4, noise=0.5, seed=9).build()
    counts = [sum(1 for r in m.rules if all(c.contains(cell[a]) for a, c in r.conditions.items()))
              for cell in cells(m)]
    assert any(n != 1 for n in counts)


def test_random_cells_are_distinct_and_inside_the_universe() -> None:
    axes = synth.make_axes(3, 3)
    found = synth.random_cells(axes, 100, seed=4)
    assert len(found) == 27  # capped at the universe
    assert len({tuple(c.values()) for c in found}) == 27
    assert found == synth.random_cells(axes, 100, seed=4)


# --------------------------------------------------------------------------------------------------
# answers versus brute force


@pytest.mark.parametrize("syn", SMALL, ids=IDS)
def test_resolver_equals_brute_force_on_every_cell(syn: synth.Synthetic) -> None:
    m = syn.build()
    for kernel in m.kernels.values():
        for cell in cells(m):
            got = capmatrix.resolve(query(kernel.name, cell), m)
            assert bool(got) == brute_supported(kernel, cell), (kernel.name, cell)


@pytest.mark.parametrize("syn", SMALL, ids=IDS)
def test_open_axes_residual_equals_brute_force(syn: synth.Synthetic) -> None:
    m = syn.build()
    names = list(m.axes)
    fixed = names[:2]
    for kernel in m.kernels.values():
        for head in itertools.product(*(m.axes[n].values for n in fixed)):
            given = dict(zip(fixed, head, strict=True))
            inside = [c for c in cells(m) if all(c[n] == v for n, v in given.items())]
            truth = {tuple(c.values()) for c in inside if brute_supported(kernel, c)}
            got = capmatrix.resolve(query(kernel.name, given), m)
            if not truth:
                assert got.verdict is capmatrix.Verdict.UNSUPPORTED
            elif len(truth) == len(inside):
                assert got.verdict is capmatrix.Verdict.SUPPORTED
            else:
                assert got.verdict is capmatrix.Verdict.DEPENDS
                assert got.residual is not None
                open_cells = {cell[2:] for cell in truth}
                assert region_cells(got.residual) == open_cells


@pytest.mark.parametrize("syn", [s for s in SMALL if s.roles], ids=[s.name for s in SMALL if s.roles])
def test_role_regions_equal_brute_force(syn: synth.Synthetic) -> None:
    m = syn.build()
    assert m.roles
    for role in m.roles.values():
        regions = role_regions(m, role)
        got = {key: region_cells(region) for key, region in regions.items()}
        for cell in cells(m):
            winner = next((k for k in role.candidates if brute_supported(m.kernels[k], cell)), None)
            holders = [k for k, found in got.items() if tuple(cell.values()) in found]
            assert holders == [winner], (role.name, cell)


@pytest.mark.parametrize("syn", [s for s in SMALL if s.roles], ids=[s.name for s in SMALL if s.roles])
def test_role_gap_equals_brute_force(syn: synth.Synthetic) -> None:
    from capmatrix.authoring.analysis import role_gap

    m = syn.build()
    for role in m.roles.values():
        truth = {tuple(c.values()) for c in cells(m)
                 if not any(brute_supported(m.kernels[k], c) for k in role.candidates)}
        assert region_cells(role_gap(m, role)) == truth, role.name


@pytest.mark.parametrize("syn", [s for s in SMALL if s.roles], ids=[s.name for s in SMALL if s.roles])
def test_shadowed_candidates_equal_brute_force(syn: synth.Synthetic) -> None:
    """C109 names exactly the supported candidates that win no cell."""
    from capmatrix.authoring.analysis import check

    m = syn.build()
    found = {(f.subject.split()[1], f.kernels[0]) for f in check(m) if f.code == "C109"}
    truth = set()
    for role in m.roles.values():
        winners = {next((k for k in role.candidates if brute_supported(m.kernels[k], c)), None)
                   for c in cells(m)}
        truth |= {(role.name, k) for k in role.candidates
                  if k not in winners and any(brute_supported(m.kernels[k], c) for c in cells(m))}
    assert found == truth


def test_the_issue_shape_and_the_family() -> None:
    """The issue's matrix: 10,000 rules, 200 kernels of 50, 25 roles of 8 that all grant one region."""
    syn = shapes.generate(shapes.ISSUE, 10_000)
    assert (syn.n_rules, len(syn.kernels), len(syn.roles)) == (10_000, 200, 25)
    roles = syn.documents["roles.yaml"]["roles"]
    assert all(len(r["candidates"]) == 8 for r in roles.values())
    rules = [r for rel, doc in syn.documents.items() if rel.startswith("kernels/")
             for body in doc["kernels"].values() for r in body["rules"]]
    excluded = sum(1 for r in rules if "exclude" in r) / len(rules)
    assert 0.12 < excluded < 0.16
    assert all(1 <= len(r.get("grant", r.get("exclude"))) <= 4 for r in rules)
    assert shapes.generate(shapes.ISSUE, 10_000).documents == syn.documents  # deterministic
    twin = shapes.twin(shapes.ISSUE, syn)
    changed = sum(1 for rel, doc in syn.documents.items() if rel.startswith("kernels/")
                  for k, body in doc["kernels"].items()
                  for a, b in zip(body["rules"], twin.documents[rel]["kernels"][k]["rules"], strict=True)
                  if a != b)
    assert 0 < changed <= 500
    names = [s.name for s in shapes.family()]
    assert len(set(names)) == len(names)
    # Another draw: the same shape and size, other rules and another twin; each draw reproducible.
    other = shapes.generate(shapes.ISSUE, 10_000, draw=1)
    assert (other.n_rules, len(other.kernels), len(other.roles)) == (10_000, 200, 25)
    assert other.documents != syn.documents
    assert shapes.generate(shapes.ISSUE, 10_000, draw=1).documents == other.documents
    assert shapes.generate(shapes.ISSUE, 10_000, draw=0).documents == syn.documents
    assert shapes.twin(shapes.ISSUE, other).documents == shapes.twin(shapes.ISSUE, other).documents
    from benchmarks import profiles

    assert set(profiles._SHAPE_NAMES) == set(names)  # every shape's workloads can be profiled


# --------------------------------------------------------------------------------------------------
# baselines


def test_peer_translations_equal_brute_force() -> None:
    pytest.importorskip("zen")
    pytest.importorskip("cedarpy")
    from benchmarks.peers import CedarDecision, ZenDecision

    syn = synth.boxes_matrix(40, n_axes=4, values_per_axis=4, n_kernels=2, seed=11)
    m = syn.build()
    assert any(c.negated for r in m.rules for c in r.conditions.values())
    assert any(c.intervals for r in m.rules for c in r.conditions.values())
    for kernel in m.kernels.values():
        zen, cedar = ZenDecision(m, kernel.name), CedarDecision(m, kernel.name)
        for cell in cells(m):
            expected = brute_supported(kernel, cell)
            assert zen.decide(cell) is expected, ("zen", kernel.name, cell)
            assert cedar.decide(cell) is expected, ("cedar", kernel.name, cell)


def test_hardcoded_conditional_equals_the_gate_and_the_bound_decision() -> None:
    from benchmarks.run import agreement

    cases, wrong = agreement(None, None)
    assert cases == 11 * 2 * 2 * 2 * 2 * 2 * 3
    assert wrong == {"bound": 0, "resolve": 0, "zen-engine": 0, "cedarpy": 0}


def test_growth_baseline_is_the_median_draw() -> None:
    from benchmarks.run import _median_run
    from benchmarks.timing import Spawned

    def run(cpu: float) -> Spawned:
        return Spawned(cpu=cpu, wall=cpu, peak_rss=1)

    def cpu(runs: list[Spawned | None]) -> float | None:
        found = _median_run(runs)
        return None if found is None else found.cpu

    assert cpu([run(0.4), run(0.9), run(0.5), run(0.3), run(0.6)]) == 0.5
    assert cpu([run(0.4), None, run(0.5)]) == 0.5  # a killed draw is the slowest
    assert cpu([run(0.4), run(0.2)]) == 0.4
    assert _median_run([None, None, run(0.1)]) is None
    assert _median_run([]) is None


def test_report_marks_missed_targets() -> None:
    from benchmarks.report import Row, Section
    from benchmarks.run import render

    sec = Section("T", "intro", rows=[Row("a", "1 ns", target="<= 2 ns", met=True),
                                      Row("b", "3 ns", target="<= 2 ns", met=False)])
    text = render({"python": "x"}, [sec], 1.0)
    assert "**Targets: 1 of 2 met.**" in text
    assert "| b | 3 ns |  |  | <= 2 ns | **not met** |  |" in text
    assert "Not met: b (3 ns, target <= 2 ns)." in text


def test_diff_of_mutated_matrix_equals_brute_force() -> None:
    from capmatrix.authoring.analysis import diff

    base = synth.boxes_matrix(40, n_axes=4, values_per_axis=4, n_kernels=3, seed=3)
    old, new = base.build(), synth.mutate(base, 0.3, seed=2).build()
    result = diff(old, new)

    def area_cells(areas: tuple[object, ...]) -> set[tuple[AxisValue, ...]]:
        out: set[tuple[AxisValue, ...]] = set()
        for area in areas:
            out.update(itertools.product(*area.values.values()))  # type: ignore[attr-defined]
        return out

    every = cells(old)
    assert result.changed
    for kd in result.kernels:
        before = {tuple(c.values()) for c in every if brute_supported(old.kernels[kd.kernel], c)}
        after = {tuple(c.values()) for c in every if brute_supported(new.kernels[kd.kernel], c)}
        assert area_cells(kd.gained) == after - before, kd.kernel
        assert area_cells(kd.lost) == before - after, kd.kernel
    for rd in result.roles:
        role_old, role_new = old.roles[rd.role], new.roles[rd.role]
        moves: dict[tuple[str | None, str | None], set[tuple[AxisValue, ...]]] = {}
        for c in every:
            a = next((k for k in role_old.candidates if brute_supported(old.kernels[k], c)), None)
            b = next((k for k in role_new.candidates if brute_supported(new.kernels[k], c)), None)
            if a != b:
                moves.setdefault((a, b), set()).add(tuple(c.values()))
        assert {(s.old, s.new): area_cells(s.areas) for s in rd.shifts} == moves, rd.role


def test_vllm_selection_workload_is_what_vllm_serves() -> None:
    """The first-selection benchmark draws distinct recorded configurations; the servable ones all get a
    backend (which one is the differential test's business: tests/test_engine_vllm.py)."""
    from benchmarks import vllm_select

    servable = vllm_select._cells(300, servable=True)
    anything = vllm_select._cells(300, servable=False)
    assert len({tuple(sorted(c.items())) for c in servable}) == 300
    assert vllm_select._select_all(servable) == 300
    assert vllm_select._select_all(anything) < 300  # the whole grid holds refusals too
    assert vllm_select._cells(300, servable=True) == servable


def test_roles_in_disjoint_homes_of_overlapping_rules_take_the_diagrams() -> None:
    """check picks its route per role: candidates each in a region of their own look disjoint together,
    yet each one's rules overlap (the diagrams' shape); a decision table is still a table."""
    from capmatrix._core.partition import mostly_disjoint
    from capmatrix.authoring.analysis._boxes import KernelBoxes, table_shaped
    from capmatrix.authoring.analysis._roles import role_kernels

    sparse = next(s for s in shapes.family() if s.name == "sparse-roles")
    m = shapes.generate(sparse, 800).build()
    role = next(iter(m.roles.values()))
    kernels = [KernelBoxes.of(m.kernels[n], m.space) for n in role_kernels(m, role)]
    assert mostly_disjoint([b for k in kernels for b in k.boxes])  # together: disjoint homes
    assert not table_shaped(kernels)
    table = synth.dmn_matrix(200, n_axes=6, values_per_axis=6, noise=0.1, seed=5).build()
    assert table_shaped([KernelBoxes.of(k, table.space) for k in table.kernels.values()])
