"""The page's ask form, filters and common-configurations table, checked against the Python resolver.

The browser tests run headless Chromium on the shipped matrix's page, rendered once per test process
into a temporary directory (the page is a build output, not committed), and are skipped without
Chromium. The form is filled through the page's ``#ask?...`` fragment; the evaluator's agreement with
``resolve`` / ``select`` / ``suggest`` on a broad sample is checked through a harness: a copy of the
page with a script that asks the embedded evaluator (``window.capmatrixAsk``) a JSON list of questions
and writes the answers into the DOM.
"""

from __future__ import annotations

import html
import html.parser
import itertools
import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

import pytest
from test_authoring_render_html import CHROMIUM, TOOL

import capmatrix
from capmatrix import KernelQuery, Verdict
from capmatrix.authoring import _suggest, render
from capmatrix.authoring.cli._query import kernel_start_refusal, selection_verdict, start_refusal
from capmatrix.authoring.render import HTML_NAME, Document, build, render_html, render_markdown
from capmatrix.authoring.render._build import COMMON_MODELS, COMMON_SETTINGS
from capmatrix.errors import InvalidQuery, InvalidValue
from capmatrix.resolver import ReasonKind

if TYPE_CHECKING:
    from collections.abc import Callable

    from capmatrix.model import Axis

#: Complete random kernel queries, random open queries, suggestion queries and random role queries in
#: the sample.
COMPLETE, OPEN, SUGGESTED, SELECTED = 1500, 400, 150, 300
Value = str | int | bool

_NEEDS_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium not found (/usr/bin/chromium); apt-get install chromium to run",
)


def browser(test: Callable[..., None]) -> Callable[..., None]:
    """Mark a test as a browser test, skipped without Chromium."""
    return pytest.mark.browser(_NEEDS_CHROMIUM(test))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def matrix() -> capmatrix.Matrix:
    return capmatrix.load()


def _dump(page: Path, tmp_path: Path, fragment: str = "", budget: int = 5000) -> str:
    url = page.resolve().as_uri() + fragment
    cmd = TOOL.chromium_command(CHROMIUM, str(tmp_path / "profile"), url, "--dump-dom",
                                f"--virtual-time-budget={budget}")
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300)
    return done.stdout


class _Answer(html.parser.HTMLParser):
    """The ask form's answer: its attributes, the reasons' rules and the suggested changes."""

    def __init__(self) -> None:
        super().__init__()
        self.answer: dict[str, str | None] = {}
        self.reasons: list[tuple[str, str]] = []
        self.suggestions: list[dict[str, Value]] = []
        self.text: list[str] = []
        self.link = ""
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id") == "ask-answer":
            self.answer, self._depth = a, 1
            return
        if not self._depth:
            return
        self._depth += 1
        classes = str(a.get("class") or "").split()
        if "reason" in classes:
            self.reasons.append((str(a["data-kind"]), str(a["data-rule"])))
        if "suggestion" in classes:
            self.suggestions.append(json.loads(str(a["data-changes"])))
        if "permalink" in classes:
            self.link = str(a["href"])

    def handle_endtag(self, tag: str) -> None:
        if self._depth:
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._depth:
            self.text.append(data)


#: Every question the tests below ask through the form, asked in one page load (a load costs seconds):
#: the first in the address the page is opened at, each next one by changing the address's fragment
#: (the page's hashchange path) after the answer before it was cleared.
FORM_QUESTIONS: tuple[dict[str, str], ...] = (
    {"target": "kernel:xqa", "model": "llama", "sm": "120", "spec_dec": "one_model"},
    {"target": "kernel:xqa", "model": "DEEPSEEK-AI/DEEPSEEK-V3", "sm": "120", "spec_dec": "one_model",
     "dtype": "bf16"},
    {"target": "role:trtllm_generation", "model": "deepseek_v3", "sm": "120", "spec_dec": "one_model"},
    {"target": "kernel:xqa", "model": "no-such/model"},
    {"target": "kernel:xqa", "more": "attention=sparse"},
    {"target": "role:vllm_attention", "model": "llama3_1_8b", "sm": "75", "kv_cache_dtype": "fp8",
     "dtype": "fp16"},
)

_FORM_HARNESS = """
<pre id="form-out"></pre>
<script>
(function () {
  var fragments = JSON.parse(document.getElementById('form-questions').textContent);
  var out = [];
  function shown() {
    var a = document.getElementById('ask-answer');
    return a && a.hasAttribute('data-verdict') ? a.outerHTML : '';
  }
  function next(i) {
    out.push(shown());
    if (i === fragments.length) {
      document.getElementById('form-out').textContent = JSON.stringify(out);
      return;
    }
    var a = document.getElementById('ask-answer');
    if (a) { a.removeAttribute('data-verdict'); a.innerHTML = ''; }
    window.location.hash = fragments[i];
    setTimeout(function () { next(i + 1); }, 200);
  }
  window.addEventListener('load', function () { setTimeout(function () { next(1); }, 200); });
})();
</script>
"""


def _fragment(fields: dict[str, str]) -> str:
    return "#ask?" + urlencode(fields)


@pytest.fixture(scope="module")
def form_answers(shipped_html_page: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The form's answer (``#ask-answer``'s HTML) to each of :data:`FORM_QUESTIONS`, by fragment."""
    fragments = [_fragment(q) for q in FORM_QUESTIONS]
    assert len(set(fragments)) == len(fragments)  # a repeated fragment would change nothing
    text = shipped_html_page.read_text(encoding="utf-8")
    answers: list[str] = _run_harness(fragments, tmp_path_factory.mktemp("form"), text, harness=_FORM_HARNESS,
                                      name="form", fragment=fragments[0], budget=30000)
    return dict(zip(fragments, answers, strict=True))


def _ask(form_answers: dict[str, str], **fields: str) -> _Answer:
    """The form's answer to ``fields`` (one of :data:`FORM_QUESTIONS`)."""
    parsed = _Answer()
    parsed.feed(form_answers[_fragment(fields)])
    assert parsed.answer, "the page shows no answer"
    return parsed


# --------------------------------------------------------------------------------------------------
# The seed questions, through the form


