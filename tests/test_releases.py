"""Engine releases as data: the loader's since/until, capmatrix.releases, the adapters' version=, the CLI."""

from __future__ import annotations

import io
import itertools
import json
from typing import TYPE_CHECKING, Any

import pytest

import capmatrix
from capmatrix.authoring.analysis import release_diff
from capmatrix.authoring.cli import run
from capmatrix.engine import sglang, trtllm, vllm
from capmatrix.errors import InvalidArgument
from capmatrix.query import KernelQuery
from capmatrix.releases import at_release, engine_releases, release

if TYPE_CHECKING:
    from conftest import WriteMatrix

RELEASES = """\
releases:
  eng:
    axis: eng_release
    description: test engine releases
    versions:
      - {version: 1.0.0, source: test, pins: {commit: abc1234}}
      - {version: 1.1.0rc1, source: test}
      - {version: 1.1.0, source: test}
    words:
      backends:
        - A
        - {word: B, since: 1.1.0rc1}
        - {word: C, until: 1.1.0}
kernels:
  gate:
    kind: gate
    engine: eng
    description: an engine switch
    rules:
      - id: gate.all
        grant: {sm: ">=80"}
        reason: always
        source: test
        status: read_from_code
      - id: gate.old_sm12x
        exclude: {sm: sm_12x}
        until: 1.1.0
        reason: before the fix
        source: test
        status: read_from_code
      - id: gate.new_mla
        exclude: {sm: sm_12x, attention: mla}
        since: 1.1.0
        reason: the fix
        source: test
        status: read_from_code
  k_new:
    engine: eng
    description: a kernel of the newest release
    rules:
      - id: k_new.all
        grant: {sm: ">=80"}
        since: 1.1.0
        reason: new
        source: test
        status: read_from_code
roles:
  pick:
    description: the engine's choice
    orders:
      - when: {sm: sm_12x}
        since: 1.1.0
        candidates: [k_new, gate]
      - candidates: [gate]
"""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def released(write_matrix: WriteMatrix) -> capmatrix.Matrix:
    return capmatrix.load(write_matrix({"releases.yaml": RELEASES}))


def test_releases_are_an_axis_of_the_engine_whose_default_is_the_newest(released: capmatrix.Matrix) -> None:
    axis = released.axes["eng_release"]
    assert axis.values == ("1.0.0", "1.1.0rc1", "1.1.0")
    assert (axis.default, axis.scope, axis.environment) == ("1.1.0", "eng", True)
    eng = released.releases["eng"]
    assert eng.newest == "1.1.0"
    assert eng.release("1.0.0").pins == {"commit": "abc1234"}  # type: ignore[union-attr]
    assert eng.words_at("backends", "1.0.0") == ("A", "C")
    assert eng.words_at("backends", "1.1.0rc1") == ("A", "B", "C")
    assert eng.words_at("backends", "1.1.0") == ("A", "B")


@pytest.mark.parametrize(("version", "sm", "attention", "supported"), [
    ("1.0.0", 120, "gqa", False), ("1.1.0rc1", 121, "gqa", False), ("1.1.0", 120, "gqa", True),
    ("1.0.0", 120, "mla", False), ("1.1.0", 121, "mla", False), ("1.0.0", 90, "gqa", True),
    (None, 120, "gqa", True),  # no release named: the newest
])
def test_since_and_until_hold_in_their_releases_only(
    released: capmatrix.Matrix, version: str | None, sm: int, attention: str, supported: bool,
) -> None:
    axes = {} if version is None else {"eng_release": version}
    query = KernelQuery("gate", sm=sm, attention=attention, **axes)
    assert bool(capmatrix.resolve(query, released)) is supported


def test_role_orders_follow_the_release(released: capmatrix.Matrix) -> None:
    old = capmatrix.select("pick", KernelQuery(sm=120, attention="mha", eng_release="1.0.0"), released)
    new = capmatrix.select("pick", KernelQuery(sm=120, attention="mha"), released)
    assert (old.kernel, new.kernel) == (None, "k_new")


def test_the_matrix_of_one_release_answers_as_the_whole_matrix_asked_for_that_release(
    released: capmatrix.Matrix,
) -> None:
    for version in released.releases["eng"].names:
        sliced = at_release(released, "eng", version)
        assert "eng_release" not in sliced.axes
        assert "eng" not in sliced.releases
        for kernel, sm, attention in itertools.product(("gate", "k_new"), (75, 80, 90, 120, 121, 130),
                                                      ("mha", "gqa", "mla")):
            whole = capmatrix.resolve(KernelQuery(kernel, sm=sm, attention=attention, eng_release=version),
                                      released)
            one = capmatrix.resolve(KernelQuery(kernel, sm=sm, attention=attention), sliced)
            assert whole.verdict == one.verdict, (version, kernel, sm, attention)
        for sm in (80, 120):
            whole_pick = capmatrix.select("pick", KernelQuery(sm=sm, attention="mha", eng_release=version),
                                          released)
            assert capmatrix.select("pick", KernelQuery(sm=sm, attention="mha"), sliced).kernel \
                == whole_pick.kernel


