"""The seed question, answered from the shipped matrix: may TensorRT-LLM run XQA for spec-dec on SM120?

Release 1.2 turned XQA's multi-token (speculative-decoding) mode off on SM120 for every model; only MLA
models lacked the kernels (PR NVIDIA/TensorRT-LLM#10765). `make run` prints both answers with the rules
that decide them and what would work instead. Exit status 0 when the matrix answers as the fix says,
1 otherwise.
"""

from __future__ import annotations

import sys

import capmatrix
from capmatrix import KernelQuery, Verdict
from capmatrix.resolver import ReasonKind

QUESTION = "May XQA serve one-model speculative decoding (multi-token queries) on SM120?"
ASKED = (
    ("Llama", KernelQuery("xqa", sm=120, model="llama", spec_dec="one_model"), Verdict.SUPPORTED),
    ("DeepSeek-V3", KernelQuery("xqa", sm=120, model="deepseek_v3", spec_dec="one_model"),
     Verdict.UNSUPPORTED),
)
NEXT = """\
Where to go next:
  .venv/bin/capmatrix query xqa --sm 121 --model deepseek_v3 --spec-dec one_model
                                              every reason, and what would work
  .venv/bin/capmatrix select trtllm_generation --sm 120 --model deepseek_v3 --spec-dec one_model
                                              which kernel TensorRT-LLM picks instead
  .venv/bin/capmatrix --help                  every command, each with an example
  make docs; docs/support-matrix.html         the support matrix, offline in any browser
  docs/authoring.md, docs/analysis.md         editing the YAML; check, diff, compare-legacy, test
"""


def _command(query: KernelQuery) -> str:
    parts = ["capmatrix query", str(query.kernel), "--model", str(query.model)]
    parts += [f"--{name.replace('_', '-')} {value}" for name, value in query.axes.items()]
    return " ".join(parts)


def main() -> int:
    out = sys.stdout
    out.write(f"{QUESTION}\n")
    as_expected = True
    for label, query, expected in ASKED:
        resolution = capmatrix.resolve(query)
        out.write(f"\n$ {_command(query)}\n{label}: {resolution.verdict}\n")
        deciding = (ReasonKind.GRANT, ReasonKind.EXCLUDE)
        for reason in resolution.reasons:
            if reason.kind in deciding:
                verb = "granted by" if reason.kind is ReasonKind.GRANT else "excluded by"
                out.write(f"  {verb} {reason.rule_id} ({reason.path}:{reason.line})\n")
                out.write(f"    {reason.detail}\n")
        for suggestion in capmatrix.suggest(query):
            out.write(f"  would work: {suggestion}\n")
        as_expected &= resolution.verdict is expected
    out.write("\n" + NEXT)
    if not as_expected:
        sys.stderr.write("the shipped matrix no longer answers the seed question as the fix says\n")
    return 0 if as_expected else 1


if __name__ == "__main__":
    sys.exit(main())
