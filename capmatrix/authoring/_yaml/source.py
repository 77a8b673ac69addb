"""Where a YAML value was read: the source map of one document, and paths as text."""

from __future__ import annotations

import re

from capmatrix._core.record import field, record
from capmatrix.errors import MAX_ECHO, CapabilityError, echo

__all__ = ["JsonPath", "SourceMap", "format_path", "printable"]

#: Keys printed as they are in a JSON path; any other is quoted (``kernels['a.b']``).
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")

JsonPath = tuple[str | int, ...]


@record
class SourceMap:
    """Positions (1-based line, column) of every value and mapping key of one document."""

    path: str
    values: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    #: Paths whose plain scalar YAML 1.1 read as a boolean from a word such as ``no``/``on``.
    yaml11_bools: frozenset[JsonPath] = frozenset()
    #: Paths whose plain scalar was read as a float (``1.10`` silently becomes ``1.1``).
    floats: frozenset[JsonPath] = frozenset()
    #: Problems that did not stop the parse (duplicate keys, unsafe tags); reported with the rest.
    problems: tuple[CapabilityError, ...] = ()
    #: Paths whose value the reader refused and replaced with None (a tag, an overlong number, a
    #: control character), or whose mapping lost a refused key; schema errors there are not repeated.
    rejected: frozenset[JsonPath] = frozenset()

    def locate(self, path: JsonPath, *, key: bool = False) -> tuple[int | None, int | None]:
        """Return the position of ``path``, walking up to the nearest ancestor that has one."""
        table = self.keys if key else self.values
        probe = tuple(path)
        if key and probe in table:
            return table[probe]
        while True:
            if probe in self.values:
                return self.values[probe]
            if not probe:
                return (None, None)
            probe = probe[:-1]

    def error(
        self,
        path: JsonPath,
        message: str,
        *,
        key: bool = False,
        hint: str | None = None,
        code: str = "E000",
    ) -> CapabilityError:
        """Build a located error for ``path``."""
        line, column = self.locate(path, key=key)
        return CapabilityError(
            self.path, line, column, format_path(path), message, hint=hint, code=code
        )


def format_path(path: JsonPath) -> str:
    """Render a path tuple as ``kernels.xqa.rules[3].grant.sm`` (odd keys as ``kernels['a.b']``)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif len(part) > MAX_ECHO:  # a key of any length is shown cut, like every echoed value
            out += f"[{echo(part)}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{printable(repr(part))}]"
    return out


def printable(text: str) -> str:
    """``text`` with control and other unprintable characters escaped (safe to print to a terminal)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
