"""Section 5: vLLM's backend selection through the matrix, against vLLM's own (memoised) selector.

capmatrix's side always runs. vLLM's side needs vLLM 0.33.0's wheel and the environment that
``tools/record_vllm_selection.py`` documents (it runs vLLM's selection code on CPU); give it with
``CAPMATRIX_BENCH_VLLM_PYTHON`` (that environment's interpreter) and ``CAPMATRIX_BENCH_VLLM_SRC`` (the
unpacked wheel). The tool then times both selectors in one process on the same configurations.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from benchmarks.report import Row, Section, fmt_time, fmt_timing, ratio
from benchmarks.timing import engine_bench, per_call

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "capabilities" / "evidence" / "vllm_0.33.0_selection.json"
TOOL = ROOT / "tools" / "record_vllm_selection.py"
#: A configuration an engine asks for at start (SM90, a Llama-like GQA layer in BF16).
REPEATED = {"capability": (9, 0), "head_size": 128, "dtype": "bf16", "kv_cache_dtype": "auto",
            "block_size": None, "use_mla": False}


def _cells(n: int, *, servable: bool) -> list[dict[str, Any]]:
    """``n`` distinct configurations of the recorded grid (seeded), as select_backend's arguments:
    those vLLM's selection chooses a backend for when ``servable`` (its init may still refuse a few:
    FP8 on TRITON_ATTN below SM89), else any."""
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    outcomes = record["outcomes"]
    pool = [(key, column) for key, ids in sorted(record["cells"].items())
            for column, oid in zip(record["columns"], ids, strict=True)
            if not servable or outcomes[oid][0] is not None]
    out = []
    for key, column in random.Random(11).sample(pool, n):
        cap, head, dtype, kv, block = key.split("/")
        major, minor = cap.split(".")
        out.append({
            "capability": (int(major), int(minor)), "head_size": int(head), "dtype": dtype,
            "kv_cache_dtype": kv, "block_size": None if block == "-" else int(block),
            "use_mla": column.startswith("mla"), "use_sparse": "sparse" in column,
            "has_sink": column.endswith("+sink"),
        })
    return out


def _select_all(cells: list[dict[str, Any]]) -> int:
    """Select each configuration; how many have a backend selection picks.

    A pick vLLM then refuses as it builds the layers (``EngineRefused.selected``: an FP8 cache on
    TRITON_ATTN below SM89) counts: selection, which is what is timed, chose it.
    """
    from capmatrix.engine import vllm  # noqa: PLC0415

    chosen = 0
    for cell in cells:
        try:
            vllm.select_backend(**cell)
        except vllm.EngineRefused as refused:
            chosen += refused.selected is not None
            continue
        except vllm.NoValidBackend:
            continue
        chosen += 1
    return chosen


def _first_selection(cells: list[dict[str, Any]], repeat: int) -> tuple[float, float]:
    """Mean seconds per selection of a configuration never asked before (min over samples), and the
    share of configurations that have a valid backend."""
    from capmatrix._shipped.default import _resolver  # noqa: PLC0415
    from capmatrix.engine import vllm  # noqa: PLC0415

    resolver = _resolver(None)
    samples = []
    chosen = 0
    for _ in range(repeat):
        vllm._MEMO.clear()  # noqa: SLF001 - every configuration is new: no memo, no resolver cache
        resolver.forget()
        start = time.perf_counter()
        chosen = _select_all(cells)
        samples.append((time.perf_counter() - start) / len(cells))
    return min(samples), chosen / len(cells)


def section_vllm(quick: bool) -> Section:
    """The vLLM selection rows."""
    from capmatrix.engine.vllm import select_backend  # noqa: PLC0415

    sec = Section(
        "5. vLLM backend selection",
        "`capmatrix.engine.vllm.select_backend`, which answers vLLM 0.33.0's CUDA backend choice from the "
        "matrix's `vllm_attention` role. *Repeated*: the same configuration asked again, as each layer of "
        "an engine asks (vLLM memoises its selector with `functools.cache`; capmatrix keeps the chosen "
        "backend per argument tuple and compiled matrix). *First*: configurations never asked before "
        "(memo and resolver caches cleared; the compiled index, which holds the role's decision table, "
        "stays, as vLLM's imported backend classes do), drawn from the recorded grid. vLLM's own "
        "selector is timed by `tools/record_vllm_selection.py --bench` in one process with capmatrix's, "
        "on the same configurations, when that tool's environment is given "
        "(`CAPMATRIX_BENCH_VLLM_PYTHON`, `CAPMATRIX_BENCH_VLLM_SRC`).",
    )
    ns: dict[str, Any] = {"select_backend": select_backend, "kw": REPEATED}
    repeated = per_call("select_backend(**kw)", ns, repeat=5 if quick else 7)
    sec.rows.append(Row("capmatrix `select_backend`, repeated configuration", fmt_timing(repeated),
                        note=f"answer {select_backend(**ns['kw'])}; SM90, head 128, BF16"))
    # Fifteen samples of a fraction of a second each: a burst of load on a shared machine spans five.
    n, samples = (200, 3) if quick else (1000, 15)
    first, share = _first_selection(_cells(n, servable=True), samples)
    anyway, any_share = _first_selection(_cells(n, servable=False), samples)
    sec.rows.append(Row("capmatrix `select_backend`, first selection of a configuration", fmt_time(first),
                        target="<= 50 µs", met=first <= 50e-6, over=first / 50e-6, profile="vllm-first",
                        note=f"mean over {n:,} distinct recorded configurations that vLLM serves "
                        f"({share:.0%} chosen), min of {samples} samples"))
    sec.rows.append(Row("capmatrix `select_backend`, first selection, any recorded configuration",
                        fmt_time(anyway), note=f"{n:,} drawn from the whole grid; {any_share:.0%} have "
                        "a backend, the rest walk every candidate and raise NoValidBackend"))
    theirs = engine_bench(str(TOOL), "CAPMATRIX_BENCH_VLLM_PYTHON", "CAPMATRIX_BENCH_VLLM_SRC", "--vllm-src")
    if theirs is None:
        sec.rows.append(Row("vLLM `get_attn_backend`, repeated configuration (memoised)", "not measured",
                            target="capmatrix <= 1x", note="needs vLLM's environment: see the tool"))
        return sec
    for cell in theirs["cells"]:
        v_rep, c_rep = cell["vllm_repeated"], cell["capmatrix_repeated"]
        v_first, c_first = cell["vllm_first"], cell["capmatrix_first"]
        agree = "agree" if cell["vllm"] == cell["capmatrix"] else "DISAGREE"
        sec.rows.append(Row(f"`{cell['cell']}` repeated: vLLM memoised / capmatrix", fmt_time(c_rep),
                            f"vLLM {fmt_time(v_rep)}", ratio(c_rep, v_rep), "<= 1x", c_rep <= v_rep,
                            f"both chose {cell['vllm']}" if agree == "agree" else
                            f"vLLM {cell['vllm']}, capmatrix {cell['capmatrix']}"))
        sec.rows.append(Row(f"`{cell['cell']}` first: vLLM / capmatrix", fmt_time(c_first),
                            f"vLLM {fmt_time(v_first)}", ratio(c_first, v_first), "<= 1x",
                            c_first <= v_first, agree, over=c_first / v_first, profile="vllm-first"))
    return sec
