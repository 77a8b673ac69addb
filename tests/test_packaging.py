"""The shipped matrix travels inside a plain (non-editable) install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import sys
import capmatrix
m = capmatrix.load()
assert m.root.endswith("_capabilities"), m.root
assert "torch" not in sys.modules
r = capmatrix.resolve(capmatrix.KernelQuery("xqa", sm=121, model="llama", spec_dec="one_model"))
print(len(m.kernels), r.verdict, r.reasons[0].path, "parsed" if "yaml" in sys.modules else "prebuilt")
"""


def test_non_editable_install_ships_the_matrix(tmp_path: Path) -> None:
    target = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(ROOT)],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    assert (target / "capmatrix" / "_capabilities" / "axes.yaml").is_file()
    # The HTML page's ask-form script is package data of the render wing.
    assert (target / "capmatrix" / "render" / "_ask.js").is_file()
    # The wheel carries its matrix's prebuilt entry: a fresh install (no cache entry) parses nothing;
    # with the cache off every file is parsed, to the same answers.
    assert (target / "capmatrix" / "_shipped_matrix.entry").is_file()
    answers = []
    for cache in ("fresh", "off"):
        env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin",
               "CAPMATRIX_CACHE_DIR": str(tmp_path / "cache")}
        if cache == "off":
            env["CAPMATRIX_CACHE"] = "off"
        run = subprocess.run(
            [sys.executable, "-c", PROGRAM],
            capture_output=True, text=True, check=False, cwd=tmp_path, env=env,
        )
        assert run.returncode == 0, run.stderr
        kernels, verdict, path, how = run.stdout.split()
        assert int(kernels) >= 9
        assert verdict == "supported"
        assert path == "capabilities/kernels/xqa.yaml"
        answers.append((kernels, verdict, path))
        assert how == ("prebuilt" if cache == "fresh" else "parsed")
    assert answers[0] == answers[1]
    assert not (tmp_path / "cache").exists()  # the prebuilt entry answered: nothing was cached
