#!/usr/bin/env python3
"""Read FlashInfer's literal attention facts into a recorded table, and check the matrix.

    python tools/import_flashinfer.py --check                       # exit 1 when the YAML drifted
    python tools/import_flashinfer.py extract --flashinfer-src DIR  # re-read the sources, print the table

The table lives in ``capabilities/evidence/sources/flashinfer_0.7.2.post1.json``: per fact, the file and
line it was read from and its value. ``DIR`` is the directory holding the wheel's ``flashinfer/``. The
anchors, all read without importing or running FlashInfer:

- ``DISPATCH_HEAD_DIM`` in ``data/include/flashinfer/utils.cuh``: the head sizes of its ``case`` labels;
- ``get_default_config`` in ``aot.py``: FlashInfer's own prebuilt FA2/FA3 head-size pairs and variants;
- the ``static_assert`` on ``HEAD_DIM_VO`` in ``attention/hopper/prefill_sm90.cuh`` (FA3's head sizes);
- ``gen_xqa_module`` in ``jit/xqa.py``: query and cache dtypes, page sizes, head bounds, the rules above 256;
- ``xqa`` / ``xqa_mla`` in ``xqa.py``: the compute-capability majors they run on.

An anchor whose shape changed (the macro, function or test is gone or is no longer the literal form read
here) raises :class:`TableError`: a person reads the new code. ``--check`` compares the table with the
grants and excludes of ``flashinfer_fa2``, ``flashinfer_fa3`` and ``flashinfer_xqa`` in
``capabilities/kernels/flashinfer.yaml``. Logic that is code (plan/run checks, heuristics) stays
hand-written, citing path:line.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _generated import emit_table  # tools/ is not a package: its sibling, by path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "capabilities" / "evidence" / "sources" / "flashinfer_0.7.2.post1.json"
KERNELS = ROOT / "capabilities" / "kernels" / "flashinfer.yaml"
UTILS_CUH = "data/include/flashinfer/utils.cuh"
PREFILL_SM90 = "data/include/flashinfer/attention/hopper/prefill_sm90.cuh"
AOT = "aot.py"
JIT_XQA = "jit/xqa.py"
XQA = "xqa.py"
FACTS = ("dispatch_head_dim", "aot_fa2_head_dim", "aot_fa3_head_dim", "aot_f16_dtype", "aot_f8_dtype",
         "aot_use_sliding_window", "aot_use_logits_soft_cap", "fa3_head_dim_vo", "xqa_input_dtype",
         "xqa_kv_cache_dtype", "xqa_page_size", "xqa_head_dim", "xqa_head_gt", "xqa_sm_major",
         "xqa_nvfp4_sm_major", "xqa_mla_sm_major")
TORCH_DTYPES = {"float16": "fp16", "bfloat16": "bf16", "float8_e4m3fn": "fp8_e4m3", "int8": "int8",
                "uint8": "nvfp4"}
#: The matrix's kv_cache_dtype word for a cache dtype FlashInfer names.
KV_WORDS = {"fp8_e4m3": "fp8"}
DISPATCH = re.compile(r"#define\s+DISPATCH_HEAD_DIM\s*\(")
CASE = re.compile(r"case\s+(\d+)\s*:\s*\{\s*\\?\s*constexpr\s+size_t\s+HEAD_DIM\s*=\s*(\d+)\s*;")
STATIC_ASSERT = re.compile(r"static_assert\(\s*((?:HEAD_DIM_VO\s*==\s*\d+\s*(?:\|\|\s*)?)+)\);")


class TableError(ValueError):
    """The sources or the recorded table do not have the expected shape."""


def _read(src: Path, rel: str) -> str:
    path = src / "flashinfer" / rel
    if not path.is_file():
        raise TableError(f"{path}: not found (unpack the wheel's flashinfer/ under --flashinfer-src)")
    return path.read_text(encoding="utf-8")


def _fact(rel: str, line: int, value: object) -> dict[str, Any]:
    return {"path": "flashinfer/" + rel, "line": line, "value": value}


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def dispatch_head_dim(text: str) -> dict[str, Any]:
    """The ``case`` labels of ``DISPATCH_HEAD_DIM`` (each must bind HEAD_DIM to its own label)."""
    start = DISPATCH.search(text)
    if start is None:
        raise TableError(f"flashinfer/{UTILS_CUH}: #define DISPATCH_HEAD_DIM not found")
    body: list[str] = []
    for line in text[start.end():].splitlines()[1:]:
        if not line.rstrip().endswith("\\"):
            body.append(line)
            break
        body.append(line.rstrip()[:-1])
    macro = "\n".join(body)
    cases = CASE.findall(macro)
    if not cases or any(a != b for a, b in cases) or len(cases) != macro.count("case ") \
            or "Unsupported head_dim" not in macro:
        raise TableError(f"flashinfer/{UTILS_CUH}:{_line_of(text, start.start())}: DISPATCH_HEAD_DIM is no "
                         "longer a switch of `case N: { constexpr size_t HEAD_DIM = N; ...}` with an "
                         '"Unsupported head_dim" default; read it again')
    return _fact(UTILS_CUH, _line_of(text, start.start()), [int(a) for a, _ in cases])


def fa3_head_dim_vo(text: str) -> dict[str, Any]:
    """The head sizes FA3's ``static_assert(HEAD_DIM_VO == a || ...)`` allows."""
    match = STATIC_ASSERT.search(text)
    if match is None or "HEAD_DIM_VO" not in text[match.start():match.end()]:
        raise TableError(f"flashinfer/{PREFILL_SM90}: static_assert(HEAD_DIM_VO == ... || ...) not found")
    return _fact(PREFILL_SM90, _line_of(text, match.start()), [int(v) for v in re.findall(r"\d+", match[1])])


