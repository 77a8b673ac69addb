"""The YAML reader's three routes give one answer: libyaml's events read directly (the fast route),
libyaml under the full composer, and PyYAML's pure-Python parser (the fallback without libyaml).

Each route must give the same data, positions, flags and problems, and the same errors word for word.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import test_fuzz
from hypothesis import given

import capmatrix
from capmatrix.authoring._yaml import compose as _yaml_compose
from capmatrix.authoring._yaml import fast as _yaml_fast
from capmatrix.authoring._yaml import limits as _yaml_limits
from capmatrix.authoring._yaml import read as _yaml
from capmatrix.authoring.loader import default_path
from capmatrix.errors import CapabilityErrors

if TYPE_CHECKING:
    from collections.abc import Callable

HOSTILE = Path(__file__).parent / "hostile"
LIBYAML = _yaml_limits._CParser is not None
needs_libyaml = pytest.mark.skipif(not LIBYAML, reason="PyYAML without libyaml")


def outcome(text: str) -> tuple[Any, ...]:
    """What read_text makes of ``text``: data and source map (problems as text), or the errors."""
    try:
        data, smap = _yaml.read_text(text, "doc.yaml")
    except CapabilityErrors as exc:
        return ("errors", [str(e) for e in exc.errors])
    return ("read", data, dataclasses.replace(smap, problems=()), [str(p) for p in smap.problems])


def routes(text: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[Any, ...]]:
    """The outcome of each route (the default one first)."""
    out = {"default": outcome(text)}
    with monkeypatch.context() as patch:
        patch.setattr(_yaml, "_fast_read", lambda _text, _path: None)
        out["libyaml, full"] = outcome(text)
    with monkeypatch.context() as patch:
        for reader in (_yaml_compose, _yaml_fast):  # both read with libyaml when present
            patch.setattr(reader, "_CParser", None)
        out["pure Python"] = outcome(text)
    return out


def corpus() -> list[Path]:
    return sorted([*default_path().rglob("*.yaml"), *HOSTILE.glob("*.yaml")])


def assert_agree(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    found = routes(text, monkeypatch)
    first = found["default"]
    for name, other in found.items():
        assert other == first, name


@pytest.mark.parametrize("path", corpus(), ids=lambda p: p.name)
def test_every_route_agrees_on_the_corpus(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        pytest.skip("not UTF-8: refused before parsing")
    assert_agree(text, monkeypatch)


@needs_libyaml
def test_the_shipped_matrix_takes_the_fast_route() -> None:
    for path in default_path().rglob("*.yaml"):
        assert _yaml_fast._fast_read(path.read_text(encoding="utf-8"), path.name) is not None, path


@needs_libyaml
@pytest.mark.parametrize(
    "text",
    [
        "a: &x [1, &y 2]\nb: &x 3\n",  # an anchor defined twice
        "a: *x\n",  # an undefined alias
        "a: &x 1\n&x b: 2\n",  # an anchored key
        "a: !!str 1\n",  # an explicit tag
        "a: 1\na: 2\n",  # a duplicate key
        "1: a\n",  # a key that is not a string
        'a: "\\e"\n',  # a control character
        "a: 99999999999999999999\n",  # an integer above the limit
        "",  # an empty document
        "a: 1\n---\nb: 2\n",  # two documents
        "a: [1, 2\n",  # a syntax error
        "<<: {a: 1}\n",  # a merge key
        "a: 2024-01-01\n",  # a timestamp
        "[" * 40 + "]" * 40,  # nesting past the limit
    ],
)
def test_the_fast_route_leaves_the_unusual_to_the_full_reader(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _yaml_fast._fast_read(text, "doc.yaml") is None
    assert_agree(text, monkeypatch)


@needs_libyaml
def test_the_fast_route_records_what_the_full_reader_records(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (
        "a:\n  b: [yes, 'no', 1.10, 31, ~, \"s\", '']\n  c: {d: on, e: -1.5e+3}\n  f: |\n    block\n"
        "  '': empty key\n  g:\n  - - 1\n    - x\n  h: &t yes\n  i: [*t, &s text, *s]\n"
        "  j: &m {k: &n [on, {l: 1.5}], m: *n}\n  o: *m\n"
    )
    assert _yaml_fast._fast_read(text, "doc.yaml") is not None
    assert_agree(text, monkeypatch)
    _data, smap = _yaml.read_text(text, "doc.yaml")
    on = {("a", "j", "k", 0), ("a", "j", "m", 0), ("a", "o", "k", 0), ("a", "o", "m", 0)}
    assert smap.yaml11_bools == {("a", "b", 0), ("a", "c", "d"), ("a", "h"), ("a", "i", 0), *on}
    assert smap.floats == {("a", "b", 2), ("a", "c", "e"), *{(*p[:-1], 1, "l") for p in on}}


@pytest.mark.parametrize("number", ["0x1f", "037", "0b11111", "3_1", "1:30"])
def test_yaml11_integer_forms_leave_the_fast_route(number: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The full reader refuses them (located); the fast route gives up rather than read them."""
    text = f"a:\n  b: [1, {number}]\n"
    assert _yaml_fast._fast_read(text, "doc.yaml") is None
    assert_agree(text, monkeypatch)
    _data, smap = _yaml.read_text(text, "doc.yaml")
    assert [(p.line, p.code) for p in smap.problems] == [(2, "E002")]


