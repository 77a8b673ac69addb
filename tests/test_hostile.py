"""Hostile and broken input: every bad file, directory, query and command line gets a located error.

Each file in ``tests/hostile/`` is dropped into an otherwise clean matrix; the test pins every error it
causes (file, line, column, code, JSON path and the gist of the message), and checks that the CLI
reports it with exit status 2 and no traceback. Inputs too large to commit are generated here.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import SMALL_AXES, SMALL_KERNELS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import capmatrix
from capmatrix._shipped.default import set_default_matrix
from capmatrix.authoring import loader
from capmatrix.authoring._atomic import write_text_atomic
from capmatrix.authoring._validate import hints as _hints
from capmatrix.authoring._yaml import build as _yaml_build
from capmatrix.authoring._yaml import read as _yaml
from capmatrix.authoring.cli import run
from capmatrix.errors import (
    MAX_ECHO,
    CapabilityError,
    CapabilityErrors,
    CapmatrixError,
    InvalidQuery,
    did_you_mean,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

HOSTILE = Path(__file__).parent / "hostile"
#: A wall-clock guard that only stops a hang (it is not a performance assertion).
GUARD_S = 120
#: Peak traced memory allowed while refusing a small hostile document (it stays near 12 MB).
MEMORY_BOUND = 100 * 1024 * 1024

Pin = tuple[str, int | None, int | None, str, str, str]

#: file -> every error it causes: (path, line, column, code, json path, message fragment).
EXPECTED: dict[str, list[Pin]] = {
    "alias_bomb.yaml": [
        ("caps/alias_bomb.yaml", 4, 52, "E001", "kernels.lol.e[3][3][8][8][6]",
         f"document expands to more than {_yaml.MAX_NODES} nodes"),
    ],
    "bad_range.yaml": [
        ("caps/bad_range.yaml", 6, 21, "E222", "kernels.ranges.rules[0].grant.sm",
         "'>= eighty' is neither a family of 'sm' nor a range"),
        ("caps/bad_range.yaml", 11, 21, "E223", "kernels.ranges.rules[1].grant.sm",
         "range '[140, 130)' is empty"),
    ],
    "binary_and_date.yaml": [
        ("caps/binary_and_date.yaml", 3, 18, "E103", "models.when.description",
         "b'hello' is not of type 'string'"),
        ("caps/binary_and_date.yaml", 5, 13, "E103", "models.when.source",
         "datetime.date(2024, 1, 1) is not of type 'string'"),
    ],
    "both_effects.yaml": [
        ("caps/both_effects.yaml", 5, 9, "E100", "kernels.both.rules[0]",
         "a rule needs exactly one of 'grant' or 'exclude'"),
    ],
    "comments_only.yaml": [("caps/comments_only.yaml", 1, 1, "E001", "", "empty file")],
    "complex_key.yaml": [
        ("caps/complex_key.yaml", 2, 5, "E002", "kernels", "mapping keys must be plain strings"),
    ],
    "control_char.yaml": [
        ("caps/control_char.yaml", 3, 26, "E001", "", "character U+0007 is not allowed in YAML"),
    ],
    "cr_line_endings.yaml": [
        ("caps/cr_line_endings.yaml", 1, 9, "E001", "", "line break U+000D is not allowed"),
    ],
    "custom_tag.yaml": [
        ("caps/custom_tag.yaml", 3, 18, "E002", "kernels.included.description",
         "could not determine a constructor for the tag '!include'"),
    ],
    "deep_nesting.yaml": [
        ("caps/deep_nesting.yaml", 3, 47, "E001", "", f"nesting deeper than {_yaml.MAX_DEPTH} levels"),
    ],
    "duplicate_key.yaml": [
        ("caps/duplicate_key.yaml", 10, 5, "E002", "kernels.dup.description",
         "duplicate key 'description' (first defined on line 3)"),
    ],
    "duplicate_rule_id.yaml": [
        ("caps/kernels/test.yaml", 5, 13, "E220", "kernels.xqa.rules[0].id",
         "rule id 'xqa.hmma' is already used at caps/duplicate_rule_id.yaml:5"),
    ],
    "empty.yaml": [("caps/empty.yaml", 1, 1, "E001", "", "empty file")],
    "line_separator.yaml": [
        ("caps/line_separator.yaml", 3, 40, "E001", "", "line break U+2028 is not allowed"),
    ],
    "escape_sequences.yaml": [
        ("caps/escape_sequences.yaml", 3, 3, "E002", "kernels", "key: control character U+001B in a string"),
        ("caps/escape_sequences.yaml", 4, 18, "E002", "kernels['\\x1b[2J\\x1b[31mxqa'].description",
         "control character U+001B in a string"),
        ("caps/escape_sequences.yaml", 8, 17, "E002", "kernels['\\x1b[2J\\x1b[31mxqa'].rules[0].reason",
         "control character U+0007 in a string"),
    ],
    "long_integer.yaml": [
        ("caps/long_integer.yaml", 6, 21, "E002", "kernels.big.rules[0].grant.sm",
         "cannot read this value: number too long"),
        ("caps/long_integer.yaml", 11, 21, "E002", "kernels.big.rules[1].grant.sm",
         f"integer out of range (more than {_yaml.MAX_INT_BITS} bits)"),
    ],
    "long_values.yaml": [
        ("caps/long_values.yaml", 6, 28, "E222", "kernels.longs.rules[0].grant.attention",
         f"{'g' * MAX_ECHO!r}... (5000 characters) is not one of: mha, gqa, mla"),
        ("caps/long_values.yaml", 12, 5, "E101", f"kernels.keys[{'k' * MAX_ECHO!r}... (1000 characters)]",
         f"unknown key {'k' * MAX_ECHO!r}... (1000 characters)"),
        ("caps/long_values.yaml", 26, 17, "E103", "kernels.states.rules[0].status",
         f"{'s' * MAX_ECHO!r}... (2000 characters) is not one of ['verified'"),
    ],
    "merge_key.yaml": [
        ("caps/merge_key.yaml", 11, 5, "E002", "kernels.derived", "merge keys ('<<') are not supported"),
    ],
    "multi_document.yaml": [
        ("caps/multi_document.yaml", 5, 1, "E001", "", "YAML syntax error: but found another document"),
    ],
    "non_utf8.yaml": [("caps/non_utf8.yaml", 3, 21, "E001", "", "not UTF-8 (byte 0xe9)")],
    "nul_byte.yaml": [
        ("caps/nul_byte.yaml", 3, 25, "E001", "", "character U+0000 is not allowed in YAML"),
    ],
    "null_sections.yaml": [
        ("caps/null_sections.yaml", 1, 9, "E103", "kernels", "None is not of type 'object'"),
        ("caps/null_sections.yaml", 2, 9, "E103", "models", "None is not of type 'object'"),
    ],
    "python_name_tag.yaml": [
        ("caps/python_name_tag.yaml", 3, 18, "E002", "kernels.evil.description",
         "tag 'tag:yaml.org,2002:python/name:os.system'"),
    ],
    "python_tag.yaml": [
        ("caps/python_tag.yaml", 7, 17, "E002", "kernels.evil.rules[0].reason",
         "tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed"),
    ],
    "scalar_document.yaml": [
        ("caps/scalar_document.yaml", 1, 1, "E103", "",
         "a capability file is a mapping of sections, not a string"),
    ],
    "set_tag.yaml": [
        ("caps/set_tag.yaml", 4, 17, "E002", "roles.gen.candidates",
         "tag 'tag:yaml.org,2002:set' is not allowed"),
    ],
    "tab_indent.yaml": [("caps/tab_indent.yaml", 3, 1, "E001", "", "tab used for indentation")],
    "top_level_list.yaml": [
        ("caps/top_level_list.yaml", 1, 1, "E103", "",
         "a capability file is a mapping of sections, not a list"),
    ],
    "unclosed_bracket.yaml": [
        ("caps/unclosed_bracket.yaml", 6, 1, "E001", "",
         "YAML syntax error: expected ',' or '}', but got '<stream end>'"),
    ],
    "unknown_axis.yaml": [
        ("caps/unknown_axis.yaml", 6, 17, "E221", "kernels.typo.rules[0].grant.smm",
         "unknown axis 'smm'"),
    ],
    "unknown_keys.yaml": [
        ("caps/unknown_keys.yaml", 4, 5, "E101", "kernels.extra.rulez", "unknown key 'rulez'"),
        ("caps/unknown_keys.yaml", 11, 9, "E101", "kernels.extra.rules[0].note", "unknown key 'note'"),
    ],
    "unknown_value.yaml": [
        ("caps/unknown_value.yaml", 6, 21, "E222", "kernels.vals.rules[0].grant.sm",
         "95 is not a known value of axis 'sm'"),
        ("caps/unknown_value.yaml", 6, 36, "E222", "kernels.vals.rules[0].grant.attention",
         "'gqq' is not one of: mha, gqa, mla"),
        ("caps/unknown_value.yaml", 6, 52, "E222", "kernels.vals.rules[0].grant.kv[1]",
         "'fp4' is not one of: bf16, fp8"),
    ],
    "utf16.yaml": [("caps/utf16.yaml", 1, 1, "E001", "", "not UTF-8 (byte 0xff)")],
    "wrong_types.yaml": [
        ("caps/wrong_types.yaml", 3, 18, "E103", "kernels.typed.description",
         "42 is not of type 'string'"),
        ("caps/wrong_types.yaml", 4, 11, "E103", "kernels.typed.kind",
         "['kernel'] is not one of ['kernel', 'gate']"),
        ("caps/wrong_types.yaml", 10, 17, "E103", "kernels.typed.rules[0].status",
         "'maybe' is not one of ['verified', 'derived', 'read_from_code', 'untested', 'known_issue']"),
    ],
    "yes_no_bool.yaml": [
        ("caps/yes_no_bool.yaml", 6, 35, "E222", "kernels.norway.rules[0].grant.spec_dec",
         "False is not one of: none, one_model"),
    ],
    "yaml11_integers.yaml": [
        ("caps/yaml11_integers.yaml", 6, 21, "E002", "kernels.sexagesimal.rules[0].grant.sm",
         "'1:30' is a YAML 1.1 integer form (read as 90)"),
        ("caps/yaml11_integers.yaml", 6, 37, "E002", "kernels.sexagesimal.rules[0].grant.head_dim",
         "'0x80' is a YAML 1.1 integer form (read as 128)"),
        ("caps/yaml11_integers.yaml", 11, 21, "E002", "kernels.sexagesimal.rules[1].grant.sm",
         "'9_0' is a YAML 1.1 integer form (read as 90)"),
        ("caps/yaml11_integers.yaml", 11, 32, "E002", "kernels.sexagesimal.rules[1].grant.beam",
         "'04' is a YAML 1.1 integer form (read as 4)"),
    ],
    "range_digits.yaml": [
        ("caps/range_digits.yaml", 6, 21, "E225", "kernels.digits.rules[0].grant.sm",
         "only ASCII digits and spaces are read in a range"),
        ("caps/range_digits.yaml", 11, 21, "E225", "kernels.digits.rules[1].grant.sm",
         "number of 5000 digits is out of range"),
    ],
}

#: Hints that must accompany some errors (the advice is the point of the message).
EXPECTED_HINTS = {
    "duplicate_key.yaml": "YAML would silently keep only the last one",
    "python_tag.yaml": "only plain YAML is accepted",
    "tab_indent.yaml": "YAML indents with spaces only",
    "non_utf8.yaml": "save the file as UTF-8",
    "unknown_axis.yaml": "did you mean 'sm'?",
    "unknown_keys.yaml": "did you mean 'rules'?",
    "yes_no_bool.yaml": "quote the word",
    "alias_bomb.yaml": "each alias (*name) copies its anchor's whole value",
    "yaml11_integers.yaml": "write the decimal number (90), or quote it if text is meant",
    "range_digits.yaml": "write the digits 0-9",
}


# --------------------------------------------------------------------------------------------------
# helpers


@pytest.fixture(autouse=True)
def _guard() -> Iterator[None]:
    """Fail (rather than hang) when one test runs past GUARD_S; a generous stop, not a benchmark."""

    def expire(_signum: int, _frame: object) -> None:
        msg = f"hostile-input test still running after {GUARD_S}s"
        raise TimeoutError(msg)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(GUARD_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def caps(write_matrix: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean small matrix at ./caps (the working directory is its parent)."""
    root = write_matrix()
    monkeypatch.chdir(root.parent)
    return root


