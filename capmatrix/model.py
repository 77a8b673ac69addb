"""Immutable value types of a loaded capability matrix: axes, conditions, rules, kernels, models, roles."""

from __future__ import annotations

import enum

from capmatrix._core.classes import describe_class, signature, signatures
from capmatrix._core.record import field, record
from capmatrix.errors import InvalidValue

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "CORE",
    "GPU",
    "NONE",
    "Axis",
    "AxisType",
    "AxisValue",
    "Condition",
    "DerivedAxis",
    "DerivedRow",
    "Effect",
    "EngineReleases",
    "Guard",
    "Interval",
    "Kernel",
    "Location",
    "ModelFamily",
    "Release",
    "Role",
    "RoleOrder",
    "Rule",
    "Status",
    "ValueOf",
    "format_value",
    "signature",
]

AxisValue = int | str | bool

#: The scope of the axes every engine shares (:attr:`Axis.scope`).
CORE = "core"

#: The value of an optional axis that was not given ("not checked"): every condition on the axis
#: admits it, so a rule about the axis does not constrain a query that leaves it unset.
NONE = "none"


class _StrEnum(str, enum.Enum):
    """A str enum whose ``str()`` is its YAML spelling on every Python version."""

    def __str__(self) -> str:
        return str(self.value)


class AxisType(_StrEnum):
    """The type of a query axis."""

    ENUM = "enum"
    INT = "int"
    BOOL = "bool"


class Effect(_StrEnum):
    """What a rule does to its region: grant support, or take it away."""

    GRANT = "grant"
    EXCLUDE = "exclude"


class Status(_StrEnum):
    """How a rule is known.

    Seen on hardware, generated from a source table by a tool in tools/, read from the source code at
    the cited commit, not checked, or known to be wrong in the engine.
    """

    VERIFIED = "verified"
    DERIVED = "derived"
    READ_FROM_CODE = "read_from_code"
    UNTESTED = "untested"
    KNOWN_ISSUE = "known_issue"


@record(kw_only=True)
class Location:
    """Where something was declared: a file and a 1-based line and column."""

    path: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return self.path
        return f"{self.path}:{self.line}"


_UNSET = object()

#: Rendered masks an axis keeps (per axis, about 1 MB at most; past this, texts are made anew).
RENDERED_LIMIT = 1 << 12