def test_a_release_is_checked_and_spelled_as_tags_are(released: capmatrix.Matrix) -> None:
    assert release(released, "eng", None) == "1.1.0"
    assert release(released, "eng", "v1.0.0") == "1.0.0"
    assert release(released, "eng", " 1.1.0rc1 ") == "1.1.0rc1"
    with pytest.raises(InvalidArgument, match=r"1\.0\.0, 1\.1\.0rc1, 1\.1\.0.*got '2\.0'") as caught:
        release(released, "eng", "2.0")
    assert caught.value.argument == "version"
    for odd in (1.1, 1, True, b"1.0.0", ["1.0.0"], "1.0.0 rc", "V1.0.0", "1.0"):  # other types and spellings
        with pytest.raises(InvalidArgument, match="expects one of eng's modelled releases"):
            release(released, "eng", odd)
    with pytest.raises(InvalidArgument, match=r"an engine with modelled releases \(eng\)"):
        engine_releases(released, "vllm")


def test_the_diff_of_two_releases_is_exactly_what_changed(released: capmatrix.Matrix) -> None:
    result = release_diff(released, "eng", "1.0.0", "1.1.0")
    changed = {k.kernel: k for k in result.matrix.kernels if k.gained or k.lost or k.presence != "both"}
    assert set(changed) == {"gate", "k_new"}
    gained = changed["gate"].gained
    assert [a.description for a in gained] == ["sm in {120, 121} and attention in {mha, gqa}"]
    assert not changed["gate"].lost
    assert not release_diff(released, "eng", "1.1.0rc1", "1.0.0").changed


