"""Layer two of loading, values: axes, conditions, derived-axis tables and open int domains.

Axis declarations, conditions (lists, ranges, families, moduli, spellings), the tables of derived axes
and the classes that open int domains cut.

Read by :mod:`capmatrix.authoring._validate.references` (layer three), which builds the matrix on top of
it; every problem is reported at its ``file:line:col`` through :meth:`_Values.fail`.
"""

from __future__ import annotations

import re

from capmatrix._core.classes import representatives
from capmatrix._core.record import replace
from capmatrix.authoring._validate import hints as _hints
from capmatrix.authoring._versions import order_key, span_text
from capmatrix.errors import CapabilityError, echo
from capmatrix.model import (
    CORE,
    NONE,
    Axis,
    AxisType,
    AxisValue,
    Condition,
    DerivedAxis,
    DerivedRow,
    EngineReleases,
    Interval,
    Location,
    Release,
)
from capmatrix.regions import Region, Space

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from capmatrix.authoring._yaml import read as _yaml

__all__ = ["ENUM_VALUE", "RESERVED_AXIS_NAMES", "open_domains"]

#: The spelling of an enum axis value: lower-case ASCII letters, digits and ``_ . + -``, starting with a
#: letter or digit, at most 64 characters. Values reach command lines (witnesses, ``--<axis> VALUE``)
#: and page anchors, so nothing a shell or a parser would read specially is allowed.
ENUM_VALUE = re.compile(r"[a-z0-9][a-z0-9_.+-]{0,63}\Z", re.ASCII)
#: Axis names whose ``--<axis>`` option would collide with an option of the command line.
RESERVED_AXIS_NAMES = frozenset({
    "check", "engine", "engine_version", "exit_code", "expect", "format", "help", "hf_config", "json",
    "kernel", "markdown",
    "matrix", "model", "out", "out_dir", "role", "strict", "version", "where",
})

_CMP = re.compile(r"^ *(>=|<=|>|<|==) *(-?[0-9]+) *$", re.ASCII)
_INTERVAL = re.compile(r"^ *([\[(]) *(-?[0-9]+) *, *(-?[0-9]+) *([\])]) *$", re.ASCII)
#: What a range looks like with any digits and spaces (to refuse non-ASCII digits with a hint).
_RANGE_SHAPE = re.compile(r"^\s*(?:(?:>=|<=|>|<|==)\s*-?\d+|[\[(]\s*-?\d+\s*,\s*-?\d+\s*[\])])\s*$")
#: Digits an integer in a range may have: 19 reach past the signed 64-bit bound checked below.
_MAX_RANGE_DIGITS = 19
#: Axis integers fit in a signed 64-bit word (as ``_MAX_INT_BITS``; PyYAML loads lazily).
_MAX_INT_BITS = 63


def open_domains(axes: Mapping[str, Axis], boxes: Iterable[Mapping[str, Condition]]) -> dict[str, Axis]:
    """``axes`` with each int axis's cuts and class representatives.

    The cuts are the distinct conditions of ``boxes`` on the axis, in first-seen order; each class of
    ints without a listed value gets a representative (:mod:`capmatrix._core.classes`).
    """
    cuts: dict[str, dict[Condition, None]] = {n: {} for n, a in axes.items() if a.type is AxisType.INT}
    for box in boxes:
        for name, cond in box.items():
            found = cuts.get(name)
            if found is not None:
                found.setdefault(cond, None)
    out = dict(axes)
    for name, found in cuts.items():
        if not found:
            continue
        axis = axes[name]
        ordered = tuple(found)
        reps = representatives(axis.values, ordered, (axis.minimum, axis.maximum))
        out[name] = replace(axis, values=axis.values + reps, extra=len(reps), cuts=ordered)
    return out


