"""Layer norm and RMS norm, forward and backward, as single kernels (trnsim.kernels.layer_norm).

`rms_norm` (composite in PyTorch) is routed to `_fused_rms_norm`, whose autograd formula calls
`_fused_rms_norm_backward`. Statistics follow PyTorch's CPU results: layer norm's mean and
rstd in the input dtype, RMS norm's rstd in float32 (the computation dtype). Inputs are
normalized over their last len(normalized_shape) dims, viewed as rows [R, D].
"""

from __future__ import annotations

import math

import torch
from torch._decomp import decompositions as decomp
from trnsim.backend.ops._common import launch, new, require_float, rows_2d
from trnsim.backend.registry import HostOnly, cpu_overloads, op, reference_rest
from trnsim.kernels.layer_norm import (
    layer_norm_backward,
    layer_norm_forward,
    rms_norm_backward,
    rms_norm_forward,
)


def rms_norm_autograd(input, normalized_shape, weight=None, eps=None):
    """AutogradPrivateUse1 kernel of aten::rms_norm: the fused op, whose autograd formula
    calls _fused_rms_norm_backward."""
    return torch.ops.aten._fused_rms_norm(input, normalized_shape, weight, eps)[0]


def _fused_rms_norm_backward_host(grad_out, input, normalized_shape, rstd, weight, output_mask):
    return decomp._fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight,
                                           output_mask)


def _split(name: str, x: torch.Tensor, normalized_shape, *params) -> tuple[int, int, list[int]]:
    k = len(normalized_shape)
    if list(x.shape[x.dim() - k:]) != list(normalized_shape) or k == 0:
        raise RuntimeError(f"{name}: Given normalized_shape={list(normalized_shape)}, expected "
                           f"input with shape [*, {', '.join(map(str, normalized_shape))}], "
                           f"but got input of size{list(x.shape)}")
    for p in params:
        if p is not None and list(p.shape) != list(normalized_shape):
            raise RuntimeError(f"{name}: Expected weight to be of same shape as "
                               f"normalized_shape, but got weight of shape {list(p.shape)} "
                               f"and normalized_shape = {list(normalized_shape)}")
    d = math.prod(normalized_shape)
    stats = [*x.shape[:x.dim() - k], *([1] * k)]
    return x.numel() // max(d, 1), d, stats


def _flat(p: torch.Tensor | None) -> torch.Tensor | None:
    return None if p is None else p.reshape(-1)


@op("native_layer_norm", kernels="layer_norm_forward")
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    dtype = require_float("native_layer_norm", input, weight, bias)
    r, d, stats = _split("native_layer_norm", input, normalized_shape, weight, bias)
    out, mean, rstd = new(input.shape, dtype), new(stats, dtype), new(stats, dtype)
    if input.numel():
        launch(layer_norm_forward, out.view(r, d), mean.view(r), rstd.view(r), rows_2d(input, d),
               _flat(weight), _flat(bias), aten_op="aten::native_layer_norm",
               names=("out", "mean", "rstd", "input", "weight", "bias"), eps=float(eps))
    return out, mean, rstd


@op("native_layer_norm_backward", kernels="layer_norm_backward")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                               output_mask):
    dtype = require_float("native_layer_norm_backward", grad_out, input, weight)
    r, d, _ = _split("native_layer_norm_backward", input, normalized_shape, weight)
    gx = new(input.shape, dtype) if output_mask[0] else None
    gw = new(weight.shape, weight.dtype) if output_mask[1] and weight is not None else None
    gb = new(bias.shape, bias.dtype) if output_mask[2] and bias is not None else None
    if input.numel() and (gx is not None or gw is not None or gb is not None):
        launch(layer_norm_backward, None if gx is None else gx.view(r, d), _flat(gw), _flat(gb),
               rows_2d(grad_out, d), rows_2d(input, d), mean.reshape(r), rstd.reshape(r),
               _flat(weight), aten_op="aten::native_layer_norm_backward",
               names=("grad_input", "grad_weight", "grad_bias", "grad_out", "input", "mean",
                      "rstd", "weight"))
    elif gw is not None or gb is not None:
        for g in (gw, gb):
            if g is not None:
                g.zero_()
    return gx, gw, gb


