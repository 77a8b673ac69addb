"""The compiled-matrix cache's payload: the validated model as plain JSON data, and back.

Every field, positionally (tuples become lists, enums their values); each distinct condition is
written once, in a table the rules refer to by index. :func:`decode` checks every value's type as it
builds the model, so an entry that is not what :func:`encode` wrote raises (``_cache`` treats any
exception as a miss).
"""

from __future__ import annotations

import sys
import threading

try:  # the C scanner that json.loads runs, without json's own imports (re, and the patterns it compiles)
    import _json
except ImportError:  # pragma: no cover - an interpreter built without it
    _json = None  # type: ignore[assignment]

from capmatrix.matrix import Matrix
from capmatrix.model import (
    GPU,
    Axis,
    AxisType,
    Condition,
    DerivedAxis,
    DerivedRow,
    Effect,
    EngineReleases,
    Guard,
    Interval,
    Kernel,
    Location,
    ModelFamily,
    Release,
    Role,
    RoleOrder,
    Rule,
    Status,
    ValueOf,
)

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from capmatrix.model import Boxes

__all__ = ["decode", "dumps", "encode", "loads"]


class _Mismatch(ValueError):
    """Data that :func:`encode` did not write (``_cache`` treats any exception of a read as a miss)."""


_lock = threading.Lock()  # the condition table below belongs to one entry at a time




def _loc(loc: Location | None) -> list[Any] | None:
    return None if loc is None else [loc.path, loc.line, loc.column]


def _unloc(data: list[Any] | None) -> Location | None:
    if data is None:
        return None
    path, line, column = data
    return Location(path=sys.intern(_str(path)), line=_opt_int(line), column=_opt_int(column))


def _cond(c: Condition) -> list[Any]:
    return [
        c.axis, c.text, _values(c.values),
        [[i.low, i.low_inclusive, i.high, i.high_inclusive] for i in c.intervals],
        list(c.families), c.negated, list(c.moduli), c.optional, c.admits_none,
        sorted(c.signatures), [_table.put(cut) for cut in c.cuts],
    ]


def _uncond(data: list[Any]) -> Condition:
    axis, text, values, intervals, families, negated, moduli, optional, admits_none, sigs, cuts = data
    return Condition(
        axis=_str(axis), text=_str(text), values=frozenset(_unvalues(values)),
        intervals=tuple(
            Interval(low=_opt_int(lo), low_inclusive=_bool(li), high=_opt_int(hi), high_inclusive=_bool(hc))
            for lo, li, hi, hc in intervals
        ),
        families=tuple(map(_str, families)), negated=_bool(negated), moduli=tuple(map(_int, moduli)),
        optional=_bool(optional), admits_none=_bool(admits_none),
        signatures=frozenset(map(_int, sigs)), cuts=tuple(_table.get(c) for c in cuts),
    )


class _Table:
    """Conditions by index: each distinct one is written (and read back, and held) once."""

    def __init__(self) -> None:
        self.index: dict[Condition, int] = {}
        self.rows: list[list[Any]] = []
        self.read: list[Condition] = []

    def put(self, c: Condition) -> int:
        found = self.index.get(c)
        if found is None:
            row = _cond(c)  # its cuts first, so that they are read before it
            found = self.index[c] = len(self.rows)
            self.rows.append(row)
        return found

    def get(self, i: object) -> Condition:
        return self.read[_int(i)]


_table = _Table()  # replaced for each entry written or read (under _lock)


def _conds(conditions: Mapping[str, Condition]) -> list[Any]:
    return [[name, _table.put(c)] for name, c in conditions.items()]


def _unconds(data: list[Any]) -> dict[str, Condition]:
    return {_str(name): _table.get(c) for name, c in data}


def _boxes(boxes: Boxes) -> list[Any]:
    return [_conds(box) for box in boxes]


def _unboxes(data: list[Any]) -> Boxes:
    return tuple(_unconds(box) for box in data)


def _value(v: object) -> object:
    """An axis value, exactly: JSON keeps bool, int and str apart."""
    if type(v) not in (bool, int, str):
        raise TypeError(type(v).__name__)
    return v


def _values(values: Sequence[object] | frozenset[object]) -> list[object]:
    if isinstance(values, frozenset):  # in a fixed order: the same matrix writes the same bytes
        return sorted((_value(v) for v in values), key=lambda v: (type(v).__name__, v))
    return [_value(v) for v in values]


