"""Safe YAML reading with a side table of source positions and strict key handling.

The face of the reader: :func:`read`, :func:`read_raw` and :func:`read_text` refuse what no editor shows
(tabs, odd line breaks, other encodings), then take the fast reader (:mod:`capmatrix.authoring._yaml.fast`) or
the full one: the composer with its limits (:mod:`capmatrix.authoring._yaml.compose`), then the node builder
(:mod:`capmatrix.authoring._yaml.build`). Positions are :class:`SourceMap`
(:mod:`capmatrix.authoring._yaml.source`); the limits and scalar forms are
:mod:`capmatrix.authoring._yaml.limits`.
"""

from __future__ import annotations

import re

import yaml

from capmatrix.authoring._files import MAX_FILE_BYTES, read_bytes
from capmatrix.authoring._yaml.build import _Builder, _TooLargeError
from capmatrix.authoring._yaml.compose import _LimitError, _parse
from capmatrix.authoring._yaml.fast import OUTLINE_DEPTH, _fast_read
from capmatrix.authoring._yaml.limits import MAX_DEPTH, MAX_INT_BITS, MAX_NODES, MAX_TEXT_CHARS
from capmatrix.authoring._yaml.source import SourceMap, format_path, printable
from capmatrix.errors import CapabilityError, CapabilityErrors

TYPE_CHECKING = False  # not typing's: a load the cache misses would import it for annotations only
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_INT_BITS",
    "MAX_NODES",
    "MAX_TEXT_CHARS",
    "OUTLINE_DEPTH",
    "SourceMap",
    "format_path",
    "printable",
    "read",
    "read_raw",
    "read_text",
]

#: Line breaks YAML honours although many editors do not: NEL, U+2028, U+2029 and a lone CR.
_ODD_LINE_BREAK = re.compile("[\x85\u2028\u2029]|\r(?!\n)")


def _code_point(character: int | str | bytes) -> int:
    if isinstance(character, int):
        return character
    return ord(character[:1] or "\0")


def _text_position(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of character ``index`` of ``text``."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def read_text(text: str, path: str, *, outline: bool = False) -> tuple[Any, SourceMap]:
    """Parse one YAML document from ``text``; raise :class:`CapabilityError` group members.

    With ``outline``, the source map of a document the fast reader takes holds the positions of the
    paths at most :data:`OUTLINE_DEPTH` deep only (entries and rules, what a clean load cites); a
    caller that finds a problem reads the document again without it, to place every error exactly.

    :raises capmatrix.CapabilityErrors: on any syntax or structure problem (all of them).
    """
    tab = text.find("\t")
    if tab >= 0 and text[text.rfind("\n", 0, tab) + 1 : tab].strip(" ") == "":
        line_no, tab_col = _text_position(text, tab)
        raise CapabilityErrors(
            [
                CapabilityError(
                    path, line_no, tab_col, "", "tab used for indentation",
                    hint="YAML indents with spaces only", code="E001",
                )
            ]
        )
    # YAML also breaks lines at NEL, U+2028, U+2029 and a lone CR; with them, reported positions
    # would disagree with what the author's editor shows, so such files are refused.
    odd = _ODD_LINE_BREAK.search(text)
    if odd is not None:
        odd_break = odd.start()
        line_no, break_col = _text_position(text, odd_break)
        raise CapabilityErrors(
            [
                CapabilityError(
                    path, line_no, break_col, "",
                    f"line break U+{ord(text[odd_break]):04X} is not allowed",
                    hint="end lines with \\n (or \\r\\n)", code="E001",
                )
            ]
        )
    fast = _fast_read(text, path, outline=True) if outline else _fast_read(text, path)
    if fast is not None:
        return fast
    return _read_nodes(text, path)


def _read_nodes(text: str, path: str, *, libyaml: bool = True) -> tuple[Any, SourceMap]:
    """The full reader: compose a node graph (with the limits), then build data and positions."""
    try:
        node = _parse(text, libyaml=libyaml)
    except _LimitError as exc:
        limit_line, limit_col = exc.mark.line + 1, exc.mark.column + 1
        raise CapabilityErrors(
            [CapabilityError(path, limit_line, limit_col, "", exc.message, hint=exc.hint, code="E001")]
        ) from None
    except yaml.reader.ReaderError as exc:
        char_line, char_col = _text_position(text, exc.position)
        raise CapabilityErrors(
            [
                CapabilityError(
                    path, char_line, char_col, "",
                    f"character U+{_code_point(exc.character):04X} is not allowed in YAML",
                    hint="remove control characters", code="E001",
                )
            ]
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line: int | None = mark.line + 1 if mark else None
        col: int | None = mark.column + 1 if mark else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise CapabilityErrors(
            [CapabilityError(path, line, col, "", f"YAML syntax error: {problem}", code="E001")]
        ) from None
    except yaml.YAMLError as exc:
        raise CapabilityErrors(
            [CapabilityError(path, None, None, "", f"YAML error: {exc}", code="E001")]
        ) from None
    if node is None:
        raise CapabilityErrors(
            [
                CapabilityError(
                    path, 1, 1, "", "empty file",
                    hint="add an axes, kernels, models or roles section, or delete the file",
                    code="E001",
                )
            ]
        )
    builder = _Builder(path)
    try:
        data = builder.build(node, ())
    except _TooLargeError as exc:
        mark = exc.node.start_mark
        raise CapabilityErrors(
            [
                CapabilityError(
                    path, mark.line + 1, mark.column + 1, format_path(exc.path), exc.message,
                    hint="each alias (*name) copies its anchor's whole value", code="E001",
                )
            ]
        ) from None
    return data, SourceMap(
        path,
        builder.values,
        builder.keys,
        frozenset(builder.yaml11),
        frozenset(builder.floats),
        tuple(builder.errors),
        frozenset(builder.rejected),
    )


def read(path: Path, display: str | None = None) -> tuple[Any, SourceMap]:
    """Read and parse one YAML file (size-limited, UTF-8 only).

    :raises capmatrix.CapabilityErrors: on unreadable, oversized, non-UTF-8 or malformed files.
    """
    name = display or str(path)
    return read_raw(read_bytes(path, name), name)


def read_raw(raw: bytes, name: str, *, outline: bool = False) -> tuple[Any, SourceMap]:
    """Parse the bytes of one YAML file (read by :func:`capmatrix.authoring._files.read_bytes`): UTF-8 only.

    :raises capmatrix.CapabilityErrors: on non-UTF-8 or malformed text.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        line_start = before.rfind(b"\n") + 1
        col = len(raw[line_start : exc.start].decode("utf-8", "replace")) + 1
        raise CapabilityErrors(
            [
                CapabilityError(
                    name, line, col, "", f"not UTF-8 (byte 0x{raw[exc.start]:02x})",
                    hint="save the file as UTF-8", code="E001",
                )
            ]
        ) from None
    return read_text(text, name, outline=outline)
