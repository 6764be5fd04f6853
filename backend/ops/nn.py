"""Neural-network ops on the device: convolution, pooling, negative log-likelihood loss and
dropout (norms are in ops/norms.py, attention in ops/attention.py); the rest of the family
is reference only.

Convolutions reach a Python device as `convolution_overrideable` (PyTorch's hook for devices
it does not know); 2-D ones (transposed too) run as trnsim.kernels.conv. Dropout draws its
mask on the host from torch's CPU generator exactly as the CPU's dropout draws its noise (so
torch.manual_seed gives the same masks on both), then applies it on the device.
"""

from __future__ import annotations

import torch
from trnsim.backend.ops._common import launch, new, require_float
from trnsim.backend.ops._meta import check_int64_range, run_meta
from trnsim.backend.registry import HostOnly, cpu_overloads, op, reference_rest
from trnsim.backend.runtime import runtime
from trnsim.kernels import conv, losses, pool
from trnsim.kernels.pointwise import pointwise


def _convolution_host(input, weight, bias, stride, padding, dilation, transposed,
                      output_padding, groups):
    return torch.ops.aten.convolution.default(input, weight, bias, stride, padding, dilation,
                                              transposed, output_padding, groups)


def _convolution_backward_host(grad_output, input, weight, stride, padding, dilation,
                               transposed, output_padding, groups, output_mask):
    bias_sizes = [grad_output.shape[1]] if output_mask[2] else None
    return torch.ops.aten.convolution_backward.default(
        grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
        output_padding, groups, output_mask)


def _conv_args(input, weight, transposed, stride, padding, dilation):
    if input.dim() != 4 or weight.dim() != 4:
        raise HostOnly(f"{input.dim() - 2}-D convolution")
    if isinstance(padding, str):
        raise HostOnly(f"padding={padding!r}")
    return [int(s) for s in stride], [int(p) for p in padding], [int(d) for d in dilation]


@op("convolution_overrideable", kernels="conv2d", host=_convolution_host)
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    dtype = require_float("conv2d", input, weight, bias)
    s, p, d = _conv_args(input, weight, transposed, stride, padding, dilation)
    meta = run_meta(torch.ops.aten.convolution.default,
                    (input, weight, bias, stride, padding, dilation, transposed,
                     output_padding, groups), {})
    out = new(meta.shape, dtype)
    if out.numel() == 0 or input.numel() == 0:
        raise HostOnly("an empty operand")
    if transposed:
        launch(conv.conv_transpose2d, out, input, weight, bias,
               aten_op="aten::conv_transpose2d", names=("out", "input", "weight", "bias"),
               stride=s, padding=p, output_padding=[int(o) for o in output_padding],
               dilation=d, groups=int(groups))
        return out
    launch(conv.conv2d, out, input, weight, bias, aten_op="aten::conv2d",
           names=("out", "input", "weight", "bias"), stride=s, padding=p, dilation=d,
           groups=int(groups))
    return out


@op("convolution_backward_overrideable", kernels="conv2d_backward",
    host=_convolution_backward_host)
def convolution_backward(grad_output, input, weight, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask):
    require_float("conv2d_backward", grad_output, input, weight)
    s, p, d = _conv_args(input, weight, transposed, stride, padding, dilation)
    gi = new(input.shape, input.dtype) if output_mask[0] else None
    gw = new(weight.shape, weight.dtype) if output_mask[1] else None
    gb = new((grad_output.shape[1],), grad_output.dtype) if output_mask[2] else None
    if input.numel() == 0 or grad_output.numel() == 0:
        raise HostOnly("an empty operand")
    if transposed:
        launch(conv.conv_transpose2d_backward, gi, gw, gb, grad_output, input, weight,
               aten_op="aten::conv_transpose2d_backward",
               names=("grad_input", "grad_weight", "grad_bias", "grad_output", "input",
                      "weight"), stride=s, padding=p,
               output_padding=[int(o) for o in output_padding], dilation=d, groups=int(groups))
        return gi, gw, gb
    launch(conv.conv2d_backward, gi, gw, gb, grad_output, input, weight,
           aten_op="aten::conv2d_backward",
           names=("grad_input", "grad_weight", "grad_bias", "grad_output", "input", "weight"),
           stride=s, padding=p, dilation=d, groups=int(groups))
    return gi, gw, gb


