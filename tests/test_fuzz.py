"""Fuzzing: generated and mutated matrices, raw YAML text and bytes, random queries and command lines.

The property everywhere: capmatrix answers or refuses with one of its own errors (a CapmatrixError);
nothing else escapes load, resolve, select, bind or the CLI, and every data error is located in an
existing file (line and column inside the file when given). Generated valid matrices must load.

The normal suite runs few examples (deterministically); ``make fuzz`` (tests/fuzz_main.py) runs the
same targets with ``CAPMATRIX_FUZZ_EXAMPLES`` examples each and reports how many inputs it tried.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from conftest import SMALL_AXES, SMALL_KERNELS, disguises
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import capmatrix
from capmatrix.authoring._yaml import read as _yaml
from capmatrix.authoring.cli import run
from capmatrix.engine import bind, query_from_hf_config
from capmatrix.errors import CapabilityError, CapabilityErrors, CapmatrixError
from capmatrix.query import ANY, KernelQuery

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

#: Examples per target: small in the normal suite, large under `make fuzz`.
EXAMPLES = int(os.environ.get("CAPMATRIX_FUZZ_EXAMPLES", "25"))
LONG_RUN = "CAPMATRIX_FUZZ_EXAMPLES" in os.environ
#: Inputs each target was called with (``make fuzz`` prints them).
TRIED: Counter[str] = Counter()
#: What the loader did with fuzzed matrices: loaded, or refused with which error codes.
OUTCOMES: Counter[str] = Counter()

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=not LONG_RUN,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)

AXIS_NAMES = ["sm", "attention", "kv", "beam", "causal", "phase", "head_dim", "x1"]
ENUM_WORDS = ["mha", "gqa", "mla", "bf16", "fp8", "none", "one_model", "context", "no", "on", "y"]
INTS = [1, 4, 32, 64, 75, 80, 90, 100, 103, 120, 121, 128, 576]
KERNEL_NAMES = ["xqa", "fmha", "mmha", "sdpa", "k_1"]
MODEL_NAMES = ["llama", "dsv3", "qwen", "m_2"]
ROLE_NAMES = ["gen", "ctx", "prefill"]
CODE = re.compile(r"^E\d{3}$")


# --------------------------------------------------------------------------------------------------
# strategies: valid matrices


@st.composite
def axis_specs(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(AXIS_NAMES), min_size=1, max_size=5, unique=True))
    axes: dict[str, dict[str, Any]] = {}
    for name in names:
        kind = draw(st.sampled_from(["enum", "int", "bool"]))
        spec: dict[str, Any] = {"type": kind, "description": f"the {name} axis"}
        values: list[Any] = [False, True]
        if kind == "enum":
            values = draw(st.lists(st.sampled_from(ENUM_WORDS), min_size=1, max_size=5, unique=True))
            spec["values"] = values
        elif kind == "int":
            values = sorted(draw(st.lists(st.sampled_from(INTS), min_size=1, max_size=6, unique=True)))
            spec["values"] = values
            if len(values) > 1 and draw(st.booleans()):
                members = draw(st.lists(st.sampled_from(values), min_size=1, unique=True))
                spec["families"] = {f"{name}_fam": sorted(members)}
        if draw(st.booleans()):
            spec["default"] = draw(st.sampled_from(values))
        axes[name] = spec
    return axes


def _values(spec: dict[str, Any]) -> list[Any]:
    values: list[Any] = spec.get("values", [False, True])
    return values


@st.composite
def conditions(draw: st.DrawFn, spec: dict[str, Any]) -> Any:
    values = _values(spec)
    items: list[Any] = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3, unique=True))
    if spec["type"] == "int":
        extra = draw(st.sampled_from(["", "ge", "lt", "interval", "family"]))
        low = draw(st.sampled_from(INTS))
        if extra == "ge":
            items.append(f">={low}")
        elif extra == "lt":
            items.append(f"<{low + 1}")
        elif extra == "interval":
            items.append(f"[{low}, {low + draw(st.integers(1, 200))})")
        elif extra == "family" and "families" in spec:
            items.append(next(iter(spec["families"])))
    body: Any = items[0] if len(items) == 1 and draw(st.booleans()) else items
    return {"not": body} if draw(st.integers(0, 4)) == 0 else body


@st.composite
def matrices(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    """A valid matrix as file name -> YAML data (axes, kernels, optional models and roles)."""
    axes = draw(axis_specs())
    kernels: dict[str, Any] = {}
    for kname in draw(st.lists(st.sampled_from(KERNEL_NAMES), min_size=1, max_size=3, unique=True)):
        rules = []
        for i in range(draw(st.integers(1, 4))):
            constrained = draw(st.lists(st.sampled_from(sorted(axes)), max_size=3, unique=True))
            region = {a: draw(conditions(axes[a])) for a in constrained}
            effect = "grant" if i == 0 or draw(st.booleans()) else "exclude"
            rules.append({
                "id": f"{kname}.r{i}",
                effect: region,
                "reason": f"reason {i}",
                "source": "generated",
                "status": draw(st.sampled_from(["verified", "untested", "known_issue"])),
            })
        kernels[kname] = {"description": f"kernel {kname}", "rules": rules}
        if draw(st.booleans()):
            kernels[kname]["kind"] = draw(st.sampled_from(["kernel", "gate"]))
    files: dict[str, dict[str, Any]] = {"axes.yaml": {"axes": axes}, "kernels/gen.yaml": {"kernels": kernels}}
    models = {}
    for i, mname in enumerate(draw(st.lists(st.sampled_from(MODEL_NAMES), max_size=3, unique=True))):
        pinned = draw(st.lists(st.sampled_from(sorted(axes)), max_size=3, unique=True))
        models[mname] = {
            "description": f"model {mname}",
            "axes": {a: draw(st.sampled_from(_values(axes[a]))) for a in pinned},
            "hf_model_types": [f"hf_{i}"],
            "source": "generated",
        }
    if models:
        files["models.yaml"] = {"models": models}
    roles = {}
    for rname in draw(st.lists(st.sampled_from(ROLE_NAMES), max_size=2, unique=True)):
        roles[rname] = {
            "description": f"role {rname}",
            "candidates": draw(st.lists(st.sampled_from(sorted(kernels)), min_size=1, unique=True)),
        }
    if roles:
        files["roles.yaml"] = {"roles": roles}
    return files


def _dump(data: object) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


@contextlib.contextmanager
def written(files: dict[str, str | bytes]) -> Iterator[Path]:
    """The files under a fresh matrix directory (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="capmatrix-fuzz-") as tmp:
        root = Path(tmp) / "caps"
        for name, content in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        yield root


