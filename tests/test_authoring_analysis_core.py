"""The diagram core's own edges: counts past 128 bits, a released store, masks past one word."""

from __future__ import annotations

import random

import pytest

from capmatrix.authoring.analysis._diagram import CORES, EMPTY, FULL, Diagram
from capmatrix.model import Axis, AxisType
from capmatrix.regions import Space

# An axis of 70 values: its masks take two words, and so do the box sets of a rule list past 64 boxes.
SPACE = Space((
    Axis(name="sm", type=AxisType.INT, values=(80, 90, 100), description="sm"),
    Axis(name="head", type=AxisType.INT, values=tuple(range(1, 71)), description="head"),
    Axis(name="sd", type=AxisType.BOOL, values=(False, True), description="sd"),
    Axis(name="kv", type=AxisType.ENUM, values=("a", "b", "c", "d", "e"), description="kv"),
))
WHOLE = SPACE.full_box()


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
