#!/usr/bin/env python3
"""Read vLLM's CUDA attention-backend class attributes into a recorded table, and check the matrix.

    python tools/import_vllm_backends.py --check                 # exit 1 when the YAML drifted
    python tools/import_vllm_backends.py extract --vllm-src DIR  # re-read the sources, print the table
    python tools/import_vllm_backends.py extract --vllm-src DIR --write  # ... and write the release's table

Each release's table lives in ``capabilities/evidence/sources/vllm_<version>_backends.json`` (the
version is read from the sources' ``vllm/_version.py``; 0.33.0 and 0.34.0 are recorded): per
``AttentionBackendEnum`` name, the class, its file and line, and what its class body says literally
(``supported_dtypes``, ``supported_kv_cache_dtypes``, the list ``get_supported_head_sizes`` and
``get_supported_kernel_block_sizes`` return), each with the line it was read from, following base
classes inside vLLM when a class does not say. ``extract`` reads the sources with :mod:`ast` (nothing of
vLLM is imported or run), so the table can be refreshed at a new release and compared.

``--check`` compares the table with the base grant (``vllm_<name>.base``) of each kernel of
``capabilities/kernels/vllm_attention.yaml``: its ``dtype``, ``kv_cache_dtype`` (the words the axis
knows, values or spellings, as vLLM spells them) and ``head_dim`` / ``tokens_per_block`` (vLLM's block
size) lists where the class gives a literal list. Logic that
is code (capability checks, combinations, model-config reads) stays hand-written, citing path:line.
``--check`` reads the table of the release the matrix models (``MODELLED``, 0.33.0) unless ``--release``
names another.

``extract`` fails, and imports nothing, where the release's ``AttentionBackendEnum``
(``vllm/v1/attention/backends/registry.py``) has a member this tool has no record for: neither a
backend it reads (``BACKENDS``) nor one it leaves out on purpose (``NOT_IMPORTED``, each with why). It
fails too where a member's registry path is not the file and class ``BACKENDS`` names, or where a
backend of ``BACKENDS`` is missing from a release it is recorded for (``SINCE``).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _generated import emit_table  # tools/ is not a package: its sibling, by path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "capabilities" / "evidence" / "sources"
#: The release the matrix models: ``--check`` compares its table with the YAML.
MODELLED = "0.33.0"
#: The releases whose tables are recorded.
RELEASES = ("0.33.0", "0.34.0")


def table_path(version: str) -> Path:
    """Where the table of vLLM ``version`` lives."""
    return SOURCES / f"vllm_{version}_backends.json"


TABLE = table_path(MODELLED)
KERNELS = ROOT / "capabilities" / "kernels" / "vllm_attention.yaml"
AXES = ROOT / "capabilities" / "axes.yaml"
B = "vllm/v1/attention/backends/"
#: AttentionBackendEnum name -> (file, class) of its CUDA backend (backends/registry.py).
BACKENDS: dict[str, tuple[str, str]] = {
    "FLASH_ATTN": (B + "flash_attn.py", "FlashAttentionBackend"),
    "FLASHINFER": (B + "flashinfer.py", "FlashInferBackend"),
    "TRITON_ATTN": (B + "triton_attn.py", "TritonAttentionBackend"),
    "FLEX_ATTENTION": (B + "flex_attention.py", "FlexAttentionBackend"),
    "TURBOQUANT": (B + "turboquant_attn.py", "TurboQuantAttentionBackend"),
    "B12X": (B + "b12x.py", "B12xPagedAttentionBackend"),
    "TRITON_MLA": (B + "mla/triton_mla.py", "TritonMLABackend"),
    "FLASH_ATTN_MLA": (B + "mla/flashattn_mla.py", "FlashAttnMLABackend"),
    "FLASHMLA": (B + "mla/flashmla.py", "FlashMLABackend"),
    "FLASHINFER_MLA": (B + "mla/flashinfer_mla.py", "FlashInferMLABackend"),
    "TOKENSPEED_MLA": (B + "mla/tokenspeed_mla.py", "TokenspeedMLABackend"),
    "CUTLASS_MLA": (B + "mla/cutlass_mla.py", "CutlassMLABackend"),
    "FLASHMLA_SPARSE": (B + "mla/flashmla_sparse.py", "FlashMLASparseBackend"),
    "FLASH_ATTN_MLA_SPARSE": (B + "mla/flashattn_mla_sparse.py", "FlashAttnMLASparseBackend"),
    "FLASH_ATTN_MLA_SPARSE_FA4": (B + "mla/flashattn_mla_sparse.py", "FlashAttnMLASparseFA4Backend"),
    "FLASHINFER_MLA_SPARSE": (B + "mla/flashinfer_mla_sparse.py", "FlashInferMLASparseTRTLLMBackend"),
    "FLASHINFER_MLA_SPARSE_SM120": (B + "mla/flashinfer_mla_sparse.py",
                                    "FlashInferMLASparseSM120Backend"),
    "FLASHINFER_MLA_SPARSE_SM90": (B + "mla/flashinfer_mla_sparse_sm90.py",
                                   "FlashInferMLASparseSM90Backend"),
    "FLASHINFER_TS": (B + "flashinfer_ts.py", "FlashInferTSBackend"),
    "KIMI_K3_KV_BALANCED_MLA": ("vllm/models/kimi_k3/nvidia/kv_balanced_mla/backend.py",
                                "KimiK3KvBalancedMLABackend"),
}
#: The first release of a backend of ``BACKENDS`` that is not in every recorded release.
SINCE: dict[str, str] = {"FLASHINFER_TS": "0.34.0", "KIMI_K3_KV_BALANCED_MLA": "0.34.0"}
#: Members of ``AttentionBackendEnum`` the table leaves out on purpose, and why.
#: The role's kernels that are no backend: engine-start checks (gates with no class to read), each with why.
START_CHECKS: dict[str, str] = {
    "vllm_worker_init": "Worker.init_device's dtype check (CudaPlatform.check_if_supports_dtype), before "
                        "any backend",
    "vllm_triton_attn_init": "TritonAttentionImpl.__init__'s KV-dtype checks, after TRITON_ATTN is chosen",
    "vllm_triton_mla_init": "TritonMLAImpl.__init__'s KV-dtype checks, after TRITON_MLA is chosen",
}
NOT_IMPORTED: dict[str, str] = {
    **dict.fromkeys(("FLASH_ATTN_DIFFKV", "TRITON_ATTN_DIFFKV"),
                    "CUDA, but for a V head size other than K's, an input the matrix does not model"),
    **dict.fromkeys(("ROCM_ATTN", "ROCM_SEGMENTED_ATTN", "ROCM_AITER_MLA", "ROCM_AITER_TRITON_MLA",
                     "ROCM_AITER_FA", "ROCM_AITER_MLA_SPARSE", "ROCM_FLASHMLA_SPARSE_DSV4",
                     "ROCM_FLASHMLA_SPARSE_DSV41", "ROCM_AITER_UNIFIED_ATTN", "ROCM_OCTAVE"), "ROCm"),
    **dict.fromkeys(("CPU_ATTN", "CPU_MLA", "AMX_MLA"), "CPU"),
    "XPU_MLA_SPARSE": "XPU",
    **dict.fromkeys(("TRITON_FLASH_ATTN", "TRITON_FLASHINFER"),
                    "CUDA and modelled, but a composite (create_composite_attention_backend, composite.py) "
                    "built by code, whose class body states nothing: its parts are FLASH_ATTN or FLASHINFER "
                    "and TRITON_ATTN, read here"),
    "TORCH_SDPA": "a tag of the vision encoders (no class: its registry path is empty)",
    **dict.fromkeys(("FLASHMLA_SPARSE_DSV4", "FLASHINFER_MLA_SPARSE_DSV4", "FLASHMLA_SPARSE_DSV41",
                     "FLASHINFER_MLA_SPARSE_DSV41", "FLASHMLA_MEGA_ATTN_DSV41", "MINIMAX_M3_SPARSE",
                     "CUTLASS_MSA", "TRITON_MSA", "STEP5_DSA"),
                    "a model's own attention (DeepSeek-V4/V4.1, MiniMax M3, Step5), chosen by its layer"),
    "HPC_ATTN": "needs the hpc-ops package (Hy3 on Hopper), not a dependency of the wheel",
    "ULTRAQUANT": "its own KV format (ultraquant_4bit)",
    "NO_ATTENTION": "attention-free layers",
    "CUSTOM": "a placeholder for a registered third-party backend (no path)",
}
#: Where base classes named in the files above are defined.
BASES: dict[str, str] = {
    "AttentionBackend": "vllm/v1/attention/backend.py",
    "MLACommonBackend": "vllm/model_executor/layers/attention/mla_attention.py",
}


def torch_dtypes(axes_text: str) -> dict[str, str]:
    """The torch dtype names (``float16``, ``half``, ...) with their dtype-axis values: the axis's spellings.

    A ``torch.`` word counts without its prefix; the bare words as they are.
    """
    spellings = yaml.safe_load(axes_text)["axes"]["dtype"].get("spellings", {})
    return {str(word).removeprefix("torch."): str(value) for word, value in spellings.items()}


#: The dtype axis's torch words, read once (the sources name torch.float16, torch.bfloat16, ...).
TORCH_DTYPES = torch_dtypes(AXES.read_text(encoding="utf-8"))
#: A head size the head_dim axis does not list is written as a one-value range (``"[320, 320]"``).
ONE_VALUE_RANGE = re.compile(r"\[(\d+), *(\d+)\]")
FIELDS = ("supported_dtypes", "supported_kv_cache_dtypes", "head_sizes", "block_sizes")
METHODS = {"get_supported_head_sizes": "head_sizes", "get_supported_kernel_block_sizes": "block_sizes"}


class TableError(ValueError):
    """The sources or the recorded table do not have the expected shape."""


def _literal(node: ast.expr) -> list[object] | None:
    """A list literal of torch dtypes, strings, ints or MultipleOf(n); None for anything else."""
    if not isinstance(node, ast.List):
        return None
    out: list[object] = []
    for item in node.elts:
        if isinstance(item, ast.Constant) and isinstance(item.value, str | int):
            out.append(item.value)
        elif (isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name)
              and item.value.id == "torch"):
            if item.attr not in TORCH_DTYPES:
                return None
            out.append(TORCH_DTYPES[item.attr])
        elif (isinstance(item, ast.Call) and isinstance(item.func, ast.Name)
              and item.func.id == "MultipleOf" and len(item.args) == 1
              and isinstance(item.args[0], ast.Constant)):
            out.append({"multiple_of": item.args[0].value})
        else:
            return None
    return out


def _class_facts(cls: ast.ClassDef) -> dict[str, dict[str, Any]]:
    """What a class body states literally: field -> {value, line} (value None: computed by code)."""
    found: dict[str, dict[str, Any]] = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign | ast.Assign):
            targets = [stmt.target] if isinstance(stmt, ast.AnnAssign) else stmt.targets
            for target in targets:
                if isinstance(target, ast.Name) and target.id in FIELDS[:2] and stmt.value is not None:
                    found[target.id] = {"value": _literal(stmt.value), "line": stmt.lineno}
        elif isinstance(stmt, ast.FunctionDef) and stmt.name in METHODS:
            returns = [n for n in ast.walk(stmt) if isinstance(n, ast.Return) and n.value is not None]
            value = _literal(returns[0].value) if len(returns) == 1 and returns[0].value else None
            found[METHODS[stmt.name]] = {"value": value, "line": stmt.lineno}
    return found


def _classes(src: Path, rel: str) -> dict[str, ast.ClassDef]:
    path = src / rel
    if not path.is_file():
        raise TableError(f"{path}: not found (unpack the wheel's vllm/ sources under --vllm-src)")
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def release(src: Path) -> tuple[str, str]:
    """The version and (short) commit of the sources at ``src``, from ``vllm/_version.py``."""
    path = src / "vllm" / "_version.py"
    if not path.is_file():
        raise TableError(f"{path}: not found (unpack the wheel's vllm/ sources under --vllm-src)")
    text = path.read_text(encoding="utf-8")
    version = re.search(r"^__version__ = version = '([^']+)'", text, re.MULTILINE)
    commit = re.search(r"^__commit_id__ = commit_id = 'g?([0-9a-f]+)'", text, re.MULTILINE)
    if version is None or commit is None:
        raise TableError(f"{path}: no __version__ / __commit_id__ line")
    return version[1], commit[1][:9]


def expected_backends(version: str) -> list[str]:
    """The names of ``BACKENDS`` a table of vLLM ``version`` holds."""
    return [name for name in BACKENDS
            if name not in SINCE or _version_key(version) >= _version_key(SINCE[name])]


def registry_members(src: Path) -> dict[str, str | None]:
    """``AttentionBackendEnum``'s members and their class paths (None: no path), read with ast."""
    path = src / B / "registry.py"
    if not path.is_file():
        raise TableError(f"{path}: not found (unpack the wheel's vllm/ sources under --vllm-src)")
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    enum = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AttentionBackendEnum"),
                None)
    if enum is None:
        raise TableError(f"{path}: no class AttentionBackendEnum")
    members: dict[str, str | None] = {}
    for stmt in enum.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = ast.literal_eval(stmt.value)
            members[stmt.targets[0].id] = value or None
    return members


