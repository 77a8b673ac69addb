"""Where the time goes: the profile of each workload behind a target that a run did not meet.

Each workload runs once under cProfile in a fresh interpreter (imports included where the measurement
includes them). Time is reported by *stage* (the module a function belongs to) and by function, each
charged with its own time plus that of the C functions it calls directly (``str.split``, ``bin``,
libyaml's event reader ...): cProfile books those separately, but they are the caller's work.

This module imports only the standard library, so that a profiled child imports capmatrix inside the
profile.
"""

from __future__ import annotations

import json
import os
import pstats
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import cProfile

ROOT = Path(__file__).resolve().parent.parent
_STDLIB = sysconfig.get_paths()["stdlib"]
#: Rows listed per table: the stages and functions past these are summed into one "other" line.
TOP_STAGES = 8
TOP_FUNCTIONS = 10

Func = tuple[str, int, str]


def stage_of(func: Func) -> str:
    """The stage a profiled function belongs to: its package or capmatrix module."""
    path, _, name = func
    if path == "~":
        return "C functions called from the profiler"
    if path.startswith("<frozen importlib"):
        return "import machinery (finding, reading and initialising modules)"
    if path.startswith("<"):
        return "generated code (dataclass __init__, ...)"
    resolved = os.path.realpath(path)
    parts = Path(resolved).parts
    if "site-packages" in parts:  # first: a virtual environment may lie inside the checkout
        package = parts[parts.index("site-packages") + 1].removesuffix(".py")
        if package.startswith("_yaml"):
            package = "yaml"
        return "PyYAML (Python side)" if package == "yaml" else package
    root = str(ROOT) + os.sep
    if resolved.startswith(root):
        module = resolved[len(root):].removesuffix(".py").replace(os.sep, ".").removesuffix(".__init__")
        if name == "<module>":
            return f"module bodies at import ({module.split('.')[0]})"
        return module
    if resolved.startswith(_STDLIB):
        return "stdlib " + Path(resolved).stem
    return Path(resolved).stem


def summarise(profile: cProfile.Profile) -> dict[str, Any]:
    """Per stage and per function: seconds of own time plus that of the C functions each calls."""
    stats: dict[Func, tuple[int, int, float, float, dict[Func, tuple[int, int, float, float]]]]
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    own: dict[Func, float] = {}
    calls: dict[Func, int] = {}
    for func, (_, nc, tt, _, callers) in stats.items():
        calls[func] = nc
        if func[0] == "~" and callers:  # a C function: its time is its callers' (as each spent it)
            for caller, (_, _, ctt, _) in callers.items():
                own[caller] = own.get(caller, 0.0) + ctt
        else:
            own[func] = own.get(func, 0.0) + tt
    stages: dict[str, float] = {}
    for func, seconds in own.items():
        stage = stage_of(func)
        stages[stage] = stages.get(stage, 0.0) + seconds
    top = sorted(own.items(), key=lambda kv: -kv[1])[:TOP_FUNCTIONS]
    return {
        "total": sum(own.values()),
        "stages": sorted(stages.items(), key=lambda kv: -kv[1]),
        "functions": [
            {"where": f"{_short(func[0])}:{func[1]}", "name": func[2], "stage": stage_of(func),
             "seconds": seconds, "calls": calls.get(func, 0)}
            for func, seconds in top
        ],
    }


def _short(path: str) -> str:
    resolved = os.path.realpath(path)
    parts = Path(resolved).parts
    if "site-packages" in parts:  # first: a virtual environment may lie inside the checkout
        return "/".join(parts[parts.index("site-packages") + 1:])
    root = str(ROOT) + os.sep
    if resolved.startswith(root):
        return resolved[len(root):]
    if resolved.startswith(_STDLIB):
        return "stdlib/" + Path(resolved).name
    return path


#: A workload still running after this many seconds under the profiler is stopped, and its profile so
#: far reported (a workload that overruns its target by far shows where its time goes as well).
PROFILE_SECONDS = 30.0

