"""How deeply parsed JSON nests: the bound every JSON reader of capmatrix applies after parsing."""

from __future__ import annotations

__all__ = ["depth"]


def depth(data: object, limit: int) -> int:
    """How deeply objects and arrays nest in ``data`` (1: an object of scalars), up to just past ``limit``.

    A value deeper than ``limit`` stops the walk; no recursion, so a hostile nesting cannot exhaust the stack.
    """
    deepest = 0
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        value, level = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
        deepest = max(deepest, level)
        if deepest > limit:
            break
    return deepest