def test_the_shipped_seed_is_the_change_from_trtllm_1_2_0rc8_to_1_2_0() -> None:
    code, out, err = cli("diff", "--engine", "tensorrt_llm", "1.2.0rc8", "1.2.0", "--json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    changed = [k for k in data["kernels"] if k["change"] != "equivalent"]
    assert [k["kernel"] for k in changed] == ["trtllm_spec_dec_mode"]
    (region,) = changed[0]["gained"]
    assert region["description"].startswith("sm in {120, 121")
    assert "attention in {mha, gqa, mqa}" in region["description"]
    assert "spec_dec=one_model" in region["description"]
    assert changed[0]["lost"] == []
    code, out, _ = cli("diff", "--engine", "tensorrt_llm", "1.2.0", "1.2.1", "--exit-code")
    assert code == 0
    assert "unchanged" in out


def test_list_versions_names_every_release_with_its_pins() -> None:
    code, out, err = cli("list", "versions", "--json")
    assert (code, err) == (0, "")
    rows = json.loads(out)["versions"]
    matrix = capmatrix.load()
    assert [(r["engine"], r["version"]) for r in rows] == [
        (e, v) for e, rs in matrix.releases.items() for v in rs.names]
    assert all(r["pins"] for r in rows)
    assert sum(r["newest"] for r in rows) == len(matrix.releases)


@pytest.mark.parametrize(("argv", "message"), [
    (["--engine-version", "tensorrt_llm=1.1.0"], "modelled releases (1.2.0rc8, 1.2.0, 1.2.1)"),
    (["--engine-version", "trtllm=1.2.0"], "did you mean 'tensorrt_llm'"),
    (["--engine-version", "tensorrt_llm"], "ENGINE=VERSION"),
    (["--engine-version", "tensorrt_llm=1.2.0", "--trtllm-release", "1.2.1"], "disagree"),
])
def test_engine_version_refuses_what_the_matrix_does_not_model(argv: list[str], message: str) -> None:
    code, out, err = cli("query", "trtllm_spec_dec_mode", "--sm", "120", "--spec-dec", "one_model", *argv)
    assert (code, out) == (2, "")
    assert message in err


def test_engine_version_asks_that_release() -> None:
    base = ("query", "trtllm_spec_dec_mode", "--sm", "121", "--model", "llama", "--spec-dec", "one_model")
    assert cli(*base, "--engine-version", "tensorrt_llm=1.2.0rc8")[1].startswith(
        "trtllm_spec_dec_mode: unsupported")
    assert cli(*base, "--engine-version", "tensorrt_llm=1.2.0")[1].startswith(
        "trtllm_spec_dec_mode: supported")


def test_bind_spec_dec_answers_each_trtllm_release() -> None:
    args: dict[str, Any] = {"spec_dec": "one_model", "sm": 120, "is_mla": False, "is_draft_model": False,
            "use_chain_drafter": False, "attention_backend": "trtllm"}
    assert trtllm.bind_spec_dec(**args, version="1.2.0rc8").need_table == {False: False, True: False}
    assert trtllm.bind_spec_dec(**args, version="1.2.0").need_table == {False: True, True: True}
    assert trtllm.bind_spec_dec(**args).need_table == trtllm.bind_spec_dec(**args, version="1.2.1").need_table
    with pytest.raises(InvalidArgument, match=r"1\.2\.0rc8, 1\.2\.0, 1\.2\.1"):
        trtllm.bind_spec_dec(**args, version="1.1.0")


def test_the_vllm_words_are_the_releases_own() -> None:
    matrix = capmatrix.load()
    words = matrix.releases["vllm"].words_at
    old, new = vllm.backends("0.33.0"), vllm.backends("0.34.0")
    assert old == words("backends", "0.33.0")
    assert len(old) == len(set(old))
    # the members new in a release are those the importer's record says are (its SINCE)
    from scripts import load_script

    since = load_script("tools/import_vllm_backends.py").SINCE
    assert set(new) - set(old) == {name for name, release in since.items() if release == "0.34.0"}
    assert new == vllm.VLLM_BACKENDS  # the newest release's, by default
    assert vllm.KV_CACHE_DTYPES == vllm.kv_cache_dtypes("0.33.0") == words("kv_cache_dtypes", "0.34.0")
    kv = matrix.axes["kv_cache_dtype"]
    assert all(w in kv.values or w in kv.spellings for w in vllm.KV_CACHE_DTYPES)
    args: dict[str, Any] = {"capability": (10, 0), "head_size": 128, "dtype": "bf16",
                            "kv_cache_dtype": "auto", "block_size": None, "use_mla": False}
    with pytest.raises(InvalidArgument, match=r"vLLM 0\.33\.0's AttentionBackendEnum") as caught:
        vllm.select_backend(**args, selected="flashinfer_ts", version="0.33.0")
    assert caught.value.suggestion == "FLASHINFER"
    assert vllm.select_backend(**args, selected="flashinfer_ts", version="0.34.0") == "FLASHINFER_TS"
    with pytest.raises(vllm.BackendNotModelled, match=r"vLLM 0\.34\.0's"):
        vllm.select_backend(**args, selected="HPC_ATTN")
    with pytest.raises(InvalidArgument, match=r"modelled releases \(0\.33\.0, 0\.34\.0\), got '0\.32\.0'"):
        vllm.backend_order(**args, version="0.32.0")
    with pytest.raises(InvalidArgument, match="argument 'version'"):
        vllm.select_backend(**args, extra={"vllm_release": "0.33.0"})
    b12x = {**args, "capability": (12, 0), "head_size": 64, "block_size": 64,
            "extra": {"vllm_b12x": True}}
    assert vllm.select_backend(**b12x, selected="B12X", version="0.33.0") == "B12X"
    with pytest.raises(vllm.NoValidBackend):  # 0.34.0 dropped head 64
        vllm.select_backend(**b12x, selected="B12X", version="0.34.0")


def test_the_vllm_release_diff_names_what_0_34_0_changed() -> None:
    code, out, err = cli("diff", "--engine", "vllm", "0.33.0", "0.34.0")
    assert (code, err) == (0, "")
    for name in ("vllm_b12x", "vllm_flashinfer_ts", "vllm_kimi_k3_kv_balanced_mla", "vllm_triton_mla"):
        assert f"kernel {name}:" in out, name
    assert "head_dim=64" in out.split("kernel vllm_b12x:")[1].split("kernel ")[0]
    assert "sliding_window=true" in out.split("kernel vllm_triton_mla:")[1]


def test_sglang_takes_its_release() -> None:
    model = sglang.model_from_hf_config({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})
    assert sglang.resolve(capability=(9, 0), model=model, version="0.5.23") == sglang.resolve(
        capability=(9, 0), model=model)
    with pytest.raises(InvalidArgument, match=r"modelled releases \(0\.5\.23\)"):
        sglang.resolve(capability=(9, 0), model=model, version="0.5.24")


def test_check_says_in_which_releases_a_finding_holds() -> None:
    from capmatrix.authoring.analysis import check

    found = {f.key: f for f in check(capmatrix.load())}
    before = found["C106 sm trtllm_spec_dec_mode.sm12x_one_model"]
    assert before.releases == (("tensorrt_llm", ("1.2.0rc8",), ("1.2.0", "1.2.1")),)
    assert before.releases_text() == "tensorrt_llm 1.2.0rc8 (not in 1.2.0, 1.2.1)"
    assert before.as_dict()["releases"] == {
        "tensorrt_llm": {"holds": ["1.2.0rc8"], "not": ["1.2.0", "1.2.1"]}}
    after = found["C106 sm trtllm_spec_dec_mode.mla_sm12x_one_model"]
    assert after.releases_text() == "tensorrt_llm 1.2.0, 1.2.1 (not in 1.2.0rc8)"
    _code, out, _ = cli("check", "--no-baseline")
    assert "    releases: tensorrt_llm 1.2.0rc8 (not in 1.2.0, 1.2.1)" in out.splitlines()
    # A finding about no engine's release names none.
    assert all(not f.releases for f in found.values() if not f.regions)