def check_located(errors: CapabilityErrors, root: Path) -> None:
    """Every error names an existing file (or the root) and, when it has a position, a real one."""
    assert errors.errors, "an empty error group"
    for error in errors.errors:
        assert isinstance(error, CapabilityError)
        assert CODE.match(error.code), error.code
        assert error.message
        assert str(error).startswith(error.location)
        target = Path(error.path)
        if not target.is_absolute():
            target = root.parent / error.path
        assert target.exists() or target.is_symlink() or target == root, error.path
        if error.line is None:
            assert error.column is None or error.column >= 1
            continue
        assert target.is_file(), error
        text = target.read_bytes().decode("utf-8", "replace")
        lines = text.split("\n")
        assert 1 <= error.line <= len(lines), (error, len(lines))
        assert error.column is not None
        assert error.column >= 1
        assert error.column <= len(lines[error.line - 1]) + 1, (error, lines[error.line - 1])


def load_or_locate(root: Path) -> capmatrix.Matrix | None:
    """Load; a refusal must be a located CapabilityErrors, and iter_problems must agree with it."""
    refused: CapabilityErrors | None = None
    try:
        matrix = capmatrix.load(root)
    except CapabilityErrors as exc:
        refused = exc
    listed = [str(e) for e in capmatrix.iter_problems(root)]
    if refused is None:
        assert listed == []
        OUTCOMES["loaded"] += 1
        return matrix
    OUTCOMES["refused"] += 1
    OUTCOMES.update(e.code for e in refused.errors)
    check_located(refused, root)
    assert listed == [str(e) for e in refused.errors]
    return None


# --------------------------------------------------------------------------------------------------
# strategies: mutations, text, queries, command lines


