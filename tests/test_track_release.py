"""tools/track_release.py: a new release's words, pins and importer drift, read from a wheel offline."""

from __future__ import annotations

import hashlib
import zipfile
from typing import TYPE_CHECKING

from scripts import load_script

from capmatrix.engine import vllm

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

TOOL = load_script("tools/track_release.py")


def _wheel(dl: Path, version: str, backends: list[str], kv_words: list[str]) -> Path:
    """A vLLM wheel holding only what the tracker reads (the enum, CacheDType, the version)."""
    members = "\n".join(f'    {name} = "vllm.x.{name.lower()}"' for name in backends)
    literal = ", ".join(f'"{w}"' for w in kv_words)
    files = {
        "vllm/v1/attention/backends/registry.py": f"import enum\n\nclass AttentionBackendEnum(enum.Enum):\n"
                                                  f"{members}\n",
        "vllm/config/cache.py": f"from typing import Literal\n\nCacheDType = Literal[{literal}]\n",
        "vllm/_version.py": f"__version__ = {version!r}\n__commit_id__ = commit_id = 'gabcdef123'\n",
    }
    path = dl / f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def test_a_release_with_new_and_dropped_words_is_a_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    newest = list(vllm.backends())
    words = [*newest[:3], "BRAND_NEW", *newest[3:-1]]  # one added after the third, CUSTOM dropped
    wheel = _wheel(tmp_path, "9.9.9", words, list(vllm.kv_cache_dtypes()))
    report = TOOL.track("vllm", "9.9.9", tmp_path)
    assert report.pins == {"wheel": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
                           "commit": "abcdef123"}
    backends = "\n".join(report.sections["Words: backends (vllm/v1/attention/backends/registry.py)"])
    assert f"added `BRAND_NEW` (after `{newest[2]}`): add `{{word: BRAND_NEW, since: 9.9.9}}`" in backends
    assert f"removed `{newest[-1]}`: add `until: 9.9.9`" in backends
    assert "unchanged" in "".join(report.sections["Words: kv_cache_dtypes (vllm/config/cache.py)"])
    # The importer cannot read backend classes this wheel lacks: a change to look at, not a pass.
    importer = report.sections["Importer: tools/import_vllm_backends.py"]
    assert any("importer failed" in line for line in importer)
    assert report.changed
    assert TOOL.main(["vllm", "9.9.9", "--dl", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("# vllm 9.9.9\n")
    assert "Verdict: the data must change" in out


def test_the_same_words_are_no_change_of_words(tmp_path: Path) -> None:
    _wheel(tmp_path, "9.9.8", list(vllm.backends()), list(vllm.kv_cache_dtypes()))
    report = TOOL.track("vllm", "9.9.8", tmp_path)
    for title, lines in report.sections.items():
        if title.startswith("Words:"):
            assert len(lines) == 1, (title, lines)
            assert lines[0].startswith("- unchanged since"), (title, lines)


def test_an_unreadable_release_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert TOOL.main(["nosuchengine", "1.0", "--dl", str(tmp_path)]) == 2
    assert "unknown engine 'nosuchengine'" in capsys.readouterr().err
    (tmp_path / "vllm-9.9.7-cp38-abi3-manylinux_2_28_x86_64.whl").write_bytes(b"not a zip")
    assert TOOL.main(["vllm", "9.9.7", "--dl", str(tmp_path)]) == 2


def test_against_an_older_modelled_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--against`` compares with the words of the release it names: 0.34.0's words are 0.33.0's and
    the two members 0.34.0 added, which the report asks to mark ``since``."""
    _wheel(tmp_path, "9.9.6", list(vllm.backends("0.34.0")), list(vllm.kv_cache_dtypes("0.34.0")))
    added = set(vllm.backends("0.34.0")) - set(vllm.backends("0.33.0"))
    assert added  # else this test proves nothing
    report = TOOL.track("vllm", "9.9.6", tmp_path, against="0.33.0")
    backends = "\n".join(report.sections["Words: backends (vllm/v1/attention/backends/registry.py)"])
    assert {w for w in added if f"added `{w}`" in backends} == added
    assert TOOL.track("vllm", "9.9.6", tmp_path).sections[
        "Words: backends (vllm/v1/attention/backends/registry.py)"][0].startswith("- unchanged since 0.34.0")
    assert TOOL.main(["vllm", "9.9.6", "--dl", str(tmp_path), "--against", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "--against '0.1' is not a modelled release of vllm; modelled: 0.33.0, 0.34.0" in err
