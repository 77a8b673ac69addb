"""``capmatrix select sglang_attention``: SGLang's whole resolution from the command line.

The command must answer as :func:`capmatrix.engine.sglang.resolve` does, and so as SGLang 0.5.23 did on
its own recorded cells (capabilities/evidence/sglang_0.5.23_selection.json.gz): the per-architecture
overrides from ``--model`` or ``--hf-config``, the rewritten page size and KV dtype, the refusal's stage
and text.
"""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from conftest import stride
from test_engine_sglang import RECORD, read

import capmatrix
from capmatrix.authoring.cli import run
from capmatrix.authoring.engine_records import normalised
from capmatrix.engine.sglang import SGLangModel, model_from_hf_config, resolve

ROOT = Path(__file__).resolve().parent.parent


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def record() -> tuple[dict[str, Any], list[tuple[dict[str, Any], dict[str, Any]]]]:
    return read(RECORD)


def _options(header: dict[str, Any], cell: dict[str, Any]) -> list[str]:
    """The command-line options of a recorded cell, its model aside."""
    spec = header["specs"][cell["spec"]]
    options = ["--sm", cell["capability"], "--sglang-kv-cache-dtype", cell["kv_cache_dtype"]]
    if cell["page_size"] is not None:
        options += ["--sglang-page-size", str(cell["page_size"])]
    if "speculative_algorithm" in spec:
        options += ["--sglang-spec", spec["speculative_algorithm"].lower()]
    if "speculative_eagle_topk" in spec:
        options += ["--sglang-topk", str(spec["speculative_eagle_topk"])]
    if cell["forced"] != "-":
        options += ["--sglang-backend", cell["forced"]]
    return options


def _recorded_form(data: dict[str, Any]) -> dict[str, Any]:
    """The command's ``sglang`` object in the record's form (a refusal at argument resolution: no values)."""
    values = {k: v for k, v in data.items() if k != "refused"}
    refused = data["refused"]
    if refused is None:
        return values
    shown = {"stage": refused["stage"], "text": normalised(refused["text"])}
    return {"refused": shown} if refused["stage"] == "server_args" else {**values, "refused": shown}


def _want(recorded: dict[str, Any]) -> dict[str, Any]:
    want = dict(recorded)
    if "refused" in want:
        want["refused"] = {"stage": want["refused"]["stage"], "text": normalised(want["refused"]["text"])}
    return want


@pytest.mark.sweep
def test_cli_equals_sglang_on_recorded_cells(
    record: tuple[dict[str, Any], list[tuple[dict[str, Any], dict[str, Any]]]], tmp_path: Path,
) -> None:
    """Every 229th recorded cell (``make exhaustive``: every cell; a spread over capabilities, models,
    speculative settings, KV dtypes, page sizes and forced backends, none of them split), asked through
    ``--hf-config``: SGLang's values, or its refusal's stage and text. (``capmatrix test`` compares every
    cell through the adapter; this is the command line's path to it.)"""
    header, rows = record
    configs = {}
    for name, config in header["models"].items():
        configs[name] = tmp_path / f"{name}.json"
        configs[name].write_text(json.dumps(config), encoding="utf-8")
    cells = [(cell, ans) for cell, ans in rows[::stride(229)] if "+" not in cell["forced"]]
    assert len(cells) > len(rows) // stride(229) // 2
    assert {cell["model"] for cell, _ in cells} == set(header["models"])
    stages = {ans["refused"]["stage"] for _, ans in cells if "refused" in ans}
    assert stages == {"server_args", "engine_start"}
    wrong = []
    for cell, recorded in cells:
        code, out, err = cli("select", "sglang_attention", "--hf-config", str(configs[cell["model"]]),
                             *_options(header, cell), "--json")
        assert code in (0, 1), err
        data = json.loads(out)
        got = _recorded_form(data["sglang"])
        if got != _want(recorded):
            wrong.append(f"{cell}: sglang={recorded} capmatrix={got}")
        assert (code == 1) == ("refused" in recorded)
        chosen = None if "refused" in recorded else f"sglang_{recorded['attention_backend']}"
        assert data["kernel"] == chosen
    assert not wrong, "\n".join(wrong[:10])


#: models.yaml entries and the recorded model of the same architecture.
SAME_ARCH = {"deepseek_v3": "deepseek_v3", "kimi_k2": "deepseek_v3", "deepseek_v3_2": "deepseek_v32",
             "gpt_oss_120b": "gpt_oss", "gpt_oss_20b": "gpt_oss", "llama3_1_8b": "llama",
             "llama3_1_70b": "llama", "qwen3_8b": "qwen3", "llama4_scout": "llama4"}