@browser
def test_seed_question_llama_is_supported(matrix: capmatrix.Matrix, form_answers: dict[str, str]) -> None:
    query = KernelQuery("xqa", model="llama", sm=120, spec_dec="one_model")
    expected = capmatrix.resolve(query, matrix)
    assert expected.verdict is Verdict.SUPPORTED
    got = _ask(form_answers, target="kernel:xqa", model="llama", sm="120", spec_dec="one_model")
    assert got.answer["data-verdict"] == str(expected.verdict) == "supported"
    cited = {r.rule_id for r in expected.reasons if r.kind is ReasonKind.GRANT}
    assert cited <= {rule for kind, rule in got.reasons if kind == "grant"}
    assert not [rule for kind, rule in got.reasons if kind == "exclude"]
    assert got.suggestions == []
    # The answer links to its question.
    fields = {"target": "kernel:xqa", "model": "llama", "sm": "120", "spec_dec": "one_model"}
    assert got.link.startswith("#ask?")
    assert {k: v[0] for k, v in parse_qs(got.link.removeprefix("#ask?")).items()} == fields


@browser
def test_seed_question_deepseek_is_unsupported_because_of_mla(
    matrix: capmatrix.Matrix, form_answers: dict[str, str]
) -> None:
    query = KernelQuery("xqa", model="deepseek_v3", sm=120, spec_dec="one_model", dtype="bf16")
    expected = capmatrix.resolve(query, matrix)
    assert expected.verdict is Verdict.UNSUPPORTED
    # The Hugging Face id of the model, as a user would type it.
    hf_id = matrix.models["deepseek_v3"].hf_ids[0].upper()
    got = _ask(form_answers, target="kernel:xqa", model=hf_id, sm="120", spec_dec="one_model", dtype="bf16")
    assert got.answer["data-verdict"] == "unsupported"
    excluded = [r.rule_id for r in expected.reasons
                if r.kind is ReasonKind.EXCLUDE and r.rule_id is not None]
    assert excluded
    assert [rule for kind, rule in got.reasons if kind == "exclude"] == excluded
    text = " ".join("".join(got.text).split())
    assert "MLA" in text
    for rule_id in excluded:  # the reason, source and status of each exclusion are shown
        rule = matrix.rule(rule_id)
        assert " ".join(rule.reason.split()) in text
        assert " ".join(rule.source.split()) in text
    suggestions = [dict(s.changes) for s in capmatrix.suggest(query, matrix)]
    assert suggestions  # FP8 dtypes would do
    assert got.suggestions == suggestions


@browser
def test_role_question_names_the_winner(matrix: capmatrix.Matrix, form_answers: dict[str, str]) -> None:
    selection = capmatrix.select(
        "trtllm_generation", KernelQuery(model="deepseek_v3", sm=120, spec_dec="one_model"), matrix
    )
    got = _ask(form_answers, target="role:trtllm_generation", model="deepseek_v3", sm="120",
               spec_dec="one_model")
    assert got.answer["data-verdict"] == str(selection.verdict)
    assert got.answer["data-kernel"] == selection.kernel


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
@browser
def test_bad_question_is_refused_with_a_message(form_answers: dict[str, str]) -> None:
    got = _ask(form_answers, target="kernel:xqa", model="no-such/model")
    assert got.answer["data-verdict"] == "error"
    assert "unknown model" in "".join(got.text)
    got = _ask(form_answers, target="kernel:xqa", more="attention=sparse")
    assert got.answer["data-verdict"] == "error"
    assert "sparse" in "".join(got.text)


# --------------------------------------------------------------------------------------------------
# The evaluator against Python, on a broad sample


_HARNESS = """
<pre id="harness-out"></pre>
<script>
(function () {
  var ask = window.capmatrixAsk;
  var questions = JSON.parse(document.getElementById('harness-questions').textContent);
  var out = questions.map(function (q) {
    try {
      if (q.op === 'resolve') {
        var r = ask.resolveKernel(q.kernel, q.given, q.model);
        var stop = r.verdict === 'supported' ? ask.startRefusal(q.kernel, q.given, q.model, null) : null;
        return {verdict: r.verdict, grants: r.grants.map(function (x) { return x.id; }),
                excludes: r.excludes.map(function (x) { return x.id; }),
                start: stop ? [stop.kernel, stop.verdict] : null};
      }
      if (q.op === 'select') {
        var s = ask.select(q.role, q.given, q.model);
        return {kernel: s.kernel, verdict: s.verdict, start: s.start ? s.start.kernel : null};
      }
      return {suggestions: ask.suggest(q.kernel, q.given, q.model)};
    } catch (e) {
      if (e instanceof ask.QueryError) { return {error: e.message}; }
      return {crash: String(e)};
    }
  });
  document.getElementById('harness-out').textContent = JSON.stringify(out);
})();
</script>
"""


def _run_harness(questions: list[Any], tmp_path: Path, text: str, *, harness: str = _HARNESS,
                 name: str = "harness", fragment: str = "", budget: int = 60000) -> list[Any]:
    """``harness`` run in the page ``text`` (opened at ``fragment``): it reads ``questions`` from the
    element ``{name}-questions`` and writes one answer per question, as JSON, into ``{name}-out``."""
    payload = json.dumps(questions).replace("</", "<\\/")
    extra = f'<script type="application/json" id="{name}-questions">{payload}</script>{harness}'
    page = tmp_path / f"{name}.html"
    page.write_text(text.replace("</body>", extra + "</body>", 1), encoding="utf-8")
    dom = _dump(page, tmp_path, fragment, budget=budget)
    found = re.search(rf'<pre id="{name}-out">(.*?)</pre>', dom, re.DOTALL)
    assert found, "the harness wrote no answers"
    answers: list[Any] = json.loads(html.unescape(found.group(1)))
    assert len(answers) == len(questions)
    return answers


def _unlisted(axis: Axis, rng: random.Random) -> int:
    """An int no list of ``axis`` names: beside a cut's bound or listed value, or anywhere."""
    points = [v for v in axis.known if type(v) is int]
    for cut in axis.cuts:
        points += [v for v in cut.values if type(v) is int]
        points += [b for iv in cut.intervals for b in (iv.low, iv.high) if b is not None]
        points += [m * rng.randint(1, 9) for m in cut.moduli]
    listed = set(points)
    for _ in range(20):
        value = rng.choice(points) + rng.choice([-2, -1, 1, 2, 3, 7]) if points else rng.randint(-9, 999)
        if rng.random() < 0.1:
            value = rng.randint(-1000, 5000)
        if value not in listed:
            return value
    return max(points, default=0) + 1


