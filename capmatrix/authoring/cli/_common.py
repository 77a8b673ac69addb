"""What the subcommands share: exit statuses, the ``--matrix`` and ``--<axis>`` options, JSON output."""

from __future__ import annotations

import argparse
import contextvars
import os
import re
import sys
import textwrap
from pathlib import Path

from capmatrix._core.record import record
from capmatrix.authoring.cli._json import write_json
from capmatrix.authoring.loader import RESERVED_AXIS_NAMES, default_path, discover, load
from capmatrix.engine.hf import query_from_hf_config, read_hf_config
from capmatrix.errors import (
    CapabilityError,
    CapabilityErrors,
    InvalidArgument,
    InvalidQuery,
    InvalidValue,
    UnknownName,
    did_you_mean,
    echo,
)
from capmatrix.matrix import gpu_spelling
from capmatrix.model import AxisType, format_value
from capmatrix.query import ANY, KernelQuery
from capmatrix.releases import engine_releases, release

TYPE_CHECKING = False  # not typing's: every command would import it for annotations only
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, TextIO

    from capmatrix.matrix import Matrix
    from capmatrix.model import Axis, AxisValue
    from capmatrix.query import _Any

__all__ = [
    "EXIT_DEPENDS",
    "EXIT_ERROR",
    "EXIT_FAIL",
    "EXIT_OK",
    "MATRIX_DEFAULT_HELP",
    "MATRIX_ENV",
    "MatrixChoice",
    "add_axis_options",
    "add_format_option",
    "add_matrix_option",
    "add_model_options",
    "announce_matrix",
    "axis_option_clashes",
    "brief_load_errors",
    "choose_matrix",
    "columns",
    "forget_matrix_choice",
    "gpu_sm",
    "load_matrix",
    "prescan",
    "print_json",
    "query_from_args",
    "wrap",
]

EXIT_OK, EXIT_FAIL, EXIT_ERROR, EXIT_DEPENDS = 0, 1, 2, 3

if TYPE_CHECKING:
    #: ``cmd_<name>(args, prepared, stdout, stderr) -> exit status``; ``prepared`` is what the
    #: command's ``configure_<name>`` returned (the matrix it loaded to declare the axis options, or None).
    Handler = Callable[[Any, Any, TextIO, TextIO], int]


#: The environment variable naming the matrix directory when no ``--matrix`` (or PATH) is given.
MATRIX_ENV = "CAPMATRIX_MATRIX"
#: Where a matrix directory came from (see :func:`choose_matrix`).
FROM_ARGUMENT, FROM_ENV, FROM_WORKING_TREE, FROM_PACKAGE = (
    "the command line", MATRIX_ENV, "the working tree", "the shipped matrix",
)


@record
class MatrixChoice:
    """The matrix directory a command uses, and where that choice came from.

    ``passed_over``: a working-tree ``capabilities/`` that was found but not taken, and why.
    """

    path: Path
    source: str
    passed_over: tuple[Path, str] | None = None

    @property
    def implicit_other(self) -> bool:
        """Whether it was not named on the command line and is not the shipped matrix."""
        if self.source in {FROM_ARGUMENT, FROM_PACKAGE}:
            return False
        try:
            return self.path.resolve() != default_path().resolve()
        except OSError:
            return True

    @property
    def witness_matrix(self) -> str | None:
        """What ``--matrix`` a printed command needs to ask this same matrix (None: the default)."""
        return str(self.path) if self.source == FROM_ARGUMENT or self.implicit_other else None


def choose_matrix(explicit: str | os.PathLike[str] | None, *, cwd: Path | None = None) -> MatrixChoice:
    """The one rule every command follows to pick its matrix directory.

    1. ``--matrix DIR`` (or the PATH argument of ``validate``, ``check``, ``test``) when given;
    2. else the directory named by the environment variable ``CAPMATRIX_MATRIX``, when set;
    3. else ``capabilities/`` holding an ``axes.yaml`` in the current directory or the nearest of its
       parents (a checkout's working tree), looking no higher than the root of the git work tree
       (the folder holding ``.git``) and only through folders of this user that others cannot
       write (:func:`_private_folder`): one planted by someone else (in a shared ``/tmp``, say)
       is never taken;
    4. else the matrix shipped with the package.
    """
    if explicit is not None:
        return MatrixChoice(Path(explicit), FROM_ARGUMENT)
    named = os.environ.get(MATRIX_ENV)
    if named:
        return MatrixChoice(Path(named), FROM_ENV)
    here = (cwd or Path.cwd()).absolute()
    passed_over: tuple[Path, str] | None = None
    for folder in (here, *here.parents):
        candidate = folder / "capabilities"
        why = _private_folder(folder)
        try:
            found = (candidate / "axes.yaml").is_file()
            at_root = (folder / ".git").exists()
        except OSError:  # an unreadable folder: nothing is taken from it or above it
            break
        if found:
            why = why or _private_folder(candidate)
            if why is None:
                return MatrixChoice(candidate, FROM_WORKING_TREE)
            passed_over = (candidate, why)
        if why is not None or at_root:
            break
    return MatrixChoice(default_path(), FROM_PACKAGE, passed_over)