@record(kw_only=True)
class Axis:
    """One query axis and its known universe of values."""

    name: str
    type: AxisType
    values: tuple[AxisValue, ...]
    description: str
    families: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    default: AxisValue | None = None
    location: Location | None = field(default=None, compare=False)
    #: An optional axis has the extra value :data:`NONE` (its default): "not given, not checked".
    optional: bool = False
    #: An environment axis describes the installation (libraries, flags), not the model; it has a default.
    environment: bool = False
    #: An int axis's domain is open: :attr:`values` ends with this many representatives, one per class
    #: of ints that the matrix's conditions treat alike and that holds no listed value
    #: (:mod:`capmatrix._core.classes`); :attr:`known` are the values the YAML lists.
    extra: int = 0
    #: The ints an int axis takes at all (``min`` / ``max`` in axes.yaml; None: unbounded): a head size,
    #: a block size or a beam width below 1 is no input, so a query with one is refused and no class
    #: representative, region or witness shows one.
    minimum: int | None = None
    maximum: int | None = None
    #: The distinct conditions the matrix puts on this (int) axis: an int's class is which of them it meets.
    cuts: tuple[Condition, ...] = field(default=(), compare=False, repr=False)
    #: Families defined by a range (``sm_10x: "[100, 109]"``), by name: a condition naming one is that range.
    family_ranges: Mapping[str, str] = field(default_factory=dict)
    #: Whose vocabulary the axis is: ``core`` (hardware, model geometry, numerics, workload: every engine's
    #: kernels may read it) or one engine's (its build flags and settings: only that engine's kernels,
    #: tables and roles read it).
    scope: str = CORE
    #: Other spellings of an enum axis's values (an engine's own words: ``float16`` for ``fp16``), each
    #: mapped to the canonical value a query with it is answered as.
    spellings: Mapping[str, str] = field(default_factory=dict)
    #: Other names of the axis a query may use (an engine's own word for the concept, a former name),
    #: each mapped to the scope whose word it is: vLLM's ``block_size`` is ``tokens_per_block``.
    aliases: Mapping[str, str] = field(default_factory=dict)
    #: An engine's own default, by engine: what its kernels and roles are asked with when a query gives
    #: no value (vLLM leaves tokens_per_block unset where TensorRT-LLM's default is 32).
    engine_defaults: Mapping[str, AxisValue] = field(default_factory=dict)
    #: signature -> position of the first value with it, built on first use by :meth:`locate`
    _classes: dict[int, int] = field(default_factory=dict, init=False, compare=False, repr=False)
    #: representative -> its class as text, filled by :meth:`describe` (pages describe each many times)
    _descriptions: dict[int, str] = field(default_factory=dict, init=False, compare=False, repr=False)
    #: mask -> its values, its text, its phrase in a box's description (reports render the same masks
    #: thousands of times: a diff's JSON lists every axis of up to 1,000 boxes per change)
    _rendered: dict[tuple[str, int, int], object] = field(
        default_factory=dict, init=False, compare=False, repr=False)

    @property
    def known(self) -> tuple[AxisValue, ...]:
        """The values the YAML lists (for docs, grids and examples), without the class representatives."""
        return self.values[: len(self.values) - self.extra] if self.extra else self.values

    def spelled(self, value: AxisValue, prefix: str) -> str | None:
        """The spelling of ``value`` that starts with ``prefix``, without it; None when there is none.

        The dtype axis spells each value torch's way (``torch.bfloat16: bf16``), so
        ``spelled("bf16", "torch.")`` is torch's attribute name, ``bfloat16``.
        """
        for word, meant in self.spellings.items():
            if meant == value and word.startswith(prefix):
                return word[len(prefix):]
        return None

    def index(self, value: AxisValue) -> int | None:
        """Position of ``value`` among the values (known or representative), or None when it is not one."""
        for i, known in enumerate(self.values):
            if known == value and type(known) is type(value):
                return i
        return None

    def locate(self, value: AxisValue) -> int | None:
        """Position of ``value``, or of the value standing for its class (an int that no list names).

        None when ``value`` is not an int of this axis and not one of its values, or when its class
        has no representative (an axis built without the matrix's cuts).
        """
        found = self.index(value)
        if found is not None or type(value) is not int or not self.cuts:
            return found
        classes = self._classes
        if not classes:  # built on first use: each value's signature, the first value of each wins
            built: dict[int, int] = {}
            for i, known in enumerate(self.values):
                if type(known) is int:
                    built.setdefault(signature(known, self.cuts), i)
            classes.update(built)  # all at once: another thread never sees half of it
        return classes.get(signature(value, self.cuts))

    def describe(self, value: AxisValue) -> str:
        """``value`` as text; a class representative as the class it stands for (``[264, 320)``)."""
        i = self.index(value)
        if i is None or i < len(self.values) - self.extra or type(value) is not int:
            return format_value(value)
        text = self._descriptions.get(value)
        if text is None:  # one setitem of an immutable result: racing threads store the same text
            text = self._descriptions[value] = describe_class(
                value, self.cuts, self.known, (self.minimum, self.maximum))
        return text

    @property
    def full_mask(self) -> int:
        """Bit mask with one bit per known value."""
        return (1 << len(self.values)) - 1

    def mask_of(self, values: set[AxisValue] | frozenset[AxisValue]) -> int:
        """Bit mask of the known values in ``values``."""
        mask = 0
        for value in values:
            i = self.index(value)
            if i is not None:
                mask |= 1 << i
        return mask

    def values_of(self, mask: int) -> tuple[AxisValue, ...]:
        """Known values whose bit is set in ``mask``."""
        key = ("values", mask, 0)
        found = self._rendered.get(key)
        if found is None:
            values = self.values
            found = self._remember(key, tuple(values[i] for i in range(len(values)) if mask >> i & 1))
        return found  # type: ignore[return-value]

    def _remember(self, key: tuple[str, int, int], value: object) -> object:
        # One setitem of an immutable result (racing threads store equal ones), up to a bound: a
        # long-lived process rendering ever new masks keeps no more than that.
        rendered = self._rendered
        if len(rendered) < RENDERED_LIMIT:
            rendered[key] = value
        return value

    def format_values(self, mask: int) -> str:
        """Render the values of ``mask``: one value bare, several in braces (``{120, 121}``).

        A class representative is shown as the class it stands for (``[264, 320)``).
        """
        key = ("text", mask, 0)
        found = self._rendered.get(key)
        if found is None:
            found = self._remember(key, self._format_values(mask))
        return found  # type: ignore[return-value]

    def pick(self, mask: int) -> AxisValue:
        """The value a witness of a box taking ``mask`` shows: the default where allowed, else the first."""
        key = ("pick", mask, 0)
        found = self._rendered.get(key, _UNSET)
        if found is _UNSET:
            default = self.default
            at = None if default is None else self.index(default)
            if at is None or not mask >> at & 1:
                default = self.values[(mask & -mask).bit_length() - 1]
            found = self._remember(key, default)
        return found  # type: ignore[return-value]

    def phrase(self, mask: int, whole: int) -> str:
        """How a box that takes ``mask`` of ``whole`` reads on this axis (``sm in {120, 121}``).

        Most of ``whole`` reads as what is left out (``head_dim not in {80, 576}``), a class
        representative as its class (``sm >=122``). The caller leaves out an axis the box keeps whole.
        """
        key = ("phrase", mask, whole)
        found = self._rendered.get(key)
        if found is None:
            found = self._remember(key, self._phrase(mask, whole))
        return found  # type: ignore[return-value]

    def _phrase(self, mask: int, whole: int) -> str:
        values = self.values_of(mask)
        rest = whole & ~mask
        if len(values) > 2 and len(self.values_of(rest)) < len(values) // 2:
            left = self.values_of(rest)
            shown = self.format_values(rest)
            if len(left) > 1:
                return f"{self.name} not in {shown}"
            if left[0] in self.known:
                return f"{self.name}!={shown}"
            return f"{self.name} not ({shown})"
        if len(values) == 1 and (mask & -mask).bit_length() > len(self.known):
            return f"{self.name} {self.format_values(mask)}"  # a class: sm >=122
        if len(values) == 1:
            return f"{self.name}={self.format_values(mask)}"
        return f"{self.name} in {self.format_values(mask)}"

    def _format_values(self, mask: int) -> str:
        chosen = self.values_of(mask)
        if len(chosen) == 1:
            return self.describe(chosen[0])
        if self.extra:  # class representatives among the listed values, in value order
            chosen = tuple(sorted(chosen, key=lambda v: (type(v) is not int, v if type(v) is int else 0)))
        texts = [self.describe(v) for v in chosen]
        # A class that reads as several words is bracketed, so that the braces still list items.
        return "{" + ", ".join(f"({t})" if " " in t else t for t in texts) + "}"

    def parse(self, text: str) -> AxisValue:
        """Read a value of this axis from its text form (the inverse of :func:`format_value`).

        An int axis takes a base-10 integer; a bool axis takes ``true``/``false`` (also ``yes``/``no``,
        ``on``/``off``, ``1``/``0``, in any case); an enum axis takes the text as it is. Whether the
        value is one the axis declares is not checked here: the resolver answers values outside the
        universe through the rules' ranges.

        >>> Axis(name="causal", type=AxisType.BOOL, values=(False, True), description="").parse("yes")
        True

        :raises InvalidValue: for a text that is not a value of the axis's type.
        """
        if self.optional and text == NONE:
            return NONE
        if self.type is AxisType.INT:
            # ASCII digits only: int() would also read "٩٠", "9_0" and " 90 " as 90.
            digits = text[1:] if text[:1] in ("+", "-") else text
            if len(text) > _MAX_INT_CHARS or not (digits.isascii() and digits.isdigit()):
                raise InvalidValue(self.name, text, "an integer")
            return int(text, 10)
        if self.type is AxisType.BOOL:
            lowered = text.lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise InvalidValue(self.name, text, "true or false")
        return text