@pytest.mark.parametrize(("model", "recorded_as"), SAME_ARCH.items())
def test_model_option_reads_the_entry_architecture(
    record: tuple[dict[str, Any], list[tuple[dict[str, Any], dict[str, Any]]]], model: str, recorded_as: str,
) -> None:
    """``--model NAME`` answers as SGLang did for a config of the same architecture, on every recorded
    capability (no speculative decoding, KV auto, page size unset, no backend forced)."""
    _header, rows = record
    cells = [(c, a) for c, a in rows if c["model"] == recorded_as and c["spec"] == "none"
             and c["kv_cache_dtype"] == "auto" and c["page_size"] is None and c["forced"] == "-"]
    assert len(cells) == 9
    for cell, recorded in cells:
        code, out, err = cli("select", "sglang_attention", "--model", model, "--sm", cell["capability"],
                             "--json")
        assert code in (0, 1), err
        assert _recorded_form(json.loads(out)["sglang"]) == _want(recorded), cell


def test_gb200_deepseek_v3_is_trtllm_mla() -> None:
    """The issue's case: SGLang's DeepSeek-V3 override on major 10, not the generic default."""
    code, out, _ = cli("select", "sglang_attention", "--gpu", "GB200", "--model", "deepseek_v3")
    assert code == 0
    assert out.splitlines()[0] == "sglang_attention: sglang_trtllm_mla"
    want = resolve(capability=(10, 0), model=SGLangModel("DeepseekV3ForCausalLM", mla=True))
    assert want.attention_backend == "trtllm_mla"
    code, out, _ = cli("select", "sglang_attention", "--gpu", "GB200", "--model", "deepseek-ai/DeepSeek-R1",
                       "--json")
    data = json.loads(out)
    assert data["kernel"] == "sglang_trtllm_mla"
    assert data["sglang"] == asdict(want)


@pytest.mark.no_cover  # a whole workflow; the smaller tests cover its lines
def test_every_shipped_model_records_its_architecture() -> None:
    """Each entry of models.yaml gives SGLang an architecture, and the same reading as its own config's."""
    matrix = capmatrix.load()
    for model in matrix.models.values():
        assert model.hf_config is not None, model.name
        archs = model.hf_config.get("architectures")
        assert isinstance(archs, list), model.name
        assert archs, model.name
        code, out, err = cli("select", "sglang_attention", "--model", model.name, "--sm", "90", "--json")
        assert code in (0, 1), err
        assert json.loads(out)["model"] == asdict(model_from_hf_config(dict(model.hf_config)))


def test_refusal_shows_stage_text_and_rule() -> None:
    code, out, _ = cli("select", "sglang_attention", "--sm", "120", "--model", "deepseek_v3",
                       "--sglang-backend", "trtllm_mla", "--sglang-kv-cache-dtype", "fp8_e5m2")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == ("sglang_attention: no supported candidate: SGLang 0.5.23 refuses at argument "
                        "resolution (ServerArgs.resolve_once raises)")
    want = resolve(capability=(12, 0), model=SGLangModel("DeepseekV3ForCausalLM", mla=True),
                   attention_backend="trtllm_mla", kv_cache_dtype="fp8_e5m2")
    assert want.refused is not None
    assert f"  SGLang says: {want.refused.text}" in lines
    rule = capmatrix.load().rule(want.refused.rule)
    assert f"    - {rule.id} ({rule.location.path}:{rule.location.line})" in lines
    assert " ".join(rule.reason.split()) not in out
    _code, explained, _ = cli("select", "sglang_attention", "--sm", "120", "--model", "deepseek_v3",
                              "--sglang-backend", "trtllm_mla", "--sglang-kv-cache-dtype", "fp8_e5m2",
                              "--explain")
    assert " ".join(rule.reason.split()) in explained


def test_engine_start_refusal_keeps_what_resolution_set() -> None:
    code, out, _ = cli("select", "sglang_attention", "--sm", "12.0", "--sglang-model-arch", "olmo2",
                       "--explain")
    assert code == 1
    assert "refuses at engine start" in out.splitlines()[0]
    assert "  after resolving: --attention-backend fa3 " in out
    gate = capmatrix.load().kernels["sglang_fa3_factory"]
    assert f"    - sglang_fa3_factory ({gate.location.path}:{gate.location.line})" in out


