"""Every reader of the role ``sglang_attention`` answers as SGLang does, over SGLang's own recorded cells.

``sglang_attention`` asks ``sglang_model_override`` first (``asks_first``): the loader composes it, so
Python's ``select``, the exported tables as the page's ask form evaluates them (``_ask.js`` under node)
and the generated C++ header (compiled with g++) all answer the per-architecture overrides. Each is held
to :func:`capmatrix.engine.sglang.resolve` (itself held to the record) on the record's cells with no
backend given where SGLang does not refuse: the role names the backend that SGLang's choice steps take.
One documented class differs, asserted as such: SGLang rewrites fa3 to triton for an ``fp8_e5m2`` KV
cache after the choice (``_State._attention_step``, overrides.py:1263-1270), a later pass the role does
not model. The record's cells run as a spread in ``make test`` and every one in ``make exhaustive``.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import stride
from test_engine_sglang import RECORD

import capmatrix
from capmatrix import KernelQuery
from capmatrix.authoring import render
from capmatrix.authoring.cli import run
from capmatrix.authoring.codegen import cpp_header
from capmatrix.authoring.codegen.cpp import _constant, _method, _type
from capmatrix.authoring.engine_records import read_record, resolve_cell, sglang_cell
from capmatrix.authoring.export import export
from capmatrix.engine import sglang

if TYPE_CHECKING:
    from collections.abc import Sequence

    from capmatrix.authoring.render import Document
    from capmatrix.matrix import Matrix

ROLE = sglang.ROLE
NODE = shutil.which("node")
GXX = shutil.which("g++")
#: Every STEP-th automatic cell of the record in ``make test`` (every cell in ``make exhaustive``).
STEP = 7
_NEEDS_TOOLS = pytest.mark.skipif(NODE is None or GXX is None,
                                  reason="node and g++ run the page's evaluator and the header")
#: One answer: the kernel chosen (None: no supported candidate) and the verdict.
Answer = tuple[str | None, str]
_SPECS = {None: "none", "EAGLE": "eagle", "NEXTN": "nextn"}

_HARNESS = """
const fs = require('fs'), vm = require('vm');
const [data, script, cases] = process.argv.slice(2).map((p) => fs.readFileSync(p, 'utf8'));
globalThis.window = {location: {hash: ''}};
globalThis.document = {getElementById: (id) => (id === 'ask-data' ? {textContent: data} : null)};
vm.runInThisContext(script);
const ask = window.capmatrixAsk;
process.stdout.write(JSON.stringify(JSON.parse(cases).map(function (c) {
  var s = ask.select(c.role, c.given, c.model);
  return [s.kernel, s.verdict];
})));
"""


def role_values(matrix: Matrix, model: sglang.SGLangModel, capability: str, *, kv: str = "auto",
                page: int | None = None, spec: str | None = None, topk: int | None = None) -> dict[str, Any]:
    """The role's axes for SGLang's server arguments, as ``sglang.resolve`` asks its roles."""
    major, minor = (int(p) for p in capability.split("."))
    values: dict[str, Any] = {
        "sm": major * 10 + minor, "attention": "mla" if model.mla else "gqa", "attention_sinks": model.sinks,
        "sglang_model_arch": matrix.axes["sglang_model_arch"].spellings.get(model.arch, "other"),
        "sglang_dsa": model.dsa, "sglang_hybrid_gdn": model.hybrid_gdn,
        "sglang_swa_pattern": model.swa_pattern, "sglang_spec": _SPECS[spec],
        "sglang_topk": {None: "unset", 1: "one"}.get(topk, "many"), "sglang_kv_cache_dtype": kv,
        "sglang_split": False,
    }
    if page is not None:
        values["sglang_page_size"] = page
    return values


#: A question: the role's axes and, or None, a model named.
Case = tuple[dict[str, Any], str | None]


def python_answers(matrix: Matrix, cases: Sequence[Case]) -> list[Answer]:
    out = []
    for values, model in cases:
        picked = capmatrix.select(ROLE, KernelQuery(model=model).replace(**values), matrix)
        out.append((picked.kernel, picked.verdict.value))
    return out


def page_answers(doc: Document, cases: Sequence[Case], tmp: Path) -> list[Answer]:
    """The page's evaluator (``_ask.js``, fed the page's embedded data) under node."""
    (tmp / "data.json").write_text(doc.ask_data, encoding="utf-8")
    (tmp / "cases.json").write_text(json.dumps([{"role": ROLE, "given": v, "model": m} for v, m in cases]),
                                    encoding="utf-8")
    (tmp / "harness.js").write_text(_HARNESS, encoding="utf-8")
    assert NODE is not None
    done = subprocess.run([NODE, str(tmp / "harness.js"), str(tmp / "data.json"),
                           str(Path(render.__file__).parent / "_ask.js"), str(tmp / "cases.json")],
                          capture_output=True, text=True, check=True, timeout=300)
    return [(kernel, verdict) for kernel, verdict in json.loads(done.stdout)]


def header_answers(data: dict[str, Any], cases: list[dict[str, Any]], tmp: Path) -> list[Answer]:
    """The generated header's ``select``, compiled with a driver that reads one query per line."""
    header = cpp_header(data, [], [ROLE], command="test")
    named = {a for k in data["roles"][ROLE]["candidates"] for a in data["kernels"][k]["relevant_axes"]}
    named.update(a for order in data["roles"][ROLE]["orders"] for box in order["when"] for a in box)
    axes = [a for a in data["axes"] if a in named]
    setters = []
    for i, axis in enumerate(axes):
        kind = data["axes"][axis]["type"]
        call = {"enum": f"q.{_method(axis)}(static_cast<{_type(axis)}>(v))",
                "bool": f"q.{_method(axis)}(v != 0)"}.get(kind, f"q.{_method(axis)}(v)")
        setters.append(f"    case {i}: {call}; break;")
    (tmp / "gen.h").write_text(header, encoding="utf-8")
    (tmp / "main.cpp").write_text("\n".join([
        '#include "gen.h"', "#include <cstdint>", "#include <iostream>", "#include <string>",
        "using namespace capmatrix;",
        "static void set(Query& q, std::size_t axis, std::int64_t v) {", "  switch (axis) {", *setters,
        "    default: break;", "  }", "}",
        "int main() {", "  std::string t;", "  for (;;) {", "    Query q;",
        "    for (std::size_t a = 0; a < kAxisCount; ++a) {",
        "      if (!(std::cin >> t)) { return 0; }",
        '      if (t == "none") { set(q, a, kNone); } else if (t != ".") { set(q, a, std::stoll(t)); }',
        "    }",
        f"    const Selection s = select(Role::{_constant(ROLE)}, q);",
        '    std::cout << (s.found ? to_string(s.kernel) : "-") << " " << to_string(s.verdict) << "\\n";',
        "  }", "}", "",
    ]), encoding="utf-8")
    assert GXX is not None
    subprocess.run([GXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1",
                    str(tmp / "main.cpp"), "-o", str(tmp / "main")],
                   check=True, capture_output=True, text=True, timeout=600)

    def token(axis: str, value: Any) -> str:
        spec = data["axes"][axis]
        if spec["type"] == "enum":
            return str(spec["values"].index(value))
        return "none" if value == "none" else str(int(value))

    lines = [" ".join(token(a, values[a]) if a in values else "." for a in axes) for values in cases]
    done = subprocess.run([str(tmp / "main")], input="\n".join(lines) + "\n", capture_output=True, text=True,
                          check=True, timeout=300)
    answers = [line.split(" ") for line in done.stdout.splitlines()]
    assert len(answers) == len(cases)
    return [(None if kernel == "-" else kernel, verdict) for kernel, verdict in answers]


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return capmatrix.load()


