"""torch.autocast(device_type='trn', dtype=torch.bfloat16): AutocastPrivateUse1 kernels.

The op lists and their policies are CUDA's (PyTorch's AMP documentation): matrix products,
convolutions, linear and attention run in the autocast dtype; numerically sensitive ops
(exp, log, pow, norms, softmax, losses, reductions) in float32; a few promote to the widest
input type. Every other op falls through unchanged. Casts apply to floating-point tensors of
this device, as CUDA's autocast casts CUDA tensors.
"""

from __future__ import annotations

from typing import Any

import torch
from trnsim.backend.runtime import Runtime

LOWER = [
    "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "convolution", "prelu", "addmm", "addmv", "addr",
    "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm",
    "chain_matmul", "linalg_multi_dot", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "scaled_dot_product_attention"
]
FP32 = [
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm",
    "group_norm", "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "cross_entropy_loss"
]
FP32_SET_DTYPE = [
    "prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm", "sum"
]
PROMOTE = [
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "index_put", "scatter_add",
    "tensordot"
]

_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)


def _overloads(name: str) -> list[Any]:
    packet = getattr(torch.ops.aten, name, None)
    return [getattr(packet, o) for o in packet.overloads()] if packet is not None else []


def install(lib: Any, rt: Runtime) -> None:
    dev = rt.name

    def cast(a: Any, dtype: torch.dtype) -> Any:
        if isinstance(a, torch.Tensor):
            if a.device.type == dev and a.is_floating_point() and a.dtype != dtype:
                return a.to(dtype)
            return a
        if isinstance(a, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in a):
            return type(a)(cast(x, dtype) for x in a)
        return a

    def widest(args: Any, kwargs: Any) -> torch.dtype | None:
        found = None
        for a in (*args, *kwargs.values()):
            if isinstance(a, torch.Tensor) and a.device.type == dev and a.is_floating_point():
                found = a.dtype if found is None else torch.promote_types(found, a.dtype)
        return found

    def kernel(overload: Any, policy: str) -> Any:
        has_dtype = any(a.name == "dtype" for a in overload._schema.arguments)

        def run(*args: Any, **kwargs: Any) -> Any:
            with torch._C._ExcludeDispatchKeyGuard(_KEYS):
                if policy == "lower":
                    dtype = torch.get_autocast_dtype(dev)
                elif policy == "fp32":
                    dtype = torch.float32
                elif policy == "fp32_set_dtype":
                    if has_dtype and kwargs.get("dtype") is None and any(
                            isinstance(a, torch.Tensor) and a.is_floating_point()
                            and a.dtype != torch.float32 for a in args):
                        kwargs = {**kwargs, "dtype": torch.float32}
                    return overload(*args, **kwargs)
                else:
                    dtype = widest(args, kwargs)
                    if dtype is None:
                        return overload(*args, **kwargs)
                return overload(*(cast(a, dtype) for a in args),
                                **{k: cast(v, dtype) for k, v in kwargs.items()})

        return run

    for names, policy in ((LOWER, "lower"), (FP32, "fp32"), (FP32_SET_DTYPE, "fp32_set_dtype"),
                          (PROMOTE, "promote")):
        for name in names:
            for ov in _overloads(name):
                if ov._schema.overload_name.endswith("out") or ov._schema.name.endswith("_"):
                    continue  # CUDA's autocast leaves out= and in-place forms alone
                lib.impl(ov, kernel(ov, policy), "AutocastPrivateUse1")