def test_axis_options_set_the_model_flags() -> None:
    """``--sglang-dsa true`` makes DeepSeek-V3 a DSA model: SGLang's DSA override then chooses."""
    code, out, _ = cli("select", "sglang_attention", "--sm", "90", "--model", "deepseek_v3", "--sglang-dsa",
                       "true", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["model"]["dsa"] is True
    assert data["kernel"] == "sglang_dsa"


def test_topk_words_and_numbers() -> None:
    """``--sglang-topk one`` is SGLang's 1; a number is passed as typed (SGLang echoes it)."""
    argv = ("select", "sglang_attention", "--sm", "90", "--model", "llama", "--sglang-spec", "eagle",
            "--json")
    one = json.loads(cli(*argv, "--sglang-topk", "one")[1])
    assert one["sglang"] == json.loads(cli(*argv, "--sglang-topk", "1")[1])["sglang"]
    assert one["arguments"]["speculative_eagle_topk"] == 1
    assert json.loads(cli(*argv, "--sglang-topk", "unset")[1])["arguments"]["speculative_eagle_topk"] is None
    assert json.loads(cli(*argv, "--sglang-topk", "4")[1])["sglang"]["speculative_eagle_topk"] == 4


def test_axes_sglang_does_not_read_are_named() -> None:
    code, out, _ = cli("select", "sglang_attention", "--sm", "90", "--model", "llama", "--head-dim", "64")
    assert code == 0
    assert out.splitlines()[-1] == "  not read by SGLang's resolution: head_dim"
    # an axis given by an engine's word for it (vLLM's vllm_kv_cache_dtype) too
    _code, out, _ = cli("select", "sglang_attention", "--sm", "90", "--model", "llama",
                        "--vllm-kv-cache-dtype", "fp8")
    assert out.splitlines()[-1] == "  not read by SGLang's resolution: kv_cache_dtype"


@pytest.mark.parametrize(("argv", "words"), [
    (["--sm", "90"], "give --model NAME, --hf-config PATH or --sglang-model-arch"),
    (["--model", "llama"], "give --gpu NAME (or all) or --sm SM"),
    (["--sm", "90", "--model", "llama", "--sglang-spec", "*"], "give --sglang-spec a value"),
    (["--sm", "90", "--model", "llama", "--sglang-topk", "many"], "give it (e.g. --sglang-topk 4)"),
    (["--sm", "90", "--model", "llama", "--sglang-topk", "0"], "--speculative-eagle-topk is a number"),
    (["--sm", "90", "--model", "llama", "--sglang-split", "true"], "prefill_attention_backend=..."),
    (["--sm", "90", "--model", "nosuch"], "unknown model 'nosuch'"),
    (["--sm", "90", "--model", "llama", "--sglang-page-size", "0"], "argument 'page_size' expects"),
    (["--sm", "75", "--model", "gpt_oss_120b"], "--sm 75: not a device the matrix models SGLang on"),
])
def test_bad_input_exits_2(argv: list[str], words: str) -> None:
    code, out, err = cli("select", "sglang_attention", *argv)
    assert code == 2
    assert out == ""
    assert words in err


def test_a_config_without_architectures_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
                                  "hidden_size": 4096}), encoding="utf-8")
    code, out, err = cli("select", "sglang_attention", "--sm", "90", "--hf-config", str(config))
    assert code == 2
    assert out == ""
    assert "config['architectures']" in err
    assert "a non-empty list of architecture names" in err


def test_model_without_architecture_is_refused(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "capabilities", tmp_path / "capabilities")
    models = tmp_path / "capabilities/models.yaml"
    text = models.read_text(encoding="utf-8")
    models.write_text(text.replace("architectures: [MistralForCausalLM],", "", 1), encoding="utf-8")
    code, _out, err = cli("select", "sglang_attention", "--matrix", str(tmp_path / "capabilities"),
                          "--sm", "90", "--model", "mistral")
    assert code == 2
    assert "--model mistral (capabilities/models.yaml:" in err or "--model mistral (" in err
    assert "records no architecture" in err


def test_bad_architecture_is_a_validation_error(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "capabilities", tmp_path / "capabilities")
    models = tmp_path / "capabilities/models.yaml"
    text = models.read_text(encoding="utf-8")
    models.write_text(text.replace("architectures: [MistralForCausalLM]", "architectures: [Mistral For]", 1),
                      encoding="utf-8")
    code, _out, err = cli("validate", str(tmp_path / "capabilities"))
    assert code == 2
    assert "models.mistral.hf_config.architectures[0]: 'Mistral For'" in err


def test_other_roles_are_unchanged() -> None:
    """The generic default stays a role of its own for ``query``; other roles are selected as before."""
    code, out, _ = cli("select", "vllm_attention", "--sm", "90", "--model", "llama")
    assert code == 0
    assert out.startswith("vllm_attention: vllm_")
