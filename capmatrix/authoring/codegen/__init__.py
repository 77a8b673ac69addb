"""Code generated from the exported matrix, for engines that are not written in Python.

:func:`cpp_header` writes a self-contained C++17 header answering chosen kernels, gates and roles
from generated tables (``capmatrix codegen cpp``; ``docs/integration.md`` shows it in use). It reads
the artifact of :func:`capmatrix.authoring.export.export`, so it sees exactly what any other reader sees.
"""

from __future__ import annotations

from capmatrix.authoring.codegen.cpp import CodegenError as CodegenError
from capmatrix.authoring.codegen.cpp import cpp_header as cpp_header

__all__ = ["CodegenError", "cpp_header"]


def __dir__() -> list[str]:
    return list(__all__)