_CHILD = """
import cProfile, json, signal, sys
sys.path.insert(0, {root!r})
from benchmarks.profiles import summarise
{setup}
class _Stopped(BaseException):
    pass
def _stop(*_args):
    raise _Stopped
signal.signal(signal.SIGALRM, _stop)
_stopped = None
_profile = cProfile.Profile()
signal.setitimer(signal.ITIMER_REAL, {limit!r})
_profile.enable()
try:
{stmt}
except _Stopped:
    _stopped = {limit!r}
_profile.disable()
signal.setitimer(signal.ITIMER_REAL, 0)
print(json.dumps({{**summarise(_profile), "stopped": _stopped}}))
"""


@dataclass(frozen=True, slots=True)
class Workload:
    """What a measurement runs: ``setup`` (not profiled) then ``stmt`` (profiled), in a fresh process.

    ``yaml`` names synthetic matrices the workload reads from disk (``boxes:N`` and ``boxes:N:changed``),
    written to a temporary directory and passed as ``paths``; ``nocache`` turns the compiled-matrix
    cache off, as the *no cache* rows do.
    """

    title: str
    setup: str
    stmt: str
    yaml: tuple[str, ...] = ()
    nocache: bool = True


#: The workloads the report can profile, by the key a target row names.
WORKLOADS: dict[str, Workload] = {
    "load-shipped": Workload(
        "`from capmatrix import load; load()` of the shipped matrix, no cache (imports included)",
        "", "from capmatrix import load\nload()",
    ),
    "load-shipped-cached": Workload(
        "`import capmatrix; capmatrix.load()` of the shipped matrix, the cache warm (imports included)",
        "import subprocess, sys\n"  # one load first, in its own process, writes the entry
        "subprocess.run([sys.executable, '-c', 'import capmatrix; capmatrix.load()'], check=True)",
        "import capmatrix\ncapmatrix.load()", nocache=False,
    ),
    "cli-query": Workload(
        "`capmatrix query xqa --sm 120 --model llama --spec-dec one_model`, no cache (imports included)",
        "import contextlib, io",
        "from capmatrix.authoring.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['query', 'xqa', '--sm', '120', '--model', 'llama', '--spec-dec', 'one_model'])",
    ),
    "load-10k": Workload(
        "`load(DIR)` of the 10,000-rule `boxes` matrix written as YAML, no cache (imports included)",
        "", "from capmatrix import load\nload(paths[0])", yaml=("boxes:10000",),
    ),
    "explain-boxes-1k": Workload(
        "1,000 first explained answers (`resolve(q).reasons`) on `boxes-1k`, 10,000 rules",
        "import capmatrix\nfrom benchmarks import synth\nfrom capmatrix._shipped.default import _resolver\n"
        "syn = synth.boxes_matrix(10000, n_kernels=1)\nm = syn.build()\n"
        "qs = [capmatrix.KernelQuery('k000', **c) for c in synth.random_cells(syn.axes, 1000, seed=7)]\n"
        "_resolver(m).forget()",
        "for q in qs:\n    capmatrix.resolve(q, m).reasons",
    ),
    "diff-boxes-10k": Workload(
        "`diff` of the 10,000-rule `boxes` matrix against a copy with 5 % of the rules changed (in memory)",
        "from benchmarks import synth\nfrom capmatrix.authoring.analysis import diff\n"
        "syn = synth.boxes_matrix(10000)\n"
        "old, new = syn.build(), synth.mutate(syn, 0.05).build()",
        "diff(old, new)",
    ),
    "diff-cli-10k": Workload(
        "`capmatrix diff OLD NEW` on the 10,000-rule `boxes` matrices written as YAML",
        "import contextlib, io",
        "from capmatrix.authoring.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['diff', paths[0], paths[1]])",
        yaml=("boxes:10000", "boxes:10000:changed"),
    ),
    "diff-dmn": Workload(
        "`diff` of the 1,500-rule DMN-like table against a copy with 5 % of the rules changed",
        "from benchmarks import synth\nfrom capmatrix.authoring.analysis import diff\n"
        "syn = synth.dmn_matrix(1500)\n"
        "old, new = syn.build(), synth.mutate(syn, 0.05).build()",
        "diff(old, new)",
    ),
    "check-boxes-10k": Workload(
        "`check` of the 10,000-rule `boxes` matrix (in memory)",
        "from benchmarks import synth\nfrom capmatrix.authoring.analysis import check\n"
        "m = synth.boxes_matrix(10000).build()",
        "check(m)",
    ),
    "check-cli-10k": Workload(
        "`capmatrix check DIR` on the 10,000-rule `boxes` matrix written as YAML",
        "import contextlib, io",
        "from capmatrix.authoring.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['check', paths[0]])",
        yaml=("boxes:10000",),
    ),
    "gaps-cli-10k": Workload(
        "`load(DIR)` and `bounded_gap` of every role, 10,000-rule `boxes` matrix written as YAML",
        "",
        "from capmatrix import load\nfrom capmatrix.authoring.analysis import bounded_gap\n"
        "m = load(paths[0])\n"
        "for role in m.roles.values():\n    bounded_gap(m, role)",
        yaml=("boxes:10000",),
    ),
    "vllm-first": Workload(
        "1,000 first selections (`select_backend`) of configurations vLLM serves, every memo cleared",
        "from benchmarks import vllm_select\nfrom capmatrix._shipped.default import _resolver\n"
        "from capmatrix.engine import vllm\ncells = vllm_select._cells(1000, servable=True)\n"
        "vllm._MEMO.clear()\n_resolver(None).forget()",
        "vllm_select._select_all(cells)",
    ),
}


