"""Engine release versions: their order and the spans ``since`` / ``until`` name.

A span is the list of an engine's releases in which something holds, oldest first, as
browser-compat-data's ``version_added`` / ``version_removed`` give it: ``since`` is the first release
that has it, ``until`` the first that no longer does.
"""

from __future__ import annotations

import re

__all__ = ["order_key", "span_text"]

_VERSION = re.compile(
    r"(\d+(?:\.\d+)*)"                             # release numbers
    r"(?:[._-]?(dev|a|alpha|b|beta|rc|c)[._-]?(\d*))?"  # a pre-release
    r"(?:[._-]?post[._-]?(\d*))?"                     # a post-release
    r"(?:\+[a-z0-9.]+)?\Z")                           # a local part, ignored
#: Pre-release words sort before the release they lead to (``1.2.0rc1`` < ``1.2.0``).
_PRE = {"dev": 0, "a": 1, "alpha": 1, "b": 2, "beta": 2, "rc": 3, "c": 3}


def order_key(version: str) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    """A sort key of a version (``0.33.0``, ``1.2.0rc1``, ``1.2.0.post1``), or None when it reads otherwise.

    Numbers compare as numbers (``1.2`` is ``1.2.0``); a pre-release (``rc``, ``a``, ``b``, ``dev``) sorts
    before the plain release, a post-release after it; a local part (``+cu130``) is ignored.
    """
    match = _VERSION.match(version)
    if match is None:
        return None
    numbers, pre, pre_n, post = match.groups()
    release = [int(n) for n in numbers.split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    stage = (_PRE[pre], int(pre_n or 0)) if pre else (9, 0)
    return tuple(release), stage, -1 if post is None else int(post or 0)


def span_text(versions: tuple[str, ...], span: tuple[str, ...]) -> str:
    """How a span is shown in a rule's region: ``>=0.34.0``, ``<0.34.0`` or ``>=0.33.0,<0.34.0``."""
    lo = versions.index(span[0])
    hi = versions.index(span[-1]) + 1
    if lo == 0 and hi == len(versions):
        return "every release"
    if lo == 0:
        return f"<{versions[hi]}"
    if hi == len(versions):
        return f">={versions[lo]}"
    return f">={versions[lo]},<{versions[hi]}"
