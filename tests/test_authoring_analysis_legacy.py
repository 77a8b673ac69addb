"""capmatrix compare-legacy: regions where a legacy predicate and the matrix disagree."""

from __future__ import annotations

import inspect
import io
import json
import random
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from analysis_synthetic import cells, random_matrix, supported_at
from hypothesis import given, settings
from hypothesis import strategies as st

import capmatrix
from capmatrix.authoring.analysis import LegacyError, compare_legacy, load_predicate, parse_where
from capmatrix.authoring.cli import run
from capmatrix.authoring.gate import load_legacy_checks

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import WriteMatrix

ROOT = Path(__file__).parent.parent
TRTLLM = ROOT / "examples" / "legacy" / "trtllm_release_1_2.py"
PREDICATES = Path(__file__).parent / "analysis_cases" / "legacy_predicates.py"
SEED_REGION = ("sm in {120, 121, ([122, 129]), >=130} and attention in {mha, gqa, mqa} and spec_dec=one_model"
               " and trtllm_release=1.2.1")


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------------------------------
# The TensorRT-LLM release 1.2 conditional against the trtllm_spec_dec_mode gate


def test_matrix_agrees_with_the_fixed_conditional() -> None:
    """Agreement on the SMs of the fix (and one each side); the data gate compares every cell
    (the ``legacy:`` entries of capabilities/expect/legacy.yaml, see the test below)."""
    result = compare_legacy(
        capmatrix.load(), load_predicate(f"{TRTLLM}:xqa_spec_dec_mode_after"),
        "trtllm_spec_dec_mode", where={"sm": [90, 100, 120, 121]},
    )
    assert result.agree
    assert result.calls > 0
    assert result.legacy_only == ()
    assert result.matrix_only == ()
    assert set(result.named_axes) == {"sm", "attention", "spec_dec", "attention_backend",
                                      "spec_dec_pass"}
    assert set(result.evaluated_axes) == set(result.named_axes)


@pytest.mark.no_cover  # a sweep over the shipped matrix's cells (see conftest.py)
def test_pre_fix_conditional_disagrees_exactly_on_sm12x_non_mla_one_model() -> None:
    matrix = capmatrix.load()
    result = compare_legacy(
        matrix, load_predicate(f"{TRTLLM}:xqa_spec_dec_mode_before"), "trtllm_spec_dec_mode"
    )
    assert not result.agree
    assert result.legacy_only == ()
    assert [a.description for a in result.matrix_only] == [SEED_REGION]
    area = result.matrix_only[0]
    assert area.values["sm"] == (120, 121, 122, 130)  # 122 and 130 stand for every later SM (open domain)
    assert area.values["attention"] == ("mha", "gqa", "mqa")
    assert area.values["spec_dec"] == ("one_model",)
    assert area.values["trtllm_release"] == ("1.2.1",)  # a predicate is one release's code: the newest
    assert all(area.values[a] == axis.values for a, axis in matrix.axes.items()
               if a not in {"sm", "attention", "spec_dec", "trtllm_release"})
    witness = capmatrix.KernelQuery("trtllm_spec_dec_mode", **area.witness)  # type: ignore[arg-type]
    assert capmatrix.resolve(witness, matrix=matrix)
    before = load_predicate(f"{TRTLLM}:xqa_spec_dec_mode_before")
    assert before(**area.witness) is False


def test_each_conditional_agrees_with_its_own_release() -> None:
    """The pre-fix conditional is TensorRT-LLM 1.2.0rc8's code and the fixed one 1.2.0's: each agrees with
    its release everywhere, and the comparison names the release it was made against.

    Each (conditional, release) pair is a ``legacy:`` entry of the shipped expectations, which the data
    gate compares everywhere (tests/test_authoring_cli_main.py runs the gate and requires every oracle
    to agree); here, that the entries are there, and the default release of a comparison.
    """
    matrix = capmatrix.load()
    declared, problems = load_legacy_checks(Path(matrix.root) / "expect" / "legacy.yaml")
    assert problems == []
    pairs = {(c.function, c.kernel, tuple(c.where.get("trtllm_release", ()))) for c in declared}
    for function, release in (("xqa_spec_dec_mode_before", "1.2.0rc8"), ("xqa_spec_dec_mode_after", "1.2.0"),
                              ("xqa_spec_dec_mode_after", "1.2.1")):
        entry = (f"examples/legacy/trtllm_release_1_2.py:{function}", "trtllm_spec_dec_mode", (release,))
        assert entry in pairs, entry
    newest = compare_legacy(matrix, load_predicate(f"{TRTLLM}:xqa_spec_dec_mode_after"),
                            "trtllm_spec_dec_mode", where={"sm": [120]})
    assert {a: list(v) for a, v in newest.where.items()} == {"sm": [120], "trtllm_release": ["1.2.1"]}


