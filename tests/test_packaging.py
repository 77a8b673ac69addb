"""The wheel: pure Python, with the compiled matrix the runtime reads, and the whole CLI's data."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from test_layering import ENGINE_PATH, RUNTIME

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import sys
import capmatrix
m = capmatrix.default_matrix()
assert m.root.endswith("_capabilities"), m.root
assert "torch" not in sys.modules
r = capmatrix.resolve(capmatrix.KernelQuery("xqa", sm=121, model="llama", spec_dec="one_model"))
print(len(m.kernels), r.verdict, r.reasons[0].path, "parsed" if "yaml" in sys.modules else "artifact")
"""


def test_the_wheel_is_pure_and_its_install_answers_from_the_artifact(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
         str(ROOT)],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "capmatrix/_matrix.json" in names
    assert not [n for n in names if n.endswith((".so", ".pyd", ".c"))]
    assert "capmatrix/_capabilities/axes.yaml" in names  # the CLI validates and analyses the shipped YAML
    assert "capmatrix/authoring/render/_ask.js" in names  # the HTML page's ask-form script
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "CAPMATRIX_CACHE_DIR": str(tmp_path / "cache")}
    # The engine path, PyYAML, jsonschema and tabulate blocked: it answers and loads the runtime only.
    run = subprocess.run([sys.executable, "-c", ENGINE_PATH], capture_output=True, text=True, check=False,
                         cwd=tmp_path, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    answers = json.loads(run.stdout)
    assert answers["file"].startswith(str(target))
    assert answers["third_party"] == []
    assert set(answers["modules"]) <= RUNTIME
    # The face reads the artifact (no YAML parsed) and names the files as the loader would.
    run = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=False,
                         cwd=tmp_path, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    kernels, verdict, path, how = run.stdout.split()
    assert int(kernels) >= 9
    assert (verdict, path, how) == ("supported", "capabilities/kernels/xqa.yaml", "artifact")
    assert not (tmp_path / "cache").exists()  # the artifact answered: nothing was cached
