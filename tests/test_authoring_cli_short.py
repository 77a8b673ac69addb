"""Short answers of ``query`` and ``select`` (the default), ``--explain`` for every rule, ``alternatives``."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import capmatrix
from capmatrix.authoring.cli import run
from capmatrix.authoring.cli._query import (
    SHOWN_CLOSEST,
    SHOWN_RULES,
    _near_miss_line,
    format_selection,
    format_short,
    read_axes,
)
from capmatrix.resolver import Reason, ReasonKind

if TYPE_CHECKING:
    from conftest import WriteMatrix

SEED = ("query", "xqa", "--sm", "121", "--model", "deepseek_v3", "--spec-dec", "one_model")
SELECT = ("select", "trtllm_generation", "--sm", "121", "--model", "deepseek_v3")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def _vllm_axes(matrix: capmatrix.Matrix) -> set[str]:
    kernels = [k for k in matrix.kernels.values() if k.engine == "vllm"]
    return {axis for k in kernels for r in k.rules for axis in r.conditions} - read_axes(
        matrix, [k.name for k in matrix.kernels.values() if k.engine != "vllm"])


def test_the_seed_deepseek_answer_is_short_and_complete() -> None:
    code, out, _ = cli(*SEED)
    assert code == 1
    lines = out.splitlines()
    assert len(lines) <= 15
    assert len(out) <= 2500
    assert lines[0] == "xqa: unsupported"
    assert "  decided by:" in lines
    assert any(line.startswith("    - xqa.mla_fp8_only (capabilities/kernels/xqa.yaml:") for line in lines)
    closest = lines.index("  no grant applies; the closest:")
    line = capmatrix.load().rule("xqa.mla_sm12x").location.line
    assert lines[closest + 1] == (
        f"    x xqa.mla_sm12x (capabilities/kernels/xqa.yaml:{line}) needs kv_cache_dtype fp8 (got bf16)"
    )
    grants = len(capmatrix.load().kernels["xqa"].grants)
    assert lines[closest + 1 + SHOWN_CLOSEST] == (
        f"    ... and {grants - SHOWN_CLOSEST} other grants (--explain lists them, closest first; "
        "--closest K sets how many)"
    )
    assert out.endswith("  would work:\n    set dtype=fp8 and kv_cache_dtype=fp8\n")


def test_an_xqa_answer_lists_no_vllm_axis() -> None:
    matrix = capmatrix.load()
    vllm_only = _vllm_axes(matrix)
    assert "vllm_fa3_built" in vllm_only
    for verbose in ((), ("--explain",)):
        _, out, _ = cli(*SEED, *verbose)
        (defaults,) = [line for line in out.splitlines() if line.startswith("  axis defaults: ")]
        shown = {item.split("=")[0] for item in defaults.split(": ", 1)[1].split()}
        assert shown, defaults
        assert not shown & vllm_only, shown & vllm_only
        assert shown <= read_axes(matrix, ["xqa"])


def test_explain_is_the_full_listing() -> None:
    _, short, _ = cli(*SEED)
    code, full, _ = cli(*SEED, "--explain")
    assert code == 1
    assert "  why:\n" in full
    assert len(full.splitlines()) > 20  # every near miss, one line per axis
    assert cli(*SEED, "-v")[1] == full
    assert full.endswith("  would work:\n    set dtype=fp8 and kv_cache_dtype=fp8\n")
    assert len(short) < len(full)
    # The JSON keeps every reason and every axis default.
    data = json.loads(cli(*SEED, "--json")[1])
    assert "vllm_fa3_built" in data["query"]


def test_a_supported_answer_names_the_grants_that_apply() -> None:
    code, out, _ = cli("query", "xqa", "--sm", "120", "--model", "llama", "--spec-dec", "one_model")
    assert code == 0
    assert "  decided by:\n    + xqa.hmma_multi_token (capabilities/kernels/xqa.yaml:53) grants: " in out
    assert "would work" not in out
    assert "no grant applies" not in out


def test_a_depends_answer_says_where_first_and_counts_the_rest() -> None:
    code, out, _ = cli("query", "xqa", "--sm", "120", "--spec-dec", "one_model")
    assert code == 3
    lines = out.splitlines()
    decided = lines.index("  decided by:")
    assert lines[decided + 1].startswith("    ~ supported when ")
    assert lines[decided + 1 + SHOWN_RULES].startswith("    ... and ")
    assert lines[decided + 1 + SHOWN_RULES].endswith(" more (--explain lists them)")
    assert len(lines) <= 15


def test_select_fits_and_gives_one_reason_per_candidate() -> None:
    code, out, _ = cli(*SELECT)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) <= 15
    assert lines[0] == "trtllm_generation: fmha_v2"
    values = lines.index("  query: sm=121")  # the values come after the candidates and their reasons
    assert lines[values:values + 3] == [
        "  query: sm=121",
        "  model deepseek_v3: attention=mla dtype=bf16 kv_cache_dtype=bf16 head_dim=576 q_per_kv=128",
        "  role trtllm_generation: phase=generation",  # the role's own axis value, not the query's
    ]
    assert lines[1].startswith("   trtllm_gen: unsupported; ")
    at = capmatrix.load().rule("trtllm_gen.mla_generation").location.line
    first = (f"trtllm_gen.mla_generation (capabilities/kernels/trtllm_gen.yaml:{at}) needs sm sm_100f "
             "(got 121)")
    assert f"   trtllm_gen: unsupported; x {first}" in lines
    assert any(line.startswith("   xqa: unsupported; - xqa.mla_fp8_only ") for line in lines)
    assert any(line.startswith("=> fmha_v2: supported; + fmha_v2.") for line in lines)
    (defaults,) = [line for line in lines if line.startswith("  axis defaults: ")]
    assert "vllm" not in defaults
    full = cli(*SELECT, "--explain")[1]
    assert "     why:\n" in full
    assert len(full.splitlines()) > len(lines)


def test_select_names_later_candidates_that_would_also_serve() -> None:
    argv = ("select", "vllm_attention", "--sm", "90", "--model", "deepseek_v3")
    code, out, _ = cli(*argv)
    assert code == 0
    assert "   would also serve: vllm_flashmla, vllm_triton_mla" in out.splitlines()
    data = json.loads(cli(*argv, "--json")[1])
    assert data["kernel"] == "vllm_flash_attn_mla"
    assert data["alternatives"] == [
        {"kernel": "vllm_flashmla", "rules": ["vllm_flashmla.base"]},
        {"kernel": "vllm_triton_mla", "rules": ["vllm_triton_mla.base"]},
    ]
    # Each alternative really is supported for the same query.
    for alternative in data["alternatives"]:
        query = capmatrix.KernelQuery(alternative["kernel"], sm=90, model="deepseek_v3")
        resolution = capmatrix.resolve(query)
        assert resolution.verdict is capmatrix.Verdict.SUPPORTED
    assert "would also serve: vllm_flashmla" in cli(*argv, "--explain")[1]


def test_no_winner_has_no_alternatives() -> None:
    code, out, _ = cli("select", "trtllm_generation", "--sm", "80", "--model", "deepseek_v3", "--json")
    assert code == 1
    assert json.loads(out)["alternatives"] == []


def test_a_candidate_no_rule_speaks_for(write_matrix: WriteMatrix) -> None:
    root = write_matrix({"more.yaml": """\
        kernels:
          quiet:
            description: only an exclusion
            rules:
              - id: quiet.never
                exclude: {sm: 80}
                reason: never on 80
                source: test
                status: untested
        roles:
          two:
            description: quiet first
            candidates: [quiet, fallback, xqa]
        """})
    code, out, _ = cli("select", "two", "--matrix", str(root), "--sm", "90", "--attention", "gqa")
    assert code == 0
    lines = out.splitlines()
    assert "   quiet: unsupported" in lines  # no rule applies and no grant comes close: nothing to cite
    assert "   would also serve: xqa" in lines


def test_read_axes_and_the_selection_without_a_matrix() -> None:
    matrix = capmatrix.load()
    assert read_axes(matrix, ["no_such_kernel"]) == frozenset()
    assert "sm" in read_axes(matrix, ["xqa"])
    selection = capmatrix.select("trtllm_generation", capmatrix.KernelQuery(sm=121, model="deepseek_v3"))
    text = format_selection(selection)
    assert "vllm_fa3_built=true" in text  # no matrix given: every default shown


def test_a_near_miss_without_axis_or_file_keeps_its_message() -> None:
    reason = Reason(kind=ReasonKind.MISMATCH, message="k.r needs something", rule_id="k.r")
    assert _near_miss_line("k.r", [reason]) == "x k.r needs something"
    located = Reason(kind=ReasonKind.MISMATCH, message="m", rule_id="k.r", path="f.yaml", line=3,
                     axis="sm", required="90", actual=80)
    assert _near_miss_line("k.r", [located]) == "x k.r (f.yaml:3) needs sm 90 (got 80)"
    both = _near_miss_line("k.r", [located, reason])
    assert both == "x k.r (f.yaml:3) needs sm 90 (got 80); k.r needs something"


def test_explain_of_a_supported_answer_has_no_would_work() -> None:
    code, out, _ = cli("query", "xqa", "--sm", "120", "--model", "llama", "--spec-dec", "one_model", "-v")
    assert code == 0
    assert "  why:\n    + xqa.hmma_multi_token " in out
    assert "would work" not in out


def test_a_role_whose_order_is_undecided_tried_nothing(write_matrix: WriteMatrix) -> None:
    root = write_matrix({"roles2.yaml": """\
        roles:
          by_sm:
            description: the list depends on the SM
            orders:
              - when: {sm: 90}
                candidates: [xqa]
              - candidates: [fallback]
        """})
    code, out, _ = cli("select", "by_sm", "--matrix", str(root), "--attention", "gqa")
    assert code == 3
    assert out == ("by_sm: depends: its candidate order reads sm, which the query leaves open "
                   "(give --sm)\n")
    data = json.loads(cli("select", "by_sm", "--matrix", str(root), "--attention", "gqa", "--json")[1])
    assert data["verdict"] == "depends"
    assert data["order_reads_open"] == ["sm"]
    code, out, _ = cli("select", "by_sm", "--matrix", str(root), "--attention", "gqa", "--sm", "80")
    assert code == 0
    assert out.splitlines()[0] == "by_sm: fallback"
    data = json.loads(cli("select", "by_sm", "--matrix", str(root), "--attention", "gqa", "--sm", "90",
                          "--json")[1])
    assert data["kernel"] == "xqa"
    assert data["alternatives"] == []  # the order for sm 90 lists xqa alone


def test_short_form_counts_the_grants_it_does_not_show() -> None:
    query = capmatrix.KernelQuery("xqa", sm=121, model="deepseek_v3", spec_dec="one_model")
    resolution = capmatrix.resolve(query)
    misses = {r.rule_id for r in resolution.reasons if r.kind is ReasonKind.MISMATCH}
    def last_count(grants: int | None) -> str:
        text = format_short(resolution, resolution.reasons, [], shown_defaults=None, vary=False,
                            grants=grants)
        return next(line for line in text.splitlines() if "other grant" in line).split(" (")[0]
    assert last_count(None) == f"    ... and {len(misses) - SHOWN_CLOSEST} other grants"
    assert last_count(SHOWN_CLOSEST + 1) == "    ... and 1 other grant"
    text = format_short(resolution, resolution.reasons, [], shown_defaults=None, vary=False,
                        grants=SHOWN_CLOSEST)
    assert "other grant" not in text


def test_a_role_with_no_winner_but_a_depending_candidate_says_so() -> None:
    # trtllm_context on SM89 with a head MMHA lacks: the init check refuses whatever else is open.
    code, out, _ = cli("select", "trtllm_context", "--sm", "89", "--head-dim", "1000", "--attention", "gqa",
                       "--dtype", "bf16")
    assert code == 1
    assert out.splitlines()[0] == ("trtllm_context: no supported candidate: refused at engine start by gate "
                                   "trtllm_attention_init")
    # trtllm_generation with the group and spec-dec mode left open: XQA and MMHA each depend on them.
    code, out, _ = cli("select", "trtllm_generation", "--sm", "90", "--attention", "gqa", "--dtype", "bf16",
                       "--kv-cache-dtype", "bf16", "--head-dim", "128")
    assert code == 3
    assert out.splitlines()[0] == ("trtllm_generation: no candidate is supported for every value left open; "
                                   "xqa, mmha depend on them")


def test_no_grant_lists_only_exclusions_that_hold_whatever_is_left_open() -> None:
    # attention and dtype open, no grant for head 264: the MLA-only exclusion (it meets the open
    # attention somewhere) does not decide this answer; the seed's fully given MLA query keeps it.
    code, out, _ = cli("query", "xqa", "--sm", "101", "--head-dim", "264", "--q-per-kv", "3",
                       "--spec-dec", "one_model", "--explain")
    assert code == 1
    assert "xqa.mla_fp8_only" not in out
    assert "x xqa.hmma_decode " in out  # the closest grants still say what is missing
    code, out, _ = cli(*SEED)
    assert "xqa.mla_fp8_only" in out
