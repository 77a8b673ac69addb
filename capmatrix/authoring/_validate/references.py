"""Layer three of loading, references: kernels, gates, models, roles and GPUs; the matrix is built here.

Kernels and their rules (rules on derived axes expanded over the open domains), gates and what they
guard, models, roles, GPUs, and the engine vocabularies each reads.
"""

from __future__ import annotations

from capmatrix._core.classes import signatures
from capmatrix._core.record import replace
from capmatrix.authoring._validate import hints as _hints
from capmatrix.authoring._validate.composition import compose
from capmatrix.authoring._validate.values import _Values, _when_text, open_domains
from capmatrix.errors import CapabilityError, echo
from capmatrix.matrix import Matrix, gpu_spelling
from capmatrix.model import (
    CORE,
    GPU,
    NONE,
    Axis,
    AxisType,
    AxisValue,
    Condition,
    Effect,
    Guard,
    Kernel,
    Location,
    ModelFamily,
    Role,
    RoleOrder,
    Rule,
    Status,
    ValueOf,
    format_value,
)
from capmatrix.regions import Region, Space, bits

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

    from capmatrix.authoring._yaml import read as _yaml


__all__: list[str] = []


class _Semantics(_Values):
    """Layers two and three: values (:class:`_Values`) and cross-references, then the matrix."""

    def build(
        self, root: str, docs: list[tuple[dict[str, Any], _yaml.SourceMap]]
    ) -> Matrix | None:
        axes_docs = [(d, s) for d, s in docs if "axes" in d]
        if len(axes_docs) > 1:
            first = axes_docs[0][1].path
            for _data, smap in axes_docs[1:]:
                self.fail(
                    smap, ("axes",), f"axes are declared again (first in {first})",
                    key=True, hint="keep the universe in one file", code="E200",
                )
        if not axes_docs:
            if docs:
                self.problems.append(
                    CapabilityError(
                        str(root), None, None, "", "no file declares the axes",
                        hint="add axes.yaml with an 'axes' section", code="E200",
                    )
                )
            return None
        all_axes = self._axes(*axes_docs[0])
        all_axes.update(self._releases(docs, all_axes))
        self.known = all_axes
        self.derived = self._derived(all_axes, *axes_docs[0])
        axes = {n: a for n, a in all_axes.items() if n not in self.derived}
        self.space = Space(tuple(axes.values()))
        rule_ids: dict[str, Location] = {}
        hf_types: dict[str, str] = {}
        kernels: dict[str, Kernel] = {}
        for name, raw, smap in self._entries("kernel", docs, kernels):
            kernels[name] = self._kernel(name, raw, smap, axes, rule_ids)
        models: dict[str, ModelFamily] = {}
        for name, raw, smap in self._entries("model", docs, models):
            models[name] = self._model(name, raw, smap, axes, hf_types)
        # Roles come last: their candidates refer to kernels of any file.
        roles: dict[str, Role] = {}
        asked: dict[str, tuple[_yaml.SourceMap, list[str]]] = {}
        for name, raw, smap in self._entries("role", docs, roles):
            roles[name] = self._role(name, raw, smap, kernels, axes)
            if "asks_first" in raw:
                asked[name] = (smap, raw["asks_first"])
        self._check_scopes(axes, kernels, roles, docs)
        # After the scopes: each order is checked once, against the engine of the role that wrote it.
        roles = compose(roles, asked, self.order_paths, self.problems)
        # Every condition is read: the int axes get their classes, and what ranges over an axis's
        # values (rules on derived axes, the areas of role orders) is worked out over them.
        axes = self._open_domains(axes, kernels, roles)
        self.space = Space(tuple(axes.values()))
        kernels = {name: self._expanded(kernel) for name, kernel in kernels.items()}
        roles = {name: self._areas(role) for name, role in roles.items()}
        for smap, path, gate, target in self.guarded:
            if target not in kernels and target not in roles:
                self.fail(smap, path, f"gate {echo(gate)} guards unknown kernel or role {echo(target)}",
                          hint=_hints.suggest(target, [*kernels, *roles], "kernels and roles"), code="E244")
        gates = [k for k, kernel in kernels.items() if kernel.kind == "gate"]
        for smap, path, gate, check in self.caught:
            if check not in gates or check == gate:
                others = [g for g in gates if g != gate]
                self.fail(smap, path, f"gate {echo(gate)}: 'caught_by' names {echo(check)}, which is no "
                          "other gate of the matrix",
                          hint=_hints.suggest(check, others, "gates") if others else
                          "declare the engine's start check as a gate (kind: gate) and name it", code="E247")
        return Matrix(
            root=str(root),
            files=tuple(s.path for _d, s in docs),
            axes=axes,
            kernels=kernels,
            models=models,
            roles=roles,
            derived={n: d for n, d in self.derived.items() if n in all_axes},
            gpus=_gpus(self, docs, axes),
            releases=dict(self.releases),
        )

    def _entries(
        self,
        what: str,
        docs: list[tuple[dict[str, Any], _yaml.SourceMap]],
        defined: dict[str, Any],
    ) -> Iterator[tuple[str, dict[str, Any], _yaml.SourceMap]]:
        """Yield the well-shaped entries of one section across files; report names defined twice.

        ``defined`` is filled by the caller as it builds each entry, so a later duplicate is seen.
        """
        section = f"{what}s"
        for data, smap in docs:
            for name, raw in data.get(section, {}).items():
                if self._skip_entry(smap, section, name):
                    continue
                if name in defined:
                    self.fail(
                        smap, (section, name),
                        f"{what} {echo(name)} is already defined at {defined[name].location}",
                        key=True, code="E201",
                    )
                    continue
                yield name, raw, smap

    # -- engine vocabularies --------------------------------------------------------------------

    def _check_scopes(
        self, axes: dict[str, Axis], kernels: dict[str, Kernel], roles: dict[str, Role],
        docs: list[tuple[dict[str, Any], _yaml.SourceMap]],
    ) -> None:
        """E226: a kernel, table or role reads only the core axes and those of its own engine's scope."""
        every = {**axes, **{n: d.axis for n, d in self.derived.items()}}
        smaps = {s.path: s for _d, s in docs}

        def foreign(name: str, engine: str | None) -> bool:
            axis = every.get(name)
            return axis is not None and axis.scope not in (CORE, engine)

        def report(where: Location, what: str, name: str, engine: str | None) -> None:
            smap = smaps.get(where.path)
            if smap is None:  # pragma: no cover - every location comes from a read file
                return
            scope = every[name].scope
            owner = f"engine {echo(engine)}" if engine not in (None, CORE) else "no engine: core axes only"
            self.problems.append(CapabilityError(
                where.path, where.line, where.column, "",
                f"{what} ({owner}) reads axis {echo(name)} of scope {echo(scope)}",
                hint=f"set 'engine: {scope}' on it, or give the axis scope 'core' if every engine shares it",
                code="E226",
            ))

        for kernel in kernels.values():
            pending = self.pending.get(kernel.name, {})
            for i, rule in enumerate(kernel.rules):
                for name in (*rule.conditions, *pending.get(i, {})):
                    if foreign(name, kernel.engine):
                        report(rule.location, f"rule {echo(rule.id)} of kernel {echo(kernel.name)}",
                               name, kernel.engine)
                        break
        for d in self.derived.values():
            for row in d.rows:
                for box in row.when:
                    for name in box:
                        if foreign(name, d.axis.scope):
                            report(row.location, f"derived axis {echo(d.axis.name)}", name, d.axis.scope)
        for role in roles.values():
            # A role is its engine's when its candidates name one (kernels of no engine are shared).
            engines = {kernels[c].engine for c in role.candidates if c in kernels} - {None}
            engine = next(iter(engines)) if len(engines) == 1 else None
            for order in role.orders:
                for box in order.when:
                    for name in box:
                        if foreign(name, engine):
                            report(order.location, f"role {echo(role.name)}", name, engine)

    # -- open int domains ----------------------------------------------------------------------

    def _open_domains(
        self, axes: dict[str, Axis], kernels: dict[str, Kernel], roles: dict[str, Role]
    ) -> dict[str, Axis]:
        """The int axes with their cuts (every distinct condition on them) and class representatives."""
        boxes: list[Mapping[str, Condition]] = [
            rule.conditions for kernel in kernels.values() for rule in kernel.rules]
        boxes += [box for d in self.derived.values() for row in d.rows for box in row.when]
        boxes += [box for role in roles.values() for order in role.orders for box in order.when]
        boxes += [box for kernel in kernels.values() if kernel.guards is not None
                  for box in kernel.guards.when]
        return open_domains(axes, boxes)

    def _expanded(self, kernel: Kernel) -> Kernel:
        """``kernel`` with its rules on derived axes split into parts over the (open) base axes."""
        pending = self.pending.get(kernel.name)
        if not pending:
            return kernel
        rules: list[Rule] = []
        for i, rule in enumerate(kernel.rules):
            derived = pending.get(i)
            rules.extend(self._expand(rule, derived) if derived else (rule,))
        return replace(kernel, rules=tuple(rules))

    def _areas(self, role: Role) -> Role:
        """``role`` with each order's area: where it applies and no earlier order does (E243 if nowhere)."""
        taken = Region(self.space)
        orders = []
        for order in role.orders:
            here = self._box_region(order.when[0]) if order.when else Region.full(self.space)
            area = (here - taken).merged()
            # Only the role's own orders are reported here: those it asks first are its others' (keyed
            # by their role), and a last order without 'when' is shadowed only by orders asked first.
            where = self.order_paths.get((role.name, order.location))
            if not area and (order.when or role.asks_first) and where is not None:
                earlier = (f"the orders of {', '.join(map(echo, role.asks_first))} (asks_first) and earlier "
                           "orders" if role.asks_first else "earlier orders")
                self.fail(where[0], (*where[1], "when") if order.when else where[1],
                          f"this order never applies: {earlier} take every query it names", code="E243")
            taken = taken | area
            orders.append(replace(order, area=area.boxes))
        return replace(role, orders=tuple(orders))

    # -- kernels and rules ---------------------------------------------------------------------

    def _region(
        self, region: dict[str, Any], smap: _yaml.SourceMap, rpath: tuple[str | int, ...],
        axes: dict[str, Axis], effect: Effect, *, skip: tuple[tuple[str | int, ...], ...] = (),
    ) -> tuple[dict[str, Condition], dict[str, Condition]]:
        """A rule's region: its conditions on axes and on derived axes, each name and value checked.

        ``skip``: paths of conditions not to read (a shape error lies in them).
        """
        conditions: dict[str, Condition] = {}
        derived: dict[str, Condition] = {}
        for axis_name, raw_cond in region.items():
            cpath = (*rpath, axis_name)
            if cpath in skip:
                continue
            axis = axes.get(axis_name)
            if axis is None and axis_name in self.derived:
                dcond = self._condition(self.derived[axis_name].axis, raw_cond, smap, cpath)
                if dcond is not None:
                    derived[axis_name] = dcond
                continue
            if axis is None:
                self.fail(
                    smap, cpath, f"unknown axis {echo(axis_name)}", key=True,
                    hint=self.alias_hint(axis_name, list(axes), "axes"), code="E221",
                )
                continue
            cond = self._condition(axis, raw_cond, smap, cpath, admit_none=effect is Effect.GRANT)
            if cond is not None:
                conditions[axis_name] = cond
        return conditions, derived

    def _broken_rule(
        self, raw_rule: object, smap: _yaml.SourceMap, path: tuple[str | int, ...], axes: dict[str, Axis],
        rule_ids: dict[str, Location],
    ) -> None:
        """A rule with a shape error is left out, but its sound parts are still checked (names, values, id).

        So that one run reports every problem of the rule (a misspelt status and an unknown axis alike),
        as ``capmatrix validate`` promises. A part is sound when no shape error lies in it or between it
        and the rule (an error at the rule itself, a missing field say, leaves its regions readable: the
        schema checks them on their own).
        """
        if not isinstance(raw_rule, dict):
            return
        bad = self.broken.get(smap.path, set())

        def sound(sub: tuple[str | int, ...]) -> bool:
            return not any(b[: len(sub)] == sub or (len(path) < len(b) < len(sub) and sub[: len(b)] == b)
                           for b in bad)

        rule_id = raw_rule.get("id")
        if isinstance(rule_id, str) and sound((*path, "id")):
            if rule_id in rule_ids:
                self.fail(smap, (*path, "id"),
                          f"rule id {echo(rule_id)} is already used at {rule_ids[rule_id]}",
                          hint="rule ids are stable and unique across the matrix", code="E220")
            else:
                line, col = smap.locate(path)
                rule_ids[rule_id] = Location(path=smap.path, line=line, column=col)
        for effect in Effect:
            rpath = (*path, str(effect))
            region = raw_rule.get(str(effect))
            if isinstance(region, dict) and rpath not in bad:
                skip = tuple((*rpath, name) for name in region if not sound((*rpath, name)))
                self._region(region, smap, rpath, axes, effect, skip=skip)

    def _kernel(
        self,
        name: str,
        raw: dict[str, Any],
        smap: _yaml.SourceMap,
        axes: dict[str, Axis],
        rule_ids: dict[str, Location],
    ) -> Kernel:
        rules: list[Rule] = []
        for i, raw_rule in enumerate(raw["rules"]):
            path: tuple[str | int, ...] = ("kernels", name, "rules", i)
            if self.is_broken(smap, path):
                self._broken_rule(raw_rule, smap, path, axes, rule_ids)
                continue
            line, col = smap.locate(path)
            location = Location(path=smap.path, line=line, column=col)
            rule_id = raw_rule["id"]
            if rule_id in rule_ids:
                self.fail(
                    smap, (*path, "id"),
                    f"rule id {echo(rule_id)} is already used at {rule_ids[rule_id]}",
                    hint="rule ids are stable and unique across the matrix", code="E220",
                )
            rule_ids[rule_id] = location
            effect = Effect.GRANT if "grant" in raw_rule else Effect.EXCLUDE
            conditions, derived = self._region(raw_rule[str(effect)], smap, (*path, str(effect)), axes,
                                               effect)
            released = self._release_condition(raw.get("engine"), raw_rule, smap, path)
            if released is not None:
                self._add_release(conditions, released, smap, path)
            rule = Rule(
                id=rule_id,
                kernel=name,
                effect=effect,
                conditions={a: conditions[a] for a in axes if a in conditions},
                reason=raw_rule["reason"],
                source=raw_rule["source"],
                status=Status(raw_rule["status"]),
                location=location,
                verified=raw_rule.get("verified"),
            )
            if derived:  # expanded once every condition is read (the int axes' classes need them all)
                self.pending.setdefault(name, {})[len(rules)] = derived
            rules.append(rule)
        line, col = smap.locate(("kernels", name), key=True)
        kind = raw.get("kind", "kernel")
        return Kernel(
            name=name,
            description=raw["description"],
            rules=tuple(rules),
            location=Location(path=smap.path, line=line, column=col),
            kind=kind,
            engine=raw.get("engine"),
            source=raw.get("source"),
            guards=None if "guards" not in raw else self._guard(name, kind, raw["guards"], smap, axes),
        )

    def _add_release(
        self, conditions: dict[str, Condition], released: tuple[str, Condition], smap: _yaml.SourceMap,
        path: tuple[str | int, ...],
    ) -> None:
        """Put a ``since`` / ``until`` condition into ``conditions`` (E262 when they name the axis too)."""
        axis, cond = released
        if axis in conditions:
            self.fail(smap, path, f"the releases are given twice: by 'since' / 'until' and by {echo(axis)}",
                      hint="keep one of them", code="E262")
            return
        conditions[axis] = cond

    def _guard(
        self, name: str, kind: str, raw: Any, smap: _yaml.SourceMap, axes: dict[str, Axis],  # noqa: ANN401
    ) -> Guard | None:
        """A gate's ``guards``: a list of names, or ``targets`` with ``when``, ``axes`` and ``refused``."""
        base: tuple[str | int, ...] = ("kernels", name, "guards")
        if kind != "gate":
            self.fail(smap, base, f"{echo(name)} is a kernel; only a gate (kind: gate) guards others",
                      key=True, hint="add 'kind: gate', or remove 'guards'", code="E245")
            return None
        spec: dict[str, Any] = {"targets": raw} if isinstance(raw, list) else raw
        names = base if isinstance(raw, list) else (*base, "targets")
        self.guarded.extend((smap, (*names, i), name, t) for i, t in enumerate(spec["targets"]))
        raw = spec.get("when")
        # One box, or a list of boxes (a union): each is read as a rule's conditions are.
        listed = isinstance(raw, list)
        boxes: list[dict[str, Condition]] = []
        for i, raw_box in enumerate(raw if listed else [] if raw is None else [raw]):
            path = (*base, "when", i) if listed else (*base, "when")
            raw_when = dict(raw_box)
            for axis_name in [a for a in raw_when if a in self.derived]:
                self.fail(smap, (*path, axis_name),
                          f"a guard's 'when' reads base axes; {echo(axis_name)} is a derived axis", key=True,
                          hint="write the condition on the axes its table reads", code="E230")
                del raw_when[axis_name]
            when = self._when(raw_when, path, smap, axes, name, unknown_code="E230")
            if when:
                boxes.append(when[0])
        admitted = self._axis_values(spec.get("axes", {}), (*base, "axes"), smap, axes)
        caught = tuple(spec.get("caught_by", ()))
        self.caught.extend((smap, (*base, "caught_by", i), name, c) for i, c in enumerate(caught))
        refused = spec.get("refused")
        line, col = smap.locate(base, key=True)
        return Guard(
            targets=tuple(spec["targets"]), location=Location(path=smap.path, line=line, column=col),
            when=tuple(boxes), axes=admitted,
            refused=None if refused is None else self._axis_values(refused, (*base, "refused"), smap, axes),
            means=self._means(spec.get("means", {}), (*base, "means"), smap, axes), caught_by=caught,
        )

    def _means(
        self, raw: dict[str, Any], base: tuple[str | int, ...], smap: _yaml.SourceMap, axes: dict[str, Axis],
    ) -> dict[str, dict[AxisValue, AxisValue | ValueOf]]:
        """A guard's ``means``: per enum axis, word -> a value of the axis or ``{value_of: other}``.

        Words and values may be spellings (folded here). A ``value_of`` axis must be an enum axis whose
        every value is a value of the meant axis, so that each cell has one guarded query.
        """
        out: dict[str, dict[AxisValue, AxisValue | ValueOf]] = {}
        for axis_name, table in raw.items():
            path = (*base, axis_name)
            axis = self._meant_axis(axis_name, path, smap, axes)
            if axis is None:
                continue
            meanings: dict[AxisValue, AxisValue | ValueOf] = {}
            for word, meaning in table.items():
                where = (*path, word)
                known = self._word(axis, word, where, smap, key=True)
                if known is None:
                    continue
                if isinstance(meaning, dict):
                    other = self._meant_axis(meaning["value_of"], (*where, "value_of"), smap, axes)
                    if other is not None and self._covers(axis, other, (*where, "value_of"), smap):
                        meanings[known] = ValueOf(other.name)
                    continue
                value = self._word(axis, meaning, where, smap, key=False)
                if value is not None:
                    meanings[known] = value
            out[axis_name] = meanings
        return {a: out[a] for a in axes if a in out}

    def _meant_axis(
        self, name: str, path: tuple[str | int, ...], smap: _yaml.SourceMap, axes: dict[str, Axis],
    ) -> Axis | None:
        """The enum axis ``name`` of a guard's ``means`` (E230 unknown, E246 not an enum)."""
        axis = axes.get(name)
        if axis is None:
            derived = name in self.derived
            self.fail(smap, path, f"a guard's 'means' reads base axes; {echo(name)} is a derived axis"
                      if derived else f"unknown axis {echo(name)}", key=path[-1] != "value_of",
                      hint="name the axes its table reads" if derived
                      else self.alias_hint(name, list(axes), "axes"), code="E230")
            return None
        if axis.type is not AxisType.ENUM:
            self.fail(smap, path, f"'means' names words of enum axes; {echo(name)} is of type {axis.type}",
                      key=path[-1] != "value_of", code="E246",
                      hint="read an enum axis, or name a value" if path[-1] == "value_of"
                      else "pin the value with 'axes' instead")
            return None
        return axis

    def _word(
        self, axis: Axis, word: Any, path: tuple[str | int, ...], smap: _yaml.SourceMap, *, key: bool,  # noqa: ANN401
    ) -> AxisValue | None:
        """``word`` as a value of the enum ``axis`` (a spelling folded), or None after E231."""
        value = axis.spellings.get(word, word) if isinstance(word, str) else word
        if axis.index(value) is None:
            known = ", ".join(map(str, axis.known))
            self.fail(smap, path, f"{echo(word)} is not a value of axis {echo(axis.name)} ({known})", key=key,
                      hint=_hints.suggest(str(word), [str(v) for v in axis.known], "known values"),
                      code="E231")
            return None
        return value

    def _covers(self, axis: Axis, other: Axis, path: tuple[str | int, ...], smap: _yaml.SourceMap) -> bool:
        """Whether every value of ``other`` is a value of ``axis`` (else E246)."""
        missing = [v for v in other.values if axis.index(v) is None]  # values as they are: no chains
        if missing:
            many = len(missing) > 1
            self.fail(smap, path, f"{', '.join(map(str, missing))} of axis {echo(other.name)} "
                      f"{'are not values' if many else 'is not a value'} of axis {echo(axis.name)}",
                      hint=f"add {'them' if many else 'it'} to {axis.name}'s values, or map the word to "
                      "a value", code="E246")
        return not missing

    def _expand(self, rule: Rule, derived: dict[str, Condition]) -> list[Rule]:
        """Split a rule that tests derived axes into parts over the axes their tables read.

        Each part is one box of the region (over known values) where the rule's own conditions hold and
        the tables give the tested values; the first part keeps the rule's id, the others add ``#2``,
        ``#3``, ... Conditions the expansion leaves as written stay symbolic (ranges keep answering
        values outside the universe).
        """
        text = " and ".join(f"{a} {c.text}" for a, c in derived.items())
        region = self._box_region({**rule.conditions, **derived}).merged()
        parts: list[Rule] = []
        for box in region.boxes or (None,):
            conditions: dict[str, Condition] = {}
            for i, axis in enumerate(self.space.axes):
                own = rule.conditions.get(axis.name)
                if box is None:  # nothing left: a part that matches nothing, so analyses see the rule
                    conditions[axis.name] = Condition(axis=axis.name, text="[]")
                    break
                mask = box[i]
                own_mask = axis.full_mask if own is None else own.mask(axis.values)
                if mask == own_mask:
                    if own is not None:
                        conditions[axis.name] = own
                    continue
                chosen = axis.values_of(mask)
                listed = [format_value(v) for v in chosen if v in axis.known]
                others = [format_value(v) for v in chosen if v not in axis.known]
                if others:
                    listed.append("and ints like " + ", ".join(others))
                shown = "[" + ", ".join(listed) + "]"
                if axis.cuts:  # an open int axis: the chosen classes, so that every int is answered
                    # Each chosen value's signature, read from the axis's (memoised) signatures.
                    sigs = signatures(axis.values, axis.cuts)
                    conditions[axis.name] = Condition(
                        axis=axis.name, text=shown, values=frozenset(v for v in chosen if v in axis.known),
                        signatures=frozenset(s for j in bits(mask) if (s := sigs[j]) is not None),
                        cuts=axis.cuts, optional=axis.optional,
                        admits_none=any(v == NONE and type(v) is str for v in chosen),
                    )
                    continue
                conditions[axis.name] = Condition(
                    axis=axis.name, text=shown, values=frozenset(chosen),
                )
            suffix = "" if not parts else f"#{len(parts) + 1}"
            parts.append(Rule(
                id=rule.id + suffix, kernel=rule.kernel, effect=rule.effect,
                conditions={a.name: conditions[a.name] for a in self.space.axes if a.name in conditions},
                reason=rule.reason, source=rule.source, status=rule.status, location=rule.location,
                verified=rule.verified, derived=text,
            ))
        return parts

    # -- models and roles ----------------------------------------------------------------------

    def _model(
        self,
        name: str,
        raw: dict[str, Any],
        smap: _yaml.SourceMap,
        axes: dict[str, Axis],
        hf_types: dict[str, str],
    ) -> ModelFamily:
        values = self._axis_values(raw["axes"], ("models", name, "axes"), smap, axes)
        for i, hf in enumerate(raw.get("hf_model_types", [])):
            if hf in hf_types:
                self.fail(smap, ("models", name, "hf_model_types", i),
                          f"model_type {echo(hf)} already maps to model {echo(hf_types[hf])}", code="E232")
            hf_types[hf] = name
        for i, hf_id in enumerate(raw.get("hf_ids", [])):
            key = "hf:" + hf_id.lower()  # Hub ids are case-insensitive
            if key in hf_types:
                self.fail(smap, ("models", name, "hf_ids", i),
                          f"Hugging Face id {echo(hf_id)} already names model {echo(hf_types[key])}",
                          hint="list each checkpoint under one model", code="E233")
            hf_types[key] = name
        line, col = smap.locate(("models", name), key=True)
        return ModelFamily(
            name=name,
            description=raw["description"],
            axes={a: values[a] for a in axes if a in values},
            source=raw["source"],
            location=Location(path=smap.path, line=line, column=col),
            hf_model_types=tuple(raw.get("hf_model_types", [])),
            recognise=raw.get("recognise"),
            hf_ids=tuple(raw.get("hf_ids", [])),
            hf_config=raw.get("hf_config"),
        )

    def _role(
        self,
        name: str,
        raw: dict[str, Any],
        smap: _yaml.SourceMap,
        kernels: dict[str, Kernel],
        axes: dict[str, Axis],
    ) -> Role:
        lists: list[tuple[tuple[str | int, ...], list[str]]] = []
        if "candidates" in raw:
            lists.append((("roles", name, "candidates"), raw["candidates"]))
        for k, order in enumerate(raw.get("orders", [])):
            lists.append((("roles", name, "orders", k, "candidates"), order["candidates"]))
        if ("candidates" in raw) == ("orders" in raw):
            self.fail(smap, ("roles", name), "a role needs exactly one of 'candidates' or 'orders'",
                      key=True, code="E242")
        everyone: list[str] = []
        for base, candidates in lists:
            seen: set[str] = set()
            for i, candidate in enumerate(candidates):
                path = (*base, i)
                if candidate not in kernels:
                    self.fail(smap, path, f"unknown kernel {echo(candidate)} in role {echo(name)}",
                              hint=_hints.suggest(candidate, list(kernels), "kernels"), code="E240")
                if candidate in seen:
                    self.fail(smap, path, f"kernel {echo(candidate)} is listed twice", code="E241")
                seen.add(candidate)
                if candidate not in everyone:
                    everyone.append(candidate)
        # A role is its engine's when its candidates name one (kernels of no engine are shared).
        engines = {kernels[c].engine for c in everyone if c in kernels} - {None}
        engine = next(iter(engines)) if len(engines) == 1 else None
        orders: list[RoleOrder] = []
        for k, order in enumerate(raw.get("orders", [])):
            opath: tuple[str | int, ...] = ("roles", name, "orders", k)
            when = self._when(order.get("when"), (*opath, "when"), smap, self.known, name,
                              unknown_code="E230")
            if when is None:
                continue
            released = self._release_condition(engine, order, smap, opath)
            if released is not None:
                boxes = [dict(box) for box in when] or [{}]
                for box in boxes:
                    self._add_release(box, released, smap, opath)
                when = tuple(boxes)
            line, col = smap.locate(opath)
            location = Location(path=smap.path, line=line, column=col)
            self.order_paths[(name, location)] = (smap, opath)
            # Its area comes once the int axes have their classes (_areas).
            orders.append(RoleOrder(
                when=when, candidates=tuple(order["candidates"]), text=_when_text(when),
                location=location,
            ))
        pinned = self._axis_values(raw.get("axes", {}), ("roles", name, "axes"), smap, axes)
        line, col = smap.locate(("roles", name), key=True)
        return Role(
            name=name,
            description=raw["description"],
            candidates=tuple(everyone),
            location=Location(path=smap.path, line=line, column=col),
            source=raw.get("source"),
            axes=pinned,
            orders=tuple(orders),
        )