# ---------------------------------------------------------------- pooling


def _pair(v) -> list[int]:
    """An int or int[2] argument as a list (ATen may hand either)."""
    return [int(v)] if isinstance(v, int) else [int(x) for x in v]


def _pool_dims(self, name: str) -> None:
    require_float(name, self)
    if self.dim() not in (3, 4) or self.numel() == 0:
        raise HostOnly(f"a {list(self.shape)} input")


@op("max_pool2d_with_indices", kernels="max_pool2d")
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode=False):
    _pool_dims(self, "max_pool2d")
    meta = run_meta(torch.ops.aten.max_pool2d_with_indices.default,
                    (self, kernel_size, stride, padding, dilation, ceil_mode), {})
    out, idx = new(meta[0].shape, self.dtype), new(meta[1].shape, torch.int64)
    launch(pool.max_pool2d, out, idx, self, aten_op="aten::max_pool2d",
           names=("out", "indices", "self"), kernel_size=_pair(kernel_size),
           stride=_pair(stride), padding=_pair(padding), dilation=_pair(dilation),
           ceil_mode=bool(ceil_mode))
    return out, idx


@op("max_pool2d_with_indices_backward", kernels="max_pool2d_backward")
def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
                                     ceil_mode, indices):
    _pool_dims(self, "max_pool2d_backward")
    check_int64_range(indices, "indices")
    gi = new(self.shape, grad_output.dtype)
    launch(pool.max_pool2d_backward, gi, grad_output, indices,
           aten_op="aten::max_pool2d_backward", names=("grad_input", "grad_output", "indices"),
           kernel_size=_pair(kernel_size), stride=_pair(stride), padding=_pair(padding),
           dilation=_pair(dilation), ceil_mode=bool(ceil_mode))
    return gi


@op("avg_pool2d", kernels="avg_pool2d")
def avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    _pool_dims(self, "avg_pool2d")
    meta = run_meta(torch.ops.aten.avg_pool2d.default,
                    (self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override), {})
    out = new(meta.shape, self.dtype)
    launch(pool.avg_pool2d, out, self, aten_op="aten::avg_pool2d", names=("out", "self"),
           kernel_size=_pair(kernel_size), stride=_pair(stride), padding=_pair(padding),
           ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad),
           divisor_override=divisor_override)
    return out


@op("avg_pool2d_backward", kernels="avg_pool2d_backward")
def avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):
    _pool_dims(self, "avg_pool2d_backward")
    gi = new(self.shape, grad_output.dtype)
    launch(pool.avg_pool2d_backward, gi, grad_output, aten_op="aten::avg_pool2d_backward",
           names=("grad_input", "grad_output"), kernel_size=_pair(kernel_size),
           stride=_pair(stride), padding=_pair(padding), ceil_mode=bool(ceil_mode),
           count_include_pad=bool(count_include_pad), divisor_override=divisor_override)
    return gi


@op("_adaptive_avg_pool2d", kernels="adaptive_avg_pool2d")
def adaptive_avg_pool2d(self, output_size):
    _pool_dims(self, "adaptive_avg_pool2d")
    if list(output_size) != [1, 1]:
        raise HostOnly(f"output_size={list(output_size)}")
    out = new([*self.shape[:-2], 1, 1], self.dtype)
    launch(pool.adaptive_avg_pool2d, out, self, aten_op="aten::adaptive_avg_pool2d",
           names=("out", "self"))
    return out