def format_value(value: object) -> str:
    """The one text form of an axis value: ``true`` / ``false`` for bools, ``str()`` otherwise.

    :meth:`Axis.parse` reads it back. Every printer (CLI, witnesses, reasons, pages) uses it.

    >>> format_value(True), format_value(120), format_value("mla")
    ('true', '120', 'mla')
    """
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


#: The text of an int axis value: an optional sign and ASCII digits (the range is checked by the query;
#: past Python's default int_max_str_digits, 4300, the text is not read at all).
_MAX_INT_CHARS = 4300

#: The texts :meth:`Axis.parse` reads as booleans (case-insensitive).
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


@record(kw_only=True)
class Interval:
    """An integer interval; ``None`` bounds are open-ended."""

    low: int | None = None
    low_inclusive: bool = True
    high: int | None = None
    high_inclusive: bool = False

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        if self.low is not None and (value < self.low or (value == self.low and not self.low_inclusive)):
            return False
        return not (
            self.high is not None
            and (value > self.high or (value == self.high and not self.high_inclusive))
        )

    @property
    def open_ended(self) -> bool:
        """True when one bound is missing, so the interval reaches past any finite universe."""
        return self.low is None or self.high is None

    def __str__(self) -> str:
        if self.low is None and self.high is not None:
            return f"<{'=' if self.high_inclusive else ''}{self.high}"
        if self.high is None and self.low is not None:
            return f">{'=' if self.low_inclusive else ''}{self.low}"
        left = "[" if self.low_inclusive else "("
        right = "]" if self.high_inclusive else ")"
        return f"{left}{self.low}, {self.high}{right}"


