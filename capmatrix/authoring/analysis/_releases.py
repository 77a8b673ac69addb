"""What changed between two releases of one engine: its gates and roles, and each model's selection.

The matrix as each release answers (:func:`capmatrix.releases.at_release`) is compared by the semantic
diff, restricted to the engine's own kernels, gates and roles; then every model of ``models.yaml`` is
asked on every GPU of ``gpus.yaml`` for each of the engine's roles in both releases, and the GPUs where
the winner differs are grouped by (model, role, before, after).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from capmatrix._core.record import replace
from capmatrix._shipped.default import select
from capmatrix.authoring.analysis._diff import MatrixDiff, diff
from capmatrix.errors import InvalidQuery
from capmatrix.query import KernelQuery
from capmatrix.releases import at_release, engine_releases, release

if TYPE_CHECKING:
    from capmatrix.matrix import Matrix

__all__ = ["ReleaseDiff", "SelectionChange", "release_diff"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionChange:
    """A model whose selection by ``role`` moves from ``old`` to ``new`` (None: no candidate) on ``gpus``."""

    model: str
    role: str
    old: str | None
    new: str | None
    #: The GPUs (``gpus.yaml`` keys with their names and SMs), in the file's order.
    gpus: tuple[tuple[str, str, int], ...]

    def describe(self) -> str:
        """``deepseek_v3: vllm_attention changes from X to Y on B200 (sm 100), GB200 (sm 100)``."""
        where = ", ".join(f"{name} (sm {sm})" for _key, name, sm in self.gpus)
        return (f"{self.model}: {self.role} changes from {self.old or 'no candidate'} to "
                f"{self.new or 'no candidate'} on {where}")

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {"model": self.model, "role": self.role, "from": self.old, "to": self.new,
                "gpus": [{"gpu": key, "name": name, "sm": sm} for key, name, sm in self.gpus]}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseDiff:
    """Two releases of ``engine`` compared: :attr:`matrix` per gate, kernel and role; :attr:`selections`."""

    engine: str
    old: str
    new: str
    matrix: MatrixDiff
    selections: tuple[SelectionChange, ...]

    @property
    def changed(self) -> bool:
        """Whether the releases answer any question differently."""
        return self.matrix.changed or bool(self.selections)

    def as_dict(self, *, lazy: bool = False) -> dict[str, object]:
        """JSON-ready form: the matrix diff's fields, with ``engine`` and ``selections`` added."""
        out = self.matrix.as_dict(lazy=lazy)
        out["changed"] = self.changed
        out["engine"] = self.engine
        out["selections"] = [s.as_dict() for s in self.selections]
        return out


def _engine_part(matrix: Matrix, engine: str) -> Matrix:
    """Only ``engine``'s kernels and gates, and the roles whose candidates are its kernels."""
    kernels = {n: k for n, k in matrix.kernels.items() if k.engine == engine}
    roles = {n: r for n, r in matrix.roles.items() if matrix.role_engine(r) == engine}
    return replace(matrix, kernels=kernels, roles=roles)


def release_diff(matrix: Matrix, engine: str, old: str, new: str) -> ReleaseDiff:
    """Compare ``engine``'s releases ``old`` and ``new`` in ``matrix``.

    :raises InvalidArgument: for an engine without releases or a release the matrix does not model.
    """
    old = release(matrix, engine, old, argument="old")
    new = release(matrix, engine, new, argument="new")
    before, after = at_release(matrix, engine, old), at_release(matrix, engine, new)
    label = f"{engine} "
    result = diff(_engine_part(before, engine), _engine_part(after, engine),
                  old_label=label + old, new_label=label + new)
    return ReleaseDiff(engine=engine, old=old, new=new, matrix=result,
                       selections=_selections(matrix, engine, old, new))


def _selections(matrix: Matrix, engine: str, old: str, new: str) -> tuple[SelectionChange, ...]:
    axis = engine_releases(matrix, engine).axis
    roles = [name for name, role in matrix.roles.items() if matrix.role_engine(role) == engine]
    found: dict[tuple[str, str, str | None, str | None], list[tuple[str, str, int]]] = {}
    for model in matrix.models:
        for role in roles:
            for gpu in matrix.gpus.values():
                winners = []
                for version in (old, new):
                    try:
                        query = KernelQuery(model=model, sm=gpu.sm, **{axis: version})
                        picked = select(role, query, matrix)
                    except InvalidQuery:  # the model pins an axis the role's engine does not read
                        break
                    winners.append(picked.kernel if picked.decided else None)
                if len(winners) == 2 and winners[0] != winners[1]:
                    key = (model, role, winners[0], winners[1])
                    found.setdefault(key, []).append((gpu.key, gpu.name, gpu.sm))
    return tuple(SelectionChange(model=m, role=r, old=a, new=b, gpus=tuple(g))
                 for (m, r, a, b), g in found.items())
