"""Decision tables (derived axes, role orders) compiled to bit sets: the first row whose ``when`` holds.

A table is an ordered list of rows, each a ``when`` (a union of boxes of conditions; empty: always).
Compiled, every box is one bit, numbered in row order, and each axis the table reads has, per known
value, the bit set of the boxes that admit it. Looking a query up is then one AND per axis read: the
lowest box left standing names the first row that does not fail. This answers exactly as walking
the rows with :func:`capmatrix.model.in_boxes` does, without a memo of earlier queries.
"""

from __future__ import annotations

from capmatrix.regions import bits

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from capmatrix.model import Axis, AxisValue, Boxes, Condition

__all__ = ["NO_ROW", "Table"]

#: :meth:`Table.row`'s answer when no row holds.
NO_ROW = -1


class Table:
    """One compiled decision table; :meth:`row` answers which row decides a query's values."""

    __slots__ = ("_axes", "_every", "_row_boxes", "_row_of", "reads")

    #: The axes the rows read, in first-seen order.
    reads: tuple[str, ...]
    #: Per axis read: its name, its index of known values ((type, value) -> position), the boxes
    #: that admit each known value, the boxes with a condition on it, and each box's condition.
    _axes: tuple[tuple[str, dict[tuple[type, AxisValue], int], tuple[int, ...], int,
                       tuple[Condition | None, ...]], ...]
    _every: int
    #: Per box: its row; per row: its boxes.
    _row_of: tuple[int, ...]
    _row_boxes: tuple[int, ...]

    def __init__(
        self, whens: Iterable[Boxes], axes: Mapping[str, Axis], masks: dict[int, int] | None = None
    ) -> None:
        """Compile rows ``whens`` (in order) over ``axes`` (every axis a ``when`` names, by name).

        ``masks`` remembers each condition's mask by its identity (as :func:`capmatrix.regions.box_of`
        does): the tables of one matrix share many conditions. Give it only while they are alive.
        """
        if masks is None:
            masks = {}
        boxes: list[Mapping[str, Condition]] = []
        row_of: list[int] = []
        row_boxes: list[int] = []
        for row, when in enumerate(whens):
            mine = 0
            for box in when or ({},):  # no ``when``: one box without conditions, which always holds
                mine |= 1 << len(boxes)
                boxes.append(box)
                row_of.append(row)
            row_boxes.append(mine)
        self.reads = tuple(dict.fromkeys(name for box in boxes for name in box))
        every = (1 << len(boxes)) - 1
        compiled = []
        for name in self.reads:
            axis = axes[name]
            conds = tuple(box.get(name) for box in boxes)
            constrained = sum(1 << b for b, cond in enumerate(conds) if cond is not None)
            # The boxes of each distinct mask of admitted values (a box without a condition on the
            # axis admits every value), spread over the values once per mask.
            groups = {axis.full_mask: every ^ constrained}
            for b, cond in enumerate(conds):
                if cond is not None:
                    mask = masks.get(id(cond))
                    if mask is None:
                        mask = masks[id(cond)] = cond.mask(axis.values)
                    groups[mask] = groups.get(mask, 0) | 1 << b
            admit = [0] * len(axis.values)
            for mask, group in groups.items():
                for vi in bits(mask):
                    admit[vi] |= group
            index = {(type(v), v): i for i, v in enumerate(axis.values)}
            compiled.append((name, index, tuple(admit), constrained, conds))
        self._axes = tuple(compiled)
        self._every = every
        self._row_of = tuple(row_of)
        self._row_boxes = tuple(row_boxes)

    def row(self, values: Mapping[str, AxisValue]) -> int | None:
        """The index of the first row whose ``when`` holds for ``values``.

        :data:`NO_ROW` when none does; None when the first row that does not fail depends on an axis
        that ``values`` leaves out.
        """
        live = self._every
        missing = 0
        for name, index, admit, constrained, conds in self._axes:
            value = values.get(name)
            if value is None:
                missing |= constrained
                continue
            vi = index.get((type(value), value))
            if vi is not None:
                live &= admit[vi]
            else:  # a value outside the known ones: asked of each condition
                live &= sum(1 << b for b, cond in enumerate(conds) if cond is None or cond.contains(value))
        if not live:
            return NO_ROW
        row = self._row_of[(live & -live).bit_length() - 1]
        mine = live & self._row_boxes[row]
        # A box of the row holds when none of its conditions is on a missing axis.
        return row if mine ^ (mine & missing) else None
