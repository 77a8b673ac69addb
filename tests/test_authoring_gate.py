"""capmatrix.authoring.gate (`capmatrix test`): every oracle, run on a copy of the checkout, each may fail."""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import capmatrix
from capmatrix.authoring.cli import run
from capmatrix.authoring.gate import ORACLES, run_gate
from capmatrix.errors import CapmatrixError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from conftest import WriteMatrix

ROOT = Path(__file__).resolve().parent.parent
#: The engines' records (large; a test copies the ones it compares).
RECORD = re.compile(r"(vllm|sglang)_.*_(selection|sample)\.json(\.gz)?$")
SGLANG_SAMPLE = "sglang_0.5.23_sample.json.gz"
FAST = tuple(o for o in ORACLES if o not in {"records", "legacy"})


def copy_checkout(tmp: Path, *, records: Iterable[str] | None = None) -> Path:
    """A copy of what the gate reads: capabilities/ (with only the named records, default all), the
    generated pages, the importers, the findings page's tool and the legacy predicates; returns the matrix
    directory. (The pages list the evidence files: a copy without some records has stale pages.)"""
    keep = set(records) if records is not None else None
    shutil.copytree(ROOT / "capabilities", tmp / "capabilities",
                    ignore=lambda _d, names: [n for n in names if RECORD.match(n) and keep is not None
                                              and n not in keep])
    (tmp / "docs").mkdir()
    for page in ("support-matrix.md", "findings.md"):  # the HTML page is built, not committed
        if (ROOT / "docs" / page).is_file():
            shutil.copy(ROOT / "docs" / page, tmp / "docs" / page)
    (tmp / "tools").mkdir()
    for tool in [*(ROOT / "tools").glob("import_*.py"), ROOT / "tools/_generated.py",
                 ROOT / "tools/render_findings.py"]:
        shutil.copy(tool, tmp / "tools" / tool.name)
    shutil.copytree(ROOT / "examples/legacy", tmp / "examples/legacy")
    return tmp / "capabilities"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_a_copy_of_the_checkout_passes_the_fast_oracles(tmp_path: Path) -> None:
    """Expectations, importers, hardware evidence and pages: every item passes, none is skipped (the
    records are compared by the engines' tests, through the same code, and by the test below)."""
    root = copy_checkout(tmp_path)
    report = run_gate(capmatrix.load(root), only=FAST)
    assert report.exit_status() == 0, [r.as_dict() for r in report.results if r.status != "PASS"]
    by_oracle = {o: [r for r in report.results if r.oracle == o] for o in report.ran}
    assert len(by_oracle["importers"]) == 5
    assert len(by_oracle["evidence"]) >= 8
    assert len(by_oracle["docs"]) == 2
    assert all(r.status == "PASS" and r.checks > 0 for r in report.results)
    assert report.expect is not None
    assert report.expect.results


def test_the_expectation_oracle_names_the_case_and_its_edit(tmp_path: Path) -> None:
    root = copy_checkout(tmp_path)
    seed = root / "expect" / "seed.yaml"
    text = seed.read_text(encoding="utf-8")
    at = text.index("query: {model: llama, sm: 120, spec_dec: one_model}\n    expect: supported")
    seed.write_text(text[:at] + text[at:].replace("expect: supported", "expect: unsupported", 1),
                    encoding="utf-8")
    report = run_gate(capmatrix.load(root), only=["expect"])
    assert report.exit_status() == 1
    (result,) = report.results
    assert (result.oracle, result.status, result.failed) == ("expect", "FAIL", 1)
    (d,) = result.disagreements
    assert d.cell.endswith("seed.yaml:7 Llama one-model spec-dec on SM120 runs XQA (the fix)")
    assert (d.oracle_says, d.matrix_says.split(",")[0]) == ("unsupported", "expected unsupported")
    assert d.refresh.startswith("if intended, set expect: supported in ")


def test_the_importer_oracle_names_the_drift_and_its_tool(tmp_path: Path) -> None:
    root = copy_checkout(tmp_path)
    kernels = root / "kernels" / "vllm_attention.yaml"
    text = kernels.read_text(encoding="utf-8")
    at = text.index("  vllm_tokenspeed_mla:")
    old = "kv_cache_dtype: [fp8, fp8_e4m3]\n          head_dim: *mla_head_sizes"
    assert old in text[at:]
    kernels.write_text(text[:at] + text[at:].replace(old, old.replace("[fp8, fp8_e4m3]", "[fp8]"), 1),
                       encoding="utf-8")
    report = run_gate(capmatrix.load(root), only=["importers"])
    failed = report.failed
    assert [r.item for r in failed] == ["tools/import_vllm_backends.py --check"]
    (d,) = failed[0].disagreements
    assert d.cell.startswith("TOKENSPEED_MLA")
    assert "kv_cache_dtype ['fp8'] != ['fp8', 'fp8_e4m3']" in d.matrix_says
    assert "python tools/import_vllm_backends.py extract --vllm-src DIR --write" in d.refresh
    assert report.exit_status() == 1


