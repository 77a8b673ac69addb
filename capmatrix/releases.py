"""Engine releases: which release a question is asked as, and the matrix as one release sees it.

An engine's releases are the values of its release axis (``capabilities/releases.yaml``); a rule or
role order that holds in some releases only is a condition on that axis. :func:`release` checks a
version an adapter or the command line was given; :func:`at_release` gives the matrix of one release
without the axis, which is what two releases are compared as (``capmatrix diff --engine``).
"""

from __future__ import annotations

from capmatrix._core.record import replace
from capmatrix.errors import InvalidArgument, did_you_mean
from capmatrix.resolver import compile_matrix

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Mapping

    from capmatrix.matrix import Matrix
    from capmatrix.model import Boxes, Condition, EngineReleases

__all__ = ["at_release", "engine_releases", "release"]


def engine_releases(matrix: Matrix, engine: str, *, argument: str = "engine") -> EngineReleases:
    """The releases ``engine`` declares in ``matrix``.

    :raises InvalidArgument: when the matrix models no release of ``engine`` (it names the engines
        that have some).
    """
    found = matrix.releases.get(engine) if type(engine) is str else None
    if found is None:
        known = ", ".join(matrix.releases) or "none"
        raise InvalidArgument(argument, engine, f"an engine with modelled releases ({known})",
                              suggestion=did_you_mean(str(engine), matrix.releases))
    return found


def release(matrix: Matrix, engine: str, version: object, *, argument: str = "version") -> str:
    """``version`` as one of ``engine``'s modelled releases; the newest when it is None.

    :raises InvalidArgument: for a version the matrix does not model (it lists the modelled ones), or
        one that is not a string.
    """
    releases = engine_releases(matrix, engine)
    if version is None:
        return releases.newest
    names = releases.names
    if type(version) is str and version in names:
        return version
    text = version.strip().removeprefix("v") if isinstance(version, str) else None
    if text in names:  # " 0.34.0", "v0.34.0": the same release, written as tags and shells do
        return text
    raise InvalidArgument(argument, version, f"one of {engine}'s modelled releases ({', '.join(names)})",
                          suggestion=did_you_mean(str(version), names))


def at_release(matrix: Matrix, engine: str, version: str) -> Matrix:
    """The matrix as ``engine``'s release ``version`` answers, without that engine's release axis.

    Rules, role orders, table rows and guards that do not hold in the release are gone; the others
    lose their condition on the release axis. Every other axis (int classes included) is kept as it
    is, so two releases compare over one universe.
    """
    name = release(matrix, engine, version)
    axis = engine_releases(matrix, engine).axis
    index = list(matrix.axes).index(axis)
    bit = 1 << matrix.axes[axis].values.index(name)

    def held(conditions: Mapping[str, Condition]) -> bool:
        cond = conditions.get(axis)
        return cond is None or cond.contains(name)

    def without(conditions: Mapping[str, Condition]) -> dict[str, Condition]:
        return {a: c for a, c in conditions.items() if a != axis}

    def boxes(when: Boxes) -> Boxes | None:
        """``when`` in the release (None where it holds nowhere; () stays "always")."""
        if not when:
            return when
        kept = tuple(without(box) for box in when if held(box))
        return kept or None

    kernels = {}
    for kname, kernel in matrix.kernels.items():
        rules = tuple(replace(r, conditions=without(r.conditions))
                      for r in kernel.rules if held(r.conditions))
        guards = kernel.guards
        if guards is not None and guards.when:
            guards = replace(guards, when=boxes(guards.when) or ())
        kernels[kname] = replace(kernel, rules=rules, guards=guards)
    roles = {}
    for rname, role in matrix.roles.items():
        orders = []
        for order in role.orders:
            when = boxes(order.when)
            if when is None:
                continue
            area = tuple(box[:index] + box[index + 1:] for box in order.area if box[index] & bit)
            orders.append(replace(order, when=when, area=area))
        roles[rname] = replace(role, orders=tuple(orders))
    derived = {}
    for dname, table in matrix.derived.items():
        rows = [replace(row, when=when) for row in table.rows if (when := boxes(row.when)) is not None]
        derived[dname] = replace(table, rows=tuple(rows))
    sliced = replace(
        matrix,
        axes={a: x for a, x in matrix.axes.items() if a != axis},
        kernels=kernels, roles=roles, derived=derived,
        releases={e: r for e, r in matrix.releases.items() if e != engine},
    )
    object.__setattr__(sliced, "_compiled", compile_matrix(sliced))
    return sliced
