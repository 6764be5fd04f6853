"""softmax / log_softmax and their backward: one launch of trnsim.kernels.softmax_nd each
(any dim, any strides; statistics in fp32; half_to_float outputs fp32)."""

from __future__ import annotations

import torch
from trnsim.backend.ops._common import fit_out, launch, new, require_float
from trnsim.backend.registry import op
from trnsim.kernels.softmax_nd import softmax_backward, softmax_forward


def _dim(x: torch.Tensor, dim: int) -> int:
    nd = max(x.dim(), 1)
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                         f"{nd - 1}], but got {dim})")
    return dim % nd


def _forward(name: str, log: bool, x, dim, half_to_float, out=None):
    dtype = require_float(name, x)
    if half_to_float and dtype not in (torch.float16, torch.bfloat16):
        raise RuntimeError(f"{name}: conversion from {dtype} to float32 with half_to_float is "
                           "only for float16 and bfloat16 inputs")
    dt = torch.float32 if half_to_float else dtype
    out = new(x.shape, dt) if out is None else fit_out(out, x.shape, dt, name)
    if x.numel():
        launch(softmax_forward, out, x, aten_op=f"aten::{name}", names=("out", "self"),
               dim=_dim(x, dim), log=log)
    return out


def _backward(name: str, log: bool, grad_output, output, dim, input_dtype, grad_input=None):
    require_float(name, grad_output, output)
    if input_dtype not in (torch.float32, torch.bfloat16, torch.float16):
        from trnsim.backend.registry import HostOnly

        raise HostOnly(f"{input_dtype} result")
    gi = new(grad_output.shape, input_dtype) if grad_input is None else \
        fit_out(grad_input, grad_output.shape, input_dtype, name)
    if gi.numel():
        launch(softmax_backward, gi, grad_output, output, aten_op=f"aten::{name}",
               names=("grad_input", "grad_output", "output"), dim=_dim(output, dim), log=log)
    return gi


@op("_softmax", kernels="softmax_forward")
def softmax(self, dim, half_to_float):
    return _forward("_softmax", False, self, dim, half_to_float)


@op("_softmax.out", kernels="softmax_forward")
def softmax_out(self, dim, half_to_float, *, out):
    return _forward("_softmax", False, self, dim, half_to_float, out)


@op("_log_softmax", kernels="softmax_forward")
def log_softmax(self, dim, half_to_float):
    return _forward("_log_softmax", True, self, dim, half_to_float)


@op("_log_softmax.out", kernels="softmax_forward")
def log_softmax_out(self, dim, half_to_float, *, out):
    return _forward("_log_softmax", True, self, dim, half_to_float, out)


@op("_softmax_backward_data", kernels="softmax_backward")
def softmax_backward_data(grad_output, output, dim, input_dtype):
    return _backward("_softmax_backward_data", False, grad_output, output, dim, input_dtype)


@op("_softmax_backward_data.out", kernels="softmax_backward")
def softmax_backward_data_out(grad_output, output, dim, input_dtype, *, grad_input):
    return _backward("_softmax_backward_data", False, grad_output, output, dim, input_dtype,
                     grad_input)


@op("_log_softmax_backward_data", kernels="softmax_backward")
def log_softmax_backward_data(grad_output, output, dim, input_dtype):
    return _backward("_log_softmax_backward_data", True, grad_output, output, dim, input_dtype)


@op("_log_softmax_backward_data.out", kernels="softmax_backward")
def log_softmax_backward_data_out(grad_output, output, dim, input_dtype, *, out):
    return _backward("_log_softmax_backward_data", True, grad_output, output, dim, input_dtype,
                     out)