def _paths(data: object, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(data, dict):
        for key, value in data.items():
            out.extend(_paths(value, (*here, key)))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.extend(_paths(value, (*here, i)))
    return out


def _replace(data: Any, path: tuple[Any, ...], new: Any, *, delete: bool = False) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        copy = dict(data)
        if delete and not rest:
            del copy[head]
        else:
            copy[head] = _replace(data[head], rest, new, delete=delete)
        return copy
    copy_list = list(data)
    if delete and not rest:
        del copy_list[head]
    else:
        copy_list[head] = _replace(data[head], rest, new, delete=delete)
    return copy_list


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(["", "no", "1.10", ">=80", "[80, 70)", "gqa", "sm_12x", "~"]),
)
ANY_VALUE = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                          max_size=3),
    max_leaves=6,
)
SNIPPETS = ["\t", "\x00", "\x07", "\ufeff", "&a ", "*a", "!!python/object/apply:os.system ['true']",
            "<<: *a\n", "? ", "- ", "{", "}", "[", "]", ": ", "\n", "'", '"', "#", "|", ">", "%YAML 1.1\n",
            "---\n", "...\n", "!!set ", "!include ", "0x" + "f" * 30, "9" * 5000, "  " * 40]


@st.composite
def data_mutations(draw: st.DrawFn, files: dict[str, dict[str, Any]]) -> dict[str, str | bytes]:
    """Delete a key, swap a value for another of any type, or rename a key, in one file's data."""
    name = draw(st.sampled_from(sorted(files)))
    data = files[name]
    path = draw(st.sampled_from(_paths(data)))
    kind = draw(st.sampled_from(["delete", "swap", "rename"]))
    if kind == "delete" and path:
        data = _replace(data, path, None, delete=True)
    elif kind == "rename" and path and isinstance(path[-1], str):
        new_key = draw(st.one_of(st.text(max_size=8), st.sampled_from(["grnat", "rulez", "Sm", "not"])))
        data = _replace(data, path[:-1], _rename(_get(data, path[:-1]), path[-1], new_key))
    else:
        data = _replace(data, path, draw(ANY_VALUE))
    out: dict[str, str | bytes] = {k: _dump(v) for k, v in files.items()}
    out[name] = _dump(data)
    return out


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def _rename(mapping: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {(new if k == old else k): v for k, v in mapping.items()}


@st.composite
def text_mutations(draw: st.DrawFn, files: dict[str, dict[str, Any]]) -> dict[str, str | bytes]:
    """Flip bytes, cut, insert hostile snippets or duplicate a line in one file's text."""
    out: dict[str, str | bytes] = {k: _dump(v) for k, v in files.items()}
    name = draw(st.sampled_from(sorted(files)))
    raw = bytearray(str(out[name]).encode("utf-8"))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "duplicate", "truncate"]))
        pos = draw(st.integers(0, max(len(raw) - 1, 0)))
        if kind == "flip" and raw:
            raw[pos] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del raw[pos:pos + draw(st.integers(1, 20))]
        elif kind == "insert":
            raw[pos:pos] = draw(st.sampled_from(SNIPPETS)).encode("utf-8")
        elif kind == "duplicate":
            lines = bytes(raw).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])
            raw = bytearray(b"\n".join(lines))
        else:
            del raw[pos:]
    out[name] = bytes(raw)
    return out


YAMLISH = st.text(
    alphabet=st.sampled_from([*"ab1-:[]{},&*!|>'\"#?%@` \n\t\\.~", "\x00", "\u2028", "\ufeff", "é"]),
    max_size=80,
)

KEYWORD_NAMES = st.sampled_from(["sm", "attention", "spec_dec", "kv", "beam", "causal", "smm", "x", "_"])
QUERY_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from([80, 90, 120, 121, 1, 4]),
    st.text(max_size=8), st.sampled_from(["gqa", "mla", "fp8", "one_model", "none", "*"]),
    st.floats(allow_nan=True), st.lists(st.integers(), max_size=2), st.just(ANY), st.binary(max_size=3),
)


