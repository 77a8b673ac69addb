"""Generated support-matrix docs: cell verdicts and notes, determinism, --check, atomic writes."""

from __future__ import annotations

import hashlib
import html.parser
import io
import json
import os
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import capmatrix
from capmatrix.authoring import render
from capmatrix.authoring._atomic import write_text_atomic
from capmatrix.authoring.cli import run
from capmatrix.authoring.render import (
    HTML_NAME,
    MARKDOWN_NAME,
    CellStatus,
    Document,
    Grid,
    KernelSection,
    RenderError,
    build,
    check_files,
    render_files,
    render_markdown,
    render_pages,
)
from capmatrix.authoring.render._evidence import EVIDENCE_HINT

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "capabilities"
DOCS = ROOT / "docs"
#: The seed fix is an engine switch: release 1.2's gate, not the XQA kernel file.
SEED_RULE = "trtllm_spec_dec_mode.mla_sm12x_one_model"
SEED_GATE = "trtllm_spec_dec_mode"
SEED_FILE = "capabilities/kernels/trtllm_gates.yaml"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def section(doc: Document, kernel: str) -> KernelSection:
    return next(k for k in doc.kernels if k.name == kernel)


def cell_at(grid: Grid, row: str, column: str) -> render.Cell:
    cells = dict(grid.rows)[row]
    return cells[grid.columns.index(column)]


def md_table(markdown: str, caption: str) -> dict[str, dict[str, str]]:
    """Parse the GitHub table that follows ``*caption*`` into {row label: {column: cell}}."""
    lines = markdown.splitlines()
    start = lines.index(f"*{caption}*") + 2
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    table: dict[str, dict[str, str]] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        table[cells[0]] = dict(zip(header[1:], cells[1:], strict=True))
    return table


@pytest.fixture(scope="module")
def shipped() -> capmatrix.Matrix:
    return capmatrix.load()


# shipped_doc and shipped_pages (tests/conftest.py): the shipped matrix's pages, built once per process.


@pytest.fixture
def rendered_once(
    monkeypatch: pytest.MonkeyPatch, shipped_matrix: capmatrix.Matrix, shipped_pages: dict[str, str]
) -> capmatrix.Matrix:
    """The shipped matrix, which stale_pages and check_files render as the pages built once.

    For tests of what they do with a fresh render (a build takes seconds): that those pages are what a
    fresh render gives is shown where the shipped matrix is rendered afresh (the committed docs, a copy
    rendered through the command line). Any other matrix is rendered as always.
    """
    real = render._files.render_pages

    def pages(matrix: capmatrix.Matrix) -> dict[str, str]:
        return dict(shipped_pages) if matrix is shipped_matrix else real(matrix)

    monkeypatch.setattr(render._files, "render_pages", pages)
    return shipped_matrix


# --------------------------------------------------------------------------------------------------
# The committed docs are never stale


