"""Roles that ask other roles first (``asks_first``), composed once when the matrix is loaded.

An engine may consult one list before another (SGLang's per-architecture overrides before its generic
default). A role says so with ``asks_first: [other, ...]``; the loader then gives it the named roles'
orders, in turn, before its own, so the resolver, the export, the page and the C++ header answer the
composed role as they answer any role, and none of them needs to know that it was composed.
"""

from __future__ import annotations

from capmatrix._core.record import replace
from capmatrix.authoring._validate import hints as _hints
from capmatrix.errors import CapabilityError, echo
from capmatrix.model import Role, RoleOrder, format_value

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Mapping

    from capmatrix.authoring._yaml.source import SourceMap
    from capmatrix.model import AxisValue, Location

    #: Where each order was written: (role, location) -> (source map, path), for E243.
    OrderPaths = dict[tuple[str, Location], tuple[SourceMap, tuple[str | int, ...]]]

__all__ = ["MAX_CHAIN", "compose"]

#: The longest chain of roles each asking the next first: composing recurses along it, so a hostile
#: matrix's chain of thousands of roles is refused with a located error instead of exhausting the stack.
MAX_CHAIN = 32


def compose(
    roles: dict[str, Role],
    asked: Mapping[str, tuple[SourceMap, list[str]]],
    order_paths: OrderPaths,
    problems: list[CapabilityError],
) -> dict[str, Role]:
    """``roles`` with each role that names ``asks_first`` composed; every misuse is reported (E248, E249).

    ``asked``: per role that has the key, its file's source map and the names as written. A name that
    cannot be asked is reported and left out; the rest still compose, so one load reports every problem.
    """
    done: dict[str, Role] = {}

    def visit(name: str, trail: tuple[str, ...]) -> Role:
        if name in done:
            return done[name]
        role = roles[name]
        if name not in asked:
            done[name] = role
            return role
        smap, names = asked[name]
        trail = (*trail, name)
        orders: list[RoleOrder] = []
        for i, target in enumerate(names):
            path = ("roles", name, "asks_first", i)
            problem = _refusal(name, target, names[:i], trail, roles)
            if problem is not None:
                message, hint = problem
                problems.append(smap.error(path, message, hint=hint, code="E248"))
                continue
            first = visit(target, trail)
            if not first.orders or not first.orders[-1].when:
                problems.append(smap.error(
                    path, f"role {echo(target)} has an order for every query (its 'candidates', or a last "
                    f"order without 'when'), so no order of role {echo(name)} would ever apply",
                    hint=f"give every order of {echo(target)} a 'when', or list its candidates in "
                    f"{echo(name)}'s own orders", code="E248"))
                continue
            if dict(first.axes) != dict(role.axes):
                problems.append(smap.error(
                    path, f"role {echo(target)} pins {_pins(first.axes)} and role {echo(name)} pins "
                    f"{_pins(role.axes)}: a role asks first only roles that pin the same values",
                    hint="pins apply to every order of the composed role; give both the same 'axes'",
                    code="E249"))
                continue
            orders.extend(first.orders)
        own = list(role.orders)
        if not own:  # a role of 'candidates' asks them after the others, for every query
            # At the role's own place: a clean load keeps the positions of entries, not of their keys.
            order_paths[(name, role.location)] = (smap, ("roles", name, "candidates"))
            own = [RoleOrder(when=(), candidates=role.candidates, text="otherwise", location=role.location)]
        everyone = dict.fromkeys(c for order in (*orders, *own) for c in order.candidates)
        done[name] = replace(role, orders=(*orders, *own), candidates=tuple(everyone),
                             asks_first=tuple(names))
        return done[name]

    return {name: visit(name, ()) for name in roles}


def _refusal(name: str, target: str, before: list[str], trail: tuple[str, ...],
             roles: Mapping[str, Role]) -> tuple[str, str | None] | None:
    """Why role ``name`` cannot ask ``target`` first (message, hint), or None when it can."""
    if target == name:
        return f"role {echo(name)} names itself", "name the roles it asks before its own orders"
    if target in before:
        return f"role {echo(target)} is named twice", None
    if target not in roles:
        others = [r for r in roles if r != name]
        return (f"unknown role {echo(target)}",
                _hints.suggest(target, others, "roles") if others else "declare the role under 'roles'")
    if target in trail:
        cycle = " -> ".join(map(echo, (*trail[trail.index(target):], target)))
        return (f"roles ask each other first: {cycle}",
                "one role of the cycle must list its orders itself")
    if len(trail) >= MAX_CHAIN:
        message = (f"role {echo(target)} would make a chain of more than {MAX_CHAIN} roles asking first "
                   f"(from {echo(trail[0])})")
        return message, "ask the roles at the chain's end from fewer roles"
    return None


def _pins(axes: Mapping[str, AxisValue]) -> str:
    if not axes:
        return "nothing"
    return "{" + ", ".join(f"{a}: {format_value(v)}" for a, v in axes.items()) + "}"