@st.composite
def raw_queries(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    kernel = draw(st.one_of(st.none(), st.sampled_from(["xqa", "fallback", "nope"]), st.text(max_size=6),
                            st.integers()))
    model = draw(st.one_of(st.none(), st.sampled_from(["llama", "dsv3", "lama"]), st.integers()))
    axes = draw(st.dictionaries(st.one_of(KEYWORD_NAMES, st.from_regex(r"\A[a-z_]{1,6}\Z")),
                                QUERY_VALUES, max_size=5))
    axes.pop("model", None)  # KernelQuery(model=...) is the model; a second one is a Python TypeError
    return kernel, model, axes


# --------------------------------------------------------------------------------------------------
# targets


SMALL_FILES: dict[str, str | bytes] = {"axes.yaml": SMALL_AXES, "kernels/test.yaml": SMALL_KERNELS}
_small: list[capmatrix.Matrix] = []


def small_matrix() -> capmatrix.Matrix:
    """The hand-written test matrix of conftest.py, written and loaded once per process."""
    if not _small:  # Hypothesis cannot use function-scoped fixtures: a module-level cache
        tmp = tempfile.mkdtemp(prefix="capmatrix-fuzz-small-")
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        root = Path(tmp) / "caps"
        for name, content in SMALL_FILES.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(str(content), encoding="utf-8")
        _small.append(capmatrix.load(root))
    return _small[0]


@contextlib.contextmanager
def chdir(path: str) -> Iterator[None]:
    """``contextlib.chdir`` for Python 3.10."""
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def _naive_contains(raw: Any, spec: dict[str, Any], value: Any) -> bool:
    """Whether a condition as written in YAML admits ``value``: an oracle independent of the loader."""
    negated = isinstance(raw, dict)
    body = raw["not"] if negated else raw
    hit = False
    for item in body if isinstance(body, list) else [body]:
        if isinstance(item, str) and spec["type"] == "int":
            if item in spec.get("families", {}):
                hit = hit or value in spec["families"][item]
            elif item.startswith(">="):
                hit = hit or value >= int(item[2:])
            elif item.startswith("<"):
                hit = hit or value < int(item[1:])
            else:  # "[low, high)"
                low, high = (int(x) for x in item[1:-1].split(","))
                hit = hit or low <= value < high
        else:
            hit = hit or (item == value and type(item) is type(value))
    return hit != negated


def _naive_verdict(kernel: dict[str, Any], axes: dict[str, Any], values: dict[str, Any]) -> str:
    def applies(region: dict[str, Any]) -> bool:
        return all(_naive_contains(cond, axes[a], values[a]) for a, cond in region.items())

    granted = any(applies(r["grant"]) for r in kernel["rules"] if "grant" in r)
    excluded = any(applies(r["exclude"]) for r in kernel["rules"] if "exclude" in r)
    return "supported" if granted and not excluded else "unsupported"


@FUZZ
@given(matrices(), st.data())
def test_generated_matrices_load_and_answer(files: dict[str, dict[str, Any]], data: st.DataObject) -> None:
    """A schema-valid generated matrix loads cleanly, and answers fully specified queries exactly as
    a naive reading of its YAML does; open queries and role selections answer without error."""
    TRIED["generated"] += 1
    with written({k: _dump(v) for k, v in files.items()}) as root:
        matrix = capmatrix.load(root)
        assert run(["validate", str(root)], io.StringIO(), io.StringIO()) == 0
    axes = files["axes.yaml"]["axes"]
    kernels = files["kernels/gen.yaml"]["kernels"]
    for _ in range(3):
        values = {a: data.draw(st.sampled_from(_values(spec)), label=a) for a, spec in axes.items()}
        for kernel in matrix.kernels:
            r = capmatrix.resolve(KernelQuery(kernel, **values), matrix)
            assert str(r.verdict) == _naive_verdict(kernels[kernel], axes, values), (kernel, values)
        for role in matrix.roles:
            s = capmatrix.select(role, KernelQuery(**values), matrix)
            assert s.kernel is None or s.kernel in matrix.roles[role].candidates
    opened = data.draw(st.lists(st.sampled_from(sorted(axes)), unique=True), label="open axes")
    query = {a: (ANY if a in opened else _values(spec)[0]) for a, spec in axes.items()}
    for kernel in matrix.kernels:
        open_r = capmatrix.resolve(KernelQuery(kernel, **query), matrix)  # type: ignore[arg-type]
        json.dumps(open_r.as_dict(), default=str)
        if not opened:
            assert open_r.verdict is not capmatrix.Verdict.DEPENDS


LAYOUT_NAMES = ["a", "kernels", "x.yaml", "y.yml", "z.txt", ".hidden.yaml", "expect", "deep"]


@st.composite
def layouts(draw: st.DrawFn) -> list[tuple[str, str, int]]:
    """Operations that build a hostile directory tree next to the small matrix."""
    kinds = ["file", "broken_file", "dir", "link_up", "link_root", "link_self", "dangling", "fifo",
             "dev_zero", "empty"]
    return draw(st.lists(st.tuples(st.sampled_from(kinds), st.sampled_from(LAYOUT_NAMES),
                                   st.integers(0, 7)), max_size=8))


def _build_layout(root: Path, ops: list[tuple[str, str, int]]) -> None:
    dirs = [root]
    for kind, name, pick in ops:
        here = dirs[pick % len(dirs)]
        path = here / name
        if path.exists() or path.is_symlink():
            continue
        if kind == "dir":
            path.mkdir()
            dirs.append(path)
        elif kind == "file":
            path.write_text("models:\n  extra_model:\n    description: d\n    axes: {}\n    source: s\n",
                            encoding="utf-8")
        elif kind == "broken_file":
            path.write_text("kernels: [\n", encoding="utf-8")
        elif kind == "empty":
            path.write_bytes(b"")
        elif kind == "link_up":
            path.symlink_to("..", target_is_directory=True)
        elif kind == "link_root":
            path.symlink_to(root, target_is_directory=True)
        elif kind == "link_self":
            path.symlink_to(name)
        elif kind == "dangling":
            path.symlink_to("no-such-target")
        elif kind == "fifo" and hasattr(os, "mkfifo"):
            os.mkfifo(path)
        elif kind == "dev_zero" and Path("/dev/zero").exists():
            path.symlink_to("/dev/zero")


@FUZZ
@given(layouts())
def test_hostile_directory_layouts(ops: list[tuple[str, str, int]]) -> None:
    """Symlink loops, FIFOs, devices, dangling links, odd names: load answers or locates, never hangs."""
    TRIED["layout"] += 1
    with written(SMALL_FILES) as root:
        _build_layout(root, ops)
        load_or_locate(root)


@FUZZ
@given(matrices().flatmap(data_mutations))
def test_data_mutations_give_located_errors(files: dict[str, str | bytes]) -> None:
    """Deleted keys, swapped types, renamed keys: the matrix loads or every error is located."""
    TRIED["data-mutation"] += 1
    with written(files) as root:
        load_or_locate(root)


@FUZZ
@given(matrices().flatmap(text_mutations))
def test_text_mutations_give_located_errors(files: dict[str, str | bytes]) -> None:
    """Byte flips, cuts, hostile snippets: the matrix loads or every error is located."""
    TRIED["text-mutation"] += 1
    with written(files) as root:
        load_or_locate(root)
        out, err = io.StringIO(), io.StringIO()
        code = run(["validate", str(root)], out, err)
        assert code in {0, 2}
        assert (code == 2) == bool(err.getvalue())


@FUZZ
@given(YAMLISH)
def test_yaml_like_text(text: str) -> None:
    """Arbitrary YAML-ish text: parsed, or refused with a CapabilityErrors located inside the text."""
    TRIED["yaml-text"] += 1
    try:
        _yaml.read_text(text, "fuzz.yaml")
    except CapabilityErrors as exc:
        lines = text.split("\n")
        for error in exc.errors:
            assert error.path == "fuzz.yaml"
            if error.line is not None:
                assert 1 <= error.line <= len(lines) + 1
                assert error.column is not None
                assert error.column >= 1


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_as_a_capability_file(raw: bytes) -> None:
    """Any bytes next to the small matrix: it loads or every error is located."""
    TRIED["bytes"] += 1
    with written({**SMALL_FILES, "fuzz.yaml": raw}) as root:
        load_or_locate(root)


@FUZZ
@given(raw_queries(), st.one_of(st.sampled_from(["gen", "nope"]), st.none(), st.integers(),
                                st.text(max_size=4)))
def test_random_queries(query: tuple[Any, Any, dict[str, Any]], role: Any) -> None:
    """Random kernels, models, axis names, values and types: an answer or a CapmatrixError."""
    TRIED["query"] += 1
    kernel, model, axes = query
    matrix = small_matrix()
    try:
        q = KernelQuery(kernel, model=model, **axes)
    except CapmatrixError:
        return
    for call in (
        lambda: capmatrix.resolve(q, matrix),
        lambda: capmatrix.select(role, q.with_kernel(None), matrix),
        lambda: bind(str(kernel), dynamic=["beam"], model=model, matrix=matrix, strict=False,
                     **{k: v for k, v in axes.items() if k != "beam"}),
    ):
        try:
            answer = call()
        except CapmatrixError as exc:
            message = str(exc)
            assert message
            continue
        if isinstance(answer, capmatrix.Resolution | capmatrix.Selection):
            json.dumps(answer.as_dict(), default=str)
            assert str(answer.verdict) in {"supported", "unsupported", "depends"}


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except Exception:  # noqa: BLE001 - hostile __hash__ or unhashable containers
        return False
    return True


# --------------------------------------------------------------------------------------------------
# the Python API boundary: KernelQuery, query_from_hf_config, bind with hostile Python values


class _Hostile:
    """An object whose dunders a careless caller might hit raise (repr aside: Hypothesis prints it)."""

    def __repr__(self) -> str:
        return "_Hostile()"

    def __bool__(self) -> bool:
        raise RuntimeError("bool")

    def __str__(self) -> str:
        raise RuntimeError("str")

    def __index__(self) -> int:
        raise RuntimeError("index")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    __hash__ = object.__hash__


def _disguise(value: Any, how: int) -> Any:
    """``value`` as one of the Python values that stand for it (see conftest.disguises)."""
    found = disguises(value)
    return found[how % len(found)]


PLAIN_VALUES = st.one_of(
    st.sampled_from([80, 90, 100, 103, 120, 121, 1, 4, 0, -1, 2**62, "mha", "gqa", "mla", "none",
                     "one_model", "bf16", "fp8", "", "x"]),
    st.booleans(), st.integers(-(2**63) + 1, 2**63 - 1), st.text(max_size=5),
)
JUNK = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**80), 2**80), st.floats(allow_nan=True),
              st.text(max_size=6), st.binary(max_size=3), st.just(_Hostile()), st.just(ANY),
              st.just(float("inf"))),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=4), inner, max_size=3),
                            st.tuples(inner, inner), st.frozensets(st.integers(), max_size=2)),
    max_leaves=6,
)
SMALL_AXIS = st.sampled_from(["sm", "attention", "spec_dec", "kv", "beam", "causal"])