def check_registry(src: Path, version: str) -> None:
    """Fail where the release's members and this tool's records disagree (see the module docstring)."""
    members = registry_members(src)
    unknown = [name for name in members if name not in BACKENDS and name not in NOT_IMPORTED]
    if unknown:
        raise TableError(f"vLLM {version}: AttentionBackendEnum member(s) {', '.join(unknown)} have no "
                         "record here: add each to BACKENDS (file, class) or to NOT_IMPORTED (why)")
    missing = [name for name in expected_backends(version) if name not in members]
    if missing:
        raise TableError(f"vLLM {version}: {', '.join(missing)} of BACKENDS not in AttentionBackendEnum "
                         "(removed? record the release it left in SINCE's stead)")
    for name in expected_backends(version):
        rel, cls_name = BACKENDS[name]
        want = rel.removesuffix(".py").replace("/", ".") + "." + cls_name
        if members[name] != want:
            raise TableError(f"vLLM {version}: {name} is {members[name]} in the registry, not {want}")


def extract(src: Path) -> dict[str, Any]:
    """The table, read from the unpacked sources at ``src`` (the directory that holds ``vllm/``)."""
    version, commit = release(src)
    check_registry(src, version)
    out: dict[str, Any] = {}
    for name in expected_backends(version):
        rel, cls_name = BACKENDS[name]
        facts: dict[str, Any] = {}
        chain: list[str] = []
        here_rel, here = rel, cls_name
        while here:
            classes = _classes(src, here_rel)
            node = classes.get(here)
            if node is None:
                raise TableError(f"{here_rel}: class {here} not found")
            chain.append(f"{here_rel}:{node.lineno} {here}")
            for field, fact in _class_facts(node).items():
                facts.setdefault(field, {**fact, "path": here_rel})
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            base = bases[0] if bases else ""
            if base in classes:
                here = base
            elif base in BASES:
                here_rel, here = BASES[base], base
            else:
                here = ""
        out[name] = {"class": chain[0], "chain": chain, **{f: facts.get(f) for f in FIELDS}}
    return {"vllm": {"version": version, "commit": commit},
            "about": "vLLM CUDA attention-backend class attributes, read with ast by "
                     "tools/import_vllm_backends.py; value null = computed by code (see the hand-written "
                     "rules)",
            "backends": out}


