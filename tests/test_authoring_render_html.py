"""The HTML support matrix in a real browser: headless Chromium renders the grids and the tooltip.

Skipped when Chromium is absent (install it with ``apt-get install chromium``). The page is rendered
from a small matrix into a temporary directory, so these tests do not depend on the committed docs.
"""

from __future__ import annotations

import html.parser
import importlib.util
import struct
import subprocess
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import capmatrix
from capmatrix.authoring.render import HTML_NAME, render_files

ROOT = Path(__file__).resolve().parent.parent


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshot_tool", ROOT / "tools" / "screenshot.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _load_tool()
CHROMIUM = TOOL.find_chromium()

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="headless Chromium not found (/usr/bin/chromium); apt-get install chromium to run",
    ),
]


@pytest.fixture
def page(write_matrix: Any, tmp_path: Path) -> Path:
    out = tmp_path / "docs"
    render_files(capmatrix.load(write_matrix()), out)
    return out / HTML_NAME


def dump_dom(page: Path, tmp_path: Path, fragment: str = "") -> str:
    profile = tmp_path / "profile"
    url = page.resolve().as_uri() + fragment
    cmd = TOOL.chromium_command(CHROMIUM, str(profile), url, "--dump-dom",
                                "--virtual-time-budget=2000")
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120)
    return done.stdout


class _Dom(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables = 0
        self.cells: list[tuple[dict[str, str | None], str]] = []
        self._cell: dict[str, str | None] | None = None
        self._text: list[str] = []
        self.ids: set[str] = set()
        self.tip: dict[str, str | None] | None = None
        self._in_tip = 0
        self.tip_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "table":
            self.tables += 1
        if tag == "td" and "c" in str(a.get("class", "")).split():
            self._cell, self._text = a, []
        if a.get("id") == "tip":
            self.tip = a
            self._in_tip = 1
        elif self._in_tip and tag not in {"br", "img"}:
            self._in_tip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.cells.append((self._cell, "".join(self._text)))
            self._cell = None
        if self._in_tip:
            self._in_tip -= 1

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._text.append(data)
        if self._in_tip:
            self.tip_text.append(data)


def test_grids_render_in_chromium(page: Path, tmp_path: Path) -> None:
    dom = _Dom()
    dom.feed(dump_dom(page, tmp_path))
    assert dom.tables >= 4  # overview, two kernels, the role's grids
    texts = [text for _, text in dom.cells]
    for symbol in ("✓", "✗"):
        assert any(t.startswith(symbol) for t in texts), symbol
    noted = [attrs for attrs, _ in dom.cells if attrs.get("aria-describedby")]
    assert noted
    assert {str(a["aria-describedby"]) for a in noted} <= dom.ids
    assert dom.tip is not None
    assert "hidden" in dom.tip  # closed until a cell is hovered or focused


def test_tooltip_opens_with_the_cells_note(page: Path, tmp_path: Path) -> None:
    first = _Dom()
    first.feed(page.read_text(encoding="utf-8"))
    cell = next(
        attrs for attrs, _ in first.cells
        if attrs.get("aria-describedby") and "unsupported" in str(attrs.get("class"))
    )
    dom = _Dom()
    dom.feed(dump_dom(page, tmp_path, f"#show-{cell['id']}"))
    assert dom.tip is not None
    assert "hidden" not in dom.tip
    text = " ".join("".join(dom.tip_text).split())
    assert str(cell["title"]) in text
    assert "xqa.no-mla-spec" in text
    assert "release disables it" in text  # the rule's reason
    assert "Source: test" in text


def _png_pixels(path: Path) -> tuple[int, int, bytes]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_screenshot_is_not_blank(page: Path, tmp_path: Path) -> None:
    shot = TOOL.screenshot(page, tmp_path / "page.png", size="1200,900")
    width, height, raw = _png_pixels(shot)
    assert (width, height) == (1200, 900)
    # A blank page compresses to a handful of byte values; the grids' colours and text do not.
    assert len(set(raw)) > 50
    shown = TOOL.screenshot(page, tmp_path / "tip.png", size="1200,900", only="kernel-xqa",
                            show="kernel-xqa-grid-r4-c5")
    assert len(set(_png_pixels(shown)[2])) > 50