def test_committed_docs_match_the_shipped_matrix(
    shipped: capmatrix.Matrix, shipped_pages: dict[str, str]
) -> None:
    # Compared with the pages built once; only stale pages are rendered again, for the diff.
    committed = {name: (DOCS / name).read_text(encoding="utf-8") if (DOCS / name).is_file() else ""
                 for name in shipped_pages}
    diffs = [] if committed == shipped_pages else check_files(shipped, DOCS)
    assert committed == shipped_pages, (
        "docs/support-matrix.{md,html} are stale; run `capmatrix render` and commit:\n"
        + "\n".join(diffs)
    )


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_check_fails_after_a_one_line_yaml_edit(tmp_path: Path, shipped_pages: dict[str, str]) -> None:
    caps = tmp_path / "capabilities"
    shutil.copytree(SHIPPED, caps)
    out = tmp_path / "docs"
    code, text, _ = cli("render", "--matrix", str(caps), "--out-dir", str(out))
    assert code == 0
    assert f"wrote {out / MARKDOWN_NAME}" in text
    assert cli("render", "--check", "--matrix", str(caps), "--out-dir", str(out))[0] == 0
    # A copy renders exactly like the shipped matrix: paths are shown relative to the matrix root.
    assert {p.name: p.read_text(encoding="utf-8") for p in out.iterdir()} == shipped_pages

    xqa = caps / "kernels" / "trtllm_gates.yaml"
    lines = xqa.read_text(encoding="utf-8").splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if "attention: mla" in line and i > 0
                 and any(SEED_RULE in x for x in lines[max(0, i - 4):i]))
    lines[index] = lines[index].replace("attention: mla", "attention: [mla, gqa]")
    xqa.write_text("".join(lines), encoding="utf-8")

    code, _, err = cli("render", "--check", "--matrix", str(caps), "--out-dir", str(out))
    assert code == 1
    assert f"--- {MARKDOWN_NAME} (committed)" in err
    assert f"+++ {MARKDOWN_NAME} (rendered)" in err
    assert "python tools/render_matrix.py" not in err
    assert err.endswith(f"capmatrix: stale in {out}: {MARKDOWN_NAME}; run "
                        f"`capmatrix render --matrix {caps} --out-dir {out}` and commit the result\n")
    assert "-| 120 (sm_12x)" in err  # the grid rows that changed
    # With the HTML page too: bounded, a few kilobytes, never the page's embedded data, each line cut short.
    code, _, err = cli("render", "--check", "--with-html", "--matrix", str(caps), "--out-dir", str(out))
    assert code == 1
    assert err.endswith(f"capmatrix: stale in {out}: {MARKDOWN_NAME}, {HTML_NAME}; run "
                        f"`capmatrix render --matrix {caps} --out-dir {out}` and commit the result\n")
    assert len(err) < 6000
    assert 'id="ask-data">{' not in err
    assert all(len(line) < 300 for line in err.splitlines()[:-1])  # the last: the command to run
    assert "more diff lines)" in err


def test_a_stale_embedded_data_line_is_shown_as_its_length_and_digest(
    tmp_path: Path, shipped_pages: dict[str, str], rendered_once: capmatrix.Matrix
) -> None:
    out = tmp_path / "docs"
    pages = shipped_pages
    out.mkdir()
    (out / MARKDOWN_NAME).write_text(pages[MARKDOWN_NAME], encoding="utf-8")
    data = next(line for line in pages[HTML_NAME].splitlines() if 'id="ask-data"' in line)
    assert len(data) >= render._files.DATA_LINE_CHARS
    (out / HTML_NAME).write_text(pages[HTML_NAME].replace(data, data.replace("xqa", "xqb", 1)),
                                 encoding="utf-8")
    assert render.stale_pages(rendered_once, out) == {}  # the HTML page is compared when asked for
    stale = render.stale_pages(rendered_once, out, html=True)
    assert list(stale) == [HTML_NAME]
    diff = stale[HTML_NAME]
    assert len(diff) < 1000
    (removed,) = [line for line in diff.splitlines() if line.startswith("-[")]
    (added,) = [line for line in diff.splitlines() if line.startswith("+[")]
    assert removed.startswith(f"-[the embedded page data: {len(data):,} characters, sha256 ")
    assert removed != added
    assert check_files(rendered_once, out, html=True) == [diff]


def test_a_long_diff_is_cut_by_lines_and_characters() -> None:
    lines = [f"+line {i}" for i in range(100)]
    cut = render._files._bounded(lines)
    assert cut.splitlines()[-1] == f"... ({100 - render._files.MAX_DIFF_LINES} more diff lines)"
    wide = ["+" + "x" * 1000] * 30
    cut = render._files._bounded(wide)
    assert len(cut) <= render._files.MAX_DIFF_CHARS + 100
    assert cut.splitlines()[0].endswith(f"... ({1001 - render._files.MAX_LINE_CHARS:,} more characters)")
    assert cut.splitlines()[-1].endswith("more diff lines)")
    digest = hashlib.sha256(b"z" * 20_000).hexdigest()[:12]
    assert render._files._readable("a\n" + "z" * 20_000) == [
        "a", f"[a line of data: 20,000 characters, sha256 {digest}...]",
    ]


