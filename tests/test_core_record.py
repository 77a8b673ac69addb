"""capmatrix._core.record: frozen slotted value types that behave as the stdlib's frozen dataclasses."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from capmatrix._core.record import field, record, replace


@record
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list, compare=False)
    note: str = field(default="", repr=False)


@record(kw_only=True)
class Named:
    name: str
    size: int = 1
    memo: dict[int, int] = field(default_factory=dict, init=False, compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class StdPoint:
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list, compare=False)
    note: str = dataclasses.field(default="", repr=False)


def test_init_defaults_and_factories() -> None:
    p = Point(1)
    assert (p.x, p.y, p.tags, p.note) == (1, 0, [], "")
    assert Point(1).tags is not Point(1).tags  # a fresh value per instance
    assert Point(1, 2, ["a"], "n").tags == ["a"]
    assert Point(x=3, y=4).y == 4
    n = Named(name="a")
    assert (n.name, n.size, n.memo) == ("a", 1, {})
    with pytest.raises(TypeError):
        Named("a")  # type: ignore[call-arg]  # keyword-only
    with pytest.raises(TypeError):
        Named(name="a", memo={})  # type: ignore[call-arg]  # not an __init__ argument
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]


def test_repr_eq_hash_as_a_frozen_dataclass() -> None:
    ours, std = Point(1, 2, ["t"], "hidden"), StdPoint(1, 2, ["t"], "hidden")
    assert repr(ours) == repr(std).replace("StdPoint", "Point")
    assert "memo" not in repr(Named(name="a"))
    assert Point(1, 2, ["a"]) == Point(1, 2, ["b"])  # tags are not compared
    assert Point(1, 2) != Point(1, 3)
    assert Point(1) != StdPoint(1)  # type: ignore[comparison-overlap]
    assert Point(1).__eq__(object()) is NotImplemented
    assert hash(Point(1, 2, ["a"])) == hash(Point(1, 2, ["b"]))
    assert len({Point(1), Point(1), Point(2)}) == 2
    assert Named(name="a") == Named(name="a")
    assert hash(Named(name="a")) == hash(Named(name="a"))


def test_frozen_and_slotted() -> None:
    p = Point(1)
    with pytest.raises(AttributeError, match="immutable"):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del p.x
    with pytest.raises(AttributeError):
        p.other = 1  # type: ignore[attr-defined]
    assert not hasattr(p, "__dict__")
    assert Point.__slots__ == ("x", "y", "tags", "note")  # type: ignore[attr-defined]


def test_pickle_and_copy_round_trip() -> None:
    p = Point(1, 2, ["a"], "n")
    for back in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
        assert back == p
        assert (back.tags, back.note) == (["a"], "n")
    n = Named(name="a", size=3)
    n.memo[1] = 2
    assert pickle.loads(pickle.dumps(n)).memo == {1: 2}


def test_replace_ours_and_the_stdlib() -> None:
    p = Point(1, 2, ["a"])
    assert replace(p, y=5) == Point(1, 5)
    assert dataclasses.replace(p, y=5) == Point(1, 5)
    assert replace(Named(name="a"), size=2).size == 2
    with pytest.raises(ValueError, match="memo"):
        replace(Named(name="a"), memo={})
    with pytest.raises(ValueError, match="memo"):
        dataclasses.replace(Named(name="a"), memo={})


def test_stdlib_introspection() -> None:
    assert dataclasses.is_dataclass(Point(1))
    kind: type = Point  # a plain type, so that the check below does not narrow Point itself
    assert dataclasses.is_dataclass(kind)
    assert [f.name for f in dataclasses.fields(Point)] == ["x", "y", "tags", "note"]
    assert [f.name for f in dataclasses.fields(Named(name="a"))] == ["name", "size", "memo"]
    assert not dataclasses.fields(Named)[2].init
    assert dataclasses.asdict(Point(1, 2, ["a"])) == {"x": 1, "y": 2, "tags": ["a"], "note": ""}


def test_match_args() -> None:
    match Point(1, 2):
        case Point(x, y):
            assert (x, y) == (1, 2)
        case _:  # pragma: no cover - the case above matches
            pytest.fail("no match")
    assert Named.__match_args__ == ()


def test_own_methods_are_kept() -> None:
    @record
    class Loose:
        a: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Loose)

        def __hash__(self) -> int:
            return 7

    assert Loose(1) == Loose(2)
    assert hash(Loose(1)) == 7


def test_bad_declarations() -> None:
    with pytest.raises(TypeError, match="without a default follows"):
        @record
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]

    with pytest.raises(ValueError, match="both default"):
        field(default=1, default_factory=list)
    with pytest.raises(TypeError, match="derive"):
        @record
        class Child(Point):
            z: int = 0


def test_a_cached_load_imports_no_dataclasses(tmp_path: Path) -> None:
    code = ("import sys, capmatrix; capmatrix.load(); "
            "print(sorted(m for m in ('dataclasses', 'inspect', 'typing') if m in sys.modules))")
    env = {**os.environ, "CAPMATRIX_CACHE": "on", "CAPMATRIX_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
            for _ in range(2)]
    assert runs[1].stdout.strip() == "[]"  # the second reads the entry the first wrote


def test_a_load_the_cache_misses_imports_no_dataclasses_typing_or_pathlib() -> None:
    """Every edit of a capability file is a cache miss (a pre-commit hook's usual run): its path
    parses and validates, with records and plain paths, none of these modules."""
    code = ("import sys, capmatrix; capmatrix.load(); print(sorted(m for m in "
            "('dataclasses', 'inspect', 'typing', 'pathlib') if m in sys.modules))")
    env = {**os.environ, "CAPMATRIX_CACHE": "off"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert run.stdout.strip() == "[]"


@pytest.mark.parametrize("cache", ["off", "on"])
def test_a_cli_query_imports_no_dataclasses_or_typing(cache: str, tmp_path: Path) -> None:
    code = ("import sys\nfrom capmatrix.authoring.cli._main import main\n"
            "status = main(['query', 'xqa', '--sm', '120', '--model', 'llama', '--spec-dec', 'one_model'])\n"
            "print(status, sorted(m for m in ('dataclasses', 'inspect', 'typing') if m in sys.modules))")
    env = {**os.environ, "CAPMATRIX_CACHE": cache, "CAPMATRIX_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
            for _ in range(2)]
    assert runs[1].stdout.strip().splitlines()[-1] == "0 []"  # supported, and none of them imported
