"""The format features for query-dependent engines: multiple_of, optional, environment and derived axes,
and roles whose candidate order depends on the query. Truth tables, then brute force against a naive
evaluator written from the documented semantics (docs/authoring.md), then the analyses.
"""

from __future__ import annotations

import itertools
import random
import textwrap
from typing import TYPE_CHECKING

import pytest

import capmatrix
from capmatrix import KernelQuery
from capmatrix.authoring.analysis import check
from capmatrix.authoring.analysis._roles import role_gap, role_regions
from capmatrix.errors import CapabilityErrors, InvalidQuery

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import WriteMatrix

AXES = """
axes:
  sm:
    type: int
    description: compute capability
    values: [80, 90, 100, 120]
  head:
    type: int
    description: head size
    values: [64, 80, 96, 128, 192, 256]
  block:
    type: int
    description: block size (unset = not checked)
    values: [16, 32, 64, 128]
    optional: true
  mla:
    type: bool
    description: MLA model
    default: false
  lib:
    type: bool
    description: an optional library is installed
    environment: true
    default: true
  ver:
    type: int
    description: library version that applies
    values: [2, 3, 4]
    derive:
      - when: {sm: 90, lib: true}
        value: 3
      - when: {sm: ">=100", head: "<=128", block: {multiple_of: 64}, lib: true}
        value: 4
      - value: 2
  fast:
    type: bool
    description: version 3 or more
    derive:
      - when: {ver: [3, 4]}
        value: true
      - value: false
"""

KERNELS = """
kernels:
  fa:
    description: needs version 3 or 4
    rules:
      - id: fa.v34
        grant: {ver: [3, 4], mla: false}
        reason: r
        source: s
        status: untested
  tri:
    description: blocks multiple of 32, any head but 256
    rules:
      - id: tri.all
        grant: {block: {multiple_of: 32}, mla: false}
        reason: r
        source: s
        status: untested
      - id: tri.no256
        exclude: {head: 256}
        reason: r
        source: s
        status: untested
  slow:
    description: only where fast is false
    rules:
      - id: slow.any
        grant: {fast: false, block: {not: 16}}
        reason: r
        source: s
        status: untested
  big:
    description: any block but 16, and with head 256 only multiples of 64 (exclusions on an optional axis)
    rules:
      - id: big.all
        grant: {mla: false}
        reason: r
        source: s
        status: untested
      - id: big.no16
        exclude: {block: 16}
        reason: r
        source: s
        status: untested
      - id: big.head256
        exclude: {head: 256, block: {not: {multiple_of: 64}}}
        reason: r
        source: s
        status: untested
  mlak:
    description: MLA
    rules:
      - id: mlak.any
        grant: {mla: true, sm: [90, 100]}
        reason: r
        source: s
        status: untested
roles:
  pick:
    description: order by MLA and SM
    orders:
      - when: {mla: true}
        candidates: [mlak]
      - when: {sm: ">=100"}
        candidates: [tri, fa, slow]
      - candidates: [fa, tri, slow]
"""


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> capmatrix.Matrix:
    root = tmp_path_factory.mktemp("features")
    (root / "axes.yaml").write_text(AXES, encoding="utf-8")
    (root / "k.yaml").write_text(KERNELS, encoding="utf-8")
    return capmatrix.load(root)


# -- the naive evaluator: the documented semantics, value by value ------------------------------


def naive_ver(sm: int, head: int, block: int | str, lib: bool) -> int:
    if sm == 90 and lib:
        return 3
    if sm >= 100 and head <= 128 and (isinstance(block, str) or block % 64 == 0) and lib:
        return 4
    return 2


def naive(kernel: str, sm: int, head: int, block: int | str, mla: bool, lib: bool) -> bool:
    ver = naive_ver(sm, head, block, lib)
    fast = ver in (3, 4)
    unset = block == "none"
    if kernel == "fa":
        return fast and not mla
    if kernel == "tri":
        return (isinstance(block, str) or block % 32 == 0) and not mla and head != 256
    if kernel == "slow":
        return not fast and (unset or block != 16)
    if kernel == "big":  # an exclusion never applies to an unset block
        return not mla and (unset or (block != 16 and not (head == 256 and int(block) % 64 != 0)))
    return mla and sm in (90, 100)


def naive_pick(sm: int, head: int, block: int | str, mla: bool, lib: bool) -> str | None:
    if mla:
        order = ["mlak"]
    elif sm >= 100:
        order = ["tri", "fa", "slow"]
    else:
        order = ["fa", "tri", "slow"]
    return next((k for k in order if naive(k, sm, head, block, mla, lib)), None)