def _unvalues(data: list[Any]) -> list[int | str | bool]:
    out = []
    for v in data:
        if type(v) not in (bool, int, str):
            raise _Mismatch
        out.append(v)
    return out


def _str(v: object) -> str:
    if type(v) is not str:
        raise _Mismatch
    return v


def _opt_str(v: object) -> str | None:
    return None if v is None else _str(v)


def _int(v: object) -> int:
    if type(v) is not int:
        raise _Mismatch
    return v


def _opt_int(v: object) -> int | None:
    return None if v is None else _int(v)


def _bool(v: object) -> bool:
    if type(v) is not bool:
        raise _Mismatch
    return v


def _axis(a: Axis) -> list[Any]:
    return [
        a.name, str(a.type), _values(a.values), a.description,
        [[name, list(members)] for name, members in a.families.items()],
        None if a.default is None else _value(a.default), _loc(a.location), a.optional, a.environment,
        a.extra, [_table.put(c) for c in a.cuts], [[name, text] for name, text in a.family_ranges.items()],
        [[word, value] for word, value in a.spellings.items()], a.scope,
        [[alias, scope] for alias, scope in a.aliases.items()],
        [[engine, _value(value)] for engine, value in a.engine_defaults.items()],
        a.minimum, a.maximum,
    ]


def _unaxis(data: list[Any]) -> Axis:
    (name, kind, values, description, families, default, loc, optional, environment, extra, cuts,
     family_ranges, spellings, scope, aliases, engine_defaults, minimum, maximum) = data
    return Axis(
        name=_str(name), type=AxisType(kind), values=tuple(_unvalues(values)),
        description=_str(description),
        families={_str(f): tuple(map(_int, members)) for f, members in families},
        default=None if default is None else _unvalues([default])[0], location=_unloc(loc),
        optional=_bool(optional), environment=_bool(environment), extra=_int(extra),
        cuts=tuple(_table.get(c) for c in cuts),
        family_ranges={_str(f): _str(text) for f, text in family_ranges},
        spellings={_str(w): _str(v) for w, v in spellings}, scope=_str(scope),
        aliases={_str(a): _str(s) for a, s in aliases},
        engine_defaults={_str(e): _unvalues([v])[0] for e, v in engine_defaults},
        minimum=_opt_int(minimum), maximum=_opt_int(maximum),
    )


def _rule(r: Rule) -> list[Any]:
    return [
        r.id, r.kernel, str(r.effect), _conds(r.conditions), r.reason, r.source, str(r.status),
        _loc(r.location), None if r.verified is None else dict(r.verified), r.derived,
    ]


def _unrule(data: list[Any]) -> Rule:
    rule_id, kernel, effect, conditions, reason, source, status, loc, verified, derived = data
    location = _unloc(loc)
    if location is None or (verified is not None and type(verified) is not dict):
        raise _Mismatch
    return Rule(
        id=_str(rule_id), kernel=sys.intern(_str(kernel)), effect=Effect(effect),
        conditions=_unconds(conditions), reason=_str(reason), source=sys.intern(_str(source)),
        status=Status(status), location=location,
        verified=verified, derived=_opt_str(derived),
    )


def _kernel(k: Kernel) -> list[Any]:
    return [
        k.name, k.description, [_rule(r) for r in k.rules], _loc(k.location), k.kind, k.engine, k.source,
        None if k.guards is None else _guard(k.guards),
    ]


def _unkernel(data: list[Any]) -> Kernel:
    name, description, rules, loc, kind, engine, source, guards = data
    location = _unloc(loc)
    if location is None:
        raise _Mismatch
    return Kernel(
        name=_str(name), description=_str(description), rules=tuple(_unrule(r) for r in rules),
        location=location, kind=_str(kind), engine=_opt_str(engine), source=_opt_str(source),
        guards=None if guards is None else _unguard(guards),
    )


def _pins(values: Mapping[str, object]) -> list[Any]:
    return [[a, _value(v)] for a, v in values.items()]


def _unpins(data: list[Any]) -> dict[str, int | str | bool]:
    return {_str(a): _unvalues([v])[0] for a, v in data}


def _guard(g: Guard) -> list[Any]:
    return [list(g.targets), _loc(g.location), [_conds(b) for b in g.when], _pins(g.axes),
            None if g.refused is None else _pins(g.refused),
            [[a, [[_value(w), {"value_of": m.axis} if isinstance(m, ValueOf) else _value(m)]
                  for w, m in table.items()]] for a, table in g.means.items()], list(g.caught_by)]