def add(root: Path, name: str) -> None:
    """Copy the hostile file ``name`` into the matrix, byte for byte."""
    shutil.copyfile(HOSTILE / name, root / name)


def errors_of(path: str | Path) -> tuple[CapabilityError, ...]:
    with pytest.raises(CapabilityErrors) as info:
        capmatrix.load(path)
    return info.value.errors


def pins(errors: tuple[CapabilityError, ...]) -> list[tuple[str, int | None, int | None, str, str]]:
    return [(e.path, e.line, e.column, e.code, e.json_path) for e in errors]


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def only_error(path: str | Path) -> CapabilityError:
    errors = errors_of(path)
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


# --------------------------------------------------------------------------------------------------
# the committed corpus


def test_every_corpus_file_is_pinned() -> None:
    on_disk = sorted(p.name for p in HOSTILE.iterdir() if p.is_file())
    assert on_disk == sorted(EXPECTED)


def test_the_base_matrix_is_clean(caps: Path) -> None:
    assert list(capmatrix.iter_problems(caps)) == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_gives_exact_located_errors(caps: Path, name: str) -> None:
    add(caps, name)
    errors = errors_of("caps")
    expected = EXPECTED[name]
    assert pins(errors) == [pin[:5] for pin in expected]
    for error, pin in zip(errors, expected, strict=True):
        assert pin[5] in error.message
        assert isinstance(error, CapmatrixError)
        assert str(error).startswith(error.location + ": ")
    if name in EXPECTED_HINTS:
        assert any(EXPECTED_HINTS[name] in (e.hint or "") for e in errors)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_iter_problems_matches_load(caps: Path, name: str) -> None:
    add(caps, name)
    assert pins(tuple(capmatrix.iter_problems("caps"))) == [pin[:5] for pin in EXPECTED[name]]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_cli_validate_exit_2(caps: Path, name: str) -> None:
    add(caps, name)
    code, out, err = cli("validate", "caps")
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    for path, line, column, _code, _json_path, fragment in EXPECTED[name]:
        location = ":".join(str(p) for p in (path, line, column) if p is not None)
        assert f"{location}: " in err
        assert fragment in err
    count = len(EXPECTED[name])
    assert err.splitlines()[-1].startswith(f"capmatrix: {count} problem")
    assert not any(ord(c) < 32 and c != "\n" for c in err)  # no terminal control sequences


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_cli_validate_json(caps: Path, name: str) -> None:
    add(caps, name)
    code, out, _err = cli("validate", "caps", "--json")
    assert code == 2
    data = json.loads(out)
    assert data["ok"] is False
    got = [(p["path"], p["line"], p["column"], p["code"], p["json_path"]) for p in data["problems"]]
    assert got == [pin[:5] for pin in EXPECTED[name]]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_cli_query_exit_2(caps: Path, name: str) -> None:
    add(caps, name)
    code, out, err = cli("query", "xqa", "--matrix", "caps", "--sm", "90")
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    first = EXPECTED[name][0]
    assert ":".join(str(p) for p in first[:3] if p is not None) in err