@record(kw_only=True)
class Condition:
    """What one rule requires of one axis: values, ranges and families, possibly negated."""

    axis: str
    text: str
    values: frozenset[AxisValue] = frozenset()
    intervals: tuple[Interval, ...] = ()
    families: tuple[str, ...] = ()
    negated: bool = False
    #: ``{multiple_of: m}`` items: integers divisible by any of these.
    moduli: tuple[int, ...] = ()
    #: The condition is on an optional axis, where :data:`NONE` (not given) is answered by
    #: :attr:`admits_none` alone, whatever the condition says.
    optional: bool = False
    #: On an optional axis: whether :data:`NONE` passes (a grant's condition: not checked, so it
    #: holds) or not (an exclusion's condition: not checked, so the exclusion does not apply).
    admits_none: bool = False
    #: A condition made by the loader over an open int axis's classes (a rule on a derived axis,
    #: expanded): an int meets it when its :func:`signature` over ``cuts`` is one of ``signatures``.
    signatures: frozenset[int] = frozenset()
    cuts: tuple[Condition, ...] = ()

    def contains(self, value: AxisValue) -> bool:
        """Whether ``value`` (known to the universe or not) satisfies this condition."""
        # Membership first (equal values hash alike, so a miss is exact); a hit is checked for its
        # type, as True == 1 and 1 == True.
        listed = value in self.values and any(v == value and type(v) is type(value) for v in self.values)
        return self._admits(value, listed)

    def mask(self, values: Sequence[AxisValue]) -> int:
        """The bits of ``values`` this condition admits: bit ``i`` is :meth:`contains` of ``values[i]``.

        The same test, with the condition's values looked up once as (type, value) pairs instead of
        scanned per value (compiling a rule's box asks it of every value of every axis).
        """
        if self.cuts:
            # An int meets it by its signature over the cuts, computed once per cuts and values.
            out = 0
            for i, (value, sig) in enumerate(zip(values, signatures(values, self.cuts), strict=True)):
                if (sig in self.signatures) if sig is not None else self.contains(value):
                    out |= 1 << i
            return out
        typed = {(type(v), v) for v in self.values}
        out = 0
        if not self.intervals and not self.moduli and not self.optional:
            # The common case, inline: listed values only (possibly negated).
            negated = self.negated
            for i, value in enumerate(values):
                if ((type(value), value) in typed) is not negated:
                    out |= 1 << i
            return out
        intervals, moduli, negated, optional = self.intervals, self.moduli, self.negated, self.optional
        for i, value in enumerate(values):
            kind = type(value)
            if optional and kind is str and value == NONE:
                hit = self.admits_none
            else:
                hit = (kind, value) in typed
                # Only an int (not a bool) lies in an interval or is a multiple; loops, not any():
                # no generator per value.
                if not hit and kind is not bool and isinstance(value, int):
                    for interval in intervals:
                        if value in interval:
                            hit = True
                            break
                    if not hit and kind is int:
                        for m in moduli:
                            if value % m == 0:
                                hit = True
                                break
                hit = hit is not negated
            if hit:
                out |= 1 << i
        return out

    def _admits(self, value: AxisValue, listed: bool) -> bool:
        """:meth:`contains`, given whether ``value`` is one of :attr:`values` (same type)."""
        if self.optional and value == NONE and type(value) is str:
            return self.admits_none
        if self.cuts and type(value) is int:
            return signature(value, self.cuts) in self.signatures
        if listed or not (self.intervals or self.moduli):  # most conditions only list values
            return listed != self.negated
        hit = any(value in interval for interval in self.intervals) or (
            type(value) is int and any(value % m == 0 for m in self.moduli))
        return hit != self.negated

    @property
    def open_ended(self) -> bool:
        """True when the condition admits values beyond any finite bound."""
        return self.negated or bool(self.moduli) or any(i.open_ended for i in self.intervals)

    def __str__(self) -> str:
        return self.text