def test_a_generated_section_out_of_date_shows_both_sides(tmp_path: Path) -> None:
    root = copy_checkout(tmp_path)
    xqa = root / "kernels" / "xqa.yaml"
    text = xqa.read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.strip().startswith("sm: [80, 86, 89, 90]"))
    xqa.write_text(text.replace(line, line.replace("[80, 86, 89, 90]", "[80, 86, 89]"), 1), encoding="utf-8")
    report = run_gate(capmatrix.load(root), only=["importers"])
    (failed,) = report.failed
    assert failed.item == "tools/import_xqa_cubins.py --check"
    (d,) = failed.disagreements
    assert "[80, 86, 89, 90]" in d.oracle_says
    assert "[80, 86, 89]" in d.matrix_says
    assert d.refresh == "python tools/import_xqa_cubins.py"


def test_the_evidence_oracle_names_the_probed_case(tmp_path: Path) -> None:
    root = copy_checkout(tmp_path)
    path = root / "evidence" / "flash_attn_3_h200.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    row = data["cases"][0]
    row["outcome"] = "fail" if row["outcome"] == "pass" else "pass"
    path.write_text(json.dumps(data), encoding="utf-8")
    report = run_gate(capmatrix.load(root), only=["evidence"])
    (failed,) = report.failed
    assert failed.item.startswith("flash_attn_3_h200.json")
    (d,) = failed.disagreements
    assert d.cell.startswith("flash_attn_3 ")
    assert f"(case {row['index']})" in d.cell
    assert d.oracle_says == f"the GPU: {row['outcome']}"
    assert d.refresh.startswith("re-probe on the GPU: ")


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_the_docs_oracle_names_the_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_checkout(tmp_path)
    page = tmp_path / "docs" / "support-matrix.md"
    page.write_text(page.read_text(encoding="utf-8") + "a hand edit\n", encoding="utf-8")
    report = run_gate(capmatrix.load(root), only=["docs"])
    (failed,) = report.failed
    (d,) = failed.disagreements
    assert d.cell == "docs/support-matrix.md"
    assert d.refresh.startswith("make docs")
    # The command prints that report (the pages are not rendered and compared a second time).
    asked: list[list[str]] = []

    def same(_matrix: object, *, only: list[str], progress: Any = None, **_options: object) -> object:
        asked.append(only)
        for result in report.results:
            progress(result)
        return report

    monkeypatch.setattr("capmatrix.authoring.cli._analysis.run_gate", same)
    code, out, _ = _cli("test", str(root), "--only", "docs")
    assert asked == [["docs"]]
    assert code == 1
    assert "FAIL docs docs/support-matrix.md (capmatrix render --check): 1 of 1 checks disagree" in out
    assert "    refresh (if the change is intended): make docs" in out


def test_the_records_oracle_names_the_cell_and_the_recorder(tmp_path: Path) -> None:
    root = copy_checkout(tmp_path, records=[SGLANG_SAMPLE])
    path = root / "evidence" / SGLANG_SAMPLE
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        header, *rows = lines.read().splitlines()
    key, answer = json.loads(rows[0])
    assert "refused" not in answer
    answer["page_size"] = 4096
    rows[0] = json.dumps([key, answer])
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write("\n".join([header, *rows]) + "\n")
    for jobs in (1, 2):
        report = run_gate(capmatrix.load(root), only=["records"], jobs=jobs)
        assert [r.item for r in report.results] == [f"{SGLANG_SAMPLE} (SGLang 0.5.23 sample)"]
        (failed,) = report.failed
        (d,) = failed.disagreements
        assert d.cell == f"{key} [page_size]"
        assert d.oracle_says == "{'page_size': 4096}"
        assert d.refresh.endswith(json.loads(header)["regenerate"])


def test_the_legacy_oracle_names_the_region_and_the_comparison(tmp_path: Path) -> None:
    """The pre-fix predicate held to a release it is not: the fix's region, from the expectation file."""
    root = copy_checkout(tmp_path)
    (root / "expect" / "legacy.yaml").write_text(
        "legacy:\n"
        "  - function: examples/legacy/trtllm_release_1_2.py:xqa_spec_dec_mode_before\n"
        "    kernel: trtllm_spec_dec_mode\n"
        "    where: {trtllm_release: [1.2.1], sm: [90, 120]}\n", encoding="utf-8")
    report = run_gate(capmatrix.load(root), only=["legacy"])
    (failed,) = report.failed
    (d,) = failed.disagreements
    assert d.cell.startswith("sm=120 and attention in {mha, gqa, mqa} and spec_dec=one_model")
    assert (d.oracle_says, d.matrix_says) == ("False (unsupported)", "supported")
    assert "capabilities/expect/legacy.yaml:2" in d.refresh
    assert ("capmatrix compare-legacy examples/legacy/trtllm_release_1_2.py:xqa_spec_dec_mode_before "
            "--kernel trtllm_spec_dec_mode --where trtllm_release=1.2.1 --where sm=90,120") in d.refresh


