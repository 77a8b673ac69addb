"""Immutable value types (records) made without the dataclasses module, for a short cold start.

``@record`` makes a class frozen and slotted, with the ``__init__``, ``__repr__``, ``__eq__`` and
``__hash__`` that ``@dataclass(frozen=True, slots=True)`` would give it; ``field`` takes the same
``default``, ``default_factory``, ``init``, ``repr`` and ``compare``. Every load builds the model's
value types: importing :mod:`dataclasses` (which imports :mod:`inspect`, :mod:`ast`, :mod:`dis`,
:mod:`tokenize` ...) and compiling six generated functions per class cost about a third of a cold
start. A record compiles its ``__init__`` alone (an instance is built per rule and condition, so
it must be fast); the other methods are shared functions reading the class's field names.

The stdlib's functions keep working on records (``dataclasses.replace``, ``fields``, ``asdict``,
``is_dataclass``): ``__dataclass_fields__`` is made the first time something reads it, which
imports :mod:`dataclasses` then.
"""

from __future__ import annotations

from operator import attrgetter

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform  # typing's from 3.11; read by type checkers only

    T = TypeVar("T")
else:
    def dataclass_transform(**_options: object) -> Callable[[T], T]:
        """Type checkers' marker of a dataclass-like decorator (PEP 681); nothing at run time."""
        return lambda decorated: decorated

__all__ = ["field", "record", "replace"]

_MISSING: Any = type("_Missing", (), {"__repr__": lambda _self: "MISSING"})()
_set = object.__setattr__


class _Field:
    """One field of a record: what :func:`field` was given, and its name and annotation."""

    __slots__ = ("compare", "default", "factory", "init", "name", "repr", "type")

    def __init__(self, default: Any, factory: Any, *, init: bool, repr: bool, compare: bool) -> None:  # noqa: A002, ANN401
        if default is not _MISSING and factory is not _MISSING:
            msg = "cannot give both default and default_factory"
            raise ValueError(msg)
        self.default, self.factory = default, factory
        self.init, self.repr, self.compare = init, repr, compare
        self.name = self.type = ""


def field(
    *, default: Any = _MISSING, default_factory: Callable[[], Any] = _MISSING,  # noqa: ANN401
    init: bool = True, repr: bool = True, compare: bool = True,  # noqa: A002 - dataclasses' names
) -> Any:  # noqa: ANN401 - stands in for the field's value in the class body
    """A field with a default, a factory, or left out of ``__init__``, ``__repr__`` or comparison."""
    return _Field(default, default_factory, init=init, repr=repr, compare=compare)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[T] | None = None, /, *, kw_only: bool = False) -> Any:  # noqa: ANN401
    """Make ``cls`` a frozen, slotted value type (``@record`` or ``@record(kw_only=True)``)."""
    def wrap(cls: type[T]) -> type[T]:
        return _make(cls, kw_only=kw_only)

    return wrap if cls is None else wrap(cls)


def replace(obj: T, /, **changes: Any) -> T:  # noqa: ANN401
    """A copy of record ``obj`` with ``changes`` (as ``dataclasses.replace``)."""
    fields: tuple[_Field, ...] = type(obj).__record_fields__  # type: ignore[attr-defined]
    for f in fields:
        if not f.init:
            if f.name in changes:
                msg = f"field {f.name} is not an __init__ argument: it cannot be replaced"
                raise ValueError(msg)
        elif f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return type(obj)(**changes)


def _make(cls: type[T], *, kw_only: bool) -> type[T]:
    body = dict(cls.__dict__)
    if any(hasattr(base, "__record_fields__") for base in cls.__mro__[1:]):
        msg = f"{cls.__qualname__}: a record cannot derive from another record"
        raise TypeError(msg)
    fields: list[_Field] = []
    for name, annotation in body.get("__annotations__", {}).items():
        value = body.pop(name, _MISSING)
        spec = value if isinstance(value, _Field) else _Field(value, _MISSING, init=True, repr=True,
                                                               compare=True)
        spec.name, spec.type = name, annotation
        fields.append(spec)
    for name in ("__dict__", "__weakref__"):
        body.pop(name, None)
    names = tuple(f.name for f in fields)
    body["__slots__"] = names
    body["__record_fields__"] = tuple(fields)
    body["__match_args__"] = () if kw_only else tuple(f.name for f in fields if f.init)
    body["__dataclass_fields__"] = _StdlibFields(kw_only=kw_only)
    shown = tuple(f.name for f in fields if f.repr)
    compared = tuple(f.name for f in fields if f.compare)
    key = attrgetter(*compared) if compared else (lambda _obj: ())
    own_hash = body.get("__hash__", _MISSING)
    explicit_hash = not (own_hash is _MISSING or (own_hash is None and "__eq__" in body))
    methods: dict[str, Any] = {
        "__init__": _init(cls.__qualname__, fields, kw_only=kw_only, post_init="__post_init__" in body),
        "__repr__": _repr(shown),
        "__eq__": _eq(key),
        "__setattr__": _frozen_setattr,
        "__delattr__": _frozen_delattr,
        "__reduce__": _reduce(names),
    }
    for name, method in methods.items():
        if name not in body:
            method.__qualname__ = f"{cls.__qualname__}.{name}"
            body[name] = method
    if not explicit_hash:
        body["__hash__"] = _hash(key)
    made: type[T] = type(cls)(cls.__name__, cls.__bases__, body)  # type: ignore[misc]
    made.__qualname__ = cls.__qualname__
    return made