def load_table(path: Path = TABLE) -> dict[str, Any]:
    """Read the recorded table and check that it names every backend of its release."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    want = expected_backends(data.get("vllm", {}).get("version", ""))
    if set(data.get("backends", {})) != set(want):
        raise TableError(f"{path}: backends differ from {sorted(want)}")
    return data


def _as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else [value]


def _head(value: object) -> object:
    """A head_dim list entry as an int where it names one value (``"[320, 320]"`` is 320)."""
    match = ONE_VALUE_RANGE.fullmatch(value) if isinstance(value, str) else None
    if match is not None and match[1] == match[2]:
        return int(match[1])
    return value


def check(table: Mapping[str, Any], kernels_text: str, axes_text: str) -> list[str]:
    """Where the YAML's base grants disagree with the table (empty: none)."""
    kernels = yaml.safe_load(kernels_text)["kernels"]
    kv = yaml.safe_load(axes_text)["axes"]["kv_cache_dtype"]
    kv_axis = {*kv["values"], *kv.get("spellings", {})}
    problems: list[str] = []
    for name, facts in table["backends"].items():
        kernel = kernels.get("vllm_" + name.lower())
        if kernel is None:
            problems.append(f"{name}: no kernel vllm_{name.lower()}")
            continue
        base = next((r["grant"] for r in kernel["rules"] if r["id"].endswith(".base")), None)
        if base is None:
            problems.append(f"{name}: no base grant")
            continue
        where = f"{name} ({facts['class']})"
        dtypes = facts["supported_dtypes"]
        if dtypes and dtypes["value"] is not None and sorted(map(str, _as_list(base.get("dtype")))) != sorted(
                dtypes["value"]):
            problems.append(f"{where}: dtype {base.get('dtype')} != {dtypes['value']} "
                            f"({dtypes['path']}:{dtypes['line']})")
        kv = facts["supported_kv_cache_dtypes"]
        if kv and kv["value"] is not None:
            want = sorted(v for v in kv["value"] if isinstance(v, str) and v in kv_axis)
            got = sorted(str(v) for v in _as_list(base.get("kv_cache_dtype")))
            if got != want:
                problems.append(f"{where}: kv_cache_dtype {got} != {want} ({kv['path']}:{kv['line']})")
        heads = facts["head_sizes"]
        declared = sorted(map(_head, _as_list(base.get("head_dim"))), key=str)
        if heads and heads["value"] and "head_dim" in base and declared != sorted(heads["value"], key=str):
            problems.append(f"{where}: head_dim {base['head_dim']} != {heads['value']} "
                            f"({heads['path']}:{heads['line']})")
        blocks = facts["block_sizes"]
        if blocks and blocks["value"] and "tokens_per_block" in base:
            # vLLM reads a block list as "a multiple of any entry" (backend.py:122-138): the smallest
            moduli = [min(v["multiple_of"] if isinstance(v, dict) else v for v in blocks["value"])]
            got_mod = [v["multiple_of"] for v in _as_list(base["tokens_per_block"]) if isinstance(v, dict)]
            if got_mod != moduli:
                problems.append(f"{where}: tokens_per_block {base['tokens_per_block']} != multiples of "
                                f"{moduli} ({blocks['path']}:{blocks['line']})")
    problems.extend(_unrecorded(table, kernels))
    return problems