@pytest.mark.parametrize(("entry", "message"), [
    ("  - function: examples/legacy/nope.py:f\n    kernel: trtllm_spec_dec_mode\n", "no such file"),
    ("  - function: examples/legacy/trtllm_release_1_2.py:f\n    kernel: nope\n", "nope"),
    ("  - {kernel: trtllm_spec_dec_mode}\n", "'function'"),
    ("  - function: examples/legacy/trtllm_release_1_2.py:f\n    kernel: k\n    expect: disagree\n",
     "expects 'agree'"),
])
def test_a_broken_legacy_comparison_is_exit_2(tmp_path: Path, entry: str, message: str) -> None:
    root = copy_checkout(tmp_path)
    (root / "expect" / "legacy.yaml").write_text("legacy:\n" + entry, encoding="utf-8")
    report = run_gate(capmatrix.load(root), only=["legacy"])
    (broken,) = report.broken
    assert message in (broken.broken or "")
    assert report.exit_status() == 2


def test_a_matrix_without_oracles_skips_them_and_reports_as_before(write_matrix: WriteMatrix) -> None:
    """A matrix with expectation cases only: every other oracle says SKIP and why; the summary is the
    expectation summary it always was."""
    root = write_matrix()
    (root / "expect").mkdir()
    (root / "expect" / "cases.yaml").write_text(
        "cases:\n  - {kernel: xqa, query: {sm: 120, attention: gqa, spec_dec: one_model}, "
        "expect: supported}\n",
        encoding="utf-8")
    report = run_gate(capmatrix.load(root))
    assert {r.oracle: r.status for r in report.results if r.oracle != "expect"} == dict.fromkeys(
        ("legacy", "importers", "evidence", "docs", "records"), "SKIP")
    code, out, _ = _cli("test", str(root))
    lines = out.splitlines()
    assert [line.split()[:2] for line in lines[:5]] == [
        ["SKIP", oracle] for oracle in ("legacy", "importers", "evidence", "docs", "records")]
    assert lines[-1] == "capmatrix test: 1 passed, 0 failed"
    assert code == report.exit_status() == 0


def test_json_keeps_the_expectation_keys_and_adds_the_oracles(tmp_path: Path) -> None:
    root = copy_checkout(tmp_path)
    code, out, _ = _cli("test", str(root), "--json", "--only", "expect", "--only", "evidence")
    data = json.loads(out)
    assert code == 0
    assert {"passed", "failed", "problems", "cases", "coverage"} <= set(data)
    assert data["status"] == "pass"
    assert data["ran"] == ["evidence", "expect"]
    assert {o["oracle"] for o in data["oracles"]} == {"evidence", "expect"}
    assert all(o["status"] == "PASS" for o in data["oracles"])


def test_an_unknown_oracle_is_refused() -> None:
    with pytest.raises(CapmatrixError, match="unknown oracle 'nope'"):
        run_gate(capmatrix.default_matrix(), only=["nope"])
    code, _out, err = _cli("test", "--only", "nope")
    assert code == 2
    assert "invalid choice" in err
    code, _out, err = _cli("test", "--jobs", "0", "--only", "expect")
    assert code == 2
    assert "--jobs" in err


# --------------------------------------------------------------------------------------------------
# --records-every: a quick gate over a spread of each record's questions


def test_records_every_compares_a_spread_and_says_so() -> None:
    """Every 50th question of each record: fewer questions, each record named with the spread it took."""
    results = {r.item: r for r in run_gate(capmatrix.load(ROOT / "capabilities"), only=("records",),
                                           records_every=50).results}
    assert results
    assert all(r.status == "PASS" and r.checks > 0 for r in results.values())
    assert all("(every 50th: --records-every 50)" in r.note for r in results.values())
    for name in ("vllm_0.33.0_selection.json", "vllm_0.34.0_selection.json"):
        record = json.loads((ROOT / "capabilities" / "evidence" / name).read_text(encoding="utf-8"))
        main = len(record["cells"]) * len(record["columns"])
        if "checkpoint_kv" in record:
            main += len(record["checkpoint_kv"]["cells"]) * len(record["checkpoint_kv"]["columns"])
        b12x = len((record.get("b12x_installed") or {}).get("cells", {})) * len(record["columns"])
        (result,) = [r for item, r in results.items() if item.startswith(name)]
        asked = int(result.note.split(" recorded questions", 1)[0].replace(",", ""))
        assert asked == -(-main // 50) + -(-b12x // 50), name  # each section from its first question


@pytest.mark.parametrize("value", ["0", "-3", "x", "1.5"])
def test_records_every_refuses_what_is_no_whole_number_from_1(value: str) -> None:
    code, _out, err = _cli("test", str(ROOT / "capabilities"), "--only", "records", "--records-every", value)
    assert code == 2
    assert "--records-every" in err


@pytest.mark.parametrize("value", [0, -1, True, 2.0, "8"])
def test_run_gate_refuses_a_records_every_below_one_or_not_an_int(value: object) -> None:
    with pytest.raises(CapmatrixError, match="records_every"):
        run_gate(capmatrix.load(ROOT / "capabilities"), only=("expect",), records_every=value)  # type: ignore[arg-type]