@FUZZ
@given(st.dictionaries(SMALL_AXIS, PLAIN_VALUES, max_size=6), st.integers(0, 5),
       st.dictionaries(SMALL_AXIS, JUNK, max_size=2), st.sampled_from(["xqa", "fallback"]))
def test_api_query_values(
    plain: dict[str, Any], how: int, junk: dict[str, Any], kernel: str
) -> None:
    """Disguised values (enum members, subclasses, integer-likes) answer exactly as the plain ones;
    junk values are refused with InvalidQuery; nothing else escapes."""
    TRIED["api-query"] += 1
    matrix = small_matrix()
    disguised = {k: _disguise(v, how) for k, v in plain.items()}

    def answer(axes: dict[str, Any]) -> Callable[[], Any]:
        def call() -> tuple[KernelQuery, capmatrix.Verdict]:
            q = KernelQuery(kernel, **axes)
            return q, capmatrix.resolve(q, matrix).verdict

        return call

    assert _attempt(answer(plain)) == _attempt(answer(disguised))
    outcome, got = _attempt(lambda: capmatrix.resolve(KernelQuery(kernel, **{**plain, **junk}), matrix))
    if outcome == "ok":
        assert str(got.verdict) in {"supported", "unsupported", "depends"}
        json.dumps(got.as_dict(), default=str)
    else:
        assert got


