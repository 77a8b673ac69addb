"""``capmatrix check --write-baseline`` / ``--baseline``: accept today's findings, fail only on new ones."""

from __future__ import annotations

import io
import json
import os
from typing import TYPE_CHECKING

import pytest

import capmatrix
from capmatrix.authoring import analysis
from capmatrix.authoring.analysis import check_path
from capmatrix.authoring.cli import run
from capmatrix.authoring.cli._analysis import BASELINE_FORMAT, BASELINE_NAME
from capmatrix.authoring.loader import default_path

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import WriteMatrix

#: A dead exclusion (C102, a warning) added to the small matrix: a new finding.
DEAD = """\
kernels:
  other:
    description: one grant, one exclusion outside it
    rules:
      - id: other.sm90
        grant: {sm: 90}
        reason: r
        source: s
        status: untested
      - id: other.never
        exclude: {sm: 80}
        reason: r
        source: s
        status: untested
"""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_every_shipped_finding_has_its_own_key_without_lines_or_counts() -> None:
    findings = check_path().findings
    keys = [f.key for f in findings]
    assert len(set(keys)) == len(keys) > 0
    for finding in findings:
        for location in finding.locations:
            assert f":{location.line}" not in finding.key
    assert "C106 sm torch_sdpa_cudnn.head_dim_gt128_off_sm90" in keys  # one rule, two axes: two keys
    assert "C106 head_dim torch_sdpa_cudnn.head_dim_gt128_off_sm90" in keys
    assert "C108 role trtllm_generation" in keys
    assert "C109 role vllm_attention candidate vllm_cutlass_mla" in keys
    assert json.loads(cli("check", "--json", "--no-baseline")[1])["findings"][0]["key"] == keys[0]


def test_write_then_check_against_the_baseline(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    root = write_matrix()
    baseline = tmp_path / "baseline.json"
    code, out, _ = cli("check", str(root), "--write-baseline", str(baseline))
    assert (code, out) == (0, f"wrote 2 findings to {baseline}\n")
    data = json.loads(baseline.read_text(encoding="utf-8"))
    assert data["format"] == BASELINE_FORMAT
    assert [e["key"] for e in data["findings"]] == ["C106 sm xqa.hmma", "C108 role gen"]
    assert data["findings"][0]["severity"] == "warning"
    assert cli("check", str(root), "--strict")[0] == 1  # the warning, without a baseline
    code, out, _ = cli("check", str(root), "--strict", "--baseline", str(baseline))
    assert code == 0
    assert out == ("capmatrix check: 0 errors, 0 warnings, 0 infos; 2 known findings hidden "
                   f"(baseline {baseline})\n")


def test_only_a_new_finding_fails_and_lines_moving_do_not_matter(
    write_matrix: WriteMatrix, tmp_path: Path,
) -> None:
    root = write_matrix()
    baseline = tmp_path / "baseline.json"
    cli("check", str(root), "--write-baseline", str(baseline))
    # Shift every line of the kernel file, and add a kernel with a dead exclusion.
    kernels = root / "kernels" / "test.yaml"
    kernels.write_text("# moved\n\n" + kernels.read_text(encoding="utf-8"), encoding="utf-8")
    write_matrix({"kernels/other.yaml": DEAD})
    code, out, _ = cli("check", str(root), "--strict", "--baseline", str(baseline))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].split(": ", 1)[1].startswith("warning C102 dead exclusion: other.never removes nothing")
    assert "C106" not in out
    assert lines[-1] == ("capmatrix check: 0 errors, 1 warning, 0 infos; 2 known findings hidden "
                         f"(baseline {baseline})")
    assert cli("check", str(root), "--baseline", str(baseline))[0] == 0  # a warning passes unless strict
    data = json.loads(cli("check", str(root), "--baseline", str(baseline), "--json")[1])
    assert [f["key"] for f in data["findings"]] == ["C102 other.never"]
    assert data["baseline"] == {"file": str(baseline), "hidden": 2, "gone": 0}
    github = cli("check", str(root), "--baseline", str(baseline), "--format", "github")[1]
    assert github.count("::warning") == 1
    assert github.endswith("2 known findings hidden (baseline " + str(baseline) + ")\n")


