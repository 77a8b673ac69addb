"""benchmarks/releases.py: the five-release matrix the benchmark times is valid and differs per release."""

from __future__ import annotations

from typing import TYPE_CHECKING

import capmatrix
from benchmarks.releases import RELEASES, five_releases
from capmatrix.authoring.analysis import release_diff

if TYPE_CHECKING:
    from pathlib import Path


def test_the_five_release_matrix_loads_with_five_releases_that_differ(tmp_path: Path) -> None:
    matrix = capmatrix.load(five_releases(tmp_path))
    shipped = capmatrix.load()
    for engine, releases in matrix.releases.items():
        assert len(releases.names) == RELEASES
        assert releases.newest == shipped.releases[engine].newest  # the real releases are kept
        spanned = [r for k in matrix.kernels.values() if k.engine == engine for r in k.rules
                   if releases.axis in r.conditions]
        assert spanned, engine
    names = matrix.releases["vllm"].names
    assert release_diff(matrix, "vllm", names[0], names[-1]).changed
    # The same seed writes the same matrix.
    again = capmatrix.load(five_releases(tmp_path / "again"))
    assert [r.conditions for r in again.rules] == [r.conditions for r in matrix.rules]