BLOCKS: list[int | str] = [16, 32, 64, 128, "none"]
CELLS = list(itertools.product([80, 90, 100, 120], [64, 80, 96, 128, 192, 256], BLOCKS,
                               [False, True], [False, True]))


def test_truth_table_multiple_of_and_optional(matrix: capmatrix.Matrix) -> None:
    def tri(block: int | str) -> bool:
        return bool(capmatrix.resolve(KernelQuery("tri", sm=80, head=64, block=block), matrix))

    assert [tri(b) for b in (16, 32, 64, 128, "none")] == [False, True, True, True, True]
    # left out, the optional axis is `none`: not checked
    assert capmatrix.resolve(KernelQuery("tri", sm=80, head=64), matrix).values["block"] == "none"
    assert capmatrix.resolve(KernelQuery("tri", sm=80, head=64), matrix)
    # a value outside the universe is answered by the modulus
    assert capmatrix.resolve(KernelQuery("tri", sm=80, head=64, block=96), matrix)
    assert not capmatrix.resolve(KernelQuery("tri", sm=80, head=64, block=48), matrix)
    # a negation on an optional axis still lets `none` through
    assert capmatrix.resolve(KernelQuery("slow", sm=80, head=64), matrix)
    assert not capmatrix.resolve(KernelQuery("slow", sm=80, head=64, block=16), matrix)

    # an exclusion's condition never admits `none`: unset is not checked, so the exclusion does not
    # apply, negated or not
    def big(head: int, block: int | str) -> bool:
        return bool(capmatrix.resolve(KernelQuery("big", sm=80, head=head, block=block), matrix))

    assert [big(64, b) for b in BLOCKS] == [False, True, True, True, True]
    assert [big(256, b) for b in BLOCKS] == [False, False, True, True, True]
    assert capmatrix.resolve(KernelQuery("big", sm=80, head=256), matrix)


def test_truth_table_derived(matrix: capmatrix.Matrix) -> None:
    table: dict[tuple[int, int, int | str, bool], int] = {  # (sm, head, block, lib) -> ver
        (90, 256, 16, True): 3,
        (90, 64, 64, False): 2,
        (100, 128, 64, True): 4,
        (100, 128, "none", True): 4,
        (100, 128, 32, True): 2,
        (100, 192, 64, True): 2,
        (120, 64, 128, True): 4,
        (80, 64, 64, True): 2,
    }
    resolver = matrix._compiled
    for (sm, head, block, lib), ver in table.items():
        values = resolver.derived_values(KernelQuery(sm=sm, head=head, block=block, lib=lib))
        assert values["ver"] == ver, (sm, head, block, lib)
        assert values["fast"] is (ver != 2)
        assert bool(capmatrix.resolve(KernelQuery("fa", sm=sm, head=head, block=block, lib=lib), matrix)) is (
            ver != 2)
    # a rule on a derived axis becomes parts over the axes the table reads, citing what it tests
    parts = list(matrix.kernels["fa"].rules)
    assert parts[0].id == "fa.v34"
    assert all(p.derived == "ver [3, 4]" for p in parts)
    assert all("ver" not in p.conditions for p in parts)
    with pytest.raises(InvalidQuery, match="derived"):
        capmatrix.resolve(KernelQuery("fa", sm=90, ver=3), matrix)
    assert "ver" not in matrix.axes
    assert set(matrix.derived) == {"ver", "fast"}
    assert matrix.axes["lib"].environment
    assert matrix.axes["block"].optional


def test_truth_table_orders(matrix: capmatrix.Matrix) -> None:
    assert capmatrix.select("pick", KernelQuery(sm=100, head=64, block=64), matrix).kernel == "tri"
    assert capmatrix.select("pick", KernelQuery(sm=90, head=64, block=64), matrix).kernel == "fa"
    assert capmatrix.select("pick", KernelQuery(sm=90, mla=True), matrix).kernel == "mlak"
    assert capmatrix.select("pick", KernelQuery(sm=80, mla=True), matrix).kernel is None
    trace = capmatrix.select("pick", KernelQuery(sm=80, mla=True), matrix).trace
    assert [r.kernel for r in trace] == ["mlak"]
    assert matrix.roles["pick"].candidates == ("mlak", "tri", "fa", "slow")
    # an order that reads an open axis: the selection depends
    open_sel = capmatrix.select("pick", KernelQuery(head=64, mla=False, sm=capmatrix.ANY), matrix)
    assert str(open_sel.verdict) == "depends"


