"""The README's seed example cites rules at the lines where they really are."""

from __future__ import annotations

import re
from pathlib import Path

import capmatrix

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_rule_citations_are_current() -> None:
    matrix = capmatrix.load()
    cited = re.findall(r"([a-z_0-9]+\.[a-z_0-9-]+) \((capabilities/[\w/]+\.yaml):(\d+)\)",
                       README.read_text(encoding="utf-8"))
    assert cited
    for rule_id, path, line in cited:
        rule = matrix.rule(rule_id)
        assert (rule.location.path, rule.location.line) == (path, int(line)), rule_id


def test_readme_seed_verdicts() -> None:
    llama = capmatrix.resolve(capmatrix.KernelQuery("xqa", sm=120, model="llama",
                                                    spec_dec="one_model"))
    deepseek = capmatrix.resolve(capmatrix.KernelQuery("xqa", sm=121, model="deepseek_v3",
                                                       spec_dec="one_model"))
    assert "xqa.hmma_multi_token" in llama.rules
    assert deepseek.reasons[0].rule_id == "xqa.mla_fp8_only"
    gate = capmatrix.resolve(capmatrix.KernelQuery("trtllm_spec_dec_mode", sm=121, model="deepseek_v3",
                                                   spec_dec="one_model"))
    assert gate.reasons[0].rule_id == "trtllm_spec_dec_mode.mla_sm12x_one_model"