def _function(tree: ast.Module, name: str, rel: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise TableError(f"flashinfer/{rel}: def {name} not found")


def _torch(node: ast.expr, where: str) -> str:
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch"
            and node.attr in TORCH_DTYPES):
        return TORCH_DTYPES[node.attr]
    raise TableError(f"{where}: {ast.unparse(node)} is not a torch dtype this tool knows")


def _plain(node: ast.expr, where: str) -> object:
    """A literal value: bool/int/str, torch dtype, or (nested) list/tuple of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, bool | int | str):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        return [_plain(e, where) for e in node.elts]
    return _torch(node, where)


def aot_config(text: str) -> dict[str, dict[str, Any]]:
    """The FA2/FA3 entries of ``get_default_config``'s returned dict literal."""
    fn = _function(ast.parse(text), "get_default_config", AOT)
    where = f"flashinfer/{AOT}:{fn.lineno} get_default_config"
    ret = fn.body[-1]
    if not isinstance(ret, ast.Return) or not isinstance(ret.value, ast.Dict):
        raise TableError(f"{where}: no longer returns a dict literal; read it again")
    entries = {k.value: v for k, v in zip(ret.value.keys, ret.value.values, strict=True)
               if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    out: dict[str, dict[str, Any]] = {}
    for key in ("fa2_head_dim", "fa3_head_dim", "f16_dtype", "f8_dtype", "use_sliding_window",
                "use_logits_soft_cap"):
        node = entries.get(key)
        if not isinstance(node, ast.List):
            raise TableError(f"{where}: {key!r} is not a list literal; read it again")
        out["aot_" + key] = _fact(AOT, node.lineno, _plain(node, f"{where} {key!r}"))
    return out


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _compare(node: ast.expr, left: str) -> tuple[type[ast.cmpop], ast.expr] | None:
    """``left <op> right`` as (op type, right); None for any other shape."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and _is_name(node.left, left):
        return type(node.ops[0]), node.comparators[0]
    return None


def _int(node: ast.expr, where: str) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    raise TableError(f"{where}: {ast.unparse(node)} is not an int literal")


def _int_list(node: ast.expr, where: str) -> list[int]:
    if isinstance(node, ast.List | ast.Tuple):
        return [_int(e, where) for e in node.elts]
    raise TableError(f"{where}: {ast.unparse(node)} is not an int list literal; read it again")


def _if_chain(first: ast.If) -> Iterator[ast.If]:
    here: ast.If | None = first
    while here is not None:
        yield here
        here = here.orelse[0] if len(here.orelse) == 1 and isinstance(here.orelse[0], ast.If) else None


def _dtype_chain(fn: ast.FunctionDef, arg: str, where: str) -> tuple[ast.If, list[str]]:
    """The ``if arg == torch.X: ... elif arg == torch.Y`` chain at the top of ``fn``."""
    for stmt in fn.body:
        if isinstance(stmt, ast.If) and (cmp := _compare(stmt.test, arg)) and cmp[0] is ast.Eq:
            names = []
            for branch in _if_chain(stmt):
                cmp = _compare(branch.test, arg)
                if cmp is None or cmp[0] is not ast.Eq:
                    raise TableError(f"{where}:{branch.lineno}: the {arg} chain has a test that is not "
                                     f"`{arg} == torch.X`; read it again")
                names.append(_torch(cmp[1], f"{where}:{branch.lineno}"))
            return stmt, names
    raise TableError(f"{where}: no `if {arg} == torch.X` chain; read it again")


def xqa_jit(text: str) -> dict[str, dict[str, Any]]:
    """``gen_xqa_module``'s dtype chains, page-size list, head bounds and its rules above a head size."""
    fn = _function(ast.parse(text), "gen_xqa_module", JIT_XQA)
    where = f"flashinfer/{JIT_XQA}"
    out: dict[str, dict[str, Any]] = {}
    node, names = _dtype_chain(fn, "input_dtype", where)
    out["xqa_input_dtype"] = _fact(JIT_XQA, node.lineno, names)
    node, names = _dtype_chain(fn, "kv_cache_dtype", where)
    # the final else (no test) builds the cache in the query's type
    out["xqa_kv_cache_dtype"] = _fact(JIT_XQA, node.lineno, [*names, "input_dtype"])
    for stmt in fn.body:
        if not isinstance(stmt, ast.If):
            continue
        cmp = _compare(stmt.test, "page_size")
        if cmp and cmp[0] is ast.NotIn:
            out["xqa_page_size"] = _fact(JIT_XQA, stmt.lineno, _int_list(cmp[1], f"{where}:{stmt.lineno}"))
        elif isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.Or) and any(
                _mentions(v, "head_dim") for v in stmt.test.values):
            bounds = _head_bounds(stmt.test, f"{where}:{stmt.lineno}")
            out["xqa_head_dim"] = _fact(JIT_XQA, stmt.lineno, bounds)
        elif (cmp := _compare(stmt.test, "head_dim")) and cmp[0] is ast.Gt:
            out["xqa_head_gt"] = _fact(JIT_XQA, stmt.lineno, _head_gt(stmt, f"{where}:{stmt.lineno}"))
    for key, what in (("xqa_page_size", "`if page_size not in [...]`"),
                      ("xqa_head_dim", "`if head_dim % N != 0 or head_dim > M or head_dim < L`"),
                      ("xqa_head_gt", "`if head_dim > N:`")):
        if key not in out:
            raise TableError(f"{where}:{fn.lineno} gen_xqa_module: {what} not found; read it again")
    return out


