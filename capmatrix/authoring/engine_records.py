"""The engines' recorded selections (``capabilities/evidence/``) against the adapters, cell by cell.

Each record is an engine's own answer, made by its recorder from the engine's code
(``tools/record_vllm_selection.py``, ``tools/record_sglang_selection.py``): vLLM's grid
(``vllm_<version>_selection.json``) and drawn sample (``vllm_<version>_sample.json.gz``), SGLang's grid and
sample (``sglang_<version>_{selection,sample}.json.gz``). :func:`compare_record` asks the adapter
(:mod:`capmatrix.engine.vllm`, :mod:`capmatrix.engine.sglang`) every recorded question, as the record's
release, and returns every disagreement; the tests and ``capmatrix test`` share it.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capmatrix.authoring._versions import order_key
from capmatrix.engine import sglang, vllm

if TYPE_CHECKING:
    from collections.abc import Iterator

    from capmatrix.matrix import Matrix

__all__ = ["RecordComparison", "RecordDisagreement", "compare_record", "find_records", "read_record",
           "recorder_mm_prefix_artefact", "resolve_cell"]

#: File names of the records, by engine and kind (``{version}`` is the release).
PATTERNS = (("vllm", "grid", "vllm_*_selection.json"), ("vllm", "sample", "vllm_*_sample.json.gz"),
            ("sglang", "grid", "sglang_*_selection.json.gz"), ("sglang", "sample", "sglang_*_sample.json.gz"))
#: A vLLM sample record's flags that are matrix axes passed through ``extra``.
_FLAG_AXES = (("use_mm_prefix", "use_mm_prefix"), ("use_non_causal", "use_non_causal"),
              ("has_sliding_window", "sliding_window"))
#: The first vLLM release whose recorder shows the mm-prefix artefact (:func:`recorder_mm_prefix_artefact`).
_ARTEFACT_SINCE = "0.34.0"
#: Disagreements kept per record (the count is always whole).
MAX_SHOWN = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordDisagreement:
    """One recorded question the adapter answers otherwise: the cell, what was asked, both answers."""

    #: The record's cell (its key, or the drawn configuration as JSON).
    cell: str
    #: What was compared: ``auto``, ``order``, ``refused``, a forced backend, or SGLang's output fields.
    field: str
    #: The engine's answer, as recorded.
    recorded: str
    #: The matrix's answer (through the adapter).
    matrix: str

    def __str__(self) -> str:
        return f"{self.cell} {self.field}: engine {self.recorded}, matrix {self.matrix}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordComparison:
    """A record against the adapter: how many checks, which disagree (the first :data:`MAX_SHOWN`)."""

    path: str
    engine: str
    version: str
    #: ``grid`` or ``sample``.
    kind: str
    rows: int
    checks: int
    #: How many checks disagree (``disagreements`` holds the first :data:`MAX_SHOWN`).
    failed: int
    disagreements: tuple[RecordDisagreement, ...]
    #: Rows left out as a known artefact of the recorder (never more than the rows that can show it).
    artefacts: int
    #: Rows vLLM refuses at engine start (its worker's dtype check), which the recorder skips: it asks
    #: selection directly, with the capability faked. The adapter refuses them (EngineRefused).
    start_refused: int = 0
    #: Rows (a grid's cell and column, a sample's line) where vLLM picks or validates a backend and then
    #: refuses at engine start as it builds that backend's layers (an FP8 cache on TRITON_ATTN below
    #: SM89). The recorder asked selection alone; the adapter raises EngineRefused, and its ``selected``
    #: is compared with the recorded choice.
    init_refused: int = 0
    #: The command that re-records the file from the engine's code (the record's own ``regenerate``).
    regenerate: str

    @property
    def agree(self) -> bool:
        """Whether every check agrees."""
        return self.failed == 0


def find_records(evidence: Path) -> list[tuple[str, str, Path]]:
    """``(engine, kind, path)`` of every record under ``evidence``, sorted by path."""
    found = [(engine, kind, path) for engine, kind, pattern in PATTERNS for path in evidence.glob(pattern)]
    return sorted(found, key=lambda item: item[2].name)


def read_record(path: Path) -> tuple[dict[str, Any], list[Any]]:
    """The record's header and its rows (a grid's cells, or the lines of a gzipped record).

    :raises ValueError: when the file is not a record of a known format.
    """
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            header = json.loads(lines.readline())
            rows = [json.loads(line) for line in lines]
    else:
        header = json.loads(path.read_text(encoding="utf-8"))
        rows = list(header.get("cells", {}).items())
    if not isinstance(header, dict) or not str(header.get("format", "")).startswith(
            ("capmatrix-vllm-", "capmatrix-sglang-")):
        raise ValueError(f"{path.name}: not an engine selection record (format {header.get('format')!r})")
    return header, rows


def recorder_mm_prefix_artefact(config: dict[str, Any]) -> bool:
    """Whether a vLLM sample record is one the recorder cannot make as a real model would.

    The recorder's model stand-in is never an mm-prefix LM (``_ModelStandIn.is_mm_prefix_lm = False``)
    while the layer's ``use_mm_prefix`` is drawn, so vLLM's FA4 hd256 fallback for mm-prefix models
    (fa_utils.py:258 @ 62d4bc3c7, from 0.34.0) never fires in a record. On SM10x at head 256 the record's
    FLASH_ATTN then resolves FA4 and passes its mm-prefix check, where a real mm-prefix model (and the
    matrix) falls back to FA2 and is refused.
    """
    return bool(config["use_mm_prefix"] and not config["use_mla"] and config["head_size"] == 256
                and config["capability"][0] == 10)


class _Found:
    """Disagreements as they come: the count, the first :data:`MAX_SHOWN`."""

    def __init__(self) -> None:
        self.failed = 0
        self.shown: list[RecordDisagreement] = []
        self.checks = 0
        #: Rows whose automatic or forced choice vLLM refuses at engine start after selection.
        self.init_refused = 0

    def check(self, cell: str, field: str, recorded: object, matrix: object) -> bool:
        self.checks += 1
        if recorded == matrix:
            return True
        self.failed += 1
        if len(self.shown) < MAX_SHOWN:
            self.shown.append(RecordDisagreement(cell=cell, field=field, recorded=_text(recorded),
                                                 matrix=_text(matrix)))
        return False

    def merge(self, other: _Found) -> None:
        self.checks += other.checks
        self.failed += other.failed
        self.init_refused += other.init_refused
        self.shown.extend(other.shown[: MAX_SHOWN - len(self.shown)])


def _text(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


# --------------------------------------------------------------------------------------------------
# vLLM


def _vllm_choice(kwargs: dict[str, Any],
                 selected: str | None = None) -> tuple[str | None, tuple[str, ...], bool]:
    """The adapter's pick (None: none valid), the backends it refused, and whether vLLM then refuses it.

    Where vLLM refuses at engine start after selection (:class:`vllm.EngineRefused` with ``selected``),
    the backend it picked is the answer: the recorder asked selection alone, so that is what it recorded.
    A refusal before selection propagates.
    """
    try:
        return vllm.select_backend(**kwargs, selected=selected), (), False
    except vllm.EngineRefused as exc:
        if exc.selected is None:
            raise
        return exc.selected, (), True
    except vllm.NoValidBackend as exc:
        return None, exc.backends, False


def _vllm_cell(found: _Found, cell: str, kwargs: dict[str, Any], answer: tuple[Any, list[str], list[Any]],
               forced: list[str]) -> bool:
    """One vLLM question: the automatic choice, the order, the refused list, each forced backend.

    Returns whether the automatic choice is one vLLM refuses when it builds its layers.
    """
    want, order, verdicts = answer
    got, rejected, init_refused = _vllm_choice(kwargs)
    found.check(cell, "auto", want, got)
    found.check(cell, "order", list(order), list(vllm.backend_order(**kwargs)))
    if got is None:  # NoValidBackend names every backend in vLLM's order
        found.check(cell, "refused", list(order), list(rejected))
    # vLLM's validation verdicts: a backend its layers' init refuses later is valid here, as recorded
    mine = vllm.valid_backends(**kwargs, selected=forced)
    for backend, valid in zip(forced, verdicts, strict=True):
        found.check(cell, backend, "valid" if valid else "refused", "valid" if mine[backend] else "refused")
    return init_refused


def _vllm_grid_kwargs(key: str, column: str, version: str, matrix: Matrix | None) -> dict[str, Any]:
    cap, head, dtype, kv, block = key.split("/")
    major, minor = cap.split(".")
    return {"capability": (int(major), int(minor)), "head_size": int(head), "dtype": dtype,
            "kv_cache_dtype": kv, "block_size": None if block == "-" else int(block),
            "use_mla": column.startswith("mla"), "use_sparse": "sparse" in column,
            "has_sink": column.endswith("+sink"), "version": version, "matrix": matrix}


def _vllm_grid(header: dict[str, Any], found: _Found, version: str, matrix: Matrix | None,
               every: int = 1) -> int:
    """Compare every ``every``-th question of the grid (a cell's column); return how many were compared."""
    reason_sets, forced = header["reason_sets"], header["forced"]
    sections = [("", header["cells"], header["columns"], False)]
    # 0.34.0 and later: the cells of a quantized KV dtype once more with that dtype from the checkpoint
    # (--kv-cache-dtype left auto), for the layers that pass it on (the others answer as auto does).
    checkpoint = header.get("checkpoint_kv")
    if checkpoint is not None:
        sections.append(("checkpoint ", checkpoint["cells"], checkpoint["columns"], True))
    questions = ((prefix, key, column, oid, from_checkpoint)
                 for prefix, cells, columns, from_checkpoint in sections
                 for key, outcome_ids in cells.items()
                 for column, oid in zip(columns, outcome_ids, strict=True))
    asked = 0
    for prefix, key, column, oid, from_checkpoint in islice(questions, 0, None, every):
        asked += 1
        want, order_id, rsets = header["outcomes"][oid]
        # [] = valid; a list of reasons, or {"raises": ...} where vLLM crashed: not valid
        verdicts = [reason_sets[rs] == [] for rs in rsets]
        kwargs = _vllm_grid_kwargs(key, column, version, matrix)
        if from_checkpoint:
            kwargs["checkpoint_kv_cache_dtype"] = kwargs["kv_cache_dtype"]
            kwargs["kv_cache_dtype"] = "auto"
        found.init_refused += _vllm_cell(found, f"{prefix}{key} {column}", kwargs,
                                         (want, header["orders"][order_id], verdicts), forced)
    # B12X forced with b12x installed (vllm_b12x), where the record asks it: every other answer is the
    # plain cell's.
    b12x = (header.get("b12x_installed") or {}).get("cells", {})
    forced_b12x = ((key, column, rs) for key, reason_ids in b12x.items()
                   for column, rs in zip(header["columns"], reason_ids, strict=True))
    for key, column, rs in islice(forced_b12x, 0, None, every):
        asked += 1
        kwargs = {**_vllm_grid_kwargs(key, column, version, matrix), "extra": {"vllm_b12x": True}}
        mine = vllm.valid_backends(**kwargs, selected=["B12X"])["B12X"]
        found.check(f"b12x installed {key} {column}", "B12X",
                    "valid" if reason_sets[rs] == [] else "refused", "valid" if mine else "refused")
    return asked


def vllm_sample_kwargs(config: dict[str, Any], version: str, matrix: Matrix | None = None) -> dict[str, Any]:
    """The adapter's arguments for one drawn configuration of a vLLM sample record."""
    extra = {axis: True for flag, axis in _FLAG_AXES if config[flag]}
    # kv_from_checkpoint (0.34.0's sample): --kv-cache-dtype left auto, the drawn dtype the checkpoint's
    kv: dict[str, Any] = {"kv_cache_dtype": config["kv_cache_dtype"]}
    if config.get("kv_from_checkpoint"):
        kv = {"kv_cache_dtype": "auto", "checkpoint_kv_cache_dtype": config["kv_cache_dtype"]}
    return {"version": version, "capability": tuple(config["capability"]), "head_size": config["head_size"],
            "dtype": config["dtype"], **kv,
            "block_size": config["block_size"], "use_mla": config["use_mla"],
            "use_sparse": config["use_sparse"], "has_sink": config["has_sink"], "extra": extra or None,
            "matrix": matrix}


def vllm_sample_row(config: dict[str, Any], answer: dict[str, Any], forced: list[str], version: str,
                    matrix: Matrix | None = None) -> list[RecordDisagreement]:
    """Every way the adapter's answer to one sample record differs from vLLM's (empty: none).

    A record whose KV dtype is the checkpoint's (``kv_from_checkpoint``, from 0.34.0) is asked as vLLM was
    (``auto`` with ``checkpoint_kv_cache_dtype``); the adapter hands it on as the layer did (``layer``
    records what it passed). Where the layer refused before selection (``layer.raises``) vLLM chose
    nothing, and the matrix must not either.
    """
    return _vllm_sample_row(config, answer, forced, version, matrix).shown


def _vllm_sample_row(config: dict[str, Any], answer: dict[str, Any], forced: list[str], version: str,
                     matrix: Matrix | None) -> _Found:
    found = _Found()
    cell = json.dumps(config, sort_keys=True)
    kwargs = vllm_sample_kwargs(config, version, matrix)
    verdicts = [answer["verdicts"][backend] == [] for backend in forced]
    refused = _vllm_cell(found, cell, kwargs, (answer["chosen"], answer["order"], verdicts), forced)
    if config["forced"] is not None:
        chosen, _rejected, forced_refused = _vllm_choice(kwargs, config["forced"])
        found.check(cell, f"forced {config['forced']!r}", answer["forced"].get("backend"), chosen)
        refused = refused or forced_refused
    found.init_refused = int(refused)
    return found


def _vllm_sample(header: dict[str, Any], rows: list[Any], found: _Found, version: str,
                 matrix: Matrix | None) -> tuple[int, int]:
    """Compare every row; return how many were left out: the recorder's artefact, and vLLM's start refusals.

    The recorder never starts a worker, so it asks selection where vLLM stops at engine start. A row
    whose pick vLLM refuses as it builds the backend's layers is compared (by the pick), not left out:
    ``found`` counts it.
    """
    artefacts = start_refused = 0
    key = order_key(version)
    since = order_key(_ARTEFACT_SINCE)
    artefact_release = key is not None and since is not None and key >= since
    for config, answer in rows:
        try:
            row = _vllm_sample_row(config, answer, header["forced"], version, matrix)
        except vllm.EngineRefused:
            start_refused += 1
            continue
        if row.failed and artefact_release and recorder_mm_prefix_artefact(config):
            artefacts += 1
            continue
        found.merge(row)
    return artefacts, start_refused


# --------------------------------------------------------------------------------------------------
# SGLang


_SET = re.compile(r"\{('[a-z0-9_]+'(?:, '[a-z0-9_]+')*)\}")


def normalised(text: str) -> str:
    """The text with each printed Python set of names sorted.

    SGLang prints the hybrid-GDN allow-list as a set (attention_registry.py:473-476), whose order follows
    the process's string hashing: the same check gives other texts in other processes.
    """
    return _SET.sub(lambda m: "{" + ", ".join(sorted(m.group(1).split(", "))) + "}", text)


def sglang_cell(key: str) -> dict[str, Any]:
    """A SGLang record's cell key (``capability/model/spec/kv/page/forced``) as a mapping."""
    cap, model, spec, kv, page, forced = key.split("/")
    return {"capability": cap, "model": model, "spec": spec, "kv_cache_dtype": kv,
            "page_size": None if page == "-" else int(page), "forced": forced}


def resolve_cell(cell: dict[str, Any], spec: dict[str, Any], model: sglang.SGLangModel,
                 matrix: Matrix | None = None, version: str | None = None) -> sglang.Resolved:
    """SGLang's resolution (``sglang.resolve``) of a recorded cell (:func:`sglang_cell`), spec and model."""
    forced = cell["forced"]
    split: dict[str, Any] = {}
    if "+" in forced:
        split["prefill_attention_backend"], split["decode_attention_backend"] = forced.split("+")
    elif forced != "-":
        split["attention_backend"] = forced
    major, minor = cell["capability"].split(".")
    return sglang.resolve(capability=(int(major), int(minor)), model=model,
                          kv_cache_dtype=cell["kv_cache_dtype"], page_size=cell["page_size"],
                          speculative_algorithm=spec.get("speculative_algorithm"),
                          speculative_eagle_topk=spec.get("speculative_eagle_topk"),
                          version=version, matrix=matrix, **split)


def sglang_answer(header: dict[str, Any], models: dict[str, sglang.SGLangModel], cell: dict[str, Any],
                  matrix: Matrix | None = None) -> dict[str, Any]:
    """Capmatrix's answer to a recorded SGLang cell, in the record's form."""
    got = resolve_cell(cell, dict(header["specs"][cell["spec"]]), models[cell["model"]], matrix,
                       header["sglang"]["version"])
    values = {k: v for k, v in asdict(got).items() if k != "refused"}
    if got.refused is None:
        return values
    refused = {"stage": got.refused.stage, "text": got.refused.text}
    return {"refused": refused} if got.refused.stage == "server_args" else {**values, "refused": refused}


def _sglang(header: dict[str, Any], rows: list[Any], found: _Found, matrix: Matrix | None) -> None:
    version = header["sglang"]["version"]
    models = {name: sglang.model_from_hf_config(config, matrix=matrix, version=version)
              for name, config in header["models"].items()}
    for key, recorded in rows:
        want = dict(recorded)
        if "refused" in want:
            want["refused"] = {"stage": want["refused"]["stage"], "text": normalised(want["refused"]["text"])}
        got = sglang_answer(header, models, sglang_cell(key), matrix)
        fields = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        found.check(key, ", ".join(fields) or "-",
                    {k: want.get(k) for k in fields} or "", {k: got.get(k) for k in fields} or "")


# --------------------------------------------------------------------------------------------------


def _version(engine: str, header: dict[str, Any]) -> str:
    return str(header[engine]["version"])


def compare_record(path: Path, matrix: Matrix | None = None, *, engine: str | None = None,
                   kind: str | None = None, every: int = 1) -> RecordComparison:
    """Ask the adapter every question (or every ``every``-th) of the record at ``path``, as its release.

    ``engine`` and ``kind`` default to what the file name says (:data:`PATTERNS`). ``rows`` of the result
    counts the questions compared.

    :raises ValueError: when the file is not a record of a known format or name.
    """
    if engine is None or kind is None:
        named = next(((e, k) for e, k, pattern in PATTERNS if path.match(pattern)), None)
        if named is None:
            names = ", ".join(p for *_, p in PATTERNS)
            raise ValueError(f"{path.name}: not a record's name (one of {names})")
        engine, kind = named
    header, rows = read_record(path)
    version = _version(engine, header)
    found = _Found()
    artefacts = start_refused = 0
    if type(every) is not int or every < 1:
        raise ValueError(f"every: a whole number >= 1, got {every!r}")
    if engine == "vllm" and kind == "grid":
        rows_count = _vllm_grid(header, found, version, matrix, every)
    elif engine == "vllm":
        rows = rows[::every]
        artefacts, start_refused = _vllm_sample(header, rows, found, version, matrix)
        rows_count = len(rows)
    else:
        rows = rows[::every]
        _sglang(header, rows, found, matrix)
        rows_count = len(rows)
    return RecordComparison(path=path.as_posix(), engine=engine, version=version, kind=kind, rows=rows_count,
                            checks=found.checks, failed=found.failed, disagreements=tuple(found.shown),
                            artefacts=artefacts, start_refused=start_refused,
                            init_refused=found.init_refused,
                            regenerate=str(header.get("regenerate", "")))


def iter_comparisons(evidence: Path, matrix: Matrix | None = None) -> Iterator[RecordComparison]:
    """:func:`compare_record` of every record under ``evidence``."""
    for engine, kind, path in find_records(evidence):
        yield compare_record(path, matrix, engine=engine, kind=kind)
