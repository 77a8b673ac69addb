"""The full reader's first half: YAML text to a node graph, within the limits, with or without libyaml."""

from __future__ import annotations

import yaml

from capmatrix.authoring._yaml.limits import MAX_DEPTH, MAX_NODES, _CParser, _resolve_scalar

TYPE_CHECKING = False  # not typing's: imported for annotations only
if TYPE_CHECKING:
    from typing import Any

__all__: list[str] = []


class _LimitError(Exception):
    """The composer met more nodes or deeper nesting than the limits allow."""

    def __init__(self, message: str, mark: yaml.Mark, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark
        self.hint = hint


class _Limits(yaml.composer.Composer):
    """A composer that counts nodes and nesting, so hostile input fails early.

    The count bounds time and memory before any alias is expanded; the depth bound keeps the
    recursive composer (and everything after it) far from Python's (and the C stack's) limits. Mixed
    into both event sources: libyaml's C parser and PyYAML's pure-Python one.
    """

    def _start_limits(self) -> None:
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:  # noqa: ARG002
        # PyYAML's Composer.compose_node, with the limits, without the path-resolver hooks (the
        # loaders have no path resolvers) and with one look at the next event instead of four.
        self._nodes += 1
        if self._nodes > MAX_NODES:
            msg = f"document has more than {MAX_NODES} nodes"
            raise _LimitError(msg, self._mark(), "split the file")
        if self._depth >= MAX_DEPTH:
            msg = f"nesting deeper than {MAX_DEPTH} levels"
            raise _LimitError(msg, self._mark(), "capability files nest about 7 levels deep")
        event: Any = self.peek_event()  # type: ignore[attr-defined]
        anchor = event.anchor
        if isinstance(event, yaml.AliasEvent):
            self.get_event()  # type: ignore[attr-defined]
            if anchor not in self.anchors:
                msg = f"found undefined alias {anchor!r}"
                where: Any = event.start_mark
                raise yaml.composer.ComposerError(None, None, msg, where)
            return self.anchors[anchor]
        if anchor is not None and anchor in self.anchors:
            first: Any = self.anchors[anchor].start_mark
            raise yaml.composer.ComposerError(
                f"found duplicate anchor {anchor!r}; first occurrence", first, "second occurrence",
                event.start_mark,
            )
        self._depth += 1
        try:
            if isinstance(event, yaml.ScalarEvent):
                return self.compose_scalar_node(anchor)
            if isinstance(event, yaml.SequenceStartEvent):
                return self.compose_sequence_node(anchor)
            return self.compose_mapping_node(anchor)
        finally:
            self._depth -= 1

    def compose_scalar_node(self, anchor: Any) -> yaml.ScalarNode:  # noqa: ANN401 - as PyYAML's
        event = self.get_event()  # type: ignore[attr-defined]
        tag = event.tag
        if tag is None or tag == "!":
            tag = _resolve_scalar(event.value, event.implicit)
        # libyaml marks a plain scalar with style '' where PyYAML uses None: one form for both.
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style or None)
        if anchor is not None:
            self.anchors[anchor] = node
        return node

    def _mark(self) -> yaml.Mark:
        event = self.peek_event()  # type: ignore[attr-defined]
        mark: yaml.Mark = event.start_mark
        return mark


class _Loader(_Limits, yaml.SafeLoader):
    """PyYAML's pure-Python parser (the reference, and the fallback without libyaml)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._start_limits()


if _CParser is not None:

    class _CLoader(_Limits, _CParser, yaml.resolver.Resolver):  # type: ignore[misc]
        """libyaml's C parser under the same composer and limits."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self._start_limits()


def _compose(text: str, *, fast: bool = True) -> yaml.Node | None:
    loader: _Limits = _CLoader(text) if fast and _CParser is not None else _Loader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()  # type: ignore[attr-defined]


def _parse(text: str, *, libyaml: bool = True) -> yaml.Node | None:
    """Compose ``text``, with libyaml when present.

    A document libyaml refuses is read again by PyYAML's own parser, so that every syntax error is
    worded (and placed) the same with or without libyaml.
    """
    if _CParser is None or not libyaml:
        return _compose(text, fast=False)
    try:
        return _compose(text)
    except yaml.YAMLError:
        return _compose(text, fast=False)
