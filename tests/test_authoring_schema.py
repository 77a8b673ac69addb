"""The published JSON Schemas: the loader's own, wired into editors, and agreeing with check-jsonschema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from capmatrix import iter_problems
from capmatrix.authoring import schema
from capmatrix.authoring.analysis import _expect
from capmatrix.authoring.loader import EXPECT_DIR

ROOT = Path(__file__).resolve().parent.parent
CAPABILITIES = ROOT / "capabilities"
SCHEMA_DIR = ROOT / "capmatrix" / "schema"
MATRIX_SCHEMA = SCHEMA_DIR / "capabilities.schema.json"
EXPECT_SCHEMA = SCHEMA_DIR / "expect.schema.json"
MODELINE = "# yaml-language-server: $schema="

SHIPPED = sorted(CAPABILITIES.rglob("*.yaml"))
MATRIX_FILES = [p for p in SHIPPED if p.relative_to(CAPABILITIES).parts[0] != EXPECT_DIR]
EXPECT_FILES = [p for p in SHIPPED if p.relative_to(CAPABILITIES).parts[0] == EXPECT_DIR]


def _schema_for(path: Path) -> Path:
    return EXPECT_SCHEMA if path in EXPECT_FILES else MATRIX_SCHEMA


def _check_jsonschema(schema_file: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema_file),
         *map(str, files)],
        capture_output=True, text=True, check=False, timeout=120,
    )


def test_the_loader_reads_the_published_schema() -> None:
    assert schema.schema() == json.loads(MATRIX_SCHEMA.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", [MATRIX_SCHEMA, EXPECT_SCHEMA], ids=lambda p: p.name)
def test_published_schemas_are_valid_draft_2020_12(path: Path) -> None:
    Draft202012Validator.check_schema(json.loads(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(CAPABILITIES).as_posix())
def test_every_shipped_yaml_names_its_schema_on_the_first_line(path: Path) -> None:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    target = _schema_for(path)
    relative = "../" * len(path.relative_to(CAPABILITIES).parts)
    expected = f"{MODELINE}{relative}{target.relative_to(ROOT).as_posix()}"
    assert first == expected, f"{path}: make the first line {expected!r}"
    # The relative reference resolves to the schema file from the YAML file's own directory.
    assert (path.parent / first.removeprefix(MODELINE)).resolve() == target


def test_check_jsonschema_accepts_the_shipped_matrix() -> None:
    assert MATRIX_FILES
    done = _check_jsonschema(MATRIX_SCHEMA, *MATRIX_FILES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok -- validation done" in done.stdout


def test_check_jsonschema_accepts_the_shipped_expectations() -> None:
    assert EXPECT_FILES
    done = _check_jsonschema(EXPECT_SCHEMA, *EXPECT_FILES)
    assert done.returncode == 0, done.stdout + done.stderr


BROKEN_MATRIX = {
    "unknown key": "kernels:\n  k:\n    description: d\n    rulez: []\n",
    "rule without effect": (
        "kernels:\n  k:\n    description: d\n    rules:\n"
        "      - {id: k.a, reason: r, source: s, status: untested}\n"
    ),
    "bad status": (
        "kernels:\n  k:\n    description: d\n    rules:\n"
        "      - {id: k.a, grant: {}, reason: r, source: s, status: tested}\n"
    ),
    "condition as a mapping": (
        "kernels:\n  k:\n    description: d\n    rules:\n"
        "      - {id: k.a, grant: {sm: {min: 80}}, reason: r, source: s, status: untested}\n"
    ),
}


@pytest.mark.parametrize("text", BROKEN_MATRIX.values(), ids=BROKEN_MATRIX.keys())
def test_editor_and_loader_refuse_the_same_broken_file(tmp_path: Path, text: str) -> None:
    caps = tmp_path / "caps"
    (caps / "kernels").mkdir(parents=True)
    for name in ("axes.yaml", "roles.yaml", "models.yaml"):
        (caps / name).write_text((CAPABILITIES / name).read_text(encoding="utf-8"), encoding="utf-8")
    bad = caps / "kernels" / "k.yaml"
    bad.write_text(text, encoding="utf-8")
    shape = [p for p in iter_problems(caps) if p.code.startswith("E10")]
    assert shape, "the loader accepts the file's shape"
    assert all(p.path.endswith("k.yaml") for p in shape)
    done = _check_jsonschema(MATRIX_SCHEMA, bad)
    assert done.returncode == 1, done.stdout + done.stderr


BROKEN_EXPECT = {
    "unknown key": "cases:\n  - {kernel: xqa, query: {sm: 90}, expect: supported, becuase: []}\n",
    "kernel and role": "cases:\n  - {kernel: xqa, role: r, query: {}, expect: supported}\n",
    "no expect": "cases:\n  - {kernel: xqa, query: {sm: 90}}\n",
    "kernel case expects a kernel": "cases:\n  - {kernel: xqa, query: {}, expect: fmha_v2}\n",
    "because not a list": "cases:\n  - {kernel: xqa, query: {}, expect: supported, because: x}\n",
    "no cases": "description: nothing\n",
}


@pytest.mark.parametrize("text", BROKEN_EXPECT.values(), ids=BROKEN_EXPECT.keys())
def test_expect_schema_refuses_what_capmatrix_test_refuses(tmp_path: Path, text: str) -> None:
    bad = tmp_path / "cases.yaml"
    bad.write_text(text, encoding="utf-8")
    _cases, problems = _expect.load_cases(bad)
    assert problems
    done = _check_jsonschema(EXPECT_SCHEMA, bad)
    assert done.returncode == 1, done.stdout + done.stderr


def test_expect_schema_keys_are_the_case_keys() -> None:
    data = json.loads(EXPECT_SCHEMA.read_text(encoding="utf-8"))
    assert set(data["$defs"]["case"]["properties"]) == _expect._KEYS
    kernel_expect = data["$defs"]["case"]["then"]["properties"]["expect"]["enum"]
    assert set(kernel_expect) == _expect._VERDICTS
