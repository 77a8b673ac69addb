"""The ``capmatrix`` command line: the only place that parses arguments (argparse) and prints.

:func:`main` is the script's entry point; :func:`run` takes the argument list and the two streams and
returns the exit status (0 supported / clean, 1 unsupported or a failed check, 2 usage or data error,
3 depends). Each command group lives in its own private module: ``_query`` (query, select, validate),
``_analysis`` (check, diff, compare-legacy, test), ``_render``, ``_probe``; ``_common`` holds the shared
options and output, ``_git`` the git plumbing of ``diff REV``.
"""

from __future__ import annotations

from capmatrix.authoring.cli._main import COMMANDS as COMMANDS
from capmatrix.authoring.cli._main import main as main
from capmatrix.authoring.cli._main import render_main as render_main
from capmatrix.authoring.cli._main import run as run

__all__ = ["COMMANDS", "main", "render_main", "run"]


def __dir__() -> list[str]:
    return list(__all__)