#: The spellings of a GPU before its aliases: its key and its name.
_GPU_FIELDS = ("key", "name")


def _gpus(
    builder: _Semantics, docs: list[tuple[dict[str, Any], _yaml.SourceMap]], axes: dict[str, Axis],
) -> dict[str, GPU]:
    """The ``gpus:`` entries: each GPU's sm must be a value of the ``sm`` axis, each name one GPU's."""
    gpus: dict[str, GPU] = {}
    owners: dict[str, str] = {}  # a spelling as compared -> the key of the GPU it names
    sm = axes.get("sm")
    for key, raw, smap in builder._entries("gpu", docs, gpus):  # noqa: SLF001 - the loader's own walk
        path: tuple[str | int, ...] = ("gpus", key)
        if sm is None or sm.type is not AxisType.INT or sm.index(raw["sm"]) is None:
            known = "the matrix has no int axis 'sm'" if sm is None or sm.type is not AxisType.INT \
                else f"the sm axis has {', '.join(map(format_value, sm.known))}"
            builder.fail(smap, (*path, "sm"), f"GPU {echo(key)} has sm {echo(raw['sm'])}; {known}",
                         hint="add the SM to the sm axis's values, or correct the GPU's sm",
                         code="E250")
        aliases = tuple(raw.get("aliases", ()))
        for i, spelling in enumerate((key, raw["name"], *aliases)):
            owner = owners.setdefault(gpu_spelling(spelling), key)
            if owner != key:
                where = ((path, (*path, "name"))[i] if i < len(_GPU_FIELDS)
                         else (*path, "aliases", i - len(_GPU_FIELDS)))
                builder.fail(smap, where, f"{echo(spelling)} already names GPU {echo(owner)}",
                             hint="a name or alias names one GPU, whatever its case, spaces, - and _",
                             key=i == 0, code="E251")
        line, col = smap.locate(path, key=True)
        gpus[key] = GPU(key=key, name=raw["name"], sm=raw["sm"], aliases=aliases,
                        source=raw.get("source"), location=Location(path=smap.path, line=line, column=col))
    return gpus
