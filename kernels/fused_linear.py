"""Linear layer and activation in one launch: out = act(a @ b + c), for the torch.compile
fusion pass (linear + bias + activation), with its float64 reference.

Layer: kernel library (trnsim.kernels); public NKI API only; follows docs/device-kernels.md.
The loops are gemm's (kernels/gemm.py: any shapes, strides and batch broadcast); only the
PSUM evacuation changes: the activation runs on ScalarE on the tile gemm would have stored,
so the pre-activation never makes the HBM round trip an eager `addmm` then `gelu` makes.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import fail
from ._gemm_epilogue import Epilogue, epilogue_kind
from ._gemm_plan import plan
from ._kmajor import Mat
from .gemm import gemm_ref, run_gemm

# torch activation -> ScalarE function (nki.language activation functions)
ACTS = {"gelu": nl.gelu, "gelu_tanh": nl.gelu_apprx_tanh, "relu": nl.relu, "silu": nl.silu,
        "tanh": nl.tanh, "sigmoid": nl.sigmoid}
# the pointwise table's op and attributes for each (the reference)
REF_OPS = {"gelu": ("gelu", {"approximate": "none"}),
           "gelu_tanh": ("gelu", {"approximate": "tanh"}), "relu": ("relu", {}),
           "silu": ("silu", {}), "tanh": ("tanh", {}), "sigmoid": ("sigmoid", {})}


class ActEpilogue(Epilogue):
    """gemm's evacuation followed by the activation; optionally also stores the
    pre-activation (what a backward needs for gelu and silu) to `pre`."""

    def __init__(self, kind: str, act: str, out, pre=None):
        super().__init__(kind, 1.0, 1.0)
        self.fn = ACTS[act]
        self.pre = pre
        self.delta = 0 if pre is None else int(pre.offset) - int(out.offset)
        # Without an addend or with a per-partition one, one ScalarE instruction computes
        # act(acc + bias) straight from PSUM; otherwise the addend goes in first (VectorE).
        self.direct = pre is None and kind in ("scale", "column")

    def apply(self, dst, acc, engine, ctile) -> None:
        if self.direct:
            nisa.activation(dst=dst, op=self.fn, data=acc,
                            bias=ctile if self.kind == "column" else None)
        else:  # the pre-activation, rounded to out's dtype as an eager linear's output is
            super().apply(dst, acc, engine, ctile)

    def store(self, out: Mat, res, mm: int, r0: int, col: int, gw: int) -> None:
        if not self.direct:
            if self.pre is not None:
                pre = Mat(self.pre, out.rows, out.cols, out.rs, out.cs, out.off + self.delta)
                super().store(pre, res, mm, r0, col, gw)
                y = nl.ndarray(res.shape, dtype=res.dtype, buffer=nl.sbuf, name="linear_act_y")
                nisa.activation(dst=y[0:mm, 0:gw], op=self.fn, data=res[0:mm, 0:gw])
                res = y
            else:
                nisa.activation(dst=res[0:mm, 0:gw], op=self.fn, data=res[0:mm, 0:gw])
        super().store(out, res, mm, r0, col, gw)


def linear_act(out, a, b, *, c=None, act: str, pre=None) -> None:
    """``out = act(a @ b + c)``: a linear layer (``b`` = weight.T, ``c`` = bias) and its
    activation in one launch.

    Dimensions:
        out: [..., M, N]; a: [..., M, K]; b: [..., K, N] (gemm's shapes, strides and batch
        broadcast); c: broadcastable to out (a bias [N]) or None.

    Args:
        act: "gelu", "gelu_tanh" (torch's approximate="tanh"), "relu", "silu", "tanh" or
            "sigmoid".
        pre: optional tensor of out's shape and strides that receives a @ b + c (rounded to
            its dtype), for a backward that needs the pre-activation.

    Notes:
        The result is act of the pre-activation as rounded to out's dtype, as eager's linear
        then activation computes it; without c (or with a per-row c) and without `pre`, act
        reads the fp32 accumulator directly (one rounding).
    """
    if act not in ACTS:
        fail(f"linear_act: act={act!r} is not one of {', '.join(ACTS)}")
    problems, k, dtype = plan(out, a, b, c, 1.0, 1.0)
    if pre is not None:
        if tuple(pre.shape) != tuple(out.shape) or tuple(pre.strides) != tuple(out.strides):
            fail(f"linear_act: pre has shape {list(pre.shape)} and strides "
                 f"{list(pre.strides)}; it must have out's {list(out.shape)}, "
                 f"{list(out.strides)}")
        if pre.dtype != out.dtype:
            fail(f"linear_act: pre has dtype {pre.dtype.name}; out's is {out.dtype.name}")
    epi = ActEpilogue(epilogue_kind(problems[0].c, 1.0), act, out, pre)
    run_gemm(problems, k, dtype, epi, batched=False)


def linear_act_ref(a, b, c=None, *, act: str) -> np.ndarray:
    """act(a @ b + c) in float64."""
    from .pointwise import pointwise_ref

    op, attrs = REF_OPS[act]
    return np.asarray(pointwise_ref(op, gemm_ref(a, b, c), **attrs), np.float64)