@test_fuzz.FUZZ
@given(test_fuzz.YAMLISH)
def test_every_route_agrees_on_yaml_like_text(text: str) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert_agree(text, monkeypatch)


@test_fuzz.FUZZ
@given(test_fuzz.matrices().flatmap(test_fuzz.text_mutations))
def test_every_route_agrees_on_mutated_matrices(files: dict[str, str | bytes]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        for content in files.values():
            raw = content if isinstance(content, bytes) else content.encode("utf-8")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            assert_agree(text, monkeypatch)


def test_without_libyaml_the_shipped_matrix_loads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    def snapshot(load: Callable[[], capmatrix.Matrix]) -> tuple[Any, ...]:
        m = load()
        return (m.files, m.axes, m.kernels, m.models, m.roles)

    with_c = snapshot(capmatrix.load)
    for reader in (_yaml_compose, _yaml_fast):  # both read with libyaml when present
        monkeypatch.setattr(reader, "_CParser", None)
    assert _yaml_fast._fast_read("a: 1\n", "doc.yaml") is None
    assert snapshot(capmatrix.load) == with_c


def test_an_outline_read_keeps_the_shallow_positions_only() -> None:
    """The loader's first read of a file keeps positions down to entries and rules; the data is whole.

    (A file the fast reader leaves to the full reader keeps every position.)
    """
    kept = total = 0
    for path in sorted((Path(__file__).resolve().parent.parent / "capabilities").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        data, full = _yaml.read_text(text, path.name)
        outlined, outline = _yaml.read_text(text, path.name, outline=True)
        assert outlined == data
        for got, every in ((outline.values, full.values), (outline.keys, full.keys)):
            shallow = {p: pos for p, pos in every.items() if len(p) <= _yaml.OUTLINE_DEPTH}
            assert shallow.items() <= got.items() <= every.items()
        kept, total = kept + len(outline.values), total + len(full.values)
    assert kept < total / 2  # a rule's conditions lie deeper


def test_an_outline_read_keeps_every_deep_flag() -> None:
    """Below the outline's depth no position is kept, but a YAML 1.1 word or a float is still
    recorded at its full path (the loader warns of both there)."""
    text = (
        "kernels:\n  k:\n    rules:\n      - id: r\n        grant: {sm: [90, 1.10], fp8: yes, x: [on, 2]}\n"
        "      - id: s\n        exclude:\n          head: [1.5]\n          deep: {a: [[no, 3.0]]}\n"
    )
    data, full = _yaml.read_text(text, "doc.yaml")
    outlined, outline = _yaml.read_text(text, "doc.yaml", outline=True)
    assert outlined == data
    assert outline.yaml11_bools == full.yaml11_bools
    assert outline.floats == full.floats
    assert ("kernels", "k", "rules", 0, "grant", "sm", 1) in outline.floats
    assert ("kernels", "k", "rules", 1, "exclude", "deep", "a", 0, 0) in outline.yaml11_bools
    assert all(len(p) <= _yaml.OUTLINE_DEPTH for p in outline.values)
