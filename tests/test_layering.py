"""The package's layout and layers: the runtime apart from the authoring side, imports pointing down only.

Two folders say which side a module is on: everything under ``capmatrix/authoring/`` is authoring, every
other module of the package is the runtime (what an engine loads), standard library only. Inside both,
imports point down a rank table, with no circles; argparse and torch stay at the edges. Read from the
source with ``ast`` (every import counts: module level, in functions and under ``TYPE_CHECKING``);
docs/architecture.md draws the same map.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "capmatrix"
#: The authoring side's folder: nothing outside it imports it where the importer is imported.
AUTHORING = "capmatrix.authoring"

#: Modules by rank, lowest first: a module may import only from a lower rank. The wings (WING_RANK) may
#: import the whole core but not each other; the command line may import everything. A package's
#: ``__init__`` that only documents its folder has rank 0.
CORE: dict[str, int] = {
    # the runtime: capmatrix/, capmatrix/_core/ (decision mechanics), capmatrix/_shipped/ (the shipped matrix)
    "capmatrix._core": 0,
    "capmatrix._shipped": 0,
    "capmatrix.errors": 0,
    "capmatrix._core.nesting": 0,
    "capmatrix._core.classes": 1,
    "capmatrix._core.record": 1,
    "capmatrix.model": 2,
    "capmatrix.query": 3,
    "capmatrix.regions": 3,
    "capmatrix._core.answers": 4,
    "capmatrix._core.partition": 4,
    "capmatrix._core.tables": 4,
    "capmatrix.matrix": 4,
    "capmatrix._core.bitsets": 5,
    "capmatrix._shipped.payload": 5,
    "capmatrix._core.explain": 6,
    "capmatrix.resolver": 7,
    "capmatrix._core.start": 8,
    "capmatrix._shipped.artifact": 8,
    "capmatrix.releases": 8,
    "capmatrix._shipped.default": 11,
    "capmatrix": 12,
    # the authoring side: capmatrix/authoring/ (reading, validation, cache, suggestions, gate, export)
    "capmatrix.authoring": 0,
    "capmatrix.authoring._validate": 0,
    "capmatrix.authoring._yaml": 0,
    "capmatrix.authoring._atomic": 1,
    "capmatrix.authoring._heap": 1,
    "capmatrix.authoring._files": 1,
    "capmatrix.authoring._validate.hints": 1,
    "capmatrix.authoring._versions": 1,
    "capmatrix.authoring._yaml.limits": 2,
    "capmatrix.authoring._yaml.source": 2,
    "capmatrix.authoring._yaml.build": 3,
    "capmatrix.authoring._yaml.compose": 3,
    "capmatrix.authoring._yaml.fast": 3,
    "capmatrix.authoring._validate.fastschema": 5,
    "capmatrix.authoring._yaml.read": 5,
    "capmatrix.authoring._cache": 9,
    "capmatrix.authoring.schema": 6,
    "capmatrix.authoring._validate.values": 7,
    "capmatrix.authoring._validate.composition": 7,
    "capmatrix.authoring._validate.references": 8,
    "capmatrix.authoring._suggest": 9,
    "capmatrix.authoring.loader": 10,
    "capmatrix.authoring.evidence": 12,
    "capmatrix.authoring.export": 13,
    "capmatrix.authoring.probe": 13,
}
WINGS = ("capmatrix.engine", "capmatrix.authoring.analysis", "capmatrix.authoring.render",
         "capmatrix.authoring.codegen")
#: The engines' records are compared with the adapters (a wing) and run by the data gate (``capmatrix
#: test``), which runs every wing's oracle: above the wings, below the command line.
WING_RANK, RECORDS_RANK, GATE_RANK, CLI_RANK = 14, 15, 16, 17
#: Imports inside functions are allowed only for these (they keep `import capmatrix` light), and, in
#: the loader, the validation layers, and pathlib, re and json, which a load the cache answers never needs.
LAZY_OK = ("torch", "yaml", "jsonschema", "capmatrix.authoring._yaml.read", "difflib", "importlib.metadata",
           "dataclasses", "pathlib", "re", "json")
LOADER_LAZY_OK = ("capmatrix.authoring._validate.hints", "capmatrix.authoring._validate.references",
                  "capmatrix.authoring._validate.values", "capmatrix.authoring.schema")
#: Where the runtime reaches the authoring side, only inside the functions that need it: the face's
#: build of the shipped matrix from YAML in a checkout, a reload of another directory (the loader), and
#: the suggestion search.
AUTHORING_DOORS: dict[str, frozenset[str]] = {
    "capmatrix._shipped.default": frozenset({"capmatrix.authoring.loader", "capmatrix.authoring._suggest"}),
}
#: The public names ``capmatrix`` imports on first use from the authoring side (its ``_WHERE`` table).
FACE_AUTHORING = frozenset({"Suggestion", "iter_problems", "load"})
#: ``python -m capmatrix``: the command line's door, at the top only because Python looks for it there.
MAIN = "capmatrix.__main__"


def _authoring(module: str) -> bool:
    """Whether ``module`` is on the authoring side: in the folder ``capmatrix/authoring/``."""
    return module == AUTHORING or module.startswith(AUTHORING + ".")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()
#: The runtime: every module outside ``capmatrix/authoring/`` (but ``__main__``), which is what an engine's
#: path (import, the shipped matrix, resolve, select, the adapters) may load: the standard library only.
RUNTIME = frozenset(name for name in MODULES if not _authoring(name) and name != MAIN)


def _wing(name: str) -> str | None:
    wings = (*WINGS, "capmatrix.authoring.cli")
    return next((w for w in wings if name == w or name.startswith(w + ".")), None)


def _rank(name: str) -> int:
    if name == MAIN:
        return CLI_RANK + 1
    if name == "capmatrix.authoring.engine_records":
        return RECORDS_RANK
    wing = _wing(name)
    if wing == "capmatrix.authoring.cli":
        return CLI_RANK
    if wing is not None:
        return WING_RANK
    if name == "capmatrix.authoring.gate":
        return GATE_RANK
    return CORE[name]


def _target(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _source(name: str) -> str:
    return MODULES[name].read_text(encoding="utf-8")


def _imports(name: str, source: str | None = None) -> list[tuple[str, int, bool]]:
    """``(imported module, line, inside a function)`` for every import of module ``name``.

    Read from its file, or from ``source`` given as its text (a rule's own test).
    """
    tree = ast.parse(_source(name) if source is None else source)
    is_package = name in MODULES and MODULES[name].name == "__init__.py"
    lazy_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lazy_lines.update(n.lineno for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
    out: list[tuple[str, int, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno, node.lineno in lazy_lines) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                out.append((full if full in MODULES else module, node.lineno, node.lineno in lazy_lines))
    return out


def _edges() -> list[tuple[str, str, int]]:
    edges = []
    for name in MODULES:
        for imported, line, _lazy in _imports(name):
            target = _target(imported) if imported.startswith("capmatrix") else None
            if target is not None and target != name and not name.startswith(target + "."):
                edges.append((name, target, line))
    return edges


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        _rank(name)  # raises KeyError for a core module missing from CORE


def test_imports_point_down() -> None:
    wrong = []
    for module, target, line in _edges():
        own, other = _wing(module), _wing(target)
        if own is not None and own == other:
            continue  # inside one wing; circles are caught below
        if _rank(target) >= _rank(module):
            wrong.append(f"{MODULES[module]}:{line}: {module} imports {target}")
    assert wrong == []


def test_layering_catches_an_upward_import() -> None:
    """The rank table itself: the loader sits above the resolver, the wings above the core."""
    loader, face = _rank("capmatrix.authoring.loader"), _rank("capmatrix._shipped.default")
    assert _rank("capmatrix.resolver") < loader < face
    html, check = _rank("capmatrix.authoring.render.html"), _rank("capmatrix.authoring.analysis._check")
    assert html == check < _rank("capmatrix.authoring.cli")
    assert ("capmatrix.authoring.loader", "capmatrix.resolver") in {(m, t) for m, t, _ in _edges()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle a depth-first walk of ``graph`` meets."""
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                circles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return circles


def test_no_import_circle() -> None:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for module, target, _line in _edges():
        graph[module].add(target)
    assert _circles(graph) == []


def test_lazy_imports_only_keep_import_light() -> None:
    found = [
        f"{MODULES[name].name}:{line}: {imported}"
        for name in MODULES
        for imported, line, lazy in _imports(name)
        if lazy and not any(imported == ok or imported.startswith(ok + ".") for ok in LAZY_OK)
        and not (name == "capmatrix.authoring.loader" and imported in LOADER_LAZY_OK)
        and imported not in AUTHORING_DOORS.get(name, ())
    ]
    assert found == []


def _type_only_lines(name: str, source: str | None = None) -> set[int]:
    """The lines of ``if TYPE_CHECKING:`` blocks of module ``name`` (imports for annotations only)."""
    tree = ast.parse(_source(name) if source is None else source)
    return {
        n.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for stmt in node.body
        for n in ast.walk(stmt)
        if isinstance(n, (ast.Import, ast.ImportFrom))
    }


def test_the_runtime_imports_only_the_runtime_at_module_level() -> None:
    """A runtime module imports, where it is imported, only runtime modules and the standard library."""
    stdlib = sys.stdlib_module_names
    type_only = {name: _type_only_lines(name) for name in RUNTIME}  # each module parsed once
    wrong = [
        f"{MODULES[name]}:{line}: {name} imports {imported}"
        for name in sorted(RUNTIME)
        for imported, line, lazy in _imports(name)
        if not lazy and line not in type_only[name] and (
            (imported.startswith("capmatrix") and _target(imported) not in RUNTIME)
            or (not imported.startswith("capmatrix") and imported.split(".")[0] not in stdlib)
        )
    ]
    assert wrong == []


def test_the_runtime_rule_catches_an_authoring_import() -> None:
    """The rule reads the real edges: the loader (authoring) imports the resolver (runtime), not back."""
    assert "capmatrix.authoring.loader" not in RUNTIME
    assert "capmatrix.resolver" in RUNTIME
    assert any(t == "capmatrix.authoring._cache" for m, t, _ in _edges() if m == "capmatrix.authoring.loader")
    type_only = _type_only_lines("capmatrix._shipped.default")
    typed = {i for i, line, _lazy in _imports("capmatrix._shipped.default") if line in type_only}
    assert "capmatrix.authoring._suggest" in typed
    assert all(_target(i) in RUNTIME for i, line, lazy in _imports("capmatrix._shipped.default")
               if i.startswith("capmatrix") and not lazy and line not in type_only)
    assert {i for i, _l, lazy in _imports("capmatrix._shipped.default") if lazy} == set(
        AUTHORING_DOORS["capmatrix._shipped.default"])


def _reaches_authoring(name: str, source: str | None = None) -> list[str]:
    """Where runtime module ``name`` imports the authoring side, but for annotations or at its doors."""
    type_only = _type_only_lines(name, source)
    doors = AUTHORING_DOORS.get(name, frozenset())
    found = []
    for imported, line, lazy in _imports(name, source):
        target = _target(imported) if imported.startswith("capmatrix") else None
        at_door = lazy and target in doors
        if target is not None and _authoring(target) and line not in type_only and not at_door:
            found.append(f"{name}:{line}: imports {target}")
    return found


def test_no_runtime_module_imports_the_authoring_folder() -> None:
    """Nothing outside ``capmatrix/authoring/`` imports anything in it, but at the declared doors."""
    assert [problem for name in sorted(RUNTIME) for problem in _reaches_authoring(name)] == []


def test_the_folder_rule_catches_a_runtime_import_of_the_authoring_side() -> None:
    eager = "from capmatrix.authoring.loader import load\n"
    module = "from capmatrix.authoring import _suggest\n"
    lazy = "def f():\n    from capmatrix.authoring.loader import load\n"
    typed = "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from capmatrix.authoring.loader import load\n"
    assert _reaches_authoring("capmatrix.resolver", eager) == [
        "capmatrix.resolver:1: imports capmatrix.authoring.loader"]
    assert _reaches_authoring("capmatrix.resolver", module) == [
        "capmatrix.resolver:1: imports capmatrix.authoring._suggest"]
    assert _reaches_authoring("capmatrix.resolver", lazy) != []  # not a door of the resolver
    assert _reaches_authoring("capmatrix._shipped.default", eager) != []  # a door opens only inside functions
    assert _reaches_authoring("capmatrix._shipped.default", lazy) == []
    assert _reaches_authoring("capmatrix.resolver", typed) == []


def test_the_folders_are_the_sides() -> None:
    """``ls capmatrix`` tells the sides apart: what the engines run is outside the authoring folder."""
    assert {"capmatrix", "capmatrix.resolver", "capmatrix._core.tables", "capmatrix._shipped.artifact",
            "capmatrix.engine.vllm", "capmatrix.engine.trtllm", "capmatrix.releases"} <= RUNTIME
    assert not {"capmatrix.authoring.loader", "capmatrix.authoring._yaml.read", "capmatrix.authoring.cli",
                "capmatrix.authoring.analysis", "capmatrix.authoring.engine_records"} & RUNTIME
    assert MAIN not in RUNTIME  # the command's door: `python -m capmatrix` runs the CLI
    assert {target for _i, target, _l in _edges() if _i == MAIN} == {"capmatrix.authoring.cli"}
    assert all(target.startswith(AUTHORING) for door in AUTHORING_DOORS.values() for target in door)
    assert set(AUTHORING_DOORS) <= RUNTIME


def test_the_face_names_only_its_documented_authoring_entries() -> None:
    """``capmatrix.load`` and friends come from the authoring side on first use; nothing else does."""
    tree = ast.parse(_source("capmatrix"))
    value = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "_WHERE" for t in node.targets))
    where: dict[str, str] = ast.literal_eval(value)
    assert set(where.values()) <= set(MODULES)
    assert {name for name, module in where.items() if _authoring(module)} == FACE_AUTHORING