def _unrecorded(table: Mapping[str, Any], kernels: Mapping[str, Any]) -> list[str]:
    """The YAML's backend kernels the table has no record of, and that no entry here leaves out on purpose.

    A kernel the check skipped silently was a new backend whose facts nobody compared.
    """
    version = table["vllm"]["version"]
    problems = []
    for kernel in kernels:
        name = kernel.removeprefix("vllm_").upper()
        if (not kernel.startswith("vllm_") or name in table["backends"] or name in NOT_IMPORTED
                or kernel in START_CHECKS):
            continue
        if name in BACKENDS and name not in expected_backends(version):
            continue  # a backend of a later release (SINCE)
        problems.append(
            f"{name}: kernel {kernel} has no record in vLLM {version}'s table "
            f"(capabilities/evidence/sources/{table_path(version).name}); add it to BACKENDS (file, class) "
            "or NOT_IMPORTED (why) of tools/import_vllm_backends.py, then re-read the sources: "
            "python tools/import_vllm_backends.py extract --vllm-src DIR --write")
    return problems


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 ok, 1 drift with --check, 2 bad input)."""
    parser = argparse.ArgumentParser(prog="import_vllm_backends.py", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the YAML disagrees with the table")
    parser.add_argument("--release", default=MODELLED, choices=RELEASES,
                        help=f"--check: the release whose table is compared (default {MODELLED})")
    sub = parser.add_subparsers(dest="command")
    ext = sub.add_parser("extract", help="read the sources and print the table as JSON")
    ext.add_argument("--vllm-src", type=Path, required=True, help="directory holding the wheel's vllm/")
    ext.add_argument("--write", action="store_true", help="write the table instead of printing it")
    args = parser.parse_args(argv)
    try:
        if args.command == "extract":
            table = extract(args.vllm_src)
            emit_table(table, table_path(table["vllm"]["version"]), write=args.write)
            return 0
        problems = check(load_table(table_path(args.release)), KERNELS.read_text(encoding="utf-8"),
                         AXES.read_text(encoding="utf-8"))
    except (TableError, OSError, KeyError) as exc:
        sys.stderr.write(f"import_vllm_backends.py: {exc}\n")
        return 2
    for line in problems:
        sys.stdout.write(line + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(run())
