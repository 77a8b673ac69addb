"""The support matrix as one self-contained HTML page (inline CSS and inline JS).

The page needs no network and no external asset. Every state is carried by a symbol as well as a
colour. A cell with a note is focusable (``tabindex``), names its note with ``aria-describedby`` and a
plain-text ``title``; hovering or focusing it copies the note (rules, reasons, sources, verification)
into one tooltip panel. Without JavaScript the notes stay readable in the list under each grid. Opening
the page at ``#show-<cell id>`` opens that cell's tooltip, so a cell's explanation can be linked to.

The page opens with a search box (shown once the script runs: a kernel, role, model or GPU, the grids
filtered to it as one types), the common-configurations table, then the "ask" form and the filters.
Their script (``_ask.js``, shipped beside this module) answers from the export artifact embedded in the
page as JSON (``<script type="application/json" id="ask-data">``);
``#ask?target=kernel:xqa&sm=120&model=llama`` fills the form, asks and scrolls to the answer (focused),
``#filter?model=M&role=R`` sets the filters. The grids fit a laptop's width (headers wrap) and keep
their first column in view while scrolling sideways. An unsupported cell shows ✗ when a rule refuses
it and ○ when no rule grants it.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from capmatrix.authoring.render.page import COMMON_LEGEND, LEGEND, CellStatus

if TYPE_CHECKING:
    from capmatrix.authoring.render.page import (
        Cell,
        Citation,
        CommonTable,
        Document,
        EvidenceSummary,
        Grid,
        Note,
    )

__all__ = ["render_html"]

_CSS = """
:root { --ok: #d8f3dc; --ok-b: #2d6a4f; --part: #fff3bf; --part-b: #8a6d00; --no: #fde2e1;
  --no-b: #a4262c; --ink: #1b1f23; --muted: #57606a; --line: #d0d7de; --focus: #0969da; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
  margin: 0 auto; padding: 1rem 1.5rem 4rem; max-width: 110rem; background: #fff; }
h1 { font-size: 1.7rem; margin: .5rem 0; } h2 { margin-top: 2.5rem; border-bottom: 1px solid var(--line); }
h3 { margin-bottom: .3rem; } code { font: .9em ui-monospace, SFMono-Regular, Menlo, monospace; }
a { color: #0550ae; } a:focus-visible, [tabindex]:focus-visible { outline: 3px solid var(--focus);
  outline-offset: -3px; }
nav ul { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .3rem 1rem; }
.legend { display: grid; grid-template-columns: max-content 1fr; gap: .3rem .8rem; margin: .5rem 0; }
.legend dt { font-weight: 600; white-space: nowrap; } .legend dd { margin: 0; }
.sw { display: inline-block; min-width: 2.2em; text-align: center; border: 1px solid; border-radius: 3px; }
.scroll { overflow-x: auto; margin: .5rem 0 1rem; }
table { border-collapse: collapse; font-size: .9rem; }
caption { text-align: left; font-style: italic; color: var(--muted); padding: .2rem 0; }
th, td { border: 1px solid var(--line); padding: .25rem .45rem; }
thead th { background: #f6f8fa; position: sticky; top: 0; }
tbody th { background: #f6f8fa; text-align: left; font-weight: 600; min-width: 8rem;
  position: sticky; left: 0; z-index: 1; box-shadow: 1px 0 0 var(--line); }
@media (max-width: 40rem) { body { padding: .5rem .6rem 3rem; } tbody th { font-weight: 500;
  font-size: .8rem; min-width: 6rem; max-width: 42vw; } }
thead th:first-child { left: 0; z-index: 2; }
thead th.group { border-bottom: 2px solid var(--muted); }
td.c { text-align: center; white-space: nowrap; cursor: default; }
td.c.supported, .sw.supported { background: var(--ok); border-color: var(--ok-b); color: var(--ok-b); }
td.c.partial, .sw.partial { background: var(--part); border-color: var(--part-b); color: var(--part-b); }
td.c.unsupported, .sw.unsupported { background: var(--no); border-color: var(--no-b); color: var(--no-b); }
td.c.role.unsupported { background: #f6f8fa; color: var(--muted); border-color: var(--line); }
td.c.unsupported.ungranted, .sw.ungranted { background: #fff; color: var(--muted);
  border-color: var(--line); }
.sw.ungranted { border-style: dashed; border-color: var(--muted); }
[data-unmatched] { display: none !important; }
#search { margin: 1rem 0; } #search-box { font-size: 1rem; padding: .3rem .5rem; }
#search-form label { font-weight: 600; margin-right: .5rem; } #search-help { color: var(--muted); }
#search-summary { margin: .4rem 0; } #search-summary:empty, #search-results:empty { display: none; }
#search-results { display: flex; flex-wrap: wrap; gap: .2rem .9rem; padding: 0; list-style: none; }
#search-results .kind { color: var(--muted); font-size: .8rem; }
#ask-answer:focus { outline: 3px solid var(--focus); outline-offset: 2px; }
td.c b { font-size: 1.05rem; }
td.c sup { font-size: .72rem; margin-left: .1rem; }
i.vh { font-style: normal; }
td.c a { color: inherit; text-decoration: none; display: block; }
td.c[aria-describedby]:hover { outline: 2px solid var(--ink); outline-offset: -2px; }
.vh { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0);
  white-space: nowrap; }
ol.notes { padding-left: 1.2rem; } ol.notes > li { margin: .5rem 0; }
ol.notes > li:target { background: #fff8c5; }
.note-summary { font-weight: 600; }
.cite { margin: .2rem 0 .2rem 1rem; } .cite .why, .cite .src { margin: .1rem 0 .1rem 1rem; }
.src { color: var(--muted); } .detail { margin: .2rem 0 .2rem 1rem; }
.status-verified { color: var(--ok-b); font-weight: 600; }
.status-known_issue { color: var(--no-b); font-weight: 600; }
#tip { position: absolute; z-index: 10; max-width: 44rem; background: #fff; color: var(--ink);
  border: 2px solid var(--ink); border-radius: 6px; padding: .6rem .8rem; font-size: .85rem;
  box-shadow: 0 6px 24px rgba(0,0,0,.25); }
#tip[hidden] { display: none; }
#tip .tip-head { font-weight: 700; margin-bottom: .3rem; }
.rules td { vertical-align: top; } .rules td:nth-child(3) { max-width: 40rem; }
footer { margin-top: 3rem; color: var(--muted); font-size: .85rem; }
td.c.depends, .sw.depends { background: #eef1f4; border-color: var(--muted); color: var(--ink); }
#ask-form, #filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: end; }
#ask-form label, #filters label { display: flex; flex-direction: column; font-size: .85rem; }
#ask-form button { padding: .3rem 1.2rem; }
#ask-answer { margin: .8rem 0; padding: .2rem .8rem; border-left: 4px solid var(--line); }
#ask-answer[data-verdict="supported"] { border-color: var(--ok-b); }
#ask-answer[data-verdict="unsupported"], #ask-answer[data-verdict="error"] { border-color: var(--no-b); }
#ask-answer[data-verdict="depends"] { border-color: var(--part-b); }
#ask-answer .why, #ask-answer .src { margin-left: 1rem; }
#ask-answer h3 { font-size: 1rem; }
@media (prefers-reduced-motion: no-preference) { #tip { transition: opacity .1s; } }
"""

_JS = """
(function () {
  var tip = document.getElementById('tip');
  var owner = null;
  function show(cell) {
    var note = document.getElementById(cell.getAttribute('aria-describedby'));
    if (!note) { return; }
    tip.innerHTML = '';
    var head = document.createElement('div');
    head.className = 'tip-head';
    head.textContent = cell.getAttribute('title');
    tip.appendChild(head);
    var body = document.createElement('div');
    body.innerHTML = note.innerHTML;
    tip.appendChild(body);
    tip.hidden = false;
    var r = cell.getBoundingClientRect();
    var left = window.scrollX + r.left;
    var maxLeft = window.scrollX + document.documentElement.clientWidth - tip.offsetWidth - 8;
    tip.style.left = Math.max(window.scrollX + 8, Math.min(left, maxLeft)) + 'px';
    tip.style.top = (window.scrollY + r.bottom + 4) + 'px';
    owner = cell;
  }
  function hide() { tip.hidden = true; owner = null; }
  function cellOf(e) {
    return e.target && e.target.closest ? e.target.closest('td[aria-describedby]') : null;
  }
  document.addEventListener('mouseover', function (e) {
    var c = cellOf(e); if (c) { show(c); } else if (owner && !tip.contains(e.target)) { hide(); }
  });
  document.addEventListener('focusin', function (e) { var c = cellOf(e); if (c) { show(c); } });
  document.addEventListener('focusout', function (e) { if (cellOf(e) === owner) { hide(); } });
  document.addEventListener('keydown', function (e) { if (e.key === 'Escape') { hide(); } });
  var m = /^#show-(.+)$/.exec(window.location.hash);
  if (m) {
    var cell = document.getElementById(decodeURIComponent(m[1]));
    if (cell && cell.hasAttribute('aria-describedby')) {
      cell.scrollIntoView({block: 'nearest'});
      show(cell);
    }
  }
})();
"""


#: The ask form's and filters' script, shipped beside this module.
_ASK_JS = Path(__file__).with_name("_ask.js")


def _e(text: str) -> str:
    return escape(text, quote=True)


def _link(text: str, link: str | None) -> str:
    if link is None:
        return f"<code>{_e(text)}</code>"
    return f'<a href="{_e(link)}"><code>{_e(text)}</code></a>'


def _citation(c: Citation) -> str:
    requires = ""
    if c.requires:
        word = "requires" if c.effect == "grant" else "where"
        requires = f", {word} <code>{_e(c.requires)}</code>"
    return (
        f'<div class="cite">{_e(c.effect)} <code>{_e(c.rule_id)}</code> ({_link(c.location, c.link)}; '
        f'<span class="status-{_e(c.status)}">{_e(c.verification)}</span>){requires}'
        f'<div class="why">Reason: {_e(c.reason)}</div>'
        f'<div class="src">Source: {_e(c.source)}</div></div>'
    )


def _note(note: Note) -> str:
    parts = [f'<li id="{_e(note.anchor)}" value="{note.number}">',
             f'<div class="note-summary">{_e(note.summary)}</div>']
    parts.extend(_citation(c) for c in note.citations)
    parts.extend(f'<div class="detail">{_e(d)}</div>' for d in note.details)
    parts.append("</li>")
    return "".join(parts)


#: The legend's swatch classes of a label, where the label is not itself the cell's status.
_SWATCH = {"refused": "unsupported refused", "not granted": "unsupported ungranted"}


def _cell(cell: Cell, cell_id: str, where: str, role: bool, summary: bool = False) -> str:
    status = cell.status.value if cell.status is not None else "none"
    classes = f"c {status}" + (" role" if role else "")
    label = cell.status.value if cell.status is not None else ""
    if cell.status is CellStatus.UNSUPPORTED and not role:
        # A known refusal and a cell nothing grants look and read differently.
        label = "unsupported, no rule grants it" if cell.ungranted else "unsupported, refused by a rule"
        classes += " ungranted" if cell.ungranted else " refused"
    if role:
        shown = f"<b>{_e(cell.text)}</b>" + ('<i class="vh">no candidate</i>' if cell.text == "—" else "")
    else:
        shown = f'<b aria-hidden="true">{_e(cell.text)}</b><i class="vh">{_e(label)}</i>'
    if cell.note is not None:
        said = f": {cell.note.summary}" if summary else ""
        title = _e(f"{where}: {label or cell.text} (note {cell.note.number}){said}")
        return (
            f'<td id="{_e(cell_id)}" class="{classes}" tabindex="0" '
            f'aria-describedby="{_e(cell.note.anchor)}" title="{title}">'
            f"{shown}<sup>{cell.note.number}</sup></td>"
        )
    if cell.link is not None:
        return f'<td class="{classes}"><a href="#{_e(cell.link)}">{shown}</a></td>'
    return f'<td class="{classes}">{shown}</td>'


def _grid(grid: Grid, *, role: bool = False, summary: bool = False) -> str:
    columns = (f" data-column-models='{_e(json.dumps(list(grid.column_models)))}'"
               if grid.column_models else "")
    if grid.column_sms:
        columns += f" data-column-sms='{_e(json.dumps(list(grid.column_sms)))}'"
    out = [f'<div class="scroll" role="region" tabindex="0" aria-labelledby="{_e(grid.anchor)}-cap">',
           f'<table id="{_e(grid.anchor)}" class="grid"{columns}>',
           f'<caption id="{_e(grid.anchor)}-cap">{_e(grid.caption)}</caption>',
           "<thead><tr>"]
    if grid.groups:
        out.append(f'<th scope="col" rowspan="2">{_e(grid.corner)}</th>')
        out.extend(f'<th scope="colgroup" colspan="{span}" class="group">{_e(label)}</th>'
                   for label, span in grid.groups)
        out.append("</tr><tr>")
        out.extend(f'<th scope="col">{_e(col)}</th>' for col in grid.subcolumns)
    else:
        out.append(f'<th scope="col">{_e(grid.corner)}</th>')
        out.extend(f'<th scope="col">{_e(col)}</th>' for col in grid.columns)
    out.append("</tr></thead><tbody>")
    for r, (label, cells) in enumerate(grid.rows):
        tag = ""
        if grid.row_models:
            tag = f' data-model="{_e(grid.row_models[r])}"'
        elif grid.row_kernels:
            tag = f' data-kernel="{_e(grid.row_kernels[r])}"'
        if grid.row_sms:
            tag += f' data-sm="{_e(grid.row_sms[r])}"'
        out.append(f'<tr{tag}><th scope="row">{_e(label)}</th>')
        for c, cell in enumerate(cells):
            where = f"{grid.corner} {label}, {grid.columns[c]}"
            out.append(_cell(cell, f"{grid.anchor}-r{r}-c{c}", where, role, summary))
        out.append("</tr>")
    out.append("</tbody></table></div>")
    if grid.notes:
        out.append(f'<h4 class="vh" id="{_e(grid.anchor)}-notes">Notes</h4>')
        out.append(f'<ol class="notes" aria-labelledby="{_e(grid.anchor)}-notes">')
        out.extend(_note(n) for n in grid.notes)
        out.append("</ol>")
    return "\n".join(out)


def _evidence(ev: EvidenceSummary) -> str:
    out = [f"<h3>{_link(ev.path, ev.link)}</h3><ul>",
           f"<li>GPU: {_e(ev.gpu)} (sm {_e(ev.sm)}); software: {_e(ev.software)}</li>",
           f"<li>Cases: {ev.cases}"
           + (f" over {_e(', '.join(ev.kernels))}" if ev.kernels else "") + "</li>"]
    if ev.problem is not None:
        out.append(f"<li>{_e(ev.problem)}</li>")
    else:
        out.append(f"<li>Disagreements with the matrix: {ev.disagreements}; notes (the matrix "
                   f"differs from <code>can_use_*</code> only): {ev.notes}")
        if ev.examples:
            out.append("<ul>" + "".join(f"<li>{_e(x)}</li>" for x in ev.examples) + "</ul>")
        out.append("</li>")
    out.append("</ul>")
    return "\n".join(out)


def _md_code(text: str) -> str:
    """Escape text, rendering Markdown-style `code` spans as <code>."""
    pieces = text.split("`")
    return "".join(f"<code>{_e(p)}</code>" if i % 2 else _e(p) for i, p in enumerate(pieces))


def _common(common: CommonTable) -> str:
    out = ['<section id="common-configurations" aria-labelledby="common-h">',
           '<h2 id="common-h">Common configurations</h2>',
           ("<p>Each cell is the engine's answer for exactly that configuration on that GPU (the role's "
           "selection, as <code>capmatrix select</code> gives it). Hover or focus a cell for the kernel "
           "that serves it or what refused it.</p>"),
           '<dl class="legend">']
    out.extend(_legend_entry(*entry) for entry in COMMON_LEGEND)
    out.append("</dl><details><summary>Settings</summary><ul>")
    out.extend(f"<li>{_e(line)}</li>" for line in common.settings)
    out.append("</ul></details>")
    out.append(_grid(common.grid, summary=True))
    out.append("</section>")
    return "\n".join(out)


def _legend_entry(symbol: str, label: str, text: str) -> str:
    swatch = _SWATCH.get(label, label)
    return (f'<dt data-label="{_e(label)}"><span class="sw {_e(swatch)}" aria-hidden="true">'
            f"{_e(symbol)}</span> {_e(label)}</dt><dd>{_e(text)}</dd>")


#: The search box; hidden until the script runs, since without JavaScript it could not find anything.
_SEARCH = (
    '<section id="search" aria-labelledby="search-h" hidden>'
    '<h2 id="search-h" class="vh">Search</h2>'
    '<form id="search-form" role="search" autocomplete="off"><label for="search-box">'
    "Find a kernel, role, model or GPU</label> "
    '<input type="search" id="search-box" size="40" spellcheck="false" '
    'placeholder="xqa, trtllm_generation, deepseek, B200, RTX 50, sm120" '
    'aria-describedby="search-help search-summary"> <small id="search-help">Typing filters the '
    "page: the grids keep the rows and columns of what matches; an empty box shows everything."
    '</small></form><p id="search-summary" aria-live="polite"></p>'
    '<ul id="search-results"></ul></section>'
)


def _ask(doc: Document) -> str:
    return "\n".join([
        '<section id="ask" aria-labelledby="ask-h"><h2 id="ask-h">Ask</h2>',
        ("<p>Pick a kernel or a role (the engine's choice among kernels), a GPU, a model (a name or a "
        "Hugging Face id of a shipped model) and the settings; what you leave out comes from the model, "
        "else the axis default, else stays open. The answer comes from the export artifact embedded in "
        "this page (<code>capmatrix export</code>, evaluated as <code>docs/export.md</code> describes): "
        "the verdict, the rules behind it, and the smallest changes that would make it supported.</p>"),
        '<form id="ask-form" autocomplete="off"></form>',
        ("<noscript><p>The ask form needs JavaScript; <code>capmatrix query</code> and "
        "<code>capmatrix select</code> answer the same questions.</p></noscript>"),
        '<div id="ask-answer" aria-live="polite" tabindex="-1"></div>',
        f'<script type="application/json" id="ask-data">{doc.ask_data}</script>',
        "</section>",
    ])


def _filters(doc: Document) -> str:
    models = "".join(f'<option value="{_e(m)}">{_e(m)}</option>' for m in doc.models)
    roles = "".join(f'<option value="{_e(r)}">{_e(r)}</option>' for r in doc.role_names)
    return (
        '<section id="filter" aria-labelledby="filter-h"><h2 id="filter-h">Filter the grids</h2>'
        '<form id="filters"><label>Model <select id="filter-model"><option value="">all models</option>'
        f"{models}</select></label>"
        '<label>Role <select id="filter-role"><option value="">all roles</option>'
        f"{roles}</select></label></form>"
        "<p>A model hides the kernels that never support it, the other models' columns and rows; a "
        "role hides the kernels and roles it does not use.</p></section>"
    )


def render_html(doc: Document) -> str:
    """The page as one string."""
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(doc.title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
           '<a class="vh" href="#overview">Skip to the overview</a>',
           f"<header><h1>{_e(doc.title)}</h1>"]
    out.extend(f"<p>{_md_code(p)}</p>" for p in doc.intro)
    out.append("</header>")
    if doc.ask_data:
        out.append(_SEARCH)
    if doc.common is not None:
        out.append(_common(doc.common))
    if doc.ask_data:
        out.append(_ask(doc))
        out.append(_filters(doc))
    out.append('<nav aria-label="Contents"><ul>')
    if doc.common is not None:
        out.append('<li><a href="#common-configurations">Common configurations</a></li>')
    if doc.ask_data:
        out.append('<li><a href="#ask">Ask</a></li>')
    out.append('<li><a href="#overview">Overview</a></li>')
    out.extend(f'<li><a href="#{_e(k.anchor)}">{_e(k.name)}</a></li>' for k in doc.kernels)
    out.extend(f'<li><a href="#{_e(r.anchor)}">role {_e(r.name)}</a></li>' for r in doc.roles)
    if doc.evidence:
        out.append('<li><a href="#evidence">Evidence</a></li>')
    out.append("</ul></nav>")
    out.append('<section aria-labelledby="legend"><h2 id="legend">Legend</h2><dl class="legend">')
    out.extend(_legend_entry(*entry) for entry in LEGEND)
    out.append("<dt>superscript number</dt><dd>the cell's note, listed under its grid; hover or "
               "focus the cell (Tab) to see it in place, Escape closes it</dd>")
    out.append("</dl>")
    if doc.families:
        out.append(f"<p>SM families: {_e('; '.join(doc.families))}.</p>")
    out.append("</section>")
    out.append('<main><section id="overview" aria-labelledby="overview-h">'
               '<h2 id="overview-h">Overview</h2>')
    out.append("<p>Each cell links to the kernel's own grid, where every cell has its reasons.</p>")
    out.append(_grid(doc.overview))
    out.append("</section>")
    for k in doc.kernels:
        kind = k.kind + (f", {k.engine}" if k.engine else "")
        out.append(f'<section id="{_e(k.anchor)}" aria-labelledby="{_e(k.anchor)}-h" '
                   f'data-kernel="{_e(k.name)}" data-roles="{_e(" ".join(k.roles))}" '
                   f'data-models="{_e(" ".join(k.models))}">'
                   f'<h2 id="{_e(k.anchor)}-h">{_e(k.name)}</h2>')
        out.append(f"<p>{_e(k.description)}</p>")
        out.append(f"<p>Kind: {_e(kind)}. Defined at {_link(k.location, k.link)}.</p>")
        out.append(f"<p>{_e(k.fixed)}</p>")
        out.append(_grid(k.grid))
        out.append(f'<details><summary>Rules of {_e(k.name)} ({len(k.rules)})</summary>'
                   '<table class="rules"><thead><tr><th scope="col">rule</th>'
                   '<th scope="col">effect</th><th scope="col">region</th>'
                   '<th scope="col">status</th><th scope="col">defined at</th></tr></thead><tbody>')
        out.extend(
            f'<tr><th scope="row"><code>{_e(c.rule_id)}</code></th><td>{_e(c.effect)}</td>'
            f"<td><code>{_e(c.region)}</code></td>"
            f'<td class="status-{_e(c.status)}">{_e(c.verification)}</td>'
            f"<td>{_link(c.location, c.link)}</td></tr>"
            for c in k.rules
        )
        out.append("</tbody></table></details></section>")
    anchors = {k.name: k.anchor for k in doc.kernels}
    for r in doc.roles:
        out.append(f'<section id="{_e(r.anchor)}" aria-labelledby="{_e(r.anchor)}-h" '
                   f'data-role="{_e(r.name)}"><h2 id="{_e(r.anchor)}-h">Role {_e(r.name)}</h2>')
        out.append(f"<p>{_e(r.description)}</p>")
        chain = " → ".join(
            f'<a href="#{_e(anchors[c])}">{_e(c)}</a>' if c in anchors else _e(c)
            for c in r.candidates
        )
        out.append(f"<p>Candidates, first supported wins: {chain}. "
                   f"Defined at {_link(r.location, r.link)}.</p>")
        out.append(f"<p>{_e(r.fixed)} A cell names the winning kernel; — means no candidate "
                   "supports the query; a note explains cells where the winner depends on an axis "
                   "the model leaves open. Green: some candidate serves every configuration of the "
                   "cell; amber: some configurations have no candidate.</p>")
        out.extend(_grid(g, role=True) for g in r.grids)
        out.append("</section>")
    if doc.evidence:
        out.append('<section id="evidence" aria-labelledby="evidence-h">'
                   '<h2 id="evidence-h">Evidence</h2>')
        out.extend(_evidence(ev) for ev in doc.evidence)
        out.append("</section>")
    out.append("</main>")
    out.append('<div id="tip" role="tooltip" hidden></div>')
    out.append(f"<footer>{_md_code(doc.intro[0])}</footer>")
    out.append(f"<script>{_JS}</script>")
    if doc.ask_data:
        out.append(f"<script>{_ASK_JS.read_text(encoding='utf-8')}</script>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
