"""Section 6: a matrix with five releases of each engine, against the shipped matrix in the same run.

The five-release matrix is the shipped one with four more releases declared before each engine's
newest (synthetic version numbers) and, seeded, one in four of each engine's rules limited to a span of
them (``since`` or ``until``), so that every pair of neighbouring releases differs. What an engine and a
maintainer run is timed on both matrices: the load (no cache), the per-step resolve, the engine start
(``bind_spec_dec``), ``check`` and a release diff. The target: resolve within 1.2x of the shipped
matrix's per-query cost.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks.report import Row, Section, fmt_time, fmt_timing, ratio
from benchmarks.timing import Timing, per_call, repeat_wall

ROOT = Path(__file__).resolve().parent.parent
#: Releases per engine in the synthetic matrix.
RELEASES = 5
#: The share of an engine's rules given a release span.
SPANNED = 0.25
#: The per-query cost the five-release matrix may have, as a multiple of the shipped matrix's.
RESOLVE_TARGET = 1.2


def five_releases(dest: Path, *, seed: int = 5) -> Path:
    """Write the five-release matrix under ``dest`` (a copy of the shipped one) and return its root."""
    root = dest / "capabilities"
    shutil.copytree(ROOT / "capabilities", root)
    rng = random.Random(seed)
    releases_path = root / "releases.yaml"
    data = yaml.safe_load(releases_path.read_text(encoding="utf-8"))
    names: dict[str, list[str]] = {}
    for engine, entry in data["releases"].items():
        real = entry["versions"]  # kept: the rules name them
        older = [{"version": f"0.0.{i}", "source": "benchmark: synthetic"}
                 for i in range(1, RELEASES - len(real) + 1)]
        entry["versions"] = [*older, *real]
        names[engine] = [v["version"] for v in entry["versions"]]
        for items in (entry.get("words") or {}).values():  # the words hold in every release
            items[:] = [w if isinstance(w, str) else w["word"] for w in items]
    releases_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    for path in sorted((root / "kernels").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        changed = False
        for kernel in doc.get("kernels", {}).values():
            engine = kernel.get("engine")
            if engine not in names:
                continue
            for rule in kernel["rules"]:
                if "since" in rule or "until" in rule or rng.random() >= SPANNED:
                    continue
                versions = names[engine]
                pick = rng.randrange(1, len(versions))
                # a grant added in a later release, or an exclusion dropped by one
                rule["since" if "grant" in rule else "until"] = versions[pick]
                changed = True
        if changed:
            path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return root


def _timings(matrix: Any, repeat: int, min_time: float) -> dict[str, Timing]:
    from capmatrix import KernelQuery, resolve  # noqa: PLC0415
    from capmatrix.authoring.analysis import check, release_diff  # noqa: PLC0415
    from capmatrix.engine.trtllm import bind_spec_dec  # noqa: PLC0415

    query = KernelQuery("trtllm_spec_dec_mode", sm=120, attention="gqa", spec_dec="one_model",
                        attention_backend="trtllm", spec_dec_pass="target")
    xqa = KernelQuery("xqa", sm=90, model="llama", spec_dec="one_model", phase="generation")
    ns = {"resolve": resolve, "q": query, "x": xqa, "m": matrix}
    out = {
        "resolve (gate, per step)": per_call("resolve(q, m)", ns, repeat=repeat, min_time=min_time),
        "resolve (xqa, per step)": per_call("resolve(x, m)", ns, repeat=repeat, min_time=min_time),
        "engine start (bind_spec_dec)": repeat_wall(lambda: bind_spec_dec(
            spec_dec="one_model", sm=120, is_mla=False, is_draft_model=False, use_chain_drafter=False,
            attention_backend="trtllm", matrix=matrix), repeat=repeat),
        "check": repeat_wall(lambda: check(matrix), repeat=max(1, repeat // 3)),
    }
    names = matrix.releases["vllm"].names
    out["diff --engine vllm (oldest vs newest)"] = repeat_wall(
        lambda: release_diff(matrix, "vllm", names[0], names[-1]), repeat=max(1, repeat // 3))
    return out


def section_releases(quick: bool) -> Section:
    """Section 6 of the report."""
    import capmatrix  # noqa: PLC0415

    sec = Section(
        "6. Five releases of each engine",
        "The shipped matrix against the same matrix with five releases of each engine "
        f"(`benchmarks/releases.py`: synthetic releases before the real ones, {SPANNED:.0%} of each "
        "engine's rules given a `since` or `until`, seeded). Both in this process, the cache off; per-step "
        "timings are the minimum of timeit samples, the others of whole calls (median in parentheses). "
        "The release diff compares the oldest and the newest vLLM release of each matrix.",
    )
    repeat, min_time = (3, 0.05) if quick else (7, 0.2)
    previous = os.environ.get("CAPMATRIX_CACHE")
    os.environ["CAPMATRIX_CACHE"] = "off"
    try:
        with tempfile.TemporaryDirectory(prefix="capmatrix-bench-releases-") as tmp:
            root = five_releases(Path(tmp))
            load_shipped = repeat_wall(lambda: capmatrix.load(ROOT / "capabilities"), repeat=repeat)
            load_five = repeat_wall(lambda: capmatrix.load(root), repeat=repeat)
            shipped, five = capmatrix.load(ROOT / "capabilities"), capmatrix.load(root)
            base, many = _timings(shipped, repeat, min_time), _timings(five, repeat, min_time)
    finally:
        if previous is None:
            os.environ.pop("CAPMATRIX_CACHE", None)
        else:
            os.environ["CAPMATRIX_CACHE"] = previous
    sec.rows.append(Row("load (no cache)", fmt_timing(load_five), fmt_timing(load_shipped),
                        ratio(load_five.best, load_shipped.best)))
    for name, t in many.items():
        b = base[name]
        row = Row(name, fmt_timing(t), fmt_timing(b), ratio(t.best, b.best))
        if name.startswith("resolve"):
            row.target = f"<= {RESOLVE_TARGET}x the shipped matrix"
            row.met = t.best <= RESOLVE_TARGET * b.best
            if not row.met:
                row.over = t.best / (RESOLVE_TARGET * b.best)
        sec.rows.append(row)
    rules = sum(len(k.rules) for k in five.kernels.values())
    sec.notes.append(f"The five-release matrix: {rules} rules, releases "
                     + "; ".join(f"{e} {', '.join(r.names)}" for e, r in five.releases.items())
                     + f". One resolve of the gate takes {fmt_time(many['resolve (gate, per step)'].best)}.")
    return sec
