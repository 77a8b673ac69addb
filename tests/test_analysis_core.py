"""The compiled diagram core against its Python twin: the same programs give the same nodes and answers.

Also the compiled core's own edges (counts past 128 bits, masks past 64 values, box sets past one
word, bad arguments), how the package picks a core, and the build hook that compiles it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import random
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capmatrix.analysis import _diagram, _pycore, check, diff
from capmatrix.analysis._diagram import CORES, EMPTY, FULL, Diagram
from capmatrix.model import Axis, AxisType
from capmatrix.regions import Space

ROOT = Path(__file__).resolve().parent.parent
compiled = pytest.mark.skipif("compiled" not in CORES, reason="the compiled core is not built here")

# An axis of 70 values: its masks take two words, and so do the box sets of a rule list past 64 boxes.
SPACE = Space((
    Axis(name="sm", type=AxisType.INT, values=(80, 90, 100), description="sm"),
    Axis(name="head", type=AxisType.INT, values=tuple(range(1, 71)), description="head"),
    Axis(name="sd", type=AxisType.BOOL, values=(False, True), description="sd"),
    Axis(name="kv", type=AxisType.ENUM, values=("a", "b", "c", "d", "e"), description="kv"),
))
WHOLE = SPACE.full_box()
box_strategy = st.tuples(*(st.integers(min_value=0, max_value=m) for m in WHOLE))
# A program: steps that each combine two earlier results (by index) or build a kernel's rules.
step = st.one_of(
    st.tuples(st.sampled_from(["join", "meet", "minus", "within", "intersects"]),
              st.integers(min_value=0), st.integers(min_value=0)),
    st.tuples(st.just("rules"), st.lists(box_strategy, min_size=1, max_size=80), st.integers(min_value=0)),
)


def run(core: str, order: list[int], boxes: list[tuple[int, ...]], program: list[Any]) -> list[Any]:
    """Every node and answer of ``program`` on one core, with each node's boxes, cells and counts."""
    d = Diagram(SPACE, order, core=core)
    nodes = [EMPTY, FULL, *(d.box(b) for b in boxes)]
    seen: list[Any] = []
    for op, x, y in program:
        if op == "rules":
            every = (1 << len(x)) - 1
            node = d.rules(x, every & ~y, y & every)
        else:
            a, b = nodes[x % len(nodes)], nodes[y % len(nodes)]
            node = getattr(d, op)(a, b)
            if isinstance(node, bool):
                seen.append(node)
                continue
        nodes.append(node)
        seen.append((node, d.boxes(node), d.boxes(node, 3, negated=True), d.cells(node),
                     d.cells(node, negated=True), d.count_boxes(node), d.count_boxes(node, negated=True)))
    seen.append(len(d))
    return seen


@compiled
@settings(max_examples=60, deadline=None)
@given(st.permutations(range(4)), st.lists(box_strategy, max_size=8), st.lists(step, max_size=12))
def test_the_cores_build_the_same_nodes_and_read_them_alike(order: list[int], boxes: list[Any],
                                                           program: list[Any]) -> None:
    assert run("compiled", order, boxes, program) == run("python", order, boxes, program)


@compiled
@pytest.mark.parametrize("seed", range(4))
def test_rules_of_many_boxes_agree(seed: int) -> None:
    """Past 64 boxes a live set takes several words in the compiled walk."""
    rng = random.Random(seed)  # noqa: S311 - reproducible test data
    boxes = [tuple(rng.randrange(1, m + 1) | rng.choice((0, m)) for m in WHOLE) for _ in range(150)]
    exclusions = rng.getrandbits(150) & rng.getrandbits(150)
    program = [("rules", boxes, exclusions), ("rules", boxes[:70], exclusions >> 80), ("join", -1, -2)]
    assert run("compiled", [1, 0, 3, 2], [], program) == run("python", [1, 0, 3, 2], [], program)


def parity(core: str, width: int) -> tuple[Diagram, int]:
    """The cells of ``width`` binary axes with an odd number of True: 2**(width-1) cells and boxes."""
    axes = tuple(Axis(name=f"b{i}", type=AxisType.BOOL, values=(False, True), description="b")
                 for i in range(width))
    d = Diagram(Space(axes), core=core)
    odd, even = EMPTY, FULL  # past the last level: no True left, an even count
    for level in range(width - 1, -1, -1):
        odd, even = (d._core.node(level, (odd, even)),
                     d._core.node(level, (even, odd)))
    return d, odd


