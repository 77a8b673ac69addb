"""Shared fixtures: write small capability matrices to a temporary directory."""

from __future__ import annotations

import atexit
import enum
import importlib
import numbers
import os
import shutil
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import file_progress
import pytest

import capmatrix
from capmatrix.authoring._heap import tune as tune_collector
from capmatrix.authoring.render import HTML_NAME, MARKDOWN_NAME, Document, build, render_html, render_markdown

# The compiled-matrix cache is on, as users run it, in a fresh directory of this process's own (child
# processes inherit it; removed at exit): a matrix is built from YAML once per content, and every edited
# copy misses the cache and goes through the loader. A command asked in process answers in a quarter of
# the time (23 ms instead of 81), which is most of the suite. CAPMATRIX_TEST_CACHE=off runs the whole
# suite with the cache off, every load through the loader; tests/test_authoring_cache.py sets its own.
if os.environ.get("CAPMATRIX_TEST_CACHE") == "off":
    os.environ["CAPMATRIX_CACHE"] = "off"
else:
    os.environ.pop("CAPMATRIX_CACHE", None)
    _CACHE_DIR = tempfile.mkdtemp(prefix="capmatrix-test-cache-")
    os.environ["CAPMATRIX_CACHE_DIR"] = _CACHE_DIR
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)

# The test processes keep the session's fixtures, matrices and memos, a heap that CPython's default
# collector thresholds walk again and again; they collect as the `capmatrix` command does
# (capmatrix/authoring/_heap.py): pytest took 459 s instead of 513 (docs/ci.md).
tune_collector()

# Sweeps (every cell of a record, every cell of a kernel) run the same lines thousands of times, and a
# whole workflow on a copy of the checkout (a recipe, a render, the gate) runs most of the package once
# more: they run untraced (``no_cover``: pytest-cov pauses tracing for their call; every ``sweep`` test
# gets it here, the workflows are marked), which halves their time under coverage; the smaller tests
# reach their lines (the report's total says what they reach).

SMALL_AXES = """\
axes:
  sm:
    type: int
    description: compute capability
    values: [80, 90, 100, 103, 120, 121]
    families: {sm_100f: [100, 103], sm_12x: [120, 121]}
  attention:
    type: enum
    description: attention type
    values: [mha, gqa, mla]
  spec_dec:
    type: enum
    description: speculative decoding
    values: [none, one_model]
  kv:
    type: enum
    description: kv cache dtype
    values: [bf16, fp8]
  beam:
    type: int
    description: beam width
    values: [1, 4]
    default: 1
  causal:
    type: bool
    description: causal mask
"""

SMALL_KERNELS = """\
kernels:
  xqa:
    description: test kernel
    rules:
      - id: xqa.hmma
        grant: {sm: ">=80", attention: [mha, gqa]}
        reason: generic path
        source: test
        status: untested
      - id: xqa.mla
        grant: {sm: sm_12x, attention: mla, kv: fp8}
        reason: mla path
        source: test
        status: untested
      - id: xqa.no-mla-spec
        exclude: {sm: sm_12x, attention: mla, spec_dec: one_model}
        reason: release disables it
        source: test
        status: known_issue
      - id: xqa.beam
        exclude: {beam: 4, attention: mha}
        reason: no beam for mha
        source: test
        status: untested
  fallback:
    description: slow path
    rules:
      - id: fallback.all
        grant: {sm: "[80, 120)"}
        reason: everywhere below 120
        source: test
        status: verified
models:
  llama:
    description: llama
    axes: {attention: gqa, kv: bf16}
    hf_model_types: [llama]
    source: test
  dsv3:
    description: deepseek
    axes: {attention: mla, kv: fp8}
    source: test
roles:
  gen:
    description: generation
    candidates: [xqa, fallback]
"""

WriteMatrix = Callable[..., Path]


#: ``make exhaustive`` (``CAPMATRIX_EXHAUSTIVE=1``): run the tests marked ``exhaustive`` too, and the
#: tests marked ``sweep`` over every cell instead of the spread (or value classes) ``make test`` uses.
EXHAUSTIVE = os.environ.get("CAPMATRIX_EXHAUSTIVE", "") not in ("", "0")


def stride(step: int) -> int:
    """Every ``step``-th cell for a ``sweep`` test in ``make test``; every cell in ``make exhaustive``."""
    return 1 if EXHAUSTIVE else step