@record(kw_only=True)
class Rule:
    """One grant or exclusion of a kernel over a region of the axes."""

    id: str
    kernel: str
    effect: Effect
    conditions: Mapping[str, Condition]
    reason: str
    source: str
    status: Status
    location: Location
    verified: Mapping[str, str] | None = None
    #: For a part of a rule that tests derived axes: those conditions as written (``fa_version [3, 4]``);
    #: ``conditions`` then hold one box of the region they stand for, over the axes the tables read.
    derived: str | None = None

    def describe_region(self) -> str:
        """The region as written: ``sm >=80 and attention [mha, gqa]``, or ``everything``."""
        parts = [f"{axis} {cond.text}" for axis, cond in self.conditions.items()]
        if self.derived is not None:
            parts.append(f"({self.derived})")
        if not parts:
            return "everything"
        return " and ".join(parts)


@record
class ValueOf:
    """A meaning that reads another axis of the same query: ``auto: {value_of: dtype}`` in ``means``."""

    axis: str


@record(kw_only=True)
class Guard:
    """What a gate sends queries to: kernels or roles (``targets``), where, and with which values.

    ``when`` is where the gate sends queries to the targets: a union of boxes (none: everywhere), so
    that it can also say how the gate's own axes line up with the targets' (vLLM's ``auto`` KV cache is
    the model's dtype: one box per dtype);
    ``axes`` are the values the guarded query gets where the gate admits (``spec_dec: one_model``),
    ``refused`` those it gets where the gate refuses (``spec_dec: none``: a plain decode), or None
    when the gate's refusal sends nothing to the targets;
    ``means`` says what a gate-side word is for the targets, per enum axis: a value of that axis, or
    the query's value of another axis (vLLM's ``kv_cache_dtype: auto`` is the model's ``dtype``).
    Meanings read the query as the gate sees it and do not chain; ``axes`` and ``refused`` pin after.
    ``caught_by`` names gates the engine asks later, at engine start, of the same query (vLLM's
    ``TritonAttentionImpl.__init__``): where one of them refuses, the gate's "yes" ends in that clean
    refusal rather than in a kernel call (``capmatrix check`` C113, not C112).
    """

    targets: tuple[str, ...]
    location: Location
    when: tuple[Mapping[str, Condition], ...] = ()
    axes: Mapping[str, AxisValue] = field(default_factory=dict)
    refused: Mapping[str, AxisValue] | None = None
    means: Mapping[str, Mapping[AxisValue, AxisValue | ValueOf]] = field(default_factory=dict)
    caught_by: tuple[str, ...] = ()

    def meant(self, values: Mapping[str, AxisValue]) -> dict[str, AxisValue]:
        """``values`` as the targets read them: each word of ``means`` replaced by what it means.

        A meaning that reads an axis ``values`` lacks leaves the word as it is (nothing to read).
        """
        out = dict(values)
        for axis, table in self.means.items():
            word = values.get(axis)
            meaning = None if word is None else table.get(word)
            if isinstance(meaning, ValueOf):
                meaning = values.get(meaning.axis)
            if meaning is not None:
                out[axis] = meaning
        return out