@pytest.fixture(scope="module")
def data(matrix: Matrix) -> dict[str, Any]:
    return export(matrix)


@pytest.fixture(scope="module")
def uncomposed(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    """The shipped matrix with ``sglang_attention``'s own orders only (as before ``asks_first``)."""
    root = tmp_path_factory.mktemp("uncomposed") / "capabilities"
    shipped = Path(__file__).resolve().parent.parent / "capabilities"
    shutil.copytree(shipped, root, ignore=shutil.ignore_patterns("evidence", "expect"))
    text = (root / "roles.yaml").read_text(encoding="utf-8")
    line = f"    asks_first: [{sglang.OVERRIDE_ROLE}]\n"
    assert text.count(line) == 1
    (root / "roles.yaml").write_text(text.replace(line, ""), encoding="utf-8")
    return capmatrix.load(root)


@pytest.fixture(scope="module")
def record(matrix: Matrix) -> tuple[dict[str, Any], list[tuple[dict[str, Any], dict[str, Any]]],
                                    dict[str, sglang.SGLangModel]]:
    header, rows = read_record(RECORD)
    models = {name: sglang.model_from_hf_config(config, matrix=matrix)
              for name, config in header["models"].items()}
    return header, [(sglang_cell(key), answer) for key, answer in rows], models


def _resolved(cell: dict[str, Any], spec: dict[str, Any], model: sglang.SGLangModel,
              matrix: Matrix | None) -> sglang.Resolved:
    return resolve_cell(cell, spec, model, matrix)


def _kv_pass(values: dict[str, Any], chosen: str | None, resolved: str) -> bool:
    """SGLang's fa3 -> triton rewrite for an fp8_e5m2 KV cache, after the choice (overrides.py:1263-1270)."""
    return values["sglang_kv_cache_dtype"] == "fp8_e5m2" and chosen == "sglang_fa3" and resolved == "triton"


@pytest.mark.sweep
@_NEEDS_TOOLS
def test_every_reader_of_the_role_answers_sglangs_choice(
    matrix: Matrix, data: dict[str, Any], shipped_doc: Document, uncomposed: Matrix,
    record: tuple[dict[str, Any], list[tuple[dict[str, Any], dict[str, Any]]], dict[str, sglang.SGLangModel]],
    tmp_path: Path,
) -> None:
    header, rows, models = record
    automatic = [cell for cell, _ in rows if cell["forced"] == "-"][::stride(STEP)]
    cases: list[tuple[dict[str, Any], str]] = []
    for cell in automatic:
        spec = header["specs"][cell["spec"]]
        got = _resolved(cell, spec, models[cell["model"]], None)
        if got.refused is None:
            assert got.attention_backend is not None
            values = role_values(matrix, models[cell["model"]], cell["capability"], kv=cell["kv_cache_dtype"],
                                 page=cell["page_size"], spec=spec.get("speculative_algorithm"),
                                 topk=spec.get("speculative_eagle_topk"))
            cases.append((values, got.attention_backend))
    asked: list[Case] = [(values, None) for values, _ in cases]
    python = python_answers(matrix, asked)
    assert page_answers(shipped_doc, asked, tmp_path) == python
    assert header_answers(data, [values for values, _ in cases], tmp_path) == python
    agree = kv_pass = 0
    for (values, resolved), (kernel, verdict) in zip(cases, python, strict=True):
        if kernel == f"sglang_{resolved}":
            assert verdict == "supported"
            agree += 1
        else:
            assert _kv_pass(values, kernel, resolved), (values, kernel, resolved)
            kv_pass += 1
    assert agree + kv_pass == len(cases) > len(automatic) // 2
    assert 0 < kv_pass < agree // 10  # the one later pass is rare, and on the spread
    # Without the overrides asked first, the role alone is wrong on many of these cells.
    alone = python_answers(uncomposed, asked)
    wrong = sum(1 for (values, resolved), (kernel, _verdict) in zip(cases, alone, strict=True)
                if kernel != f"sglang_{resolved}" and not _kv_pass(values, kernel, resolved))
    assert wrong > len(cases) // 10


@pytest.mark.sweep
def test_resolve_answers_as_before_the_composition(
    matrix: Matrix, uncomposed: Matrix,
    record: tuple[dict[str, Any], list[tuple[dict[str, Any], dict[str, Any]]], dict[str, sglang.SGLangModel]],
) -> None:
    """``resolve`` asks the overrides, then ``sglang_attention`` with the same values only when the
    overrides chose nothing: the composed role's first orders then hold for none of them, so the answers
    are the same."""
    header, rows, models = record
    cells = [cell for cell, _ in rows][::stride(STEP)]
    for cell in cells:
        spec = header["specs"][cell["spec"]]
        model = models[cell["model"]]
        assert _resolved(cell, spec, model, matrix) == _resolved(cell, spec, model, uncomposed), cell
    assert len(cells) > len(rows) // stride(STEP) // 2


# ---- beyond the grid: the shipped models by name, and other architectures --------------------------

#: (model entry, capability): each model is asked by name (Python, the page) and by its axes (the header).
BY_NAME = [("deepseek_v3", "10.0"), ("deepseek_v3", "9.0"), ("deepseek_v3", "12.0"), ("kimi_k2", "10.3"),
           ("gpt_oss_120b", "8.0"), ("gpt_oss_120b", "9.0"), ("gpt_oss_120b", "10.0"),
           ("gpt_oss_20b", "10.3"),
           ("llama4_scout", "8.0"), ("llama4_scout", "9.0"), ("llama4_maverick", "10.0"),
           ("deepseek_v3_2", "9.0"), ("deepseek_v3_2", "10.0"), ("llama3_1_70b", "10.0"), ("qwen3_8b", "9.0")]


@_NEEDS_TOOLS
def test_models_by_name_get_their_override_everywhere(
    matrix: Matrix, data: dict[str, Any], shipped_doc: Document, tmp_path: Path,
) -> None:
    explicit: list[dict[str, Any]] = []
    by_name: list[Case] = []
    expected = []
    for name, capability in BY_NAME:
        entry = matrix.models[name]
        model = sglang.model_from_hf_config(dict(entry.hf_config or {}), matrix=matrix)
        values = role_values(matrix, model, capability)
        # The entry's axes give what its config gives SGLang: asked by name, the same answer.
        sm = values.pop("sm")
        by_name.append(({"sm": sm}, name))
        explicit.append({**{a: v for a, v in entry.axes.items() if a in data["axes"]}, **values, "sm": sm})
        major, minor = (int(p) for p in capability.split("."))
        expected.append(sglang.resolve(capability=(major, minor), model=model))
    python = python_answers(matrix, by_name)
    assert python_answers(matrix, [(values, None) for values in explicit]) == python
    assert page_answers(shipped_doc, by_name, tmp_path) == python
    assert header_answers(data, explicit, tmp_path) == python
    for (name, capability), (kernel, verdict), got in zip(BY_NAME, python, expected, strict=True):
        if got.refused is None:
            assert (kernel, verdict) == (f"sglang_{got.attention_backend}", "supported"), (name, capability)
        else:  # SGLang refuses later (a gate, the DSA checks): the role still names the override's choice
            assert kernel is None or kernel == f"sglang_{got.attention_backend}", (name, capability)
    answers = dict(zip(BY_NAME, python, strict=True))
    assert answers["deepseek_v3", "10.0"] == ("sglang_trtllm_mla", "supported")
    assert answers["gpt_oss_120b", "8.0"][0] == "sglang_triton"
    assert answers["gpt_oss_120b", "9.0"][0] == "sglang_fa3"
    assert answers["gpt_oss_120b", "10.0"][0] == "sglang_trtllm_mha"
    assert answers["deepseek_v3_2", "10.0"][0] == "sglang_dsa"


@pytest.mark.parametrize(("arch", "capability", "spec", "topk", "page", "backend"), [
    ("Qwen3NextForCausalLM", "10.0", None, None, None, "triton"),
    ("Qwen3NextForCausalLM", "10.0", "EAGLE", 1, 1, "trtllm_mha"),
    ("Qwen3NextForCausalLM", "9.0", None, None, None, "fa3"),  # no override off major 10
    ("Llama4ForConditionalGeneration", "12.0", None, None, None, "triton"),
    ("GlmMoeDsaForCausalLM", "9.0", None, None, None, "dsa"),
    ("Olmo2ForCausalLM", "10.3", None, None, None, "trtllm_mha"),
])
def test_architectures_no_model_entry_names(
    matrix: Matrix, arch: str, capability: str, spec: str | None, topk: int | None, page: int | None,
    backend: str,
) -> None:
    """Architectures asked by their axes (the record's configs give the flags), Python and ``resolve``."""
    header, _rows = read_record(RECORD)
    config = next(c for c in header["models"].values() if c["architectures"][0] == arch)
    model = sglang.model_from_hf_config(config, matrix=matrix)
    values = role_values(matrix, model, capability, page=page, spec=spec, topk=topk)
    picked = capmatrix.select(ROLE, KernelQuery().replace(**values), matrix)
    major, minor = (int(p) for p in capability.split("."))
    got = sglang.resolve(capability=(major, minor), model=model, page_size=page, speculative_algorithm=spec,
                         speculative_eagle_topk=topk)
    assert got.attention_backend == backend
    assert picked.kernel == f"sglang_{backend}"


def test_each_model_records_the_sglang_axes_its_config_gives(matrix: Matrix) -> None:
    """A model's axes name SGLang's architecture word and flags wherever its config differs from the
    defaults, so a question by model name reaches the overrides."""
    flags = {"sglang_dsa": "dsa", "sglang_hybrid_gdn": "hybrid_gdn", "sglang_swa_pattern": "swa_pattern"}
    checked = 0
    for name, entry in matrix.models.items():
        if not (entry.hf_config or {}).get("architectures"):
            continue
        model = sglang.model_from_hf_config(dict(entry.hf_config or {}), matrix=matrix)
        given = {"sglang_model_arch": matrix.axes["sglang_model_arch"].spellings.get(model.arch, "other"),
                 **{axis: getattr(model, flag) for axis, flag in flags.items()}}
        for axis, value in given.items():
            assert entry.axes.get(axis, matrix.axes[axis].default) == value, (name, axis)
        checked += 1
    assert checked >= 20


def test_the_command_line_and_every_reader_agree_on_gb200_deepseek_v3(
    matrix: Matrix, data: dict[str, Any],
) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run(["select", ROLE, "--gpu", "GB200", "--model", "deepseek_v3", "--json"], out, err) == 0
    assert json.loads(out.getvalue())["kernel"] == "sglang_trtllm_mla"
    gb200 = matrix.gpu("GB200")
    assert gb200 is not None
    picked = capmatrix.select(ROLE, KernelQuery(model="deepseek_v3", sm=gb200.sm), matrix)
    assert picked.kernel == "sglang_trtllm_mla"
    assert data["roles"][ROLE]["asks_first"] == [sglang.OVERRIDE_ROLE]
    override = data["roles"][sglang.OVERRIDE_ROLE]["orders"]
    assert data["roles"][ROLE]["orders"][:len(override)] == override


@_NEEDS_TOOLS
def test_an_override_the_gate_refuses_is_no_supported_candidate_not_the_generic_default(
    matrix: Matrix, shipped_doc: Document, tmp_path: Path,
) -> None:
    """SGLang takes DeepSeek-V3's override on major 10 unchecked and then refuses an fp8_e5m2 KV cache; the
    role's first matching order decides too: no candidate, with the rule SGLang's refusal cites."""
    model = sglang.SGLangModel("DeepseekV3ForCausalLM", mla=True)
    got = sglang.resolve(capability=(10, 0), model=model, kv_cache_dtype="fp8_e5m2")
    assert got.refused is not None
    values = role_values(matrix, model, "10.0", kv="fp8_e5m2")
    picked = capmatrix.select(ROLE, KernelQuery().replace(**values), matrix)
    assert (picked.kernel, picked.verdict.value) == (None, "unsupported")
    assert [r.query.kernel for r in picked.trace] == ["sglang_trtllm_mla"]
    assert got.refused.rule in {reason.rule_id for reason in picked.trace[0].reasons}
    assert page_answers(shipped_doc, [(values, None)], tmp_path) == [(None, "unsupported")]
