"""What the op implementations share: outputs, dtype checks, out= handling, launching."""

from __future__ import annotations

from typing import Any

import torch
from trnsim.backend import storage
from trnsim.backend.launch import launch as _launch
from trnsim.backend.registry import HostOnly
from trnsim.backend.runtime import runtime
from trnsim.kernels import optim
from trnsim.kernels.gemm import gemm
from trnsim.kernels.pointwise import pointwise, pointwise_multi

FLOAT_KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def new(shape: Any, dtype: torch.dtype) -> torch.Tensor:
    """A fresh contiguous device tensor."""
    return storage.empty(runtime(), list(shape), dtype)


def new_like(t: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    return new(t.shape, dtype or t.dtype)


def fit_out(out: torch.Tensor, shape: Any, dtype: torch.dtype, op: str) -> torch.Tensor:
    """An out= tensor made to hold a result of `shape` and `dtype`, as ATen's structured ops
    do: resized when its shape differs (storage kept where it fits); a dtype other than the
    result's is an error."""
    if out.dtype != dtype:
        raise RuntimeError(f"{op}: Expected out tensor to have dtype {dtype}, but got "
                           f"{out.dtype} instead")
    if list(out.shape) != list(shape):
        storage.resize(runtime(), out, shape)
    return out


def require_float(op: str, *tensors: torch.Tensor | None) -> torch.dtype:
    """The common dtype of float tensors the engines serve; HostOnly for float64/complex
    (run on the host, counted), RuntimeError for a mix, as ATen raises."""
    dts = {t.dtype for t in tensors if t is not None}
    for d in dts:
        if d not in FLOAT_KERNEL_DTYPES:
            raise HostOnly(f"{d} has no engine datapath" if d.is_floating_point or d.is_complex
                           else f"{d} inputs")
    if len(dts) > 1:
        names = " and ".join(str(d).replace("torch.", "") for d in sorted(dts, key=str))
        raise RuntimeError(f"{op}: expected both inputs to have the same dtype, but got {names}")
    return dts.pop() if dts else torch.float32


def require_nonempty(*tensors: torch.Tensor | None) -> None:
    if any(t is not None and t.numel() == 0 for t in tensors):
        raise HostOnly("an empty operand")


def scalar(v: Any) -> Any:
    """A Python number from a scalar argument (0-d CPU tensors included)."""
    if isinstance(v, torch.Tensor):
        return v.item()
    return v


# Library kernels that share their work over the programs of a kernel[lnc] launch
# (kernels/_cores.py): they run on every physical core of the rank's logical NeuronCore.
MULTI_CORE = frozenset(getattr(k, "fn", k) for k in (gemm, pointwise, pointwise_multi, optim.adam,
                                                 optim.sgd))


def launch(kernel: Any, *args: Any, aten_op: str, names: tuple[str, ...] = (),
           **attrs: Any) -> None:
    """Run a library kernel on device tensors (see trnsim.backend.launch.launch), on every
    core of the logical NeuronCore when it shares its work (MULTI_CORE)."""
    lnc = runtime().lnc if getattr(kernel, "fn", kernel) in MULTI_CORE else 1
    _launch(kernel, *args, aten_op=aten_op, names=names, lnc=lnc, **attrs)


def rows_2d(x: torch.Tensor, d: int) -> torch.Tensor:
    """x [..., D] as a [R, D] view (a copy when the leading dims do not flatten)."""
    if x.dim() == 2:
        return x
    try:
        return x.view(-1, d) if x.numel() else x.reshape(-1, d)
    except RuntimeError:
        return x.reshape(-1, d)
