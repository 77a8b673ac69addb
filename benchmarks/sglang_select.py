"""Section 5b: SGLang's attention-backend resolution through the matrix, against SGLang's own pipeline.

capmatrix's side always runs: ``capmatrix.engine.sglang.resolve`` over configurations of the recorded
grid, each asked for the first time (every resolver memo cleared). SGLang's side needs SGLang 0.5.23's
wheel and the environment that ``tools/record_sglang_selection.py`` documents (it runs SGLang's own
``ServerArgs.resolve_once`` on CPU); give it with ``CAPMATRIX_BENCH_SGLANG_PYTHON`` (that environment's
interpreter) and ``CAPMATRIX_BENCH_SGLANG_SRC`` (the unpacked wheel). The tool then times both in one
process on the same configurations.
"""

from __future__ import annotations

import gzip
import json
import random
import time
from pathlib import Path
from typing import Any

from benchmarks.report import Row, Section, fmt_time, ratio
from benchmarks.timing import engine_bench

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "capabilities" / "evidence" / "sglang_0.5.23_selection.json.gz"
TOOL = ROOT / "tools" / "record_sglang_selection.py"


def _cells(n: int) -> list[dict[str, Any]]:
    """``n`` distinct automatic (no backend forced) configurations of the recorded grid (seeded), as
    ``resolve``'s arguments."""
    from capmatrix.engine import sglang  # noqa: PLC0415

    with gzip.open(RECORD, "rt", encoding="utf-8") as lines:
        header = json.loads(lines.readline())
        keys = [json.loads(line)[0] for line in lines]
    models = {name: sglang.model_from_hf_config(config) for name, config in header["models"].items()}
    out = []
    for key in random.Random(13).sample([k for k in keys if k.endswith("/-")], n):
        cap, model, spec, kv, page, _forced = key.split("/")
        major, minor = cap.split(".")
        args = header["specs"][spec]
        out.append({"capability": (int(major), int(minor)), "model": models[model], "kv_cache_dtype": kv,
                    "page_size": None if page == "-" else int(page),
                    "speculative_algorithm": args.get("speculative_algorithm"),
                    "speculative_eagle_topk": args.get("speculative_eagle_topk")})
    return out


def _first(cells: list[dict[str, Any]], repeat: int) -> tuple[float, float]:
    """Mean seconds per first resolution of a configuration (min over samples), and the refused share."""
    from capmatrix._shipped.default import _resolver  # noqa: PLC0415
    from capmatrix.engine import sglang  # noqa: PLC0415

    resolver = _resolver(None)
    samples = []
    refused = 0
    for _ in range(repeat):
        resolver.forget()
        start = time.perf_counter()
        refused = sum(1 for cell in cells if sglang.resolve(**cell).refused is not None)
        samples.append((time.perf_counter() - start) / len(cells))
    return min(samples), refused / len(cells)


def section_sglang(quick: bool) -> Section:
    """The SGLang resolution rows."""
    sec = Section(
        "5b. SGLang attention-backend resolution",
        "`capmatrix.engine.sglang.resolve`, which answers SGLang 0.5.23's CUDA attention-backend "
        "resolution (backends, page size, KV dtype, speculative top-k, or the refusal) from the matrix's "
        "SGLang roles. *First*: configurations never asked before (resolver memos cleared), drawn from "
        "the recorded grid. SGLang resolves its server arguments once per start and keeps no memo, so "
        "each of its calls is a first: `ServerArgs(...)` and `resolve_once()` (reading the model's "
        "`config.json` among them), timed by `tools/record_sglang_selection.py --bench` in one process "
        "with capmatrix's, when that tool's environment is given (`CAPMATRIX_BENCH_SGLANG_PYTHON`, "
        "`CAPMATRIX_BENCH_SGLANG_SRC`); capmatrix's row *with config* reads and parses the same file.",
    )
    n, samples = (200, 3) if quick else (1000, 5)
    first, refused = _first(_cells(n), samples)
    sec.rows.append(Row("capmatrix `sglang.resolve`, first resolution of a configuration", fmt_time(first),
                        note=f"mean over {n:,} distinct recorded automatic configurations "
                        f"({refused:.0%} refused), min of {samples} samples"))
    theirs = engine_bench(str(TOOL), "CAPMATRIX_BENCH_SGLANG_PYTHON", "CAPMATRIX_BENCH_SGLANG_SRC",
                          "--sglang-src")
    if theirs is None:
        sec.rows.append(Row("SGLang `ServerArgs.resolve_once`", "not measured", target="capmatrix <= 1x",
                            note="needs SGLang's environment: see the tool"))
        return sec
    for cell in theirs["cells"]:
        theirs_s, ours_s = cell["sglang_first"], cell["capmatrix_first"]
        with_config = cell["capmatrix_first_with_config"]
        agree = "agree" if cell["sglang"] == cell["capmatrix"] else "DISAGREE"
        sec.rows.append(Row(f"`{cell['cell']}` first: SGLang / capmatrix", fmt_time(ours_s),
                            f"SGLang {fmt_time(theirs_s)}", ratio(ours_s, theirs_s), "<= 1x",
                            ours_s <= theirs_s,
                            f"{agree} ({cell['sglang']}); with config {fmt_time(with_config)}",
                            over=ours_s / theirs_s))
    return sec
