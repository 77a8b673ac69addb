"""The suggestion search's work budget: an adversarial matrix is cut short and says so; others are not."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import pytest

import capmatrix
from capmatrix import KernelQuery, Verdict
from capmatrix.authoring import _suggest
from capmatrix.authoring.cli import run

if TYPE_CHECKING:
    from pathlib import Path

#: Pairs of boolean axes; the kernel excludes, per pair, both set, and every extra exclusion below
#: cuts more: "supported for every open value" is a walk over 2 ** (2 * PAIRS) cells, whose residual
#: needs at least 2 ** PAIRS boxes. Before the budget, one query here spent tens of seconds of CPU.
PAIRS = 10


def _adversarial(root: Path) -> Path:
    """``2 * PAIRS`` boolean axes, one grant and ``PAIRS + 3`` exclusions: every query leaves axes open."""
    names = [f"p{i}{side}" for i in range(PAIRS) for side in "ab"]
    axes = "axes:\n" + "".join(f"  {n}: {{type: bool, description: flag}}\n" for n in names)
    rules = ["      - {id: k.all, grant: {p0a: [true, false]}, reason: r, source: s, status: untested}\n"]
    rules.extend(f"      - {{id: k.pair{i}, exclude: {{p{i}a: true, p{i}b: true}}, reason: r, source: s, "
                 "status: untested}\n" for i in range(PAIRS))
    for j, (a, b) in enumerate((("p0a", "p1b"), ("p2b", "p5a"), ("p7a", "p9b"))):
        rules.append(f"      - {{id: k.cross{j}, exclude: {{{a}: false, {b}: false}}, reason: r, source: s, "
                     "status: untested}\n")
    (root / "kernels").mkdir(parents=True)
    (root / "axes.yaml").write_text(axes, encoding="utf-8")
    kernels = "kernels:\n  k:\n    description: d\n    rules:\n" + "".join(rules)
    (root / "kernels" / "k.yaml").write_text(kernels, encoding="utf-8")
    return root


@pytest.fixture
def tenth_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tenth of the shipped budget: the search stops the same way at any size (what the full budget
    costs on this matrix is the benchmarks' figure), in a tenth of the test's time."""
    monkeypatch.setattr(_suggest, "MAX_WORK", _suggest.MAX_WORK // 10)


@pytest.mark.usefixtures("tenth_budget")
def test_the_adversarial_query_is_truncated(tmp_path: Path) -> None:
    """The budget stops the search; every suggestion it did find is one the resolver confirms."""
    matrix = capmatrix.load(_adversarial(tmp_path / "m"))
    query = KernelQuery("k")
    assert capmatrix.resolve(query, matrix).verdict is Verdict.DEPENDS
    found = _suggest.suggestions(capmatrix.Resolver(matrix), query)
    assert found.truncated is True
    check = capmatrix.Resolver(matrix)
    assert all(check.resolve(s.query).verdict is Verdict.SUPPORTED for s in found)


@pytest.mark.usefixtures("tenth_budget")
def test_the_cli_says_truncated(tmp_path: Path) -> None:
    """``query`` says so in text and in --json."""
    root = str(_adversarial(tmp_path / "m"))
    out, err = io.StringIO(), io.StringIO()
    assert run(["query", "k", "--matrix", root], out, err) == 3
    assert "truncated" in out.getvalue()
    assert "work budget ran out" in out.getvalue()
    out = io.StringIO()
    assert run(["query", "k", "--matrix", root, "--json"], out, err) == 3
    assert json.loads(out.getvalue())["suggestions_truncated"] is True


def test_a_normal_matrix_is_not_truncated(small: capmatrix.Matrix) -> None:
    """The small matrix's unsupported and depending queries finish within the budget."""
    for query in (KernelQuery("xqa", sm=80, attention="mla", kv="fp8"), KernelQuery("xqa"),
                  KernelQuery("xqa", sm=121)):
        found = capmatrix.suggest(query, small)
        assert found.truncated is False, query
        assert capmatrix.resolve(query, small).verdict is not Verdict.SUPPORTED or not found


def test_the_shipped_matrix_is_not_truncated() -> None:
    """The seed query and the searches the docs name end within the budget, and the CLI says no more."""
    queries = (KernelQuery("xqa", sm=121, model="deepseek_v3", spec_dec="one_model"),
               KernelQuery("mmha", sm=90, spec_dec="one_model"), KernelQuery("xqa", sm=90))
    for query in queries:
        found = capmatrix.suggest(query)
        assert found.truncated is False, query
    out, err = io.StringIO(), io.StringIO()
    run(["query", "mmha", "--sm", "90", "--spec-dec", "one_model", "--json"], out, err)
    assert json.loads(out.getvalue())["suggestions_truncated"] is False