def _mentions(node: ast.expr, name: str) -> bool:
    return any(_is_name(n, name) for n in ast.walk(node) if isinstance(n, ast.expr))


def _head_bounds(test: ast.BoolOp, where: str) -> dict[str, int]:
    bounds: dict[str, int] = {}
    for value in test.values:
        if (isinstance(value, ast.Compare) and len(value.ops) == 1 and isinstance(value.ops[0], ast.NotEq)
                and isinstance(value.left, ast.BinOp) and isinstance(value.left.op, ast.Mod)
                and _is_name(value.left.left, "head_dim") and _int(value.comparators[0], where) == 0):
            bounds["multiple_of"] = _int(value.left.right, where)
        elif (cmp := _compare(value, "head_dim")) and cmp[0] in (ast.Gt, ast.Lt):
            bounds["max" if cmp[0] is ast.Gt else "min"] = _int(cmp[1], where)
        else:
            raise TableError(f"{where}: head_dim test {ast.unparse(value)!r} is not a modulus or bound")
    if set(bounds) != {"multiple_of", "max", "min"}:
        raise TableError(f"{where}: head_dim test has {sorted(bounds)}, not a modulus, a max and a min")
    return bounds


def _head_gt(stmt: ast.If, where: str) -> dict[str, int]:
    assert isinstance(stmt.test, ast.Compare)  # noqa: S101 (the caller matched `head_dim > N`)
    out = {"above": _int(stmt.test.comparators[0], where)}
    for inner in stmt.body:
        if isinstance(inner, ast.If):
            for arg, key in (("q_seq_len", "max_q_seq_len"), ("head_group_ratio", "max_head_group_ratio")):
                got = _compare(inner.test, arg)
                if got and got[0] is ast.Gt:
                    out[key] = _int(got[1], where)
    if set(out) != {"above", "max_q_seq_len", "max_head_group_ratio"}:
        raise TableError(f"{where}: `if head_dim > N:` holds {sorted(out)}, not the q_seq_len and "
                         "head_group_ratio limits; read it again")
    return out