class _Values:
    """Layer two: the values of axes, conditions and tables, once every file has the right shape."""

    def __init__(
        self,
        problems: list[CapabilityError],
        broken: dict[str, set[tuple[str | int, ...]]],
    ) -> None:
        self.problems = problems
        self.broken = broken
        self.derived: dict[str, DerivedAxis] = {}
        self.known: dict[str, Axis] = {}
        self.space = Space(())
        #: Conditions already built, by axis, raw YAML (its repr: 80 and '80' differ) and admit_none:
        #: a condition depends on nothing else, so equal ones are built once and shared.
        self.conditions: dict[tuple[str, bool, str], Condition] = {}
        #: Per kernel, the rules (by position) that test derived axes, with those conditions: expanded last.
        self.pending: dict[str, dict[int, dict[str, Condition]]] = {}
        #: Where each role order was read, for the error of an order that never applies.
        self.order_paths: dict[tuple[str, Location], tuple[_yaml.SourceMap, tuple[str | int, ...]]] = {}
        #: Names gates guard, checked once every kernel and role is known: (file, path, gate, name).
        self.guarded: list[tuple[_yaml.SourceMap, tuple[str | int, ...], str, str]] = []
        #: Each guard's ``caught_by`` name, checked once every kernel is read (E247).
        self.caught: list[tuple[_yaml.SourceMap, tuple[str | int, ...], str, str]] = []
        #: The engines' modelled releases (``releases:``), by engine.
        self.releases: dict[str, EngineReleases] = {}

    def is_broken(self, smap: _yaml.SourceMap, path: tuple[str | int, ...]) -> bool:
        """Whether a shape error lies at or below ``path`` (or right above it)."""
        for bad in self.broken.get(smap.path, ()):
            if bad[: len(path)] == path or path[: len(bad)] == bad:
                return True
        return False

    def _skip_entry(self, smap: _yaml.SourceMap, section: str, name: str) -> bool:
        """An entry is skipped when its own fields (not only a rule of it) have shape errors."""
        for bad in self.broken.get(smap.path, ()):
            if bad[:2] == (section, name) and (len(bad) <= 3 or bad[2] != "rules"):
                return True
        return False

    def fail(
        self, smap: _yaml.SourceMap, path: tuple[str | int, ...], message: str, **kw: Any  # noqa: ANN401
    ) -> None:
        self.problems.append(smap.error(path, message, **kw))

    # -- engine releases ------------------------------------------------------------------------

    def _releases(
        self, docs: list[tuple[dict[str, Any], _yaml.SourceMap]], axes: dict[str, Axis],
    ) -> dict[str, Axis]:
        """Read every ``releases:`` entry into :attr:`releases`; return the release axis of each engine.

        An engine's release axis is an enum axis of its scope whose values are the versions, oldest
        first, and whose default is the newest (what a question naming no release is answered as).
        """
        made: dict[str, Axis] = {}
        for data, smap in docs:
            for engine, raw in (data.get("releases") or {}).items():
                path: tuple[str | int, ...] = ("releases", engine)
                if self._skip_entry(smap, "releases", engine):
                    continue
                if engine in self.releases:
                    self.fail(smap, path, f"the releases of engine {echo(engine)} are declared again "
                              f"(first at {self.releases[engine].location})", key=True,
                              hint="keep an engine's releases in one entry", code="E260")
                    continue
                name = raw["axis"]
                taken = name in axes or name in made or name in RESERVED_AXIS_NAMES or any(
                    name in axis.aliases for axis in axes.values())
                if taken:
                    self.fail(smap, (*path, "axis"), f"axis {echo(name)} is already a name of the matrix "
                              "or of the command line", hint=f"name the release axis {engine}_release",
                              code="E260")
                    continue
                versions: list[Release] = []
                for i, entry in enumerate(raw["versions"]):
                    where = (*path, "versions", i, "version")
                    version = entry["version"]
                    key = order_key(version)
                    if any(r.version == version for r in versions):
                        self.fail(smap, where, f"release {echo(version)} is listed twice", code="E260")
                        continue
                    if key is None:
                        self.fail(smap, where, f"{echo(version)} does not read as a version",
                                  hint="write versions as the engine does: 0.34.0, 1.2.0rc1, 1.2.1.post1",
                                  code="E260")
                        continue
                    if versions and key <= (order_key(versions[-1].version) or key):
                        self.fail(smap, where, f"release {echo(version)} is listed after "
                                  f"{echo(versions[-1].version)}", hint="list the releases oldest first",
                                  code="E260")
                        continue
                    line, col = smap.locate((*path, "versions", i))
                    versions.append(Release(
                        version=version, date=entry.get("date"), pins=dict(entry.get("pins") or {}),
                        source=entry.get("source"), location=Location(path=smap.path, line=line, column=col),
                    ))
                if not versions:
                    continue
                line, col = smap.locate(path, key=True)
                location = Location(path=smap.path, line=line, column=col)
                releases = EngineReleases(engine=engine, axis=name, versions=tuple(versions),
                                          location=location, description=raw["description"])
                self.releases[engine] = releases
                self.releases[engine] = replace(releases, words=self._words(releases, raw, smap, path))
                made[name] = Axis(
                    name=name, type=AxisType.ENUM, values=releases.names, default=releases.newest,
                    description=raw["description"], location=location, environment=True, scope=engine,
                )
        return made

    def _words(
        self, releases: EngineReleases, raw: dict[str, Any], smap: _yaml.SourceMap,
        path: tuple[str | int, ...],
    ) -> dict[str, tuple[tuple[str, tuple[str, ...]], ...]]:
        """An engine's vocabularies: each word with the releases that know it (E264: a word twice)."""
        out: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {}
        for vocabulary, items in (raw.get("words") or {}).items():
            words: list[tuple[str, tuple[str, ...]]] = []
            for i, item in enumerate(items):
                where = (*path, "words", vocabulary, i)
                word = item if isinstance(item, str) else item["word"]
                span = releases.names if isinstance(item, str) else self._span(
                    releases.engine, item, smap, where)
                if span is None:
                    continue
                clash = [v for w, vs in words if w == word for v in vs if v in span]
                if clash:
                    self.fail(smap, where, f"{echo(word)} is already a word of {echo(vocabulary)} in "
                              f"release {clash[0]}", hint="give each entry of a word its own releases "
                              "(since / until)", code="E264")
                    continue
                words.append((word, span))
            out[vocabulary] = tuple(words)
        return out

    def _span(
        self, engine: str | None, raw: dict[str, Any], smap: _yaml.SourceMap, path: tuple[str | int, ...],
    ) -> tuple[str, ...] | None:
        """The releases of ``engine`` that ``since`` / ``until`` in ``raw`` name, oldest first.

        Every release when neither is given; None after an error (E261 an undeclared release, E262 an
        empty span, E263 an engine without releases).
        """
        since, until = raw.get("since"), raw.get("until")
        releases = self.releases.get(engine) if engine is not None else None
        if releases is None:
            if since is None and until is None:
                return ()
            first = "since" if since is not None else "until"
            owner = "it has no engine" if engine is None else f"engine {echo(engine)} declares no releases"
            self.fail(smap, (*path, first), f"{first!r} names a release, but {owner}",
                      key=True, hint="declare the engine's releases under 'releases:' (releases.yaml)"
                      if engine is not None else "set 'engine:' on the kernel", code="E263")
            return None
        names = releases.names
        bounds = []
        for word, default in (("since", 0), ("until", len(names))):
            value = raw.get(word)
            if value is None:
                bounds.append(default)
                continue
            if value not in names:
                self.fail(smap, (*path, word), f"{engine} {value} is not a modelled release",
                          hint=f"{engine}'s releases: {', '.join(names)}", code="E261")
                return None
            bounds.append(names.index(value))
        lo, hi = bounds
        if hi <= lo:
            self.fail(smap, (*path, "until"), f"'until: {until}' is not after 'since: {since}': "
                      "no release lies in between", hint="'until' names the first release without it",
                      code="E262")
            return None
        return names[lo:hi]

    def _release_condition(
        self, engine: str | None, raw: dict[str, Any], smap: _yaml.SourceMap, path: tuple[str | int, ...],
    ) -> tuple[str, Condition] | None:
        """The condition ``since`` / ``until`` put on ``engine``'s release axis; None where they do not."""
        span = self._span(engine, raw, smap, path)
        if not span or engine is None:
            return None
        releases = self.releases[engine]
        if len(span) == len(releases.names):
            return None
        return releases.axis, Condition(axis=releases.axis, text=span_text(releases.names, span),
                                        values=frozenset(span))

    # -- axes ---------------------------------------------------------------------------------

    def _axes(self, data: dict[str, Any], smap: _yaml.SourceMap) -> dict[str, Axis]:
        out: dict[str, Axis] = {}
        for name, raw in data["axes"].items():
            path: tuple[str | int, ...] = ("axes", name)
            if self._skip_entry(smap, "axes", name):
                continue
            kind = AxisType(raw["type"])
            if name in RESERVED_AXIS_NAMES:
                self.fail(
                    smap, path, f"axis name {name!r} is reserved: --{name.replace('_', '-')} is an "
                    "option of the command line", key=True,
                    hint=f"rename the axis, e.g. {name}_axis", code="E217",
                )
                continue
            values: list[AxisValue] = []
            if kind is AxisType.BOOL:
                if "values" in raw and raw["values"] != [False, True]:
                    self.fail(
                        smap, (*path, "values"), "a bool axis has the values [false, true]",
                        hint="leave 'values' out", code="E210",
                    )
                values = [False, True]
                if "families" in raw:
                    self.fail(smap, (*path, "families"), "families are for int axes", code="E210")
            else:
                if "values" not in raw:
                    self.fail(smap, path, f"{kind} axis {echo(name)} needs 'values'", code="E210")
                    continue
                want = str if kind is AxisType.ENUM else int
                for i, value in enumerate(raw["values"]):
                    if type(value) is not want:
                        hint = None
                        if (*path, "values", i) in smap.yaml11_bools:
                            hint = "YAML 1.1 reads unquoted yes/no/on/off as booleans; quote it"
                        self.fail(
                            smap, (*path, "values", i),
                            f"{echo(value)} is not a {want.__name__} (axis {echo(name)} is {kind})",
                            hint=hint, code="E211",
                        )
                    elif value in values:
                        self.fail(
                            smap, (*path, "values", i), f"duplicate value {echo(value)}", code="E211"
                        )
                    else:
                        values.append(value)
                        if kind is AxisType.ENUM and not ENUM_VALUE.match(str(value)):
                            # Kept as a value, so that rules naming it add no second error.
                            self.fail(
                                smap, (*path, "values", i),
                                f"enum value {str(value)[:40]!r}{'...' if len(str(value)) > 40 else ''}"
                                " is not a plain word",
                                hint="use lower-case ASCII letters, digits and _ . + -, starting "
                                     "with a letter or digit; at most 64 characters", code="E218",
                            )
                if kind is AxisType.ENUM and "families" in raw:
                    self.fail(smap, (*path, "families"), "families are for int axes", code="E210")
            families: dict[str, tuple[int, ...]] = {}
            family_ranges: dict[str, str] = {}
            for fam, members in (raw.get("families") or {}).items():
                if kind is not AxisType.INT:
                    break
                if isinstance(members, str):  # a family defined by a range: every int in it
                    try:
                        interval = _parse_range(members)
                    except _BadRangeError as exc:
                        interval, why = None, exc.hint
                    else:
                        why = "families look like [100, 103] or '[100, 109]'"
                    if interval is None:
                        self.fail(smap, (*path, "families", fam),
                                  f"family {echo(fam)}: {_cut(members)!r} is not a range", hint=why,
                                  code="E212")
                        continue
                    family_ranges[fam] = members
                    families[fam] = tuple(v for v in values if isinstance(v, int) and v in interval)
                    continue
                bad = [m for m in members if m not in values]
                if bad:
                    self.fail(
                        smap, (*path, "families", fam),
                        f"family {echo(fam)} names values that {echo(name)} does not declare: {echo(bad)}",
                        code="E212",
                    )
                families[fam] = tuple(members)
            optional = bool(raw.get("optional", False))
            if optional:
                if kind is AxisType.BOOL or NONE in values or "derive" in raw:
                    self.fail(
                        smap, (*path, "optional"),
                        f"an optional axis must be an int or enum axis with no {echo(NONE)} value "
                        "and no table",
                        hint=f"{echo(NONE)} is its value for not given, not checked", code="E214",
                    )
                    optional = False
                else:
                    values.append(NONE)
            environment = bool(raw.get("environment", False))
            if environment and "default" not in raw and not optional:
                self.fail(smap, (*path, "environment"), "an environment axis needs a default",
                          hint="document what an installation has when nobody says", code="E215")
            # An optional axis defaults to none unless it names a default (one engine's, when another
            # leaves the value unset: tokens_per_block is 32 in TensorRT-LLM, unset in vLLM).
            default = raw.get("default", NONE if optional else None)
            if default is not None and not any(
                default == v and type(default) is type(v) for v in values
            ):
                self.fail(
                    smap, (*path, "default"),
                    f"default {echo(default)} is not a value of axis {echo(name)}", code="E213",
                )
                default = None
            spellings: dict[str, str] = {}
            for word, canonical in (raw.get("spellings") or {}).items():
                where = (*path, "spellings", word)
                if kind is not AxisType.ENUM:
                    self.fail(smap, (*path, "spellings"), "spellings are for enum axes", code="E219")
                    break
                if word in values:
                    self.fail(smap, where, f"spelling {echo(word)} is already a value of {echo(name)}",
                              key=True, hint="a spelling names a value another way; drop it",
                              code="E219")
                elif canonical not in values:
                    self.fail(smap, where, f"spelling {echo(word)} maps to {echo(canonical)}, which is "
                              f"not a value of {echo(name)}",
                              hint=_hints.suggest(str(canonical), [str(v) for v in values], "values"),
                              code="E219")
                else:
                    spellings[word] = canonical
            minimum, maximum = self._bounds(name, kind, raw, values, default, smap, path)
            line, col = smap.locate(path, key=True)
            out[name] = Axis(
                name=name,
                type=kind,
                minimum=minimum,
                maximum=maximum,
                values=tuple(values),
                description=raw["description"],
                families=families,
                default=default,
                location=Location(path=smap.path, line=line, column=col),
                optional=optional,
                environment=environment,
                family_ranges=family_ranges,
                spellings=spellings,
                scope=raw.get("scope", CORE),
                aliases=dict(raw.get("aliases") or {}),
                engine_defaults=self._engine_defaults(raw, tuple(values), smap, path),
            )
        self._check_aliases(out, data, smap)
        return out

    def _bounds(
        self, name: str, kind: AxisType, raw: dict[str, Any], values: list[AxisValue],
        default: AxisValue | None, smap: _yaml.SourceMap, path: tuple[str | int, ...],
    ) -> tuple[int | None, int | None]:
        """An int axis's ``min`` / ``max`` (E228: on another axis, inverted, leaving out a listed value)."""
        minimum, maximum = raw.get("min"), raw.get("max")
        if minimum is None and maximum is None:
            return None, None
        first = "min" if minimum is not None else "max"
        if kind is not AxisType.INT:
            self.fail(smap, (*path, first), f"{first!r} bounds an int axis; {echo(name)} is {kind}",
                      hint=f"leave {first!r} out", code="E228")
            return None, None
        if minimum is not None and maximum is not None and minimum > maximum:
            self.fail(smap, (*path, "min"), f"min {minimum} is above max {maximum}",
                      hint="min is the smallest int the axis takes, max the largest", code="E228")
            return None, None
        outside = [v for v in (*values, default) if type(v) is int
                   and ((minimum is not None and v < minimum) or (maximum is not None and v > maximum))]
        if outside:
            self.fail(smap, (*path, first), f"axis {echo(name)} lists {echo(outside[0])}, outside "
                      f"[{'' if minimum is None else minimum}, {'' if maximum is None else maximum}]",
                      hint="widen min / max, or drop the value", code="E228")
            return None, None
        return minimum, maximum

    def _engine_defaults(
        self, raw: dict[str, Any], values: tuple[AxisValue, ...], smap: _yaml.SourceMap,
        path: tuple[str | int, ...],
    ) -> dict[str, AxisValue]:
        """E213: each engine's default is a value of the axis."""
        out: dict[str, AxisValue] = {}
        for engine, value in (raw.get("engine_defaults") or {}).items():
            if any(value == v and type(value) is type(v) for v in values):
                out[engine] = value
            else:
                self.fail(smap, (*path, "engine_defaults", engine),
                          f"engine {echo(engine)}'s default {echo(value)} is not a value of axis "
                          f"{echo(path[-1])}", code="E213")
        return out

    def _check_aliases(self, axes: dict[str, Axis], data: dict[str, Any], smap: _yaml.SourceMap) -> None:
        """E210: an alias names no axis and no other alias, and is no option of the command line."""
        owners: dict[str, str] = {}
        for name, axis in axes.items():
            for alias in axis.aliases:
                where = ("axes", name, "aliases", alias)
                taken = alias if alias in data["axes"] else owners.get(alias)
                if taken is not None or alias in RESERVED_AXIS_NAMES:
                    what = (f"--{alias.replace('_', '-')} is an option of the command line" if taken is None
                            else f"it already names axis {echo(taken)}")
                    self.fail(smap, where, f"alias {echo(alias)} of axis {echo(name)}: {what}", key=True,
                              hint="an alias is a name no axis and no other alias has", code="E210")
                owners.setdefault(alias, name)

    def alias_hint(self, name: str, candidates: list[str], what: str) -> str | None:
        """The hint for an unknown axis ``name``: the axis it is an alias of, else the closest names."""
        for axis in self.known.values():
            if name in axis.aliases:
                return (f"{echo(name)} is {axis.aliases[name]}'s word for axis {echo(axis.name)}: "
                        "a capability file names the axis, queries may use either")
        return _hints.suggest(name, candidates, what)

    # -- derived axes -------------------------------------------------------------------------

    def _derived(
        self, axes: dict[str, Axis], data: dict[str, Any], smap: _yaml.SourceMap
    ) -> dict[str, DerivedAxis]:
        """Read the decision tables of derived axes, in declaration order (a table reads earlier axes)."""
        out: dict[str, DerivedAxis] = {}
        names = [n for n, raw in data["axes"].items() if "derive" in raw and n in axes]
        for name in names:
            raw = data["axes"][name]
            path: tuple[str | int, ...] = ("axes", name, "derive")
            axis = axes[name]
            if "default" in raw:
                self.fail(smap, ("axes", name, "default"), "a derived axis has no default",
                          hint="its value comes from its table", code="E216")
            readable = {n: a for n, a in axes.items() if n not in names or n in out}
            rows: list[DerivedRow] = []
            table = raw["derive"]
            for i, row in enumerate(table):
                rpath = (*path, i)
                value = row["value"]
                if axis.index(value) is None:
                    self.fail(smap, (*rpath, "value"),
                              f"{echo(value)} is not a value of derived axis {echo(name)}", code="E216")
                    continue
                when = self._when(row.get("when"), (*rpath, "when"), smap, readable, name)
                if when is None:
                    continue
                if i == len(table) - 1 and "when" in row:
                    self.fail(smap, (*rpath, "when"),
                              f"the last row of derived axis {echo(name)} must have no 'when'",
                              hint="end the table with an unconditional row: it may not fall through",
                              code="E216")
                line, col = smap.locate(rpath)
                rows.append(DerivedRow(value=value, when=when, text=_when_text(when),
                                       location=Location(path=smap.path, line=line, column=col)))
            out[name] = DerivedAxis(axis=axis, rows=tuple(rows))
        self.derived = out
        return out

    def _when(
        self,
        raw: dict[str, Any] | None,
        path: tuple[str | int, ...],
        smap: _yaml.SourceMap,
        readable: dict[str, Axis],
        owner: str,
        unknown_code: str = "E221",
    ) -> tuple[dict[str, Condition], ...] | None:
        """A `when:` mapping as one box of symbolic conditions (() for none); None after a problem."""
        if raw is None:
            return ()
        conditions: dict[str, Condition] = {}
        ok = True
        for axis_name, raw_cond in raw.items():
            axis = readable.get(axis_name)
            if axis is None:
                later = axis_name == owner or axis_name in self.known
                self.fail(
                    smap, (*path, axis_name),
                    f"{echo(owner)} cannot read axis {echo(axis_name)}" if later
                    else f"unknown axis {echo(axis_name)}", key=True,
                    hint=("a table reads base axes and derived axes declared before it" if later
                          else self.alias_hint(axis_name, list(readable), "axes")),
                    code="E216" if later else unknown_code,
                )
                ok = False
                continue
            cond = self._condition(axis, raw_cond, smap, (*path, axis_name))
            if cond is None:
                ok = False
            else:
                conditions[axis_name] = cond
        return (conditions,) if ok else None

    def _derived_region(self, name: str, cond: Condition) -> Region:
        """Where (over the base axes' known values) derived axis ``name`` takes a value ``cond`` admits."""
        cache: dict[tuple[str, str], Region] = self.__dict__.setdefault("_region_cache", {})
        key = (name, cond.text)
        found = cache.get(key)
        if found is not None:
            return found
        taken = Region(self.space)
        out = Region(self.space)
        for row in self.derived[name].rows:
            here = Region.full(self.space)
            for box in row.when:
                here = self._box_region(box)
            fresh = here - taken
            if cond.contains(row.value):
                out = out | fresh
            taken = taken | fresh
        found = out.merged()
        cache[key] = found
        return found

    def _box_region(self, conditions: Mapping[str, Condition]) -> Region:
        """The region (over known values) of a box of conditions on base or derived axes."""
        masks = []
        for axis in self.space.axes:
            cond = conditions.get(axis.name)
            masks.append(axis.full_mask if cond is None else cond.mask(axis.values))
        region = Region(self.space, [tuple(masks)], disjoint=True)
        for name, cond in conditions.items():
            if name in self.derived:
                region = region & self._derived_region(name, cond)
        return region

    # -- conditions ----------------------------------------------------------------------------

    def _condition(
        self, axis: Axis, raw: Any, smap: _yaml.SourceMap, path: tuple[str | int, ...],  # noqa: ANN401
        *, admit_none: bool = True,
    ) -> Condition | None:
        """One axis's condition.

        On an optional axis ``none`` passes a condition of a grant or a `when` (``admit_none``) and
        fails one of an exclusion: not checked means the exclusion does not apply.
        """
        memo = (axis.name, admit_none, repr(raw))
        found = self.conditions.get(memo)
        if found is not None:  # built before without a problem (a problem is reported each time)
            return found
        built = self._build_condition(axis, raw, smap, path, admit_none=admit_none)
        if built is not None:
            self.conditions[memo] = built
        return built

    def _build_condition(
        self, axis: Axis, raw: Any, smap: _yaml.SourceMap, path: tuple[str | int, ...],  # noqa: ANN401
        *, admit_none: bool,
    ) -> Condition | None:
        negated = isinstance(raw, dict) and "not" in raw
        items_raw = raw["not"] if negated else raw
        item_path = (*path, "not") if negated else path
        is_list = isinstance(items_raw, list)
        items = items_raw if is_list else [items_raw]
        values: set[AxisValue] = set()
        intervals: list[Interval] = []
        families: list[str] = []
        moduli: list[int] = []
        ok = True
        for i, item in enumerate(items):
            ipath = (*item_path, i) if is_list else item_path
            parsed = self._item(axis, item, smap, ipath)
            if parsed is None:
                ok = False
            elif isinstance(parsed, _Multiple):
                moduli.append(parsed.of)
            elif isinstance(parsed, Interval):
                intervals.append(parsed)
            elif isinstance(parsed, tuple):
                families.append(parsed[0])
                if isinstance(parsed[1], Interval):
                    intervals.append(parsed[1])
                else:
                    values.update(parsed[1])
            else:
                values.add(parsed)
        if not ok:
            return None
        text = _render(items_raw)
        return Condition(
            axis=axis.name,
            text=f"not {text}" if negated else text,
            values=frozenset(values),
            intervals=tuple(intervals),
            families=tuple(families),
            negated=negated,
            moduli=tuple(moduli),
            optional=axis.optional,
            admits_none=axis.optional and admit_none,
        )

    def _item(
        self, axis: Axis, item: Any, smap: _yaml.SourceMap, path: tuple[str | int, ...]  # noqa: ANN401
    ) -> AxisValue | Interval | _Multiple | tuple[str, tuple[int, ...] | Interval] | None:
        yaml11 = path in smap.yaml11_bools
        if isinstance(item, dict):  # {multiple_of: m}; the schema allows no other mapping here
            m = item["multiple_of"]
            if axis.type is not AxisType.INT:
                self.fail(smap, path, f"multiple_of is for int axes; {echo(axis.name)} is {axis.type}",
                          code="E224")
                return None
            if isinstance(m, bool) or not isinstance(m, int) or m <= 0:
                self.fail(smap, (*path, "multiple_of"),
                          f"multiple_of needs a positive integer, got {echo(m)}", code="E224")
                return None
            return _Multiple(m)
        if axis.type is AxisType.BOOL:
            if isinstance(item, bool):
                return item
            self.fail(smap, path, f"axis {echo(axis.name)} is bool: use true or false, not {echo(item)}",
                      code="E222")
            return None
        if axis.type is AxisType.ENUM:
            if isinstance(item, str) and item in axis.values:
                return item
            if isinstance(item, str) and item in axis.spellings:
                return axis.spellings[item]
            known = [str(v) for v in axis.values]
            if isinstance(item, bool) and yaml11:
                hint = "YAML 1.1 reads unquoted yes/no/on/off as booleans; quote the word"
            else:
                hint = _hints.suggest(str(item), known, "known values")
            self.fail(
                smap, path,
                f"{echo(item)} is not one of: {', '.join(known)} (axis {echo(axis.name)})",
                hint=hint, code="E222",
            )
            return None
        # int axis: a known value, a family, a comparison or an interval.
        if isinstance(item, int) and not isinstance(item, bool):
            if item in axis.values:
                return item
            self.fail(
                smap, path, f"{echo(item)} is not a known value of axis {echo(axis.name)}",
                hint="add it to the axis values, or use a range such as '>=100'", code="E222",
            )
            return None
        if isinstance(item, str):
            if item in axis.family_ranges:  # a family defined by a range is that range
                found = _parse_range(axis.family_ranges[item])
                assert found is not None  # noqa: S101 - the axis kept it only after reading it as one
                return (item, found)
            if item in axis.families:
                return (item, axis.families[item])
            try:
                interval = _parse_range(item)
            except _BadRangeError as exc:
                self.fail(smap, path, f"range {_cut(item)!r}: {exc.message}",
                          hint=exc.hint, code="E225")
                return None
            if interval is not None:
                if interval.low is not None and interval.high is not None and not any(
                    v in interval for v in range(interval.low, interval.high + 1)
                ):
                    self.fail(smap, path, f"range {echo(item)} is empty", code="E223")
                    return None
                return interval
            choices = list(axis.families)
            close = _hints.close(item, choices)
            self.fail(
                smap, path,
                f"{echo(item)} is neither a family of {echo(axis.name)} nor a range",
                hint=(f"did you mean {echo(close)}?" if close else
                      "ranges look like '>=80', '<120' or '[80, 120)'"
                      + (f"; families: {', '.join(choices)}" if choices else "")),
                code="E222",
            )
            return None
        float_hint = None
        if path in smap.floats:
            float_hint = "YAML reads 1.10 as the float 1.1; quote it or use an int"
        self.fail(smap, path, f"{echo(item)} is not an int, family or range (axis {echo(axis.name)} is int)",
                  hint=float_hint, code="E222")
        return None

    def _axis_values(
        self,
        raw: dict[str, Any],
        base: tuple[str | int, ...],
        smap: _yaml.SourceMap,
        axes: dict[str, Axis],
    ) -> dict[str, AxisValue]:
        """Check a mapping of axis -> one known value (model defaults, role pins)."""
        values: dict[str, AxisValue] = {}
        for axis_name, value in raw.items():
            path = (*base, axis_name)
            axis = axes.get(axis_name)
            if axis is None:
                self.fail(smap, path, f"unknown axis {echo(axis_name)}", key=True,
                          hint=self.alias_hint(axis_name, list(axes), "axes"), code="E230")
                continue
            # An int axis is open: a model may pin an int no list names (a GQA group of 3).
            open_int = axis.type is AxisType.INT and type(value) is int
            if axis.index(value) is None and not open_int:
                known = ", ".join(map(str, axis.known))
                self.fail(smap, path, f"{echo(value)} is not a value of axis {echo(axis_name)} ({known})",
                          hint=_hints.suggest(str(value), [str(v) for v in axis.known], "known values"),
                          code="E231")
                continue
            values[axis_name] = value
        return {a: values[a] for a in axes if a in values}