@record(kw_only=True)
class Kernel:
    """A kernel (or an engine gate in front of kernels) and its rules."""

    name: str
    description: str
    rules: tuple[Rule, ...]
    location: Location
    kind: str = "kernel"
    engine: str | None = None
    source: str | None = None
    #: For a gate: the kernels or role it sends queries to (``capmatrix check`` C111 / C112).
    guards: Guard | None = None

    @property
    def grants(self) -> tuple[Rule, ...]:
        """The rules that add support."""
        return tuple(r for r in self.rules if r.effect is Effect.GRANT)

    @property
    def exclusions(self) -> tuple[Rule, ...]:
        """The rules that take support away."""
        return tuple(r for r in self.rules if r.effect is Effect.EXCLUDE)


@record(kw_only=True)
class GPU:
    """A GPU product and its compute capability: what ``--gpu NAME`` stands for (``--sm``)."""

    #: The entry's key in ``gpus:`` (``rtx_5090``).
    key: str
    #: The product name as NVIDIA writes it (``RTX 5090``).
    name: str
    sm: int
    location: Location
    #: Other names of the same chip (``GeForce RTX 5090``, ``GB202``); matched like ``name``.
    aliases: tuple[str, ...] = ()
    source: str | None = None

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every name the GPU answers to: its key, its name, then its aliases."""
        return (self.key, self.name, *self.aliases)


@record(kw_only=True)
class ModelFamily:
    """A model family and the axis values a query for it gets by default."""

    name: str
    description: str
    axes: Mapping[str, AxisValue]
    source: str
    location: Location
    hf_model_types: tuple[str, ...] = ()
    recognise: str | None = None
    #: Hugging Face repository ids (``owner/name``) of the checkpoints this entry describes.
    hf_ids: tuple[str, ...] = ()
    #: The ``config.json`` fields the entry is derived from, as recorded (data, not axes).
    hf_config: Mapping[str, object] | None = None


#: A region as a union of boxes, each a mapping axis -> condition (an empty mapping: everywhere).
Boxes = tuple["Mapping[str, Condition]", ...]


def in_boxes(boxes: Boxes, values: Mapping[str, AxisValue]) -> bool | None:
    """Whether ``values`` lie in the union of ``boxes``; None when that depends on an axis not given."""
    undecided = False
    for box in boxes:
        inside: bool | None = True
        for name, cond in box.items():
            value = values.get(name)
            if value is None:
                inside = None
            elif not cond.contains(value):
                inside = False
                break
        if inside:
            return True
        if inside is None:
            undecided = True
    return None if undecided else False


@record(kw_only=True)
class DerivedRow:
    """One row of a derived axis's decision table: where it applies (``when``) and the value it gives."""

    value: AxisValue
    #: The row's region over the axes the table reads (derived inputs already expanded); () = always.
    when: Boxes
    text: str
    location: Location


