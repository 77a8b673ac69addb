"""The support matrix as a Markdown page (GitHub tables, notes with anchors), from the page model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tabulate import tabulate

from capmatrix.authoring.render.page import COMMON_LEGEND, LEGEND, slug

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

__all__ = ["render_markdown"]


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _md_cell(cell: Cell) -> str:
    text = _md_escape(cell.text)
    if cell.note is not None:
        return f"{text} [{cell.note.number}](#{cell.note.anchor})"
    if cell.link is not None:
        return f"[{text}](#{cell.link})"
    return text


def _md_link(text: str, link: str | None) -> str:
    return f"[{text}]({link})" if link else f"`{text}`"


def _md_grid(grid: Grid) -> list[str]:
    headers = [grid.corner, *grid.columns]
    rows = [[label, *(_md_cell(c) for c in cells)] for label, cells in grid.rows]
    table = tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
    out = [f'<a id="{grid.anchor}"></a>', "", f"*{_md_escape(grid.caption)}*", "", table, ""]
    if grid.notes:
        out.append("Notes:")
        out.append("")
        for note in grid.notes:
            out.extend(_md_note(note))
    return out


def _md_citation(c: Citation) -> list[str]:
    head = f"  - {c.effect} `{c.rule_id}` ({_md_link(c.location, c.link)}; {c.verification})"
    if c.scope:
        head += f", {c.scope}"
    return [head, f"    - Reason: {c.reason}", f"    - Source: {c.source}"]


def _md_note(note: Note) -> list[str]:
    out = [f'- <a id="{note.anchor}"></a>**[{note.number}]** {note.summary}']
    for citation in note.citations:
        out.extend(_md_citation(citation))
    out.extend(f"  - {line}" for line in note.details)
    out.append("")
    return out


def render_markdown(doc: Document) -> str:
    """The Markdown page (GitHub tables, notes with anchors)."""
    out = [f"# {doc.title}", ""]
    out.extend(line for text in doc.intro for line in (text, ""))
    if doc.common is not None:
        out.extend(_md_common(doc.common))
    out.append("Legend: " + "; ".join(f"{s} {label}: {text}" for s, label, text in LEGEND) + ".")
    out.append("")
    if doc.families:
        out.append("SM families: " + "; ".join(doc.families) + ".")
        out.append("")
    out.append("Contents: [Overview](#overview) · "
               + " · ".join(f"[{k.name}](#{k.anchor})" for k in doc.kernels)
               + "".join(f" · [role {r.name}](#{r.anchor})" for r in doc.roles)
               + (" · [Evidence](#evidence)" if doc.evidence else ""))
    out.append("")
    out.extend(["## Overview", ""])
    out.extend(_md_grid(doc.overview))
    for section in doc.kernels:
        out.extend([f'<a id="{section.anchor}"></a>', "", f"## {section.name}", ""])
        kind = section.kind + (f", {section.engine}" if section.engine else "")
        out.extend([f"{section.description}", "",
                    f"Kind: {kind}. Defined at {_md_link(section.location, section.link)}.", ""])
        out.extend([section.fixed, ""])
        out.extend(_md_grid(section.grid))
        out.extend(["Rules:", ""])
        rows = [
            [f"`{c.rule_id}`", c.effect, _md_escape(c.region), c.verification,
             _md_link(c.location, c.link)]
            for c in section.rules
        ]
        out.append(tabulate(rows, headers=["rule", "effect", "region", "status", "defined at"],
                            tablefmt="github", disable_numparse=True))
        out.append("")
    for role in doc.roles:
        out.extend([f'<a id="{role.anchor}"></a>', "", f"## Role {role.name}", ""])
        out.extend([role.description, "",
                    "Candidates, first supported wins: "
                    + " → ".join(f"[{c}](#kernel-{slug(c)})" for c in role.candidates)
                    + f". Defined at {_md_link(role.location, role.link)}.", ""])
        out.extend([role.fixed, "", ("A cell names the winning kernel; — means no candidate "
                    "supports the query; a note explains cells where the winner depends on an "
                    "axis the model leaves open."), ""])
        for grid in role.grids:
            out.extend(_md_grid(grid))
    if doc.evidence:
        out.extend(['<a id="evidence"></a>', "", "## Evidence", ""])
        for ev in doc.evidence:
            out.extend(_md_evidence(ev))
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


def _md_common(common: CommonTable) -> list[str]:
    out = ['<a id="common-configurations"></a>', "", "## Common configurations", "",
           ("Each cell is the engine's answer for exactly that configuration (model, setting, GPU), "
           "from the role's selection; the note under the table gives the kernel or the refusals."), "",
           "Legend: " + "; ".join(f"{s} {label}: {text}" for s, label, text in COMMON_LEGEND) + ".", "",
           "Settings:", ""]
    out.extend(f"- {line}" for line in common.settings)
    out.append("")
    out.extend(_md_grid(common.grid))
    return out


def _md_evidence(ev: EvidenceSummary) -> list[str]:
    out = [f"### {_md_link(ev.path, ev.link)}", "",
           f"- GPU: {ev.gpu} (sm {ev.sm}); software: {ev.software}",
           f"- Cases: {ev.cases}" + (f" over {', '.join(ev.kernels)}" if ev.kernels else "")]
    if ev.problem is not None:
        out.append(f"- {ev.problem}")
    else:
        out.append(f"- Disagreements with the matrix: {ev.disagreements}; "
                   f"notes (the matrix differs from `can_use_*` only): {ev.notes}")
        out.extend(f"  - {line}" for line in ev.examples)
    out.append("")
    return out