def test_brute_force_against_naive(matrix: capmatrix.Matrix) -> None:
    for sm, head, block, mla, lib in CELLS:
        query = KernelQuery(sm=sm, head=head, block=block, mla=mla, lib=lib)
        for kernel in ("fa", "tri", "slow", "big", "mlak"):
            got = bool(capmatrix.resolve(query.with_kernel(kernel), matrix))
            assert got is naive(kernel, sm, head, block, mla, lib), (kernel, query)
        assert capmatrix.select("pick", query, matrix).kernel == naive_pick(sm, head, block, mla, lib), query


def test_analyses_agree_with_naive(matrix: capmatrix.Matrix) -> None:
    """role_regions and role_gap cover exactly the cells the naive evaluator assigns."""
    regions = role_regions(matrix, matrix.roles["pick"])
    gap = role_gap(matrix, matrix.roles["pick"])
    space = matrix.space
    names = space.names
    for cell in CELLS:
        values = dict(zip(("sm", "head", "block", "mla", "lib"), cell, strict=True))
        want = naive_pick(*cell)
        point = tuple(1 << space.axes[i].values.index(values[n]) for i, n in enumerate(names))
        owners = [k for k, region in regions.items()
                  if any(all(b & p for b, p in zip(box, point, strict=True)) for box in region)]
        assert owners == [want], (cell, owners)
        in_gap = any(all(b & p for b, p in zip(box, point, strict=True)) for box in gap)
        assert in_gap is (want is None), cell
    codes = {f.code for f in check(matrix)}
    assert "C108" in codes  # MLA on sm80/120 has no candidate


def test_random_matrices_brute_force(tmp_path: Path) -> None:
    """Random multiple_of / optional conditions, in grants and in exclusions, against their definition,
    value by value: `none` passes a grant's condition and fails an exclusion's, so it is always valid.
    """
    rng = random.Random(14)  # noqa: S311 - reproducible test data
    for trial in range(40):
        moduli = rng.sample([2, 3, 4, 8, 16], 2)
        negated = rng.random() < 0.5
        excluded = rng.random() < 0.5
        cond = [{"multiple_of": m} for m in moduli]
        raw = {"not": cond} if negated else cond
        tail = "reason: r, source: s, status: untested}"
        indent = "\n" + " " * 18 + "- "
        rules = (f"{{id: k.all, grant: {{}}, {tail}{indent}{{id: k.r, exclude: {{n: {raw!r}}}, {tail}"
                 if excluded else f"{{id: k.r, grant: {{n: {raw!r}}}, {tail}")
        text = textwrap.dedent(f"""
            axes:
              n:
                type: int
                description: n
                values: [1, 2, 3, 4, 6, 8, 12, 16, 24]
                optional: true
            kernels:
              k:
                description: k
                rules:
                  - {rules}
            """)
        path = tmp_path / f"m{trial}.yaml"
        path.write_text(text, encoding="utf-8")
        m = capmatrix.load(path)
        probes: list[int | str] = [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 40, 48, "none"]
        for n in probes:
            held = any(n % q == 0 for q in moduli) != negated if isinstance(n, int) else None
            want = True if held is None else held != excluded
            assert bool(capmatrix.resolve(KernelQuery("k", n=n), m)) is want, (moduli, negated, excluded, n)


