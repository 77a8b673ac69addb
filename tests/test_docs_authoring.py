"""docs/authoring.md: every validation code has an example, and each example prints what the doc says."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

import capmatrix
from capmatrix.authoring.cli import run

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "authoring.md"
LOADER_SOURCES = tuple(
    ROOT / "capmatrix" / "authoring" / name
    for name in ("loader.py", "_validate/values.py", "_validate/references.py", "_validate/composition.py",
                 "_yaml/read.py", "_yaml/build.py")
)
#: The codes the command line reports on a matrix that loads (``capmatrix validate``), not the loader.
CLI_CODES = frozenset(
    code for source in sorted((ROOT / "capmatrix" / "authoring" / "cli").glob("*.py"))
    for code in re.findall(r'code="(E\d{3})"', source.read_text(encoding="utf-8"))
)

_BLOCK = re.compile(r"```(yaml|text)\n(.*?)```", re.DOTALL)


def _catalogue() -> tuple[dict[str, str], list[tuple[str, dict[str, str], str]]]:
    """The base files and, per code, (code, example files by path, expected message)."""
    text = DOC.read_text(encoding="utf-8")
    body = text.split("## Validation codes", 1)[1]
    head, *sections = re.split(r"^### ", body, flags=re.MULTILINE)
    base = {}
    for kind, block in _BLOCK.findall(head):
        if kind == "yaml" and block.startswith("# capabilities/"):
            path = block.splitlines()[0][2:].strip()
            base[path] = block
    examples = []
    for section in sections:
        code = section.split(":", 1)[0].strip()
        blocks = _BLOCK.findall(section)
        # An example may change several files: each YAML block names its own on its first line.
        files = {b.splitlines()[0][2:].strip(): b for k, b in blocks if k == "yaml"}
        message = next(b for k, b in blocks if k == "text").strip()
        examples.append((code, files, message))
    return base, examples


BASE, EXAMPLES = _catalogue()


def test_every_code_the_loader_uses_is_documented() -> None:
    used = set(CLI_CODES)
    for source in LOADER_SOURCES:
        used |= set(re.findall(r'code="(E\d{3})"', source.read_text(encoding="utf-8")))
    documented = {code for code, *_ in EXAMPLES}
    assert used - {"E000"} <= documented, sorted(used - documented)
    assert [code for code, *_ in EXAMPLES] == sorted(documented)  # listed once each, in order


def test_base_matrix_is_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for path, text in BASE.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert list(capmatrix.iter_problems("capabilities")) == []


@pytest.mark.parametrize(("code", "example", "message"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_prints_what_the_doc_says(
    code: str, example: dict[str, str], message: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = {**BASE, **example}
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    problems = list(capmatrix.iter_problems("capabilities"))
    if code not in CLI_CODES:
        assert [(p.code, str(p)) for p in problems] == [(code, message)]
        return
    assert problems == []  # the loader accepts it; validate refuses it
    out, err = io.StringIO(), io.StringIO()
    assert run(["validate", "capabilities", "--json"], out, err) == 2
    assert [p["code"] for p in json.loads(out.getvalue())["problems"]] == [code]
    assert run(["validate", "capabilities"], out, err) == 2
    assert err.getvalue().splitlines() == [message, "capmatrix: 1 problem in 1 file"]