def _private_folder(folder: Path) -> str | None:
    """Why a matrix found in ``folder`` is not taken (None: it is a folder of this user's own).

    It must be owned by this user and not writable by every user; a folder the group can write is
    accepted when the user owns it (a user-private group's umask gives such folders).
    """
    try:
        st = folder.stat()
    except OSError as exc:
        return f"cannot be examined ({exc.strerror or exc})"
    if st.st_uid != os.geteuid():
        return "owned by another user"
    if st.st_mode & 0o002:
        return "writable by every user"
    return None


def announce_matrix(choice: MatrixChoice, err: TextIO, matrix: Matrix | None = None) -> None:
    """Say on ``err`` which matrix is used when nobody named it and it is not the shipped one.

    Also: a working-tree matrix found but not taken, and why; and the engines ``matrix`` left out
    because their files have problems. The choice is kept for :func:`print_json`, whose answers name
    the matrix that answered.
    """
    _answered_by.set(choice)
    err.writelines(
        f"capmatrix: warning: engine {engine} left out: {len(problems)} problem"
        f"{'' if len(problems) == 1 else 's'} in its files, first {problems[0].location}; "
        "its questions exit 2 (`capmatrix validate` lists them)\n"
        for engine, problems in (sorted(matrix.left_out.items()) if matrix is not None else ())
    )
    if choice.passed_over is not None:
        where, why = choice.passed_over
        err.write(f"capmatrix: not using {where}: {why}; pass --matrix {where} to use it\n")
    if choice.implicit_other:
        err.write(f"capmatrix: matrix {choice.path} (from {choice.source})\n")


#: The matrix choice the running command announced (read by :func:`print_json`).
_answered_by: contextvars.ContextVar[MatrixChoice | None] = contextvars.ContextVar(
    "capmatrix_answered_by", default=None
)


def forget_matrix_choice() -> None:
    """Clear the announced choice (at the start of each command line)."""
    _answered_by.set(None)


def load_matrix(path: str | None, *, isolate: bool = False) -> Matrix:
    """Load the matrix :func:`choose_matrix` picks for ``path`` (``--matrix``, or None).

    ``isolate``: an engine whose files have problems is left out (``load(..., isolate=True)``), and
    :func:`announce_matrix` says so; a question about it exits 2 with the problems.
    """
    return load(choose_matrix(path).path, isolate=isolate)


def prescan(argv: Sequence[str], option: str) -> str | None:
    """The value of ``option`` in ``argv``, read before the parser exists (``--matrix DIR``)."""
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return None


#: How ``--help`` describes the default matrix directory (the rule of :func:`choose_matrix`).
MATRIX_DEFAULT_HELP = (
    "matrix directory (default: $CAPMATRIX_MATRIX, else capabilities/ in the current directory or "
    "a parent, else the shipped one)"
)


def add_matrix_option(parser: argparse.ArgumentParser) -> None:
    """``--matrix DIR``."""
    parser.add_argument("--matrix", metavar="DIR", help=MATRIX_DEFAULT_HELP)


