"""Open int domains: every int is answered by the rules, exactly as if its axis listed it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import capmatrix
from capmatrix import KernelQuery
from capmatrix._core.classes import describe_class, representatives
from capmatrix.model import Condition, Interval, signature

if TYPE_CHECKING:
    from conftest import WriteMatrix

SHIPPED = Path(__file__).resolve().parent.parent / "capabilities"


def _cond(**kw: Any) -> Condition:
    return Condition(axis="x", text="t", **kw)


# --------------------------------------------------------------------------------------------------
# Classes of one axis


def test_each_class_gets_one_representative_and_listed_values_stand_for_their_own() -> None:
    cuts = (_cond(intervals=(Interval(low=100, high=110),)), _cond(values=frozenset({90})))
    reps = representatives((90, 100), cuts)
    # Classes: in [100, 110) (100 stands for it), 90 (itself), and neither (one representative).
    assert len(reps) == 1
    assert signature(reps[0], cuts) == 0
    assert describe_class(reps[0], cuts, (90, 100)) == "<=89 or [91, 99] or >=110"


def test_bounds_keep_representatives_and_class_texts_inside_the_axis() -> None:
    """With ``min: 1`` no class below 1 gets a representative (tokens_per_block once showed -64), and a
    class that reached below 1 is described from 1 on; every int within the bounds still meets a
    signature some value stands for."""
    cuts = (_cond(intervals=(Interval(low=1, high=None),)), _cond(moduli=(64,)))
    unbounded = representatives((64,), cuts)
    assert any(v < 1 for v in unbounded)  # else the bound changes nothing here
    reps = representatives((64,), cuts, (1, None))
    assert reps
    assert all(v >= 1 for v in reps)
    stood_for = {signature(v, cuts) for v in (64, *reps)}
    assert all(signature(v, cuts) in stood_for for v in range(1, 400))
    capped = representatives((64,), cuts, (1, 100))
    assert capped
    assert all(1 <= v <= 100 for v in capped)
    gaps = (_cond(intervals=(Interval(low=100, high=110),)), _cond(values=frozenset({90})))
    (neither,) = representatives((90, 100), gaps, (1, None))
    assert describe_class(neither, gaps, (90, 100)) == "<=89 or [91, 99] or >=110"
    assert describe_class(neither, gaps, (90, 100), (1, None)) == "[1, 89] or [91, 99] or >=110"
    assert describe_class(neither, gaps, (90, 100), (1, 200)) == "[1, 89] or [91, 99] or [110, 200]"


def test_moduli_split_a_gap_by_residue() -> None:
    cuts = (_cond(intervals=(Interval(low=1, high=None),)), _cond(moduli=(8,)))
    reps = representatives((64,), cuts)
    texts = {describe_class(r, cuts, (64,)) for r in reps}
    assert "[65, ...]" not in texts
    assert any("not a multiple of 8" in t for t in texts)
    # Every int meets one of the signatures the axis's values (listed or representative) have.
    known = {signature(v, cuts) for v in (64, *reps)}
    assert all(signature(v, cuts) in known for v in range(-300, 300))


def test_no_cuts_no_classes() -> None:
    assert representatives((1, 2), ()) == ()


def test_a_scattered_class_is_named_by_a_member() -> None:
    cuts = (_cond(moduli=(3,)), _cond(moduli=(4,)))
    reps = representatives((), cuts)
    assert {signature(r, cuts) for r in reps} == {0, 1, 2, 3}
    assert any(describe_class(r, cuts, ()).startswith("like ") for r in reps)


# --------------------------------------------------------------------------------------------------
# Every int answered as if listed: a random matrix against brute force over the rule predicates

_AXES = """\
axes:
  sm:
    type: int
    description: compute capability
    values: [80, 90, 100]
    families: {fam: "[100, 109]"}
  head:
    type: int
    description: head size
    values: [64, 128]
  ver:
    type: int
    description: derived version
    values: [0, 1, 2]
    derive:
      - when: {sm: "<80"}
        value: 0
      - when: {sm: fam, head: "<=128"}
        value: 2
      - value: 1
