"""SM detection: the compute capability of a CUDA device, cached per device, overridable by CAPMATRIX_SM.

torch is imported only inside :func:`detect_sm` (it is optional).
"""

from __future__ import annotations

import os
import re

from capmatrix.errors import CapmatrixError

TYPE_CHECKING = False  # not typing's: importing typing would add to every cold start
if TYPE_CHECKING:
    from typing import Any, Final


__all__ = ["SM_ENV", "InvalidSMOverride", "NoDevice", "detect_sm"]

#: Environment variable that overrides :func:`detect_sm` (an int such as ``121``).
SM_ENV: Final = "CAPMATRIX_SM"

_SM_TEXT = re.compile(r"[1-9][0-9]{1,2}")


class NoDevice(CapmatrixError, RuntimeError):
    """No CUDA device could be asked for its compute capability.

    >>> print(NoDevice("torch is not installed"))
    cannot detect the SM: torch is not installed; set CAPMATRIX_SM (e.g. CAPMATRIX_SM=90) to override
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot detect the SM: {self.reason}; set {SM_ENV} (e.g. {SM_ENV}=90) to override"


class InvalidSMOverride(CapmatrixError, ValueError):
    """The SM override variable holds something other than an SM number.

    >>> print(InvalidSMOverride("CAPMATRIX_SM", "sm_90"))
    CAPMATRIX_SM='sm_90' is not an SM number; use major*10+minor as an int, e.g. 90 or 121
    """

    def __init__(self, variable: str, value: str) -> None:
        super().__init__(variable, value)
        self.variable = variable
        self.value = value

    def __str__(self) -> str:
        return (
            f"{self.variable}={self.value!r} is not an SM number; "
            "use major*10+minor as an int, e.g. 90 or 121"
        )


_SM_CACHE: dict[int, int] = {}


def _sm_override() -> int | None:
    raw = os.environ.get(SM_ENV)
    if raw is None:
        return None
    text = raw.strip()
    if not _SM_TEXT.fullmatch(text):
        raise InvalidSMOverride(SM_ENV, raw)
    return int(text)


def detect_sm(device: object = None) -> int:
    """Return the compute capability of a CUDA device as ``major*10+minor``, raw (GB10 is 121).

    ``CAPMATRIX_SM`` overrides detection. Results are cached per device index.

    :param device: None (the current device), an index, ``"cuda:N"`` or a ``torch.device``.
    :raises InvalidSMOverride: when ``CAPMATRIX_SM`` is set to something other than an SM number.
    :raises NoDevice: without torch, without CUDA, or for a non-CUDA device.
    """
    override = _sm_override()
    if override is not None:
        return override
    try:
        import torch  # noqa: PLC0415 - torch is optional and imported only at the edge
    except ImportError:
        raise NoDevice("torch is not installed") from None
    if not torch.cuda.is_available():
        raise NoDevice("torch sees no CUDA device")
    index = _device_index(torch, device)
    found = _SM_CACHE.get(index)
    if found is None:
        major, minor = torch.cuda.get_device_capability(index)
        found = int(major) * 10 + int(minor)
        _SM_CACHE[index] = found
    return found


def _device_index(torch: Any, device: object) -> int:  # noqa: ANN401 - the torch module
    if device is None:
        return int(torch.cuda.current_device())
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    dev = torch.device(device) if isinstance(device, str) else device
    if getattr(dev, "type", None) != "cuda":
        raise NoDevice(f"{device!r} is not a CUDA device")
    index = getattr(dev, "index", None)
    return int(torch.cuda.current_device()) if index is None else int(index)
