"""capmatrix.authoring.probe without a GPU: a fake torch module stands in, replaying recorded observations."""

from __future__ import annotations

import enum
import io
import json
import math
import os
import subprocess
import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import capmatrix
from capmatrix.authoring import cli, probe
from capmatrix.authoring.probe import Observation, ProbeCase

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "capabilities" / "evidence" / "torch_sdpa_h200.json"
KERNELS = tuple(probe.KERNEL_BACKENDS)


class _SDPBackend(enum.IntEnum):
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3


def fake_torch(*, gpu: bool = True, sm: tuple[int, int] = (9, 0)) -> types.ModuleType:
    """A torch stand-in with just what environment() reads."""
    torch = types.ModuleType("torch")
    torch.__version__ = "2.11.0+fake"  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_available=lambda: gpu,
        get_device_capability=lambda: sm,
        get_device_name=lambda: "Fake GPU",
    )
    torch.version = types.SimpleNamespace(cuda="13.0")  # type: ignore[attr-defined]
    torch.backends = types.SimpleNamespace(  # type: ignore[attr-defined]
        cudnn=types.SimpleNamespace(version=lambda: 91900)
    )
    torch.nn = types.SimpleNamespace(  # type: ignore[attr-defined]
        attention=types.SimpleNamespace(SDPBackend=_SDPBackend)
    )
    torch._C = types.SimpleNamespace(  # type: ignore[attr-defined]
        _get_sdp_priority_order=lambda: [3, 1, 2, 0]
    )
    return torch


def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EVIDENCE.read_text(encoding="utf-8"))
    return data


class Replay:
    """A fake GPU: answers observe_case / default_backend from recorded evidence."""

    def __init__(self, data: Mapping[str, Any], flips: Sequence[tuple[str, ProbeCase]] = ()) -> None:
        self.rows = {ProbeCase.from_axes(r["query"]): r for r in data["cases"]}
        self.flips = set(flips)
        self.calls = 0

    def observe(
        self, _torch: object, case: ProbeCase, kernels: Sequence[str] = KERNELS
    ) -> tuple[Observation, ...]:
        self.calls += 1
        found = []
        for k in kernels:
            obs = Observation.from_json(k, self.rows[case]["results"][k])
            if (k, case) in self.flips:  # the fake GPU behaves differently here
                obs = Observation(
                    kernel=k,
                    can_use=obs.can_use,
                    ran=not obs.ran,
                    error=None if obs.ran else "RuntimeError: boom",
                )
            found.append(obs)
        return tuple(found)

    def default(self, _torch: object, case: ProbeCase) -> str | None:
        value: str | None = self.rows[case]["default_backend"]
        return value


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    torch = fake_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def use_replay(monkeypatch: pytest.MonkeyPatch, replay: Replay) -> None:
    monkeypatch.setattr(probe, "observe_case", replay.observe)
    monkeypatch.setattr(probe, "default_backend", replay.default)


# -- judge: one kernel's predicate and forced run -> Observation ---------------------------------


def _ok(out: float) -> tuple[bool, float, bool]:
    return (math.isfinite(out), abs(out - 1.0), abs(out - 1.0) < 0.01)


def _boom() -> float:
    raise RuntimeError("No available kernel. Aborting execution.\nsecond line")


def _bad_predicate() -> bool:
    raise TypeError("SDPAParams() takes 6 arguments")


@pytest.mark.parametrize(
    ("can_use", "force", "numerics", "expected"),
    [
        (
            lambda: True,
            lambda: 1.001,
            True,
            Observation(kernel="k", can_use=True, ran=True, max_abs_err=0.001, matches=True),
        ),
        (
            lambda: True,
            lambda: 1.5,
            True,
            Observation(kernel="k", can_use=True, ran=True, max_abs_err=0.5, matches=False),
        ),
        (
            lambda: False,
            _boom,
            True,
            Observation(
                kernel="k",
                can_use=False,
                ran=False,
                error="RuntimeError: No available kernel. Aborting execution.",
            ),
        ),
        (
            None,
            lambda: float("nan"),
            True,
            Observation(kernel="k", can_use=None, ran=True, matches=False, error="non-finite output"),
        ),
        (lambda: True, lambda: 7.0, False, Observation(kernel="k", can_use=True, ran=True)),
        (
            _bad_predicate,
            lambda: 1.0,
            True,
            Observation(kernel="k", can_use=None, ran=True, max_abs_err=0.0, matches=True),
        ),
    ],
    ids=["right", "wrong-answer", "refused", "non-finite", "dropout-unchecked", "predicate-raises"],
)
def test_judge(can_use: Any, force: Any, numerics: bool, expected: Observation) -> None:
    got = probe.judge("k", can_use=can_use, force=force, check=_ok, compare_numerics=numerics)
    assert got == expected