@pytest.mark.no_cover  # a sweep over the shipped matrix's cells (see conftest.py)
def test_cli_compare_legacy_trtllm() -> None:
    # The whole universe is test_pre_fix_conditional_disagrees_exactly_on_sm12x_non_mla_one_model's:
    # here the command's JSON over the spec-dec mode of the region.
    status, out, _ = _run("compare-legacy", f"{TRTLLM}:xqa_spec_dec_mode_before",
                          "--kernel", "trtllm_spec_dec_mode", "--json", "--where", "spec_dec=one_model")
    assert status == 1
    data = json.loads(out)
    assert data["agree"] is False
    assert data["legacy_only"] == []
    [region] = data["matrix_only"]
    assert region["region"]["sm"] == [120, 121, 122, 130]  # every SM after 121 (open domain)
    assert region["region"]["attention"] == ["mha", "gqa", "mqa"]
    assert region["region"]["spec_dec"] == ["one_model"]
    assert region["witness"]["sm"] == 120
    status, out, _ = _run("compare-legacy", f"{TRTLLM}:xqa_spec_dec_mode_after",
                          "--kernel", "trtllm_spec_dec_mode", "--where", "sm=90,120,121")
    assert status == 0
    assert "agree everywhere" in out
    status, out, _ = _run("compare-legacy", f"{TRTLLM}:xqa_spec_dec_mode_before",
                          "--kernel", "trtllm_spec_dec_mode", "--where", "sm=90,120")
    assert status == 1
    assert "legacy False, matrix supported:" in out
    assert "sm=120 and attention in {mha, gqa, mqa} and spec_dec=one_model" in out


# --------------------------------------------------------------------------------------------------
# Own fixtures over the small matrix


def test_agreement_and_kwargs_axes(small: capmatrix.Matrix) -> None:
    result = compare_legacy(small, load_predicate(f"{PREDICATES}:mla_spec_only_off_sm12x"), "xqa")
    assert result.named_axes == ("sm", "attention", "spec_dec")
    assert result.kwargs_axes == ("kv", "beam", "causal")
    assert result.evaluated_axes == ("sm", "attention", "spec_dec")
    assert not result.agree
    # The matrix grants MLA only on sm_12x with fp8 KV and takes MHA away with beam 4.
    legacy_only = {a.description for a in result.legacy_only}
    # Int domains are open: the SMs below every listed one (<=79) are compared too.
    assert "sm in {<=79, 80, 90, 100, 103} and attention=mla" in legacy_only
    assert result.matrix_only == ()


def test_predicate_reading_kwargs_is_detected(small: capmatrix.Matrix) -> None:
    result = compare_legacy(small, load_predicate(f"{PREDICATES}:reads_kwargs"), "fallback")
    assert result.named_axes == ("sm",)
    assert result.evaluated_axes == ("sm", "attention")
    descriptions = {a.description for a in result.legacy_only}
    assert descriptions == {"sm in {120, 121, >=122} and attention in {mha, gqa}"}
    assert {a.description for a in result.matrix_only} == {
        "sm=80", "sm in {90, 100, 103} and attention=mla"
    }


def test_predicate_without_kwargs_sees_only_its_axes(small: capmatrix.Matrix) -> None:
    result = compare_legacy(small, load_predicate(f"{PREDICATES}:no_kwargs"), "fallback")
    assert result.kwargs_axes == ()
    assert result.evaluated_axes == ("sm",)
    assert result.calls == 8  # six listed SMs and two classes: <=79 and >=122
    assert {a.description for a in result.legacy_only} == {"sm in {120, 121, >=122}"}
    assert {a.description for a in result.matrix_only} == {"sm in {80, 90}"}


def test_where_restricts_both_sides(small: capmatrix.Matrix) -> None:
    where = parse_where(small, ["sm=120,121", "attention=mla"])
    assert where == {"sm": (120, 121), "attention": ("mla",)}
    result = compare_legacy(
        small, load_predicate(f"{PREDICATES}:no_kwargs"), "xqa", where=where
    )
    assert result.calls == 2
    assert result.where == where
    for area in result.legacy_only:
        assert set(area.values["sm"]) <= {120, 121}
        assert area.values["attention"] == ("mla",)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nocolon", "expected FILE.py:FUNCTION"),
        ("missing.py:f", "no such file"),
        (f"{PREDICATES}:nope", "has no function 'nope'"),
        (f"{PREDICATES}:NOT_A_FUNCTION", "has no function"),
    ],
)
def test_load_predicate_errors(spec: str, message: str) -> None:
    with pytest.raises(LegacyError, match=message):
        load_predicate(spec)