@pytest.mark.parametrize("core", list(CORES))
def test_counts_past_128_bits_are_exact(core: str) -> None:
    d, odd = parity(core, 140)
    assert d.cells(odd) == d.count_boxes(odd) == 2**139
    assert d.cells(odd, negated=True) == d.count_boxes(odd, negated=True) == 2**139
    assert len(d.boxes(odd, 2)) == 2
    big = d.box((1,) * 140)  # one cell: the rest of the universe is 2**140 - 1
    assert d.cells(big, negated=True) == 2**140 - 1
    assert d.cells(d.join(big, odd)) == 2**139 + 1


@compiled
def test_bad_arguments_are_refused_with_a_reason() -> None:
    core = CORES["compiled"]((2, 3), (0, 1))
    node = core.node(1, (0, 1, 1))
    with pytest.raises(ValueError, match="not a node of this store"):
        core.join(node, 99)
    with pytest.raises(ValueError, match="a child per value"):
        core.node(0, (0, 1, 1))
    with pytest.raises(ValueError, match="later level"):
        core.node(1, (node, 0, 0))
    with pytest.raises(ValueError, match="1 to 2\\*\\*20 values"):
        CORES["compiled"]((0,), (0,))
    with pytest.raises(TypeError, match="initialised once"):
        core.__init__((2,), (0,))  # type: ignore[misc]
    with pytest.raises(TypeError, match="must be an int"):
        core.rules([1, 0, 0], [[1, 1], [1, "x", 1]], [1, 0, 0], 1, 0)  # type: ignore[list-item]
    assert core.kids(node) == (0, 1, 1)
    assert core.level(node) == 1
    assert core.kids(FULL) == ()
    with pytest.raises(ValueError, match="pending past the last level"):
        core.rules([1, 1, 0], [[1, 1], [1, 1, 1]], [1, 1, 1], 1, 0)
    with pytest.raises(ValueError, match="each axis once"):
        CORES["compiled"]((2, 2), (0, 0))
    from capmatrix.analysis import _core  # present: the test runs only where it is built

    bare = _core.Core.__new__(_core.Core)
    with pytest.raises(TypeError, match="not initialised"):
        bare.rules([0], [], [0], 1, 0)
    core.release()
    assert len(core) == 2


@pytest.mark.parametrize("core", list(CORES))
def test_a_released_store_counts_afresh(core: str) -> None:
    d = Diagram(SPACE, core=core)
    box = (0b11, 1, 0b11, 0b101)
    before = (d.count_boxes(d.box(box)), d.count_boxes(FULL), d.count_boxes(EMPTY, negated=True))
    d.release()
    assert (d.count_boxes(d.box(box)), d.count_boxes(FULL), d.count_boxes(EMPTY, negated=True)) == before
    assert before == (1, 1, 1)


@pytest.mark.parametrize("core", list(CORES))
def test_a_released_store_builds_again_as_a_fresh_one(core: str) -> None:
    """Release hands back the grown node tables too; the store then builds as a new one would."""
    rng = random.Random(3)  # noqa: S311 - reproducible test data
    boxes = [tuple(rng.randrange(1, m + 1) for m in WHOLE) for _ in range(1200)]

    def program(d: Diagram) -> list[int]:
        node, seen = EMPTY, []
        for box in boxes:
            node = d.join(node, d.box(box))
            seen.append(node)
        return [*seen, d.count_boxes(node), d.cells(node), len(d)]

    used = Diagram(SPACE, core=core)
    program(used)
    assert len(used) > 1024  # past the first size of the node tables (1,024 records, 4,096 children)
    used.release()
    assert len(used) == 2
    assert program(used) == program(Diagram(SPACE, core=core))


def test_the_python_core_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPMATRIX_PURE_PYTHON", "1")
    assert _diagram._compiled_core() is None
    assert Diagram(SPACE, core="python").core == "python"
    assert list(CORES)[-1] == "python"
    assert CORES["python"] is _pycore.Core


@compiled
def test_a_core_built_from_other_source_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from capmatrix.analysis import _core

    monkeypatch.delenv("CAPMATRIX_PURE_PYTHON", raising=False)
    assert _diagram._compiled_core() is _core.Core
    monkeypatch.setattr(_core, "SOURCE_SHA256", "0" * 64)
    with pytest.warns(RuntimeWarning, match="another revision"):
        assert _diagram._compiled_core() is None
    assert Diagram(SPACE).core == "compiled"  # the default: the compiled core first


