"""Engine integration: SM detection, queries from Hugging Face configs, and bound per-engine decisions.

An engine answers its static questions (SM, backend, model, dtypes) once at start with :func:`bind`,
which resolves every combination of the few dynamic axes eagerly; the per-step call is then one dict
lookup. This face re-exports :mod:`~capmatrix.engine.device` (SM detection; torch is imported only
inside :func:`detect_sm`), :mod:`~capmatrix.engine.hf` (Hugging Face configs) and
:mod:`~capmatrix.engine.bind` (bound decisions); engine adapters (:mod:`~capmatrix.engine.trtllm`)
sit beside them.
"""

from __future__ import annotations

from capmatrix.engine.bind import BoundDecision as BoundDecision
from capmatrix.engine.bind import UnboundAxes as UnboundAxes
from capmatrix.engine.bind import bind as bind
from capmatrix.engine.device import SM_ENV as SM_ENV
from capmatrix.engine.device import InvalidSMOverride as InvalidSMOverride
from capmatrix.engine.device import NoDevice as NoDevice
from capmatrix.engine.device import detect_sm as detect_sm
from capmatrix.engine.hf import ATTENTION_GQA as ATTENTION_GQA
from capmatrix.engine.hf import ATTENTION_MHA as ATTENTION_MHA
from capmatrix.engine.hf import ATTENTION_MLA as ATTENTION_MLA
from capmatrix.engine.hf import ATTENTION_MQA as ATTENTION_MQA
from capmatrix.engine.hf import query_from_hf_config as query_from_hf_config

__all__ = [
    "SM_ENV",
    "BoundDecision",
    "InvalidSMOverride",
    "NoDevice",
    "UnboundAxes",
    "bind",
    "detect_sm",
    "query_from_hf_config",
]
