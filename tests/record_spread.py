"""A spread of an engine's record: every n-th cell or row, written where ``compare_record`` reads it.

``make test`` compares a spread of each recorded selection (the data gate, ``capmatrix test``, which the
suite also runs once, compares every cell); ``make exhaustive`` compares every cell here too.
"""

from __future__ import annotations

import gzip
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path


def _every(cells: dict[str, Any], step: int) -> dict[str, Any]:
    return {key: cells[key] for key in sorted(cells)[::step]}


def spread(record: Path, out_dir: Path, step: int) -> Path:
    """A copy of ``record`` (same name) under ``out_dir`` keeping every ``step``-th cell of each section."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / record.name
    if record.suffix == ".gz":  # a drawn sample: a header line, then one row a line
        with gzip.open(record, "rt", encoding="utf-8") as lines:
            header, *rows = lines.read().splitlines()
        with gzip.open(out, "wt", encoding="utf-8") as written:
            written.write("\n".join([header, *rows[::step]]) + "\n")
        return out
    data = json.loads(record.read_text(encoding="utf-8"))  # a grid: sections of cells
    data["cells"] = _every(data["cells"], step)
    for section in ("checkpoint_kv", "b12x_installed"):
        if section in data:
            data[section]["cells"] = _every(data[section]["cells"], step)
    out.write_text(json.dumps(data), encoding="utf-8")
    return out