def test_judge_silences_the_warnings_of_a_refused_backend() -> None:
    def warn_then_fail() -> float:
        import warnings

        warnings.warn("Flash attention kernel not used because:", UserWarning, stacklevel=1)
        raise RuntimeError("No available kernel")

    # filterwarnings=error would turn an escaping warning into a test failure.
    got = probe.judge("k", can_use=None, force=warn_then_fail, check=_ok, compare_numerics=True)
    assert not got.ran
    assert got.error == "RuntimeError: No available kernel"


@pytest.mark.parametrize(
    ("obs", "usable"),
    [
        (Observation(kernel="k", can_use=True, ran=True, matches=True), True),
        (Observation(kernel="k", can_use=True, ran=True, matches=None), True),
        (Observation(kernel="k", can_use=True, ran=True, matches=False), False),
        (Observation(kernel="k", can_use=True, ran=False, error="x"), False),
    ],
)
def test_observation_usable_and_json_round_trip(obs: Observation, usable: bool) -> None:
    assert obs.usable is usable
    data = obs.to_json()
    assert data["usable"] is usable
    assert None not in data.values()
    assert Observation.from_json("k", data) == obs


# -- cases ----------------------------------------------------------------------------------------


def test_probe_cases_cover_the_product_without_mla() -> None:
    values: dict[str, Sequence[object]] = {
        "dtype": ["fp16", "fp8"],
        "head_dim": [64, 576],
        "attention": ["mha", "gqa", "mla"],
    }
    cases = probe.probe_cases(values)
    assert len(cases) == 2 * 2 * 2 * 8
    assert len(set(cases)) == len(cases)
    assert {c.attention for c in cases} == {"mha", "gqa"}
    assert {(c.causal, c.attn_mask, c.dropout) for c in cases} == {
        (a, b, c) for a in (False, True) for b in (False, True) for c in (False, True)
    }


def test_probe_cases_of_the_shipped_universe() -> None:
    matrix = capmatrix.load()
    cases = probe.probe_cases(probe.universe_values(matrix))
    dtypes, head_dims = matrix.axes["dtype"].known, matrix.axes["head_dim"].known
    assert len(cases) == len(dtypes) * len(head_dims) * 3 * 8


def test_case_axes_round_trip_and_label() -> None:
    case = ProbeCase(dtype="bf16", head_dim=128, attention="gqa", causal=True, attn_mask=False, dropout=True)
    assert ProbeCase.from_axes(case.axes()) == case
    assert case.label() == "bf16/d128/gqa/causal/dropout"