#: The shape family's analyses (``benchmarks.shapes``), 10,000 rules each as YAML through the CLI, by
#: ``{check,gaps,diff}-shape-NAME``; YAML specs ``shape:NAME:N`` and ``shape:NAME:N:changed`` (its twin).
_SHAPE_STMTS = {
    "check": ("`capmatrix check DIR`", "main(['check', paths[0]])", False),
    "gaps": ("`load(DIR)` and `bounded_gap` of every role,", "", False),
    "diff": ("`capmatrix diff OLD NEW` against its twin,", "main(['diff', paths[0], paths[1]])", True),
}
_SHAPE_NAMES = ("issue", "kernels-of-10", "kernels-of-200", "one-axis", "six-axes", "narrow-lists",
                "wide-lists", "ranges", "open-ints", "roles-of-2", "roles-of-16", "sparse-roles",
                "sparse-roles-of-16", "twin-1pct", "twin-20pct")
for _name in _SHAPE_NAMES:
    for _what, (_title, _call, _twin) in _SHAPE_STMTS.items():
        WORKLOADS[f"{_what}-shape-{_name}"] = Workload(
            f"{_title} shape `{_name}`, 10,000 rules written as YAML",
            "import contextlib, io" if _call else "",
            ("from capmatrix.authoring.cli import main\n"
             f"with contextlib.redirect_stdout(io.StringIO()):\n    {_call}"
             if _call else
             "from capmatrix import load\nfrom capmatrix.authoring.analysis import bounded_gap\n"
             "m = load(paths[0])\n"
             "for role in m.roles.values():\n    bounded_gap(m, role)"),
            yaml=(f"shape:{_name}:10000", *((f"shape:{_name}:10000:changed",) if _twin else ())),
        )


_PARSE = ("parsing the shipped YAML without a cache: importing PyYAML (about 10 ms; its modules compile "
          "their regular expressions), libyaml's event objects (about 8 ms for the shipped files) and the "
          "reader's loop over them (about 10 ms), then building and checking the model (about 20 ms). With "
          "a cache entry, or the entry a wheel carries, nothing is parsed: see the *cached* and *fresh "
          "install* rows of the same section.")