def _compiler_at_hand() -> bool:
    cc = str(sysconfig.get_config_var("CC") or "cc").split()[0]
    return (sys.platform != "win32" and shutil.which(cc) is not None
            and (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file())


@pytest.mark.skipif(not _compiler_at_hand(), reason="no C compiler and Python headers here")
def test_the_core_is_built_where_a_compiler_is() -> None:
    """An install with a compiler at hand has the compiled core, from this very source."""
    assert "compiled" in CORES
    from capmatrix.analysis import _core

    source = ROOT / "capmatrix" / "analysis" / "_core.c"
    assert hashlib.sha256(source.read_bytes()).hexdigest() == _core.SOURCE_SHA256


def _build_core_module() -> Any:
    spec = importlib.util.spec_from_file_location("build_core", ROOT / "tools" / "build_core.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not _compiler_at_hand(), reason="no C compiler and Python headers here")
def test_the_build_hook_compiles_a_loadable_core(tmp_path: Path) -> None:
    build = _build_core_module()
    out = tmp_path / Path(build.MODULE).name
    assert build.compile_core(out) is None
    spec = importlib.util.spec_from_file_location("capmatrix.analysis._core", out)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert len(module.Core((2,), (0,))) == 2
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # nothing half-written beside it


@pytest.mark.skipif(not _compiler_at_hand(), reason="no C compiler and Python headers here")
def test_a_wheel_build_hands_the_core_over_and_leaves_no_scratch(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook builds the wheel's core and its prebuilt matrix in a scratch directory, removed once the
    wheel is written (the matrix's own scratch copy is gone already)."""
    build = _build_core_module()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("CAPMATRIX_NO_CORE", raising=False)
    hook = build.CoreBuildHook.__new__(build.CoreBuildHook)  # no hatchling project around it here
    data: dict[str, Any] = {"force_include": {}}
    hook.initialize("standard", data)
    inside = {where: Path(built) for built, where in data["force_include"].items()}
    assert sorted(inside) == sorted([build.MODULE, "capmatrix/_shipped_matrix.entry"])
    for built in inside.values():
        assert built.is_file()
        assert built.parent.parent == tmp_path
    assert len(list(tmp_path.iterdir())) == 1  # the one scratch directory
    hook.finalize("standard", data, str(tmp_path / "capmatrix.whl"))
    assert list(tmp_path.iterdir()) == []
    hook.finalize("standard", data, str(tmp_path / "capmatrix.whl"))  # twice: nothing left to remove


def test_a_pure_python_wheel_still_carries_the_prebuilt_matrix(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    build = _build_core_module()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("CAPMATRIX_NO_CORE", "1")
    hook = build.CoreBuildHook.__new__(build.CoreBuildHook)
    data: dict[str, Any] = {"force_include": {}}
    hook.initialize("standard", data)
    assert list(data["force_include"].values()) == ["capmatrix/_shipped_matrix.entry"]
    hook.finalize("standard", data, str(tmp_path / "capmatrix.whl"))
    assert list(tmp_path.iterdir()) == []


def test_a_wheel_whose_matrix_cannot_be_prebuilt_says_why_and_ships_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    build = _build_core_module()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("CAPMATRIX_NO_CORE", "1")
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import prebuild_matrix  # the module the hook's own import finds

    reason = "PyYAML is not installed where the wheel is built"
    monkeypatch.setattr(prebuild_matrix, "prebuild", lambda _out: reason)
    hook = build.CoreBuildHook.__new__(build.CoreBuildHook)
    data: dict[str, Any] = {"force_include": {}}
    hook.initialize("standard", data)
    assert data["force_include"] == {}
    assert "no prebuilt matrix (PyYAML is not installed" in capsys.readouterr().err
    hook.finalize("standard", data, str(tmp_path / "capmatrix.whl"))
    assert list(tmp_path.iterdir()) == []


def test_a_wheel_whose_matrix_does_not_validate_is_not_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    build = _build_core_module()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("CAPMATRIX_NO_CORE", "1")
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import prebuild_matrix  # the module the hook's own import finds

    def invalid(_out: Path) -> None:
        raise prebuild_matrix.InvalidMatrix("capabilities/kernels/trtllm_gates.yaml:42:20: bad value")

    monkeypatch.setattr(prebuild_matrix, "prebuild", invalid)
    hook = build.CoreBuildHook.__new__(build.CoreBuildHook)
    with pytest.raises(prebuild_matrix.InvalidMatrix, match=r"trtllm_gates\.yaml:42:20"):
        hook.initialize("standard", {"force_include": {}})
    assert list(tmp_path.iterdir()) == []  # the scratch directory is gone with the build


def test_an_editable_build_prebuilds_no_matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build = _build_core_module()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("CAPMATRIX_NO_CORE", "1")  # the core of an editable build lands in the checkout
    hook = build.CoreBuildHook.__new__(build.CoreBuildHook)
    data: dict[str, Any] = {"force_include": {}}
    hook.initialize("editable", data)
    assert data["force_include"] == {}
    assert list(tmp_path.iterdir()) == []


def test_a_build_without_a_compiler_says_why_and_leaves_nothing(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    build = _build_core_module()
    real = sysconfig.get_config_var
    monkeypatch.setattr(sysconfig, "get_config_var",
                        lambda name: "/nonexistent/cc" if name == "CC" else real(name))
    reason = build.compile_core(tmp_path / "_core.so")
    assert reason is not None
    assert ("no C compiler" in reason or "Windows" in reason)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------------
# the analyses on each core: every shape the benchmarks generate, check and diff read alike

sys.path.insert(0, str(ROOT))
from benchmarks import shapes  # noqa: E402


@compiled
@pytest.mark.parametrize("shape", shapes.family(), ids=lambda s: s.name)
def test_check_and_diff_read_alike_on_either_core(
    shape: shapes.Shape, monkeypatch: pytest.MonkeyPatch
) -> None:
    # six constrained axes of eight values make diagrams large: fewer rules keep the Python core quick
    syn = shapes.generate(shape, 60 if shape.name == "six-axes" else 240)
    old, new = syn.build(), shapes.twin(shape, syn).build()
    reports = []
    for core in ("compiled", "python"):
        monkeypatch.setattr(_diagram, "CORES", {core: CORES[core]})
        if core == "python":  # and the merge of regions' boxes in Python, wherever it was imported
            for module in [m for name, m in sys.modules.items() if name.startswith("capmatrix.analysis")]:
                if getattr(module, "MERGE", None) is not None:
                    monkeypatch.setattr(module, "MERGE", None)
        reports.append(([f.as_dict() for f in check(old)], diff(old, new).as_dict()))
    assert reports[0] == reports[1]


# --------------------------------------------------------------------------------------------------
# The compiled merge of a region's boxes (``Region.merged(MERGE)``) against ``merged()`` in Python.

# Masks of 1, 3, 64 (one full word) and 7 values; disjoint box sets are drawn as regions.
MERGE_SPACE = Space((
    Axis(name="one", type=AxisType.BOOL, values=(True,), description="one"),
    Axis(name="three", type=AxisType.ENUM, values=("a", "b", "c"), description="three"),
    Axis(name="word", type=AxisType.INT, values=tuple(range(64)), description="word"),
    Axis(name="seven", type=AxisType.INT, values=tuple(range(7)), description="seven"),
))
merge_box = st.tuples(*(st.integers(min_value=1, max_value=m) for m in MERGE_SPACE.full_box()))


def _merge() -> Any:
    from capmatrix.analysis import _core  # present: the tests run only where it is built

    return _core.merge


@compiled
@settings(max_examples=300, deadline=None)
@given(st.lists(merge_box, max_size=40), st.booleans())
def test_the_compiled_merge_gives_merged_boxes_in_order(boxes: list[tuple[int, ...]], repeat: bool) -> None:
    from capmatrix.regions import Region

    region = Region(MERGE_SPACE, boxes)  # made disjoint
    given_boxes = list(region.boxes) * (2 if repeat else 1)  # a box given twice is one box
    python = Region(MERGE_SPACE, given_boxes, disjoint=True).merged()
    ordered = _merge()(given_boxes)
    assert ordered == list(python.boxes)
    assert _diagram.MERGE is not None
    assert list(Region(MERGE_SPACE, given_boxes, disjoint=True).merged(_diagram.MERGE).boxes) == ordered


# Off the grid above: any width (none to a dozen axes), masks anywhere in 0 .. 2**65 (empty ones,
# bools, one full word, past it), boxes not made disjoint first, repeated or not.
wide_mask = st.one_of(st.integers(min_value=0, max_value=(1 << 65)), st.booleans(),
                      st.sampled_from([1 << 63, (1 << 64) - 1, 1 << 64]))


@compiled
@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=12).flatmap(
    lambda w: st.lists(st.tuples(*[wide_mask] * w), max_size=30)))
def test_the_compiled_merge_reads_as_merged_on_any_boxes(boxes: list[tuple[int, ...]]) -> None:
    from capmatrix.regions import Region

    width = len(boxes[0]) if boxes else 0
    space = Space(tuple(Axis(name=f"a{i}", type=AxisType.INT, values=tuple(range(66)), description="a")
                        for i in range(width)))
    python = Region(space, boxes, disjoint=True).merged()
    compiled_one = Region(space, boxes, disjoint=True).merged(_merge())
    assert list(compiled_one.boxes) == list(python.boxes)
    direct = _merge()(boxes)
    if direct is None:  # a mask past 64 bits: Python merged them
        assert any(m >= 1 << 64 for box in boxes for m in box)
    else:
        assert direct == list(python.boxes)
        assert all(type(m) is int for box in direct for m in box)


@compiled
def test_the_compiled_merge_on_a_diagram_s_canonical_boxes() -> None:
    """The analyses' own input: a region's canonical boxes, thousands of them, merged alike."""
    from capmatrix.regions import Region

    rng = random.Random(7)  # noqa: S311 - reproducible test data
    space = Space(tuple(Axis(name=f"x{i}", type=AxisType.INT, values=tuple(range(5)), description="x")
                        for i in range(6)))
    d = Diagram(space, [5, 3, 1, 0, 2, 4])
    node = EMPTY
    for _ in range(80):
        # a rule's box: two to four axes constrained to one or two values
        box = [0b11111] * 6
        for axis in rng.sample(range(6), rng.randint(2, 4)):
            box[axis] = sum(1 << v for v in rng.sample(range(5), rng.randint(1, 2)))
        node = d.join(node, d.box(tuple(box))) if rng.random() < 0.8 else d.minus(node, d.box(tuple(box)))
    boxes = d.boxes(node)
    assert len(boxes) > 300
    python = Region(space, boxes, disjoint=True).merged()
    assert len(python.boxes) < len(boxes)
    assert _merge()(boxes) == list(python.boxes)


@compiled
def test_the_compiled_merge_leaves_wide_masks_to_python_and_refuses_bad_boxes() -> None:
    from capmatrix.regions import Region

    merge = _merge()
    assert merge([]) == []
    assert merge(((1 << 63 | 1, 1), (1 << 63 | 2, 1))) == [((1 << 63) | 3, 1)]  # 64 bits fit
    wide = [(1 << 64, 1), (1, 1)]
    assert merge(wide) is None  # past 64 bits: merged() merges them itself
    space = Space((Axis(name="h", type=AxisType.INT, values=tuple(range(65)), description="h"),
                   Axis(name="b", type=AxisType.BOOL, values=(True,), description="b")))
    assert list(Region(space, wide, disjoint=True).merged(merge).boxes) == [((1 << 64) | 1, 1)]
    assert merge([(0, 1), (0, 2), (1, 0)]) == []  # boxes with an empty mask hold no cell, as in Region
    assert merge([(0, 1), (1, 2), (1, 1)]) == [(1, 3)]
    assert merge([(1,) * 4097, (2,) * 4097]) is None  # more axes than a core has levels: Python merges
    with pytest.raises(ValueError, match="negative"):
        merge([(1 << 64,), (-1,)])  # a mask past 64 bits stops nothing else from being checked
    with pytest.raises(TypeError, match="not an int"):
        merge([(1 << 64,), ("x",)])
    with pytest.raises(TypeError, match="box 1 is list"):
        merge([(1, 2), [1, 2]])
    with pytest.raises(ValueError, match="box 1 has 3 masks"):
        merge([(1, 2), (1, 2, 3)])
    with pytest.raises(ValueError, match="negative"):
        merge([(1, -2)])
    with pytest.raises(TypeError, match="not an int"):
        merge([(1, "2")])
    with pytest.raises(TypeError, match="sequence of boxes"):
        merge(3)
