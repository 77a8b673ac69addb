"""Golden tests for validation: every problem reported at once, each at the right file:line:col."""

from __future__ import annotations

import io
from typing import Any

import pytest

import capmatrix
from capmatrix.authoring.cli import run
from capmatrix.authoring.loader import default_path, iter_problems
from capmatrix.authoring.schema import schema

BROKEN = """\
kernels:
  bad:
    description: broken on purpose
    rules:
      - id: bad.one
        grant: {sm: ">=80", attention: [mha, gqq], spec_dec: no}
        reason: r
        source: s
        status: untested
      - id: bad.two
        grant: {kv: 1.10}
        reason: r
        source: s
        status: untested
        status: verified
      - id: bad.three
        exclude: {sm: sm_13x, beam: "[4, 2]", causal: 1}
        reason: r
        source: s
        status: maybe
        extra: 1
      - id: bad.one
        grant: {sm: 95, smm: 3}
        reason: r
        source: s
        status: untested
roles:
  broken:
    description: refers to a kernel that does not exist
    candidates: [xqa, flashmla, xqa]
models:
  odd:
    description: bad values
    axes: {attention: gqaa, beamm: 1}
    source: s
"""

EXPECTED = [
    (6, 46, "E222", "'gqq' is not one of: mha, gqa, mla (axis 'attention')"),
    (6, 62, "E222", "False is not one of: none, one_model (axis 'spec_dec')"),
    (11, 21, "E104", "1.1 is not a condition"),
    (15, 9, "E002", "duplicate key 'status' (first defined on line 14)"),
    # bad.three has shape errors (status, extra) and its region's names and values are still checked
    (17, 23, "E222", "'sm_13x' is neither a family of 'sm' nor a range"),
    (17, 37, "E223", "range '[4, 2]' is empty"),
    (17, 55, "E222", "axis 'causal' is bool: use true or false, not 1"),
    (20, 17, "E103", "'maybe' is not one of"),
    (21, 9, "E101", "unknown key 'extra'"),
    (22, 13, "E220", "rule id 'bad.one' is already used"),
    (23, 21, "E222", "95 is not a known value of axis 'sm'"),
    (23, 25, "E221", "unknown axis 'smm'"),
    (30, 23, "E240", "unknown kernel 'flashmla' in role 'broken'"),
    (30, 33, "E241", "kernel 'xqa' is listed twice"),
    (34, 23, "E231", "'gqaa' is not a value of axis 'attention'"),
    (34, 29, "E230", "unknown axis 'beamm'"),
]


def test_every_problem_at_once_with_locations(write_matrix: Any) -> None:
    root = write_matrix({"kernels/bad.yaml": BROKEN})
    with pytest.raises(capmatrix.CapabilityErrors) as info:
        capmatrix.load(root)
    errors = [e for e in info.value.errors if e.path.endswith("bad.yaml")]
    got = [(e.line, e.column, e.code, e.message) for e in errors]
    assert len(got) == len(EXPECTED), "\n".join(map(str, errors))
    for (line, col, code, message), (eline, ecol, ecode, emessage) in zip(got, EXPECTED, strict=False):
        assert (line, col, code) == (eline, ecol, ecode), message
        assert emessage in message
    assert all(e.path == "caps/kernels/bad.yaml" or e.path.endswith("caps/kernels/bad.yaml")
               for e in errors)
    assert [str(p) for p in iter_problems(root)] == [str(e) for e in info.value.errors]


SHAPE_AND_NAMES = """\
kernels:
  bad:
    description: a rule with a schema error and name errors
    rules:
      - id: bad.first
        grant: {smm: 90, attention: [mha, gqq]}
        reason: r
        source: s
        status: verifed
      - id: bad.first
        grant: {sm: 90}
        reason: r
        source: s
        status: untested
      - id: bad.second
        grant: {sm: 90, attention: [mha, 7]}
        reason: r
        source: s
"""


