"""Evidence summaries: each probe or record file and its comparison with the matrix."""

from __future__ import annotations

from pathlib import Path

from capmatrix.authoring._files import read_json
from capmatrix.authoring.evidence import compare
from capmatrix.authoring.render._cells import _Grid
from capmatrix.authoring.render.page import (
    EvidenceSummary,
    RenderError,
)
from capmatrix.errors import CapmatrixError, InvalidFile

__all__: list[str] = []

#: Disagreements listed per evidence file (the count is always given).
MAX_DISAGREEMENTS = 10
#: What an evidence file is, said with every problem of reading one.
EVIDENCE_HINT = "an evidence file is the JSON `capmatrix probe --out FILE` writes, or a recorded source"


class _EvidenceSummaries(_Grid):
    """The evidence section of the page."""

    # -- evidence ------------------------------------------------------------------------------

    def evidence(self) -> tuple[EvidenceSummary, ...]:
        folder = Path(self.matrix.root) / "evidence"
        if not folder.is_dir():
            return ()
        return tuple(self.evidence_file(p) for p in sorted(folder.glob("*.json")))

    def evidence_file(self, path: Path) -> EvidenceSummary:
        shown, link = self.paths.location(str(path), None)
        try:
            data = read_json(path, shown, hint=EVIDENCE_HINT)
        except InvalidFile as exc:
            raise RenderError(str(exc)) from None
        if not isinstance(data, dict):
            raise RenderError(f"{shown}: evidence file must hold a JSON object")
        env = data.get("environment") if isinstance(data.get("environment"), dict) else {}
        assert isinstance(env, dict)  # noqa: S101 - narrowed above
        software = ", ".join(
            f"{label} {_version(key, env[key])}" for key, label in (("torch", "torch"), ("cuda", "CUDA"),
                                                     ("cudnn", "cuDNN"))
            if env.get(key) is not None
        )
        cases = data.get("cases")
        kernels = data.get("kernels")
        disagreements: int | None = None
        notes: int | None = None
        examples: list[str] = []
        problem = None
        try:
            result = compare(data, self.matrix)
        except (ValueError, KeyError, TypeError, CapmatrixError) as exc:
            problem = f"not compared with the matrix: {exc}"
        else:
            disagreements = len(result.disagreements)
            notes = len(result.notes)
            examples.extend(_describe_disagreement(d) for d in result.disagreements[:MAX_DISAGREEMENTS])
        return EvidenceSummary(
            path=shown,
            link=link,
            gpu=str(env.get("gpu", "unknown GPU")),
            sm=str(env.get("sm", "?")),
            software=software or "unknown",
            cases=len(cases) if isinstance(cases, list) else 0,
            kernels=tuple(str(k) for k in kernels) if isinstance(kernels, list) else (),
            disagreements=disagreements,
            notes=notes,
            examples=tuple(examples),
            problem=problem,
        )


def _describe_disagreement(item: object) -> str:
    """One line per disagreement (``evidence.Disagreement`` renders itself)."""
    return " ".join(str(item).split())


def _version(key: str, value: object) -> str:
    """Show a cuDNN version integer (91900) dotted (9.19.0)."""
    if key == "cudnn" and isinstance(value, int) and value >= 10000:
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return str(value)