@op("_adaptive_avg_pool2d_backward", kernels="adaptive_avg_pool2d_backward")
def adaptive_avg_pool2d_backward(grad_output, self):
    _pool_dims(self, "adaptive_avg_pool2d_backward")
    if list(grad_output.shape[-2:]) != [1, 1]:
        raise HostOnly(f"output size {list(grad_output.shape[-2:])}")
    gi = new(self.shape, grad_output.dtype)
    launch(pool.adaptive_avg_pool2d_backward, gi, grad_output,
           aten_op="aten::adaptive_avg_pool2d_backward", names=("grad_input", "grad_output"))
    return gi


# ---------------------------------------------------------------- nll loss


def _check_targets(self, target, ignore_index) -> None:
    if target.dtype != torch.int64:
        raise HostOnly(f"{target.dtype} targets")
    n_classes = self.shape[1] if self.dim() > 1 else self.shape[0]
    err = losses.target_error(runtime().host_views.of(target).numpy(), n_classes,
                              int(ignore_index))
    if err is not None:
        raise IndexError(err)


def _nll_forward(name, self, target, weight, reduction, ignore_index):
    require_float(name, self, weight)
    meta = run_meta(getattr(torch.ops.aten, name).default,
                    (self, target, weight, reduction, ignore_index), {})
    _check_targets(self, target, ignore_index)
    out, total = new(meta[0].shape, self.dtype), new(meta[1].shape, self.dtype)
    if self.numel() == 0:
        raise HostOnly("an empty input")
    launch(losses.nll_loss_forward, out.view(-1) if out.dim() else out, total, self, target,
           weight, aten_op=f"aten::{name}",
           names=("out", "total_weight", "self", "target", "weight"),
           reduction=int(reduction), ignore_index=int(ignore_index))
    return out, total


def _nll_backward(name, grad_output, self, target, weight, reduction, ignore_index,
                  total_weight):
    require_float(name, grad_output, self, weight)
    _check_targets(self, target, ignore_index)
    gi = new(self.shape, self.dtype)
    if self.numel() == 0:
        raise HostOnly("an empty input")
    launch(losses.nll_loss_backward, gi, grad_output.reshape(-1) if grad_output.dim() else
           grad_output, target, weight, total_weight, aten_op=f"aten::{name}",
           names=("grad_input", "grad_output", "target", "weight", "total_weight"),
           reduction=int(reduction), ignore_index=int(ignore_index))
    return gi


for _fwd, _bwd in (("nll_loss_forward", "nll_loss_backward"),
                   ("nll_loss2d_forward", "nll_loss2d_backward")):
    op(_fwd, kernels="nll_loss_forward")(
        lambda self, target, weight, reduction, ignore_index, _n=_fwd:
        _nll_forward(_n, self, target, weight, reduction, ignore_index))
    op(_bwd, kernels="nll_loss_backward")(
        lambda grad_output, self, target, weight, reduction, ignore_index, total_weight,
        _n=_bwd: _nll_backward(_n, grad_output, self, target, weight, reduction, ignore_index,
                               total_weight))


# ---------------------------------------------------------------- dropout


@op("native_dropout", kernels="pointwise")
def native_dropout(input, p, train=None):
    rt = runtime()
    mask = new(input.shape, torch.bool)
    if input.numel() == 0:
        return new(input.shape, input.dtype), mask
    if train is False:
        mask.fill_(True)
        return input.clone(), mask
    require_float("dropout", input)
    # The CPU's dropout draws a noise tensor of the input's dtype: the same draws here.
    noise = torch.empty(input.shape, dtype=input.dtype).bernoulli_(1.0 - p)
    rt.host_views.of(mask).copy_(noise != 0)
    scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
    out = new(input.shape, input.dtype)
    launch(pointwise, out, input, mask, aten_op="aten::native_dropout", op="dropout",
           scale=scale)
    return out, mask


@op("native_dropout_backward", kernels="pointwise")
def native_dropout_backward(grad_output, mask, scale):
    require_float("dropout_backward", grad_output)
    out = new(grad_output.shape, grad_output.dtype)
    if out.numel():
        launch(pointwise, out, grad_output, mask, aten_op="aten::native_dropout_backward",
               op="dropout", scale=float(scale))
    return out