#: The engine path, in a process where PyYAML, jsonschema and tabulate cannot be imported.
ENGINE_PATH = """
import json, sys

BLOCKED = ("yaml", "_yaml", "jsonschema", "jsonschema_specifications", "referencing", "tabulate")


class Blocker:  # a meta path finder (not importlib.abc's class: importing it imports typing)
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"blocked: {name}", name=name)
        return None


sys.meta_path.insert(0, Blocker())
import capmatrix
from capmatrix.engine import trtllm, vllm, sglang

answers = {
    "file": capmatrix.__file__,
    "resolve": capmatrix.resolve(capmatrix.KernelQuery("xqa", sm=121, model="llama",
                                                       spec_dec="one_model")).verdict.value,
    "select": capmatrix.select("trtllm_generation", capmatrix.KernelQuery(
        sm=120, model="deepseek_v3", phase="generation", kv_cache_dtype="fp8", dtype="fp8")).kernel,
    "bind_spec_dec": trtllm.bind_spec_dec(
        spec_dec="two_model", sm=90, is_mla=False, is_draft_model=True, use_chain_drafter=True,
        attention_backend="trtllm").need_table[True],
    "select_backend": vllm.select_backend(capability=(12, 0), head_size=576, dtype="bf16",
                                          kv_cache_dtype="fp8", block_size=None, use_mla=True,
                                          use_sparse=True),
    "sglang": sglang.resolve(capability=(12, 0), model=sglang.SGLangModel(
        "DeepseekV32ForCausalLM", mla=True, dsa=True)).attention_backend,
    "modules": sorted(m for m in sys.modules if m.startswith("capmatrix")),
    "third_party": sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED + ("torch",)),
    "slow_stdlib": sorted(m for m in ("dataclasses", "typing", "inspect") if m in sys.modules),
}
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as a wheel installs it: its modules and its compiled artifact, no YAML, no checkout."""
    sys.path.insert(0, str(PACKAGE.parent / "tools"))
    try:
        from prebuild_matrix import prebuild
    finally:
        sys.path.remove(str(PACKAGE.parent / "tools"))
    site = tmp_path_factory.mktemp("site")
    shutil.copytree(PACKAGE, site / "capmatrix",
                    ignore=shutil.ignore_patterns("__pycache__", "_matrix.json", "*.so", "_capabilities"))
    prebuild(site / "capmatrix" / "_matrix.json", package=site / "capmatrix")
    return site


