#!/usr/bin/env python3
"""Regenerate docs/support-matrix.md and docs/support-matrix.html from the capability YAML.

    python tools/render_matrix.py                # write both pages
    python tools/render_matrix.py --check        # exit 1 with a diff when the committed Markdown is stale
    python tools/render_matrix.py --with-html    # ... or the HTML page (a build output, not committed)
    python tools/render_matrix.py --matrix DIR --out-dir DIR

A thin wrapper over ``capmatrix render``; the default output directory is this checkout's docs/.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from capmatrix.authoring.cli import render_main

    sys.exit(render_main(default_out=ROOT / "docs"))
