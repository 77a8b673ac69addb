"""The package's layers: imports point down only, no circles, argparse and torch stay at the edges.

Read from the source with ``ast`` (every import counts: module level, in functions and under
``TYPE_CHECKING``); docs/architecture.md draws the same layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "capmatrix"

#: Core modules, lowest first: a module may import only from a lower rank. The wings (rank 13) may
#: import the whole core but not each other; the command line (11) may import everything.
CORE: dict[str, int] = {
    "capmatrix.errors": 0,
    "capmatrix._atomic": 1,
    "capmatrix._files": 1,
    "capmatrix._hints": 1,
    "capmatrix._classes": 1,
    "capmatrix._record": 1,
    "capmatrix._versions": 1,
    "capmatrix._yaml_source": 2,
    "capmatrix._yaml_limits": 2,
    "capmatrix._yaml_build": 3,
    "capmatrix._yaml_compose": 3,
    "capmatrix._yaml_fast": 3,
    "capmatrix.model": 2,
    "capmatrix.query": 3,
    "capmatrix.regions": 3,
    "capmatrix._partition": 4,
    "capmatrix._tables": 4,
    "capmatrix.matrix": 4,
    "capmatrix._answers": 4,
    "capmatrix._compile": 5,
    "capmatrix._yaml": 5,
    "capmatrix._fastschema": 5,
    "capmatrix._cache_json": 5,
    "capmatrix._cache": 6,
    "capmatrix.schema": 6,
    "capmatrix._explain": 6,
    "capmatrix.resolver": 7,
    "capmatrix._values": 7,
    "capmatrix._references": 8,
    "capmatrix.releases": 8,
    "capmatrix.loader": 9,
    "capmatrix._suggest": 9,
    "capmatrix._default": 10,
    "capmatrix": 11,
    "capmatrix.evidence": 11,
    "capmatrix.probe": 12,
    "capmatrix.export": 12,
}
WINGS = ("capmatrix.engine", "capmatrix.analysis", "capmatrix.render", "capmatrix.codegen")
#: The data gate (``capmatrix.gate``) runs every wing's oracle: above the wings, below the command line.
WING_RANK, GATE_RANK, CLI_RANK = 13, 14, 15
#: Imports inside functions are allowed only for these (they keep `import capmatrix` light), and, in
#: the loader, the validation layers, and pathlib, re and json, which a load the cache answers never needs.
LAZY_OK = ("torch", "yaml", "jsonschema", "capmatrix._yaml", "difflib", "importlib.metadata", "dataclasses",
           "pathlib", "re", "json")
LOADER_LAZY_OK = ("capmatrix._hints", "capmatrix._references", "capmatrix._values", "capmatrix.schema")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _wing(name: str) -> str | None:
    return next((w for w in (*WINGS, "capmatrix.cli") if name == w or name.startswith(w + ".")), None)


def _rank(name: str) -> int:
    if name == "capmatrix.__main__":
        return CLI_RANK + 1
    wing = _wing(name)
    if wing == "capmatrix.cli":
        return CLI_RANK
    if wing is not None:
        return WING_RANK
    if name == "capmatrix.gate":
        return GATE_RANK
    return CORE[name]


def _target(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(name: str) -> list[tuple[str, int, bool]]:
    """``(imported module, line, inside a function)`` for every capmatrix or third-party import."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
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
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
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
    assert _rank("capmatrix.resolver") < _rank("capmatrix.loader") < _rank("capmatrix._default")
    assert _rank("capmatrix.render.html") == _rank("capmatrix.analysis._check") < _rank("capmatrix.cli")
    assert ("capmatrix.loader", "capmatrix.resolver") in {(m, t) for m, t, _ in _edges()}


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
        and not (name == "capmatrix.loader" and imported in LOADER_LAZY_OK)
    ]
    assert found == []


def test_argparse_only_in_the_command_line() -> None:
    found = [
        name for name in MODULES
        if _wing(name) != "capmatrix.cli"
        and any(imported == "argparse" for imported, _line, _lazy in _imports(name))
    ]
    assert found == []


def test_torch_only_in_probe_and_engine() -> None:
    found = [
        name for name in MODULES
        if name != "capmatrix.probe" and _wing(name) != "capmatrix.engine"
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
