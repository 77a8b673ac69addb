"""Load the repository's scripts (tools/, examples/) as modules, for the tests that check them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["ROOT", "load_script"]


def load_script(relative: str) -> ModuleType:
    """The script at ``ROOT / relative`` run as a module named after its file (registered in sys.modules,
    so that dataclasses and pickling inside it find their module)."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