def test_a_fixed_finding_is_counted_as_gone(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    root = write_matrix({"kernels/other.yaml": DEAD})
    baseline = tmp_path / "baseline.json"
    cli("check", str(root), "--write-baseline", str(baseline))
    (root / "kernels" / "other.yaml").unlink()
    code, out, _ = cli("check", str(root), "--strict", "--baseline", str(baseline))
    assert code == 0
    assert out.endswith("; 2 known findings hidden (baseline " + str(baseline) + "); 1 recorded finding "
                        "is gone (rewrite the baseline with --write-baseline)\n")


def test_one_hidden_finding_and_two_gone(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    root = write_matrix()
    baseline = tmp_path / "baseline.json"
    entries = [{"key": "C106 sm xqa.hmma"}, {"key": "C999 a"}, {"key": "C999 b"}]
    baseline.write_text(json.dumps({"format": BASELINE_FORMAT, "version": 1, "findings": entries}),
                        encoding="utf-8")
    out = cli("check", str(root), "--baseline", str(baseline))[1]
    assert out.splitlines()[-1].endswith(
        "; 1 known finding hidden (baseline " + str(baseline) + "); 2 recorded findings are gone "
        "(rewrite the baseline with --write-baseline)"
    )


@pytest.mark.parametrize(("text", "message"), [
    ("{", "baseline.json:1:2: not valid JSON"),
    ("[]", 'not a capmatrix check baseline (no "format": "capmatrix-check-baseline")'),
    (json.dumps({"format": BASELINE_FORMAT, "version": 2, "findings": []}), "baseline version 2 is not 1"),
    (json.dumps({"format": BASELINE_FORMAT, "version": 1, "findings": [{"k": 1}]}),
     '"findings" must be a list of objects with a "key"'),
    (json.dumps({"format": BASELINE_FORMAT, "version": 1}), '"findings" must be a list'),
])
def test_a_bad_baseline_is_refused_with_what_to_do(
    text: str, message: str, write_matrix: WriteMatrix, tmp_path: Path,
) -> None:
    root = write_matrix()
    baseline = tmp_path / "baseline.json"
    baseline.write_text(text, encoding="utf-8")
    code, out, err = cli("check", str(root), "--baseline", str(baseline))
    assert (code, out) == (2, "")
    assert message in err
    assert f"write one with `capmatrix check --write-baseline {baseline}`" in err


def test_a_missing_baseline_and_an_unloadable_matrix(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    root = write_matrix()
    code, _, err = cli("check", str(root), "--baseline", str(tmp_path / "none.json"))
    assert code == 2
    assert "none.json: No such file or directory" in err
    broken = write_matrix({"kernels/bad.yaml": "kernels:\n  bad:\n    description: d\n    rules: 3\n"})
    code, out, err = cli("check", str(broken), "--write-baseline", str(tmp_path / "b.json"))
    assert code == 2
    assert "no baseline written: the matrix did not load" in err
    assert "(the matrix did not load)" in out
    assert not (tmp_path / "b.json").exists()
    baseline = tmp_path / "ok.json"
    baseline.write_text(json.dumps({"format": BASELINE_FORMAT, "version": 1, "findings": []}),
                        encoding="utf-8")
    code, out, _ = cli("check", str(broken), "--baseline", str(baseline))
    assert code == 2
    assert "hidden" not in out  # nothing is hidden from a matrix that did not load


def test_a_loading_problem_has_a_key_of_its_file_and_message() -> None:
    problem = capmatrix.CapabilityError("caps/x.yaml", 3, 1, "kernels.x", "bad", code="E103")
    (finding,) = analysis.problem_findings([problem])
    assert finding.key == "C001 caps/x.yaml: kernels.x: bad [E103]"


def test_baseline_options_exclude_each_other(tmp_path: Path) -> None:
    code, _, err = cli("check", "--baseline", str(tmp_path / "a"), "--write-baseline", str(tmp_path / "b"))
    assert code == 2
    assert "not allowed with argument" in err


def test_a_finding_about_kernels_only_is_keyed_by_them() -> None:
    finding = analysis.Finding(code="C110", severity=analysis.Severity.ERROR,
                               message="k supports nothing", kernels=("k",))
    assert finding.key == "C110 k"


def test_the_shipped_matrix_passes_check_with_the_baseline_it_carries() -> None:
    """`capmatrix check` on the shipped matrix: every known finding accepted, each with its why."""
    code, out, _ = cli("check", "--strict")
    assert code == 0
    shipped = default_path() / BASELINE_NAME
    data = json.loads(shipped.read_text(encoding="utf-8"))
    count = len(data["findings"])
    hidden = f"{count} known findings hidden (baseline {shipped})"
    assert out.endswith(f"0 errors, 0 warnings, 0 infos; {hidden}\n")
    assert all(isinstance(e.get("why"), str) and e["why"] for e in data["findings"])
    gates = {e["key"]: e["why"] for e in data["findings"] if e["code"] in {"C111", "C112", "C113"}}
    assert "C112 vllm_flash_attn.base" in gates
    assert all("docs/analysis.md" in why for why in gates.values())
    # Without it, the engine findings fail the check, as they would in any matrix that does not accept them.
    code, out, _ = cli("check", "--no-baseline")
    errors = sum(1 for e in data["findings"] if e["severity"] == "error")
    assert code == 1
    assert f"capmatrix check: {errors} errors," in out


def test_a_matrix_carrying_a_baseline_fails_only_on_a_new_finding(
    write_matrix: WriteMatrix, tmp_path: Path,
) -> None:
    root = write_matrix()
    own = root / BASELINE_NAME
    cli("check", str(root), "--write-baseline", str(own))
    code, out, _ = cli("check", str(root), "--strict")
    assert code == 0
    assert out.endswith(f"2 known findings hidden (baseline {own})\n")
    write_matrix({"kernels/other.yaml": DEAD})
    code, out, _ = cli("check", str(root), "--strict")
    assert code == 1
    assert "C102 dead exclusion: other.never" in out
    assert "C106" not in out
    assert cli("check", str(root), "--strict", "--no-baseline")[0] == 1
    assert "C106" in cli("check", str(root), "--no-baseline")[1]


def test_rewriting_a_baseline_keeps_the_why_of_each_key(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    root = write_matrix()
    baseline = tmp_path / "baseline.json"
    cli("check", str(root), "--write-baseline", str(baseline))
    data = json.loads(baseline.read_text(encoding="utf-8"))
    data["findings"][0]["why"] = "accepted: the engine's own range"
    data["findings"][1]["why"] = 7  # not text: not kept
    baseline.write_text(json.dumps(data), encoding="utf-8")
    write_matrix({"kernels/other.yaml": DEAD})
    cli("check", str(root), "--write-baseline", str(baseline))
    again = {e["key"]: e for e in json.loads(baseline.read_text(encoding="utf-8"))["findings"]}
    assert again["C106 sm xqa.hmma"]["why"] == "accepted: the engine's own range"
    assert "why" not in again["C108 role gen"]
    assert "why" not in again["C102 other.never"]


def _hostile(kind: str, path: Path) -> str:
    """Make ``path`` a ``kind`` of baseline no reader may trust; return what the refusal says."""
    if kind == "fifo":
        os.mkfifo(path)  # read as it was, it blocked for ever
        return "not a regular file"
    if kind == "device":
        path.symlink_to("/dev/zero")  # read whole, it was a MemoryError
        return "not a regular file"
    if kind == "not UTF-8":
        path.write_bytes(b'{"format": "capmatrix-check-baseline\xff"}')  # a UnicodeDecodeError traceback
        return ":1:37: not UTF-8 (byte 0xff)"
    if kind == "nested":
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")  # a RecursionError traceback
        return "nested deeper than 64 levels"
    path.write_text(json.dumps({"format": BASELINE_FORMAT, "version": 1, "findings": []})[:-1]
                    + ', "extra": NaN}', encoding="utf-8")
    return "JSON has no NaN"


HOSTILE = [pytest.param("fifo", marks=pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")),
           "device", "not UTF-8", "nested", "NaN"]


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_baseline_is_refused_naming_it(
    write_matrix: WriteMatrix, tmp_path: Path, kind: str,
) -> None:
    root = write_matrix()
    baseline = tmp_path / "baseline.json"
    said = _hostile(kind, baseline)
    code, out, err = cli("check", str(root), "--baseline", str(baseline))
    assert (code, out) == (2, "")
    assert err.startswith(f"capmatrix: error: {baseline}")
    assert said in err
    assert err.rstrip().endswith(f"write one with `capmatrix check --write-baseline {baseline}`")


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_baseline_of_the_matrix_is_refused_not_skipped(
    write_matrix: WriteMatrix, kind: str,
) -> None:
    """The matrix's own check-baseline.json: a FIFO or a device there is named, not passed over."""
    root = write_matrix()
    said = _hostile(kind, root / BASELINE_NAME)
    code, out, err = cli("check", str(root))
    assert (code, out) == (2, "")
    assert f"{root / BASELINE_NAME}" in err
    assert said in err
    assert cli("check", str(root), "--no-baseline")[0] == 0  # the way round it: judge every finding
