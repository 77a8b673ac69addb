"""The PyTorch SDPA data: a truth table over its rules, and the H200 evidence re-checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capmatrix
from capmatrix.authoring import probe

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "capabilities" / "evidence" / "torch_sdpa_h200.json"
KERNELS = ("torch_sdpa_flash", "torch_sdpa_efficient", "torch_sdpa_cudnn", "torch_sdpa_math")
BACKEND_OF = {k: backend for k, (backend, _) in probe.KERNEL_BACKENDS.items()}

S, U = "supported", "unsupported"

#: (kernel, axes, verdict, rule that must be among the reasons, as grant or exclude).
TRUTH: list[tuple[str, dict[str, Any], str, str]] = [
    # flash
    (
        "torch_sdpa_flash",
        {"sm": 90, "dtype": "bf16", "head_dim": 128, "attention": "gqa", "causal": True},
        S,
        "torch_sdpa_flash.sm90",
    ),
    (
        "torch_sdpa_flash",
        {"sm": 121, "dtype": "fp16", "head_dim": 64, "attention": "mqa"},
        S,
        "torch_sdpa_flash.sm80_to_sm121",
    ),
    (
        "torch_sdpa_flash",
        {"sm": 110, "dtype": "bf16", "head_dim": 256, "attention": "mha", "dropout": True},
        S,
        "torch_sdpa_flash.sm80_to_sm121",
    ),
    (
        "torch_sdpa_flash",
        {"sm": 90, "dtype": "bf16", "head_dim": 512, "attention": "mha"},
        U,
        "torch_sdpa_flash.head_dim_gt256",
    ),
    (
        "torch_sdpa_flash",
        {"sm": 90, "dtype": "fp16", "head_dim": 64, "attention": "mha", "attn_mask": True},
        U,
        "torch_sdpa_flash.attn_mask",
    ),
    (
        "torch_sdpa_flash",
        {"sm": 90, "dtype": "bf16", "head_dim": 128, "attention": "mla"},
        U,
        "torch_sdpa_flash.mla",
    ),
    # efficient
    (
        "torch_sdpa_efficient",
        {"sm": 90, "dtype": "fp32", "head_dim": 576, "attention": "mha", "causal": True, "attn_mask": True},
        S,
        "torch_sdpa_efficient.sm90",
    ),
    (
        "torch_sdpa_efficient",
        {"sm": 120, "dtype": "bf16", "head_dim": 128, "attention": "mha"},
        S,
        "torch_sdpa_efficient.sm80_to_sm121",
    ),
    (
        "torch_sdpa_efficient",
        {"sm": 75, "dtype": "fp16", "head_dim": 64, "attention": "mha"},
        S,
        "torch_sdpa_efficient.below_sm80",
    ),
    (
        "torch_sdpa_efficient",
        {"sm": 90, "dtype": "bf16", "head_dim": 128, "attention": "gqa"},
        U,
        "torch_sdpa_efficient.grouped_kv_heads",
    ),
    (
        "torch_sdpa_efficient",
        {"sm": 90, "dtype": "bf16", "head_dim": 576, "attention": "mla"},
        U,
        "torch_sdpa_efficient.mla",
    ),
    # cudnn
    (
        "torch_sdpa_cudnn",
        {
            "sm": 90,
            "dtype": "bf16",
            "head_dim": 256,
            "attention": "gqa",
            "causal": True,
            "attn_mask": True,
            "dropout": True,
        },
        S,
        "torch_sdpa_cudnn.sm90",
    ),
    (
        "torch_sdpa_cudnn",
        {"sm": 100, "dtype": "fp16", "head_dim": 128, "attention": "mha"},
        S,
        "torch_sdpa_cudnn.sm80_to_sm121",
    ),
    (
        "torch_sdpa_cudnn",
        {"sm": 90, "dtype": "fp16", "head_dim": 512, "attention": "mha"},
        U,
        "torch_sdpa_cudnn.head_dim_gt256",
    ),
    (
        "torch_sdpa_cudnn",
        {"sm": 120, "dtype": "bf16", "head_dim": 192, "attention": "gqa"},
        U,
        "torch_sdpa_cudnn.head_dim_gt128_off_sm90",
    ),
    (
        "torch_sdpa_cudnn",
        {"sm": 90, "dtype": "bf16", "head_dim": 128, "attention": "mla"},
        U,
        "torch_sdpa_cudnn.mla",
    ),
    # math
    (
        "torch_sdpa_math",
        {"sm": 90, "dtype": "fp32", "head_dim": 576, "attention": "mqa", "causal": True},
        S,
        "torch_sdpa_math.sm90",
    ),
    (
        "torch_sdpa_math",
        {"sm": 75, "dtype": "bf16", "head_dim": 64, "attention": "gqa", "attn_mask": True},
        S,
        "torch_sdpa_math.other_sm",
    ),
    (
        "torch_sdpa_math",
        {"sm": 90, "dtype": "fp8", "head_dim": 128, "attention": "mha"},
        U,
        "torch_sdpa_math.fp8",
    ),
    (
        "torch_sdpa_math",
        {"sm": 90, "dtype": "fp16", "head_dim": 128, "attention": "mha", "causal": True, "attn_mask": True},
        U,
        "torch_sdpa_math.causal_with_mask",
    ),
    (
        "torch_sdpa_math",
        {"sm": 90, "dtype": "fp16", "head_dim": 128, "attention": "mla"},
        U,
        "torch_sdpa_math.mla",
    ),
]


@pytest.fixture(scope="module")
def matrix() -> capmatrix.Matrix:
    return capmatrix.load()


@pytest.fixture(scope="module")
def evidence() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EVIDENCE.read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize(
    ("kernel", "axes", "verdict", "rule"), TRUTH, ids=[f"{r}-{i}" for i, (_, _, _, r) in enumerate(TRUTH)]
)
def test_truth_table(
    matrix: capmatrix.Matrix, kernel: str, axes: dict[str, Any], verdict: str, rule: str
) -> None:
    result = capmatrix.resolve(capmatrix.KernelQuery(kernel, **axes), matrix=matrix)
    assert str(result.verdict) == verdict
    effect = "grant" if verdict == S else "exclude"
    assert (rule, effect) in {(r.rule_id, r.kind) for r in result.reasons}


def test_truth_table_touches_every_sdpa_rule(matrix: capmatrix.Matrix) -> None:
    declared = {rule.id for k in KERNELS for rule in matrix.kernels[k].rules}
    assert declared == {row[3] for row in TRUTH}


@pytest.mark.parametrize("sm", [75, 80, 90, 100, 120, 121])
@pytest.mark.parametrize("kernel", KERNELS)
def test_mla_is_never_an_sdpa_query(matrix: capmatrix.Matrix, kernel: str, sm: int) -> None:
    query = capmatrix.KernelQuery(kernel, sm=sm, attention="mla", dtype="bf16", head_dim=576)
    assert str(capmatrix.resolve(query, matrix=matrix).verdict) == U


def test_sm121_is_listed_wherever_sm120_is(matrix: capmatrix.Matrix) -> None:
    for kernel in KERNELS:
        for dtype in ("fp16", "bf16"):
            answers = {
                str(
                    capmatrix.resolve(
                        capmatrix.KernelQuery(kernel, sm=sm, dtype=dtype, head_dim=128, attention="mha"),
                        matrix=matrix,
                    ).verdict
                )
                for sm in (120, 121)
            }
            assert len(answers) == 1, (kernel, dtype)


def test_evidence_covers_the_declared_universe(matrix: capmatrix.Matrix, evidence: dict[str, Any]) -> None:
    sm, rows = probe.read_evidence(evidence)
    assert sm == 90
    assert evidence["environment"]["gpu"] == "NVIDIA H200"
    assert {case for case, _ in rows} == set(probe.probe_cases(probe.universe_values(matrix)))
    assert {obs.kernel for _, observed in rows for obs in observed} == set(KERNELS)


def test_evidence_agrees_with_the_matrix(matrix: capmatrix.Matrix, evidence: dict[str, Any]) -> None:
    result = probe.compare(evidence, matrix)
    assert [str(d) for d in result.disagreements] == []
    assert [str(n) for n in result.notes] == []
    assert result.checks == len(evidence["cases"]) * len(KERNELS)


def test_verified_sdpa_rules_name_the_evidence(matrix: capmatrix.Matrix) -> None:
    verified = [r for k in KERNELS for r in matrix.kernels[k].rules if str(r.status) == "verified"]
    assert verified
    for rule in verified:
        assert rule.verified is not None, rule.id
        assert (ROOT / rule.verified["evidence"]).resolve() == EVIDENCE
        # Only sm90 was run: a verified rule either names sm 90 alone or does not read the device.
        sm = rule.conditions.get("sm")
        assert sm is None or sm.text == "90", rule.id


def test_cudnn_first_role_matches_sdpa_default_choice_on_h200(
    matrix: capmatrix.Matrix, evidence: dict[str, Any]
) -> None:
    """SDPA's own pick equals the role's, and falls to math (which then raises) when none runs."""
    sm, rows = probe.read_evidence(evidence)
    defaults = [row["default_backend"] for row in evidence["cases"]]
    for (case, _), default in zip(rows, defaults, strict=True):
        query = capmatrix.KernelQuery(None, sm=sm).replace(**case.axes())
        chosen = capmatrix.select("torch_sdpa_cudnn_first", query, matrix=matrix).kernel
        assert default == (BACKEND_OF[chosen] if chosen else "MATH"), case.label()
