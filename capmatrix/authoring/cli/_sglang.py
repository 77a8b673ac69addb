"""``capmatrix select sglang_attention``: SGLang's whole resolution, as :mod:`capmatrix.engine.sglang` has it.

The role ``sglang_attention`` is SGLang's choice (its per-architecture overrides,
``sglang_model_override``, asked first, then the generic default); SGLang then applies the page-size
snaps and the KV-dtype passes, and refuses at argument resolution or at engine start. The command asks
:func:`capmatrix.engine.sglang.resolve`, so the command line and the Python API give one answer. The
model's architecture comes from ``--hf-config`` (its ``architectures``) or from ``--model`` (the entry's
recorded ``hf_config``), and ``--sglang-model-arch`` names it directly.
"""

from __future__ import annotations

import argparse
import re

from capmatrix._core.record import replace
from capmatrix.engine import sglang
from capmatrix.engine.hf import read_hf_config
from capmatrix.errors import InvalidArgument, InvalidQuery, UnknownName, echo
from capmatrix.query import ANY
from capmatrix.releases import release

TYPE_CHECKING = False  # not typing's: every command would import it for annotations only
if TYPE_CHECKING:
    from collections.abc import Mapping

    from capmatrix.matrix import Matrix
    from capmatrix.model import AxisValue
    from capmatrix.query import _Any

__all__ = ["SGLangAsk", "Unmodelled", "answer_dict", "format_answer", "prepare", "resolve_at", "serves",
           "winner"]

#: The flags of :class:`~capmatrix.engine.sglang.SGLangModel` an axis option may set, by axis.
_FLAG_AXES = {"sglang_dsa": "dsa", "sglang_hybrid_gdn": "hybrid_gdn", "sglang_swa_pattern": "swa_pattern",
              "attention_sinks": "sinks"}
#: The axes SGLang's resolution reads besides the model, each as a keyword of ``resolve``.
_READ = ("sm", "sglang_kv_cache_dtype", "sglang_page_size", "sglang_spec", "sglang_topk", "sglang_backend",
         "sglang_model_arch", "sglang_split", *_FLAG_AXES)
_SPEC_ALGORITHM = {"none": None, "eagle": "EAGLE", "nextn": "NEXTN"}
_NUMBER = re.compile(r"[0-9]{1,6}")


def serves(role: str, matrix: Matrix) -> bool:
    """Whether ``select role`` is answered by SGLang's whole resolution (the shipped matrix's SGLang)."""
    return (role == sglang.ROLE and "sglang_model_arch" in matrix.axes
            and {sglang.ROLE, sglang.OVERRIDE_ROLE} <= matrix.roles.keys())


class SGLangAsk:
    """What one ``select sglang_attention`` asks SGLang but the device: the model, the server arguments."""

    def __init__(self, model: sglang.SGLangModel, model_label: str, arguments: dict[str, object],
                 version: str | None, ignored: tuple[str, ...]) -> None:
        self.model = model
        #: Where the model came from, as the answer shows it.
        self.model_label = model_label
        #: ``resolve``'s keywords besides ``capability``, ``model``, ``matrix`` and ``version``.
        self.arguments = arguments
        self.version = version
        #: Axes the command line gave that SGLang's resolution does not read.
        self.ignored = ignored


def _topk(args: argparse.Namespace) -> int | None:
    """``--sglang-topk``: SGLang's ``--speculative-eagle-topk`` (a number; ``one`` is 1, ``unset`` none).

    Read here rather than as the axis's word: SGLang echoes the number it was given.
    """
    text = getattr(args, "axis_sglang_topk", None)
    if text is None or text == "unset":
        return None
    if text == "one":
        return 1
    if _NUMBER.fullmatch(text) and int(text) >= 1:
        return int(text)
    raise InvalidQuery(f"--sglang-topk {echo(text)}: SGLang's --speculative-eagle-topk is a number; give it "
                       "(e.g. --sglang-topk 4), or unset")


