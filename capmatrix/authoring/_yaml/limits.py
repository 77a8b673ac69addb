"""What a capability file's YAML may hold: the limits on a document, and how plain scalars read.

Shared by the composer (:mod:`capmatrix.authoring._yaml.compose`), the node builder
(:mod:`capmatrix.authoring._yaml.build`) and the event reader (:mod:`capmatrix.authoring._yaml.fast`), so that
all three refuse and resolve alike.
"""

from __future__ import annotations

import re

import yaml

from capmatrix.authoring._files import MAX_FILE_BYTES

TYPE_CHECKING = False  # not typing's: imported for annotations only
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_DEPTH", "MAX_INT_BITS", "MAX_NODES", "MAX_TEXT_CHARS"]

#: Bound on the nodes one document may hold or expand to (a shipped file has under 500); it bounds
#: parse time and memory and stops alias bombs ("billion laughs").
MAX_NODES = 50_000
#: Bound on the characters of text (keys and strings) one document may expand to. A document without
#: aliases stays below its byte size; aliases of a long string would otherwise multiply it, and every
#: error message that quotes it, without bound.
MAX_TEXT_CHARS = MAX_FILE_BYTES
#: Deepest nesting of mappings and sequences (a rule's condition list sits at depth 7).
MAX_DEPTH = 32
#: Integers must fit in a signed 64-bit word (larger ones are typos or attacks on ``str(int)``).
MAX_INT_BITS = 63
#: C0 and C1 control characters other than tab and newline (never text in a capability file).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

_STR_TAG = "tag:yaml.org,2002:str"


def _libyaml_parser() -> Any:  # noqa: ANN401 - a C extension type
    """Libyaml's C parser (the same events and marks, parsed many times faster), if PyYAML has it."""
    try:
        from yaml._yaml import CParser  # noqa: PLC0415 - absent when PyYAML was built without libyaml
    except ImportError:
        return None
    return CParser


#: None without libyaml: the pure-Python parser alone.
_CParser: Any = _libyaml_parser()
#: The one spelling of an integer a capability file may use: ASCII decimal digits, an optional sign.
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")

# Plain scalars that YAML 1.1 turns into booleans although an author meant a word.
_YAML11_BOOL_WORDS = frozenset(
    {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"}
)


#: Tags of plain scalars already resolved (value -> tag); bounded, it only skips repeated regex work.
_PLAIN_TAGS: dict[str, str] = {}
_PLAIN_TAGS_MAX = 4096


def _resolve_scalar(value: str, implicit: tuple[bool, bool]) -> str:
    """The tag PyYAML's safe resolver gives an untagged scalar (the loaders add no path resolvers)."""
    if not implicit[0]:  # quoted or block: a string
        return _STR_TAG
    tag = _PLAIN_TAGS.get(value)
    if tag is not None:
        return tag
    tag = _STR_TAG
    table = yaml.resolver.Resolver.yaml_implicit_resolvers
    for candidate, regexp in (*table.get(value[:1], ()), *table.get(None, ())):
        if regexp.match(value):
            tag = candidate
            break
    if len(_PLAIN_TAGS) < _PLAIN_TAGS_MAX:
        _PLAIN_TAGS[value] = tag
    return tag
