"""The shipped page in headless Chromium: search box, shared ask links, laptop and phone widths, legend.

One Chromium run per window size (the page is large; a run costs seconds): a copy of the shipped
matrix's page (rendered once per test process, as ``make docs`` writes ``docs/support-matrix.html``,
which is not committed) with a script appended that, once the page has loaded, measures what a
reader sees (scroll position, focus, which rows, columns and sections are shown, computed styles),
types into the search box, follows a second ask link, and writes it all as JSON into the DOM. One more
test shoots the page at both widths and prints where (``pytest -s`` shows it). Skipped without Chromium.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from test_authoring_render_html import CHROMIUM, TOOL, _png_pixels

import capmatrix
from capmatrix import KernelQuery
from capmatrix.authoring.render._build import GPU_NAMES

LAPTOP, PHONE = (1366, 768), (500, 900)  # headless Chromium lays out no narrower than 500 px
#: The shared link the laptop run opens, and the one it follows next (a hashchange, not a load).
FIRST = {"target": "kernel:xqa", "model": "deepseek_v3", "sm": "120", "spec_dec": "one_model",
         "dtype": "bf16"}
SECOND = {"target": "role:trtllm_generation", "model": "llama3_1_8b", "sm": "90"}
SEARCHES = ("xqa", "B200", "rtx 50", "DeepSeek", "trtllm_generation", "zzz-no-such-thing", "")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="headless Chromium not found (/usr/bin/chromium); apt-get install chromium to run",
    ),
]

_HARNESS = """
<pre id="harness-out"></pre>
<script>
(function () {
  var SEARCHES = %(searches)s, SECOND = %(second)s;
  var out = {viewport: document.documentElement.clientWidth, height: window.innerHeight};
  function seen(e) { return e.checkVisibility(); }
  function texts(list) { return list.filter(seen).map(function (e) { return e.textContent; }); }
  function attr(list, name) { return list.filter(seen).map(function (e) { return e.getAttribute(name); }); }
  function all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function answerState() {
    var a = document.getElementById('ask-answer'), form = document.getElementById('ask-form');
    var fields = {};
    all('select, input', form).forEach(function (c) { if (c.value) { fields[c.name] = c.value; } });
    return {scrollY: window.scrollY, top: a.getBoundingClientRect().top,
            active: document.activeElement ? document.activeElement.id : null,
            verdict: a.getAttribute('data-verdict'), kernel: a.getAttribute('data-kernel'), fields: fields};
  }
  function fit(id) {
    var t = document.getElementById(id), box = t.parentElement, first = t.querySelector('tbody th');
    var heads = all('thead th', t);
    var state = {scrollWidth: box.scrollWidth, clientWidth: box.clientWidth,
      headers: heads.map(function (h) { return h.textContent; }),
      headersShown: heads.filter(function (h) {
        var r = h.getBoundingClientRect(); return r.left >= 0 && r.right <= out.viewport + 0.5;
      }).map(function (h) { return h.textContent; }),
      position: getComputedStyle(first).position, firstWidth: first.getBoundingClientRect().width};
    // Scrolled to its right end, the row labels stay where they were: the first column sticks.
    var before = first.getBoundingClientRect().left;
    box.scrollLeft = box.scrollWidth;
    state.scrolled = box.scrollLeft;
    state.firstMoved = first.getBoundingClientRect().left - before;
    var last = heads[heads.length - 1].getBoundingClientRect();
    state.lastShownScrolled = last.right <= out.viewport + 0.5 &&
      last.left >= first.getBoundingClientRect().right - 0.5;
    box.scrollLeft = 0;
    return state;
  }
  function style(e) {
    var s = getComputedStyle(e);
    return {text: (e.querySelector('b') || e).textContent.trim(), background: s.backgroundColor,
            color: s.color, border: s.borderTopStyle + ' ' + s.borderTopColor, classes: e.className};
  }
  function search(q) {
    var box = document.getElementById('search-box');
    box.value = q;
    box.dispatchEvent(new Event('input'));
    var common = document.getElementById('common');
    return {
      summary: document.getElementById('search-summary').textContent,
      results: all('#search-results li.result').map(function (li) {
        return {kind: li.getAttribute('data-kind'), name: li.getAttribute('data-name'),
                href: li.querySelector('a').getAttribute('href')};
      }),
      kernels: attr(all('section[data-kernel]'), 'data-kernel'),
      roles: attr(all('section[data-role]'), 'data-role'),
      overviewRows: attr(all('#overview tr[data-kernel]'), 'data-kernel'),
      commonColumns: texts(all('thead th', common)),
      commonRows: attr(all('tbody tr', common), 'data-model'),
      xqaRows: attr(all('#kernel-xqa-grid tbody tr'), 'data-sm')
    };
  }
  function finish() {
    document.getElementById('harness-out').textContent = JSON.stringify(out);
    document.getElementById('ask-answer').scrollIntoView({block: 'start'});
  }
  window.addEventListener('load', function () {
    setTimeout(function () {
      measure();
    }, 0);
  });
  // Each part on its own: a part that breaks (an element gone) fails its own tests only.
  function part(name, fn) {
    try { out[name] = fn(); } catch (e) { out[name] = {crash: String(e)}; }
  }
  function measure() {
    part('first', answerState);
    part('searchShown', function () { return seen(document.getElementById('search-box')); });
    part('searchFirst', function () {
      return document.getElementById('search').compareDocumentPosition(
        document.getElementById('common')) === Node.DOCUMENT_POSITION_FOLLOWING;
    });
    part('layout', function () {
      return {common: fit('common'), overview: fit('overview'), xqa: fit('kernel-xqa-grid')};
    });
    function legend(sel) {
      return all(sel).map(function (dt) {
        var s = style(dt.querySelector('.sw')); s.label = dt.getAttribute('data-label'); return s;
      });
    }
    part('legend', function () {
      return legend('section[aria-labelledby="legend"] dl.legend dt[data-label]');
    });
    part('commonLegend', function () { return legend('#common-configurations dl.legend dt[data-label]'); });
    part('cells', function () {
      var grid = document.getElementById('kernel-xqa-grid');
      return {refused: all('td.c.refused', grid).slice(0, 3).map(style),
              ungranted: all('td.c.ungranted', grid).slice(0, 3).map(style)};
    });
    out.search = {};
    SEARCHES.forEach(function (q) {
      try { out.search[q] = search(q); } catch (e) { out.search[q] = {crash: String(e)}; }
    });
    if (!SECOND) { finish(); return; }
    var done = false;
    window.addEventListener('hashchange', function () {
      setTimeout(function () { done = true; part('second', answerState); finish(); }, 0);
    });
    window.scrollTo(0, 0);
    window.location.hash = SECOND;
    setTimeout(function () { if (!done) { out.second = {crash: 'no hashchange'}; finish(); } }, 5000);
  }
})();
</script>
"""


def _run(
    shipped: Path, tmp_path: Path, size: tuple[int, int], fragment: str, second: str | None
) -> dict[str, Any]:
    script = _HARNESS % {"searches": json.dumps(list(SEARCHES)), "second": json.dumps(second)}
    page = tmp_path / "page.html"
    page.write_text(shipped.read_text(encoding="utf-8").replace("</body>", script + "</body>", 1),
                    encoding="utf-8")
    cmd = TOOL.chromium_command(
        CHROMIUM, str(tmp_path / "profile"), page.resolve().as_uri() + fragment, "--dump-dom",
        f"--window-size={size[0]},{size[1]}", "--virtual-time-budget=20000",
    )
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300)
    found = re.search(r'<pre id="harness-out">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, "the harness wrote nothing"
    result: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return result


@pytest.fixture(scope="module")
def laptop(shipped_html_page: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(shipped_html_page, tmp_path_factory.mktemp("laptop"), LAPTOP, "#ask?" + urlencode(FIRST),
                "#ask?" + urlencode(SECOND))


@pytest.fixture(scope="module")
def phone(shipped_html_page: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(shipped_html_page, tmp_path_factory.mktemp("phone"), PHONE, "", None)


@pytest.fixture(scope="module")
def matrix() -> capmatrix.Matrix:
    return capmatrix.load()


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


# --------------------------------------------------------------------------------------------------
# A shared link lands on its answer


def test_shared_ask_link_fills_the_form_and_lands_on_its_answer(laptop: dict[str, Any]) -> None:
    first = laptop["first"]
    assert first["fields"] == FIRST  # the form holds the question
    assert first["verdict"] == "unsupported"  # and it was asked (the seed's DeepSeek question)
    assert first["scrollY"] > laptop["height"]  # the answer is screens below the top
    # the page scrolled to it (a fraction of a pixel above the top is sub-pixel layout, still at the top)
    assert -1 < first["top"] < laptop["height"] / 4
    assert first["active"] == "ask-answer"  # and keyboard focus is on it


def test_following_a_second_ask_link_replaces_the_question(
    laptop: dict[str, Any], matrix: capmatrix.Matrix
) -> None:
    second = laptop["second"]
    assert second["fields"] == SECOND  # the first question's fields are gone
    selection = capmatrix.select("trtllm_generation", KernelQuery(model="llama3_1_8b", sm=90), matrix)
    assert second["verdict"] == str(selection.verdict)
    assert second["kernel"] == (selection.kernel or "")
    assert second["scrollY"] > 0
    assert -1 < second["top"] < laptop["height"] / 4
    assert second["active"] == "ask-answer"


# --------------------------------------------------------------------------------------------------
# The GPU columns at laptop and phone width


def test_every_gpu_column_is_on_screen_at_laptop_width(laptop: dict[str, Any]) -> None:
    assert laptop["viewport"] <= LAPTOP[0]
    for grid in ("common", "overview"):
        state = laptop["layout"][grid]
        assert state["scrollWidth"] <= state["clientWidth"], grid  # no horizontal scrolling
        assert state["headersShown"] == state["headers"], grid  # every header inside the window
    shown = " ".join(laptop["layout"]["common"]["headersShown"])
    for name in ("H100", "B200", "RTX 50", "DGX Spark"):
        assert name in shown


def test_wide_grids_keep_their_row_labels_while_scrolling(
    laptop: dict[str, Any], phone: dict[str, Any]
) -> None:
    for state in (laptop["layout"]["xqa"], phone["layout"]["common"], phone["layout"]["xqa"]):
        assert state["position"] == "sticky"
        if state["scrollWidth"] > state["clientWidth"]:
            assert state["scrolled"] > 0
            assert abs(state["firstMoved"]) < 1  # the row labels stayed put
            assert state["lastShownScrolled"]  # and the last column came into view beside them


def test_phone_width_leaves_room_for_the_gpu_columns(phone: dict[str, Any]) -> None:
    common = phone["layout"]["common"]
    assert common["scrollWidth"] > common["clientWidth"]  # it cannot all fit; it scrolls
    assert common["firstWidth"] <= phone["viewport"] / 2  # the sticky labels leave half the width
    assert len(common["headersShown"]) >= 3  # the label column and at least two GPUs at once


# --------------------------------------------------------------------------------------------------
# The legend tells a known refusal from "no rule grants it"


def _distinct(a: dict[str, str], b: dict[str, str]) -> None:
    assert a["text"] != b["text"]
    assert (a["background"], a["border"]) != (b["background"], b["border"])


def test_legend_and_cells_tell_a_refusal_from_no_grant(laptop: dict[str, Any]) -> None:
    for legend in (laptop["legend"], laptop["commonLegend"]):
        by_label = {entry["label"]: entry for entry in legend}
        assert {"supported", "refused", "not granted"} <= set(by_label)
        refused, ungranted = by_label["refused"], by_label["not granted"]
        assert refused["text"] == "✗"
        assert ungranted["text"] == "○"
        _distinct(refused, ungranted)
    cells = laptop["cells"]
    assert cells["refused"]
    assert cells["ungranted"]
    for refused in cells["refused"]:
        assert refused["text"].startswith("✗")
        for ungranted in cells["ungranted"]:
            assert ungranted["text"] == "○"
            assert ungranted["background"] != refused["background"]


# --------------------------------------------------------------------------------------------------
# The search box filters as you type


def test_search_box_comes_first_and_is_shown(laptop: dict[str, Any]) -> None:
    assert laptop["searchShown"] is True
    assert laptop["searchFirst"] is True


def test_search_for_a_kernel_keeps_its_kernels(laptop: dict[str, Any], matrix: capmatrix.Matrix) -> None:
    got = laptop["search"]["xqa"]
    everything = laptop["search"][""]
    expected = [k for k in matrix.kernels if "xqa" in _norm(k)]
    assert expected
    assert got["kernels"] == expected
    assert got["overviewRows"] == expected
    roles = [r for r, role in matrix.roles.items() if set(expected) & set(role.candidates)]
    assert got["roles"] == roles
    assert {(r["kind"], r["name"]) for r in got["results"]} == {("kernel", k) for k in expected}
    assert ("kernel", "xqa", "#kernel-xqa") in {(r["kind"], r["name"], r["href"]) for r in got["results"]}
    assert got["commonColumns"] == everything["commonColumns"]  # GPUs untouched
    assert f"{len(expected)} kernel" in got["summary"]


@pytest.mark.parametrize(("typed", "sms"), [("B200", [100]), ("rtx 50", [120])])
def test_search_for_a_gpu_keeps_its_columns_and_rows(
    laptop: dict[str, Any], typed: str, sms: list[int]
) -> None:
    got = laptop["search"][typed]
    everything = laptop["search"][""]
    assert [r["name"] for r in got["results"] if r["kind"] == "gpu"] == [str(s) for s in sms]
    labels = [f"{GPU_NAMES[s]} (sm{s})" for s in sms]
    assert got["commonColumns"] == ["configuration", *labels]
    assert got["xqaRows"] == [str(s) for s in sms]
    assert got["kernels"] == everything["kernels"]  # no kernel is named: all stay
    assert got["commonRows"] == everything["commonRows"]


def test_search_for_a_model_keeps_its_rows(laptop: dict[str, Any], matrix: capmatrix.Matrix) -> None:
    got = laptop["search"]["DeepSeek"]
    models = {m for m, spec in matrix.models.items()
              if any("deepseek" in _norm(t) for t in (m, *spec.hf_ids))}
    assert models
    assert {r["name"] for r in got["results"] if r["kind"] == "model"} >= models
    assert got["commonRows"]
    assert set(got["commonRows"]) <= models
    assert len(got["kernels"]) < len(laptop["search"][""]["kernels"])  # kernels serving none are gone


def test_search_for_a_role_keeps_its_candidates(laptop: dict[str, Any], matrix: capmatrix.Matrix) -> None:
    got = laptop["search"]["trtllm_generation"]
    role = matrix.roles["trtllm_generation"]
    assert set(got["kernels"]) == set(role.candidates) & set(matrix.kernels)
    assert "trtllm_generation" in got["roles"]
    assert ("role", "trtllm_generation", "#role-trtllm-generation") in {
        (r["kind"], r["name"], r["href"]) for r in got["results"]}


def test_search_without_a_match_hides_nothing(laptop: dict[str, Any], matrix: capmatrix.Matrix) -> None:
    got, everything = laptop["search"]["zzz-no-such-thing"], laptop["search"][""]
    assert got["results"] == []
    assert "Nothing matches" in got["summary"]
    assert everything["summary"] == ""
    for key in ("kernels", "roles", "overviewRows", "commonColumns", "commonRows", "xqaRows"):
        assert got[key] == everything[key], key
    assert everything["kernels"] == list(matrix.kernels)
    assert len(everything["commonColumns"]) == len(matrix.axes["sm"].known) + 1


def test_screenshots_at_laptop_and_phone_width(
    shipped_html_page: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for width, height in (LAPTOP, PHONE):
        shot = TOOL.screenshot(shipped_html_page, tmp_path / f"page-{width}x{height}.png",
                               size=f"{width},{height}")
        with capsys.disabled():  # the path in the test output, to look at
            sys.stdout.write(f"\nscreenshot at {width}x{height}: {shot}\n")
        got_width, got_height, raw = _png_pixels(shot)
        assert (got_width, got_height) == (width, height)
        assert len(set(raw)) > 50  # not blank: the header, search box, legend and table are drawn