@pytest.mark.parametrize("name", ["alias_bomb.yaml", "deep_nesting.yaml"])
def test_small_bombs_stay_small_in_memory(name: str) -> None:
    text = (HOSTILE / name).read_text(encoding="utf-8")
    tracemalloc.start()
    try:
        with pytest.raises(CapabilityErrors):
            _yaml.read_text(text, name)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND


def test_alias_bomb_expands_at_most_max_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder stops after MAX_NODES nodes whatever the document would expand to."""
    built = 0
    original = _yaml_build._Builder.build

    def counting(self: Any, node: Any, path: Any) -> Any:
        nonlocal built
        built += 1
        return original(self, node, path)

    monkeypatch.setattr(_yaml_build._Builder, "build", counting)
    with pytest.raises(CapabilityErrors):
        _yaml.read_text((HOSTILE / "alias_bomb.yaml").read_text(encoding="utf-8"), "bomb")
    assert built == _yaml.MAX_NODES + 1


def test_aliases_of_a_long_string_are_bounded(caps: Path) -> None:
    """Aliases multiplying a long string (and every message quoting it) stop at MAX_TEXT_CHARS."""
    long_name = "a" * 100_000
    (caps / "roles.yaml").write_text(
        f"roles:\n  r:\n    description: &a {long_name}\n    candidates: [{', '.join(['*a'] * 100)}]\n",
        encoding="utf-8",
    )
    error = only_error("caps")
    assert (error.path, error.line, error.column, error.code) == ("caps/roles.yaml", 3, 18, "E001")
    assert error.message == (
        f"document expands to more than {_yaml.MAX_TEXT_CHARS} characters of text (alias bomb?)"
    )
    assert error.json_path == f"roles.r.candidates[{_yaml.MAX_TEXT_CHARS // len(long_name) - 1}]"


def test_many_typos_against_many_names_cost_a_bounded_number_of_guesses(
    caps: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5k unknown axes against 500 declared ones: every error is kept, guesses stop at the budget."""
    guesses = 0
    real = did_you_mean  # what the loader calls until the patch below

    def counting(word: str, choices: Any) -> str | None:
        nonlocal guesses
        guesses += 1
        return real(word, choices)

    monkeypatch.setattr(_hints, "did_you_mean", counting)
    monkeypatch.setattr(_hints, "MAX_SUGGESTIONS", 50)
    axes = "".join(f"  a{i}: {{type: bool, description: d}}\n" for i in range(500))
    (caps / "axes.yaml").write_text("axes:\n" + axes, encoding="utf-8")
    typos = ", ".join(f"zz{i}: true" for i in range(5000))
    (caps / "kernels" / "test.yaml").write_text(
        "kernels:\n  k:\n    description: d\n    rules:\n      - id: k.r\n        reason: r\n"
        f"        source: s\n        status: untested\n        grant: {{{typos}}}\n",
        encoding="utf-8",
    )
    errors = errors_of("caps")
    assert len(errors) == 5000
    assert {e.code for e in errors} == {"E221"}
    assert 0 < guesses <= 50
    assert errors[-1].hint == "axes: 500 in all"
    assert sum(len(str(e)) for e in errors) < 1_000_000


