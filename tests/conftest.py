"""Shared fixtures: write small capability matrices to a temporary directory."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import capmatrix

SMALL_AXES = """\
axes:
  sm:
    type: int
    description: compute capability
    values: [80, 90, 100, 103, 120, 121]
    families: {sm_100f: [100, 103], sm_12x: [120, 121]}
  attention:
    type: enum
    description: attention type
    values: [mha, gqa, mla]
  spec_dec:
    type: enum
    description: speculative decoding
    values: [none, one_model]
  kv:
    type: enum
    description: kv cache dtype
    values: [bf16, fp8]
  beam:
    type: int
    description: beam width
    values: [1, 4]
    default: 1
  causal:
    type: bool
    description: causal mask
"""

SMALL_KERNELS = """\
kernels:
  xqa:
    description: test kernel
    rules:
      - id: xqa.hmma
        grant: {sm: ">=80", attention: [mha, gqa]}
        reason: generic path
        source: test
        status: untested
      - id: xqa.mla
        grant: {sm: sm_12x, attention: mla, kv: fp8}
        reason: mla path
        source: test
        status: untested
      - id: xqa.no-mla-spec
        exclude: {sm: sm_12x, attention: mla, spec_dec: one_model}
        reason: release disables it
        source: test
        status: known_issue
      - id: xqa.beam
        exclude: {beam: 4, attention: mha}
        reason: no beam for mha
        source: test
        status: untested
  fallback:
    description: slow path
    rules:
      - id: fallback.all
        grant: {sm: "[80, 120)"}
        reason: everywhere below 120
        source: test
        status: verified
models:
  llama:
    description: llama
    axes: {attention: gqa, kv: bf16}
    hf_model_types: [llama]
    source: test
  dsv3:
    description: deepseek
    axes: {attention: mla, kv: fp8}
    source: test
roles:
  gen:
    description: generation
    candidates: [xqa, fallback]
"""

WriteMatrix = Callable[..., Path]


@pytest.fixture
def write_matrix(tmp_path: Path) -> WriteMatrix:
    """Write files (name -> YAML text) under a fresh matrix directory and return it."""

    def write(files: dict[str, str] | None = None, *, base: bool = True) -> Path:
        root = tmp_path / "caps"
        root.mkdir(exist_ok=True)
        contents: dict[str, str] = {}
        if base:
            contents = {"axes.yaml": SMALL_AXES, "kernels/test.yaml": SMALL_KERNELS}
        contents.update(files or {})
        for name, text in contents.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        return root

    return write


@pytest.fixture
def small(write_matrix: WriteMatrix) -> capmatrix.Matrix:
    """The small test matrix, loaded."""
    return capmatrix.load(write_matrix())