def prepare(
    args: argparse.Namespace, matrix: Matrix, query_axes: Mapping[str, AxisValue | _Any],
) -> SGLangAsk:
    """The model and the server arguments of a ``select sglang_attention`` command line.

    ``query_axes``: the query's own values (the options and what ``--hf-config`` gives), ``sm`` aside.

    :raises InvalidQuery: when no model is named, a model has no architecture, an axis is left open, or
        an option asks what the command cannot pass to SGLang.
    """
    open_axes = [name for name, value in query_axes.items() if value is ANY and name != "sm"]
    if open_axes:
        raise InvalidQuery(f"select {sglang.ROLE} asks SGLang, which takes one value per option: give "
                           f"{', '.join('--' + a.replace('_', '-') for a in open_axes)} a value "
                           "(--gpu all asks every GPU)")
    if query_axes.get("sglang_split") is True:
        raise InvalidQuery(f"select {sglang.ROLE} passes one --attention-backend (--sglang-backend); split "
                           "prefill and decode backends: capmatrix.engine.sglang.resolve("
                           "prefill_attention_backend=..., decode_attention_backend=...)")
    release_axis = matrix.releases[sglang.ENGINE].axis if sglang.ENGINE in matrix.releases else None
    version = query_axes.get(release_axis) if release_axis is not None else None
    model, label = _model(args, matrix, query_axes, str(version) if version is not None else None)
    arguments: dict[str, object] = {
        "kv_cache_dtype": query_axes.get("sglang_kv_cache_dtype", "auto"),
        "page_size": query_axes.get("sglang_page_size"),
        "speculative_algorithm": _SPEC_ALGORITHM[str(query_axes.get("sglang_spec", "none"))],
        "speculative_eagle_topk": _topk(args),
        "attention_backend": query_axes.get("sglang_backend"),
    }
    derived = set(matrix.derived)
    ignored = tuple(name for name in query_axes
                    if name not in _READ and name != release_axis and name not in derived
                    and any(getattr(args, f"axis_{given}", None) is not None
                            for given in (name, *matrix.axes[name].aliases)))
    shown = release(matrix, sglang.ENGINE, version) if sglang.ENGINE in matrix.releases else None
    return SGLangAsk(model, label, arguments, shown, ignored)


def _model(args: argparse.Namespace, matrix: Matrix, query_axes: Mapping[str, AxisValue | _Any],
           version: str | None) -> tuple[sglang.SGLangModel, str]:
    """The SGLang model: the config's (``--hf-config``, ``--model``), then the axis options over it."""
    arch_axis = matrix.axes["sglang_model_arch"]
    config: dict[str, object] | None = None
    label = ""
    if getattr(args, "hf_config", None) is not None:
        config = read_hf_config(args.hf_config)
        label = f"config {args.hf_config}"
    elif args.model is not None:
        entry = matrix.model(args.model)
        if entry is None:
            raise UnknownName("model", args.model, matrix.models)
        recorded = dict(entry.hf_config or {})
        if not recorded.get("architectures"):
            where = f"{entry.location.path}:{entry.location.line}"
            raise InvalidQuery(f"--model {entry.name} ({where}) records no architecture, which SGLang's "
                               "choice reads: add architectures to its hf_config, or pass --hf-config "
                               "PATH or --sglang-model-arch")
        config = recorded
        label = f"model {entry.name}"
    word = getattr(args, "axis_sglang_model_arch", None)
    if word is not None:  # the option names the architecture: SGLang's class name for the axis's word
        value = query_axes["sglang_model_arch"]
        names = [name for name, spelled in arch_axis.spellings.items() if spelled == value]
        config = {**(config or {}), "architectures": [names[0] if names else str(value)]}
        label = f"{label}, " if label else ""
        label += f"--sglang-model-arch {value}"
    if config is None:
        raise InvalidQuery(f"select {sglang.ROLE}: SGLang's choice reads the model's architecture; give "
                           "--model NAME, --hf-config PATH or --sglang-model-arch ARCH")
    model = sglang.model_from_hf_config(config, matrix=matrix, version=version)
    flags = {field: query_axes[axis] for axis, field in _FLAG_AXES.items()
             if getattr(args, f"axis_{axis}", None) is not None}
    if flags:
        model = replace(model, **flags)
    return model, label


class Unmodelled(InvalidQuery):
    """The matrix does not model SGLang on this device (its checks' grants stop above it)."""


def resolve_at(ask: SGLangAsk, sm: int, matrix: Matrix) -> sglang.Resolved:
    """SGLang's resolution of ``ask`` on a device of SM ``sm``.

    :raises Unmodelled: where the matrix does not model SGLang's checks (below SM80).
    """
    try:
        return sglang.resolve(capability=divmod(sm, 10), model=ask.model, matrix=matrix,
                              version=ask.version, **ask.arguments)  # type: ignore[arg-type]
    except InvalidArgument as exc:
        if exc.argument != "capability":
            raise
        raise Unmodelled(f"--sm {sm}: not {exc.expected}; ask about another device") from None


