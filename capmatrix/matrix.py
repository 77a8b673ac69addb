"""Matrix: the whole validated capability data, with its compiled index attached."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capmatrix.regions import Space

if TYPE_CHECKING:
    from collections.abc import Mapping

    from capmatrix.model import Axis, DerivedAxis, Kernel, ModelFamily, Role, Rule

__all__ = ["ROOT_LABEL", "Matrix"]

#: How the matrix root is named in pages and artifacts, whatever directory was loaded: the shipped
#: matrix lives in ``capabilities/`` and readers of generated output know it by that name.
ROOT_LABEL = "capabilities"


@dataclass(frozen=True, slots=True, kw_only=True)
class Matrix:
    """A loaded, validated capability matrix. Build it with :func:`capmatrix.load`."""

    root: str
    files: tuple[str, ...]
    axes: Mapping[str, Axis]
    kernels: Mapping[str, Kernel]
    models: Mapping[str, ModelFamily]
    roles: Mapping[str, Role]
    #: Axes computed from others by decision tables (not part of :attr:`space`; rules on them are
    #: expanded into rules on the axes the tables read).
    derived: Mapping[str, DerivedAxis] = field(default_factory=dict)
    _compiled: Any = field(default=None, repr=False, compare=False)

    @property
    def space(self) -> Space:
        """The axes in declaration order, as the space regions range over."""
        return Space(tuple(self.axes.values()))

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Every rule of every kernel."""
        return tuple(rule for kernel in self.kernels.values() for rule in kernel.rules)

    def model(self, name: str) -> ModelFamily | None:
        """The model called ``name``, or the one listing ``name`` among its Hugging Face ids.

        Hub ids match case-insensitively (``meta-llama/Llama-3.1-70B-Instruct``); ``None`` when no
        model has that name or id.
        """
        found = self.models.get(name)
        if found is not None or "/" not in name:
            return found
        wanted = name.lower()
        for model in self.models.values():
            if any(hf_id.lower() == wanted for hf_id in model.hf_ids):
                return model
        return None

    def rule(self, rule_id: str) -> Rule:
        """The rule with id ``rule_id``.

        :raises KeyError: when no rule has that id.
        """
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)

    def show_path(self, path: str) -> str:
        """``path`` as ``capabilities/...`` when it lies under :attr:`root`, else as given (POSIX form).

        A one-file matrix's own file (the root itself) is shown as given, never ``capabilities/.``.
        """
        return _shown(self.root, path, str(Path.cwd()))


@functools.lru_cache(maxsize=4096)
def _shown(root: str, path: str, cwd: str) -> str:
    # Memoised: a page cites thousands of rules from a few files, and resolving a path is a system call
    # per component. The working directory is part of the key, as relative paths depend on it.
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = Path(cwd) / candidate
    try:
        rel = candidate.resolve().relative_to(Path(root).resolve())
    except ValueError:
        return Path(path).as_posix()
    if not rel.parts:  # the root itself: a one-file matrix cites its file, as the loader names it
        return Path(path).as_posix()
    return f"{ROOT_LABEL}/{rel.as_posix()}"
