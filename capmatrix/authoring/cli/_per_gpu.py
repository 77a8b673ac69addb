"""``--gpu all`` and ``--gpu H100,B200`` on ``query`` and ``select``: an answer per GPU, grouped by answer.

Each GPU is asked as ``--gpu NAME`` alone would ask it; GPUs of one SM share one answer (the SM is all a
GPU sets). The text form has a line per GPU (its name and SM) under the answer it shares with the others
of its group; ``--json`` has the same table.
"""

from __future__ import annotations

import argparse

from capmatrix.authoring.cli._common import EXIT_DEPENDS, EXIT_FAIL, EXIT_OK, gpu_sm
from capmatrix.errors import InvalidQuery, echo

TYPE_CHECKING = False  # not typing's: every command would import it for annotations only
if TYPE_CHECKING:
    from collections.abc import Callable

    from capmatrix.matrix import Matrix
    from capmatrix.model import GPU

__all__ = ["PerGPU", "Row", "answer_per_gpu", "gpus_asked"]

#: The word of ``--gpu`` that asks every GPU of the matrix.
ALL = "all"


def gpus_asked(args: argparse.Namespace, matrix: Matrix) -> list[GPU] | None:
    """The GPUs ``--gpu all`` (in the matrix's order) or a comma list (as given, once each) names.

    None for no ``--gpu`` or one name (the command then answers one query).

    :raises InvalidQuery: for an empty name in the list, ``--sm`` beside it, or a matrix without GPUs.
    :raises UnknownName: for a name no GPU answers to (with the closest one).
    """
    text = getattr(args, "gpu", None)
    if text is None or (text.strip().lower() != ALL and "," not in text):
        return None
    if getattr(args, "axis_sm", None) is not None:
        raise InvalidQuery(f"--gpu {echo(text)} asks several GPUs, each with its own SM: leave out --sm")
    if text.strip().lower() == ALL:
        if not matrix.gpus:
            raise InvalidQuery("--gpu all: the matrix lists no GPUs (gpus.yaml); give --sm")
        return list(matrix.gpus.values())
    chosen: dict[str, GPU] = {}
    for name in text.split(","):
        if not name.strip():
            raise InvalidQuery(f"--gpu {echo(text)}: an empty name; give GPU names separated by commas "
                               "(--gpu H100,B200) or all")
        gpu_sm(matrix, name.strip())  # the error of an unknown name, with the closest one
        named = matrix.gpu(name.strip())
        gpu = next(g for g in matrix.gpus.values() if g is named)  # the one it names (gpu_sm found it)
        chosen.setdefault(gpu.key, gpu)
    return list(chosen.values())


class Row:
    """One GPU's answer: ``answer`` is the text its group shares, ``status`` the exit status alone."""

    def __init__(self, gpu: GPU, answer: str, status: int, data: dict[str, object]) -> None:
        self.gpu = gpu
        self.answer = answer
        self.status = status
        self.data = data


class PerGPU:
    """The rows of every GPU asked, in order, and their groups (GPUs with the same answer)."""

    def __init__(self, subject: str, rows: list[Row]) -> None:
        self.subject = subject
        self.rows = rows

    def groups(self) -> dict[str, list[Row]]:
        """The rows by answer, in the order each answer first appears."""
        out: dict[str, list[Row]] = {}
        for row in self.rows:
            out.setdefault(row.answer, []).append(row)
        return out

    @property
    def status(self) -> int:
        """0 when every GPU is supported, 1 when none is, else 3 (it depends on the GPU)."""
        statuses = {row.status for row in self.rows}
        if statuses == {EXIT_OK}:
            return EXIT_OK
        if statuses == {EXIT_FAIL}:
            return EXIT_FAIL
        return EXIT_DEPENDS

    def text(self) -> str:
        width = max(len(row.gpu.name) for row in self.rows)
        lines = [f"{self.subject}, per GPU ({len(self.rows)}):"]
        for answer, rows in self.groups().items():
            lines.append(f"  {answer}:")
            lines.extend(f"    {row.gpu.name.ljust(width)}  sm {row.gpu.sm}" for row in rows)
        return "\n".join(lines)

    def as_dict(self) -> dict[str, object]:
        return {
            "subject": self.subject,
            "gpus": [{"gpu": row.gpu.name, "key": row.gpu.key, "sm": row.gpu.sm, "answer": row.answer,
                      **row.data} for row in self.rows],
            "groups": [{"answer": answer, "gpus": [row.gpu.name for row in rows]}
                       for answer, rows in self.groups().items()],
        }


def answer_per_gpu(
    args: argparse.Namespace, gpus: list[GPU], subject: str,
    ask: Callable[[argparse.Namespace], tuple[str, int, dict[str, object]]],
) -> PerGPU:
    """Ask ``ask`` once per SM, as ``--gpu NAME`` of a GPU of that SM; each GPU gets its SM's answer."""
    by_sm: dict[int, tuple[str, int, dict[str, object]]] = {}
    rows = []
    for gpu in gpus:
        if gpu.sm not in by_sm:
            by_sm[gpu.sm] = ask(argparse.Namespace(**{**vars(args), "gpu": gpu.key}))
        answer, status, data = by_sm[gpu.sm]
        rows.append(Row(gpu, answer, status, data))
    return PerGPU(subject, rows)