"""

#: Per axis, conditions as YAML and the same predicate in Python (the brute force).
_POOLS: dict[str, dict[str, Any]] = {
    "sm": {
        '">=90"': lambda v: v >= 90, '"[85, 105)"': lambda v: 85 <= v < 105,
        "[80, 90]": lambda v: v in (80, 90),
        "fam": lambda v: 100 <= v <= 109, "{not: 90}": lambda v: v != 90,
        "{multiple_of: 8}": lambda v: v % 8 == 0, '"<100"': lambda v: v < 100,
    },
    "head": {
        '">128"': lambda v: v > 128, "[64]": lambda v: v == 64, "{multiple_of: 8}": lambda v: v % 8 == 0,
        "{not: [{multiple_of: 16}]}": lambda v: v % 16 != 0, '"[65, 200]"': lambda v: 65 <= v <= 200,
        "{not: 128}": lambda v: v != 128,
    },
    "ver": {"1": lambda v: v == 1, "[0, 2]": lambda v: v in (0, 2), "2": lambda v: v == 2},
}


def _ver(sm: int, head: int) -> int:
    """The derived axis of :data:`_AXES`, by hand."""
    if sm < 80:
        return 0
    if 100 <= sm <= 109 and head <= 128:
        return 2
    return 1


@st.composite
def _rules(draw: st.DrawFn) -> list[tuple[str, dict[str, str]]]:
    out = []
    for _ in range(draw(st.integers(1, 5))):
        effect = draw(st.sampled_from(["grant", "exclude"]))
        axes = draw(st.lists(st.sampled_from(sorted(_POOLS)), max_size=3, unique=True))
        out.append((effect, {axis: draw(st.sampled_from(sorted(_POOLS[axis]))) for axis in axes}))
    return out


def _kernel_yaml(rules: list[tuple[str, dict[str, str]]]) -> str:
    lines = ["kernels:", "  k:", "    description: random", "    rules:"]
    for i, (effect, region) in enumerate(rules):
        body = ", ".join(f"{a}: {c}" for a, c in region.items())
        lines += [f"      - id: k.r{i}", f"        {effect}: {{{body}}}", "        reason: r",
                  "        source: s", "        status: untested"]
    return "\n".join(lines) + "\n"


def _brute(rules: list[tuple[str, dict[str, str]]], sm: int, head: int) -> bool:
    """Supported when a grant holds and no exclusion does, each condition asked in Python."""
    values = {"sm": sm, "head": head, "ver": _ver(sm, head)}
    holds = [effect for effect, region in rules
             if all(_POOLS[axis][text](values[axis]) for axis, text in region.items())]
    return "grant" in holds and "exclude" not in holds


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rules=_rules(), sm=st.integers(-5, 140), head=st.integers(-5, 300))
def test_unlisted_ints_answer_as_the_rules_say(
    write_matrix: WriteMatrix, rules: list[tuple[str, dict[str, str]]], sm: int, head: int
) -> None:
    root = write_matrix({"axes.yaml": _AXES, "kernels/test.yaml": _kernel_yaml(rules)}, base=False)
    matrix = capmatrix.load(root)
    got = capmatrix.resolve(KernelQuery("k", sm=sm, head=head), matrix)
    assert bool(got) is _brute(rules, sm, head), (rules, sm, head)


# --------------------------------------------------------------------------------------------------
# The shipped matrix: listing a value changes no answer


#: Values no list of the shipped matrix names, where users meet them.
UNLISTED = {
    "sm": [101, 107, 122, 130],
    "head_dim": [136, 200, 264, 320, 384],
    "q_per_kv": [3, 6, 12],
}


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> capmatrix.Matrix:
    """The shipped matrix with :data:`UNLISTED` added to the axes' value lists."""
    root = tmp_path_factory.mktemp("listed") / "capabilities"
    shutil.copytree(SHIPPED, root)
    text = (root / "axes.yaml").read_text(encoding="utf-8")
    for axis, extra in UNLISTED.items():
        pattern = re.compile(rf"(\n  {axis}:\n(?:    .*\n)*?    values: \[)([^\]]*)\]")
        added = ", " + ", ".join(map(str, extra)) + "]"
        text, n = pattern.subn(rf"\g<1>\g<2>{added}", text, count=1)
        assert n == 1, axis
    (root / "axes.yaml").write_text(text, encoding="utf-8")
    return capmatrix.load(root)


@pytest.mark.no_cover  # a sweep: the same lines thousands of times (see conftest.py)
def test_the_shipped_matrix_answers_unlisted_values_as_if_listed(listed: capmatrix.Matrix) -> None:
    shipped = capmatrix.load(SHIPPED)
    for axis, extra in UNLISTED.items():
        assert not set(extra) & set(shipped.axes[axis].known)
        assert set(extra) <= set(listed.axes[axis].known)
    compared = 0
    for model in shipped.models:
        for axis, extra in UNLISTED.items():
            for value in extra:
                for phase in ("context", "generation"):
                    query = KernelQuery(model=model).replace(phase=phase, **{axis: value})
                    for kernel in shipped.kernels:
                        a = capmatrix.resolve(query.with_kernel(kernel), shipped)
                        b = capmatrix.resolve(query.with_kernel(kernel), listed)
                        assert a.verdict is b.verdict, (kernel, model, axis, value)
                        compared += 1
                    for role in shipped.roles:
                        a_sel = capmatrix.select(role, query, shipped)
                        b_sel = capmatrix.select(role, query, listed)
                        assert (a_sel.kernel, a_sel.verdict) == (b_sel.kernel, b_sel.verdict), (role, value)
    assert compared > 10_000


