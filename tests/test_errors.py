"""One rooted error family, and one catalogue of every code a capability error can carry."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import capmatrix
from capmatrix.errors import ERROR_CODES, MAX_ECHO, CapmatrixError, UnknownName, echo

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "capmatrix"


def _module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def test_every_code_in_the_source_is_catalogued() -> None:
    used: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        used |= set(re.findall(r'code="([A-Z]\d{3})"', path.read_text(encoding="utf-8")))
    assert used, "the scan found no code at all"
    assert sorted(used - set(ERROR_CODES)) == []


def test_the_catalogue_matches_docs_authoring() -> None:
    """docs/authoring.md documents every E-code of the catalogue, in order, under the same title."""
    text = (ROOT / "docs" / "authoring.md").read_text(encoding="utf-8")
    documented = re.findall(r"^### (E\d{3}): (.+)$", text, flags=re.MULTILINE)
    catalogued = [(code, title) for code, title in ERROR_CODES.items()
                  if code.startswith("E") and code != "E000"]
    assert documented == catalogued


@pytest.mark.parametrize("module", _module_names())
def test_every_error_class_is_in_the_family(module: str) -> None:
    """Every public error class (private ones are control flow, caught inside their module)."""
    found = importlib.import_module(module)
    for name, obj in vars(found).items():
        if name.startswith("_"):
            continue
        if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module:
            assert issubclass(obj, CapmatrixError), f"{module}.{name}"


def test_no_gpu_is_a_capmatrix_error() -> None:
    from capmatrix.authoring.probe import NoGPUError

    assert issubclass(NoGPUError, CapmatrixError)
    assert issubclass(NoGPUError, RuntimeError)
    assert capmatrix.CapmatrixError is CapmatrixError


values = st.one_of(
    st.text(), st.integers(), st.binary(), st.lists(st.text(max_size=50)),
    st.dictionaries(st.text(max_size=20), st.integers()), st.floats(), st.none(),
)


@given(values, st.integers(1, 200))
def test_echo_is_printable_bounded_and_exact_when_short(value: object, limit: int) -> None:
    shown = echo(value, limit=limit)
    assert shown.isprintable()
    if len(repr(value)) <= limit and repr(value).isprintable():
        assert shown == repr(value)
    else:
        assert len(shown) <= 10 * (limit + 2) + 40  # an escaped character takes up to 10
        if len(repr(value)) > limit + 2:
            length = len(value) if isinstance(value, str) and len(value) > limit else len(repr(value))
            assert shown.endswith(f"... ({length} characters)")


@given(st.text(min_size=MAX_ECHO + 1, max_size=10_000))
def test_unknown_names_of_any_length_are_cut(name: str) -> None:
    message = str(UnknownName("kernel", name, ["xqa", "fmha"]))
    assert name not in message
    assert f"({len(name)} characters)" in message