def test_a_rule_with_shape_and_name_errors_gets_all_of_them_in_one_run(write_matrix: Any) -> None:
    """A misspelt status (schema) and an unknown axis and value (names) of one rule: one run reports all
    of them (it reported the schema's alone, the names only once that was fixed); a broken rule's id
    still counts for duplicates; a missing field leaves the rule's region to be checked."""
    root = write_matrix({"kernels/bad.yaml": SHAPE_AND_NAMES})
    problems = list(iter_problems(root))
    first = f"{problems[0].path}:5"
    assert [(p.line, p.column, p.code, p.message) for p in problems] == [
        (6, 17, "E221", "unknown axis 'smm'"),
        (6, 43, "E222", "'gqq' is not one of: mha, gqa, mla (axis 'attention')"),
        (9, 17, "E103", ("'verifed' is not one of ['verified', 'derived', 'read_from_code', 'untested', "
                        "'known_issue']")),
        (10, 13, "E220", f"rule id 'bad.first' is already used at {first}"),
        (15, 9, "E102", "'status' is a required property"),
        (16, 42, "E222", "7 is not one of: mha, gqa, mla (axis 'attention')"),
    ]
    out, err = io.StringIO(), io.StringIO()
    assert run(["validate", str(root)], out, err) == 2
    assert err.getvalue().splitlines()[-1] == "capmatrix: 6 problems in 1 file"


BROKEN_IDS = """\
kernels:
  bad:
    description: broken rules whose ids are checked, or cannot be
    rules:
      - id: bad.kept
        grant: {sm: 90}
        reason: r
        source: s
        status: untested
      - id: bad.kept
        grant: {smm: 90}
        reason: r
        source: s
        status: nope
      - id: Not An Id
        grant: {smm: 90}
        reason: r
        source: s
        status: untested
      - [not, a, rule]
"""


def test_broken_rules_ids_count_where_they_are_sound(write_matrix: Any) -> None:
    """A broken rule's sound id is checked for duplicates; a malformed id is the shape's error alone (and
    its region still checked); a rule that is no mapping is the shape's error alone."""
    root = write_matrix({"kernels/bad.yaml": BROKEN_IDS})
    got = [(p.line, p.code) for p in iter_problems(root) if p.path.endswith("bad.yaml")]
    assert got == [(10, "E220"), (11, "E221"), (14, "E103"), (15, "E103"), (16, "E221"),
                   (20, "E103"), (20, "E103")]


def test_hints_for_yaml_surprises(write_matrix: Any) -> None:
    root = write_matrix({"kernels/bad.yaml": BROKEN})
    problems = {(p.line, p.column): p for p in iter_problems(root)}
    assert "quote the word" in (problems[(6, 62)].hint or "")
    assert "1.10" in (problems[(11, 21)].hint or "")
    assert problems[(6, 46)].hint == "did you mean 'gqa'?"
    assert problems[(23, 25)].hint == "did you mean 'sm'?"


def test_rendered_error_uses_compiler_format(write_matrix: Any) -> None:
    root = write_matrix({"kernels/bad.yaml": BROKEN})
    text = str(capmatrix.CapabilityErrors(list(iter_problems(root))))
    first = text.splitlines()[0]
    assert first.endswith(
        "kernels/bad.yaml:6:46: kernels.bad.rules[0].grant.attention[1]: 'gqq' is not one of: "
        "mha, gqa, mla (axis 'attention') (did you mean 'gqa'?)"
    )
    assert text.splitlines()[-1] == "capmatrix: 16 problems in 1 file"


@pytest.mark.parametrize(
    ("files", "code", "message"),
    [
        ({"axes.yaml": "axes:\n  sm: {type: int, description: x}\n"}, "E210", "needs 'values'"),
        (
            {"axes.yaml": "axes:\n  a: {type: enum, description: x, values: [x, x]}\n"},
            "E211",
            "duplicate value 'x'",
        ),
        (
            {"axes.yaml": "axes:\n  a: {type: int, description: x, values: [1], default: 2}\n"},
            "E213",
            "default 2 is not a value",
        ),
        (
            {"axes.yaml": "axes:\n  a: {type: int, description: x, values: [1],"
             " families: {f: [1, 3]}}\n"},
            "E212",
            "does not declare: [3]",
        ),
        ({"more.yaml": "axes:\n  b: {type: bool, description: y}\n"}, "E200", "declared again"),
    ],
)
def test_axis_problems(write_matrix: Any, files: dict[str, str], code: str, message: str) -> None:
    root = write_matrix(files)
    problems = list(iter_problems(root))
    assert any(p.code == code and message in p.message for p in problems), problems


