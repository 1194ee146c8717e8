"""Mixed precision: the one place that decides how forward passes and losses run.

``precision`` is an estimator parameter:

``'fp32'``
    Everything in float32, exactly the code path of clestim without this module
    (no ``torch.autocast`` context is entered, no gradient scaler exists).
``'bf16'``
    Forward passes and losses run under ``torch.autocast(dtype=torch.bfloat16)``;
    parameters, gradients and optimizer state stay float32 (the usual automatic
    mixed precision of Micikevicius et al. 2018). bfloat16 keeps float32's range, so
    no gradient scaling is needed. On a CPU without native bfloat16 kernels (oneDNN
    reports none, e.g. AVX2-only x86) autocast still works but is an emulation many
    times *slower* than float32, so clestim warns once per process and trains in
    float32 instead.
``'fp16'``
    float16 autocast with a ``torch.amp.GradScaler`` (dynamic loss scaling), for
    GPUs. On a CPU it is an error: CPU float16 kernels are slow or missing and CPU
    autocast has no gradient scaler.

Replay memories store their inputs in bfloat16 when a reduced precision is in
effect (bfloat16 also for ``'fp16'``: same halving, float32's range, no overflow
of large raw inputs) and hand them back as float32.

Steps that need float32 leave autocast with :func:`full_precision`; a method that
does so says so in its docstring.
"""

from __future__ import annotations

import contextlib
import warnings
from functools import lru_cache

import torch

PRECISIONS = ("fp32", "bf16", "fp16")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
_warned: set = set()


def _device_type(device) -> str:
    return torch.device(device).type


@lru_cache(maxsize=1)
def cpu_supports_bf16() -> bool:
    """Whether this CPU has native bfloat16 kernels (oneDNN's AVX-512 BF16 / AMX)."""
    try:
        return bool(
            torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
        )
    except (AttributeError, RuntimeError):  # pragma: no cover - builds without the op
        return False


def check_precision(precision, device) -> None:
    """Raise a ``ValueError`` for an unknown precision or ``'fp16'`` on a CPU."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "fp16" and _device_type(device) == "cpu":
        raise ValueError(
            "precision='fp16' needs a GPU (device='cuda'): CPU autocast has no float16 "
            "gradient scaler and slow float16 kernels; use precision='bf16' on a CPU"
        )


def amp_dtype(precision, device) -> torch.dtype | None:
    """The autocast dtype in effect for ``precision`` on ``device``; None: float32.

    ``'bf16'`` on a CPU without native bfloat16 support falls back to float32 with a
    ``UserWarning`` (once per process).
    """
    check_precision(precision, device)
    if precision == "fp32":
        return None
    if precision == "bf16" and _device_type(device) == "cpu" and not cpu_supports_bf16():
        if "bf16-cpu" not in _warned:
            _warned.add("bf16-cpu")
            warnings.warn(
                "precision='bf16': this CPU has no native bfloat16 kernels (oneDNN reports "
                "none), where autocast is an emulation slower than float32; training in "
                "float32 instead",
                UserWarning,
                stacklevel=3,
            )
        return None
    return _DTYPES[precision]


def autocast(precision, device):
    """The context a forward pass and its loss run in (a no-op context for float32)."""
    dtype = amp_dtype(precision, device)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(_device_type(device), dtype=dtype)


def full_precision(device):
    """A context that leaves autocast: the operations inside run in float32 (a no-op
    context when autocast is off)."""
    device_type = _device_type(device)
    if not torch.is_autocast_enabled(device_type):
        return contextlib.nullcontext()
    return torch.autocast(device_type, enabled=False)


def grad_scaler(precision, device):
    """A ``GradScaler`` for ``'fp16'``, else None."""
    if amp_dtype(precision, device) is torch.float16:
        return torch.amp.GradScaler(_device_type(device))
    return None


def storage_dtype(precision, device) -> torch.dtype:
    """The dtype replay memories store inputs in (bfloat16 under a reduced precision)."""
    return torch.float32 if amp_dtype(precision, device) is None else torch.bfloat16