def winner(got: sglang.Resolved) -> str | None:
    """The matrix's kernel for SGLang's choice (``sglang_<backend>``); None when SGLang refuses."""
    if got.refused is not None or got.attention_backend is None:
        return None
    return f"sglang_{got.attention_backend}"


def _stage_words(stage: str) -> str:
    return {"server_args": "at argument resolution (ServerArgs.resolve_once raises)",
            "engine_start": "at engine start (the model runner's check raises)"}.get(stage, stage)


def _settings(got: sglang.Resolved) -> str:
    shown = {"attention_backend": got.attention_backend,
             "prefill_attention_backend": got.prefill_attention_backend,
             "decode_attention_backend": got.decode_attention_backend,
             "dsa_prefill_backend": got.dsa_prefill_backend, "dsa_decode_backend": got.dsa_decode_backend,
             "page_size": got.page_size, "kv_cache_dtype": got.kv_cache_dtype,
             "speculative_eagle_topk": got.speculative_eagle_topk}
    return " ".join(f"--{k.replace('_', '-')} {v}" for k, v in shown.items() if v is not None)


def _model_words(model: sglang.SGLangModel) -> str:
    flags = [name for name in ("mla", "dsa", "sinks", "hybrid_gdn", "swa_pattern") if getattr(model, name)]
    return model.arch + (f" ({', '.join(flags)})" if flags else "")


def _rule_lines(matrix: Matrix, rule_id: str, *, explain: bool) -> list[str]:
    try:
        rule = matrix.rule(rule_id)
    except KeyError:  # a refusal the adapter names by its gate (the fa3 factory's assert)
        gate = matrix.kernels.get(rule_id)
        if gate is None:  # pragma: no cover - the adapter names rules and gates of the matrix it asked
            return [f"    - {rule_id}"]
        where, reason, source = gate.location, gate.description, gate.source
    else:
        where, reason, source = rule.location, rule.reason, rule.source
    lines = [f"    - {rule_id} ({where.path}:{where.line})"]
    if explain:
        lines.append(f"      {' '.join(reason.split())}")
        lines.extend(f"      source: {' '.join(text.split())}" for text in (source,) if text)
    return lines


def format_answer(ask: SGLangAsk, sm: int, got: sglang.Resolved, matrix: Matrix, *, explain: bool) -> str:
    """The answer in SGLang's words: the backend chosen and what resolution set, or the refusal."""
    release = f"SGLang {ask.version}" if ask.version else "SGLang"
    lines = []
    if got.refused is None:
        lines.append(f"{sglang.ROLE}: {winner(got)}")
        lines.append(f"  {release} resolves: {_settings(got)}")
    else:
        lines.append(f"{sglang.ROLE}: no supported candidate: {release} refuses "
                     f"{_stage_words(got.refused.stage)}")
        lines.append(f"  SGLang says: {got.refused.text.strip()}")
        lines.append("  decided by:")
        lines.extend(_rule_lines(matrix, got.refused.rule, explain=explain))
        if got.refused.stage == "engine_start":
            lines.append(f"  after resolving: {_settings(got)}")
    lines.append(f"  query: sm={sm}" + "".join(
        f" {k}={v}" for k, v in ask.arguments.items() if v is not None))
    lines.append(f"  {ask.model_label}: architecture {_model_words(ask.model)}")
    if ask.ignored:
        lines.append(f"  not read by SGLang's resolution: {', '.join(ask.ignored)}")
    return "\n".join(lines)


def answer_dict(ask: SGLangAsk, sm: int, got: sglang.Resolved) -> dict[str, object]:
    """The JSON form: the kernel (None when refused), SGLang's resolved values and refusal, the model."""
    return {"role": sglang.ROLE, "kernel": winner(got),
            "verdict": "unsupported" if got.refused is not None else "supported",
            "engine": sglang.ENGINE, "version": ask.version, "sm": sm,
            "model": _as_dict(ask.model), "arguments": dict(ask.arguments),
            "sglang": {**_as_dict(got), "refused": None if got.refused is None else _as_dict(got.refused)},
            "ignored": list(ask.ignored)}


def _as_dict(value: sglang.SGLangModel | sglang.Resolved | sglang.Refusal) -> dict[str, object]:
    """A record's fields by name, in order (``dataclasses.asdict`` would import dataclasses)."""
    names: tuple[str, ...] = type(value).__slots__  # type: ignore[union-attr] # a record's: its fields
    return {name: getattr(value, name) for name in names}
