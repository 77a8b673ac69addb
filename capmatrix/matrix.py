"""Matrix: the whole validated capability data, with its compiled index attached."""

from __future__ import annotations

import functools
import os

from capmatrix._core.record import field, record
from capmatrix.model import Kernel
from capmatrix.regions import Space

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from capmatrix.errors import CapabilityError
    from capmatrix.model import GPU, Axis, AxisValue, DerivedAxis, EngineReleases, ModelFamily, Role, Rule

__all__ = ["ROOT_LABEL", "Matrix", "gpu_spelling"]

#: How the matrix root is named in pages and artifacts, whatever directory was loaded: the shipped
#: matrix lives in ``capabilities/`` and readers of generated output know it by that name.
ROOT_LABEL = "capabilities"


@record(kw_only=True)
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
    #: GPU products by key, each with its compute capability (``--gpu NAME`` answers as ``--sm``).
    gpus: Mapping[str, GPU] = field(default_factory=dict)
    #: The modelled releases of each engine that declares some (``releases:``), by engine.
    releases: Mapping[str, EngineReleases] = field(default_factory=dict)
    #: What a load that isolates engines (``load(path, isolate=True)``) left out: each engine whose files
    #: have problems, mapped to those problems (``file:line:col``) ...
    left_out: Mapping[str, tuple[CapabilityError, ...]] = field(default_factory=dict, repr=False)
    #: ... and each kernel and role it left out with them, mapped to the problems of its engines: a
    #: question about one of them raises :class:`~capmatrix.CapabilityErrors` with those.
    quarantine: Mapping[str, tuple[CapabilityError, ...]] = field(default_factory=dict, repr=False)
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

    def engine_defaults(self, engine: str | None) -> dict[str, AxisValue]:
        """The axis values ``engine``'s kernels and roles are asked with where a query gives none."""
        if engine is None:
            return {}
        return {name: axis.engine_defaults[engine] for name, axis in self.axes.items()
                if engine in axis.engine_defaults}

    def role_engine(self, role: Role) -> str | None:
        """The engine of ``role``: the one its candidates name, None for none or several."""
        engines = {self.kernels[c].engine for c in role.candidates if c in self.kernels} - {None}
        return next(iter(engines)) if len(engines) == 1 else None

    def pins(self, target: Kernel | Role) -> dict[str, AxisValue]:
        """The values a kernel or role is asked with unless the query gives its own.

        Its engine's defaults, and for a role its own axis values over them.
        """
        if isinstance(target, Kernel):
            return self.engine_defaults(target.engine)
        return {**self.engine_defaults(self.role_engine(target)), **target.axes}

    def gpu(self, name: str) -> GPU | None:
        """The GPU whose key, name or an alias is ``name``, ignoring case, spaces, ``-`` and ``_``.

        ``RTX 5090``, ``rtx5090`` and ``rtx_5090`` are one GPU; ``None`` when no GPU answers to ``name``.
        """
        wanted = gpu_spelling(name)
        for gpu in self.gpus.values():
            if any(gpu_spelling(spelling) == wanted for spelling in gpu.spellings):
                return gpu
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
        return _shown(self.root, path, os.getcwd())  # noqa: PTH109


def gpu_spelling(name: str) -> str:
    """The form GPU names are compared in: lower case without spaces, ``-`` or ``_``.

    >>> gpu_spelling("RTX PRO-6000"), gpu_spelling("gb_10")
    ('rtxpro6000', 'gb10')
    """
    # as removing r"[\s_-]+" would (str.split's whitespace is re's \s), without importing re
    return "".join(name.replace("_", " ").replace("-", " ").split()).lower()


@functools.lru_cache(maxsize=4096)
def _shown(root: str, path: str, cwd: str) -> str:
    # Memoised: a page cites thousands of rules from a few files, and resolving a path is a system call
    # per component. The working directory is part of the key, as relative paths depend on it.
    from pathlib import Path  # noqa: PLC0415 - not on the path of a load

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