def _value(matrix: capmatrix.Matrix, axis: str, rng: random.Random) -> Value:
    """A value of ``axis`` as a user may give it: listed, a class's stand-in, unlisted, spelled otherwise."""
    spec = matrix.axes[axis]
    draw = rng.random()
    if str(spec.type) == "int" and draw < 0.3:
        return _unlisted(spec, rng) if draw < 0.2 else rng.choice(spec.values[len(spec.known):] or spec.known)
    if spec.spellings and draw < 0.3:
        return rng.choice(sorted(spec.spellings))  # an engine's own word for a value
    return rng.choice(spec.known)


def _name(matrix: capmatrix.Matrix, axis: str, rng: random.Random) -> str:
    """The name a query gives ``axis`` by: now and then one of its other names."""
    aliases = sorted(matrix.axes[axis].aliases)
    return rng.choice(aliases) if aliases and rng.random() < 0.3 else axis


def _supported_somewhere(
    matrix: capmatrix.Matrix, kernel: str, axes: list[str], rng: random.Random, draws: int = 40
) -> list[dict[str, Value]]:
    """Complete queries of ``kernel`` over its ``axes`` (listed values) that it supports."""
    out = []
    for _ in range(draws):
        given = {a: rng.choice(matrix.axes[a].known) for a in axes}
        if capmatrix.resolve(KernelQuery(kernel).replace(**given), matrix).verdict is Verdict.SUPPORTED:
            out.append(given)
    return out


def _questions(matrix: capmatrix.Matrix) -> list[dict[str, Any]]:
    rng = random.Random("page-ask")  # noqa: S311 - a reproducible sample
    kernels = list(matrix.kernels)
    models = list(matrix.models)
    out: list[dict[str, Any]] = []
    relevant = {k: sorted({a for r in matrix.kernels[k].rules for a in r.conditions}) for k in kernels}
    for _ in range(COMPLETE):
        kernel = rng.choice(kernels)
        given = {_name(matrix, a, rng): _value(matrix, a, rng) for a in matrix.axes}
        out.append({"op": "resolve", "kernel": kernel, "given": given, "model": None})
    for _ in range(OPEN):
        kernel = rng.choice(kernels)
        model = rng.choice([None, *models])
        named = relevant[kernel]
        given = {_name(matrix, a, rng): _value(matrix, a, rng) for a in named if rng.random() < 0.6}
        out.append({"op": "resolve", "kernel": kernel, "given": given, "model": model})
    # Each int axis of each kernel left open, the others given: an open int ranges over every class of
    # ints, listed or not (sm 48 as much as sm 90).
    # Drawn where some listed value is supported, so that only the classes no list names can make the
    # answer depends.
    for kernel in kernels:
        for axis in (a for a in relevant[kernel] if str(matrix.axes[a].type) == "int"):
            out.extend({"op": "resolve", "kernel": kernel, "model": None,
                        "given": {a: v for a, v in given.items() if a != axis}}
                       for given in _supported_somewhere(matrix, kernel, relevant[kernel], rng)[:3])
    # Every kernel with its model's values and an unlisted head, SM or group (the engine's defaults
    # apply under them: vLLM's kernels are asked with kv_cache_dtype auto).
    for kernel in kernels:
        for axis in ("head_dim", "sm", "q_per_kv"):
            model = rng.choice(models)
            given = {axis: _unlisted(matrix.axes[axis], rng)}
            if rng.random() < 0.5:
                given["phase"] = rng.choice(matrix.axes["phase"].known)
            out.append({"op": "resolve", "kernel": kernel, "given": given, "model": model})
    for _ in range(SUGGESTED):
        kernel = rng.choice(kernels)
        model = rng.choice(models)
        given = {"sm": _value(matrix, "sm", rng), "spec_dec": rng.choice(matrix.axes["spec_dec"].known)}
        if rng.random() < 0.5:
            given[_name(matrix, "kv_cache_dtype", rng)] = _value(matrix, "kv_cache_dtype", rng)
        if rng.random() < 0.3:
            given[_name(matrix, "tokens_per_block", rng)] = _value(matrix, "tokens_per_block", rng)
        out.append({"op": "suggest", "kernel": kernel, "given": given, "model": model})
    # Questions both must refuse: an axis by its name and an alias at once, a value no axis spells.
    for kernel in rng.sample(kernels, 5):
        out.append({"op": "resolve", "kernel": kernel, "model": None,
                    "given": {"tokens_per_block": 16, "block_size": 16}})
        out.append({"op": "resolve", "kernel": kernel, "model": None, "given": {"dtype": "float64"}})
    # Every cell of XQA's universe over its five main axes, the rest of its axes left open.
    main = ("sm", "attention", "spec_dec", "dtype", "kv_cache_dtype")
    for combo in itertools.product(*(matrix.axes[a].known for a in main)):
        given = dict(zip(main, combo, strict=True))
        out.append({"op": "resolve", "kernel": "xqa", "given": given, "model": None})
    for role, model, sm, mode in itertools.product(
        matrix.roles, models, matrix.axes["sm"].known, matrix.axes["spec_dec"].known
    ):
        out.append({"op": "select", "role": role, "given": {"sm": sm, "spec_dec": mode}, "model": model})
    for _ in range(SELECTED):
        role = rng.choice(list(matrix.roles))
        given = {_name(matrix, a, rng): _value(matrix, a, rng) for a in matrix.axes if rng.random() < 0.3}
        out.append({"op": "select", "role": role, "given": given, "model": rng.choice([None, *models])})
    # The engine-start checks (vLLM's TRITON_ATTN and TRITON_MLA init: FP8 below SM89), by role and by
    # the kernels that have them.
    checked = [k for k, kernel in matrix.kernels.items()
               if kernel.guards is not None and kernel.guards.caught_by]
    for role in (r for r, entry in matrix.roles.items() if set(entry.candidates) & set(checked)):
        for model, sm, kv in itertools.product(["llama3_1_8b", "deepseek_v3"], matrix.axes["sm"].known,
                                               ["fp8", "fp8_e5m2", "auto"]):
            out.append({"op": "select", "role": role, "model": model,
                        "given": {"sm": sm, "kv_cache_dtype": kv, "dtype": "fp16"}})
    for kernel, sm, kv in itertools.product(checked, matrix.axes["sm"].known, ["fp8", "auto"]):
        out.append({"op": "resolve", "kernel": kernel, "model": None,
                    "given": {"sm": sm, "kv_cache_dtype": kv, "dtype": "fp16", "head_dim": 576,
                              "attention": "mla" if "mla" in kernel else "gqa"}})
    return out


