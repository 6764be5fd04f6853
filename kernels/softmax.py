"""Row softmax over [N, D], with its reference.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import jit
from trnsim.nki import language as nl

from ._common import P_MAX, fail, prefetched_row_blocks, row_block, row_group

SBUF_SHARE = 0.5  # share of usable SBUF for the row blocks in flight and their results
DTYPES = ("bfloat16", "float16", "float32")


@jit
def softmax(x):
    """Softmax along the last axis of a [N, D] tensor: ``exp(x - max) / sum(exp(x - max))``.

    G rows per partition per block (so each DMA moves >= 2 KiB per partition; block b+1 is
    loaded while block b is computed): VectorE finds the negated row maxima of the whole
    block in one tensor_reduce (negate=True); ScalarE computes ``exp(x - max)`` per row with
    the row sum in its accumulator (one instruction); VectorE takes the reciprocals of the
    G sums at once; each row is then scaled, and cast to the output dtype on the way, by
    VectorE and ScalarE in turns.

    Dimensions:
        N: rows, multiple of 128.
        D: softmax axis.

    Args:
        x: [N, D] HBM tensor, bfloat16, float16 or float32.

    Returns:
        [N, D] shared-HBM tensor of x's dtype.

    Notes:
        exp and the sums are fp32; the unnormalized exponentials are kept in fp32.
    """
    if len(x.shape) != 2:
        fail(f"softmax: x must be 2-D [N, D], got shape {list(x.shape)}")
    n, d = x.shape
    if x.dtype not in DTYPES:
        fail(f"softmax: x dtype {x.dtype} is not one of {', '.join(DTYPES)}")
    per_row = d * (2 * x.dtype.itemsize + 4)  # input, output, fp32 exponentials
    g = row_group(n, d, x.dtype.itemsize, per_row, SBUF_SHARE, "softmax")

    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm, name="softmax_out")
    for b, (xt,) in prefetched_row_blocks(g, "x_blk", x):
        neg_max = nl.ndarray((P_MAX, g), dtype=nl.float32, buffer=nl.sbuf, name="neg_max")
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=xt, axis=2, negate=True)
        ex = nl.ndarray((P_MAX, g, d), dtype=nl.float32, buffer=nl.sbuf, name="exp")
        sums = nl.ndarray((P_MAX, g), dtype=nl.float32, buffer=nl.sbuf, name="sums")
        for j in nl.affine_range(g):
            nisa.activation(
                dst=ex[:, j, :],
                op=nl.exp,
                data=xt[:, j, :],
                bias=neg_max[:, j : j + 1],
                reduce_op=nl.add,
                reduce_res=sums[:, j : j + 1],
                reduce_cmd=nisa.reduce_cmd.reset_reduce,
            )
        inv = nl.ndarray((P_MAX, g), dtype=nl.float32, buffer=nl.sbuf, name="inv_sums")
        nisa.reciprocal(dst=inv, data=sums)
        yt = nl.ndarray((P_MAX, g, d), dtype=x.dtype, buffer=nl.sbuf, name="y_blk")
        for j in nl.affine_range(g):
            # Normalize on VectorE and ScalarE by turns: each then makes two passes per pair
            # of rows (VectorE: max, scale; ScalarE: exp, scale).
            if (b * g + j) % 2 == 0:
                nisa.tensor_scalar(
                    dst=yt[:, j, :], data=ex[:, j, :], op0=nl.multiply, operand0=inv[:, j : j + 1]
                )
            else:
                nisa.activation(
                    dst=yt[:, j, :], op=nl.copy, data=ex[:, j, :], scale=inv[:, j : j + 1]
                )
        nisa.dma_copy(dst=row_block(out, b, g), src=yt)
    return out


def softmax_ref(x: np.ndarray) -> np.ndarray:
    """Row softmax in float64."""
    x64 = np.asarray(x, dtype=np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
