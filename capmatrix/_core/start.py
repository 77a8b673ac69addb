"""The checks an engine runs at start after it chose a kernel: the ``caught_by`` gates of its guard."""

from __future__ import annotations

from capmatrix._core.answers import ReasonKind

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from capmatrix._core.answers import Reason, Resolution
    from capmatrix.query import KernelQuery
    from capmatrix.resolver import Resolver

__all__ = ["refused_at_start", "refusing_reason"]


def refused_at_start(resolver: Resolver, kernel: str, query: KernelQuery) -> Resolution | None:
    """The first gate of ``kernel``'s ``caught_by`` that does not admit ``query``; None when all admit.

    ``query`` is the one ``kernel`` was chosen for (its ``kernel`` field is replaced): the engine asks
    each such gate the same question when it builds its layers (vLLM's ``TritonAttentionImpl.__init__``),
    after selection has answered. A kernel without a guard has none.
    """
    guard = resolver.matrix.kernels[kernel].guards
    if guard is None:
        return None
    for gate in guard.caught_by:
        resolution = resolver.resolve(query.with_kernel(gate))
        if not resolution:
            return resolution
    return None


def refusing_reason(resolution: Resolution) -> Reason | None:
    """The reason a refusing gate gives: its first exclusion, else its first reason (no grant covers)."""
    reasons = resolution.reasons
    return next((r for r in reasons if r.kind is ReasonKind.EXCLUDE), reasons[0] if reasons else None)