def _engine_path(site: Path, cwd: Path) -> dict[str, object]:
    run = subprocess.run([sys.executable, "-c", ENGINE_PATH], capture_output=True, text=True, check=False,
                         cwd=cwd, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin",
                                       "CAPMATRIX_CACHE": "off"}, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    answers: dict[str, object] = json.loads(run.stdout)
    return answers


def test_the_engine_path_answers_without_third_parties_or_the_authoring_side(
    installed: Path, tmp_path: Path
) -> None:
    answers = _engine_path(installed, tmp_path)
    assert str(answers["file"]).startswith(str(installed))
    assert answers["third_party"] == []
    # Records (capmatrix._core.record) and the TYPE_CHECKING = False idiom keep these out of an engine's start
    # (dataclasses and what it imports: about 12 ms of CPU; typing: 2 ms).
    assert answers["slow_stdlib"] == []
    modules = answers["modules"]
    assert isinstance(modules, list)
    assert [m for m in modules if _authoring(m)] == []
    assert set(modules) <= RUNTIME
    # The same answers as the checkout's loader gives (the artifact is the matrix, not a copy of answers).
    import capmatrix
    from capmatrix.engine import sglang, trtllm, vllm

    matrix = capmatrix.load()
    assert answers["resolve"] == capmatrix.resolve(capmatrix.KernelQuery(
        "xqa", sm=121, model="llama", spec_dec="one_model"), matrix).verdict.value
    assert answers["select"] == capmatrix.select("trtllm_generation", capmatrix.KernelQuery(
        sm=120, model="deepseek_v3", phase="generation", kv_cache_dtype="fp8", dtype="fp8"), matrix).kernel
    assert answers["bind_spec_dec"] == trtllm.bind_spec_dec(
        spec_dec="two_model", sm=90, is_mla=False, is_draft_model=True, use_chain_drafter=True,
        attention_backend="trtllm", matrix=matrix).need_table[True]
    assert answers["select_backend"] == vllm.select_backend(
        capability=(12, 0), head_size=576, dtype="bf16", kv_cache_dtype="fp8", block_size=None,
        use_mla=True, use_sparse=True, matrix=matrix)
    assert answers["sglang"] == sglang.resolve(capability=(12, 0), model=sglang.SGLangModel(
        "DeepseekV32ForCausalLM", mla=True, dsa=True), matrix=matrix).attention_backend


