"""The profiles behind the report's targets not met (benchmarks/profiles.py)."""

from __future__ import annotations

import cProfile
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import profiles  # noqa: E402
from benchmarks.report import Row, Section  # noqa: E402
from benchmarks.run import render, section_profiles  # noqa: E402


def _sorting() -> list[int]:
    return sorted(range(300_000, 0, -1))


def test_c_functions_are_charged_to_their_caller() -> None:
    prof = cProfile.Profile()
    prof.enable()
    _sorting()
    prof.disable()
    summary = profiles.summarise(prof)
    top = summary["functions"][0]
    assert top["name"] == "_sorting"  # sorted() is C: its time is _sorting's
    assert top["stage"] == "tests.test_benchmarks_profiles"
    assert top["seconds"] > 0.5 * summary["total"]
    assert not any("sorted" in f["name"] for f in summary["functions"])
    assert summary["stages"][0][0] == "tests.test_benchmarks_profiles"


def test_stages_name_packages_modules_and_imports() -> None:
    import yaml

    diff_py = ROOT / "capmatrix" / "authoring" / "analysis" / "_diff.py"
    assert profiles.stage_of((str(diff_py), 1, "diff")) == (
        "capmatrix.authoring.analysis._diff"
    )
    assert profiles.stage_of((str(ROOT / "capmatrix" / "model.py"), 1, "<module>")) == (
        "module bodies at import (capmatrix)"
    )
    assert profiles.stage_of((yaml.__file__, 1, "load")) == "PyYAML (Python side)"
    assert profiles.stage_of(("<frozen importlib._bootstrap>", 1, "_load")).startswith("import machinery")
    assert profiles.stage_of((str(Path(json.__file__)), 1, "dumps")) == "stdlib __init__"


@pytest.mark.parametrize("key", sorted(profiles.WORKLOADS))
def test_every_workload_is_valid_python(key: str) -> None:
    work = profiles.WORKLOADS[key]
    compile(work.setup, f"{key}:setup", "exec")
    compile(work.stmt, f"{key}:stmt", "exec")


def test_the_shipped_load_is_profiled_in_a_fresh_process() -> None:
    summary = profiles.profile("load-shipped")
    stages = dict(summary["stages"])
    assert summary["total"] > 0
    # The fresh process imports the core inside the profile, and the loader parses the YAML.
    assert stages["capmatrix.authoring.loader"] > 0
    assert stages["capmatrix.authoring._yaml.read"] > 0
    assert any(name.startswith("import machinery") for name in stages)
    assert summary["stopped"] is None


def test_a_workload_past_the_limit_is_stopped_with_its_profile_so_far(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spin = profiles.Workload("a loop that never ends", "import itertools",
                             "for _ in itertools.count():\n    sum(range(100))")
    monkeypatch.setitem(profiles.WORKLOADS, "spin", spin)
    summary = profiles.profile("spin", limit=0.5, timeout=60)
    assert summary["stopped"] == 0.5
    assert summary["total"] > 0
    assert summary["functions"]  # what ran before the stop is charged as in any profile


def test_report_profiles_each_missed_target_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(profiles.WORKLOADS, "tiny", profiles.Workload(
        "sorting", "import random\nxs = [random.random() for _ in range(200_000)]", "sorted(xs)",
    ))
    rows = [Row("a", "3 ns", target="<= 2 ns", met=False, over=1.5, profile="tiny"),
            Row("b", "9 ns", target="<= 3 ns", met=False, over=3.0, profile="tiny"),
            Row("c", "5 ns", target="<= 2 ns", met=False, over=2.5),
            Row("d", "1 ns", target="<= 2 ns", met=True, profile="tiny")]
    sec = section_profiles([Section("T", "intro", rows=rows)])
    text = render({"python": "x"}, [Section("T", "intro", rows=rows), sec], 1.0)
    assert "### a: 3 ns, target <= 2 ns (x1.50 the limit); b: 9 ns, target <= 3 ns (x3.00 the limit)" in text
    assert text.count("Workload: sorting;") == 1
    assert "| stage | share | seconds |" in text
    assert "### c: 5 ns, target <= 2 ns (x2.50 the limit)\n\nNo workload is defined" in text
    assert "### d" not in text
    assert "Not met: a (3 ns, target <= 2 ns, x1.50 the limit);" in text


def test_a_known_cause_is_printed_with_its_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(profiles.WORKLOADS, "tiny",
                        profiles.Workload("sorting", "xs = [3, 1, 2]", "sorted(xs)"))
    monkeypatch.setitem(profiles.CAUSES, "tiny", "three numbers take no time.")
    rows = [Row("a", "3 ns", target="<= 2 ns", met=False, over=1.5, profile="tiny"),
            Row("b", "1 ns", target="<= 2 ns", met=True, profile="load-shipped")]
    text = "\n".join(section_profiles([Section("T", "intro", rows=rows)]).body)
    assert "### a: 3 ns, target <= 2 ns (x1.50 the limit)\n\nWhy: three numbers take no time.\n" in text
    assert text.count("Why:") == 1  # a met row's cause is not printed
    assert set(profiles.CAUSES) <= set(profiles.WORKLOADS)  # every cause names a workload


def test_nothing_is_profiled_when_every_target_is_met() -> None:
    sec = section_profiles([Section("T", "intro", rows=[Row("a", "1 ns", target="<= 2 ns", met=True)])])
    assert sec.body == []
    assert sec.notes == ["Every target was met: nothing to profile."]