def test_import_error_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('nope')\n")
    with pytest.raises(LegacyError, match="import failed: RuntimeError: nope"):
        load_predicate(f"{bad}:f")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("raises", "the predicate raised ZeroDivisionError: boom"),
        ("extra_param", "'threshold' is not an axis and has no default"),
        ("positional_only", "positional-only"),
    ],
)
def test_predicate_errors(small: capmatrix.Matrix, name: str, message: str) -> None:
    with pytest.raises(LegacyError, match=message) as info:
        compare_legacy(small, load_predicate(f"{PREDICATES}:{name}"), "xqa")
    if name == "raises":
        assert info.value.cell is not None
        assert info.value.cell["sm"] == 120
        assert "(at {" in str(info.value)


def test_bad_where_and_kernel(small: capmatrix.Matrix) -> None:
    with pytest.raises(LegacyError, match="expected AXIS=VALUES"):
        parse_where(small, ["sm"])
    with pytest.raises(capmatrix.InvalidQuery, match="unknown axis"):
        parse_where(small, ["smm=90"])
    with pytest.raises(LegacyError, match="takes integers"):
        parse_where(small, ["sm=x"])
    with pytest.raises(LegacyError, match="not a value of axis"):
        parse_where(small, ["sm=130"])
    with pytest.raises(LegacyError, match="takes true or false"):
        parse_where(small, ["causal=maybe"])
    assert parse_where(small, ["causal=true"]) == {"causal": (True,)}
    with pytest.raises(capmatrix.InvalidQuery, match="unknown kernel"):
        compare_legacy(small, load_predicate(f"{PREDICATES}:no_kwargs"), "xqaa")


def test_cli_compare_legacy_errors(write_matrix: WriteMatrix) -> None:
    root = write_matrix()
    status, _, err = _run("compare-legacy", f"{PREDICATES}:raises", "--kernel", "xqa",
                          "--matrix", str(root))
    assert status == 2
    assert "ZeroDivisionError" in err


# --------------------------------------------------------------------------------------------------
# Brute force


SMALL = (4, 3, 3, 2)


def _predicate(seed: int, named: list[str], secret: str | None) -> Callable[..., bool]:
    rnd = random.Random(seed)  # noqa: S311 - test data, not secrets
    table: dict[tuple[object, ...], bool] = {}

    def pred(**kwargs: object) -> bool:
        key = tuple(kwargs[n] for n in named) + ((kwargs[secret],) if secret else ())
        if key not in table:
            table[key] = rnd.random() < 0.5
        return table[key]

    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in named]
    params.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    pred.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return pred


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 15), st.booleans())
def test_compare_legacy_equals_brute_force(seed: int, pseed: int, pick: int, secret: bool) -> None:
    matrix = random_matrix(seed, sizes=SMALL, rules=8, per_kernel=8)
    names = list(matrix.axes)
    named = [n for i, n in enumerate(names) if pick >> i & 1]
    hidden = next((n for n in names if n not in named), None) if secret else None
    pred = _predicate(pseed, named, hidden)
    kernel = matrix.kernels["k0"]
    result = compare_legacy(matrix, pred, "k0")
    legacy_only, matrix_only = set(), set()
    for c in cells(matrix):
        legacy = pred(**c)
        supported = supported_at(kernel, c)
        if legacy and not supported:
            legacy_only.add(tuple(c.values()))
        if supported and not legacy:
            matrix_only.add(tuple(c.values()))
    assert {x for a in result.legacy_only for x in product(*a.values.values())} == legacy_only
    assert {x for a in result.matrix_only for x in product(*a.values.values())} == matrix_only


# --------------------------------------------------------------------------------------------------
# The predicate in a child process: no false green, no corrupted output, bounded work


def _write(tmp_path: Path, body: str) -> str:
    path = tmp_path / "legacy.py"
    path.write_text(body, encoding="utf-8")
    return f"{path}:pred"


