"""Load capability YAML files into a validated :class:`Matrix`: shape, then values, then references."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capmatrix import _cache, _hints
from capmatrix._classes import representatives
from capmatrix._files import read_bytes
from capmatrix.errors import CapabilityError, CapabilityErrors, echo
from capmatrix.matrix import Matrix, gpu_spelling
from capmatrix.model import (
    CORE,
    GPU,
    NONE,
    Axis,
    AxisType,
    AxisValue,
    Condition,
    DerivedAxis,
    DerivedRow,
    Effect,
    Guard,
    Interval,
    Kernel,
    Location,
    ModelFamily,
    Role,
    RoleOrder,
    Rule,
    Status,
    format_value,
    signature,
)
from capmatrix.regions import Region, Space
from capmatrix.resolver import compile_matrix
from capmatrix.schema import shape_problems

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

    from capmatrix import _yaml

__all__ = [
    "ENUM_VALUE",
    "EXPECT_DIR",
    "MAX_DIR_DEPTH",
    "MAX_FILES",
    "MAX_TOTAL_BYTES",
    "RESERVED_AXIS_NAMES",
    "default_path",
    "discover",
    "iter_problems",
    "load",
]

#: Sub-directory of a matrix that holds expectation cases, not matrix data.
EXPECT_DIR = "expect"
#: The spelling of an enum axis value: lower-case ASCII letters, digits and ``_ . + -``, starting with a
#: letter or digit, at most 64 characters. Values reach command lines (witnesses, ``--<axis> VALUE``)
#: and page anchors, so nothing a shell or a parser would read specially is allowed.
ENUM_VALUE = re.compile(r"[a-z0-9][a-z0-9_.+-]{0,63}\Z", re.ASCII)
#: Axis names whose ``--<axis>`` option would collide with an option of the command line.
RESERVED_AXIS_NAMES = frozenset({
    "check", "exit_code", "expect", "format", "help", "hf_config", "json", "kernel", "markdown",
    "matrix", "model", "out", "out_dir", "role", "strict", "version", "where",
})
#: Refuse to read matrices with more files than this (a shipped matrix has a dozen).
MAX_FILES = 2000
#: Refuse to read matrices whose YAML files add up to more bytes than this (a shipped one has 70 kB).
MAX_TOTAL_BYTES = 8 * 1024 * 1024
#: Refuse directory trees nested deeper than this below the matrix root.
MAX_DIR_DEPTH = 16

_CMP = re.compile(r"^ *(>=|<=|>|<|==) *(-?[0-9]+) *$", re.ASCII)
_INTERVAL = re.compile(r"^ *([\[(]) *(-?[0-9]+) *, *(-?[0-9]+) *([\])]) *$", re.ASCII)
#: What a range looks like with any digits and spaces (to refuse non-ASCII digits with a hint).
_RANGE_SHAPE = re.compile(r"^\s*(?:(?:>=|<=|>|<|==)\s*-?\d+|[\[(]\s*-?\d+\s*,\s*-?\d+\s*[\])])\s*$")
#: Digits an integer in a range may have: 19 reach past the signed 64-bit bound checked below.
_MAX_RANGE_DIGITS = 19
#: Axis integers fit in a signed 64-bit word (as ``_MAX_INT_BITS``; PyYAML loads lazily).
_MAX_INT_BITS = 63


def default_path() -> Path:
    """The shipped ``capabilities/``: the source tree's when running from a checkout, else the wheel's."""
    package = Path(__file__).resolve().parent
    checkout = package.parent / "capabilities"
    if (checkout / "axes.yaml").is_file() and (package.parent / "pyproject.toml").is_file():
        return checkout
    return package / "_capabilities"


def _display(path: Path, root: Path) -> str:
    rel = path.relative_to(root).as_posix()
    base = "capabilities" if root.name == "_capabilities" else None
    if base is None:
        try:
            base = root.resolve().relative_to(Path.cwd().resolve()).as_posix()
        except ValueError:
            base = root.as_posix()
    shown = rel if base == "." else f"{base}/{rel}"
    return shown if shown.isprintable() else _yaml_printable(shown)


def _yaml_printable(text: str) -> str:
    from capmatrix._yaml import printable  # noqa: PLC0415 - PyYAML loads on first use

    return printable(text)


def discover(root: Path) -> list[tuple[Path, str]]:
    """The YAML files of a matrix directory, sorted, with their display names.

    :raises CapabilityErrors: for a missing or unreadable directory, too many files, too many
        bytes, or too deep a tree (symlink loops are walked once).
    """

    def fail(where: Path, message: str, hint: str | None = None) -> CapabilityError:
        return CapabilityError(str(where), None, None, "", message, hint=hint, code="E001")

    try:
        if root.is_file():
            return [(root, root.as_posix())]
        is_dir = root.is_dir()
    except OSError as exc:  # e.g. a path component that loops or is too long
        raise CapabilityErrors([fail(root, f"cannot read: {exc.strerror or exc}")]) from None
    if not is_dir:
        what = "matrix directory not found" if not root.exists() else "not a directory or a file"
        raise CapabilityErrors(
            [fail(root, what, hint="pass a directory of capability YAML files")]
        )
    found: list[Path] = []
    sizes: dict[Path, int] = {}
    total = 0
    walk_errors: list[CapabilityError] = []
    seen_dirs: set[tuple[int, int]] = set()
    real_root = root.resolve()

    def leaves(path: Path) -> bool:
        """Whether ``path`` (a link, or below one) resolves outside the matrix directory."""
        try:
            return not path.resolve().is_relative_to(real_root)
        except (OSError, RuntimeError):  # a loop: reported when the file is read
            return False

    def outside(path: Path, what: str) -> CapabilityError:
        return fail(
            Path(_display(path, root)),
            f"{what} is a symbolic link that leads outside the matrix directory; it is not read",
            hint="copy the file into the matrix directory, or link only within it",
        )

    def on_error(exc: OSError) -> None:
        where = Path(exc.filename) if exc.filename else root
        walk_errors.append(fail(where, f"cannot read directory: {exc.strerror or exc}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=on_error, followlinks=True):
        here = Path(dirpath)
        try:
            info = here.stat()
        except OSError as exc:
            walk_errors.append(fail(here, f"cannot read directory: {exc.strerror or exc}"))
            dirnames[:] = []
            continue
        if (info.st_dev, info.st_ino) in seen_dirs:
            dirnames[:] = []
            continue
        if here != root and leaves(here):
            walk_errors.append(outside(here, "this directory"))
            dirnames[:] = []
            continue
        seen_dirs.add((info.st_dev, info.st_ino))
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and not (here == root and d == EXPECT_DIR)
        )
        if dirnames and len(here.relative_to(root).parts) >= MAX_DIR_DEPTH:
            raise CapabilityErrors(
                [fail(here, f"directories nested deeper than {MAX_DIR_DEPTH} levels")]
            )
        for name in filenames:
            if not name.endswith((".yaml", ".yml")):
                continue
            if leaves(here / name):
                walk_errors.append(outside(here / name, "this file"))
                continue
            found.append(here / name)
            with contextlib.suppress(OSError):  # reported with its name when the file is read
                sizes[here / name] = (here / name).stat().st_size
                total += sizes[here / name]
        if len(found) > MAX_FILES:
            raise CapabilityErrors(
                [
                    fail(
                        root, f"more than {MAX_FILES} YAML files",
                        hint="point at the capabilities directory itself",
                    )
                ]
            )
        if total > MAX_TOTAL_BYTES:
            raise CapabilityErrors(
                [
                    fail(
                        root, f"YAML files add up to more than {MAX_TOTAL_BYTES} bytes",
                        hint=f"the largest: {_largest(sizes, root)}; "
                        "point at the capabilities directory itself",
                    )
                ]
            )
    if walk_errors:
        raise CapabilityErrors(walk_errors)
    return sorted(((p, _display(p, root)) for p in found), key=lambda item: item[1])


def _largest(sizes: dict[Path, int], root: Path, count: int = 3) -> str:
    """The ``count`` largest files, biggest first, as ``path (N bytes)``: what to look at first."""
    top = sorted(sizes.items(), key=lambda item: (-item[1], str(item[0])))[:count]
    return ", ".join(f"{_display(path, root)} ({size} bytes)" for path, size in top)


def load(path: str | os.PathLike[str] | None = None) -> Matrix:
    """Load, validate and compile a matrix (default: the shipped one).

    :raises CapabilityErrors: with every problem found, each located at ``file:line:col``.
    """
    root = Path(path) if path is not None else default_path()
    problems: list[CapabilityError] = []
    matrix = _build(root, problems)
    if problems or matrix is None:
        raise CapabilityErrors(problems)
    object.__setattr__(matrix, "_compiled", compile_matrix(matrix))
    return matrix


def iter_problems(path: str | os.PathLike[str] | None = None) -> Iterator[CapabilityError]:
    """Yield every problem of a matrix directory, sorted by location (nothing when it is clean)."""
    root = Path(path) if path is not None else default_path()
    problems: list[CapabilityError] = []
    try:
        _build(root, problems)
    except CapabilityErrors as exc:
        problems.extend(exc.errors)
    yield from sorted(problems, key=CapabilityError.sort_key)


def _build(root: Path, problems: list[CapabilityError]) -> Matrix | None:
    """The validated matrix of ``root`` (from the cache when its entry provably matches the files).

    Problems go to ``problems``; a matrix with any is never cached, and a cached one has none.
    """
    files = discover(root)
    raws: list[tuple[Path, str, bytes | None]] = []
    for file, display in files:
        try:
            raws.append((file, display, read_bytes(file, display)))
        except CapabilityErrors as exc:  # noqa: PERF203 - each file's problem is reported
            problems.extend(exc.errors)
            raws.append((file, display, None))
    inputs = [(display, raw) for _file, display, raw in raws if raw is not None]
    readable = len(inputs) == len(raws) and bool(inputs)
    if readable:
        cached, key = _cache.lookup(str(root), inputs)
        if cached is not None:
            return cached
    # A clean matrix needs the positions of entries and rules only; a problem anywhere reads the
    # files again with every position, so that each error is placed exactly as always.
    before = len(problems)  # the files that could not be read
    matrix = _parse(root, raws, problems, outline=True)
    if len(problems) > before:
        del problems[before:]
        matrix = _parse(root, raws, problems)
    if readable and matrix is not None and not problems:
        _cache.store(matrix, key, [display for display, _raw in inputs])
    return matrix


def _parse(
    root: Path, raws: list[tuple[Path, str, bytes | None]], problems: list[CapabilityError],
    *, outline: bool = False,
) -> Matrix | None:
    from capmatrix import _yaml  # noqa: PLC0415 - PyYAML loads on first use, not on import

    _hints.reset()
    docs: list[tuple[dict[str, Any], _yaml.SourceMap]] = []
    broken_paths: dict[str, set[tuple[str | int, ...]]] = {}
    for _file, display, raw in raws:
        if raw is None:
            continue  # reported when it was read
        try:
            data, smap = _yaml.read_raw(raw, display, outline=outline)
        except CapabilityErrors as exc:
            problems.extend(exc.errors)
            continue
        problems.extend(smap.problems)
        broken = set()
        for problem, path in shape_problems(data, smap):
            if path not in smap.rejected:  # a refused value is reported once, by the reader
                problems.append(problem)
            broken.add(path)
        if not isinstance(data, dict) or any(len(p) < 2 for p in broken):
            continue  # the file's outline is wrong: nothing below it can be trusted
        docs.append((data, smap))
        broken_paths[smap.path] = broken
    if not docs and not problems:
        problems.append(
            CapabilityError(str(root), None, None, "", "no capability files found", code="E001")
        )
    builder = _Semantics(problems, broken_paths)
    return builder.build(root, docs)


def open_domains(axes: Mapping[str, Axis], boxes: Iterable[Mapping[str, Condition]]) -> dict[str, Axis]:
    """``axes`` with each int axis's cuts and class representatives.

    The cuts are the distinct conditions of ``boxes`` on the axis, in first-seen order; each class of
    ints without a listed value gets a representative (:mod:`capmatrix._classes`).
    """
    cuts: dict[str, dict[Condition, None]] = {n: {} for n, a in axes.items() if a.type is AxisType.INT}
    for box in boxes:
        for name, cond in box.items():
            found = cuts.get(name)
            if found is not None:
                found.setdefault(cond, None)
    out = dict(axes)
    for name, found in cuts.items():
        if not found:
            continue
        axis = axes[name]
        ordered = tuple(found)
        reps = representatives(axis.values, ordered)
        out[name] = dataclasses.replace(axis, values=axis.values + reps, extra=len(reps), cuts=ordered)
    return out


class _Semantics:
    """Layers two and three: values and cross-references, once every file has the right shape."""

    def __init__(
        self,
        problems: list[CapabilityError],
        broken: dict[str, set[tuple[str | int, ...]]],
    ) -> None:
        self.problems = problems
        self.broken = broken
        self.derived: dict[str, DerivedAxis] = {}
        self.known: dict[str, Axis] = {}
        self.space = Space(())
        #: Conditions already built, by axis, raw YAML (its repr: 80 and '80' differ) and admit_none:
        #: a condition depends on nothing else, so equal ones are built once and shared.
        self.conditions: dict[tuple[str, bool, str], Condition] = {}
        #: Per kernel, the rules (by position) that test derived axes, with those conditions: expanded last.
        self.pending: dict[str, dict[int, dict[str, Condition]]] = {}
        #: Where each role order was read, for the error of an order that never applies.
        self.order_paths: dict[tuple[str, Location], tuple[_yaml.SourceMap, tuple[str | int, ...]]] = {}
        #: Names gates guard, checked once every kernel and role is known: (file, path, gate, name).
        self.guarded: list[tuple[_yaml.SourceMap, tuple[str | int, ...], str, str]] = []

    def is_broken(self, smap: _yaml.SourceMap, path: tuple[str | int, ...]) -> bool:
        """Whether a shape error lies at or below ``path`` (or right above it)."""
        for bad in self.broken.get(smap.path, ()):
            if bad[: len(path)] == path or path[: len(bad)] == bad:
                return True
        return False

    def _skip_entry(self, smap: _yaml.SourceMap, section: str, name: str) -> bool:
        """An entry is skipped when its own fields (not only a rule of it) have shape errors."""
        for bad in self.broken.get(smap.path, ()):
            if bad[:2] == (section, name) and (len(bad) <= 3 or bad[2] != "rules"):
                return True
        return False

    def fail(
        self, smap: _yaml.SourceMap, path: tuple[str | int, ...], message: str, **kw: Any  # noqa: ANN401
    ) -> None:
        self.problems.append(smap.error(path, message, **kw))

    def build(
        self, root: Path, docs: list[tuple[dict[str, Any], _yaml.SourceMap]]
    ) -> Matrix | None:
        axes_docs = [(d, s) for d, s in docs if "axes" in d]
        if len(axes_docs) > 1:
            first = axes_docs[0][1].path
            for _data, smap in axes_docs[1:]:
                self.fail(
                    smap, ("axes",), f"axes are declared again (first in {first})",
                    key=True, hint="keep the universe in one file", code="E200",
                )
        if not axes_docs:
            if docs:
                self.problems.append(
                    CapabilityError(
                        str(root), None, None, "", "no file declares the axes",
                        hint="add axes.yaml with an 'axes' section", code="E200",
                    )
                )
            return None
        all_axes = self._axes(*axes_docs[0])
        self.known = all_axes
        self.derived = self._derived(all_axes, *axes_docs[0])
        axes = {n: a for n, a in all_axes.items() if n not in self.derived}
        self.space = Space(tuple(axes.values()))
        rule_ids: dict[str, Location] = {}
        hf_types: dict[str, str] = {}
        kernels: dict[str, Kernel] = {}
        for name, raw, smap in self._entries("kernel", docs, kernels):
            kernels[name] = self._kernel(name, raw, smap, axes, rule_ids)
        models: dict[str, ModelFamily] = {}
        for name, raw, smap in self._entries("model", docs, models):
            models[name] = self._model(name, raw, smap, axes, hf_types)
        # Roles come last: their candidates refer to kernels of any file.
        roles: dict[str, Role] = {}
        for name, raw, smap in self._entries("role", docs, roles):
            roles[name] = self._role(name, raw, smap, kernels, axes)
        self._check_scopes(axes, kernels, roles, docs)
        # Every condition is read: the int axes get their classes, and what ranges over an axis's
        # values (rules on derived axes, the areas of role orders) is worked out over them.
        axes = self._open_domains(axes, kernels, roles)
        self.space = Space(tuple(axes.values()))
        kernels = {name: self._expanded(kernel) for name, kernel in kernels.items()}
        roles = {name: self._areas(role) for name, role in roles.items()}
        for smap, path, gate, target in self.guarded:
            if target not in kernels and target not in roles:
                self.fail(smap, path, f"gate {echo(gate)} guards unknown kernel or role {echo(target)}",
                          hint=_hints.suggest(target, [*kernels, *roles], "kernels and roles"), code="E244")
        return Matrix(
            root=str(root),
            files=tuple(s.path for _d, s in docs),
            axes=axes,
            kernels=kernels,
            models=models,
            roles=roles,
            derived={n: d for n, d in self.derived.items() if n in all_axes},
            gpus=_gpus(self, docs, axes),
        )

    def _entries(
        self,
        what: str,
        docs: list[tuple[dict[str, Any], _yaml.SourceMap]],
        defined: dict[str, Any],
    ) -> Iterator[tuple[str, dict[str, Any], _yaml.SourceMap]]:
        """Yield the well-shaped entries of one section across files; report names defined twice.

        ``defined`` is filled by the caller as it builds each entry, so a later duplicate is seen.
        """
        section = f"{what}s"
        for data, smap in docs:
            for name, raw in data.get(section, {}).items():
                if self._skip_entry(smap, section, name):
                    continue
                if name in defined:
                    self.fail(
                        smap, (section, name),
                        f"{what} {echo(name)} is already defined at {defined[name].location}",
                        key=True, code="E201",
                    )
                    continue
                yield name, raw, smap

    # -- axes ---------------------------------------------------------------------------------

    def _axes(self, data: dict[str, Any], smap: _yaml.SourceMap) -> dict[str, Axis]:
        out: dict[str, Axis] = {}
        for name, raw in data["axes"].items():
            path: tuple[str | int, ...] = ("axes", name)
            if self._skip_entry(smap, "axes", name):
                continue
            kind = AxisType(raw["type"])
            if name in RESERVED_AXIS_NAMES:
                self.fail(
                    smap, path, f"axis name {name!r} is reserved: --{name.replace('_', '-')} is an "
                    "option of the command line", key=True,
                    hint=f"rename the axis, e.g. {name}_axis", code="E217",
                )
                continue
            values: list[AxisValue] = []
            if kind is AxisType.BOOL:
                if "values" in raw and raw["values"] != [False, True]:
                    self.fail(
                        smap, (*path, "values"), "a bool axis has the values [false, true]",
                        hint="leave 'values' out", code="E210",
                    )
                values = [False, True]
                if "families" in raw:
                    self.fail(smap, (*path, "families"), "families are for int axes", code="E210")
            else:
                if "values" not in raw:
                    self.fail(smap, path, f"{kind} axis {echo(name)} needs 'values'", code="E210")
                    continue
                want = str if kind is AxisType.ENUM else int
                for i, value in enumerate(raw["values"]):
                    if type(value) is not want:
                        hint = None
                        if (*path, "values", i) in smap.yaml11_bools:
                            hint = "YAML 1.1 reads unquoted yes/no/on/off as booleans; quote it"
                        self.fail(
                            smap, (*path, "values", i),
                            f"{echo(value)} is not a {want.__name__} (axis {echo(name)} is {kind})",
                            hint=hint, code="E211",
                        )
                    elif value in values:
                        self.fail(
                            smap, (*path, "values", i), f"duplicate value {echo(value)}", code="E211"
                        )
                    else:
                        values.append(value)
                        if kind is AxisType.ENUM and not ENUM_VALUE.match(str(value)):
                            # Kept as a value, so that rules naming it add no second error.
                            self.fail(
                                smap, (*path, "values", i),
                                f"enum value {str(value)[:40]!r}{'...' if len(str(value)) > 40 else ''}"
                                " is not a plain word",
                                hint="use lower-case ASCII letters, digits and _ . + -, starting "
                                     "with a letter or digit; at most 64 characters", code="E218",
                            )
                if kind is AxisType.ENUM and "families" in raw:
                    self.fail(smap, (*path, "families"), "families are for int axes", code="E210")
            families: dict[str, tuple[int, ...]] = {}
            family_ranges: dict[str, str] = {}
            for fam, members in (raw.get("families") or {}).items():
                if kind is not AxisType.INT:
                    break
                if isinstance(members, str):  # a family defined by a range: every int in it
                    try:
                        interval = _parse_range(members)
                    except _BadRangeError as exc:
                        interval, why = None, exc.hint
                    else:
                        why = "families look like [100, 103] or '[100, 109]'"
                    if interval is None:
                        self.fail(smap, (*path, "families", fam),
                                  f"family {echo(fam)}: {_cut(members)!r} is not a range", hint=why,
                                  code="E212")
                        continue
                    family_ranges[fam] = members
                    families[fam] = tuple(v for v in values if isinstance(v, int) and v in interval)
                    continue
                bad = [m for m in members if m not in values]
                if bad:
                    self.fail(
                        smap, (*path, "families", fam),
                        f"family {echo(fam)} names values that {echo(name)} does not declare: {echo(bad)}",
                        code="E212",
                    )
                families[fam] = tuple(members)
            optional = bool(raw.get("optional", False))
            if optional:
                if kind is AxisType.BOOL or NONE in values or "default" in raw or "derive" in raw:
                    self.fail(
                        smap, (*path, "optional"),
                        f"an optional axis must be an int or enum axis with no {echo(NONE)} value, "
                        "no default and no table",
                        hint=f"its default is always {echo(NONE)}: not given, not checked", code="E214",
                    )
                    optional = False
                else:
                    values.append(NONE)
            environment = bool(raw.get("environment", False))
            if environment and "default" not in raw and not optional:
                self.fail(smap, (*path, "environment"), "an environment axis needs a default",
                          hint="document what an installation has when nobody says", code="E215")
            default = raw.get("default")
            if optional:
                default = NONE
            if default is not None and not any(
                default == v and type(default) is type(v) for v in values
            ):
                self.fail(
                    smap, (*path, "default"),
                    f"default {echo(default)} is not a value of axis {echo(name)}", code="E213",
                )
                default = None
            spellings: dict[str, str] = {}
            for word, canonical in (raw.get("spellings") or {}).items():
                where = (*path, "spellings", word)
                if kind is not AxisType.ENUM:
                    self.fail(smap, (*path, "spellings"), "spellings are for enum axes", code="E219")
                    break
                if word in values:
                    self.fail(smap, where, f"spelling {echo(word)} is already a value of {echo(name)}",
                              key=True, hint="a spelling names a value another way; drop it",
                              code="E219")
                elif canonical not in values:
                    self.fail(smap, where, f"spelling {echo(word)} maps to {echo(canonical)}, which is "
                              f"not a value of {echo(name)}",
                              hint=_hints.suggest(str(canonical), [str(v) for v in values], "values"),
                              code="E219")
                else:
                    spellings[word] = canonical
            line, col = smap.locate(path, key=True)
            out[name] = Axis(
                name=name,
                type=kind,
                values=tuple(values),
                description=raw["description"],
                families=families,
                default=default,
                location=Location(path=smap.path, line=line, column=col),
                optional=optional,
                environment=environment,
                family_ranges=family_ranges,
                spellings=spellings,
                scope=raw.get("scope", CORE),
            )
        return out

    # -- derived axes -------------------------------------------------------------------------

    def _derived(
        self, axes: dict[str, Axis], data: dict[str, Any], smap: _yaml.SourceMap
    ) -> dict[str, DerivedAxis]:
        """Read the decision tables of derived axes, in declaration order (a table reads earlier axes)."""
        out: dict[str, DerivedAxis] = {}
        names = [n for n, raw in data["axes"].items() if "derive" in raw and n in axes]
        for name in names:
            raw = data["axes"][name]
            path: tuple[str | int, ...] = ("axes", name, "derive")
            axis = axes[name]
            if "default" in raw:
                self.fail(smap, ("axes", name, "default"), "a derived axis has no default",
                          hint="its value comes from its table", code="E216")
            readable = {n: a for n, a in axes.items() if n not in names or n in out}
            rows: list[DerivedRow] = []
            table = raw["derive"]
            for i, row in enumerate(table):
                rpath = (*path, i)
                value = row["value"]
                if axis.index(value) is None:
                    self.fail(smap, (*rpath, "value"),
                              f"{echo(value)} is not a value of derived axis {echo(name)}", code="E216")
                    continue
                when = self._when(row.get("when"), (*rpath, "when"), smap, readable, name)
                if when is None:
                    continue
                if i == len(table) - 1 and "when" in row:
                    self.fail(smap, (*rpath, "when"),
                              f"the last row of derived axis {echo(name)} must have no 'when'",
                              hint="end the table with an unconditional row: it may not fall through",
                              code="E216")
                line, col = smap.locate(rpath)
                rows.append(DerivedRow(value=value, when=when, text=_when_text(when),
                                       location=Location(path=smap.path, line=line, column=col)))
            out[name] = DerivedAxis(axis=axis, rows=tuple(rows))
        self.derived = out
        return out

    def _when(
        self,
        raw: dict[str, Any] | None,
        path: tuple[str | int, ...],
        smap: _yaml.SourceMap,
        readable: dict[str, Axis],
        owner: str,
        unknown_code: str = "E221",
    ) -> tuple[dict[str, Condition], ...] | None:
        """A `when:` mapping as one box of symbolic conditions (() for none); None after a problem."""
        if raw is None:
            return ()
        conditions: dict[str, Condition] = {}
        ok = True
        for axis_name, raw_cond in raw.items():
            axis = readable.get(axis_name)
            if axis is None:
                later = axis_name == owner or axis_name in self.known
                self.fail(
                    smap, (*path, axis_name),
                    f"{echo(owner)} cannot read axis {echo(axis_name)}" if later
                    else f"unknown axis {echo(axis_name)}", key=True,
                    hint=("a table reads base axes and derived axes declared before it" if later
                          else _hints.suggest(axis_name, list(readable), "axes")),
                    code="E216" if later else unknown_code,
                )
                ok = False
                continue
            cond = self._condition(axis, raw_cond, smap, (*path, axis_name))
            if cond is None:
                ok = False
            else:
                conditions[axis_name] = cond
        return (conditions,) if ok else None

    def _derived_region(self, name: str, cond: Condition) -> Region:
        """Where (over the base axes' known values) derived axis ``name`` takes a value ``cond`` admits."""
        cache: dict[tuple[str, str], Region] = self.__dict__.setdefault("_region_cache", {})
        key = (name, cond.text)
        found = cache.get(key)
        if found is not None:
            return found
        taken = Region(self.space)
        out = Region(self.space)
        for row in self.derived[name].rows:
            here = Region.full(self.space)
            for box in row.when:
                here = self._box_region(box)
            fresh = here - taken
            if cond.contains(row.value):
                out = out | fresh
            taken = taken | fresh
        found = out.merged()
        cache[key] = found
        return found

    def _box_region(self, conditions: Mapping[str, Condition]) -> Region:
        """The region (over known values) of a box of conditions on base or derived axes."""
        masks = []
        for axis in self.space.axes:
            cond = conditions.get(axis.name)
            masks.append(axis.full_mask if cond is None else
                         sum(1 << i for i, v in enumerate(axis.values) if cond.contains(v)))
        region = Region(self.space, [tuple(masks)], disjoint=True)
        for name, cond in conditions.items():
            if name in self.derived:
                region = region & self._derived_region(name, cond)
        return region

    # -- engine vocabularies --------------------------------------------------------------------

    def _check_scopes(
        self, axes: dict[str, Axis], kernels: dict[str, Kernel], roles: dict[str, Role],
        docs: list[tuple[dict[str, Any], _yaml.SourceMap]],
    ) -> None:
        """E226: a kernel, table or role reads only the core axes and those of its own engine's scope."""
        every = {**axes, **{n: d.axis for n, d in self.derived.items()}}
        smaps = {s.path: s for _d, s in docs}

        def foreign(name: str, engine: str | None) -> bool:
            axis = every.get(name)
            return axis is not None and axis.scope not in (CORE, engine)

        def report(where: Location, what: str, name: str, engine: str | None) -> None:
            smap = smaps.get(where.path)
            if smap is None:  # pragma: no cover - every location comes from a read file
                return
            scope = every[name].scope
            owner = f"engine {echo(engine)}" if engine not in (None, CORE) else "no engine: core axes only"
            self.problems.append(CapabilityError(
                where.path, where.line, where.column, "",
                f"{what} ({owner}) reads axis {echo(name)} of scope {echo(scope)}",
                hint=f"set 'engine: {scope}' on it, or give the axis scope 'core' if every engine shares it",
                code="E226",
            ))

        for kernel in kernels.values():
            pending = self.pending.get(kernel.name, {})
            for i, rule in enumerate(kernel.rules):
                for name in (*rule.conditions, *pending.get(i, {})):
                    if foreign(name, kernel.engine):
                        report(rule.location, f"rule {echo(rule.id)} of kernel {echo(kernel.name)}",
                               name, kernel.engine)
                        break
        for d in self.derived.values():
            for row in d.rows:
                for box in row.when:
                    for name in box:
                        if foreign(name, d.axis.scope):
                            report(row.location, f"derived axis {echo(d.axis.name)}", name, d.axis.scope)
        for role in roles.values():
            # A role is its engine's when its candidates name one (kernels of no engine are shared).
            engines = {kernels[c].engine for c in role.candidates if c in kernels} - {None}
            engine = next(iter(engines)) if len(engines) == 1 else None
            for order in role.orders:
                for box in order.when:
                    for name in box:
                        if foreign(name, engine):
                            report(order.location, f"role {echo(role.name)}", name, engine)

    # -- open int domains ----------------------------------------------------------------------

    def _open_domains(
        self, axes: dict[str, Axis], kernels: dict[str, Kernel], roles: dict[str, Role]
    ) -> dict[str, Axis]:
        """The int axes with their cuts (every distinct condition on them) and class representatives."""
        boxes: list[Mapping[str, Condition]] = [
            rule.conditions for kernel in kernels.values() for rule in kernel.rules]
        boxes += [box for d in self.derived.values() for row in d.rows for box in row.when]
        boxes += [box for role in roles.values() for order in role.orders for box in order.when]
        boxes += [kernel.guards.when for kernel in kernels.values() if kernel.guards is not None]
        return open_domains(axes, boxes)

    def _expanded(self, kernel: Kernel) -> Kernel:
        """``kernel`` with its rules on derived axes split into parts over the (open) base axes."""
        pending = self.pending.get(kernel.name)
        if not pending:
            return kernel
        rules: list[Rule] = []
        for i, rule in enumerate(kernel.rules):
            derived = pending.get(i)
            rules.extend(self._expand(rule, derived) if derived else (rule,))
        return dataclasses.replace(kernel, rules=tuple(rules))

    def _areas(self, role: Role) -> Role:
        """``role`` with each order's area: where it applies and no earlier order does (E243 if nowhere)."""
        taken = Region(self.space)
        orders = []
        for order in role.orders:
            here = self._box_region(order.when[0]) if order.when else Region.full(self.space)
            area = (here - taken).merged()
            where = self.order_paths.get((role.name, order.location))
            if not area and order.when and where is not None:
                self.fail(where[0], (*where[1], "when"),
                          "this order never applies: earlier orders take every query it names",
                          code="E243")
            taken = taken | area
            orders.append(dataclasses.replace(order, area=area.boxes))
        return dataclasses.replace(role, orders=tuple(orders))

    # -- kernels and rules ---------------------------------------------------------------------

    def _kernel(
        self,
        name: str,
        raw: dict[str, Any],
        smap: _yaml.SourceMap,
        axes: dict[str, Axis],
        rule_ids: dict[str, Location],
    ) -> Kernel:
        rules: list[Rule] = []
        for i, raw_rule in enumerate(raw["rules"]):
            path: tuple[str | int, ...] = ("kernels", name, "rules", i)
            if self.is_broken(smap, path):
                continue
            line, col = smap.locate(path)
            location = Location(path=smap.path, line=line, column=col)
            rule_id = raw_rule["id"]
            if rule_id in rule_ids:
                self.fail(
                    smap, (*path, "id"),
                    f"rule id {echo(rule_id)} is already used at {rule_ids[rule_id]}",
                    hint="rule ids are stable and unique across the matrix", code="E220",
                )
            rule_ids[rule_id] = location
            effect = Effect.GRANT if "grant" in raw_rule else Effect.EXCLUDE
            region = raw_rule[str(effect)]
            conditions: dict[str, Condition] = {}
            derived: dict[str, Condition] = {}
            for axis_name, raw_cond in region.items():
                cpath = (*path, str(effect), axis_name)
                axis = axes.get(axis_name)
                if axis is None and axis_name in self.derived:
                    dcond = self._condition(self.derived[axis_name].axis, raw_cond, smap, cpath)
                    if dcond is not None:
                        derived[axis_name] = dcond
                    continue
                if axis is None:
                    self.fail(
                        smap, cpath, f"unknown axis {echo(axis_name)}", key=True,
                        hint=_hints.suggest(axis_name, list(axes), "axes"), code="E221",
                    )
                    continue
                cond = self._condition(axis, raw_cond, smap, cpath,
                                       admit_none=effect is Effect.GRANT)
                if cond is not None:
                    conditions[axis_name] = cond
            rule = Rule(
                id=rule_id,
                kernel=name,
                effect=effect,
                conditions={a: conditions[a] for a in axes if a in conditions},
                reason=raw_rule["reason"],
                source=raw_rule["source"],
                status=Status(raw_rule["status"]),
                location=location,
                verified=raw_rule.get("verified"),
            )
            if derived:  # expanded once every condition is read (the int axes' classes need them all)
                self.pending.setdefault(name, {})[len(rules)] = derived
            rules.append(rule)
        line, col = smap.locate(("kernels", name), key=True)
        kind = raw.get("kind", "kernel")
        return Kernel(
            name=name,
            description=raw["description"],
            rules=tuple(rules),
            location=Location(path=smap.path, line=line, column=col),
            kind=kind,
            engine=raw.get("engine"),
            source=raw.get("source"),
            guards=None if "guards" not in raw else self._guard(name, kind, raw["guards"], smap, axes),
        )

    def _guard(
        self, name: str, kind: str, raw: Any, smap: _yaml.SourceMap, axes: dict[str, Axis],  # noqa: ANN401
    ) -> Guard | None:
        """A gate's ``guards``: a list of names, or ``targets`` with ``when``, ``axes`` and ``refused``."""
        base: tuple[str | int, ...] = ("kernels", name, "guards")
        if kind != "gate":
            self.fail(smap, base, f"{echo(name)} is a kernel; only a gate (kind: gate) guards others",
                      key=True, hint="add 'kind: gate', or remove 'guards'", code="E245")
            return None
        spec: dict[str, Any] = {"targets": raw} if isinstance(raw, list) else raw
        names = base if isinstance(raw, list) else (*base, "targets")
        self.guarded.extend((smap, (*names, i), name, t) for i, t in enumerate(spec["targets"]))
        raw_when = dict(spec.get("when", {}))
        for axis_name in [a for a in raw_when if a in self.derived]:
            self.fail(smap, (*base, "when", axis_name),
                      f"a guard's 'when' reads base axes; {echo(axis_name)} is a derived axis", key=True,
                      hint="write the condition on the axes its table reads", code="E230")
            del raw_when[axis_name]
        when = self._when(raw_when, (*base, "when"), smap, axes, name, unknown_code="E230")
        admitted = self._axis_values(spec.get("axes", {}), (*base, "axes"), smap, axes)
        refused = spec.get("refused")
        line, col = smap.locate(base, key=True)
        return Guard(
            targets=tuple(spec["targets"]), location=Location(path=smap.path, line=line, column=col),
            when=when[0] if when else {}, axes=admitted,
            refused=None if refused is None else self._axis_values(refused, (*base, "refused"), smap, axes),
        )

    def _expand(self, rule: Rule, derived: dict[str, Condition]) -> list[Rule]:
        """Split a rule that tests derived axes into parts over the axes their tables read.

        Each part is one box of the region (over known values) where the rule's own conditions hold and
        the tables give the tested values; the first part keeps the rule's id, the others add ``#2``,
        ``#3``, ... Conditions the expansion leaves as written stay symbolic (ranges keep answering
        values outside the universe).
        """
        text = " and ".join(f"{a} {c.text}" for a, c in derived.items())
        region = self._box_region({**rule.conditions, **derived}).merged()
        parts: list[Rule] = []
        for box in region.boxes or (None,):
            conditions: dict[str, Condition] = {}
            for i, axis in enumerate(self.space.axes):
                own = rule.conditions.get(axis.name)
                if box is None:  # nothing left: a part that matches nothing, so analyses see the rule
                    conditions[axis.name] = Condition(axis=axis.name, text="[]")
                    break
                mask = box[i]
                own_mask = axis.full_mask if own is None else sum(
                    1 << j for j, v in enumerate(axis.values) if own.contains(v))
                if mask == own_mask:
                    if own is not None:
                        conditions[axis.name] = own
                    continue
                chosen = axis.values_of(mask)
                listed = [format_value(v) for v in chosen if v in axis.known]
                others = [format_value(v) for v in chosen if v not in axis.known]
                if others:
                    listed.append("and ints like " + ", ".join(others))
                shown = "[" + ", ".join(listed) + "]"
                if axis.cuts:  # an open int axis: the chosen classes, so that every int is answered
                    conditions[axis.name] = Condition(
                        axis=axis.name, text=shown, values=frozenset(v for v in chosen if v in axis.known),
                        signatures=frozenset(signature(v, axis.cuts) for v in chosen if type(v) is int),
                        cuts=axis.cuts, optional=axis.optional,
                        admits_none=any(v == NONE and type(v) is str for v in chosen),
                    )
                    continue
                conditions[axis.name] = Condition(
                    axis=axis.name, text=shown, values=frozenset(chosen),
                )
            suffix = "" if not parts else f"#{len(parts) + 1}"
            parts.append(Rule(
                id=rule.id + suffix, kernel=rule.kernel, effect=rule.effect,
                conditions={a.name: conditions[a.name] for a in self.space.axes if a.name in conditions},
                reason=rule.reason, source=rule.source, status=rule.status, location=rule.location,
                verified=rule.verified, derived=text,
            ))
        return parts

    def _condition(
        self, axis: Axis, raw: Any, smap: _yaml.SourceMap, path: tuple[str | int, ...],  # noqa: ANN401
        *, admit_none: bool = True,
    ) -> Condition | None:
        """One axis's condition.

        On an optional axis ``none`` passes a condition of a grant or a `when` (``admit_none``) and
        fails one of an exclusion: not checked means the exclusion does not apply.
        """
        memo = (axis.name, admit_none, repr(raw))
        found = self.conditions.get(memo)
        if found is not None:  # built before without a problem (a problem is reported each time)
            return found
        built = self._build_condition(axis, raw, smap, path, admit_none=admit_none)
        if built is not None:
            self.conditions[memo] = built
        return built

    def _build_condition(
        self, axis: Axis, raw: Any, smap: _yaml.SourceMap, path: tuple[str | int, ...],  # noqa: ANN401
        *, admit_none: bool,
    ) -> Condition | None:
        negated = isinstance(raw, dict) and "not" in raw
        items_raw = raw["not"] if negated else raw
        item_path = (*path, "not") if negated else path
        is_list = isinstance(items_raw, list)
        items = items_raw if is_list else [items_raw]
        values: set[AxisValue] = set()
        intervals: list[Interval] = []
        families: list[str] = []
        moduli: list[int] = []
        ok = True
        for i, item in enumerate(items):
            ipath = (*item_path, i) if is_list else item_path
            parsed = self._item(axis, item, smap, ipath)
            if parsed is None:
                ok = False
            elif isinstance(parsed, _Multiple):
                moduli.append(parsed.of)
            elif isinstance(parsed, Interval):
                intervals.append(parsed)
            elif isinstance(parsed, tuple):
                families.append(parsed[0])
                if isinstance(parsed[1], Interval):
                    intervals.append(parsed[1])
                else:
                    values.update(parsed[1])
            else:
                values.add(parsed)
        if not ok:
            return None
        text = _render(items_raw)
        return Condition(
            axis=axis.name,
            text=f"not {text}" if negated else text,
            values=frozenset(values),
            intervals=tuple(intervals),
            families=tuple(families),
            negated=negated,
            moduli=tuple(moduli),
            optional=axis.optional,
            admits_none=axis.optional and admit_none,
        )

    def _item(
        self, axis: Axis, item: Any, smap: _yaml.SourceMap, path: tuple[str | int, ...]  # noqa: ANN401
    ) -> AxisValue | Interval | _Multiple | tuple[str, tuple[int, ...] | Interval] | None:
        yaml11 = path in smap.yaml11_bools
        if isinstance(item, dict):  # {multiple_of: m}; the schema allows no other mapping here
            m = item["multiple_of"]
            if axis.type is not AxisType.INT:
                self.fail(smap, path, f"multiple_of is for int axes; {echo(axis.name)} is {axis.type}",
                          code="E224")
                return None
            if isinstance(m, bool) or not isinstance(m, int) or m <= 0:
                self.fail(smap, (*path, "multiple_of"),
                          f"multiple_of needs a positive integer, got {echo(m)}", code="E224")
                return None
            return _Multiple(m)
        if axis.type is AxisType.BOOL:
            if isinstance(item, bool):
                return item
            self.fail(smap, path, f"axis {echo(axis.name)} is bool: use true or false, not {echo(item)}",
                      code="E222")
            return None
        if axis.type is AxisType.ENUM:
            if isinstance(item, str) and item in axis.values:
                return item
            if isinstance(item, str) and item in axis.spellings:
                return axis.spellings[item]
            known = [str(v) for v in axis.values]
            if isinstance(item, bool) and yaml11:
                hint = "YAML 1.1 reads unquoted yes/no/on/off as booleans; quote the word"
            else:
                hint = _hints.suggest(str(item), known, "known values")
            self.fail(
                smap, path,
                f"{echo(item)} is not one of: {', '.join(known)} (axis {echo(axis.name)})",
                hint=hint, code="E222",
            )
            return None
        # int axis: a known value, a family, a comparison or an interval.
        if isinstance(item, int) and not isinstance(item, bool):
            if item in axis.values:
                return item
            self.fail(
                smap, path, f"{echo(item)} is not a known value of axis {echo(axis.name)}",
                hint="add it to the axis values, or use a range such as '>=100'", code="E222",
            )
            return None
        if isinstance(item, str):
            if item in axis.family_ranges:  # a family defined by a range is that range
                found = _parse_range(axis.family_ranges[item])
                if found is not None:
                    return (item, found)
            if item in axis.families:
                return (item, axis.families[item])
            try:
                interval = _parse_range(item)
            except _BadRangeError as exc:
                self.fail(smap, path, f"range {_cut(item)!r}: {exc.message}",
                          hint=exc.hint, code="E225")
                return None
            if interval is not None:
                if interval.low is not None and interval.high is not None and not any(
                    v in interval for v in range(interval.low, interval.high + 1)
                ):
                    self.fail(smap, path, f"range {echo(item)} is empty", code="E223")
                    return None
                return interval
            choices = list(axis.families)
            close = _hints.close(item, choices)
            self.fail(
                smap, path,
                f"{echo(item)} is neither a family of {echo(axis.name)} nor a range",
                hint=(f"did you mean {echo(close)}?" if close else
                      "ranges look like '>=80', '<120' or '[80, 120)'"
                      + (f"; families: {', '.join(choices)}" if choices else "")),
                code="E222",
            )
            return None
        float_hint = None
        if path in smap.floats:
            float_hint = "YAML reads 1.10 as the float 1.1; quote it or use an int"
        self.fail(smap, path, f"{echo(item)} is not an int, family or range (axis {echo(axis.name)} is int)",
                  hint=float_hint, code="E222")
        return None

    # -- models and roles ----------------------------------------------------------------------

    def _model(
        self,
        name: str,
        raw: dict[str, Any],
        smap: _yaml.SourceMap,
        axes: dict[str, Axis],
        hf_types: dict[str, str],
    ) -> ModelFamily:
        values = self._axis_values(raw["axes"], ("models", name, "axes"), smap, axes)
        for i, hf in enumerate(raw.get("hf_model_types", [])):
            if hf in hf_types:
                self.fail(smap, ("models", name, "hf_model_types", i),
                          f"model_type {echo(hf)} already maps to model {echo(hf_types[hf])}", code="E232")
            hf_types[hf] = name
        for i, hf_id in enumerate(raw.get("hf_ids", [])):
            key = "hf:" + hf_id.lower()  # Hub ids are case-insensitive
            if key in hf_types:
                self.fail(smap, ("models", name, "hf_ids", i),
                          f"Hugging Face id {echo(hf_id)} already names model {echo(hf_types[key])}",
                          hint="list each checkpoint under one model", code="E233")
            hf_types[key] = name
        line, col = smap.locate(("models", name), key=True)
        return ModelFamily(
            name=name,
            description=raw["description"],
            axes={a: values[a] for a in axes if a in values},
            source=raw["source"],
            location=Location(path=smap.path, line=line, column=col),
            hf_model_types=tuple(raw.get("hf_model_types", [])),
            recognise=raw.get("recognise"),
            hf_ids=tuple(raw.get("hf_ids", [])),
            hf_config=raw.get("hf_config"),
        )

    def _axis_values(
        self,
        raw: dict[str, Any],
        base: tuple[str | int, ...],
        smap: _yaml.SourceMap,
        axes: dict[str, Axis],
    ) -> dict[str, AxisValue]:
        """Check a mapping of axis -> one known value (model defaults, role pins)."""
        values: dict[str, AxisValue] = {}
        for axis_name, value in raw.items():
            path = (*base, axis_name)
            axis = axes.get(axis_name)
            if axis is None:
                self.fail(smap, path, f"unknown axis {echo(axis_name)}", key=True,
                          hint=_hints.suggest(axis_name, list(axes), "axes"), code="E230")
                continue
            # An int axis is open: a model may pin an int no list names (a GQA group of 3).
            open_int = axis.type is AxisType.INT and type(value) is int
            if axis.index(value) is None and not open_int:
                known = ", ".join(map(str, axis.known))
                self.fail(smap, path, f"{echo(value)} is not a value of axis {echo(axis_name)} ({known})",
                          hint=_hints.suggest(str(value), [str(v) for v in axis.known], "known values"),
                          code="E231")
                continue
            values[axis_name] = value
        return {a: values[a] for a in axes if a in values}

    def _role(
        self,
        name: str,
        raw: dict[str, Any],
        smap: _yaml.SourceMap,
        kernels: dict[str, Kernel],
        axes: dict[str, Axis],
    ) -> Role:
        lists: list[tuple[tuple[str | int, ...], list[str]]] = []
        if "candidates" in raw:
            lists.append((("roles", name, "candidates"), raw["candidates"]))
        for k, order in enumerate(raw.get("orders", [])):
            lists.append((("roles", name, "orders", k, "candidates"), order["candidates"]))
        if ("candidates" in raw) == ("orders" in raw):
            self.fail(smap, ("roles", name), "a role needs exactly one of 'candidates' or 'orders'",
                      key=True, code="E242")
        everyone: list[str] = []
        for base, candidates in lists:
            seen: set[str] = set()
            for i, candidate in enumerate(candidates):
                path = (*base, i)
                if candidate not in kernels:
                    self.fail(smap, path, f"unknown kernel {echo(candidate)} in role {echo(name)}",
                              hint=_hints.suggest(candidate, list(kernels), "kernels"), code="E240")
                if candidate in seen:
                    self.fail(smap, path, f"kernel {echo(candidate)} is listed twice", code="E241")
                seen.add(candidate)
                if candidate not in everyone:
                    everyone.append(candidate)
        orders: list[RoleOrder] = []
        for k, order in enumerate(raw.get("orders", [])):
            opath: tuple[str | int, ...] = ("roles", name, "orders", k)
            when = self._when(order.get("when"), (*opath, "when"), smap, self.known, name,
                              unknown_code="E230")
            if when is None:
                continue
            line, col = smap.locate(opath)
            location = Location(path=smap.path, line=line, column=col)
            self.order_paths[(name, location)] = (smap, opath)
            # Its area comes once the int axes have their classes (_areas).
            orders.append(RoleOrder(
                when=when, candidates=tuple(order["candidates"]), text=_when_text(when),
                location=location,
            ))
        pinned = self._axis_values(raw.get("axes", {}), ("roles", name, "axes"), smap, axes)
        line, col = smap.locate(("roles", name), key=True)
        return Role(
            name=name,
            description=raw["description"],
            candidates=tuple(everyone),
            location=Location(path=smap.path, line=line, column=col),
            source=raw.get("source"),
            axes=pinned,
            orders=tuple(orders),
        )


#: The spellings of a GPU before its aliases: its key and its name.
_GPU_FIELDS = ("key", "name")


def _gpus(
    builder: _Semantics, docs: list[tuple[dict[str, Any], _yaml.SourceMap]], axes: dict[str, Axis],
) -> dict[str, GPU]:
    """The ``gpus:`` entries: each GPU's sm must be a value of the ``sm`` axis, each name one GPU's."""
    gpus: dict[str, GPU] = {}
    owners: dict[str, str] = {}  # a spelling as compared -> the key of the GPU it names
    sm = axes.get("sm")
    for key, raw, smap in builder._entries("gpu", docs, gpus):  # noqa: SLF001 - the loader's own walk
        path: tuple[str | int, ...] = ("gpus", key)
        if sm is None or sm.type is not AxisType.INT or sm.index(raw["sm"]) is None:
            known = "the matrix has no int axis 'sm'" if sm is None or sm.type is not AxisType.INT \
                else f"the sm axis has {', '.join(map(format_value, sm.known))}"
            builder.fail(smap, (*path, "sm"), f"GPU {echo(key)} has sm {echo(raw['sm'])}; {known}",
                         hint="add the SM to the sm axis's values, or correct the GPU's sm",
                         code="E250")
        aliases = tuple(raw.get("aliases", ()))
        for i, spelling in enumerate((key, raw["name"], *aliases)):
            owner = owners.setdefault(gpu_spelling(spelling), key)
            if owner != key:
                where = ((path, (*path, "name"))[i] if i < len(_GPU_FIELDS)
                         else (*path, "aliases", i - len(_GPU_FIELDS)))
                builder.fail(smap, where, f"{echo(spelling)} already names GPU {echo(owner)}",
                             hint="a name or alias names one GPU, whatever its case, spaces, - and _",
                             key=i == 0, code="E251")
        line, col = smap.locate(path, key=True)
        gpus[key] = GPU(key=key, name=raw["name"], sm=raw["sm"], aliases=aliases,
                        source=raw.get("source"), location=Location(path=smap.path, line=line, column=col))
    return gpus


class _Multiple:
    """A parsed ``{multiple_of: m}`` item."""

    __slots__ = ("of",)

    def __init__(self, of: int) -> None:
        self.of = of


def _when_text(when: tuple[dict[str, Condition], ...]) -> str:
    if not when:
        return "otherwise"
    return " and ".join(f"{a} {c.text}" for a, c in when[0].items()) or "always"


class _BadRangeError(Exception):
    """A string shaped like a range whose numbers cannot be read (control flow inside this module)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _bound(digits: str) -> int:
    """An integer of a range: ASCII digits, within a signed 64-bit word.

    :raises _BadRangeError: for a number past the limit (also one of thousands of digits).
    """
    if len(digits.lstrip("-")) > _MAX_RANGE_DIGITS:
        raise _BadRangeError(
            f"number of {len(digits.lstrip('-'))} digits is out of range",
            "range bounds are axis integers (signed 64-bit)",
        )
    number = int(digits, 10)
    if number.bit_length() > _MAX_INT_BITS:
        raise _BadRangeError(
            f"number {number} is out of range (more than {_MAX_INT_BITS} bits)",
            "range bounds are axis integers (signed 64-bit)",
        )
    return number


def _parse_range(text: str) -> Interval | None:
    """The interval a range string denotes, or None when the text is not shaped like a range.

    :raises _BadRangeError: for a range with non-ASCII digits or numbers out of range.
    """
    match = _CMP.match(text)
    if match:
        op, number = match.group(1), _bound(match.group(2))
        if op == ">=":
            return Interval(low=number, low_inclusive=True)
        if op == ">":
            return Interval(low=number, low_inclusive=False)
        if op == "<=":
            return Interval(high=number, high_inclusive=True)
        if op == "<":
            return Interval(high=number, high_inclusive=False)
        return Interval(low=number, high=number, high_inclusive=True)  # ==
    match = _INTERVAL.match(text)
    if match:
        return Interval(
            low=_bound(match.group(2)),
            low_inclusive=match.group(1) == "[",
            high=_bound(match.group(3)),
            high_inclusive=match.group(4) == "]",
        )
    if _RANGE_SHAPE.match(text):
        raise _BadRangeError(
            "only ASCII digits and spaces are read in a range",
            "write the digits 0-9; a lookalike digit or space is not read as a number",
        )
    return None


def _render(raw: Any) -> str:  # noqa: ANN401 - plain YAML data
    if isinstance(raw, dict) and "multiple_of" in raw:
        return f"multiple_of {raw['multiple_of']}"
    if isinstance(raw, list):
        return "[" + ", ".join(_render(item) for item in raw) + "]"
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return str(raw)