def test_vllm_answers_unlisted_heads_by_the_rules() -> None:
    from capmatrix.engine.vllm import select_backend

    def pick(head: int, kv: str) -> str:
        return select_backend(capability=(9, 0), head_size=head, dtype="bf16", kv_cache_dtype=kv,
                              block_size=None, use_mla=False)

    # FA4 runs above head 256 on SM90 and takes an FP8 cache only at head 512 (fa_utils.py:282-316).
    assert pick(264, "fp8") == pick(384, "fp8") == "TRITON_ATTN"
    assert pick(264, "auto") == "FLASH_ATTN"
    assert pick(136, "fp8") == "FLASH_ATTN"  # FA3 up to 256


def test_spellings_answer_as_their_value(write_matrix: WriteMatrix) -> None:
    axes = _AXES + (
        "  dtype:\n    type: enum\n    description: d\n    values: [fp16, bf16]\n"
        "    spellings: {float16: fp16, torch.bfloat16: bf16}\n"
    )
    kernels = (
        "kernels:\n  k:\n    description: d\n    rules:\n      - id: k.a\n"
        "        grant: {dtype: float16}\n        reason: r\n        source: s\n        status: untested\n"
    )
    matrix = capmatrix.load(write_matrix({"axes.yaml": axes, "kernels/test.yaml": kernels}, base=False))
    assert capmatrix.resolve(KernelQuery("k", dtype="float16"), matrix)
    assert capmatrix.resolve(KernelQuery("k", dtype="fp16"), matrix)
    assert not capmatrix.resolve(KernelQuery("k", dtype="torch.bfloat16"), matrix)
    assert capmatrix.resolve(KernelQuery("k", dtype="torch.bfloat16"), matrix).values["dtype"] == "bf16"


# --------------------------------------------------------------------------------------------------
# Declaring range families and spellings wrongly

_BAD_AXES = """\
axes:
  sm:
    type: int
    description: compute capability
    values: [80, 90]
    families: {{fam: {family}}}
{extra}"""


@pytest.mark.parametrize(("family", "extra", "code", "message"), [
    ('"[1, x]"', "", "E212", "family 'fam': '[1, x]' is not a range"),
    ('"[1,\uff12]"', "", "E212", "family 'fam': '[1,\uff12]' is not a range"),
    ("[80]", "  d:\n    type: int\n    description: d\n    values: [1]\n    spellings: {one: '1'}\n",
     "E219", "spellings are for enum axes"),
    ("[80]", "  d:\n    type: enum\n    description: d\n    values: [a, b]\n    spellings: {a: b}\n",
     "E219", "spelling 'a' is already a value of 'd'"),
])
def test_bad_families_and_spellings_are_placed(
    write_matrix: WriteMatrix, family: str, extra: str, code: str, message: str
) -> None:
    root = write_matrix({"axes.yaml": _BAD_AXES.format(family=family, extra=extra)}, base=False)
    found = [(p.code, p.message) for p in capmatrix.iter_problems(root) if p.code == code]
    assert found, list(capmatrix.iter_problems(root))
    assert message in found[0][1]


def test_a_class_of_every_int_reads_any() -> None:
    cuts = (_cond(values=frozenset({5})),)
    reps = representatives((), cuts)
    texts = {describe_class(r, cuts, ()) for r in reps}
    assert texts == {"5", "<=4 or >=6"}
    always = (_cond(intervals=(Interval(low=None, high=None),)),)
    assert describe_class(0, always, ()) == "any"


def test_masks_of_expanded_conditions_equal_their_contains(monkeypatch: pytest.MonkeyPatch) -> None:
    """A condition over classes gives each value the mask bit its own ``contains`` gives it, the
    signatures being computed once per cuts (and again after the memo starts over)."""
    from capmatrix._core import classes as _classes

    m = capmatrix.load()
    expanded = [(m.axes[name], cond) for rule in m.rules for name, cond in rule.conditions.items()
                if cond.cuts]
    assert expanded
    monkeypatch.setattr(_classes, "SIGNATURES_KEPT", 3)
    for axis, cond in expanded:
        values = (*axis.values, "none", True)  # a value that is not an int is asked of the condition
        assert cond.mask(values) == sum(1 << i for i, v in enumerate(values) if cond.contains(v))
    assert len(_classes._SIGNATURES) <= 3