def test_pages_that_differ_only_in_the_final_newline(
    tmp_path: Path, shipped_pages: dict[str, str], rendered_once: capmatrix.Matrix
) -> None:
    out = tmp_path / "docs"
    out.mkdir()
    for name, text in shipped_pages.items():
        (out / name).write_text(text.rstrip("\n"), encoding="utf-8")
    stale = render.stale_pages(rendered_once, out, html=True)
    assert stale == {
        name: f"{name}: the files differ only in line endings or the final newline"
        for name in (MARKDOWN_NAME, HTML_NAME)
    }


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_tool_wrapper_checks_and_writes(tmp_path: Path) -> None:
    out = tmp_path / "docs"
    tool = [sys.executable, str(ROOT / "tools" / "render_matrix.py")]
    stale = subprocess.run([*tool, "--check", "--out-dir", str(out)], capture_output=True,
                           text=True, check=False, cwd=tmp_path)
    assert stale.returncode == 1
    assert "stale" in stale.stderr
    wrote = subprocess.run([*tool, "--out-dir", str(out)], capture_output=True, text=True,
                           check=False, cwd=tmp_path)
    assert wrote.returncode == 0, wrote.stderr
    assert (out / MARKDOWN_NAME).is_file()
    assert (out / HTML_NAME).is_file()
    fresh = subprocess.run([*tool, "--check", "--out-dir", str(out)], capture_output=True,
                           text=True, check=False, cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr


# --------------------------------------------------------------------------------------------------
# The seed bug, as the docs show it


def test_xqa_grid_shows_the_seed_fix(shipped: capmatrix.Matrix, shipped_doc: Document) -> None:
    """Both grids: the release-1.2 gate drops multi-token mode for MLA on SM12x only; the XQA kernel
    serves non-MLA multi-token queries there and MLA only partly (FP8 Q and KV)."""
    gate = section(shipped_doc, SEED_GATE)
    assert gate.grid.caption == f"{SEED_GATE}: SM rows; columns attention · spec_dec"
    xqa = section(shipped_doc, "xqa")
    assert xqa.grid.caption == "xqa: SM rows; columns attention · spec_dec"
    for row in ("120 (sm_12x)", "121 (sm_12x)"):
        for attention in ("mha", "gqa", "mqa"):
            for spec in ("one_model", "two_model"):
                assert cell_at(xqa.grid, row, f"{attention} · {spec}").status is CellStatus.SUPPORTED
            assert cell_at(gate.grid, row, f"{attention} · one_model").status is CellStatus.SUPPORTED
        for spec in ("none", "one_model", "two_model"):
            assert cell_at(xqa.grid, row, f"mla · {spec}").status is CellStatus.PARTIAL
        cell = cell_at(gate.grid, row, "mla · one_model")
        assert cell.status is CellStatus.UNSUPPORTED
        assert cell.note is not None
        cited = {c.rule_id: c for c in cell.note.citations}
        seed = cited[SEED_RULE]
        rule = shipped.rule(SEED_RULE)
        assert seed.effect == "exclude"
        assert seed.location == f"{SEED_FILE}:{rule.location.line}"
        assert seed.reason == " ".join(rule.reason.split())
        assert seed.source == " ".join(rule.source.split())
        assert seed.verification == "read from the code"


def test_xqa_markdown_cells_and_footnote(shipped: capmatrix.Matrix, shipped_doc: Document) -> None:
    markdown = render_markdown(shipped_doc)
    table = md_table(markdown, "xqa: SM rows; columns attention · spec_dec")
    gate = md_table(markdown, f"{SEED_GATE}: SM rows; columns attention · spec_dec")
    for row in ("120 (sm_12x)", "121 (sm_12x)"):
        for attention in ("mha", "gqa", "mqa"):
            assert table[row][f"{attention} · one_model"].startswith("✓")
        assert table[row]["mla · one_model"].startswith("◐")
        cell = gate[row]["mla · one_model"]
        assert cell.startswith("✗ [")
        anchor = cell.split("(#", 1)[1].rstrip(")")
        note = markdown.split(f'<a id="{anchor}"></a>', 1)[1].split("\n\n", 1)[0]
        rule = shipped.rule(SEED_RULE)
        assert f"`{SEED_RULE}`" in note
        assert f"{SEED_FILE}:{rule.location.line}" in note
        assert "only unavailable on sm120 if MLA" in note
        assert "Source: " in note


# --------------------------------------------------------------------------------------------------
# Cell semantics on a small matrix

EXTRA = """\
kernels:
  partial:
    description: fp8 KV excluded
    rules:
      - id: partial.all
        grant: {sm: ">=90"}
        reason: everything from sm90
        source: test source
        status: verified
        verified: {evidence: evidence/run.json, gpu: Test GPU, software: torch 9.9, date: "2026-01-01"}
      - id: partial.no-fp8
        exclude: {kv: fp8}
        reason: no fp8 kv
        source: test source
        status: known_issue
"""


@pytest.fixture
def small_doc(write_matrix: Any) -> Document:
    return build(capmatrix.load(write_matrix({"kernels/extra.yaml": EXTRA})))


def test_small_cells(small_doc: Document) -> None:
    xqa = section(small_doc, "xqa")
    assert xqa.grid.columns == (
        "mha · none", "mha · one_model", "gqa · none", "gqa · one_model", "mla · none",
        "mla · one_model",
    )
    assert [label for label, _ in xqa.grid.rows] == [
        "80", "90", "100 (sm_100f)", "103 (sm_100f)", "120 (sm_12x)", "121 (sm_12x)"
    ]
    # Granted with a requirement on an open axis (kv fp8): supported, the note says what it needs.
    mla = cell_at(xqa.grid, "120 (sm_12x)", "mla · none")
    assert mla.status is CellStatus.SUPPORTED
    assert mla.note is not None
    assert [(c.rule_id, c.requires) for c in mla.note.citations] == [("xqa.mla", "kv fp8")]
    # Removed by an exclusion: unsupported, the note names the exclusion first.
    spec = cell_at(xqa.grid, "121 (sm_12x)", "mla · one_model")
    assert spec.status is CellStatus.UNSUPPORTED
    assert spec.note is not None
    assert [c.rule_id for c in spec.note.citations] == ["xqa.no-mla-spec", "xqa.mla"]
    assert spec.note.citations[0].verification == "known issue"
    # No grant at all: unsupported, no note.
    bare = cell_at(xqa.grid, "80", "mla · none")
    assert (bare.status, bare.note) == (CellStatus.UNSUPPORTED, None)
    # ...and it reads differently from a refusal: no rule grants it, nothing refuses it.
    assert (bare.ungranted, bare.text) == (True, render.UNGRANTED_SYMBOL)
    assert (spec.ungranted, spec.text) == (False, "✗")
    over = dict(small_doc.overview.rows)["xqa"]
    assert [c.text for c in over][:2] == ["✓", "✓"]
    # Supported everywhere (beam takes its default 1, so the beam exclusion does not apply).
    full = cell_at(xqa.grid, "90", "mha · none")
    assert full.status is CellStatus.SUPPORTED
    assert full.note is not None
    assert full.note.summary.startswith("Supported for every value")
    # Cells with the same explanation share one note.
    assert cell_at(xqa.grid, "120 (sm_12x)", "mla · one_model").note is spec.note


def test_partial_cell_and_verification(small_doc: Document) -> None:
    part = section(small_doc, "partial")
    assert part.grid.columns == ("bf16", "fp8")  # the one axis its rules name besides sm
    cell = cell_at(part.grid, "90", "bf16")
    assert cell.status is CellStatus.SUPPORTED
    # sm 90 with kv open would be partial; with kv a column it is exact:
    assert cell_at(part.grid, "90", "fp8").status is CellStatus.UNSUPPORTED
    over = dict(small_doc.overview.rows)["partial"]
    assert [c.status for c in over] == [
        CellStatus.UNSUPPORTED, *[CellStatus.PARTIAL] * 5
    ]
    note = cell_at(part.grid, "90", "fp8").note
    assert note is not None
    granted = next(c for c in note.citations if c.rule_id == "partial.all")
    assert granted.verification == (
        "verified on Test GPU, torch 9.9, 2026-01-01 (evidence: evidence/run.json)"
    )


def test_partial_note_gives_the_residual(write_matrix: Any) -> None:
    extra = EXTRA.replace("exclude: {kv: fp8}", "exclude: {attention: mla, kv: fp8, causal: true}")
    doc = build(capmatrix.load(write_matrix({"kernels/extra.yaml": extra})))
    part = section(doc, "partial")
    assert part.grid.caption == "partial: SM rows; columns attention · kv"
    assert "These range over all their values: causal." in part.fixed
    cell = cell_at(part.grid, "90", "mla · fp8")
    assert cell.status is CellStatus.PARTIAL
    assert cell.note is not None
    assert [c.rule_id for c in cell.note.citations] == ["partial.all", "partial.no-fp8"]
    assert cell.note.details == ("Supported when causal=false.",)
    assert cell_at(part.grid, "90", "gqa · fp8").status is CellStatus.SUPPORTED


def test_role_grid(small_doc: Document) -> None:
    role = small_doc.roles[0]
    assert role.name == "gen"
    assert role.split == "spec_dec"
    none, spec = role.grids
    assert none.columns == ("llama", "dsv3")
    assert cell_at(none, "80", "llama").text == "xqa"
    assert cell_at(none, "120 (sm_12x)", "dsv3").text == "xqa"
    assert cell_at(spec, "120 (sm_12x)", "dsv3").text == "—"
    assert cell_at(spec, "90", "dsv3").text == "fallback"
    # causal is open and neither candidate names it, so every winner wins everywhere.
    assert all(c.note is None for _, cells in none.rows for c in cells)


def test_role_winner_depending_on_an_open_axis(write_matrix: Any) -> None:
    roles = """\
roles:
  two:
    description: xqa, then partial
    candidates: [xqa, partial]
"""
    doc = build(capmatrix.load(write_matrix({"kernels/extra.yaml": EXTRA, "roles.yaml": roles})))
    role = next(r for r in doc.roles if r.name == "two")
    grid = role.grids[0]
    cell = cell_at(grid, "120 (sm_12x)", "dsv3")  # mla, kv fp8: xqa.mla wins
    assert cell.text == "xqa"
    llama = cell_at(grid, "80", "llama")
    assert llama.text == "xqa"


# --------------------------------------------------------------------------------------------------
# Output: deterministic, no absolute paths, evidence, atomic writes


def test_render_is_deterministic_and_relative(
    write_matrix: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_matrix()
    first = render_pages(capmatrix.load(root))
    monkeypatch.chdir(tmp_path.parent)
    second = render_pages(capmatrix.load(root))
    assert first == second
    for text in first.values():
        assert str(tmp_path) not in text
        assert "capabilities/kernels/test.yaml:" in text


def test_html_is_self_contained_and_accessible(small_doc: Document) -> None:
    from capmatrix.authoring.render.html import render_html

    page = render_html(small_doc)

    class Collect(html.parser.HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.ids: set[str] = set()
            self.described: list[str] = []
            self.th_scope: list[str | None] = []
            self.urls: list[str] = []
            self.tables = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            if a.get("id"):
                self.ids.add(str(a["id"]))
            if a.get("aria-describedby") and tag == "td":  # a cell with a note (inputs focus anyway)
                self.described.append(str(a["aria-describedby"]))
                assert a.get("tabindex") == "0"
                assert a.get("title")
            if tag == "th":
                self.th_scope.append(a.get("scope"))
            if tag == "table":
                self.tables += 1
            for key in ("src", "href"):
                if a.get(key):
                    self.urls.append(str(a[key]))
            assert tag not in {"link", "img", "iframe"}

    parser = Collect()
    parser.feed(page)
    assert parser.tables >= 1 + len(small_doc.kernels) + sum(len(r.grids) for r in small_doc.roles)
    assert parser.described
    assert set(parser.described) <= parser.ids
    assert all(scope in {"col", "colgroup", "row"} for scope in parser.th_scope)
    assert "colgroup" in parser.th_scope  # two column axes: grouped headers
    assert not [u for u in parser.urls if u.startswith(("http:", "https:", "//"))]
    assert 'id="legend"' in page
    for symbol in ("✓", "◐", "✗", "○"):
        assert symbol in page


def test_evidence_summary(write_matrix: Any) -> None:
    root = write_matrix()
    evidence = {
        "format": 1,
        "environment": {"gpu": "Test GPU", "sm": 90, "torch": "2.11.0", "cuda": "13.0",
                        "cudnn": 91900},
        "kernels": ["xqa"],
        "cases": [],
    }
    (root / "evidence").mkdir()
    (root / "evidence" / "run.json").write_text(json.dumps(evidence), encoding="utf-8")
    doc = build(capmatrix.load(root))
    (ev,) = doc.evidence
    assert ev.path == "capabilities/evidence/run.json"
    assert (ev.gpu, ev.sm, ev.cases, ev.kernels) == ("Test GPU", "90", 0, ("xqa",))
    assert ev.software == "torch 2.11.0, CUDA 13.0, cuDNN 9.19.0"
    assert ev.disagreements == 0
    assert "Test GPU (sm 90)" in render_markdown(doc)


def test_broken_evidence_is_a_located_error(write_matrix: Any) -> None:
    root = write_matrix()
    (root / "evidence").mkdir()
    (root / "evidence" / "bad.json").write_text('{"format": 1,\n  "cases": [}\n', encoding="utf-8")
    with pytest.raises(RenderError) as info:
        build(capmatrix.load(root))
    assert str(info.value).startswith("capabilities/evidence/bad.json:2:")


def _evidence_of(kind: str, path: Path) -> str:
    """Make ``path`` a ``kind`` of evidence file no reader may trust; return what the refusal says."""
    if kind == "fifo":
        os.mkfifo(path)  # read as it was, render blocked for ever
        return ": not a regular file"
    if kind == "device":
        path.symlink_to("/dev/zero")  # read whole, a MemoryError
        return ": not a regular file"
    if kind == "not UTF-8":
        path.write_bytes(b'{"format": "r\xe9cord"}')  # was a located error already; still is
        return ":1:14: not UTF-8 (byte 0xe9)"
    if kind == "nested":
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")  # a RecursionError traceback
        return ": objects and arrays nested deeper than 64 levels"
    path.write_text('{"format": 1, "environment": {"sm": Infinity}, "cases": []}', encoding="utf-8")
    return ": not valid JSON (Infinity is no JSON number"  # accepted, then an OverflowError traceback


@pytest.mark.parametrize("kind", [
    pytest.param("fifo", marks=pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")),
    "device", "not UTF-8", "nested", "Infinity",
])
def test_a_hostile_evidence_file_is_a_render_error_naming_it(
    write_matrix: Any, tmp_path: Path, kind: str,
) -> None:
    root = write_matrix()
    (root / "evidence").mkdir()
    said = _evidence_of(kind, root / "evidence" / "bad.json")
    with pytest.raises(RenderError) as info:
        build(capmatrix.load(root))
    assert f"/evidence/bad.json{said}" in str(info.value)  # shown from the matrix root, or in full
    assert str(info.value).endswith(f"; {EVIDENCE_HINT}")
    code, _out, err = cli("render", "--matrix", str(root), "--out-dir", str(tmp_path / "docs"))
    assert code == 2
    assert "Traceback" not in err
    assert "evidence/bad.json" in err
    assert not (tmp_path / "docs").exists()


@pytest.mark.parametrize("sm", ["90.5", '"90"', "true"])
def test_evidence_whose_sm_is_no_integer_is_not_compared(write_matrix: Any, sm: str) -> None:
    root = write_matrix()
    (root / "evidence").mkdir()
    (root / "evidence" / "run.json").write_text(
        f'{{"format": 1, "environment": {{"sm": {sm}}}, "kernels": [], "cases": []}}', encoding="utf-8")
    (ev,) = build(capmatrix.load(root)).evidence
    assert ev.problem is not None
    assert "environment.sm must be an integer such as 90" in ev.problem


def test_failed_render_leaves_old_files(
    write_matrix: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "docs"
    out.mkdir()
    (out / MARKDOWN_NAME).write_text("old md\n", encoding="utf-8")
    (out / HTML_NAME).write_text("old html\n", encoding="utf-8")

    def boom(_doc: Document) -> str:
        raise RenderError("html failed")

    monkeypatch.setattr("capmatrix.authoring.render._files.render_html", boom)
    with pytest.raises(RenderError):
        render_files(capmatrix.load(write_matrix()), out)
    assert (out / MARKDOWN_NAME).read_text(encoding="utf-8") == "old md\n"
    assert (out / HTML_NAME).read_text(encoding="utf-8") == "old html\n"
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKDOWN_NAME, HTML_NAME])


def test_cli_check_missing_pages_and_bad_matrix(tmp_path: Path, write_matrix: Any) -> None:
    root = write_matrix()
    code, _, err = cli("render", "--check", "--matrix", str(root), "--out-dir", str(tmp_path))
    assert code == 1
    assert "+++ support-matrix.md (rendered)" in err
    code, _, err = cli("render", "--matrix", str(tmp_path / "missing"), "--out-dir", str(tmp_path))
    assert code == 2
    assert "matrix directory not found" in err


def test_check_compares_the_committed_markdown_and_renders_the_html(
    write_matrix: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The HTML page is a build output: ``--check`` passes without it (or with a stale one), still
    fails when it no longer renders, and ``--with-html`` compares it."""
    root, out = str(write_matrix()), tmp_path / "docs"
    assert cli("render", "--matrix", root, "--out-dir", str(out))[0] == 0
    (out / HTML_NAME).unlink()
    code, text, err = cli("render", "--check", "--matrix", root, "--out-dir", str(out))
    assert (code, err) == (0, "")
    assert text == f"ok: {MARKDOWN_NAME} in {out} is up to date ({HTML_NAME} renders)\n"
    code, _, err = cli("render", "--check", "--with-html", "--matrix", root, "--out-dir", str(out))
    assert code == 1
    assert err.endswith(f"capmatrix: stale in {out}: {HTML_NAME}; run "
                        f"`capmatrix render --matrix {root} --out-dir {out}`\n")
    assert cli("render", "--matrix", root, "--out-dir", str(out))[0] == 0
    code, text, _ = cli("render", "--with-html", "--matrix", root, "--out-dir", str(out))
    assert (code, text) == (0, f"ok: {MARKDOWN_NAME} and {HTML_NAME} in {out} are up to date\n")

    def boom(_doc: Document) -> str:
        raise RenderError("html failed")

    monkeypatch.setattr("capmatrix.authoring.render._files.render_html", boom)
    code, _, err = cli("render", "--check", "--matrix", root, "--out-dir", str(out))
    assert code == 2
    assert "html failed" in err


CPU_AND_BEAM = """\
kernels:
  cpu:
    description: no sm condition
    rules:
      - id: cpu.all
        grant: {attention: mha}
        reason: any device
        source: test
        status: untested
  beamy:
    description: only beam 4, whose default is 1
    rules:
      - id: beamy.four
        grant: {sm: 90, beam: 4}
        reason: beam search kernel
        source: test
        status: untested
"""


def test_kernel_without_sm_condition_has_one_row(write_matrix: Any) -> None:
    doc = build(capmatrix.load(write_matrix({"kernels/extra.yaml": CPU_AND_BEAM})))
    grid = section(doc, "cpu").grid
    assert [label for label, _ in grid.rows] == [render.ANY_SM]
    assert [c.status for c in dict(grid.rows)[render.ANY_SM]] == [
        CellStatus.SUPPORTED, CellStatus.UNSUPPORTED, CellStatus.UNSUPPORTED
    ]


def test_default_no_grant_admits_is_opened(write_matrix: Any) -> None:
    doc = build(capmatrix.load(write_matrix({"kernels/extra.yaml": CPU_AND_BEAM})))
    beamy = section(doc, "beamy")
    # beam's default 1 would hide the only grant: beam ranges instead (here it is the column axis).
    assert beamy.grid.columns == ("1", "4")
    assert "No grant admits the default" not in beamy.fixed
    assert cell_at(beamy.grid, "90", "4").status is CellStatus.SUPPORTED
    over = [c.status for c in dict(doc.overview.rows)["beamy"]]
    assert over[1] is CellStatus.SUPPORTED  # sm 90
    assert over.count(CellStatus.UNSUPPORTED) == len(over) - 1


@pytest.mark.parametrize("existing", [True, False], ids=["old-pages", "no-pages"])
def test_failed_html_write_restores_the_markdown(
    write_matrix: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    """Both pages or neither: when writing the HTML fails after the Markdown was written, the
    Markdown gets its old content back (or is removed), and the error propagates."""
    out = tmp_path / "docs"
    out.mkdir()
    if existing:
        (out / MARKDOWN_NAME).write_text("old md\n", encoding="utf-8")
        (out / HTML_NAME).write_text("old html\n", encoding="utf-8")
    real = write_text_atomic

    def failing(path: Any, text: str) -> None:
        if Path(path).name == HTML_NAME:
            raise OSError(28, "No space left on device")
        real(path, text)

    monkeypatch.setattr("capmatrix.authoring.render._files.write_text_atomic", failing)
    with pytest.raises(OSError, match="No space"):
        render_files(capmatrix.load(write_matrix()), out)
    if existing:
        assert (out / MARKDOWN_NAME).read_text(encoding="utf-8") == "old md\n"
        assert (out / HTML_NAME).read_text(encoding="utf-8") == "old html\n"
    else:
        assert list(out.iterdir()) == []


def test_html_target_that_is_a_directory_leaves_no_half_render(write_matrix: Any, tmp_path: Path) -> None:
    out = tmp_path / "docs"
    (out / HTML_NAME).mkdir(parents=True)
    code, _, err = cli("render", "--matrix", str(write_matrix()), "--out-dir", str(out))
    assert code == 2
    assert "Traceback" not in err
    assert not (out / MARKDOWN_NAME).exists()


def test_a_matrix_with_many_open_axes_renders_in_bounded_time(write_matrix: Any) -> None:
    """13 rules over 14 open axes: the cells' status comes from the resolver, not a region equality
    exponential in the open axes (this render ran past 120 s)."""
    rng = random.Random(3)  # noqa: S311 - reproducible test inputs
    names = [f"a{i}" for i in range(14)]
    values = [f"v{j}" for j in range(6)]
    axes = "axes:\n  sm: {type: int, description: d, values: [80, 90, 100]}\n" + "".join(
        f"  {n}: {{type: enum, description: d, values: [{', '.join(values)}]}}\n" for n in names)
    rules = []
    for r in range(13):
        cond = ", ".join(f"{a}: [{', '.join(rng.sample(values, 3))}]" for a in rng.sample(names, 3))
        effect = f"grant: {{sm: [90, 100], {cond}}}" if r < 8 else f"exclude: {{{cond}}}"
        rules.append(f"      - {{id: k.r{r}, {effect}, reason: r, source: s, status: untested}}\n")
    kernels = ("kernels:\n  k:\n    description: d\n    rules:\n" + "".join(rules)
               + "models:\n  m: {description: m, axes: {a0: v0}, source: s}\n"
               + "roles:\n  r: {description: r, candidates: [k]}\n")
    matrix = capmatrix.load(write_matrix({"axes.yaml": axes, "kernels/k.yaml": kernels}, base=False))
    pages: list[dict[str, str]] = []
    worker = threading.Thread(target=lambda: pages.append(render_pages(matrix)), daemon=True)
    worker.start()
    worker.join(120)
    assert pages, "render did not finish"
    markdown = pages[0][MARKDOWN_NAME]
    verdicts = {sm: capmatrix.resolve(capmatrix.KernelQuery("k", sm=sm), matrix).verdict for sm in (80, 90)}
    assert verdicts[80] is capmatrix.Verdict.UNSUPPORTED
    assert verdicts[90] is capmatrix.Verdict.DEPENDS
    assert "Partial: granted, but an exclusion removes part of it." in markdown