def test_python_tag_runs_nothing(caps: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(os, "system", calls.append)
    add(caps, "python_tag.yaml")
    errors_of("caps")
    assert calls == []


# --------------------------------------------------------------------------------------------------
# generated inputs: too large to commit, or not plain files


def test_file_above_the_size_limit(caps: Path) -> None:
    big = caps / "huge_file.yaml"
    big.write_bytes(b"# padding\n" * (_yaml.MAX_FILE_BYTES // 10 + 1))
    error = only_error("caps")
    size = big.stat().st_size
    assert (error.path, error.line, error.column, error.code) == ("caps/huge_file.yaml", None, None, "E001")
    assert error.message == f"file is {size} bytes, above the limit of {_yaml.MAX_FILE_BYTES} bytes"


def test_file_growing_past_the_limit_after_stat(caps: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (caps / "grows.yaml").write_bytes(b"# a\n" * (_yaml.MAX_FILE_BYTES // 4 + 1))
    real_fstat = os.fstat

    def small_fstat(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        fields = list(info)
        fields[6] = 10  # st_size as it was before the file grew
        return os.stat_result(fields)

    monkeypatch.setattr(os, "fstat", small_fstat)
    error = only_error("caps")
    assert (error.path, error.line, error.code) == ("caps/grows.yaml", None, "E001")
    assert f"above the limit of {_yaml.MAX_FILE_BYTES} bytes" in error.message


@pytest.mark.parametrize("flow", [False, True])
def test_document_with_too_many_nodes(caps: Path, flow: bool) -> None:
    count = _yaml.MAX_NODES + 10
    text = "[" + "a, " * count + "]\n" if flow else "- a\n" * count
    assert len(text) < _yaml.MAX_FILE_BYTES
    (caps / "many_nodes.yaml").write_text(text, encoding="utf-8")
    error = only_error("caps")
    assert error.message == f"document has more than {_yaml.MAX_NODES} nodes"
    # node 1 is the list itself, so the refused node is item MAX_NODES (1-based)
    expected = (1, 2 + 3 * (_yaml.MAX_NODES - 1)) if flow else (_yaml.MAX_NODES, 3)
    assert (error.path, error.line, error.column, error.code) == (
        "caps/many_nodes.yaml", *expected, "E001"
    )


def test_very_deep_flow_nesting_fails_fast_without_recursion_error(caps: Path) -> None:
    (caps / "deep.yaml").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    error = only_error("caps")
    assert (error.line, error.column, error.code) == (1, _yaml.MAX_DEPTH + 1, "E001")


def test_missing_directory(tmp_path: Path) -> None:
    error = only_error(tmp_path / "nowhere")
    assert (error.path, error.line, error.code) == (str(tmp_path / "nowhere"), None, "E001")
    assert error.message == "matrix directory not found"


def test_directory_without_yaml(tmp_path: Path) -> None:
    (tmp_path / "README").write_text("no yaml here", encoding="utf-8")
    error = only_error(tmp_path)
    assert error.message == "no capability files found"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_named_yaml_does_not_hang(caps: Path) -> None:
    os.mkfifo(caps / "pipe.yaml")
    error = only_error("caps")
    assert (error.path, error.line, error.code) == ("caps/pipe.yaml", None, "E001")
    assert error.message == "not a regular file"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_as_the_matrix_root(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    error = only_error(tmp_path / "pipe")
    assert error.message == "not a directory or a file"


def test_self_referencing_symlink(caps: Path) -> None:
    (caps / "loop.yaml").symlink_to("loop.yaml")
    error = only_error("caps")
    assert (error.path, error.line, error.code) == ("caps/loop.yaml", None, "E001")
    assert error.message.startswith("cannot read file: ")
    assert "symbolic links" in error.message


def test_dangling_symlink(caps: Path) -> None:
    (caps / "gone.yaml").symlink_to("missing-target.yaml")
    error = only_error("caps")
    assert (error.path, error.code) == ("caps/gone.yaml", "E001")
    assert error.message == "cannot read file: No such file or directory"


def test_directory_symlink_loop_is_walked_once(caps: Path) -> None:
    (caps / "kernels" / "again").symlink_to("..", target_is_directory=True)
    (caps / "kernels" / "self").symlink_to(".", target_is_directory=True)
    matrix = capmatrix.load("caps")  # each real directory is read once: no duplicate kernels
    assert sorted(matrix.files) == ["caps/axes.yaml", "caps/kernels/test.yaml"]


#: What a file outside the matrix holds; no message may ever repeat it.
SECRET = "hunter2-not-for-logs"  # noqa: S105 - a marker, not a password

#: layout -> links to make (link path, target, is a directory) and every error they cause.
LINK_CASES: dict[str, tuple[list[tuple[str, str, bool]], list[Pin]]] = {
    "file, absolute target": (
        [("stolen.yaml", "{outside}/secret.yaml", False)],
        [("caps/stolen.yaml", None, None, "E001", "", "this file is a symbolic link")],
    ),
    "file, relative target": (
        [("kernels/stolen.yaml", "../../outside/secret.yaml", False)],
        [("caps/kernels/stolen.yaml", None, None, "E001", "", "this file is a symbolic link")],
    ),
    "directory, absolute target": (
        [("elsewhere", "{outside}", True)],
        [("caps/elsewhere", None, None, "E001", "", "this directory is a symbolic link")],
    ),
    "directory, relative target": (
        [("kernels/up", "../../outside", True)],
        [("caps/kernels/up", None, None, "E001", "", "this directory is a symbolic link")],
    ),
    "chain through the matrix": (
        [("a.yaml", "b.yaml", False), ("b.yaml", "{outside}/secret.yaml", False)],
        [
            ("caps/a.yaml", None, None, "E001", "", "this file is a symbolic link"),
            ("caps/b.yaml", None, None, "E001", "", "this file is a symbolic link"),
        ],
    ),
}


def _outside_dir(caps: Path) -> Path:
    outside = caps.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.yaml").write_text(f"{SECRET}\n", encoding="utf-8")
    (outside / "more.yaml").write_text(f"password: {SECRET}\n", encoding="utf-8")
    return outside


@pytest.mark.parametrize("case", sorted(LINK_CASES))
def test_links_leaving_the_matrix_are_refused_unread(caps: Path, case: str) -> None:
    outside = _outside_dir(caps)
    links, expected = LINK_CASES[case]
    for link, target, is_dir in links:
        (caps / link).symlink_to(target.format(outside=outside), target_is_directory=is_dir)
    errors = errors_of("caps")
    assert pins(errors) == [pin[:5] for pin in expected]
    for error, pin in zip(errors, expected, strict=True):
        assert error.message.startswith(pin[5])
        assert "outside the matrix directory" in error.message
    assert pins(tuple(capmatrix.iter_problems("caps"))) == pins(errors)
    for argv in (["validate", "caps"], ["validate", "caps", "--json"], ["check", "caps"],
                 ["check", "caps", "--json"], ["query", "xqa", "--matrix", "caps"],
                 ["test", "caps"]):
        code, out, err = cli(*argv)
        assert code == 2, argv
        assert SECRET not in out + err, argv
        assert "Traceback" not in err
        assert expected[0][0] in out + err, argv


def test_links_within_the_matrix_are_followed(caps: Path) -> None:
    (caps / ".spare").mkdir()
    (caps / ".spare" / "k.yaml").write_text(
        "kernels:\n  linked:\n    description: d\n    rules:\n      - id: linked.r\n"
        "        grant: {sm: 90}\n        reason: r\n        source: s\n        status: untested\n",
        encoding="utf-8",
    )
    (caps / "kernels" / "via").symlink_to("../.spare", target_is_directory=True)
    assert "linked" in capmatrix.load("caps").kernels


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans(), st.sampled_from(["", "kernels/"])),
                min_size=1, max_size=4))
def test_any_layout_of_links_loads_iff_every_link_stays_inside(
    write_matrix: Callable[..., Path], links: list[tuple[bool, bool, bool, str]]
) -> None:
    """Links (file or directory, absolute or relative, inside or outside) anywhere in the tree."""
    caps = write_matrix()
    for old in [*caps.glob("link*"), *caps.glob("kernels/link*")]:
        old.unlink()
    outside = _outside_dir(caps)
    refused = []
    for i, (is_dir, absolute, inside, where) in enumerate(links):
        spare = caps / f".spare{i}"
        spare.mkdir(exist_ok=True)
        (spare / "k.yaml").write_text(
            f"kernels:\n  linked{i}:\n    description: d\n    rules:\n      - id: linked{i}.r\n"
            "        grant: {sm: 90}\n        reason: r\n        source: s\n        status: untested\n",
            encoding="utf-8",
        )
        target = (spare if inside else outside) / ("" if is_dir else ("k.yaml" if inside else "more.yaml"))
        link = caps / f"{where}link{i}{'' if is_dir else '.yaml'}"
        link.symlink_to(target if absolute else os.path.relpath(target, link.parent),
                        target_is_directory=is_dir)
        if not inside:
            refused.append(f"{caps.as_posix()}/{where}link{i}{'' if is_dir else '.yaml'}")
    if refused:
        errors = errors_of(caps)
        assert sorted(e.path for e in errors) == sorted(refused)
        assert {e.code for e in errors} == {"E001"}
        assert all(SECRET not in str(e) and "password" not in str(e) for e in errors)
    else:
        assert {f"linked{i}" for i in range(len(links))} <= set(capmatrix.load(caps).kernels)


#: Where a generated long value goes: (file, YAML text with {v} where the value goes).
LONG_VALUE_SPOTS = {
    "enum value": ("kernels/long.yaml", ("kernels:\n  lv:\n    description: d\n    rules:\n"
                   "      - id: lv.r\n        grant: {{attention: '{v}'}}\n        reason: r\n"
                   "        source: s\n        status: untested\n")),
    "axis name": ("kernels/long.yaml", ("kernels:\n  lv:\n    description: d\n    rules:\n"
                  "      - id: lv.r\n        grant: {{'{v}': 90}}\n        reason: r\n"
                  "        source: s\n        status: untested\n")),
    "status": ("kernels/long.yaml", ("kernels:\n  lv:\n    description: d\n    rules:\n"
               "      - id: lv.r\n        grant: {{sm: 90}}\n        reason: r\n"
               "        source: s\n        status: '{v}'\n")),
    "role candidate": ("roles.yaml", "roles:\n  r:\n    description: d\n    candidates: ['{v}']\n"),
    "range": ("kernels/long.yaml", ("kernels:\n  lv:\n    description: d\n    rules:\n"
              "      - id: lv.r\n        grant: {{sm: '{v}'}}\n        reason: r\n"
              "        source: s\n        status: untested\n")),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spot=st.sampled_from(sorted(LONG_VALUE_SPOTS)), length=st.integers(1, 5_000),
       letter=st.sampled_from("abz<>-"))
def test_errors_echo_values_of_any_length_cut(
    write_matrix: Callable[..., Path], spot: str, length: int, letter: str
) -> None:
    """Whatever the length of a bad value, a message repeats at most MAX_ECHO characters of it."""
    name, text = LONG_VALUE_SPOTS[spot]
    value = letter * length
    caps = write_matrix({name: text.format(v=value)})
    errors = errors_of(caps)
    for error in errors:
        rendered = str(error)
        assert letter * (MAX_ECHO + 1) not in rendered
        assert len(rendered) < len(str(caps)) + 700
    if length > MAX_ECHO and not any(e.code == "E001" for e in errors):  # E001: YAML refused a key
        assert any(f"... ({length} characters)" in str(e) for e in errors)


@pytest.mark.parametrize("length", [MAX_ECHO, MAX_ECHO + 1, 5_000])
def test_command_line_values_of_any_length_are_cut(caps: Path, length: int) -> None:
    value = "9" * length + "x"
    code, out, err = cli("query", "xqa", "--matrix", "caps", "--sm", value)
    assert code == 2
    assert out == ""
    assert "9" * (MAX_ECHO + 1) not in err
    code, _out, err = cli("query", "k" * length, "--matrix", "caps")
    assert code == 2
    assert "k" * (MAX_ECHO + 1) not in err


def test_directory_named_like_a_yaml_file_is_walked(caps: Path) -> None:
    (caps / "odd.yaml").mkdir()
    (caps / "odd.yaml" / "broken.yaml").write_text("kernels: [\n", encoding="utf-8")
    error = only_error("caps")
    assert (error.path, error.line, error.code) == ("caps/odd.yaml/broken.yaml", 2, "E001")


def test_unreadable_file(caps: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root ignores chmod 000, so the refusal is simulated at os.open."""
    (caps / "secret.yaml").write_text("kernels: {}\n", encoding="utf-8")
    real_open = os.open

    def guarded(path: Any, flags: int, *args: Any) -> int:
        if Path(path).name == "secret.yaml":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", guarded)
    error = only_error("caps")
    assert (error.path, error.line, error.code) == ("caps/secret.yaml", None, "E001")
    assert error.message == "cannot read file: Permission denied"


def test_unreadable_directory(caps: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """os.walk's scandir failure is reported, not skipped (root ignores chmod, so it is simulated)."""
    (caps / "locked").mkdir()
    (caps / "locked" / "hidden.yaml").write_text("kernels: {}\n", encoding="utf-8")
    real_scandir = os.scandir

    def guarded(path: Any = ".") -> Any:
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", guarded)
    error = only_error("caps")
    assert (error.path, error.code) == ("caps/locked", "E001")
    assert error.message == "cannot read directory: Permission denied"


def test_too_many_files(caps: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_FILES", 3)
    for i in range(3):
        (caps / f"extra{i}.yaml").write_text("# nothing\n", encoding="utf-8")
    error = only_error("caps")
    assert (error.path, error.code) == ("caps", "E001")
    assert error.message == "more than 3 YAML files"


def test_too_many_bytes(caps: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_TOTAL_BYTES", 1000)
    (caps / "padding.yaml").write_text("# pad\n" * 200, encoding="utf-8")
    error = only_error("caps")
    assert (error.path, error.code) == ("caps", "E001")
    assert error.message == "YAML files add up to more than 1000 bytes"
    # the hint names the largest files first, so a user sees which one to look at
    assert error.hint is not None
    assert error.hint.startswith("the largest: caps/padding.yaml (1200 bytes), ")


def test_too_deep_a_directory_tree(caps: Path) -> None:
    deep = caps.joinpath(*["d"] * (loader.MAX_DIR_DEPTH + 2))
    deep.mkdir(parents=True)
    (deep / "x.yaml").write_text("kernels: {}\n", encoding="utf-8")
    error = only_error("caps")
    assert error.message == f"directories nested deeper than {loader.MAX_DIR_DEPTH} levels"
    assert error.path == "caps/" + "/".join(["d"] * loader.MAX_DIR_DEPTH)


@pytest.mark.parametrize("name", ["unknown_axis.yaml", "wrong_types.yaml", "tab_indent.yaml"])
def test_crlf_files_give_the_same_positions(caps: Path, name: str) -> None:
    crlf = (HOSTILE / name).read_bytes().replace(b"\n", b"\r\n")
    (caps / name).write_bytes(crlf)
    assert pins(errors_of("caps")) == [pin[:5] for pin in EXPECTED[name]]


def test_file_name_with_control_characters_is_printed_escaped(caps: Path) -> None:
    (caps / "\x1b[31mred.yaml").write_text("kernels: [\n", encoding="utf-8")
    error = only_error("caps")
    assert error.path == "caps/\\x1b[31mred.yaml"
    code, _out, err = cli("validate", "caps")
    assert code == 2
    assert "\x1b" not in err
    assert "caps/\\x1b[31mred.yaml:2:1: " in err


def test_single_file_as_the_matrix(tmp_path: Path) -> None:
    only = tmp_path / "lonely.yaml"
    shutil.copyfile(HOSTILE / "tab_indent.yaml", only)
    error = only_error(only)
    assert (error.path, error.line, error.column, error.code) == (only.as_posix(), 3, 1, "E001")


def test_a_one_file_matrix_cites_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """export, render and codegen name the file (as given), never ``capabilities/.``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.yaml").write_text(SMALL_AXES + SMALL_KERNELS, encoding="utf-8")
    code, out, _err = cli("export", "--matrix", "one.yaml")
    assert code == 0
    files = {r["location"]["file"] for k in json.loads(out)["kernels"].values() for r in k["rules"]}
    assert files == {"one.yaml"}
    code, out, _err = cli("codegen", "cpp", "--kernel", "xqa", "--matrix", "one.yaml")
    assert code == 0
    assert "; one.yaml:" in out
    assert "capabilities/." not in out
    code, _out, _err = cli("render", "--matrix", "one.yaml", "--out-dir", "pages")
    assert code == 0
    for page in (tmp_path / "pages").iterdir():
        text = page.read_text(encoding="utf-8")
        assert "capabilities/." not in text
        assert "one.yaml:" in text
    matrix = capmatrix.load(tmp_path / "one.yaml")
    assert matrix.show_path(str(tmp_path / "one.yaml")) == (tmp_path / "one.yaml").as_posix()


# --------------------------------------------------------------------------------------------------
# hostile queries


@pytest.fixture
def small_default(small: capmatrix.Matrix) -> Iterator[capmatrix.Matrix]:
    """Make the small matrix the default one for the test."""
    set_default_matrix(small)
    try:
        yield small
    finally:
        set_default_matrix(None)


BAD_QUERIES: list[tuple[str, Callable[[capmatrix.Matrix], object], type[Exception], str]] = [
    ("axis None", lambda m: capmatrix.KernelQuery("xqa", sm=None), InvalidQuery,  # type: ignore[arg-type]
     "axis 'sm' is None; give a value or leave the axis out"),
    ("float value", lambda m: capmatrix.KernelQuery("xqa", sm=1.5), InvalidQuery,  # type: ignore[arg-type]
     "axis 'sm' has a value of type float: 1.5; use a string, an int or a bool"),
    ("list value", lambda m: capmatrix.KernelQuery("xqa", sm=[90]), InvalidQuery,  # type: ignore[arg-type]
     "axis 'sm' has a value of type list: [90]"),
    ("huge int", lambda m: capmatrix.KernelQuery("xqa", sm=10**5000), InvalidQuery,
     "axis 'sm': integer out of range"),
    ("kernel not a string", lambda m: capmatrix.KernelQuery(10**5000), InvalidQuery,  # type: ignore[arg-type]
     "kernel must be a string, got <int too large to print>"),
    ("model not a string", lambda m: capmatrix.KernelQuery("xqa", model=["llama"]), InvalidQuery,  # type: ignore[arg-type]
     "model must be a string, got ['llama']"),
    ("unknown axis", lambda m: capmatrix.resolve(capmatrix.KernelQuery("xqa", smm=90), m),
     capmatrix.UnknownName, "unknown axis 'smm'"),
    ("unknown enum value",
     lambda m: capmatrix.resolve(capmatrix.KernelQuery("xqa", attention="gqq"), m), InvalidQuery,
     "'gqq' is not a value of axis 'attention' (mha, gqa, mla) (did you mean 'gqa'?)"),
    ("int for enum", lambda m: capmatrix.resolve(capmatrix.KernelQuery("xqa", attention=5), m),
     InvalidQuery, "5 is not a value of axis 'attention'"),
    ("string for int", lambda m: capmatrix.resolve(capmatrix.KernelQuery("xqa", sm="90"), m),
     InvalidQuery, "axis 'sm' is int; got '90'"),
    ("bool for int", lambda m: capmatrix.resolve(capmatrix.KernelQuery("xqa", sm=True), m),
     InvalidQuery, "axis 'sm' is int; got True"),
    ("int for bool", lambda m: capmatrix.resolve(capmatrix.KernelQuery("xqa", causal=1), m),
     InvalidQuery, "axis 'causal' is bool; got 1"),
    ("unknown kernel", lambda m: capmatrix.resolve(capmatrix.KernelQuery("xqb"), m),
     capmatrix.UnknownName, "unknown kernel 'xqb'"),
    ("unknown model", lambda m: capmatrix.resolve(capmatrix.KernelQuery("xqa", model="lama"), m),
     capmatrix.UnknownName, "unknown model 'lama'"),
    ("no kernel", lambda m: capmatrix.resolve(capmatrix.KernelQuery(None, sm=90), m), InvalidQuery,
     "the query names no kernel; use select() for a role"),
    ("query None", lambda m: capmatrix.resolve(None, m), InvalidQuery,  # type: ignore[arg-type]
     "expected a KernelQuery, got NoneType: None"),
    ("query a string", lambda m: capmatrix.resolve("xqa", m), InvalidQuery,  # type: ignore[arg-type]
     "expected a KernelQuery, got str: 'xqa'"),
    ("query unhashable", lambda m: capmatrix.resolve({"sm": 90}, m), InvalidQuery,  # type: ignore[arg-type]
     "expected a KernelQuery, got dict"),
    ("matrix a path", lambda m: capmatrix.resolve(capmatrix.KernelQuery("xqa"), "caps"),  # type: ignore[arg-type]
     InvalidQuery, "expected a Matrix from capmatrix.load(), got str"),
    ("unknown role", lambda m: capmatrix.select("generation", capmatrix.KernelQuery(sm=90), m),
     capmatrix.UnknownName, "unknown role 'generation'"),
    ("role None", lambda m: capmatrix.select(None, capmatrix.KernelQuery(sm=90), m),  # type: ignore[arg-type]
     InvalidQuery, "role must be a string, got NoneType: None"),
    ("role unhashable", lambda m: capmatrix.select(["gen"], capmatrix.KernelQuery(sm=90), m),  # type: ignore[arg-type]
     InvalidQuery, "role must be a string, got list"),
    ("select query None", lambda m: capmatrix.select("gen", None, m),  # type: ignore[arg-type]
     InvalidQuery, "expected a KernelQuery"),
    ("select bad value", lambda m: capmatrix.select("gen", capmatrix.KernelQuery(sm="x"), m),
     InvalidQuery, "axis 'sm' is int; got 'x'"),
    ("default matrix a string", lambda m: set_default_matrix("caps"),  # type: ignore[arg-type]
     InvalidQuery, "expected a Matrix from capmatrix.load(), got str"),
]


@pytest.mark.parametrize(("label", "call", "kind", "message"), BAD_QUERIES, ids=[b[0] for b in BAD_QUERIES])
def test_bad_query_raises_a_clear_capmatrix_error(
    small_default: capmatrix.Matrix,
    label: str,
    call: Callable[[capmatrix.Matrix], object],
    kind: type[Exception],
    message: str,
) -> None:
    del label
    with pytest.raises(kind) as info:
        call(small_default)
    assert isinstance(info.value, CapmatrixError)
    assert message in str(info.value)


@pytest.mark.parametrize("use_default", [False, True])
def test_bad_queries_also_fail_through_the_default_matrix(
    small_default: capmatrix.Matrix, use_default: bool
) -> None:
    matrix = None if use_default else small_default
    capmatrix.resolve(capmatrix.KernelQuery("xqa", sm=90), matrix)  # warms the cache
    with pytest.raises(InvalidQuery, match="expected a KernelQuery"):
        capmatrix.resolve(["xqa"], matrix)  # type: ignore[arg-type]


def test_value_outside_the_universe_is_answered_not_refused(small: capmatrix.Matrix) -> None:
    r = capmatrix.resolve(capmatrix.KernelQuery("fallback", sm=2**62), small)
    assert r.verdict is capmatrix.Verdict.UNSUPPORTED
    assert r.outside == ("sm",)


def test_reload_failure_keeps_the_previous_default(
    small_default: capmatrix.Matrix, tmp_path: Path
) -> None:
    with pytest.raises(CapabilityErrors):
        capmatrix.reload(tmp_path / "nowhere")
    assert capmatrix.default_matrix() is small_default


# --------------------------------------------------------------------------------------------------
# bad command lines


BAD_ARGS: list[tuple[list[str], str]] = [
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["query"], "the following arguments are required: kernel"),
    (["query", "xqa", "--matrix", "caps", "--sm", "abc"], "--sm expects an integer, got 'abc'"),
    (["query", "xqa", "--matrix", "caps", "--sm"], "argument --sm: expected one argument"),
    (["query", "xqa", "--matrix", "caps", "--sm", "9" * 5000], "--sm expects an integer"),
    (["query", "xqa", "--matrix", "caps", "--sm", "9" * 30], "integer out of range"),
    (["query", "xqa", "--matrix", "caps", "--causal", "maybe"], "--causal expects true or false"),
    (["query", "xqa", "--matrix", "caps", "--bogus", "1"], "unrecognized arguments: --bogus 1"),
    (["query", "xqb", "--matrix", "caps"], "unknown kernel 'xqb'"),
    (["query", "xqa", "--matrix", "caps", "--model", "lama"], "unknown model 'lama'"),
    (["query", "xqa", "--matrix", "caps", "--attention", "gqq"], "did you mean 'gqa'?"),
    (["query", "xqa", "--matrix", "nowhere"], "nowhere: matrix directory not found"),
    (["query", "xqa", "--matrix", "caps/kernels/test.yaml"], "no file declares the axes"),
    (
        ["query", "xqa", "--matrix", "caps/axes.yaml"],
        "unknown kernel 'xqa'; the matrix declares no kernels\n",
    ),
    (["select", "generation", "--matrix", "caps"], "unknown role 'generation'"),
    (["validate", "nowhere"], "nowhere: matrix directory not found"),
    (["validate", "caps", "extra"], "unrecognized arguments: extra"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_ARGS, ids=[" ".join(a[0])[:40] for a in BAD_ARGS])
def test_bad_command_line_exits_2(caps: Path, argv: list[str], message: str) -> None:
    del caps
    code, _out, err = cli(*argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_unwritable_output_is_an_error_not_a_traceback(caps: Path) -> None:
    (caps.parent / "afile").write_text("not a directory\n", encoding="utf-8")
    code, _out, err = cli("render", "--matrix", "caps", "--out-dir", "afile/docs")
    assert code == 2
    assert err == "capmatrix: error: afile/docs: Not a directory\n"


def test_no_arguments_prints_usage_and_exits_2() -> None:
    code, out, _err = cli()
    assert code == 2
    assert "usage: capmatrix" in out


def test_subcommand_help_goes_to_the_given_stream(caps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    del caps
    code, out, err = cli("query", "--matrix", "caps", "--help")
    assert code == 0
    assert out.startswith("usage: capmatrix query")
    assert "--sm VALUE" in out
    assert err == ""
    assert capsys.readouterr().out == ""


def test_real_process_reports_without_traceback(caps: Path) -> None:
    add(caps, "alias_bomb.yaml")
    add(caps, "python_tag.yaml")
    (caps / "loop.yaml").symlink_to("loop.yaml")
    env = {**os.environ, "PYTHONPATH": str(Path(capmatrix.__file__).parent.parent)}
    for argv in (["validate", "caps"], ["query", "xqa", "--matrix", "caps", "--sm", "abc"]):
        proc = subprocess.run(
            [sys.executable, "-m", "capmatrix", *argv],
            capture_output=True, text=True, env=env, timeout=GUARD_S, check=False,
        )
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""
        assert "caps/alias_bomb.yaml:4:52: " in proc.stderr
        assert "caps/python_tag.yaml:7:17: " in proc.stderr
        assert "caps/loop.yaml: cannot read file: " in proc.stderr


def test_non_ascii_text_on_an_ascii_terminal(caps: Path) -> None:
    kernels = caps / "kernels" / "test.yaml"
    kernels.write_text(kernels.read_text(encoding="utf-8").replace("generic path", "générique ≥ sm80"),
                       encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(capmatrix.__file__).parent.parent),
           "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run(
        [sys.executable, "-m", "capmatrix", "query", "xqa", "--matrix", "caps", "--sm", "120",
         "--model", "llama"],
        capture_output=True, env=env, timeout=GUARD_S, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert b"g\\xe9n\\xe9rique \\u2265 sm80" in proc.stdout


def test_stdout_closed_early_is_not_a_traceback(caps: Path) -> None:
    """`capmatrix query ... | head -0` closes the pipe; the CLI must not print a traceback."""
    del caps
    env = {**os.environ, "PYTHONPATH": str(Path(capmatrix.__file__).parent.parent)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "capmatrix", "query", "xqa", "--matrix", "caps", "--sm", "90", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=GUARD_S)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert err == ""
    assert proc.returncode == 0


# --------------------------------------------------------------------------------------------------
# atomic writes: nothing half-written, nothing lost


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "docs" / "page.md"
    write_text_atomic(target, "old content\n")

    def broken_fsync(_fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomic(target, "new content that never lands\n" * 100)
    assert target.read_text(encoding="utf-8") == "old content\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["page.md"]


def test_interrupted_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "page.md"
    write_text_atomic(target, "old\n")

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(target, "new\n")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["page.md"]


def test_atomic_write_permissions(tmp_path: Path) -> None:
    """New files get 0o666 less the umask (not mkstemp's 0o600); replaced files keep their mode."""
    old_umask = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.md"
        write_text_atomic(fresh, "a\n")
        assert fresh.stat().st_mode & 0o777 == 0o644
        kept = tmp_path / "kept.md"
        kept.write_text("a\n", encoding="utf-8")
        kept.chmod(0o640)
        write_text_atomic(kept, "b\n")
        assert kept.stat().st_mode & 0o777 == 0o640
        assert kept.read_text(encoding="utf-8") == "b\n"
    finally:
        os.umask(old_umask)


def test_readers_never_see_a_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "big.md"
    versions = ["A" * 300_000 + "\n", "B" * 200_000 + "\n"]
    write_text_atomic(target, versions[0])
    stop = threading.Event()
    seen: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            text = target.read_text(encoding="utf-8")
            if text not in versions:
                seen.append(text[:20] + f"... ({len(text)} chars)")

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        for i in range(60):
            write_text_atomic(target, versions[i % 2])
    finally:
        stop.set()
        for thread in threads:
            thread.join(GUARD_S)
    assert seen == []
    assert [p.name for p in tmp_path.iterdir()] == ["big.md"]


# --------------------------------------------------------------------------------------------------
# numbers and names: YAML 1.1 integer forms, range digits, enum values, reserved axis names

YAML11_INTEGERS = st.one_of(
    st.integers(1, 2**40).map(hex),
    st.integers(1, 2**40).map(lambda n: f"0{n:o}"), st.integers(1, 2**40).map(bin),
    st.integers(10, 10**9).map(lambda n: f"{str(n)[0]}_{str(n)[1:]}"),
    st.tuples(st.integers(1, 99), st.integers(0, 59)).map(lambda t: f"{t[0]}:{t[1]:02d}"),
)


@settings(max_examples=40, deadline=None)
@given(YAML11_INTEGERS)
def test_yaml11_integer_forms_are_refused_with_a_hint(text: str) -> None:
    """Every YAML 1.1 integer spelling other than plain decimal is refused where it stands."""
    _data, smap = _yaml.read_text(f"a:\n  b: {text}\n", "f.yaml")
    (problem,) = smap.problems
    assert (problem.line, problem.column, problem.code, problem.json_path) == (2, 6, "E002", "a.b")
    assert "YAML 1.1 integer form" in problem.message
    assert "write the decimal number" in (problem.hint or "")
    assert _yaml.read_text(f"a:\n  b: '{text}'\n", "f.yaml")[0] == {"a": {"b": text}}  # quoted: text


@settings(max_examples=40, deadline=None)
@given(st.integers(-(2**62), 2**62))
def test_plain_decimal_integers_are_read(number: int) -> None:
    data, smap = _yaml.read_text(f"a: {number}\n", "f.yaml")
    assert data == {"a": number}
    assert smap.problems == ()


RANGE_TEMPLATES = [">={}", "<{}", "<={}", ">{}", "=={}", "[{}, 130)", "[80, {})", "({}, {}]"]
LOOKALIKE_DIGITS = st.text(
    alphabet=st.characters(categories=["Nd"]).filter(lambda c: not "0" <= c <= "9"),
    min_size=1, max_size=4,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(RANGE_TEMPLATES),
       st.one_of(LOOKALIKE_DIGITS, st.integers(20, 6000).map(lambda n: "9" * n),
                 st.just("9223372036854775808")))
def test_unreadable_range_numbers_are_located(caps: Path, template: str, number: str) -> None:
    """Non-ASCII digits and numbers past 64 bits in a range: one located E225, never a traceback."""
    condition = template.replace("{}", number)
    (caps / "ranges.yaml").write_text(
        "kernels:\n  r:\n    description: d\n    rules:\n      - id: r.one\n"
        f"        grant: {{sm: {json.dumps(condition, ensure_ascii=False)}}}\n        reason: r\n"
        "        source: s\n"
        "        status: untested\n",
        encoding="utf-8",
    )
    errors = errors_of("caps")
    assert [(e.path, e.line, e.column, e.code) for e in errors] == [("caps/ranges.yaml", 6, 21, "E225")]
    assert len(str(errors[0])) < 400  # the range is cut, not echoed whole


_AXES_HEAD = SMALL_AXES


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=12).filter(lambda t: not loader.ENUM_VALUE.match(t)))
def test_enum_values_that_are_not_plain_words_are_refused(caps: Path, value: str) -> None:
    """Shell metacharacters, spaces, commas, upper case, non-ASCII: E218 at the value, or a reading
    error (E001/E002/E1xx) for what YAML itself refuses; the value never validates."""
    (caps / "axes.yaml").write_text(
        _AXES_HEAD + f"  kind: {{type: enum, description: d, values: [ok, {json.dumps(value)}]}}\n",
        encoding="utf-8",
    )
    errors = errors_of("caps")
    codes = {e.code for e in errors}
    if "E218" in codes:
        e215 = next(e for e in errors if e.code == "E218")
        assert (e215.path, e215.json_path) == ("caps/axes.yaml", "axes.kind.values[1]")
        assert e215.line == _AXES_HEAD.count("\n") + 1
    else:
        assert codes & {"E001", "E002", "E211"}, [str(e) for e in errors]


@pytest.mark.parametrize("value", ["$(touch pwned)", "x y", "a,b", "GQA", "-x", "*", ">=80", "a;b", "é"])
def test_hostile_enum_values_named_in_the_issue(caps: Path, value: str) -> None:
    (caps / "axes.yaml").write_text(
        _AXES_HEAD + f"  kind: {{type: enum, description: d, values: [ok, {json.dumps(value)}]}}\n",
        encoding="utf-8",
    )
    assert [e.code for e in errors_of("caps")] == ["E218"]


@pytest.mark.parametrize("name", sorted(loader.RESERVED_AXIS_NAMES))
def test_axis_names_reserved_by_the_cli_are_refused(caps: Path, name: str) -> None:
    (caps / "axes.yaml").write_text(_AXES_HEAD + f"  {name}: {{type: bool, description: d}}\n",
                                    encoding="utf-8")
    errors = errors_of("caps")
    assert [(e.line, e.column, e.code, e.json_path) for e in errors if e.code == "E217"] == [
        (_AXES_HEAD.count("\n") + 1, 3, "E217", f"axes.{name}")
    ]
    code, _out, err = cli("query", "xqa", "--matrix", "caps", "--sm", "90")
    assert code == 2
    assert "Traceback" not in err
    assert "is reserved" in err


# --------------------------------------------------------------------------------------------------
# --out and --out-dir replace a regular file or nothing


def _special(kind: str, path: Path) -> Callable[[], bool]:
    """Make ``path`` a ``kind`` of non-regular file; return a check that it is still that, untouched."""
    if kind == "link to stdout":
        path.symlink_to("/dev/stdout")
        return lambda: path.is_symlink() and str(path.readlink()) == "/dev/stdout"
    if kind == "link to a file":
        (path.parent / "elsewhere.txt").write_text("someone's file\n", encoding="utf-8")
        path.symlink_to(path.parent / "elsewhere.txt")
        return lambda: path.is_symlink() and (path.parent / "elsewhere.txt").read_text(
            encoding="utf-8") == "someone's file\n"
    if kind == "fifo":
        os.mkfifo(path)
        return path.is_fifo
    if kind == "device":
        try:
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
        except PermissionError:
            pytest.skip("creating a device node needs CAP_MKNOD")
        return path.is_char_device
    path.mkdir()
    (path / "inside").write_text("kept\n", encoding="utf-8")
    return lambda: path.is_dir() and (path / "inside").read_text(encoding="utf-8") == "kept\n"


SPECIAL = ["link to stdout", "link to a file", "fifo", "device", "directory"]
WHAT = {"link to stdout": "a symbolic link", "link to a file": "a symbolic link", "fifo": "a FIFO",
        "device": "a character device", "directory": "a directory"}


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("command", [["export"], ["codegen", "cpp", "--kernel", "xqa"]])
def test_out_refuses_a_path_that_is_not_a_regular_file(caps: Path, kind: str, command: list[str]) -> None:
    target = caps.parent / "out.txt"
    intact = _special(kind, target)
    code, out, err = cli(*command, "--matrix", "caps", "--out", str(target))
    assert code == 2
    assert out == ""
    assert err == (f"capmatrix: error: {target}: exists and is {WHAT[kind]}, not a regular file; "
                   "remove it or choose another path\n")
    assert intact()
    assert sorted(p.name for p in caps.parent.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("page", ["support-matrix.md", "support-matrix.html"])
@pytest.mark.parametrize("check", [False, True])
def test_render_refuses_a_page_that_is_not_a_regular_file(
    caps: Path, kind: str, page: str, check: bool
) -> None:
    docs = caps.parent / "docs"
    docs.mkdir()
    intact = _special(kind, docs / page)
    code, _out, err = cli("render", "--matrix", "caps", "--out-dir", "docs",
                          *(["--check", "--with-html"] if check else []))
    assert code == 2
    assert f"docs/{page}: exists and is {WHAT[kind]}, not a regular file" in err
    assert intact()
    assert {p.name for p in docs.iterdir()} <= {page, "elsewhere.txt"}  # neither page written


def test_a_regular_out_file_is_replaced_keeping_its_mode(caps: Path) -> None:
    target = caps.parent / "out.json"
    target.write_text("old\n", encoding="utf-8")
    target.chmod(0o600)
    code, out, _err = cli("export", "--matrix", "caps", "--out", str(target))
    assert (code, out) == (0, f"wrote {target}\n")
    assert json.loads(target.read_text(encoding="utf-8"))["kernels"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
