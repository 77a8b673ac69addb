"""tools/import_vllm_backends.py: the recorded class-attribute table and the YAML agree (drift check)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from scripts import load_script

ROOT = Path(__file__).resolve().parent.parent
#: vLLM 0.33.0's sources, unpacked from its wheel (docs/vllm-differential.md says how); the test that
#: re-reads them runs only where this names a directory holding ``vllm/``.
SRC = Path(os.environ.get("CAPMATRIX_VLLM_SRC", "") or "vllm-0.33.0-sources-not-given")


TOOL = load_script("tools/import_vllm_backends.py")


def test_yaml_matches_recorded_table() -> None:
    table = TOOL.load_table()
    assert table["vllm"] == {"version": "0.33.0", "commit": "4ba787ec9"}
    kernels = TOOL.KERNELS.read_text(encoding="utf-8")
    assert TOOL.check(table, kernels, TOOL.AXES.read_text(encoding="utf-8")) == []
    assert TOOL.run(["--check"]) == 0


def test_check_catches_drift() -> None:
    """A changed dtype list, KV list, head list or block modulus in the YAML is reported with its line."""
    table = TOOL.load_table()
    kernels = TOOL.KERNELS.read_text(encoding="utf-8")
    axes = TOOL.AXES.read_text(encoding="utf-8")
    for old, new, needle in [
        ("kv_cache_dtype: [fp8, fp8_e4m3]", "kv_cache_dtype: [fp8]", "TOKENSPEED_MLA"),
        ("tokens_per_block: {multiple_of: 128}", "tokens_per_block: {multiple_of: 64}", "CUTLASS_MLA"),
        # a one-value range stands for its value; a wider one is not the value
        ("head_dim: *mla_head_sizes", 'head_dim: ["[320, 336]", 512, 576]', "CUTLASS_MLA"),
        ("head_dim: *mla_head_sizes", "head_dim: [512, 576]", "CUTLASS_MLA"),
        ("sm: [120, 121]\n          dtype: bf16\n", "sm: [120, 121]\n          dtype: [fp16, bf16]\n",
         "B12X"),
    ]:
        # the edit goes into the named backend's kernel (another kernel may hold the same words)
        at = kernels.index(f"  vllm_{needle.lower()}:")
        assert old in kernels[at:], old
        before = TOOL.check(table, kernels, axes)  # empty on the shipped matrix (the test above)
        problems = [p for p in TOOL.check(table, kernels[:at] + kernels[at:].replace(old, new, 1), axes)
                    if p not in before]
        assert len(problems) == 1, problems
        assert problems[0].startswith(needle), problems


@pytest.mark.skipif(
    not (SRC / "vllm").is_dir(),
    reason="set CAPMATRIX_VLLM_SRC to vLLM 0.33.0's unpacked sources (docs/vllm-differential.md) to run",
)
def test_extract_reproduces_the_record() -> None:
    recorded = json.loads(TOOL.TABLE.read_text(encoding="utf-8"))
    assert TOOL.extract(SRC) == recorded


def test_each_release_table_names_its_backends() -> None:
    """0.33.0's table and 0.34.0's each hold the backends of their release (0.34.0 adds two members)."""
    for version in TOOL.RELEASES:
        table = TOOL.load_table(TOOL.table_path(version))
        assert table["vllm"]["version"] == version
        assert list(table["backends"]) == sorted(TOOL.expected_backends(version))
    new = set(TOOL.expected_backends("0.34.0")) - set(TOOL.expected_backends("0.33.0"))
    assert new == {"FLASHINFER_TS", "KIMI_K3_KV_BALANCED_MLA"}
    assert TOOL.load_table(TOOL.table_path("0.34.0"))["vllm"] == {"version": "0.34.0", "commit": "62d4bc3c7"}


def _sources(root: Path, version: str, members: dict[str, str]) -> Path:
    """A stand-in for unpacked sources: ``vllm/_version.py`` and a registry with ``members``."""
    (root / "vllm" / "v1/attention/backends").mkdir(parents=True)
    (root / "vllm" / "_version.py").write_text(
        f"__version__ = version = '{version}'\n__commit_id__ = commit_id = 'gabcdef012'\n", encoding="utf-8")
    body = "".join(f"    {name} = {path!r}\n" for name, path in members.items())
    (root / "vllm" / "v1/attention/backends/registry.py").write_text(
        f"class AttentionBackendEnum:\n{body}", encoding="utf-8")
    return root


def _registry(version: str) -> dict[str, str]:
    members = {name: rel.removesuffix(".py").replace("/", ".") + "." + cls
               for name, (rel, cls) in TOOL.BACKENDS.items() if name in TOOL.expected_backends(version)}
    return {**members, **dict.fromkeys(TOOL.NOT_IMPORTED, "x.y.Z")}


def test_extract_fails_on_a_member_it_has_no_record_for(tmp_path: Path) -> None:
    """A release member neither read (BACKENDS) nor left out on purpose (NOT_IMPORTED) stops the import,
    as does a recorded backend the release lacks or a registry path that moved; none is skipped."""
    src = _sources(tmp_path / "new", "0.34.0", {**_registry("0.34.0"), "NEW_BACKEND": "vllm.x.NewBackend"})
    with pytest.raises(TOOL.TableError, match="NEW_BACKEND have no record here"):
        TOOL.extract(src)
    assert TOOL.run(["extract", "--vllm-src", str(src)]) == 2
    gone = _registry("0.34.0")
    del gone["FLASHINFER_TS"]
    with pytest.raises(TOOL.TableError, match="FLASHINFER_TS of BACKENDS not in AttentionBackendEnum"):
        TOOL.check_registry(_sources(tmp_path / "gone", "0.34.0", gone), "0.34.0")
    moved = {**_registry("0.33.0"), "FLASH_ATTN": "vllm.elsewhere.FlashAttentionBackend"}
    with pytest.raises(TOOL.TableError, match=r"FLASH_ATTN is vllm\.elsewhere"):
        TOOL.check_registry(_sources(tmp_path / "moved", "0.33.0", moved), "0.33.0")
    # 0.33.0 has neither 0.34.0 member, and that is no error
    TOOL.check_registry(_sources(tmp_path / "old", "0.33.0", _registry("0.33.0")), "0.33.0")


def test_check_names_a_backend_kernel_the_table_has_no_record_of() -> None:
    """A new vllm_<name> kernel: no table entry and no reason to leave it out is drift, with what to do;
    a member the tool leaves out on purpose (a composite) or a later release's backend is not."""
    table = TOOL.load_table()
    kernels = TOOL.KERNELS.read_text(encoding="utf-8")
    axes = TOOL.AXES.read_text(encoding="utf-8")
    new = kernels.replace("kernels:\n", "kernels:\n  vllm_test_attn:\n    description: t\n    rules: []\n", 1)
    problems = [p for p in TOOL.check(table, new, axes) if p not in TOOL.check(table, kernels, axes)]
    assert len(problems) == 1
    assert problems[0].startswith("TEST_ATTN: kernel vllm_test_attn has no record in vLLM 0.33.0's table")
    assert "extract --vllm-src DIR --write" in problems[0]
    assert "TRITON_FLASH_ATTN" in TOOL.NOT_IMPORTED  # composites are modelled, on purpose without a record
    assert not [p for p in TOOL.check(table, kernels, axes) if "FLASHINFER_TS" in p]  # 0.34.0's, SINCE