class _Multiple:
    """A parsed ``{multiple_of: m}`` item."""

    __slots__ = ("of",)

    def __init__(self, of: int) -> None:
        self.of = of


def _when_text(when: tuple[dict[str, Condition], ...]) -> str:
    if not when:
        return "otherwise"
    return " and ".join(f"{a} {c.text}" for a, c in when[0].items()) or "always"


class _BadRangeError(Exception):
    """A string shaped like a range whose numbers cannot be read (control flow inside this module)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _bound(digits: str) -> int:
    """An integer of a range: ASCII digits, within a signed 64-bit word.

    :raises _BadRangeError: for a number past the limit (also one of thousands of digits).
    """
    if len(digits.lstrip("-")) > _MAX_RANGE_DIGITS:
        raise _BadRangeError(
            f"number of {len(digits.lstrip('-'))} digits is out of range",
            "range bounds are axis integers (signed 64-bit)",
        )
    number = int(digits, 10)
    if number.bit_length() > _MAX_INT_BITS:
        raise _BadRangeError(
            f"number {number} is out of range (more than {_MAX_INT_BITS} bits)",
            "range bounds are axis integers (signed 64-bit)",
        )
    return number


def _parse_range(text: str) -> Interval | None:
    """The interval a range string denotes, or None when the text is not shaped like a range.

    :raises _BadRangeError: for a range with non-ASCII digits or numbers out of range.
    """
    match = _CMP.match(text)
    if match:
        op, number = match.group(1), _bound(match.group(2))
        if op == ">=":
            return Interval(low=number, low_inclusive=True)
        if op == ">":
            return Interval(low=number, low_inclusive=False)
        if op == "<=":
            return Interval(high=number, high_inclusive=True)
        if op == "<":
            return Interval(high=number, high_inclusive=False)
        return Interval(low=number, high=number, high_inclusive=True)  # ==
    match = _INTERVAL.match(text)
    if match:
        return Interval(
            low=_bound(match.group(2)),
            low_inclusive=match.group(1) == "[",
            high=_bound(match.group(3)),
            high_inclusive=match.group(4) == "]",
        )
    if _RANGE_SHAPE.match(text):
        raise _BadRangeError(
            "only ASCII digits and spaces are read in a range",
            "write the digits 0-9; a lookalike digit or space is not read as a number",
        )
    return None


def _render(raw: Any) -> str:  # noqa: ANN401 - plain YAML data
    if isinstance(raw, dict) and "multiple_of" in raw:
        return f"multiple_of {raw['multiple_of']}"
    if isinstance(raw, list):
        return "[" + ", ".join(_render(item) for item in raw) + "]"
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return str(raw)