@pytest.mark.parametrize(
    ("axes", "problem"),
    [
        ({"dtype": "bf16"}, "lacks axis"),
        (
            {
                "dtype": "bf16",
                "head_dim": "128",
                "attention": "mha",
                "causal": False,
                "attn_mask": False,
                "dropout": False,
            },
            "wrong type",
        ),
        (
            {
                "dtype": "bf16",
                "head_dim": True,
                "attention": "mha",
                "causal": False,
                "attn_mask": False,
                "dropout": False,
            },
            "wrong type",
        ),
    ],
)
def test_case_from_bad_axes(axes: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ProbeCase.from_axes(axes)


# -- environment and the no-GPU exit ---------------------------------------------------------------


def test_environment_reads_the_fake_gpu() -> None:
    env = probe.environment(fake_torch(sm=(12, 1)))
    assert env["sm"] == 121
    assert env["gpu"] == "Fake GPU"
    assert env["cudnn"] == 91900
    assert env["sdpa_priority_order"] == [
        "CUDNN_ATTENTION",
        "FLASH_ATTENTION",
        "EFFICIENT_ATTENTION",
        "MATH",
    ]


def test_environment_tolerates_missing_optional_parts() -> None:
    torch = fake_torch()
    delattr(torch, "_C")
    setattr(torch, "backends", types.SimpleNamespace())  # noqa: B010 - the module is untyped here
    env = probe.environment(torch)
    assert env["cudnn"] is None
    assert env["sdpa_priority_order"] is None


def test_no_gpu_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", fake_torch(gpu=False))
    out, err = io.StringIO(), io.StringIO()
    assert probe.run_probe(stdout=out, stderr=err) == 2
    assert "no GPU to probe" in err.getvalue()
    assert "is_available() is False" in err.getvalue()
    assert out.getvalue() == ""


def test_no_torch_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    err = io.StringIO()
    assert probe.run_probe(stdout=io.StringIO(), stderr=err) == 2
    assert "torch is not importable" in err.getvalue()


def test_cli_no_gpu_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", fake_torch(gpu=False))
    out, err = io.StringIO(), io.StringIO()
    assert cli.run(["probe"], out, err) == 2
    assert "no GPU to probe" in err.getvalue()


def test_unknown_kernel_exits_2(gpu: types.ModuleType) -> None:
    err = io.StringIO()
    assert probe.run_probe(["xqa"], stdout=io.StringIO(), stderr=err) == 2
    assert "cannot probe 'xqa'" in err.getvalue()


def test_kernel_missing_from_the_matrix_exits_2(gpu: types.ModuleType, tmp_path: Path) -> None:
    (tmp_path / "axes.yaml").write_text(
        (ROOT / "capabilities" / "axes.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    matrix = capmatrix.load(tmp_path)
    err = io.StringIO()
    assert probe.run_probe(matrix=matrix, stdout=io.StringIO(), stderr=err) == 2
    assert "no kernel 'torch_sdpa_flash'" in err.getvalue()


def test_importing_capmatrix_never_imports_torch() -> None:
    code = ("import sys, capmatrix, capmatrix.authoring.probe, capmatrix.authoring.cli; "
            "print('torch' in sys.modules)")
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.stdout.strip() == "False"


# -- the whole probe on a fake GPU that replays the H200 evidence -----------------------------------


def test_replayed_h200_agrees_and_writes_evidence(
    gpu: types.ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    replay = Replay(recorded())
    use_replay(monkeypatch, replay)
    out_file = tmp_path / "sub" / "evidence.json"
    out = io.StringIO()
    assert probe.run_probe(out=out_file, stdout=out, stderr=io.StringIO()) == 0
    assert "6144 checks, 0 disagreement(s)" in out.getvalue()
    assert replay.calls == 1536
    written = json.loads(out_file.read_text(encoding="utf-8"))
    assert written["summary"] == {
        "agree": True,
        "can_use_differs": [],
        "cases": 1536,
        "checks": 6144,
        "disagreements": [],
    }
    assert written["environment"]["gpu"] == "Fake GPU"
    first = written["cases"][0]
    assert set(first["matrix"]) == set(KERNELS)
    assert list(tmp_path.joinpath("sub").iterdir()) == [out_file]  # no temporary file left


def test_replayed_gpu_that_differs_exits_1(
    gpu: types.ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    masked = ProbeCase(
        dtype="bf16", head_dim=128, attention="mha", causal=False, attn_mask=True, dropout=False
    )
    use_replay(monkeypatch, Replay(recorded(), flips=[("torch_sdpa_flash", masked)]))
    out_file = tmp_path / "evidence.json"
    out = io.StringIO()
    status = probe.run_probe(["torch_sdpa_flash"], out_file, stdout=out, stderr=io.StringIO())
    assert status == 1
    assert (
        "DISAGREE: torch_sdpa_flash bf16/d128/mha/mask: matrix says unsupported, "
        "forcing it: usable" in out.getvalue()
    )
    written = json.loads(out_file.read_text(encoding="utf-8"))
    assert written["kernels"] == ["torch_sdpa_flash"]
    assert len(written["summary"]["disagreements"]) == 1
    assert written["summary"]["agree"] is False


def test_cli_probe_runs_the_replay(
    gpu: types.ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_replay(monkeypatch, Replay(recorded()))
    out = io.StringIO()
    target = tmp_path / "e.json"
    argv = [
        "probe",
        "--kernel",
        "torch_sdpa_math",
        "--out",
        str(target),
        "--matrix",
        str(ROOT / "capabilities"),
    ]
    assert cli.run(argv, out, io.StringIO()) == 0
    assert "1536 checks, 0 disagreement(s)" in out.getvalue()
    assert target.exists()


# -- comparison details ------------------------------------------------------------------------------


def test_can_use_differences_are_notes_not_disagreements() -> None:
    data = recorded()
    row = data["cases"][0]
    flash = row["results"]["torch_sdpa_flash"]
    flash["can_use"] = not flash["usable"]
    result = probe.compare(data)
    assert result.disagreements == ()
    assert len(result.notes) == 1
    note = result.notes[0]
    assert (note.kernel, note.against, note.observed) == ("torch_sdpa_flash", "can_use", flash["can_use"])
    assert "torch can_use_*" in str(note)


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda d: d.update(format=99), "unknown evidence format 99"),
        (lambda d: d.pop("environment"), "lacks environment.sm"),
        (lambda d: d["cases"][3]["query"].pop("dropout"), r"cases\[3\]: .*lacks axis 'dropout'"),
        (lambda d: d["cases"][5]["results"]["torch_sdpa_math"].pop("ran"), r"cases\[5\]"),
    ],
)
def test_read_evidence_rejects_bad_data(mutate: Any, problem: str) -> None:
    data = recorded()
    mutate(data)
    with pytest.raises(ValueError, match=problem):
        probe.read_evidence(data)


@pytest.mark.parametrize("sm", [float("inf"), float("nan"), 90.0, 90.7, "90", True, -90, None])
def test_read_evidence_takes_sm_as_the_probe_writes_it(sm: object) -> None:
    """An int: ``int(...)`` took 90.7 as 90 and True as 1, and raised OverflowError on Infinity."""
    data = recorded()
    data["environment"]["sm"] = sm
    with pytest.raises(ValueError, match=r"environment\.sm must be an integer such as 90, got "):
        probe.read_evidence(data)


# -- evidence files ------------------------------------------------------------------------------------


def test_dumps_evidence_is_json_with_one_case_per_line() -> None:
    data = {"format": 1, "environment": {"sm": 90}, "cases": [{"a": 1}, {"b": [2, 3]}]}
    text = probe.dumps_evidence(data)
    assert json.loads(text) == data
    assert '    {"a": 1},\n' in text
    assert json.loads(probe.dumps_evidence({"cases": []})) == {"cases": []}
    assert json.loads(probe.dumps_evidence({"cases": [{"x": 1}]})) == {"cases": [{"x": 1}]}


def test_write_evidence_replaces_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "e.json"
    probe.write_evidence(target, {"format": 1, "cases": [{"n": 1}]})
    assert json.loads(target.read_text(encoding="utf-8"))["cases"] == [{"n": 1}]

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        probe.write_evidence(target, {"format": 1, "cases": [{"n": 2}]})
    assert json.loads(target.read_text(encoding="utf-8"))["cases"] == [{"n": 1}]
    assert [p.name for p in tmp_path.iterdir()] == ["e.json"]


def test_priority_order_is_read_after_dispatch(
    gpu: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyTorch settles its default order at the first dispatch; the evidence keeps the settled one."""
    order = [1, 2, 0, 3]
    gpu._C = types.SimpleNamespace(_get_sdp_priority_order=lambda: list(order))  # type: ignore[attr-defined]
    replay = Replay(recorded())

    def observe_and_settle(
        torch: object, case: ProbeCase, kernels: Sequence[str] = KERNELS
    ) -> tuple[Observation, ...]:
        order[:] = [3, 1, 2, 0]
        return replay.observe(torch, case, kernels)

    monkeypatch.setattr(probe, "observe_case", observe_and_settle)
    monkeypatch.setattr(probe, "default_backend", replay.default)
    case = next(iter(replay.rows))
    data = probe.collect(gpu, [case])
    assert data["environment"]["sdpa_priority_order"] == [
        "CUDNN_ATTENTION",
        "FLASH_ATTENTION",
        "EFFICIENT_ATTENTION",
        "MATH",
    ]


def test_unknown_backend_value_is_kept_as_text() -> None:
    torch = fake_torch()
    torch._C = types.SimpleNamespace(_get_sdp_priority_order=lambda: [1, 42])  # type: ignore[attr-defined]
    assert probe.priority_order(torch) == ["FLASH_ATTENTION", "42"]


def test_can_use_difference_is_printed_but_passes(
    gpu: types.ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    data = recorded()
    for row in data["cases"]:
        efficient = row["results"]["torch_sdpa_efficient"]
        if row["query"]["attention"] == "gqa" and row["query"]["dtype"] == "fp16":
            efficient["can_use"] = True  # the predicate says yes, forcing says no
    use_replay(monkeypatch, Replay(data))
    out = io.StringIO()
    assert probe.run_probe(["torch_sdpa_efficient"], stdout=out, stderr=io.StringIO()) == 0
    text = out.getvalue()
    assert text.count("note: torch_sdpa_efficient fp16/") == 16 * 8
    assert "matrix says unsupported, torch can_use_*: usable" in text
    assert "evidence written" not in text
    assert list(tmp_path.iterdir()) == []
