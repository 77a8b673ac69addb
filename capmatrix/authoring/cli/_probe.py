"""``capmatrix probe``: check the torch SDPA rules on this GPU."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from capmatrix.authoring.cli._common import add_matrix_option, announce_matrix, choose_matrix, load_matrix
from capmatrix.authoring.probe import KERNEL_BACKENDS, run_probe

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["cmd_probe", "configure_probe"]


def configure_probe(parser: argparse.ArgumentParser, _argv: Sequence[str]) -> None:
    """Arguments of ``capmatrix probe``."""
    parser.add_argument(
        "--kernel",
        action="append",
        metavar="K",
        choices=list(KERNEL_BACKENDS),
        help="kernel to probe (repeatable; default: every torch SDPA kernel)",
    )
    parser.add_argument("--out", metavar="FILE", help="write the evidence JSON here")
    add_matrix_option(parser)


def cmd_probe(args: argparse.Namespace, _prepared: None, out: TextIO, err: TextIO) -> int:
    """Run ``capmatrix probe``: 0 agree, 1 disagreements, 2 no GPU."""
    announce_matrix(choose_matrix(args.matrix), err)
    matrix = load_matrix(args.matrix)
    return run_probe(args.kernel, args.out, matrix=matrix, stdout=out, stderr=err)
