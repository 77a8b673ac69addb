"""A matrix with one engine's file broken: isolated at load (``load(path, isolate=True)``, the CLI's
``query`` and ``select``), while ``load`` and ``validate`` still fail on it."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

import capmatrix
from capmatrix.authoring import loader
from capmatrix.authoring.cli import run
from capmatrix.engine import sglang, trtllm, vllm
from capmatrix.errors import CapabilityErrors

ROOT = Path(__file__).resolve().parent.parent
GATES = "kernels/trtllm_gates.yaml"
TYPO = ("spec_dec: one_model\n", "spec_dec: one_modle\n")


def _broken(tmp_path: Path, file: str = GATES, edit: tuple[str, str] = TYPO) -> tuple[Path, int, int]:
    """A copy of the shipped matrix with ``edit`` made once in ``file``; the line and column it lands on."""
    root = tmp_path / "caps"
    shutil.copytree(ROOT / "capabilities", root, ignore=shutil.ignore_patterns("evidence"))
    path = root / file
    text = path.read_text(encoding="utf-8")
    at = text.index(edit[0])
    path.write_text(text.replace(edit[0], edit[1], 1), encoding="utf-8")
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return root, line, column


def _vllm(matrix: capmatrix.Matrix | None) -> str:
    return vllm.select_backend(capability=(12, 0), head_size=576, dtype="bf16", kv_cache_dtype="fp8",
                               block_size=None, use_mla=True, use_sparse=True, matrix=matrix)


def _sglang(matrix: capmatrix.Matrix | None) -> sglang.Resolved:
    return sglang.resolve(capability=(12, 0), model=sglang.SGLangModel(
        "DeepseekV32ForCausalLM", mla=True, dsa=True), matrix=matrix)


def _bind(matrix: capmatrix.Matrix | None) -> object:
    return trtllm.bind_spec_dec(spec_dec="two_model", sm=90, is_mla=False, is_draft_model=True,
                                use_chain_drafter=True, attention_backend="trtllm", matrix=matrix)


def test_the_other_engines_answer_and_the_broken_one_raises_its_problem(tmp_path: Path) -> None:
    root, line, column = _broken(tmp_path)
    with pytest.raises(CapabilityErrors):
        capmatrix.load(root)  # a plain load still fails the whole matrix
    matrix = capmatrix.load(root, isolate=True)
    shipped = capmatrix.load()
    assert _vllm(matrix) == _vllm(shipped)
    assert _sglang(matrix) == _sglang(shipped)
    assert set(matrix.left_out) == {"tensorrt_llm"}
    for ask in (_bind, lambda m: capmatrix.select("trtllm_generation", capmatrix.KernelQuery(sm=90), m),
                lambda m: capmatrix.resolve(capmatrix.KernelQuery("fmha_v2", sm=90), m)):
        with pytest.raises(CapabilityErrors) as caught:
            ask(matrix)
        (problem,) = caught.value.errors
        assert (Path(problem.path).name, problem.line, problem.column) == (
            "trtllm_gates.yaml", line, column + len("spec_dec: "))
        assert "one_modle" in problem.message
    # What the engine left out is its own: no other engine's kernel or role went with it.
    engines = {k.engine for k in shipped.kernels.values() if k.name in matrix.quarantine}
    assert engines == {"tensorrt_llm"}
    gone = {k for k in shipped.kernels if k not in matrix.kernels}
    assert gone == set(matrix.quarantine) & set(shipped.kernels)


def test_a_yaml_syntax_error_in_an_engine_file_is_isolated_too(tmp_path: Path) -> None:
    root, line, _column = _broken(tmp_path, edit=("    engine: tensorrt_llm\n",
                                                  "    engine: tensorrt_llm\n\tbroken: indented by a tab\n"))
    with pytest.raises(CapabilityErrors):
        capmatrix.load(root)
    matrix = capmatrix.load(root, isolate=True)
    assert _vllm(matrix) == _vllm(None)
    with pytest.raises(CapabilityErrors) as caught:
        _bind(matrix)
    assert all(Path(p.path).name == "trtllm_gates.yaml" and p.line is not None for p in caught.value.errors)
    assert min(p.line or 0 for p in caught.value.errors) >= line


@pytest.mark.parametrize(("file", "edit"), [
    ("kernels/xqa.yaml", ("sm: ", "sm_typo: ")),  # an engine-free kernel: every engine may use it
    ("axes.yaml", ("type: enum", "type: enun")),  # the universe
    ("roles.yaml", ("candidates: [", "candidates: [no_such_kernel, ")),  # roles of every engine
], ids=["engine-free-kernel", "axes", "roles"])
def test_a_problem_no_engine_owns_fails_the_whole_load(
    tmp_path: Path, file: str, edit: tuple[str, str]
) -> None:
    root, _line, _column = _broken(tmp_path, file, edit)
    with pytest.raises(CapabilityErrors) as plain:
        capmatrix.load(root)
    with pytest.raises(CapabilityErrors) as isolated:
        capmatrix.load(root, isolate=True)
    assert [p.as_dict() for p in isolated.value.errors] == [p.as_dict() for p in plain.value.errors]


def test_what_depends_on_a_broken_engine_file_raises_its_problem_too(tmp_path: Path) -> None:
    """vLLM's FlashInfer gate guards trtllm_gen (TensorRT-LLM's kernel, which vLLM's FlashInfer backend runs):
    with trtllm_gen.yaml broken, vLLM's choice raises that problem too; PyTorch's answers stay."""
    root, line, _column = _broken(tmp_path, "kernels/trtllm_gen.yaml", ("sm: ", "sm_typo: "))
    matrix = capmatrix.load(root, isolate=True)
    assert set(matrix.left_out) == {"tensorrt_llm"}
    with pytest.raises(CapabilityErrors) as caught:
        _vllm(matrix)
    assert {(Path(p.path).name, p.line) for p in caught.value.errors} == {("trtllm_gen.yaml", line)}
    assert "vllm_flashinfer" in matrix.quarantine
    query = capmatrix.KernelQuery(sm=90, model="llama")
    shipped = capmatrix.load()
    assert capmatrix.select("torch_sdpa", query, matrix) == capmatrix.select("torch_sdpa", query, shipped)


def test_the_cli_answers_the_other_engines_and_exits_2_for_the_broken_one(tmp_path: Path) -> None:
    root, line, column = _broken(tmp_path)
    good = ["select", "vllm_attention", "--sm", "120", "--model", "llama"]
    out, err = io.StringIO(), io.StringIO()
    shipped_status = run(good, out, err)
    shipped_answer = out.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert run([*good, "--matrix", str(root)], out, err) == shipped_status == 0
    assert out.getvalue().splitlines()[0] == shipped_answer.splitlines()[0]
    assert "engine tensorrt_llm left out" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    status = run(["select", "trtllm_generation", "--matrix", str(root), "--sm", "90", "--model", "llama"],
                 out, err)
    assert status == 2
    assert f"trtllm_gates.yaml:{line}:{column + len('spec_dec: ')}: " in err.getvalue()
    assert out.getvalue() == ""
    out, err = io.StringIO(), io.StringIO()
    assert run(["validate", str(root)], out, err) == 2  # validate still fails the matrix


def test_an_isolated_matrix_is_never_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _line, _column = _broken(tmp_path)
    cache = tmp_path / "cache"
    monkeypatch.delenv("CAPMATRIX_CACHE", raising=False)
    monkeypatch.setenv("CAPMATRIX_CACHE_DIR", str(cache))
    capmatrix.load(root, isolate=True)
    assert not list(cache.rglob("matrix-*.json"))
    calls: list[object] = []
    real = loader._parse

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loader, "_parse", counted)
    capmatrix.load(root, isolate=True)
    assert calls  # parsed again: nothing of the partial matrix was kept