def _unguard(data: list[Any]) -> Guard:
    targets, loc, when, axes, refused, means, caught = data
    location = _unloc(loc)
    if location is None:
        raise _Mismatch
    return Guard(
        targets=tuple(map(_str, targets)), location=location, when=tuple(_unconds(b) for b in when),
        axes=_unpins(axes),
        refused=None if refused is None else _unpins(refused),
        means={_str(a): {_unvalues([w])[0]: _unmeaning(m) for w, m in table} for a, table in means},
        caught_by=tuple(map(_str, caught)),
    )


def _unmeaning(data: object) -> int | str | bool | ValueOf:
    if isinstance(data, dict):
        return ValueOf(_str(data.get("value_of")))
    return _unvalues([data])[0]


def _model(m: ModelFamily) -> list[Any]:
    return [
        m.name, m.description, [[a, _value(v)] for a, v in m.axes.items()], m.source, _loc(m.location),
        list(m.hf_model_types), m.recognise, list(m.hf_ids),
        None if m.hf_config is None else dict(m.hf_config),
    ]


def _unmodel(data: list[Any]) -> ModelFamily:
    name, description, axes, source, loc, hf_model_types, recognise, hf_ids, hf_config = data
    location = _unloc(loc)
    if location is None or (hf_config is not None and type(hf_config) is not dict):
        raise _Mismatch
    return ModelFamily(
        name=_str(name), description=_str(description),
        axes={_str(a): _unvalues([v])[0] for a, v in axes}, source=_str(source), location=location,
        hf_model_types=tuple(map(_str, hf_model_types)), recognise=_opt_str(recognise),
        hf_ids=tuple(map(_str, hf_ids)), hf_config=hf_config,
    )


def _role(r: Role) -> list[Any]:
    return [
        r.name, r.description, list(r.candidates), _loc(r.location), r.source,
        [[a, _value(v)] for a, v in r.axes.items()],
        [[_boxes(o.when), list(o.candidates), o.text, _loc(o.location), [list(b) for b in o.area]]
         for o in r.orders],
        list(r.asks_first),
    ]


def _unrole(data: list[Any]) -> Role:
    name, description, candidates, loc, source, axes, orders, asks_first = data
    location = _unloc(loc)
    if location is None:
        raise _Mismatch
    return Role(
        name=_str(name), description=_str(description), candidates=tuple(map(_str, candidates)),
        location=location, source=_opt_str(source), axes={_str(a): _unvalues([v])[0] for a, v in axes},
        orders=tuple(_unorder(o) for o in orders), asks_first=tuple(map(_str, asks_first)),
    )


def _unorder(data: list[Any]) -> RoleOrder:
    when, candidates, text, loc, area = data
    location = _unloc(loc)
    if location is None:
        raise _Mismatch
    return RoleOrder(
        when=_unboxes(when), candidates=tuple(map(_str, candidates)), text=_str(text), location=location,
        area=tuple(tuple(map(_int, box)) for box in area),
    )


def _derived(d: DerivedAxis) -> list[Any]:
    return [_axis(d.axis), [[_value(r.value), _boxes(r.when), r.text, _loc(r.location)] for r in d.rows]]


def _underived(data: list[Any]) -> DerivedAxis:
    axis, rows = data
    out = []
    for value, when, text, loc in rows:
        location = _unloc(loc)
        if location is None:
            raise _Mismatch
        out.append(DerivedRow(value=_unvalues([value])[0], when=_unboxes(when), text=_str(text),
                              location=location))
    return DerivedAxis(axis=_unaxis(axis), rows=tuple(out))


def _gpu(g: GPU) -> list[Any]:
    return [g.key, g.name, g.sm, list(g.aliases), g.source, _loc(g.location)]


def _ungpu(data: list[Any]) -> GPU:
    key, name, sm, aliases, source, loc = data
    location = _unloc(loc)
    if location is None:
        raise _Mismatch
    return GPU(key=_str(key), name=_str(name), sm=_int(sm), aliases=tuple(map(_str, aliases)),
               source=_opt_str(source), location=location)