@pytest.hookimpl(trylast=True)  # after the terminal reporter is configured
def pytest_configure(config: pytest.Config) -> None:
    # A line per test file as it finishes, instead of a wall of dots (tests/file_progress.py).
    file_progress.register(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``sweep`` tests run untraced (``no_cover``); the ``exhaustive`` ones only under ``make exhaustive``."""
    untraced = pytest.mark.no_cover
    skip = pytest.mark.skip(reason="long by nature; `make exhaustive` runs it (CAPMATRIX_EXHAUSTIVE=1)")
    for item in items:
        if item.get_closest_marker("sweep") is not None:
            item.add_marker(untraced)
        if not EXHAUSTIVE and item.get_closest_marker("exhaustive") is not None:
            item.add_marker(skip)


#: The width the suite's answers are printed at. Answers wrap at $COLUMNS
#: (capmatrix.authoring.cli._common.wrap); most tests read whole lines of an answer, so the suite pins a
#: terminal wider than any of them, and the tests of the wrapping set their own.
WIDE = "100000"


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", WIDE)


@pytest.fixture
def write_matrix(tmp_path: Path) -> WriteMatrix:
    """Write files (name -> YAML text) under a fresh matrix directory and return it."""

    def write(files: dict[str, str] | None = None, *, base: bool = True) -> Path:
        root = tmp_path / "caps"
        root.mkdir(exist_ok=True)
        contents: dict[str, str] = {}
        if base:
            contents = {"axes.yaml": SMALL_AXES, "kernels/test.yaml": SMALL_KERNELS}
        contents.update(files or {})
        for name, text in contents.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        return root

    return write


@pytest.fixture
def small(write_matrix: WriteMatrix) -> capmatrix.Matrix:
    """The small test matrix, loaded."""
    return capmatrix.load(write_matrix())


# --------------------------------------------------------------------------------------------------
# The shipped matrix's pages, built once per test process: a build takes seconds, and a Matrix and a
# Document are immutable, so every test that only reads them shares one.


@pytest.fixture(scope="session")
def shipped_matrix() -> capmatrix.Matrix:
    """The shipped matrix, loaded once per test process."""
    return capmatrix.load()


@pytest.fixture(scope="session")
def shipped_doc(shipped_matrix: capmatrix.Matrix) -> Document:
    """What the shipped matrix's pages show (``capmatrix.authoring.render.build``), built once per process."""
    return build(shipped_matrix)


@pytest.fixture(scope="session")
def shipped_pages(shipped_doc: Document) -> dict[str, str]:
    """Both pages of the shipped matrix, ``{file name: text}``, as ``render_pages`` renders them."""
    return {MARKDOWN_NAME: render_markdown(shipped_doc), HTML_NAME: render_html(shipped_doc)}


@pytest.fixture(scope="session")
def shipped_html_page(shipped_pages: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped matrix's HTML page as a file, written once per test process (it is not committed)."""
    page = tmp_path_factory.mktemp("pages") / HTML_NAME
    page.write_text(shipped_pages[HTML_NAME], encoding="utf-8")
    return page


# --------------------------------------------------------------------------------------------------
# Python values that stand for an axis value: what a caller's code may pass instead of str or int

#: ``enum.StrEnum`` exists from Python 3.11; on 3.10 the ``(str, Enum)`` mix-in stands for it.
_STR_ENUM: Any = getattr(enum, "StrEnum", None)
#: The enum factories, typed loosely: mypy reads a functional ``Enum(...)`` call as a member.
_ENUM: Any = enum.Enum
_INT_ENUM: Any = enum.IntEnum


class Word(str):
    """A plain str subclass."""

    __slots__ = ()


class Number(int):
    """A plain int subclass."""

    __slots__ = ()


class Integer:
    """Integer-like but not an int (the shape of a NumPy integer): registered as numbers.Integral."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"Integer({self.value})"


numbers.Integral.register(Integer)

try:  # NumPy is not a dependency; when it is installed, its integers are disguises too
    _NUMPY: Any = importlib.import_module("numpy")
except ImportError:
    _NUMPY = None


def disguises(value: str | int) -> list[object]:
    """``value`` as enum members, subclasses and integer-likes: each must answer as ``value`` does."""
    if isinstance(value, bool):
        return [value]  # bool cannot be subclassed
    if isinstance(value, str):
        found: list[object] = [_ENUM("M", {"V": value}, type=str)["V"], Word(value)]
        if _STR_ENUM is not None:
            found.append(_STR_ENUM("S", {"V": value})["V"])
        return found
    found = [int_enum("V", value), Number(value), Integer(value)]
    if _NUMPY is not None and -(2**63) <= value < 2**63:  # pragma: no cover - NumPy is optional
        found.append(_NUMPY.int64(value))
    return found


def str_enum(name: str, value: str) -> object:
    """A member ``name`` of a str enum with ``value`` (StrEnum where Python has it)."""
    if _STR_ENUM is None:  # pragma: no cover - Python 3.10
        return _ENUM("E", {name: value}, type=str)[name]
    return _STR_ENUM("E", {name: value})[name]


def int_enum(name: str, value: int) -> object:
    """A member ``name`` of an IntEnum with ``value``."""
    return _INT_ENUM("I", {name: value})[name]
