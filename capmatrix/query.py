"""KernelQuery: an immutable, hashable question "may this kernel run for these axis values?"."""

from __future__ import annotations

import enum
import numbers
import operator
from collections.abc import Mapping

from capmatrix.errors import InvalidQuery

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from typing import Final

    from capmatrix.model import AxisValue

__all__ = ["ANY", "KernelQuery"]


class _Any(enum.Enum):
    ANY = "*"

    def __repr__(self) -> str:
        return "ANY"

    def __str__(self) -> str:
        return "*"


#: Pass as an axis value to make the axis range over its universe despite a model or axis default.
ANY: Final = _Any.ANY

QueryValue = "AxisValue | _Any"
#: Axis integers must fit in a signed 64-bit word (as in the YAML files).
_MAX_INT_BITS = 63
_INT_LIMIT = 1 << _MAX_INT_BITS
_set = object.__setattr__


def _short(value: object) -> str:
    """``repr(value)`` cut to 80 characters (and safe for ints too long to print)."""
    try:
        text = repr(value)
    except ValueError:  # an int above sys.get_int_max_str_digits()
        return f"<{type(value).__name__} too large to print>"
    except Exception:  # noqa: BLE001 - a foreign __repr__ may raise anything
        return f"<{type(value).__name__} whose repr() fails>"

    return text if len(text) <= 80 else text[:77] + "..."


def _name(what: str, value: object) -> str:
    """A kernel or model name as a plain ``str`` (a str subclass, e.g. a StrEnum member, by its value).

    :raises InvalidQuery: for anything that is not a string.
    """
    if isinstance(value, str):
        return str.__str__(value)
    raise InvalidQuery(f"{what} must be a string, got {_short(value)}")


def _normalise(name: str, value: object) -> AxisValue:
    """An axis value as a plain ``str``, ``int`` or ``bool``, the only types the resolver compares.

    Values of subclasses and integer-like types are converted once here, so that a ``StrEnum`` or
    ``(str, Enum)`` member, an ``IntEnum`` member or a NumPy integer answers exactly as the plain value
    does (the resolver matches values by type and value: a ``str`` subclass would otherwise fall
    outside the universe). Floats, even integral ones, and everything else are refused.

    :raises InvalidQuery: for None, a value of another type, or an integer beyond 64 bits.
    """
    if value is None:
        raise InvalidQuery(f"axis {name!r} is None; give a value or leave the axis out")
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int | numbers.Integral) and not isinstance(value, bool):
        try:
            number = operator.index(value)
        except Exception as exc:  # noqa: BLE001 - any failure of a foreign __index__ is a bad value
            raise InvalidQuery(
                f"axis {name!r}: {_short(value)} cannot be read as an integer ({type(exc).__name__})"
            ) from None
        if not -_INT_LIMIT < number < _INT_LIMIT:
            raise InvalidQuery(f"axis {name!r}: integer out of range ({number.bit_length()} bits)")
        return number
    hint = ""
    if isinstance(value, float) and value.is_integer():
        hint = f"; pass int({_short(value)}) if an integer is meant"
    raise InvalidQuery(
        f"axis {name!r} has a value of type {type(value).__name__}: {_short(value)}; "
        f"use a string, an int or a bool{hint}"
    )


class KernelQuery:
    """A kernel (or none, for role selection), an optional model, and axis values.

    Values are checked against the matrix when resolved; here their Python type is checked, and values
    of subclasses (a ``StrEnum`` member, an ``IntEnum`` member, a NumPy integer) become the plain
    ``str`` or ``int`` they stand for, so that they answer exactly as the plain value does.

    >>> KernelQuery("xqa", sm=120, model="llama", spec_dec="one_model")
    KernelQuery('xqa', model='llama', sm=120, spec_dec='one_model')
    >>> KernelQuery("xqa", sm=None)
    Traceback (most recent call last):
    ...
    capmatrix.errors.InvalidQuery: axis 'sm' is None; give a value or leave the axis out
    """

    __slots__ = ("_axes", "_hash", "_typed", "kernel", "model")

    kernel: str | None
    model: str | None
    _axes: tuple[tuple[str, AxisValue | _Any], ...]
    #: (kernel, model, ((axis, value), ...), (type of each value, ...)): the identity of the query,
    #: computed once, so that equality (the dict lookup behind every cached answer) compares one tuple;
    #: the types tell ``True`` from ``1``.
    _typed: tuple[object, ...]
    _hash: int

    def __init__(
        self, kernel: str | None = None, *, model: str | None = None, **axes: AxisValue | _Any
    ) -> None:
        if type(kernel) is not str and kernel is not None:
            kernel = _name("kernel", kernel)
        if type(model) is not str and model is not None:
            model = _name("model", model)
        fixed: dict[str, AxisValue] | None = None
        for name, value in axes.items():
            kind = type(value)
            if kind is str or kind is bool or (kind is int and -_INT_LIMIT < value < _INT_LIMIT):  # type: ignore[operator]
                continue  # the common case, checked without isinstance chains
            if kind is _Any:
                continue
            plain = _normalise(name, value)
            if fixed is None:
                fixed = {}
            fixed[name] = plain
        if fixed:
            axes.update(fixed)
        items = tuple(sorted(axes.items()))
        typed = (kernel, model, items, tuple([type(v) for _name, v in items]))
        _set(self, "kernel", kernel)
        _set(self, "model", model)
        _set(self, "_axes", items)
        _set(self, "_typed", typed)
        _set(self, "_hash", hash(typed))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"KernelQuery is immutable; use replace() to change {name!r}")

    @property
    def axes(self) -> Mapping[str, AxisValue | _Any]:
        """The explicitly given axis values."""
        return dict(self._axes)

    def replace(self, **changes: object) -> KernelQuery:
        """A copy with ``kernel``, ``model`` or axis values changed (``None`` drops an axis)."""
        kernel = changes.pop("kernel", self.kernel)
        model = changes.pop("model", self.model)
        axes: dict[str, object] = dict(self._axes)
        for name, value in changes.items():
            if value is None:
                axes.pop(name, None)
            else:
                axes[name] = value
        return KernelQuery(kernel, model=model, **axes)  # type: ignore[arg-type]

    def with_kernel(self, kernel: str | None) -> KernelQuery:
        """The same question about another kernel."""
        if type(kernel) is not str and kernel is not None:
            kernel = _name("kernel", kernel)
        if kernel == self.kernel:
            return self
        new = object.__new__(KernelQuery)
        identity = self._typed
        typed = (kernel, identity[1], identity[2], identity[3])
        _set(new, "kernel", kernel)
        _set(new, "model", self.model)
        _set(new, "_axes", self._axes)
        _set(new, "_typed", typed)
        _set(new, "_hash", hash(typed))
        return new

    def _key(self) -> tuple[object, ...]:
        return self._typed

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, KernelQuery):
            return NotImplemented
        return self._hash == other._hash and self._typed == other._typed

    def __repr__(self) -> str:
        parts = [repr(self.kernel)] if self.kernel is not None else []
        if self.model is not None:
            parts.append(f"model={self.model!r}")
        parts.extend(f"{k}={v!r}" for k, v in self._axes)
        return f"KernelQuery({', '.join(parts)})"

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.kernel, self.model, self._axes))


def _rebuild(
    kernel: str | None, model: str | None, axes: tuple[tuple[str, AxisValue | _Any], ...]
) -> KernelQuery:
    return KernelQuery(kernel, model=model, **dict(axes))