def _releases(r: EngineReleases) -> list[Any]:
    versions = [[v.version, v.date, dict(v.pins), v.source, _loc(v.location)] for v in r.versions]
    words = [[vocabulary, [[w, list(vs)] for w, vs in items]] for vocabulary, items in r.words.items()]
    return [r.engine, r.axis, r.description, _loc(r.location), versions, words]


def _unrelease(data: list[Any]) -> Release:
    version, date, pins, source, loc = data
    location = _unloc(loc)
    if location is None or type(pins) is not dict:
        raise _Mismatch
    return Release(version=_str(version), date=_opt_str(date), source=_opt_str(source), location=location,
                   pins={_str(k): _str(v) for k, v in pins.items()})


def _unreleases(data: list[Any]) -> EngineReleases:
    engine, axis, description, loc, versions, words = data
    location = _unloc(loc)
    if location is None:
        raise _Mismatch
    return EngineReleases(
        engine=_str(engine), axis=_str(axis), description=_str(description), location=location,
        versions=tuple(_unrelease(v) for v in versions),
        words={_str(vocabulary): tuple((_str(w), tuple(map(_str, vs))) for w, vs in items)
               for vocabulary, items in words},
    )


def encode(m: Matrix) -> dict[str, Any]:
    """The validated matrix as plain JSON data (lists, strings, numbers; conditions written once)."""
    global _table  # noqa: PLW0603 - the condition table of the entry being written
    with _lock:
        _table = _Table()
        out = _encode_tables(m)
        out["conditions"] = _table.rows
        _table = _Table()
        return out


def decode(data: dict[str, Any]) -> Matrix:
    """The matrix of :func:`encode`'s data; any doubt about it raises (the cache then misses)."""
    global _table  # noqa: PLW0603 - the condition table of the entry being read
    with _lock:
        _table = _Table()
        for c in data["conditions"]:  # a condition's cuts come before it: they are read already
            _table.read.append(_uncond(c))
        try:
            return _decode_tables(data)
        finally:
            _table = _Table()


def _encode_tables(m: Matrix) -> dict[str, Any]:
    return {
        "root": m.root,
        "files": list(m.files),
        "axes": [_axis(a) for a in m.axes.values()],
        "derived": [[name, _derived(d)] for name, d in m.derived.items()],
        "kernels": [_kernel(k) for k in m.kernels.values()],
        "models": [_model(x) for x in m.models.values()],
        "roles": [_role(r) for r in m.roles.values()],
        "gpus": [_gpu(g) for g in m.gpus.values()],
        "releases": [_releases(r) for r in m.releases.values()],
    }


def _decode_tables(data: dict[str, Any]) -> Matrix:
    axes = [_unaxis(a) for a in data["axes"]]
    kernels = [_unkernel(k) for k in data["kernels"]]
    models = [_unmodel(x) for x in data["models"]]
    roles = [_unrole(r) for r in data["roles"]]
    gpus = [_ungpu(g) for g in data["gpus"]]
    releases = [_unreleases(r) for r in data["releases"]]
    return Matrix(
        root=_str(data["root"]),
        files=tuple(map(_str, data["files"])),
        axes={a.name: a for a in axes},
        kernels={k.name: k for k in kernels},
        models={x.name: x for x in models},
        roles={r.name: r for r in roles},
        derived={_str(name): _underived(d) for name, d in data["derived"]},
        gpus={g.key: g for g in gpus},
        releases={r.engine: r for r in releases},
    )


def dumps(m: Matrix) -> str | None:
    """:func:`encode`'s data as compact ASCII JSON text (None: a value JSON cannot hold exactly)."""
    import json  # noqa: PLC0415 - only a write encodes

    try:
        return json.dumps(encode(m), ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):  # e.g. a date in hf_config
        return None


class _PlainJSON:
    """What the C scanner reads of a ``json.JSONDecoder``: plain values, and no NaN or Infinity."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> None:
        raise _Mismatch(name)  # an entry never holds NaN or Infinity (written with allow_nan=False)


def loads(text: str) -> Any:  # noqa: ANN401 - JSON data
    """``json.loads(text)`` of a payload :func:`encode` wrote (no surrounding whitespace), or an exception."""
    if _json is None:  # pragma: no cover - an interpreter built without the C scanner
        import json  # noqa: PLC0415

        return json.loads(text)
    scan = _json.make_scanner(_PlainJSON())  # type: ignore[arg-type] # it reads the attributes above
    value, end = scan(text, 0)
    if end != len(text):
        raise _Mismatch
    return value