def _cc_major_tests(fn: ast.FunctionDef) -> Iterator[tuple[ast.stmt, type[ast.cmpop], ast.expr]]:
    """``get_compute_capability(...)[0] in/not in [...]`` tests of an ``if`` or ``assert`` in ``fn``."""
    for stmt in ast.walk(fn):
        if isinstance(stmt, ast.If | ast.Assert):
            test = stmt.test
            if (isinstance(test, ast.Compare) and len(test.ops) == 1
                    and isinstance(test.ops[0], ast.In | ast.NotIn) and isinstance(test.left, ast.Subscript)
                    and isinstance(test.left.value, ast.Call) and _is_name(test.left.value.func,
                                                                           "get_compute_capability")):
                yield stmt, type(test.ops[0]), test.comparators[0]


def xqa_runtime(text: str) -> dict[str, dict[str, Any]]:
    """The majors ``xqa`` refuses outside of, NVFP4's majors (its assert) and ``xqa_mla``'s majors."""
    tree = ast.parse(text)
    out: dict[str, dict[str, Any]] = {}
    for fn_name, op, key in (("xqa", ast.NotIn, "xqa_sm_major"), ("xqa", ast.In, "xqa_nvfp4_sm_major"),
                             ("xqa_mla", ast.NotIn, "xqa_mla_sm_major")):
        fn = _function(tree, fn_name, XQA)
        found = [(s, v) for s, o, v in _cc_major_tests(fn) if o is op]
        where = f"flashinfer/{XQA}:{fn.lineno} {fn_name}"
        if len(found) != 1:
            raise TableError(f"{where}: {len(found)} tests `get_compute_capability(...)[0] "
                             f"{'not in' if op is ast.NotIn else 'in'} [...]`, expected 1; read it again")
        stmt, value = found[0]
        out[key] = _fact(XQA, stmt.lineno, _int_list(value, f"flashinfer/{XQA}:{stmt.lineno} ({fn_name})"))
    return out