HF_BASES = [
    {"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
     "torch_dtype": "bfloat16"},
    {"model_type": "deepseek_v3", "num_attention_heads": 128, "kv_lora_rank": 512,
     "qk_rope_head_dim": 64, "torch_dtype": "bfloat16"},
    {"model_type": "llava", "text_config": {"model_type": "llama", "num_attention_heads": 32,
                                            "num_key_value_heads": 8, "hidden_size": 4096}},
]
HF_FIELDS = st.sampled_from([
    "num_attention_heads", "n_head", "num_key_value_heads", "head_dim", "hidden_size", "kv_lora_rank",
    "qk_rope_head_dim", "torch_dtype", "sliding_window", "use_sliding_window", "multi_query",
    "model_type", "_name_or_path", "text_config",
])


@FUZZ
@given(st.one_of(
    st.tuples(st.just("junk"), JUNK),
    st.tuples(st.just("mutated"), st.tuples(st.sampled_from(HF_BASES),
                                            st.dictionaries(HF_FIELDS, JUNK, max_size=4), st.booleans())),
), st.dictionaries(SMALL_AXIS, PLAIN_VALUES, max_size=2))
def test_api_query_from_hf_config(drawn: tuple[str, Any], overrides: dict[str, Any]) -> None:
    """Junk configs, junk fields (top or text_config), odd overrides: a query or a CapmatrixError;
    the same config answers the same query twice."""
    TRIED["api-hf-config"] += 1
    kind, config = drawn
    if kind == "mutated":
        base, junk, nested = config
        config = {"model_type": "x", "text_config": {**base, **junk}} if nested else {**base, **junk}
    matrix = capmatrix.default_matrix()
    first = _attempt(lambda: query_from_hf_config(config, "xqa", matrix=matrix, **overrides))
    again = _attempt(lambda: query_from_hf_config(config, "xqa", matrix=matrix, **overrides))
    assert first == again
    if first[0] == "ok":
        q = first[1]
        assert q.axes or q.model is not None
        _attempt(lambda: capmatrix.resolve(q, matrix))