@op("_fused_rms_norm", kernels="rms_norm_forward", host=decomp._fused_rms_norm)
def fused_rms_norm(input, normalized_shape, weight=None, eps=None):
    dtype = require_float("rms_norm", input, weight)
    r, d, stats = _split("rms_norm", input, normalized_shape, weight)
    out, rstd = new(input.shape, dtype), new(stats, torch.float32)
    if input.numel():
        launch(rms_norm_forward, out.view(r, d), rstd.view(r), rows_2d(input, d), _flat(weight),
               aten_op="aten::rms_norm", names=("out", "rstd", "input", "weight"),
               eps=None if eps is None else float(eps))
    return out, rstd


@op("_fused_rms_norm_backward", kernels="rms_norm_backward",
    host=_fused_rms_norm_backward_host)
def fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask):
    dtype = require_float("rms_norm_backward", grad_out, input, weight)
    r, d, _ = _split("rms_norm_backward", input, normalized_shape, weight)
    gx = new(input.shape, dtype) if output_mask[0] else None
    gw = new(weight.shape, weight.dtype) if output_mask[1] and weight is not None else None
    if input.numel() and (gx is not None or gw is not None):
        launch(rms_norm_backward, None if gx is None else gx.view(r, d), _flat(gw),
               rows_2d(grad_out, d), rows_2d(input, d), rstd.reshape(r), _flat(weight),
               aten_op="aten::rms_norm_backward",
               names=("grad_input", "grad_weight", "grad_out", "input", "rstd", "weight"))
    elif gw is not None:
        gw.zero_()
    return gx, gw


# ---------------------------------------------------------------- batch norm


def _bn_check(input) -> torch.dtype:
    if input.dim() < 2:
        raise RuntimeError(f"batch_norm: expected an input of at least 2 dims [N, C, ...], got "
                           f"{list(input.shape)}")
    return require_float("batch_norm", input)


@op("native_batch_norm", kernels="batch_norm_forward")
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    from trnsim.kernels.batch_norm import batch_norm_forward

    dtype = _bn_check(input)
    c = input.shape[1]
    out = new(input.shape, dtype)
    stats = (c,) if training else (0,)  # PyTorch's CPU kernel returns empty stats in eval
    save_mean, save_invstd = new(stats, dtype), new(stats, dtype)
    if input.numel() == 0:
        raise HostOnly("an empty input")
    launch(batch_norm_forward, out, save_mean if training else None,
           save_invstd if training else None, input, weight, bias, running_mean, running_var,
           aten_op="aten::native_batch_norm",
           names=("out", "save_mean", "save_invstd", "input", "weight", "bias", "running_mean",
                  "running_var"), training=bool(training), momentum=float(momentum),
           eps=float(eps))
    return out, save_mean, save_invstd


@op("native_batch_norm_backward", kernels="batch_norm_backward")
def native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
                               save_invstd, train, eps, output_mask):
    from trnsim.kernels.batch_norm import batch_norm_backward

    dtype = _bn_check(input)
    c = input.shape[1]
    gx = new(input.shape, dtype) if output_mask[0] else None
    pdt = weight.dtype if weight is not None else dtype
    gw = new((c,), pdt) if output_mask[1] else None
    gb = new((c,), pdt) if output_mask[2] else None
    if input.numel() == 0:
        raise HostOnly("an empty input")
    launch(batch_norm_backward, gx, gw, gb, grad_out, input, weight,
           save_mean if train else None, save_invstd if train else None,
           None if train else running_mean, None if train else running_var,
           aten_op="aten::native_batch_norm_backward",
           names=("grad_input", "grad_weight", "grad_bias", "grad_out", "input", "weight",
                  "save_mean", "save_invstd", "running_mean", "running_var"),
           training=bool(train), eps=float(eps))
    return gx, gw, gb


# native_batch_norm's out= overload (the kernel entries above serve the functional one).
reference_rest(*cpu_overloads("native_batch_norm"), group="norms")