def extract(src: Path) -> dict[str, Any]:
    """The table, read from the unpacked sources at ``src`` (the directory that holds ``flashinfer/``)."""
    meta = src / "flashinfer" / "_build_meta.py"
    text = meta.read_text(encoding="utf-8") if meta.is_file() else ""
    version = re.search(r'__version__\s*=\s*"([^"]+)"', text)
    commit = re.search(r'__git_commit__\s*=\s*"([0-9a-f]+)"', text)
    facts: dict[str, Any] = {"dispatch_head_dim": dispatch_head_dim(_read(src, UTILS_CUH)),
                             **aot_config(_read(src, AOT)),
                             "fa3_head_dim_vo": fa3_head_dim_vo(_read(src, PREFILL_SM90)),
                             **xqa_jit(_read(src, JIT_XQA)), **xqa_runtime(_read(src, XQA))}
    return {"flashinfer": {"version": version[1] if version else "unknown",
                           "commit": commit[1] if commit else "unknown"},
            "about": "FlashInfer's literal attention facts (macro cases, default AOT config, static_asserts, "
                     "XQA JIT and runtime checks), read without import by tools/import_flashinfer.py",
            "facts": facts}


def load_table(path: Path | None = None) -> dict[str, Any]:
    """Read the recorded table (default :data:`TABLE`) and check that it holds every fact."""
    path = path or TABLE
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if set(data.get("facts", {})) != set(FACTS):
        raise TableError(f"{path}: facts differ from {sorted(FACTS)}")
    return data


def _as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else [value]


def _sorted(value: object) -> list[object]:
    """A grant's value list in a fixed order, to compare with a list of the table."""
    return sorted(_as_list(value), key=str)