def add_format_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--format text|json|github`` (``args.format``), with ``--json`` kept as its short form."""
    form = parser.add_mutually_exclusive_group()
    form.add_argument(
        "--format", choices=("text", "json", "github"), default="text",
        help=f"text (default), json, or github: the {what} as GitHub Actions annotations "
             "(::error file=...,line=...,col=...::message)",
    )
    form.add_argument("--json", dest="format", action="store_const", const="json",
                      help="the same as --format json")


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_axis_options(
    parser: argparse.ArgumentParser, argv: Sequence[str], *, isolate: bool = False
) -> Matrix:
    """One ``--<axis> VALUE`` option per axis of the matrix named by ``--matrix``; return that matrix.

    ``isolate``: as :func:`load_matrix`'s (the commands that answer questions: ``query``, ``select``).

    An axis (or alias) is ``--`` and its name with ``_`` as ``-``, beside the options the command has.

    :raises CapabilityErrors: when an axis or alias names an option the command has already (E227), as
        ``capmatrix validate`` reports it, rather than argparse's conflict.
    """
    matrix = load_matrix(prescan(argv, "--matrix"), isolate=isolate)
    clashes = axis_option_clashes({parser.prog: parser}, matrix)
    if clashes:
        raise CapabilityErrors(clashes)
    return matrix


def axis_option_clashes(
    parsers: Mapping[str, argparse.ArgumentParser], matrix: Matrix,
) -> list[CapabilityError]:
    """Add ``matrix``'s axis options to each parser (by command); an E227 problem per name one refuses.

    argparse itself decides: a name clashes when adding its option to a command's parser conflicts
    with an option the command defines (``--gpu``, ``--vary``, ``--explain``, ``--help``, ...).
    """
    found: dict[tuple[str, str | None], list[str]] = {}
    for command, parser in parsers.items():
        for clash in _add_axes(parser, matrix):
            found.setdefault(clash, []).append(command)
    return [_clash(matrix, axis, alias, commands) for (axis, alias), commands in found.items()]


def _add_axes(parser: argparse.ArgumentParser, matrix: Matrix) -> list[tuple[str, str | None]]:
    """Add an option per axis and alias to ``parser``; return the (axis, alias) names it refused."""
    group = parser.add_argument_group("axes ('*' makes an axis range over all its values)")
    refused: list[tuple[str, str | None]] = []
    if matrix.releases:
        modelled = "; ".join(f"{e}: {', '.join(r.names)}" for e, r in matrix.releases.items())
        group.add_argument(
            "--engine-version", dest="engine_versions", metavar="ENGINE=VERSION", action="append",
            help=f"ask as this release of the engine (default: its newest). Modelled: {modelled}",
        )
    for axis in matrix.axes.values():
        if axis.name in RESERVED_AXIS_NAMES:
            continue  # the loader refuses such names; a hand-built matrix may still hold one
        shown = ", ".join(format_value(v) for v in axis.known)
        if axis.name == "sm" and axis.type is AxisType.INT:
            shown += " (also written sm_90a, sm100, 9.0; --gpu NAME gives it by product name)"
        options: list[tuple[str, str | None, str]] = [(axis.name, None, f"{axis.type}: {shown}")]
        # an engine's word for the axis (never another's name)
        options.extend((alias, alias, f"{_option(axis.name)} in {scope}'s word")
                       for alias, scope in axis.aliases.items())
        for name, alias, text in options:
            try:
                group.add_argument(_option(name), dest=f"axis_{name}", metavar="VALUE", help=text)
            except argparse.ArgumentError:  # noqa: PERF203 - the command has this option already
                refused.append((axis.name, alias))
    return refused


def _clash(matrix: Matrix, axis: str, alias: str | None, commands: list[str]) -> CapabilityError:
    """E227 at the axis's (or alias's) key in its file, read again for the position."""
    from capmatrix.authoring._yaml import read as _yaml  # noqa: PLC0415 - PyYAML loads only when there is a clash to place

    option = _option(alias or axis)
    where = " and ".join(f"`{c}`" for c in commands)
    if alias is None:
        path: tuple[str, ...] = ("axes", axis)
        message = f"axis name {echo(axis)} clashes with the command line: {option} is an option of {where}"
        hint = f"rename the axis, e.g. {axis}_axis"
    else:
        path = ("axes", axis, "aliases", alias)
        message = (f"alias {echo(alias)} of axis {echo(axis)} clashes with the command line: {option} is "
                   f"an option of {where}")
        hint = "an alias is a name no option of capmatrix query or select has"
    shown = matrix.axes[axis].location
    if shown is None:  # a matrix built by hand, not read from files
        return CapabilityError(matrix.root, None, None, ".".join(path), message, hint=hint, code="E227")
    files = {display: file for file, display in discover(Path(matrix.root))}
    _data, smap = _yaml.read(files[shown.path], shown.path)
    return smap.error(path, message, key=True, hint=hint, code="E227")


#: The spellings of one SM an ``--sm`` option takes besides the number: ``sm_90a``, ``SM100``, ``sm_120``
#: (the ``a`` of an arch-specific target names the same SM) and the compute capability ``12.1``.
_SM_NAME = re.compile(r"(?:sm_?)?([0-9]{2,3})a?", re.IGNORECASE)
_SM_VERSION = re.compile(r"([0-9]{1,2})\.([0-9])")


def _sm_text(axis: Axis, text: str) -> str:
    """``text`` of the ``sm`` axis as the number the axis parses (``sm_90a`` -> ``90``, ``12.1`` -> ``121``).

    :raises InvalidQuery: for a family name (``sm_100f``): a query asks about one SM.
    """
    named = _SM_NAME.fullmatch(text)
    if named:
        return named.group(1)
    version = _SM_VERSION.fullmatch(text)
    if version:
        return str(int(version.group(1)) * 10 + int(version.group(2)))
    family = axis.families.get(text.lower())
    if family is not None:
        members = ", ".join(map(str, family))
        raise InvalidQuery(f"--sm {echo(text)} is a family ({members}); a query asks about one SM: "
                           f"give one of {members}")
    return text


def gpu_sm(matrix: Matrix, name: str) -> int:
    """The SM of the GPU ``name`` names (case, spaces, ``-`` and ``_`` aside).

    :raises UnknownName: when no GPU of the matrix answers to ``name`` (with the closest one).
    """
    gpu = matrix.gpu(name)
    if gpu is not None:
        return gpu.sm
    error = UnknownName("GPU", name, [g.name for g in matrix.gpus.values()])
    spellings = {gpu_spelling(s): g.name for g in matrix.gpus.values() for s in g.spellings}
    close = did_you_mean(gpu_spelling(name), spellings)
    error.suggestion = None if close is None else spellings[close]
    raise error


def _convert(axis: Axis, text: str) -> AxisValue | _Any:
    if text == "*":
        return ANY
    if axis.name == "sm" and axis.type is AxisType.INT:
        text = _sm_text(axis, text)
    try:
        return axis.parse(text)
    except InvalidValue as exc:
        raise InvalidQuery(f"{_option(axis.name)} expects {exc.expected}, got {echo(text)}") from None


def engine_versions(args: argparse.Namespace, matrix: Matrix) -> dict[str, str]:
    """The releases ``--engine-version ENGINE=VERSION`` names, by engine (each checked against the matrix).

    :raises InvalidArgument: for a word without ``=``, an engine without releases or a release the
        matrix does not model (the message lists the modelled ones).
    """
    out: dict[str, str] = {}
    for text in getattr(args, "engine_versions", None) or ():
        engine, sep, version = text.partition("=")
        if not sep:
            raise InvalidArgument("--engine-version", text, "ENGINE=VERSION, e.g. vllm=0.33.0")
        engine = engine.strip()
        # One home for the engine names and the releases: capmatrix.releases.
        version = release(matrix, engine_releases(matrix, engine, argument="--engine-version").engine,
                          version, argument="--engine-version")
        if out.setdefault(engine, version) != version:
            raise InvalidArgument("--engine-version", text, f"one release of {engine} (also given: "
                                  f"{engine}={out[engine]})")
    return out


def query_from_args(args: argparse.Namespace, matrix: Matrix, kernel: str | None, *,
                    role: str | None = None) -> KernelQuery:
    """Build a KernelQuery from the parsed ``--<axis>`` options of ``matrix``'s axes.

    ``role``: the role ``select`` asks (the kernel's or role's engine words what ``--hf-config`` leaves
    to the engine's default: vLLM's KV cache ``auto``, not the model dtype).
    """
    axes = {}
    for axis in matrix.axes.values():
        for name in (axis.name, *axis.aliases):
            text = getattr(args, f"axis_{name}", None)
            if text is None:
                continue
            if axis.name in axes:
                raise InvalidQuery(
                    f"{_option(name)} is {_option(axis.name)} by another name; give one of them")
            axes[axis.name] = _convert(axis, text)
    for engine, version in engine_versions(args, matrix).items():
        release_axis = matrix.releases[engine].axis
        if axes.get(release_axis, version) != version:
            raise InvalidQuery(f"--engine-version {engine}={version} and {_option(release_axis)} "
                               f"{format_value(axes[release_axis])} disagree; give one of them")
        axes[release_axis] = version
    gpu = getattr(args, "gpu", None)
    if gpu is not None:
        sm = gpu_sm(matrix, gpu)
        if axes.get("sm", sm) != sm:
            raise InvalidQuery(
                f"--gpu {echo(gpu)} has sm {sm} but --sm says {format_value(axes['sm'])}; give one of them"
            )
        axes["sm"] = sm
    config_path = getattr(args, "hf_config", None)
    if config_path is None:
        return KernelQuery(kernel, model=args.model, **axes)
    derived = query_from_hf_config(
        read_hf_config(config_path), kernel if kernel is not None else role, matrix=matrix, model=args.model
    )
    return KernelQuery(kernel, model=derived.model, **{**derived.axes, **axes})


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """``--model NAME|HF-ID`` and ``--hf-config PATH`` of ``query`` and ``select``."""
    parser.add_argument(
        "--model", metavar="NAME",
        help="model whose axis values are the defaults: a short name (llama3_1_70b) or a Hugging "
             "Face id (meta-llama/Llama-3.1-70B-Instruct)",
    )
    parser.add_argument(
        "--gpu", metavar="NAME",
        help="a GPU by name (H100, B200, RTX 5090, DGX Spark, ...; `capmatrix list gpus`): its SM is "
             "the query's --sm; `all` or a comma list (H100,B200) answers per GPU, grouped where they agree",
    )
    parser.add_argument(
        "--hf-config", metavar="PATH",
        help="a Hugging Face config.json: attention, head_dim, q_per_kv, dtype and sliding_window "
             "come from it (a nested text_config too); --<axis> options still win",
    )


def columns() -> int:
    """The width answers wrap at: ``$COLUMNS``, else the terminal's (stdout's), else 80.

    Read as ``shutil.get_terminal_size`` reads it, without importing ``shutil``.
    """
    try:
        width = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        width = 0
    if width <= 0:
        try:
            width = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            width = 0
    return width or 80


#: What a line of an answer may start with (after its indentation): a reason's or a candidate's mark.
#: A wrapped line goes on under the text after the mark.
_MARK = re.compile(r"(?:=>|[-+x~!]) ")
#: A line that names what follows (``query: ``, ``model llama: ``, ``axis defaults: ``).
_LABEL = re.compile(r"[^:]{1,40}: ")
#: The narrowest width text is wrapped at (below it, lines would hold a word or two).
_MIN_WIDTH = 40


def wrap(text: str, width: int) -> str:
    """``text`` with each line longer than ``width`` wrapped at spaces, never inside a word.

    A continuation is indented under the text after the line's mark (``+ ``, ``x ``, ``=> ``), else
    four columns deeper than the line; a word longer than the width stays whole, on a line of its own.
    """
    width = max(width, _MIN_WIDTH)
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        body = line.lstrip(" ")
        indent = len(line) - len(body)
        mark = _MARK.match(body)
        if mark is not None:
            deeper = indent + len(mark.group(0))
        elif _LABEL.match(body):
            deeper = indent + 4
        else:
            deeper = indent + 2
        out.extend(textwrap.wrap(body, width, initial_indent=" " * indent, subsequent_indent=" " * deeper,
                                 break_long_words=False, break_on_hyphens=False) or [line])
    return "\n".join(out)


def print_json(data: object, out: TextIO, *, indent: int = 2) -> None:
    """Write ``data`` as indented JSON (values JSON does not know are written as ``str()``).

    Written as it is encoded (:mod:`capmatrix.authoring.cli._json`): an iterator stands for a list, so a
    large report need not be built whole first.

    An object gains ``"matrix"``: the directory of the matrix that answered, when the command
    announced its choice (:func:`announce_matrix`) and the object has no such key of its own.
    """
    choice = _answered_by.get()
    if isinstance(data, dict) and choice is not None and "matrix" not in data:
        data = {**data, "matrix": str(choice.path)}
    write_json(data, out, indent=indent)


def brief_load_errors(count: int, first: str) -> str:
    """One line for a matrix that does not load: how many problems, and the first one's place.

    ``--brief-load-errors``, for a hook beside ``capmatrix validate``, which reports them in full.
    """
    noun = "problem" if count == 1 else "problems"
    return (f"capmatrix: the matrix does not load ({count} {noun}, the first at {first}); "
            "`capmatrix validate` reports them")