reference_rest(*cpu_overloads(
    "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "native_group_norm", "native_group_norm_backward",
    "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward",
    "mse_loss", "mse_loss_backward", "smooth_l1_loss", "smooth_l1_loss_backward", "l1_loss",
    "binary_cross_entropy", "binary_cross_entropy_backward", "huber_loss", "huber_loss_backward",
    "native_dropout", "native_dropout_backward",
    "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d",
    "avg_pool2d_backward", "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward",
    "adaptive_max_pool2d", "adaptive_max_pool2d_backward", "upsample_nearest2d",
    "upsample_nearest2d_backward", "upsample_bilinear2d", "upsample_bilinear2d_backward",
    "im2col", "col2im", "glu", "glu_backward", "_prelu_kernel", "_prelu_kernel_backward",
), group="nn")


# Further families with CPU kernels and no NKI kernel yet: they run on the host over the
# device's bytes in every mode (counted by torch.trn.host_ops()), so the modules that reach
# them (audio and vision padding, upsampling, 3-D pooling, weight norm, CTC, ...) run.
reference_rest(*cpu_overloads(
    "log_sigmoid_forward", "log_sigmoid_backward", "_weight_norm_interface",
    "_weight_norm_interface_backward", "reflection_pad1d", "reflection_pad1d_backward",
    "reflection_pad2d_backward", "reflection_pad3d", "reflection_pad3d_backward",
    "replication_pad1d", "replication_pad1d_backward", "replication_pad2d_backward",
    "replication_pad3d", "replication_pad3d_backward", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "native_channel_shuffle", "upsample_bicubic2d",
    "upsample_bicubic2d_backward", "upsample_linear1d", "upsample_linear1d_backward",
    "upsample_nearest1d", "upsample_nearest1d_backward", "upsample_nearest3d",
    "upsample_nearest3d_backward", "upsample_trilinear3d", "upsample_trilinear3d_backward",
    "_upsample_nearest_exact1d", "_upsample_nearest_exact1d_backward",
    "_upsample_nearest_exact2d", "_upsample_nearest_exact2d_backward",
    "_upsample_nearest_exact3d", "_upsample_nearest_exact3d_backward", "grid_sampler_2d",
    "grid_sampler_2d_backward", "grid_sampler_3d", "grid_sampler_3d_backward", "avg_pool3d",
    "avg_pool3d_backward", "max_pool3d_with_indices", "max_pool3d_with_indices_backward",
    "_adaptive_avg_pool3d", "_adaptive_avg_pool3d_backward", "adaptive_max_pool3d",
    "adaptive_max_pool3d_backward", "max_unpool2d", "max_unpool3d", "_ctc_loss",
    "_ctc_loss_backward", "hardshrink", "hardshrink_backward", "softshrink",
    "softshrink_backward", "rrelu_with_noise", "multi_margin_loss",
    "multi_margin_loss_backward", "multilabel_margin_loss_forward",
    "multilabel_margin_loss_backward", "_pdist_forward", "_pdist_backward",
    "fractional_max_pool2d", "fractional_max_pool2d_backward", "fractional_max_pool3d",
    "fractional_max_pool3d_backward", "_upsample_bilinear2d_aa",
    "_upsample_bilinear2d_aa_backward", "_upsample_bicubic2d_aa",
    "_upsample_bicubic2d_aa_backward", "_upsample_lanczos2d_aa",
    "_upsample_lanczos2d_aa_backward", "_batch_norm_with_update", "batch_norm_backward",
    "batch_norm_update_stats", "_masked_softmax", "_masked_softmax_backward",
    "glu_jvp", "glu_backward_jvp", "slow_conv_dilated2d", "slow_conv_dilated3d",
    "slow_conv_transpose2d", "slow_conv_transpose3d", "slow_conv3d_forward",
    "_slow_conv2d_forward", "_slow_conv2d_backward", "adaptive_avg_pool2d",
    "adaptive_avg_pool3d", "adaptive_avg_pool3d_backward",
), group="nn")
