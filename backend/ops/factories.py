"""Tensor factories: arange on the device (iota); random fills.

Random fills draw from torch's CPU generator on the host (so torch.manual_seed makes device
runs reproducible and equal to CPU runs); they have no device time. fill_ and zero_ are in
ops/pointwise.py (the fill kernel).
"""

from __future__ import annotations

import math

import torch
from trnsim.backend import storage
from trnsim.backend.ops._common import launch
from trnsim.backend.registry import REGISTRY, HostOnly, cpu_overloads, op, reference_only
from trnsim.backend.runtime import runtime
from trnsim.kernels import fill as fill_kernels


@op("arange.start_out", kernels="arange")
def arange_out(start, end, step=1, *, out):
    vals = [v.item() if isinstance(v, torch.Tensor) else v for v in (start, end, step)]
    start, end, step = vals
    n = _arange_size(start, end, step, out.dtype)
    if not out.dtype.is_floating_point:  # ATen's integer arange: truncated start and step
        start, step = int(start), int(step)
    if list(out.shape) != [n]:
        storage.resize(runtime(), out, [n])
    if n == 0:
        return out
    if out.dtype not in (torch.float32, torch.bfloat16, torch.float16, torch.int32,
                         torch.int64, torch.int16, torch.int8, torch.uint8):
        raise HostOnly(f"{out.dtype} output")
    if out.dtype == torch.int64 and not (-(2 ** 31) <= start + step * (n - 1) < 2 ** 31
                                         and -(2 ** 31) <= start < 2 ** 31):
        raise HostOnly("int64 values beyond int32 range")
    if not out.dtype.is_floating_point and out.dtype != torch.int64:
        info = torch.iinfo(out.dtype)
        if not (info.min <= start <= info.max and info.min <= start + step * (n - 1) <= info.max):
            raise HostOnly(f"values that wrap around {out.dtype}")
    launch(fill_kernels.arange, out, start, step, aten_op="aten::arange",
           int64=out.dtype == torch.int64)
    return out


def _arange_size(start, end, step, dtype: torch.dtype) -> int:
    """ATen's arange length and checks (as the CPU's arange): the bounds are checked on the
    numbers given; an int64 output sizes its range in integers of the truncated bounds and
    step, other types in doubles of the numbers given. Integer values are the truncated
    start plus multiples of the truncated step (all equal when that step truncates to 0)."""
    if step == 0:
        raise ValueError("step must be nonzero")
    if not ((step > 0 and end >= start) or (step < 0 and end <= start)):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype == torch.int64:
        xstart, xend, xstep = int(start), int(end), int(step)
        if xstep == 0:
            raise ValueError("step must be nonzero")
        num = xend - xstart + xstep - (1 if xstep > 0 else -1)
        return abs(num) // abs(xstep) * (1 if (num >= 0) == (xstep > 0) else -1)
    return max(0, math.ceil((float(end) - float(start)) / float(step)))


@op("_efficientzerotensor", kernels="fill")
def efficientzerotensor(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """PyTorch's storage-less zero tensor (autograd's zero gradients): on this device a real
    tensor of zeros (a Python device cannot hold the ZeroTensor kind)."""
    from trnsim.backend.ops.pointwise import _fill

    t = storage.empty(runtime(), size, dtype or torch.get_default_dtype())
    return _fill(t, 0)


reference_only(*(n for n in cpu_overloads("arange", "linspace", "logspace", "eye",
                                          "_efficientzerotensor", "scalar_tensor", "tril_indices",
                                          "triu_indices") if n not in REGISTRY), group="factories")
reference_only(*cpu_overloads("uniform", "normal", "bernoulli", "random", "exponential",
                              "geometric", "cauchy", "log_normal", "multinomial", "randperm"),
               note="drawn from torch's CPU generator (torch.manual_seed applies)",
               group="random")
reference_only(*cpu_overloads("poisson", "binomial", "_standard_gamma", "_sample_dirichlet"),
               note="drawn from torch's CPU generator (torch.manual_seed applies)",
               group="random")
reference_only(*cpu_overloads("_standard_gamma_grad", "_dirichlet_grad"), group="random")
# CompositeExplicitAutograd in PyTorch, but its kernel fills through a per-device DispatchStub
# that only C++ can register (PyTorch's internal assert "DispatchStub: missing kernel").
reference_only("kaiser_window", "kaiser_window.periodic", "kaiser_window.beta",
               "kaiser_window.out", "kaiser_window.periodic_out", "kaiser_window.beta_out",
               group="factories")