@pytest.mark.parametrize(
    ("snippet", "code"),
    [
        ("  x:\n    type: bool\n    description: d\n    optional: true\n", "E214"),
        ("  x:\n    type: int\n    description: d\n    values: [1]\n    optional: true\n    default: 2\n",
         "E213"),
        (("  x:\n    type: int\n    description: d\n    values: [1]\n    optional: true\n    derive:\n"
          "      - value: 1\n"), "E214"),
        ("  x:\n    type: bool\n    description: d\n    environment: true\n", "E215"),
        (("  x:\n    type: int\n    description: d\n    values: [1, 2]\n    derive:\n"
         "      - when: {sm: 90}\n        value: 1\n"), "E216"),
        (("  x:\n    type: int\n    description: d\n    values: [1, 2]\n    derive:\n"
         "      - value: 3\n"), "E216"),
        (("  x:\n    type: int\n    description: d\n    values: [1, 2]\n    derive:\n"
         "      - when: {y: true}\n        value: 1\n      - value: 2\n"
         "  y:\n    type: bool\n    description: d\n    derive:\n      - value: true\n"), "E216"),
    ],
)
def test_axis_feature_errors(tmp_path: Path, snippet: str, code: str) -> None:
    text = "axes:\n  sm:\n    type: int\n    description: d\n    values: [80, 90]\n" + snippet
    (tmp_path / "axes.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(CapabilityErrors) as info:
        capmatrix.load(tmp_path)
    assert code in {e.code for e in info.value.errors}, str(info.value)
    assert all(e.line is not None for e in info.value.errors)


@pytest.mark.parametrize(
    ("rule", "role", "code"),
    [
        ("grant: {sm: {multiple_of: 0}}", "candidates: [k]", "E224"),
        ("grant: {e: {multiple_of: 2}}", "candidates: [k]", "E224"),
        ("grant: {sm: 90}", "candidates: [k]\n    orders:\n      - candidates: [k]", "E242"),
        ("grant: {sm: 90}", ("orders:\n      - candidates: [k]\n      - when: {sm: 90}\n"
         "        candidates: [k]"), "E243"),
        ("grant: {sm: 90}", "orders:\n      - when: {smm: 90}\n        candidates: [k]", "E230"),
        ("grant: {sm: 90}", "orders:\n      - candidates: [k, q]", "E240"),
    ],
)
def test_rule_and_role_feature_errors(tmp_path: Path, rule: str, role: str, code: str) -> None:
    (tmp_path / "axes.yaml").write_text(
        "axes:\n  sm:\n    type: int\n    description: d\n    values: [80, 90]\n"
        "  e:\n    type: enum\n    description: d\n    values: [a, b]\n", encoding="utf-8")
    (tmp_path / "k.yaml").write_text(
        f"kernels:\n  k:\n    description: d\n    rules:\n      - id: k.r\n        {rule}\n"
        "        reason: r\n        source: s\n        status: untested\n"
        f"roles:\n  r:\n    description: d\n    {role}\n", encoding="utf-8")
    with pytest.raises(CapabilityErrors) as info:
        capmatrix.load(tmp_path)
    assert code in {e.code for e in info.value.errors}, str(info.value)
    assert all(e.line is not None for e in info.value.errors)


# --------------------------------------------------------------------------------------------------
# Engine vocabularies: an axis's scope, and who may read it

_SCOPED_AXES = """
axes:
  sm:
    type: int
    description: compute capability
    values: [80, 90]
  built:
    type: bool
    scope: vllm
    description: a vLLM build flag
    default: true
  ver:
    type: int
    scope: {ver_scope}
    description: derived
    values: [1, 2]
    derive:
      - when: {{sm: 90, built: true}}
        value: 2
      - value: 1
"""


def _scoped(write_matrix: WriteMatrix, *, ver_scope: str, engine: str, order_reads: str) -> list[str]:
    kernels = f"""
kernels:
  k:
    description: a kernel
    engine: {engine}
    rules:
      - {{id: k.a, grant: {{ver: 2}}, reason: r, source: s, status: untested}}
      - {{id: k.b, grant: {{built: false}}, reason: r, source: s, status: untested}}
roles:
  r:
    description: a role
    orders:
      - when: {{{order_reads}: true}}
        candidates: [k]
      - candidates: [k]
"""
    root = write_matrix({"axes.yaml": _SCOPED_AXES.format(ver_scope=ver_scope), "kernels/k.yaml": kernels},
                        base=False)
    return [str(p) for p in capmatrix.iter_problems(root) if p.code == "E226"]


def test_an_engine_reads_the_core_and_its_own_scope(write_matrix: WriteMatrix) -> None:
    assert _scoped(write_matrix, ver_scope="vllm", engine="vllm", order_reads="built") == []


def test_another_engine_reading_a_scoped_axis_is_refused(write_matrix: WriteMatrix) -> None:
    found = _scoped(write_matrix, ver_scope="vllm", engine="tensorrt_llm", order_reads="built")
    # The rule on the derived axis, the rule on the flag, and the role whose only engine is not vLLM.
    assert len(found) == 3
    assert "rule 'k.a' of kernel 'k' (engine 'tensorrt_llm') reads axis 'ver' of scope 'vllm'" in found[0]
    assert "reads axis 'built' of scope 'vllm'" in found[1]
    assert "role 'r' (engine 'tensorrt_llm') reads axis 'built'" in found[2]


def test_a_core_table_may_not_read_an_engine_flag(write_matrix: WriteMatrix) -> None:
    found = _scoped(write_matrix, ver_scope="core", engine="vllm", order_reads="built")
    assert len(found) == 1
    assert "derived axis 'ver' (no engine: core axes only) reads axis 'built' of scope 'vllm'" in found[0]