def _init(owner: str, fields: list[_Field], *, kw_only: bool, post_init: bool) -> Callable[..., None]:
    """``__init__``, compiled from source: keyword or positional arguments, defaults and factories."""
    env: dict[str, Any] = {"_set": _set, "_MISSING": _MISSING}
    params: list[str] = []
    lines: list[str] = []
    seen_default = False
    for i, f in enumerate(fields):
        if f.factory is not _MISSING:
            env[f"_factory{i}"] = f.factory
        if not f.init:
            if f.factory is not _MISSING:
                lines.append(f"_set(self, {f.name!r}, _factory{i}())")
            elif f.default is not _MISSING:
                env[f"_default{i}"] = f.default
                lines.append(f"_set(self, {f.name!r}, _default{i})")
            continue
        if f.factory is not _MISSING:
            params.append(f"{f.name}=_MISSING")
            lines.append(f"_set(self, {f.name!r}, _factory{i}() if {f.name} is _MISSING else {f.name})")
        else:
            if f.default is not _MISSING:
                env[f"_default{i}"] = f.default
                params.append(f"{f.name}=_default{i}")
            elif seen_default and not kw_only:
                msg = f"{owner}: field {f.name} without a default follows one with a default"
                raise TypeError(msg)
            else:
                params.append(f.name)
            lines.append(f"_set(self, {f.name!r}, {f.name})")
        seen_default = seen_default or f.default is not _MISSING or f.factory is not _MISSING
    if post_init:
        lines.append("self.__post_init__()")
    signature = ", ".join(["self", *(["*"] if kw_only and params else []), *params])
    source = f"def __init__({signature}) -> None:\n    " + "\n    ".join(lines or ["pass"]) + "\n"
    exec(source, env)  # noqa: S102 - source built above from the class's own field names
    return env["__init__"]  # type: ignore[no-any-return]


def _repr(shown: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:  # noqa: ANN401, N807
        parts = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{type(self).__qualname__}({parts})"

    return __repr__


def _eq(key: Callable[[Any], Any]) -> Callable[[Any, object], Any]:
    def __eq__(self: Any, other: object) -> Any:  # noqa: ANN401, N807
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _hash(key: Callable[[Any], Any]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:  # noqa: ANN401, N807
        return hash(key(self))

    return __hash__


def _frozen_setattr(self: Any, name: str, _value: object) -> None:  # noqa: ANN401
    msg = f"cannot assign to field {name!r}: {type(self).__qualname__} is immutable"
    raise AttributeError(msg)


def _frozen_delattr(self: Any, name: str) -> None:  # noqa: ANN401
    msg = f"cannot delete field {name!r}: {type(self).__qualname__} is immutable"
    raise AttributeError(msg)


def _reduce(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    def __reduce__(self: Any) -> tuple[Any, ...]:  # noqa: ANN401, N807
        return _rebuild, (type(self), tuple(getattr(self, name) for name in names))

    return __reduce__


def _rebuild(cls: type[T], values: tuple[Any, ...]) -> T:
    """A record from the values of its fields in order (pickle's and copy's way back)."""
    obj = object.__new__(cls)
    for name, value in zip(cls.__slots__, values, strict=True):  # type: ignore[attr-defined]
        _set(obj, name, value)
    return obj


class _StdlibFields:
    """A record's ``__dataclass_fields__``, made on first read from an equivalent dataclass."""

    def __init__(self, *, kw_only: bool) -> None:
        self.kw_only = kw_only

    def __get__(self, _obj: object, owner: type) -> dict[str, Any]:
        import dataclasses  # noqa: PLC0415 - only for the stdlib's functions, never on the load path

        specs = []
        for f in owner.__record_fields__:  # type: ignore[attr-defined]
            extra = {} if f.factory is _MISSING else {"default_factory": f.factory}
            if f.default is not _MISSING:
                extra["default"] = f.default
            specs.append((f.name, f.type, dataclasses.field(init=f.init, repr=f.repr, compare=f.compare,
                                                            **extra)))
        twin = dataclasses.make_dataclass(owner.__name__, specs, frozen=True, kw_only=self.kw_only)
        found: dict[str, Any] = twin.__dataclass_fields__  # type: ignore[attr-defined]
        type.__setattr__(owner, "__dataclass_fields__", found)  # read once: later reads are plain
        return found