@record(kw_only=True)
class DerivedAxis:
    """An axis whose value is computed from other axes by an ordered table: the first matching row wins."""

    axis: Axis
    rows: tuple[DerivedRow, ...]

    def value(self, values: Mapping[str, AxisValue]) -> AxisValue | None:
        """The table's value for ``values``; None when an input the table needs is not given."""
        for row in self.rows:
            inside = in_boxes(row.when, values) if row.when else True
            if inside is None:
                return None
            if inside:
                return row.value
        return None  # pragma: no cover - the loader requires a last row without `when`


@record(kw_only=True)
class RoleOrder:
    """One candidate order of a role and the queries it applies to (``when``; () = every query)."""

    when: Boxes
    candidates: tuple[str, ...]
    text: str
    location: Location
    #: Where this order applies and no earlier one does: disjoint boxes (bit masks per axis of the
    #: matrix's space, over the known values), for the analyses.
    area: tuple[tuple[int, ...], ...] = ()


@record(kw_only=True)
class Role:
    """An ordered list of candidate kernels for one job; the first supported one wins.

    A role with ``orders`` picks its list by the query: the first order whose ``when`` holds. Its
    ``candidates`` are then every kernel of any order, in first-seen order.

    A role that names roles in ``asks_first`` is composed when it is loaded: its ``orders`` are those
    roles' orders, in turn, then its own, so every reader answers it without knowing of the others.
    """

    name: str
    description: str
    candidates: tuple[str, ...]
    location: Location
    source: str | None = None
    #: Axis values every candidate is asked with unless the query gives its own (e.g. phase).
    axes: Mapping[str, AxisValue] = field(default_factory=dict)
    orders: tuple[RoleOrder, ...] = ()
    #: The roles whose orders come before its own (already composed into ``orders``), for listings.
    asks_first: tuple[str, ...] = ()

    def order_for(self, values: Mapping[str, AxisValue]) -> tuple[tuple[str, ...], bool]:
        """The candidates for a query's values, and whether the choice of list was decided.

        A role without orders always answers ``candidates``; with orders, the first order whose
        ``when`` holds (no order: no candidates). Undecided when a ``when`` reads an axis not given.
        """
        if not self.orders:
            return self.candidates, True
        for order in self.orders:
            inside = in_boxes(order.when, values) if order.when else True
            if inside is None:
                return (), False
            if inside:
                return order.candidates, True
        return (), True


@record(kw_only=True)
class Release:
    """One modelled release of an engine: its version and what pins it (wheel digest, commit, tag)."""

    version: str
    location: Location
    date: str | None = None
    #: How the release is identified: ``wheel``, ``sha256``, ``commit``, ``tag`` (whichever are known).
    pins: Mapping[str, str] = field(default_factory=dict)
    source: str | None = None


@record(kw_only=True)
class EngineReleases:
    """The modelled releases of one engine, oldest first, and the words each release knows.

    The releases are the values of the enum axis :attr:`axis` (scope: the engine; default: the
    newest), so a rule, order or guard of the engine that holds in some releases only is a condition on
    that axis (``since`` / ``until`` in the YAML); everything else holds in every release.
    """

    engine: str
    axis: str
    versions: tuple[Release, ...]
    location: Location
    description: str = ""
    #: The engine's own vocabularies (backend names, KV-cache dtype words, ...): per vocabulary, each
    #: word with the versions that know it, in the engine's order.
    words: Mapping[str, tuple[tuple[str, tuple[str, ...]], ...]] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        """The versions, oldest first."""
        return tuple(r.version for r in self.versions)

    @property
    def newest(self) -> str:
        """The newest modelled version: what a question that names no release is answered as."""
        return self.versions[-1].version

    def release(self, version: str) -> Release | None:
        """The release called ``version``, or None."""
        for release in self.versions:
            if release.version == version:
                return release
        return None

    def words_at(self, vocabulary: str, version: str) -> tuple[str, ...]:
        """The words of ``vocabulary`` that release ``version`` knows, in the engine's order."""
        return tuple(word for word, versions in self.words.get(vocabulary, ()) if version in versions)