#: A predicate file that escapes in some way -> what the error must say. None of them may exit 0.
ESCAPES = {
    "exit at import": ("import sys\nsys.exit(0)\ndef pred(*, sm, **_):\n    return True\n",
                       "import failed: SystemExit: exit status 0"),
    "exit in a call": ("import sys\ndef pred(*, sm, **_):\n    sys.exit(0)\n",
                       "the predicate raised SystemExit: exit status 0"),
    "KeyboardInterrupt in a call": ("def pred(*, sm, **_):\n    raise KeyboardInterrupt\n",
                                    "KeyboardInterrupt"),
    "os._exit in a call": ("import os\ndef pred(*, sm, **_):\n    os._exit(0)\n",
                           "ended (exit status 0) without an answer"),
    "BaseException at import": ("raise BaseException('odd')\n", "BaseException: odd"),
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_cli_compare_legacy_never_agrees_by_escaping(
    write_matrix: WriteMatrix, tmp_path: Path, case: str
) -> None:
    body, message = ESCAPES[case]
    spec = _write(tmp_path, body)
    status, out, err = _run("compare-legacy", spec, "--kernel", "xqa",
                            "--matrix", str(write_matrix()), "--json")
    assert status == 2, (out, err)
    assert out == ""
    assert message in err
    assert "Traceback" not in err


def test_cli_compare_legacy_keeps_the_predicates_prints_out_of_json(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    spec = _write(tmp_path, "import sys\nprint('at import')\n"
                            "def pred(*, sm, **_):\n    print('called', sm)\n"
                            "    print('warn', file=sys.stderr)\n    return sm >= 90\n")
    status, out, err = _run("compare-legacy", spec, "--kernel", "fallback",
                            "--matrix", str(write_matrix()), "--json")
    assert status in {0, 1}
    data = json.loads(out)  # the report alone
    assert data["named_axes"] == ["sm"]
    assert "capmatrix: the predicate wrote to its stdout:\n  | at import\n  | called 80\n" in err
    assert "capmatrix: the predicate wrote to its stderr:\n  | warn\n" in err


def test_cli_compare_legacy_timeout(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    spec = _write(tmp_path, "import time\ndef pred(*, sm, **_):\n    time.sleep(60)\n")
    status, out, err = _run("compare-legacy", spec, "--kernel", "xqa",
                            "--matrix", str(write_matrix()), "--timeout", "2")
    assert status == 2
    assert out == ""
    assert "did not finish within 2 s (--timeout)" in err


def test_help_says_the_file_is_executed() -> None:
    status, out, _err = _run("compare-legacy", "--help")
    assert status == 0
    assert "EXECUTES the file" in " ".join(out.split())
    assert "--timeout" in out


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**9), st.integers(0, 15), st.booleans(), st.integers(1, 300))
def test_work_above_the_cap_is_refused_before_any_call(
    seed: int, pick: int, kwargs: bool, cap: int
) -> None:
    """The refusal depends only on the counted work, and then the predicate is never called."""
    matrix = random_matrix(seed, sizes=SMALL, rules=8, per_kernel=8)
    names = list(matrix.axes)
    named = [n for i, n in enumerate(names) if pick >> i & 1]
    calls: list[object] = []

    def pred(**cell: object) -> bool:
        calls.append(cell)
        return True  # no kwargs axis ever matters: the first pass is the whole work

    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in named]
    if kwargs:
        params.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    pred.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    sizes = {n: len(matrix.axes[n].values) for n in names}
    base = 1
    for n in named:
        base *= sizes[n]
    others = [n for n in names if n not in named] if kwargs else []
    work = base * (1 + sum(sizes[o] - 1 for o in others))
    if work > cap:
        with pytest.raises(LegacyError, match=r"nothing was called\. .*--where") as info:
            compare_legacy(matrix, pred, "k0", max_calls=cap)
        assert f"up to {work:,} predicate calls" in str(info.value)
        assert all(n in str(info.value) for n in [*named, *others])
        assert calls == []
    else:
        result = compare_legacy(matrix, pred, "k0", max_calls=cap)
        assert result.calls == len(calls) <= work


def test_a_predicate_naming_every_shipped_axis_is_refused_at_once() -> None:
    matrix = capmatrix.load()
    calls: list[object] = []

    def pred(**cell: object) -> bool:
        calls.append(cell)
        return False

    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in matrix.axes]
    pred.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    with pytest.raises(LegacyError, match="above the limit of 2,000,000; nothing was called"):
        compare_legacy(matrix, pred, "xqa")
    assert calls == []


def test_cli_refusal_names_the_axes_and_where(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    spec = _write(tmp_path, "def pred(*, sm, attention, kv, beam, causal, spec_dec):\n"
                            "    print('called')\n    return True\n")
    status, out, err = _run("compare-legacy", spec, "--kernel", "xqa",
                            "--matrix", str(write_matrix()), "--max-calls", "10")
    assert status == 2
    assert out == ""
    assert "nothing was called" in err
    assert "sm (8 values)" in err
    assert "--where sm=80" in err
    assert "called" not in err.replace("nothing was called", "")