def test_the_engine_path_check_fails_where_the_runtime_needs_the_loader(
    installed: Path, tmp_path: Path
) -> None:
    """Without its artifact the package falls back to the loader, which PyYAML's absence stops: the check
    above can fail."""
    bare = tmp_path / "bare"
    shutil.copytree(installed, bare)
    (bare / "capmatrix" / "_matrix.json").unlink()
    shutil.copytree(PACKAGE.parent / "capabilities", bare / "capmatrix" / "_capabilities")
    run = subprocess.run([sys.executable, "-c", ENGINE_PATH], capture_output=True, text=True, check=False,
                         cwd=tmp_path, env={"PYTHONPATH": str(bare), "PATH": "/usr/bin:/bin",
                                            "CAPMATRIX_CACHE": "off"}, timeout=120)
    assert run.returncode != 0
    assert "blocked: yaml" in run.stderr


def test_argparse_only_in_the_command_line() -> None:
    found = [
        name for name in MODULES
        if _wing(name) != "capmatrix.authoring.cli"
        and any(imported == "argparse" for imported, _line, _lazy in _imports(name))
    ]
    assert found == []


def test_torch_only_in_probe_and_engine() -> None:
    found = [
        name for name in MODULES
        if name != "capmatrix.authoring.probe" and _wing(name) != "capmatrix.engine"
        and any(imported.split(".")[0] == "torch" for imported, _line, _lazy in _imports(name))
    ]
    assert found == []


def test_benchmarks_have_no_import_circle() -> None:
    """The benchmark modules import one another one way (the report's pieces live in ``report``)."""
    folder = PACKAGE.parent / "benchmarks"
    graph: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        name = f"benchmarks.{path.stem}"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                if node.module == "benchmarks":
                    found.update(f"benchmarks.{a.name}" for a in node.names)
                elif node.module.startswith("benchmarks."):
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("benchmarks."))
        graph[name] = found - {name}
    assert "benchmarks.report" in graph
    assert _circles(graph) == []
