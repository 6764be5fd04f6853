"""Neural-network ops: norms, losses, embedding, dropout, pooling, convolution, attention."""

from __future__ import annotations

from trnsim.backend.registry import cpu_overloads, reference_only, reference_rest

reference_rest(*cpu_overloads(
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training",
    "native_group_norm", "native_group_norm_backward",
    "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward",
    "mse_loss", "mse_loss_backward", "smooth_l1_loss", "smooth_l1_loss_backward", "l1_loss",
    "binary_cross_entropy", "binary_cross_entropy_backward", "huber_loss", "huber_loss_backward",
    "embedding_dense_backward", "native_dropout", "native_dropout_backward",
    "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d",
    "avg_pool2d_backward", "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward",
    "adaptive_max_pool2d", "adaptive_max_pool2d_backward", "upsample_nearest2d",
    "upsample_nearest2d_backward", "upsample_bilinear2d", "upsample_bilinear2d_backward",
    "im2col", "col2im", "glu", "glu_backward", "_prelu_kernel", "_prelu_kernel_backward",
), group="nn")

# PyTorch's convolution dispatch sends devices it does not know to the *_overrideable ops;
# their host form is the generic convolution on the CPU.
reference_only("convolution_overrideable", group="nn",
               host=__import__("torch").ops.aten.convolution.default)


def _convolution_backward(grad_output, input, weight, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    import torch

    bias_sizes = [grad_output.shape[1]] if output_mask[2] else None
    return torch.ops.aten.convolution_backward.default(
        grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
        output_padding, groups, output_mask)


reference_only("convolution_backward_overrideable", group="nn", host=_convolution_backward)
