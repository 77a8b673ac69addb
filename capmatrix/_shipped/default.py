"""The shipped matrix as the process default: :func:`resolve`, :func:`select` and :func:`reload`.

The default is read on first use from the compiled artifact the package carries
(:mod:`capmatrix._shipped.artifact`; standard library only), and swapped atomically by :func:`reload`. Only a
source checkout whose artifact is missing or stale, or a :func:`reload` of another directory, builds a matrix
from YAML with the loader
(the authoring side, imported then). :func:`resolve` is the per-step path of an engine: a cached answer
costs one attribute read and one dict lookup.
"""

from __future__ import annotations

import threading

from capmatrix._shipped import artifact as _artifact
from capmatrix.errors import InvalidQuery
from capmatrix.matrix import Matrix
from capmatrix.query import KernelQuery
from capmatrix.resolver import Resolution, Resolver, Selection, check_query, compile_matrix

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    import os
    from collections.abc import Collection

    from capmatrix.authoring._suggest import Suggestions
    from capmatrix.model import AxisValue

__all__ = [
    "default_matrix", "derived_values", "reload", "resolve", "select", "set_default_matrix", "suggest",
]

_default_lock = threading.Lock()
_default: Matrix | None = None


def default_matrix() -> Matrix:
    """The shipped matrix, read once per process (thread-safe).

    :raises capmatrix.CapabilityErrors: when it is built from YAML (a checkout) that does not validate.
    :raises capmatrix.errors.InvalidFile: for an installed artifact that is damaged.
    """
    global _default  # noqa: PLW0603 - the process-wide cache of the shipped matrix
    matrix = _default
    if matrix is None:
        with _default_lock:
            if _default is None:
                _default = _shipped()
            matrix = _default
    return matrix


def _shipped() -> Matrix:
    """The shipped matrix: the package's compiled artifact, else (a checkout) the loader's build of it."""
    matrix = _artifact.shipped()
    if matrix is None:
        return _load(None)
    return matrix


def _load(path: str | os.PathLike[str] | None) -> Matrix:
    from capmatrix.authoring.loader import load  # noqa: PLC0415 - the authoring side: YAML, schema, validation

    return load(path)


def set_default_matrix(matrix: Matrix | None) -> None:
    """Replace the matrix that ``resolve(query)`` uses by default (None: reload lazily).

    Safe while other threads resolve: each call reads the default once, so it answers wholly from
    the old matrix or wholly from the new one.
    """
    global _default  # noqa: PLW0603
    if matrix is not None and not isinstance(matrix, Matrix):
        raise InvalidQuery(f"expected a Matrix from capmatrix.load(), got {type(matrix).__name__}")
    with _default_lock:
        _default = matrix


def reload(path: str | os.PathLike[str] | None = None) -> Matrix:
    """Load the matrix at ``path`` (default: the shipped one) and make it the default.

    When loading fails the previous default stays in place.

    :raises capmatrix.CapabilityErrors: with every problem of the new matrix.
    """
    matrix = _shipped() if path is None else _load(path)
    set_default_matrix(matrix)
    return matrix


_compile_lock = threading.Lock()


def _resolver(matrix: Matrix | None) -> Resolver:
    m = default_matrix() if matrix is None else matrix
    if not isinstance(m, Matrix):
        raise InvalidQuery(f"expected a Matrix from capmatrix.load(), got {type(m).__name__}")
    compiled = m._compiled  # noqa: SLF001 - attached by load()
    if compiled is None:
        with _compile_lock:  # compile a hand-built matrix once, whichever thread gets here first
            compiled = m._compiled  # noqa: SLF001
            if compiled is None:
                compiled = compile_matrix(m)
                object.__setattr__(m, "_compiled", compiled)
    return compiled  # type: ignore[no-any-return]


def resolve(query: KernelQuery, matrix: Matrix | None = None) -> Resolution:
    """Answer whether ``query.kernel`` supports ``query`` (default matrix: the shipped one).

    >>> r = resolve(KernelQuery("xqa", sm=120, model="llama", spec_dec="one_model"))
    >>> r.verdict, bool(r)
    (<Verdict.SUPPORTED: 'supported'>, True)

    :raises InvalidQuery: for an unknown kernel, model, axis or value.
    """
    if not isinstance(query, KernelQuery):  # inline: this is the per-step path
        check_query(query)
    # The default is read once, so a concurrent reload() cannot mix two matrices in one answer.
    m = _default if matrix is None else matrix
    if isinstance(m, Matrix):
        compiled = m._compiled  # noqa: SLF001 - the fast path: one attribute and one dict lookup
        if compiled is not None:
            found = compiled._cache.get(query)  # noqa: SLF001
            if found is not None:
                return found  # type: ignore[no-any-return]
    return _resolver(m).resolve(query)


def derived_values(query: KernelQuery, matrix: Matrix | None = None) -> dict[str, AxisValue]:
    """The query's effective values plus the derived axes they decide (what a role's orders read)."""
    return _resolver(matrix).derived_values(query)


def select(role: str, query: KernelQuery, matrix: Matrix | None = None) -> Selection:
    """Pick the first supported candidate kernel of ``role`` for ``query``.

    :raises InvalidQuery: for an unknown role or a bad query.
    """
    return _resolver(matrix).select(role, query)


def suggest(
    query: KernelQuery, matrix: Matrix | None = None, vary: Collection[str] | None = None
) -> Suggestions:
    """The smallest changes of ``query``'s values that make its kernel supported.

    Changes of one axis, else of two (a pair only when neither change works alone), limited to the
    axes in ``vary`` (default: all but the model's own geometry: attention, head_dim, q_per_kv and
    the other axes the model sets, save its dtypes). Empty when the query is supported already or
    nothing within that bound works. A tuple whose ``truncated`` says the search stopped at its
    work budget (:data:`capmatrix.authoring._suggest.MAX_WORK` steps: sets of changes tried, nodes of
    the walks over axes left open).

    >>> [str(s) for s in suggest(KernelQuery("xqa", sm=121, model="deepseek_v3", spec_dec="one_model"))]
    ['set dtype=fp8 and kv_cache_dtype=fp8']

    :raises InvalidQuery: for a bad query or an unknown axis in ``vary``.
    """
    # The suggestion search is a question an author or a CLI asks, not the engine's path: imported on use.
    from capmatrix.authoring._suggest import suggestions  # noqa: PLC0415

    return suggestions(_resolver(matrix), query, vary)
