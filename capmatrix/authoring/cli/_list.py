"""``capmatrix list kernels|gates|roles|models|axes|gpus``: what a query may name, one line each."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from capmatrix.authoring.cli._common import (
    EXIT_OK,
    add_matrix_option,
    announce_matrix,
    choose_matrix,
    print_json,
)
from capmatrix.authoring.loader import load
from capmatrix.model import format_value

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from capmatrix.matrix import Matrix

__all__ = ["LISTS", "cmd_list", "configure_list", "listing"]

#: The most characters of a description a text line shows (``--json`` has all of it).
SHOWN_DESCRIPTION = 72

Row = dict[str, object]


def _first_sentence(text: str) -> str:
    """The description's first sentence, cut to :data:`SHOWN_DESCRIPTION` characters."""
    text = " ".join(text.split())
    head = text.split(". ", 1)[0].rstrip(".")
    return head if len(head) <= SHOWN_DESCRIPTION else head[: SHOWN_DESCRIPTION - 3].rstrip() + "..."


def _kernels(matrix: Matrix, kind: str) -> list[Row]:
    return [
        {"name": k.name, "engine": k.engine, "rules": len(k.rules), "description": k.description,
         "location": str(k.location)}
        for k in sorted(matrix.kernels.values(), key=lambda k: k.name) if k.kind == kind
    ]


def _roles(matrix: Matrix) -> list[Row]:
    return [
        {"name": r.name, "candidates": list(r.candidates), "asks_first": list(r.asks_first),
         "description": r.description, "location": str(r.location)}
        for r in sorted(matrix.roles.values(), key=lambda r: r.name)
    ]


def _models(matrix: Matrix) -> list[Row]:
    return [
        {"name": m.name, "axes": {a: format_value(v) for a, v in m.axes.items()},
         "hf_ids": list(m.hf_ids), "description": m.description, "location": str(m.location)}
        for m in sorted(matrix.models.values(), key=lambda m: m.name)
    ]


def _axes(matrix: Matrix) -> list[Row]:
    return [
        {"name": a.name, "type": str(a.type), "values": [format_value(v) for v in a.known],
         "default": None if a.default is None else format_value(a.default),
         "environment": a.environment, "description": a.description}
        for a in matrix.axes.values()
    ]


def _gpus(matrix: Matrix) -> list[Row]:
    return [
        {"name": g.name, "key": g.key, "sm": g.sm, "aliases": list(g.aliases), "source": g.source,
         "location": str(g.location)}
        for g in sorted(matrix.gpus.values(), key=lambda g: (g.sm, g.name))
    ]


def _versions(matrix: Matrix) -> list[Row]:
    return [
        {"name": f"{engine} {r.version}", "engine": engine, "version": r.version, "axis": releases.axis,
         "newest": r.version == releases.newest, "date": r.date, "pins": dict(r.pins), "source": r.source,
         "location": str(r.location)}
        for engine, releases in matrix.releases.items() for r in releases.versions
    ]


#: What ``capmatrix list`` can list -> the rows of that listing.
LISTS: dict[str, Callable[[Matrix], list[Row]]] = {
    "kernels": lambda m: _kernels(m, "kernel"),
    "gates": lambda m: _kernels(m, "gate"),
    "roles": _roles,
    "models": _models,
    "axes": _axes,
    "gpus": _gpus,
    "versions": _versions,
}


def _line(what: str, row: Row) -> str:
    """One row as text: the name, then what a query needs to know of it."""
    name = str(row["name"])
    if what in {"kernels", "gates"}:
        engine = f" [{row['engine']}]" if row["engine"] else ""
        return f"{name}{engine}: {row['rules']} rules; {_first_sentence(str(row['description']))}"
    if what == "roles":
        candidates = row["candidates"]
        first = row["asks_first"]
        assert isinstance(candidates, list)  # noqa: S101 - built above
        assert isinstance(first, list)  # noqa: S101 - built above
        asks = f" (asks {', '.join(first)} first)" if first else ""
        return f"{name}: {', '.join(candidates)}{asks}"
    if what == "models":
        axes = row["axes"]
        assert isinstance(axes, dict)  # noqa: S101 - built above
        return f"{name}: {' '.join(f'{a}={v}' for a, v in axes.items())}"
    if what == "axes":
        values = row["values"]
        assert isinstance(values, list)  # noqa: S101 - built above
        default = f" (default {row['default']})" if row["default"] is not None else ""
        return f"{name}: {row['type']} {', '.join(values)}{default}"
    if what == "versions":
        pins = row["pins"]
        assert isinstance(pins, dict)  # noqa: S101 - built above
        pinned = ", ".join(f"{k} {v[:12] if k == 'sha256' else v}" for k, v in pins.items())
        newest = " (newest, the default)" if row["newest"] else ""
        return f"{name}{newest}: {pinned or 'no pins'}" + (f"; {row['date']}" if row["date"] else "")
    aliases = row["aliases"]
    assert isinstance(aliases, list)  # noqa: S101 - built above
    also = f" (also {', '.join(aliases)})" if aliases else ""
    return f"{name}: sm {row['sm']}{also}"


def listing(matrix: Matrix, what: str) -> list[str]:
    """The text lines of ``capmatrix list WHAT`` (a heading, then one line per entry)."""
    rows = LISTS[what](matrix)
    noun = what if len(rows) != 1 else what[:-1]
    return [f"{len(rows)} {noun}:", *(f"  {_line(what, row)}" for row in rows)]


def configure_list(parser: argparse.ArgumentParser, _argv: Sequence[str]) -> None:
    """Arguments of ``capmatrix list``."""
    parser.add_argument("what", choices=tuple(LISTS), help="what to list: " + ", ".join(LISTS))
    parser.add_argument("--json", action="store_true", help="print a JSON object, every field in full")
    add_matrix_option(parser)


def cmd_list(args: argparse.Namespace, _prepared: None, out: TextIO, err: TextIO) -> int:
    """List the kernels, gates, roles, models, axes, GPUs or engine releases of a matrix; exit 0."""
    choice = choose_matrix(args.matrix)
    announce_matrix(choice, err)
    matrix = load(choice.path)
    if args.json:
        print_json({args.what: LISTS[args.what](matrix)}, out)
    else:
        out.write("\n".join(listing(matrix, args.what)) + "\n")
    return EXIT_OK