def _python(matrix: capmatrix.Matrix, q: dict[str, Any]) -> dict[str, Any]:
    try:
        return _python_answer(matrix, q)
    except InvalidQuery as exc:
        return {"error": str(exc)}


def _python_answer(matrix: capmatrix.Matrix, q: dict[str, Any]) -> dict[str, Any]:
    if q["op"] == "select":  # as `capmatrix select` answers: the selection, then the winner's start checks
        selection = capmatrix.select(q["role"], KernelQuery(model=q["model"], **q["given"]), matrix)
        refusal = start_refusal(selection, matrix)
        return {"kernel": selection.kernel, "verdict": str(selection_verdict(selection, refusal)),
                "start": None if refusal is None else refusal.kernel}
    query = KernelQuery(q["kernel"], model=q["model"], **q["given"])
    if q["op"] == "suggest":
        found = capmatrix.suggest(query, matrix)
        return {"suggestions": [dict(s.changes) for s in found], "truncated": found.truncated}
    resolution = capmatrix.resolve(query, matrix)
    stop = kernel_start_refusal(resolution, matrix)  # as `capmatrix query` asks them
    return {
        "verdict": str(resolution.verdict),
        "grants": {r.rule_id for r in resolution.reasons if r.kind is ReasonKind.GRANT},
        "excludes": [r.rule_id for r in resolution.reasons if r.kind is ReasonKind.EXCLUDE],
        "start": None if stop is None else [stop.kernel, str(stop.verdict)],
    }


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
@browser
def test_evaluator_agrees_with_python(
    matrix: capmatrix.Matrix, shipped_pages: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    questions = _questions(matrix)
    answers = _run_harness(questions, tmp_path, shipped_pages[HTML_NAME])
    verdicts: set[str] = set()
    suggested = refused = 0
    stopped: set[str] = set()
    for q, got in zip(questions, answers, strict=True):
        assert "crash" not in got, (q, got)
        expected = _python(matrix, q)
        if "error" in expected:  # a question Python refuses, the page refuses too
            assert "error" in got, (q, got, expected)
            refused += 1
            continue
        assert "error" not in got, (q, got)
        if q["op"] == "resolve":
            assert got["verdict"] == expected["verdict"], (q, got["verdict"], expected["verdict"])
            assert got["start"] == expected["start"], (q, got["start"], expected["start"])
            verdicts.add(got["verdict"])
            if len(q["given"]) == len(matrix.axes):  # complete: the deciding rules match too
                assert expected["grants"] <= set(got["grants"]), q
                assert got["excludes"] == expected["excludes"], q
        elif q["op"] == "select":
            assert got == expected, q
            if got["start"] is not None:
                stopped.add(f"{got['kernel']}:{got['start']}")
        else:
            if expected.pop("truncated"):  # Python stopped at its budget of pairs; the page has none
                with monkeypatch.context() as patch:
                    patch.setattr(_suggest, "MAX_WORK", sys.maxsize)
                    expected = _python(matrix, q)
                assert not expected.pop("truncated"), q
            assert got == expected, q
            suggested += bool(expected["suggestions"])
    assert verdicts == {"supported", "unsupported", "depends"}  # the sample reaches every verdict
    assert "vllm_triton_attn:vllm_triton_attn_init" in stopped  # a winner refused at engine start
    assert suggested >= SUGGESTED // 4
    assert refused >= 10


# --------------------------------------------------------------------------------------------------
# Filters


class _Hidden(html.parser.HTMLParser):
    """Which sections, rows and role-grid header cells are hidden."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: dict[str, bool] = {}
        self.roles: dict[str, bool] = {}
        self.rows: list[tuple[str, bool]] = []
        self.columns: list[tuple[str, bool]] = []
        self._models: list[str] | None = None
        self._col = -1

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        hidden = "hidden" in a
        if tag == "section" and a.get("data-kernel"):
            self.kernels[str(a["data-kernel"])] = hidden
        if tag == "section" and a.get("data-role"):
            self.roles[str(a["data-role"])] = hidden
        if tag == "tr" and a.get("data-model"):
            self.rows.append((str(a["data-model"]), hidden))
        if tag == "table":
            models = a.get("data-column-models")
            self._models = json.loads(models) if models else None
        if tag == "tr":
            self._col = -1
        if tag == "th" and self._models is not None and a.get("scope") == "col":
            if self._col >= 0:
                self.columns.append((self._models[self._col], hidden))
            self._col += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._models = None


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
@browser
def test_filters_hide_what_does_not_match(
    matrix: capmatrix.Matrix, shipped_html_page: Path, tmp_path: Path
) -> None:
    model, role = "deepseek_v3", "trtllm_generation"
    everything = _Hidden()
    everything.feed(_dump(shipped_html_page, tmp_path))
    assert everything.kernels
    assert not any(everything.kernels.values())
    assert not any(everything.roles.values())
    assert not any(h for _, h in everything.rows)
    assert everything.columns
    assert not any(h for _, h in everything.columns)

    filtered = _Hidden()
    filtered.feed(_dump(shipped_html_page, tmp_path, "#filter?" + urlencode({"model": model, "role": role})))
    candidates = set(matrix.roles[role].candidates)
    for kernel, hidden in filtered.kernels.items():
        supports = capmatrix.resolve(KernelQuery(kernel, model=model), matrix).verdict
        shown = kernel in candidates and supports is not Verdict.UNSUPPORTED
        assert hidden is not shown, kernel
    assert any(not h for h in filtered.kernels.values())
    assert filtered.roles == {r: r != role for r in matrix.roles}
    assert filtered.rows
    assert all(h is (m != model) for m, h in filtered.rows)
    assert any(not h for _, h in filtered.rows)
    assert all(h is (m != model) for m, h in filtered.columns)


# --------------------------------------------------------------------------------------------------
# The common-configurations table (no browser needed)


class _Common(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[str, str]] = []
        self.headers: list[str] = []
        self._in = False
        self._th = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._in = a.get("id") == "common"
        if self._in and tag == "td":
            self.cells.append((str(a.get("class")), str(a.get("title"))))
        self._th = self._in and tag == "th"

    def handle_data(self, data: str) -> None:
        if self._th:
            self.headers.append(data)


def test_common_table_cells_are_the_resolvers_answers(
    matrix: capmatrix.Matrix, shipped_pages: dict[str, str]
) -> None:
    parsed = _Common()
    parsed.feed(shipped_pages[HTML_NAME])
    sms = matrix.axes["sm"].known
    expected = []
    for model in COMMON_MODELS:
        for setting in COMMON_SETTINGS:
            for sm in sms:
                query = KernelQuery(None, model=model, sm=sm).replace(**setting.axes)
                expected.append(capmatrix.select(setting.role, query, matrix))
    assert len(parsed.cells) == len(expected) > 0
    for (classes, title), selection in zip(parsed.cells, expected, strict=True):
        assert str(selection.verdict) in classes.split(), (title, selection.verdict)
        if selection.kernel is not None:
            assert f"{selection.kernel} serves it" in title
    assert {str(s.verdict) for s in expected} >= {"supported", "unsupported"}
    assert "H100, H200, GH200 (sm90)" in parsed.headers


def test_common_table_comes_first_in_both_pages(
    matrix: capmatrix.Matrix, shipped_doc: Document, shipped_pages: dict[str, str]
) -> None:
    page = shipped_pages[HTML_NAME]
    assert page.index('id="common"') < page.index('id="ask-form"') < page.index('id="overview"')
    markdown = render_markdown(shipped_doc)
    assert markdown.index("## Common configurations") < markdown.index("Legend: ✓ supported: the")
    assert markdown.index("## Common configurations") < markdown.index("## Overview")
    first_row = next(line for line in markdown.splitlines() if line.startswith("| Llama-3.1-8B"))
    symbols = re.findall(r"[✓✗○?]", first_row)
    assert len(symbols) == len(matrix.axes["sm"].known)


def test_page_is_self_contained(shipped_pages: dict[str, str]) -> None:
    page = shipped_pages[HTML_NAME]
    assert "<script src" not in page
    assert not re.search(r"""(src|href)=["']https?:""", page)
    assert "fetch(" not in page
    assert "XMLHttpRequest" not in page


_COMMON_AXES = """\
axes:
  sm: {type: int, description: compute capability, values: [80, 90, 130]}
  attention: {type: enum, description: attention type, values: [gqa, mla]}
  spec_dec: {type: enum, description: spec-dec, values: [none, one_model]}
  dtype: {type: enum, description: dtype, values: [bf16, fp8]}
  kv_cache_dtype: {type: enum, description: kv dtype, values: [bf16, fp8]}
  phase: {type: enum, description: phase, values: [context, generation]}
  beam: {type: int, description: beam width without a default, values: [1, 4]}
"""

_COMMON_KERNELS = """\
kernels:
  fast:
    description: fast kernel
    rules:
      - {id: fast.sm80-90, grant: {sm: [80, 90]}, reason: ampere and hopper, source: test, status: untested}
      - {id: fast.no-spec, exclude: {spec_dec: one_model}, reason: no spec-dec, source: test,
         status: untested}
  beamy:
    description: needs beam 1 on sm80
    rules:
      - {id: beamy.sm80, grant: {sm: 80, beam: 1}, reason: beam 1 only, source: test, status: untested}
models:
  llama3_1_8b:
    description: llama
    hf_ids: [meta-llama/Llama-3.1-8B]
    axes: {attention: gqa}
    source: test
roles:
  trtllm_generation:
    description: decode
    candidates: [beamy, fast]
    axes: {phase: generation}
  trtllm_context:
    description: prefill, its order read from beam
    orders:
      - when: {beam: 4}
        candidates: [beamy]
      - candidates: [fast]
"""


def test_common_table_states_and_notes(write_matrix: Any) -> None:
    small = capmatrix.load(write_matrix(
        {"axes.yaml": _COMMON_AXES, "kernels/k.yaml": _COMMON_KERNELS}, base=False
    ))
    doc = build(small)
    assert doc.common is not None
    grid = doc.common.grid
    assert grid.columns == ("A100, A30 (sm80)", "H100, H200, GH200 (sm90)", "sm130")
    rows = dict(grid.rows)
    decode = rows["Llama-3.1-8B, decode, BF16 (TensorRT-LLM)"]
    spec = rows["Llama-3.1-8B, decode, one-model spec-dec, BF16 (TensorRT-LLM)"]
    prefill = rows["Llama-3.1-8B, prefill, BF16 (TensorRT-LLM)"]
    # Each cell is the selection's verdict for exactly that configuration.
    for model_label, setting in ((decode, COMMON_SETTINGS[0]), (spec, COMMON_SETTINGS[1]),
                                 (prefill, COMMON_SETTINGS[4])):
        for cell, sm in zip(model_label, small.axes["sm"].values, strict=True):
            query = KernelQuery(None, model="llama3_1_8b", sm=sm).replace(**setting.axes)
            assert cell.status is not None
            assert str(cell.status) == str(capmatrix.select(setting.role, query, small).verdict)
    states = [str(c.status) for c in decode]
    assert states == ["depends", "supported", "unsupported"]
    assert decode[0].note is not None
    assert decode[0].note.details == ("beamy: depends (supported when beam=1)", "fast: supported")
    assert decode[1].note is not None
    assert decode[1].note.summary == "fast serves it (role trtllm_generation)."
    assert [c.rule_id for c in decode[1].note.citations] == ["fast.sm80-90"]
    assert decode[2].note is not None
    assert decode[2].note.details == ("beamy: no rule grants it", "fast: no rule grants it")
    assert spec[1].note is not None
    assert str(spec[1].status) == "unsupported"
    assert "fast: excluded by fast.no-spec" in spec[1].note.details
    assert [c.rule_id for c in spec[1].note.citations] == ["fast.no-spec"]
    assert prefill[1].note is not None
    assert str(prefill[1].status) == "depends"
    assert "picks its candidates" in prefill[1].note.summary
    # The vLLM setting needs an axis this matrix lacks: left out.
    assert not any("vLLM" in label for label in rows)
    markdown = render_markdown(doc)
    assert "| Llama-3.1-8B, decode, BF16 (TensorRT-LLM)" in markdown
    assert "? [" in markdown


def test_no_common_table_without_its_roles(small: capmatrix.Matrix) -> None:
    doc = build(small)
    assert doc.common is None
    assert "## Common configurations" not in render_markdown(doc)


_WIDE_AXES = """
axes:
  sm:
    type: int
    description: compute capability
    values: [90]
  n:
    type: int
    description: an axis with more values than a 32-bit mask has bits
    values: [{values}]
  m:
    type: enum
    description: a small axis
    values: [a, b]
"""
_WIDE_KERNELS = """
kernels:
  k:
    description: grants the high values of n, and every n with m=b but the highest
    rules:
      - id: k.high
        grant: {{n: ">={grant_from}"}}
        reason: r
        source: s
        status: untested
      - id: k.b
        grant: {{m: b}}
        reason: r
        source: s
        status: untested
      - id: k.top
        exclude: {{n: ">={top}", m: b}}
        reason: r
        source: s
        status: untested
"""


@browser
def test_evaluator_handles_an_axis_wider_than_32_bits(write_matrix: Any, tmp_path: Path) -> None:
    """Masks over an axis of 40 values: the values past bit 31 answer as the resolver does."""
    values = list(range(1, 41))
    wide = capmatrix.load(write_matrix({
        "axes.yaml": _WIDE_AXES.format(values=", ".join(map(str, values))),
        "kernels/k.yaml": _WIDE_KERNELS.format(grant_from=35, top=33),
    }, base=False))
    questions: list[dict[str, Any]] = [{"op": "resolve", "kernel": "k", "given": {}, "model": None}]
    questions += [{"op": "resolve", "kernel": "k", "given": {"m": m}, "model": None} for m in ("a", "b")]
    questions += [{"op": "resolve", "kernel": "k", "given": {"n": n, "m": m}, "model": None}
                  for n in values for m in ("a", "b")]
    questions += [{"op": "resolve", "kernel": "k", "given": {"n": n}, "model": None} for n in values]
    answers = _run_harness(questions, tmp_path, render_html(build(wide)))
    verdicts = []
    for q, got in zip(questions, answers, strict=True):
        assert "crash" not in got, (q, got)
        expected = _python(wide, q)
        assert got["verdict"] == expected["verdict"], q
        verdicts.append(got["verdict"])
    # n open: with m=a only values past bit 31 are granted; with m=b those are excluded.
    assert verdicts[:3] == ["depends"] * 3
    assert {"supported", "unsupported", "depends"} <= set(verdicts)


# --------------------------------------------------------------------------------------------------
# The embedded data cannot end or extend its script element; the form reads values as the CLI does

_HOSTILE_TEXT = "a <!--<script> b </script> c </SCRIPT > d <!-- e --> <\\/ f"


def test_no_yaml_text_can_end_or_extend_the_data_script(write_matrix: Any) -> None:
    root = write_matrix({"hostile.yaml": (
        "kernels:\n  hostile:\n"
        f"    description: {json.dumps(_HOSTILE_TEXT)}\n"
        "    rules:\n"
        f"      - {{id: hostile.any, grant: {{sm: 90}}, reason: {json.dumps(_HOSTILE_TEXT)}, "
        "source: test, status: untested}\n"
    )})
    m = capmatrix.load(root)
    page = render_html(build(m))
    start = page.index('<script type="application/json" id="ask-data">') + len(
        '<script type="application/json" id="ask-data">')
    end = page.index("</script>", start)
    embedded = page[start:end]
    assert "<" not in embedded  # so the HTML tokenizer stays in script data until "</script>"
    data = json.loads(embedded)
    assert data["artifact"]["kernels"]["hostile"]["description"] == _HOSTILE_TEXT
    assert data["artifact"]["kernels"]["hostile"]["rules"][0]["reason"] == _HOSTILE_TEXT
    assert page.count('id="ask-form"') == 1  # the rest of the page is still markup
    assert page.rstrip().endswith("</html>")


NODE = shutil.which("node")
_NODE_HARNESS = """
const fs = require('fs'), vm = require('vm');
const [data, script, cases] = process.argv.slice(2).map((p) => fs.readFileSync(p, 'utf8'));
globalThis.window = {location: {hash: ''}};
globalThis.document = {getElementById: (id) => (id === 'ask-data' ? {textContent: data} : null)};
vm.runInThisContext(script);
const ask = window.capmatrixAsk;
const out = JSON.parse(cases).map(function (c) {
  try {
    if (c.op === 'parse') { return {value: ask.parseValue(c.axis, c.text)}; }
    if (c.op === 'values') { return {value: Object.keys(ask.values(c.given, null, null)).length}; }
    if (c.op === 'resolve') { return {value: ask.resolve(c.kernel, ask.values({}, null, null)).verdict}; }
    if (c.op === 'kernel') { return {value: ask.resolveKernel(c.kernel, c.given, c.model).verdict}; }
    if (c.op === 'ask') {
      var target = c.role ? 'role:' + c.role : 'kernel:' + c.kernel;
      var a = ask.ask({target: target, model: c.model, given: c.given});
      return {value: a.verdict, values: a.values, suggestions: a.suggestions, kernel: a.kernel,
              start: a.start ? a.start.kernel : null,
              start_excludes: a.start ? a.start.excludes.map(function (x) { return x.id; }) : []};
    }
    return {value: ask.select(c.role, {}, null).verdict};
  } catch (e) {
    return e instanceof ask.QueryError ? {error: e.message} : {crash: String(e)};
  }
});
process.stdout.write(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def ask_data(shipped_doc: Document) -> str:
    """The shipped page's embedded data, built once (tests/conftest.py) for the node harness runs."""
    return shipped_doc.ask_data


def _node(ask_data: str, cases: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    (tmp_path / "data.json").write_text(ask_data, encoding="utf-8")
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    (tmp_path / "harness.js").write_text(_NODE_HARNESS, encoding="utf-8")
    script = Path(render.__file__).parent / "_ask.js"
    assert NODE is not None
    done = subprocess.run([NODE, str(tmp_path / "harness.js"), str(tmp_path / "data.json"), str(script),
                           str(tmp_path / "cases.json")], capture_output=True, text=True, check=True,
                          timeout=120)
    out: list[dict[str, Any]] = json.loads(done.stdout)
    return out


_TEXTS = ["90", "+90", "-1", "0", "-0", "0090", "abc", "90a", " 90", "90 ", "9_0", "\u0669\u0660", "1e3",
          "0x5a", "", "9007199254740991", "9007199254740992", "9007199254740993", "-9007199254740993",
          "1" * 4300, "1" * 4301, "true", "TRUE", "yes", "On", "0", "1", "no", "off", "tru", "none", "None",
          "gqa", "constructor"]


@pytest.mark.skipif(NODE is None, reason="node not found")
def test_the_form_reads_values_as_the_command_line_does(
    matrix: capmatrix.Matrix, ask_data: str, tmp_path: Path
) -> None:
    optional = next(a.name for a in matrix.axes.values() if a.optional and str(a.type) == "int")
    axes = ["sm", "head_dim", "causal", "attention", optional]
    cases = [{"op": "parse", "axis": a, "text": t} for a in axes for t in _TEXTS]
    got = _node(ask_data, cases, tmp_path)
    for case, answer in zip(cases, got, strict=True):
        assert "crash" not in answer, (case, answer)
        try:
            expected = matrix.axes[case["axis"]].parse(case["text"])
        except InvalidValue:
            assert "error" in answer, (case, answer)
            continue
        if type(expected) is int and abs(expected) >= 2**53:
            assert "too large for this page" in answer["error"], (case, answer)
            continue
        assert answer == {"value": expected}, case
        assert type(answer["value"]) is type(expected), case


@pytest.mark.skipif(NODE is None, reason="node not found")
@pytest.mark.parametrize("name", ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"])
def test_the_form_refuses_names_that_are_object_properties(
    ask_data: str, tmp_path: Path, name: str
) -> None:
    cases: list[dict[str, Any]] = [
        {"op": "parse", "axis": name, "text": "1"}, {"op": "values", "given": {name: 1}},
        {"op": "resolve", "kernel": name}, {"op": "select", "role": name},
    ]
    got = _node(ask_data, cases, tmp_path)
    quoted = json.dumps(name)
    assert got == [{"error": f"unknown axis {quoted}"}, {"error": f"unknown axis {quoted}"},
                   {"error": f"unknown kernel {quoted}"}, {"error": f"unknown role {quoted}"}]


@pytest.mark.skipif(NODE is None, reason="node not found")
def test_a_kernel_asked_alone_gets_its_engines_defaults(
    matrix: capmatrix.Matrix, ask_data: str, tmp_path: Path
) -> None:
    """The page once answered vLLM's Triton kernel depends where Python answers unsupported.

    A kernel asked alone is asked with its engine's defaults under the query's values (vLLM's
    kv_cache_dtype auto over the model's bf16); the head size, listed or not, decided nothing.
    """
    kernel = "triton_unified_attention"
    pins = matrix.pins(matrix.kernels[kernel])
    assert pins["kv_cache_dtype"] == "auto"
    assert matrix.models["gpt_oss_120b"].axes["kv_cache_dtype"] != "auto"
    cases: list[dict[str, Any]] = []
    for head in (129, 128, 40):
        for extra in ({}, {"kv_cache_dtype": "bf16"}):
            given = {"head_dim": head, "phase": "context", **extra}
            cases += [{"op": op, "kernel": kernel, "given": given, "model": "gpt_oss_120b"}
                      for op in ("kernel", "ask")]
    got = _node(ask_data, cases, tmp_path)
    verdicts = set()
    for case, answer in zip(cases, got, strict=True):
        assert "crash" not in answer, (case, answer)
        query = KernelQuery(kernel, model=case["model"], **case["given"])
        expected = capmatrix.resolve(query, matrix)
        assert answer["value"] == str(expected.verdict), case
        verdicts.add(answer["value"])
        if case["op"] == "ask":
            assert answer["values"]["kv_cache_dtype"] == expected.values["kv_cache_dtype"]
            assert answer["suggestions"] == [dict(s.changes) for s in capmatrix.suggest(query, matrix)]
    assert verdicts == {"unsupported", "depends"}  # auto is not granted; bf16 is, the SM left open


@pytest.mark.skipif(NODE is None, reason="node not found")
def test_an_open_int_axis_ranges_over_its_unlisted_classes(
    matrix: capmatrix.Matrix, ask_data: str, tmp_path: Path
) -> None:
    """With sm open, an SM no list names counts: every listed SM runs it, sm 48 does not."""
    given = {"attention": "mha", "dtype": "fp32"}
    query = KernelQuery("torch_sdpa_efficient", **given)
    assert capmatrix.resolve(query, matrix).verdict is Verdict.DEPENDS
    listed = {capmatrix.resolve(query.replace(sm=sm), matrix).verdict for sm in matrix.axes["sm"].known}
    assert listed == {Verdict.SUPPORTED}
    cases: list[dict[str, Any]] = [
             {"op": "kernel", "kernel": "torch_sdpa_efficient", "given": given, "model": None},
             {"op": "kernel", "kernel": "torch_sdpa_efficient", "given": {**given, "sm": 48}, "model": None}]
    assert _node(ask_data, cases, tmp_path) == [{"value": "depends"}, {"value": "unsupported"}]
    assert capmatrix.resolve(query.replace(sm=48), matrix).verdict is Verdict.UNSUPPORTED


@pytest.mark.skipif(NODE is None, reason="node not found")
def test_other_names_and_spellings_read_as_python_reads_them(
    matrix: capmatrix.Matrix, ask_data: str, tmp_path: Path
) -> None:
    queries: list[tuple[str, dict[str, Value]]] = [
        ("vllm_flash_attn", {"block_size": 7, "sm": 80}),
        ("vllm_flash_attn", {"tokens_per_block": 7, "sm": 80}),
        ("xqa", {"dtype": "bfloat16", "sm": 90}), ("xqa", {"dtype": "bf16", "sm": 90}),
        ("xqa", {"kv_cache_dtype": "float8_e4m3fn", "sm": 120, "dtype": "torch.bfloat16"}),
    ]
    cases: list[dict[str, Any]] = [{"op": "ask", "kernel": k, "given": g, "model": "llama3_1_70b"}
                                   for k, g in queries]
    cases.append({"op": "kernel", "kernel": "xqa", "given": {"block_size": 16, "tokens_per_block": 16},
                  "model": None})
    got = _node(ask_data, cases, tmp_path)
    for case, answer in zip(cases[:-1], got[:-1], strict=True):
        query = KernelQuery(case["kernel"], model=case["model"], **case["given"])
        expected = capmatrix.resolve(query, matrix)
        assert answer["value"] == str(expected.verdict), case
        assert answer["values"] == expected.values, case
        assert answer["suggestions"] == [dict(s.changes) for s in capmatrix.suggest(query, matrix)], case
    assert got[0]["suggestions"]  # a block size vLLM's kernel takes, by the axis's own name
    with pytest.raises(InvalidQuery, match="given twice"):
        capmatrix.resolve(KernelQuery("xqa", block_size=16, tokens_per_block=16), matrix)
    assert "given twice" in got[-1]["error"]


#: The engine-start cases: vLLM's TRITON_ATTN is chosen on a T4 and its init refuses an FP8 cache below
#: SM89; on an L4 (SM89) it starts; a 16-bit cache on a T4 starts.
_START_CASES: list[tuple[str, dict[str, Value]]] = [
    ("T4 FP8", {"sm": 75, "kv_cache_dtype": "fp8", "dtype": "fp16"}),
    ("L4 FP8", {"sm": 89, "kv_cache_dtype": "fp8", "dtype": "fp16"}),
    ("T4 auto", {"sm": 75, "kv_cache_dtype": "auto", "dtype": "fp16"}),
    ("T4 FP16", {"sm": 75, "kv_cache_dtype": "fp16", "dtype": "fp16"}),
]


@pytest.mark.skipif(NODE is None, reason="node not found")
def test_the_form_asks_the_start_checks_as_the_command_line_does(
    matrix: capmatrix.Matrix, ask_data: str, tmp_path: Path
) -> None:
    """A role whose winner's init refuses, and that kernel asked alone: not supported, the gate named."""
    asked = [(label, target, given) for label, given in _START_CASES
             for target in ("vllm_attention", "vllm_triton_attn")]
    cases: list[dict[str, Any]] = [
        {"op": "ask", "role" if target == "vllm_attention" else "kernel": target, "given": given,
         "model": "llama3_1_8b"} for _, target, given in asked]
    got = {(label, target): answer for (label, target, _), answer
           in zip(asked, _node(ask_data, cases, tmp_path), strict=True)}
    for label, target, given in asked:
        answer = got[label, target]
        assert "crash" not in answer, (label, target, answer)
        if target == "vllm_attention":
            selection = capmatrix.select(target, KernelQuery(model="llama3_1_8b").replace(**given), matrix)
            refusal = start_refusal(selection, matrix)
            assert answer["kernel"] == selection.kernel, label
            assert answer["value"] == str(selection_verdict(selection, refusal)), label
        else:
            resolution = capmatrix.resolve(KernelQuery(target, model="llama3_1_8b").replace(**given), matrix)
            refusal = kernel_start_refusal(resolution, matrix)
            assert answer["value"] == str(resolution.verdict if refusal is None else refusal.verdict), label
        assert answer["start"] == (None if refusal is None else refusal.kernel), (label, target)
        if refusal is not None:
            assert answer["start_excludes"] == [r.rule_id for r in refusal.reasons
                                                if r.kind is ReasonKind.EXCLUDE], label
    stop = "vllm_triton_attn_init"
    refused = got["T4 FP8", "vllm_attention"]
    picked = (refused["kernel"], refused["value"], refused["start"])
    assert picked == ("vllm_triton_attn", "unsupported", stop)
    assert refused["start_excludes"] == ["vllm_triton_attn_init.fp8_below_sm89"]
    assert {"kv_cache_dtype": "auto"} in refused["suggestions"]  # a 16-bit cache starts
    alone = got["T4 FP8", "vllm_triton_attn"]
    assert (alone["value"], alone["start"]) == ("unsupported", stop)
    assert {"kv_cache_dtype": "auto"} in alone["suggestions"]
    for label in ("L4 FP8", "T4 auto", "T4 FP16"):
        assert got[label, "vllm_triton_attn"]["value"] == "supported", label
        assert got[label, "vllm_triton_attn"]["start"] is None, label
        assert got[label, "vllm_attention"]["start"] is None, label
        assert got[label, "vllm_attention"]["value"] == "supported", label


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
@browser
def test_the_page_shows_the_refusal_at_engine_start(form_answers: dict[str, str]) -> None:
    """As ``capmatrix select`` prints it: the pick, then the refusing gate with its reason.

    Asked through the form (:data:`FORM_QUESTIONS`); the kernel question's answer is checked through
    node above.
    """
    got = _ask(form_answers, target="role:vllm_attention", model="llama3_1_8b", sm="75",
               kv_cache_dtype="fp8", dtype="fp16")
    assert got.answer["data-verdict"] == "unsupported"
    assert got.answer["data-kernel"] == "vllm_triton_attn"
    assert got.answer["data-start-gate"] == "vllm_triton_attn_init"
    text = " ".join("".join(got.text).split())
    assert "vllm_triton_attn is chosen, then refused at engine start by gate vllm_triton_attn_init" in text
    assert "requires SM89+" in text
    assert ("exclude", "vllm_triton_attn_init.fp8_below_sm89") in got.reasons
    assert {"kv_cache_dtype": "auto"} in got.suggestions