def _majors(sm: object) -> set[int]:
    """The compute-capability majors an ``sm`` grant covers (90 -> 9, "[100, 109]" -> 10)."""
    out: set[int] = set()
    for item in _as_list(sm):
        if isinstance(item, int):
            out.add(item // 10)
        else:
            low, high = (int(v) for v in re.findall(r"\d+", str(item)))
            out.update(range(low // 10, high // 10 + 1))
    return out


def _rules(kernels: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    kernel = kernels.get(name)
    if kernel is None:
        raise TableError(f"{KERNELS.name}: no kernel {name}")
    rules: list[dict[str, Any]] = kernel["rules"]
    return rules


def _cite(fact: Mapping[str, Any]) -> str:
    return f"{fact['path']}:{fact['line']}"


def check(table: Mapping[str, Any], kernels_text: str) -> list[str]:
    """Where the YAML's FlashInfer rules disagree with the table (empty: none)."""
    kernels = yaml.safe_load(kernels_text)["kernels"]
    facts = table["facts"]
    problems: list[str] = []

    def grants(name: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for rule in _rules(kernels, name):
            if "grant" in rule:
                yield rule["id"], rule["grant"]

    # FA2's heads: the only head-size check its kernels meet is DISPATCH_HEAD_DIM (merge states)
    fa2 = facts["dispatch_head_dim"]
    for rid, grant in grants("flashinfer_fa2"):
        if _sorted(grant.get("head_dim")) != _sorted(fa2["value"]):
            problems.append(f"{rid}: head_dim {grant.get('head_dim')} != DISPATCH_HEAD_DIM {fa2['value']} "
                            f"({_cite(fa2)})")
    fa3 = facts["fa3_head_dim_vo"]
    built = facts["aot_fa3_head_dim"]
    for rid, grant in grants("flashinfer_fa3"):
        heads = _sorted(grant.get("head_dim"))
        if heads != _sorted(fa3["value"]):
            problems.append(f"{rid}: head_dim {grant.get('head_dim')} != FA3 static_assert {fa3['value']} "
                            f"({_cite(fa3)})")
        if _majors(grant["sm"]) != {9}:
            problems.append(f"{rid}: sm {grant['sm']} is not major 9 (FA3 is sm90a only, {_cite(fa3)})")
        for key, fact in (("sliding_window", "aot_use_sliding_window"),
                          ("logit_softcapping", "aot_use_logits_soft_cap")):
            if grant.get(key, True) is not False and True not in facts[fact]["value"]:
                problems.append(f"{rid}: grants {key} but the default build has none "
                                f"({_cite(facts[fact])})")
        equal = sorted(qo for qo, vo in built["value"] if qo == vo)
        if not set(heads) <= set(equal):
            problems.append(f"{rid}: head_dim {heads} not among the built equal pairs {equal} "
                            f"({_cite(built)})")
    problems += _check_xqa(facts, kernels)
    return problems


def _check_xqa(facts: Mapping[str, Any], kernels: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    pages, head, gt = facts["xqa_page_size"], facts["xqa_head_dim"], facts["xqa_head_gt"]
    sms, dtypes, kv = facts["xqa_sm_major"], facts["xqa_input_dtype"], facts["xqa_kv_cache_dtype"]
    kv_words = {KV_WORDS.get(v, v) for v in kv["value"]}
    covered: set[int] = set()
    rules = _rules(kernels, "flashinfer_xqa")
    for rule in rules:
        rid, grant = rule["id"], rule.get("grant")
        if grant is None:
            continue
        if _sorted(grant.get("tokens_per_block")) != _sorted(pages["value"]):
            problems.append(f"{rid}: tokens_per_block {grant.get('tokens_per_block')} != page sizes "
                            f"{pages['value']} ({_cite(pages)})")
        if _as_list(grant.get("head_dim")) != [{"multiple_of": head["value"]["multiple_of"]}]:
            problems.append(f"{rid}: head_dim {grant.get('head_dim')} != multiples of "
                            f"{head['value']['multiple_of']} ({_cite(head)})")
        majors = _majors(grant["sm"])
        covered |= majors & set(sms["value"])  # one outside is reported below
        if not majors <= set(sms["value"]):
            problems.append(f"{rid}: sm {grant['sm']} outside majors {sms['value']} ({_cite(sms)})")
        for dtype in _as_list(grant.get("dtype")):
            if dtype not in dtypes["value"]:
                problems.append(f"{rid}: dtype {dtype} not among {dtypes['value']} ({_cite(dtypes)})")
            problems.extend(f"{rid}: kv_cache_dtype {cache} not among {sorted(kv_words)} ({_cite(kv)})"
                            for cache in _as_list(grant.get("kv_cache_dtype"))
                            if cache != dtype and cache not in kv_words)
    if covered != set(sms["value"]):
        problems.append(f"flashinfer_xqa: grants cover majors {sorted(covered)} != {sms['value']} "
                        f"({_cite(sms)})")
    excludes = [rule["exclude"] for rule in rules if "exclude" in rule]
    for want, what, fact in (
            ({"head_dim": f">{head['value']['max']}"}, "the head maximum", head),
            ({"head_dim": f">{gt['value']['above']}", "q_per_kv": f">{gt['value']['max_head_group_ratio']}"},
             "the group limit above a head size", gt),
            ({"head_dim": f">{gt['value']['above']}", "spec_dec": ["one_model", "two_model"]},
             "no spec-dec above a head size", gt)):
        if want not in excludes:
            problems.append(f"flashinfer_xqa: no exclude {want} ({what}, {_cite(fact)})")
    return problems


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 ok, 1 drift with --check, 2 bad input)."""
    parser = argparse.ArgumentParser(prog="import_flashinfer.py", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the YAML disagrees with the table")
    sub = parser.add_subparsers(dest="command")
    ext = sub.add_parser("extract", help="read the sources and print the table as JSON")
    ext.add_argument("--flashinfer-src", type=Path, required=True,
                     help="directory holding the wheel's flashinfer/")
    ext.add_argument("--write", action="store_true", help="write the table instead of printing it")
    args = parser.parse_args(argv)
    try:
        if args.command == "extract":
            emit_table(extract(args.flashinfer_src), TABLE, write=args.write)
            return 0
        problems = check(load_table(), KERNELS.read_text(encoding="utf-8"))
    except (TableError, OSError, KeyError, SyntaxError) as exc:
        sys.stderr.write(f"import_flashinfer.py: {exc}\n")
        return 2
    for line in problems:
        sys.stdout.write(line + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(run())