@FUZZ
@given(st.dictionaries(st.sampled_from(["sm", "attention", "spec_dec", "kv", "causal"]), PLAIN_VALUES,
                       max_size=5),
       st.integers(0, 5),
       st.one_of(st.just(["beam"]), st.just(("beam", "causal")), JUNK,
                 st.dictionaries(SMALL_AXIS, st.dictionaries(JUNK.filter(_hashable), PLAIN_VALUES,
                                                             max_size=2), max_size=2)),
       st.booleans())
def test_api_bind(static: dict[str, Any], how: int, dynamic: Any, strict: bool) -> None:
    """bind with disguised or junk statics and junk dynamic specs: a BoundDecision or a
    CapmatrixError; disguised statics bind exactly as plain ones."""
    TRIED["api-bind"] += 1
    matrix = small_matrix()

    def bound(axes: dict[str, Any]) -> Callable[[], Any]:
        return lambda: dict(bind("xqa", dynamic=dynamic, matrix=matrix, strict=strict, **axes).table)

    disguised = {k: _disguise(v, how) for k, v in static.items()}
    assert _attempt(bound(static)) == _attempt(bound(disguised))


def _attempt(call: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", the answer) or ("refused", the error's type and text); any other exception escapes."""
    try:
        return ("ok", call())
    except CapmatrixError as exc:
        return ("refused", f"{type(exc).__name__}: {exc}")


ARG_TOKENS = st.one_of(
    st.sampled_from(["query", "select", "validate", "xqa", "fallback", "gen", "nope", "--sm", "--attention",
                     "--spec-dec", "--kv", "--beam", "--causal", "--model", "--json", "--matrix", "-h",
                     "--help", "120", "121", "abc", "*", "gqa", "mla", "true", "maybe", "llama", "--",
                     "--sm=90", "-x", "", " ", "9" * 30, "--gpu", "all", "H100,B200", ",", "T4,",
                     "sglang_attention", "deepseek_v3", "--sglang-topk", "--sglang-backend"]),
    st.text(alphabet=st.characters(blacklist_characters="/.\x00", blacklist_categories=["Cs"]), max_size=6),
)


@FUZZ
@given(st.lists(ARG_TOKENS, max_size=7), st.booleans())
def test_random_command_lines(argv: list[str], with_matrix: bool) -> None:
    """Random argument lists: an exit status of 0-3 and, for 2, a message on stderr; never a traceback."""
    TRIED["cli"] += 1
    matrix_root = Path(small_matrix().root)
    if with_matrix and argv[:1] in (["query"], ["select"]):
        argv = [*argv, "--matrix", str(matrix_root)]
    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as empty, chdir(empty):
        code = run(argv, out, err)
    assert code in {0, 1, 2, 3}
    assert "Traceback" not in err.getvalue()
    if code == 2 and argv:
        assert err.getvalue() or out.getvalue()


TARGETS: list[tuple[str, Callable[[], None]]] = [
    ("generated", test_generated_matrices_load_and_answer),
    ("layout", test_hostile_directory_layouts),
    ("data-mutation", test_data_mutations_give_located_errors),
    ("text-mutation", test_text_mutations_give_located_errors),
    ("yaml-text", test_yaml_like_text),
    ("bytes", test_random_bytes_as_a_capability_file),
    ("query", test_random_queries),
    ("cli", test_random_command_lines),
    ("api-query", test_api_query_values),
    ("api-hf-config", test_api_query_from_hf_config),
    ("api-bind", test_api_bind),
]
