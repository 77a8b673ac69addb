"""docs/data-audit.md lists every TensorRT-LLM rule once, with a verdict that its status agrees with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import capmatrix
from capmatrix import Matrix

ROOT = Path(__file__).resolve().parent.parent
AUDIT = ROOT / "docs" / "data-audit.md"
#: The kernel and gate files that hold TensorRT-LLM rules.
TRTLLM_FILES = frozenset({
    "xqa.yaml", "trtllm_gen.yaml", "fmha_v2.yaml", "mmha.yaml", "flash_mla.yaml", "unfused_mha.yaml",
    "trtllm_gates.yaml", "trtllm_context_gates.yaml",
})
TRTLLM_ROLES = frozenset({"trtllm_generation", "trtllm_context"})
VERDICTS = frozenset({"confirmed", "corrected", "could not verify"})
_ROW = re.compile(r"^\| `(?P<id>[^`]+)` \| (?P<verdict>[^|]+?) \| (?P<evidence>.+) \|$")


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return capmatrix.load()


def _rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in AUDIT.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match:
            rows.append((match["id"], match["verdict"], match["evidence"]))
    return rows


def _trtllm_rules(matrix: Matrix) -> dict[str, str]:
    """Rule id -> status for every rule defined in a TensorRT-LLM file.

    A rule on a derived axis is loaded as parts (``id``, ``id#2``, ...) of one written rule: one row.
    """
    return {r.id.split("#", 1)[0]: str(r.status) for r in matrix.rules
            if Path(r.location.path).name in TRTLLM_FILES}


def test_every_rule_appears_exactly_once(matrix: Matrix) -> None:
    ids = [row[0] for row in _rows()]
    expected = set(_trtllm_rules(matrix)) | {f"role:{name}" for name in TRTLLM_ROLES}
    assert len(expected) > len(TRTLLM_ROLES)
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert not twice, f"listed more than once: {twice}"
    assert sorted(expected - set(ids)) == [], "rules missing from docs/data-audit.md"
    assert sorted(set(ids) - expected) == [], "stale ids in docs/data-audit.md"


def test_verdicts_agree_with_statuses(matrix: Matrix) -> None:
    statuses = _trtllm_rules(matrix)
    for rule_id, verdict, evidence in _rows():
        assert verdict in VERDICTS, (rule_id, verdict)
        assert evidence.strip(), rule_id
        status = statuses.get(rule_id)
        if status is None:  # a role
            continue
        if verdict == "could not verify":
            assert status in {"untested", "derived"}, (rule_id, status)
        else:
            assert status != "untested", (rule_id, status)


def test_summary_counts_match_the_table() -> None:
    rows = _rows()
    text = AUDIT.read_text(encoding="utf-8")
    for verdict in sorted(VERDICTS):
        count = sum(1 for row in rows if row[1] == verdict)
        assert f"{verdict} {count}" in text, verdict
