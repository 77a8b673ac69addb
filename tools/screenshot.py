#!/usr/bin/env python3
"""Screenshot docs/support-matrix.html with headless Chromium (for checking the page by eye).

    python tools/screenshot.py OUT.png [--page docs/support-matrix.html] [--only SECTION_ID]
                               [--show CELL_ID] [--size 1400,1000] [--chromium /usr/bin/chromium]

``--only SECTION_ID`` shoots a copy of the page with every other section of <main> hidden (headless
Chromium does not repaint after scrolling, so this is how a section further down gets into the shot).
``--show CELL_ID`` opens the page at ``#show-CELL_ID`` so that the cell's tooltip is open in the shot
(cell ids look like ``kernel-xqa-grid-r9-c10``: grid anchor, row and column). Keep screenshots out of
the repository. The page is a build output, not committed: build it first with ``make docs``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Flags for a headless run that touches no network and no user profile.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def find_chromium(explicit: str | None = None) -> str | None:
    """The Chromium binary: ``explicit``, /usr/bin/chromium, or one on PATH."""
    if explicit:
        return explicit if Path(explicit).exists() else None
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def chromium_command(
    chromium: str, profile: str, url: str, *extra: str
) -> list[str]:
    """The command line for one headless Chromium run on ``url``."""
    return [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url]


def screenshot(
    page: Path, out: Path, *, show: str | None = None, only: str | None = None,
    size: str = "1400,1000", chromium: str | None = None, timeout: float = 120,
) -> Path:
    """Write a PNG of ``page`` to ``out``.

    :raises FileNotFoundError: when no Chromium is installed.
    :raises subprocess.CalledProcessError: when Chromium fails.
    """
    binary = find_chromium(chromium)
    if binary is None:
        raise FileNotFoundError("Chromium not found (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="capmatrix-chromium-") as profile:
        if only is not None:
            text = page.read_text(encoding="utf-8")
            hide = f"<style>main > section:not(#{only}) {{ display: none; }}</style></head>"
            page = Path(profile) / "page.html"
            page.write_text(text.replace("</head>", hide, 1), encoding="utf-8")
        url = page.resolve().as_uri() + (f"#show-{show}" if show else "")
        cmd = chromium_command(
            binary, profile, url, f"--screenshot={out.resolve()}", f"--window-size={size}",
            "--virtual-time-budget=2000",
        )
        subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)  # noqa: S603
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="PNG to write (outside the repository)")
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "support-matrix.html")
    parser.add_argument("--only", metavar="SECTION_ID", help="hide the other sections of <main>")
    parser.add_argument("--show", metavar="CELL_ID", help="open this cell's tooltip")
    parser.add_argument("--size", default="1400,1000", help="window size WIDTH,HEIGHT")
    parser.add_argument("--chromium", help="Chromium binary")
    args = parser.parse_args(argv)
    if not args.page.is_file():
        print(f"screenshot: {args.page} not found; build it with `make docs`", file=sys.stderr)
        return 2
    try:
        path = screenshot(args.page, args.out, show=args.show, only=args.only, size=args.size,
                          chromium=args.chromium)
    except FileNotFoundError as exc:
        print(f"screenshot: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"screenshot: chromium failed ({exc.returncode}): {exc.stderr.decode()[-500:]}",
              file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