def test_missing_directory() -> None:
    with pytest.raises(capmatrix.CapabilityErrors) as info:
        capmatrix.load("/nonexistent/capabilities")
    assert info.value.errors[0].message == "matrix directory not found"


def test_no_axes_file(write_matrix: Any, tmp_path: Any) -> None:
    root = write_matrix(base=False, files={"k.yaml": "models:\n  m: {description: d, axes: {}, "
                                                       "source: s}\n"})
    problems = list(iter_problems(root))
    assert [p.message for p in problems] == ["no file declares the axes"]


def test_expect_dir_is_not_matrix_data(write_matrix: Any) -> None:
    root = write_matrix({"expect/cases.yaml": "cases: []\n"})
    assert list(iter_problems(root)) == []


def test_schema_is_valid_draft_2020_12() -> None:
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(schema())


def test_schema_enums_match_python_enums() -> None:
    rule = schema()["$defs"]["rule"]["properties"]
    assert rule["status"]["enum"] == [str(s) for s in capmatrix.Status]
    axis = schema()["$defs"]["axis"]["properties"]
    assert axis["type"]["enum"] == [str(t) for t in capmatrix.AxisType]


def test_shipped_matrix_is_valid() -> None:
    assert list(iter_problems()) == []
    matrix = capmatrix.load()
    assert (default_path() / "axes.yaml").is_file()
    assert set(matrix.axes) >= {"sm", "attention", "spec_dec", "dtype", "kv_cache_dtype", "head_dim"}
    assert matrix.axes["sm"].known == (75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121)
    for rule in matrix.rules:
        assert rule.source.strip()
        assert rule.reason.strip()


def test_names_defined_twice_across_files(write_matrix: Any) -> None:
    again = (
        "kernels:\n  xqa:\n    description: again\n    rules:\n      - id: other.one\n"
        "        grant: {sm: 90}\n        reason: r\n        source: s\n        status: untested\n"
        "models:\n  llama: {description: again, axes: {}, source: s}\n"
        "roles:\n  gen: {description: again, candidates: [xqa]}\n"
    )
    root = write_matrix({"kernels/zz_again.yaml": again})
    problems = [(p.line, p.code, p.message) for p in iter_problems(root)]
    assert [(line, code) for line, code, _ in problems] == [(2, "E201"), (11, "E201"), (13, "E201")]
    assert problems[0][2].startswith("kernel 'xqa' is already defined at ")
    assert problems[1][2].startswith("model 'llama' is already defined at ")
    assert problems[2][2].startswith("role 'gen' is already defined at ")


NAMED_LIST = """\
kernels:
  named:
    description: a list named once (&heads) and reused by alias (*heads)
    rules:
      - id: named.bf16
        grant:
          sm: &sms [90, 100]
          kv: bf16
        reason: r
        source: s
        status: untested
      - id: named.fp8
        grant:
          sm: *sms
          kv: fp8
        reason: r
        source: s
        status: untested
"""


def test_an_alias_means_its_anchored_list_written_out(write_matrix: Any) -> None:
    """A list named with a YAML anchor loads as if each alias wrote it out; only positions differ."""
    named = capmatrix.load(write_matrix({"kernels/named.yaml": NAMED_LIST})).kernels["named"]
    written = NAMED_LIST.replace("&sms ", "").replace("*sms", "[90, 100]")
    plain = capmatrix.load(write_matrix({"kernels/named.yaml": written})).kernels["named"]
    assert [(r.id, r.conditions, r.location.line) for r in named.rules] == [
        (r.id, r.conditions, r.location.line) for r in plain.rules
    ]
    assert named.rules[1].conditions["sm"].text == "[90, 100]"


def test_an_error_in_a_named_list_is_reported_at_the_anchor_once_per_use(write_matrix: Any) -> None:
    """The bad value is written once, at the anchor; each use names its own path."""
    root = write_matrix({"kernels/named.yaml": NAMED_LIST.replace("[90, 100]", "[90, 95]")})
    with pytest.raises(capmatrix.CapabilityErrors) as info:
        capmatrix.load(root)
    got = [(e.line, e.column, e.json_path, e.code) for e in info.value.errors]
    assert got == [
        (7, 25, "kernels.named.rules[0].grant.sm[1]", "E222"),
        (7, 25, "kernels.named.rules[1].grant.sm[1]", "E222"),
    ]