_SIX_AXES = ("the exact gap of each role: with 4 to 6 constrained axes per rule no axis order separates the "
             "rules, and at 1,000 rules the union of one role's 8 candidates makes 56 million `join` calls "
             "for a diagram of 1.2 million nodes, each call a random read of tables far larger than the "
             "L3 cache. Axis orders, a larger operation cache, prefetching and an n-ary union were "
             "measured and do not cut the operations; see `docs/analysis.md`, *How the analyses scale*.")

#: What the analysis of a missed workload found, printed under its profile (``make bench``): each
#: figure here was measured when the cause was analysed (see the notes cited), not in the run.
CAUSES: dict[str, str] = {
    "load-shipped": _PARSE,
    "cli-query": _PARSE + " The command line adds its own imports (argparse, pathlib) and its parser.",
    **{f"{what}-shape-six-axes": _SIX_AXES for what in _SHAPE_STMTS},
    "diff-shape-twin-20pct": (
        "per 10x rules this shape's roles grow 12.5x (2 to 25) and a 20 % twin changes every kernel, "
        "so the diff's per-role work alone grows about 12.5x; the parse (about 7x) is the only part "
        "that grows less. The 10,000-rule diff is memory-bound (diagram tables of hundreds of MB), so "
        "load on a shared machine inflates it more than the 1,000-rule runs."),
}


def _write_yaml(specs: tuple[str, ...], where: Path) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from benchmarks import shapes, synth  # noqa: PLC0415

    paths = []
    for spec in specs:
        if spec.startswith("shape:"):
            _, name, size, *changed = spec.split(":")
            shape = {s.name: s for s in shapes.family()}[name]
            syn = shapes.generate(shape, int(size))
            if changed:
                syn = shapes.twin(shape, syn)
            paths.append(str(syn.write(where / spec.replace(":", "-"))))
            continue
        _, size, *changed = spec.split(":")
        syn = synth.boxes_matrix(int(size))
        if changed:
            syn = synth.mutate(syn, 0.05)
        paths.append(str(syn.write(where / spec.replace(":", "-"))))
    return paths


def profile(key: str, *, limit: float = PROFILE_SECONDS, timeout: float = 600.0) -> dict[str, Any]:
    """Run workload ``key`` under cProfile in a fresh interpreter and summarise it.

    The profiled statement is stopped after ``limit`` seconds (``stopped`` in the summary is then
    the limit, else None); ``timeout`` bounds the whole child, setup included.
    """
    work = WORKLOADS[key]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if work.nocache:
        env["CAPMATRIX_CACHE"] = "off"
    with tempfile.TemporaryDirectory(prefix="capmatrix-bench-profile-") as tmp:
        paths = _write_yaml(work.yaml, Path(tmp))
        setup = f"paths = {paths!r}\n{work.setup}"
        code = _CHILD.format(root=str(ROOT), setup=setup, stmt=textwrap.indent(work.stmt, "    "),
                             limit=limit)
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                              check=False, timeout=timeout, env=env)
    if done.returncode != 0:
        msg = f"profile {key} failed ({done.returncode}): {done.stderr[-3000:]}"
        raise RuntimeError(msg)
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def tables(summary: dict[str, Any]) -> list[str]:
    """The stage and function tables of one profile, as markdown lines."""
    total = summary["total"] or 1.0
    lines = ["| stage | share | seconds |", "|---|---|---|"]
    stages = summary["stages"]
    for name, seconds in stages[:TOP_STAGES]:
        lines.append(f"| {name} | {seconds / total:.0%} | {seconds:.3f} |")
    rest = sum(seconds for _, seconds in stages[TOP_STAGES:])
    if rest:
        lines.append(f"| other ({len(stages) - TOP_STAGES} stages) | {rest / total:.0%} | {rest:.3f} |")
    lines += ["", "| function | where | stage | share | seconds | calls |", "|---|---|---|---|---|---|"]
    for f in summary["functions"]:
        lines.append(f"| `{f['name']}` | {f['where']} | {f['stage']} | {f['seconds'] / total:.0%} | "
                     f"{f['seconds']:.3f} | {f['calls']:,} |")
    return lines
