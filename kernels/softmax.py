"""Row softmax over [N, D], with its reference.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import jit
from trnsim.nki import language as nl

from ._common import fail

P_MAX = 128  # rows per tile, one per partition (pmax)
MIN_DMA_BYTES = 2048  # bytes per partition below which a DMA's fixed cost (~2 us) dominates
SBUF_SHARE = 0.5  # share of usable SBUF for one row block and its result (two in flight)
DTYPES = ("bfloat16", "float16", "float32")


@jit
def softmax(x):
    """Softmax along the last axis of a [N, D] tensor: ``exp(x - max) / sum(exp(x - max))``.

    G rows per partition per block (so each DMA moves >= 2 KiB per partition): VectorE finds
    the negated row maxima of the whole block in one tensor_reduce (negate=True); ScalarE
    computes ``exp(x - max)`` per row with the row sum in its accumulator (one instruction);
    VectorE takes the reciprocals of the G sums at once and scales each row, casting to the
    output dtype on the way.

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
    if n <= 0 or n % P_MAX:
        fail(f"softmax: N={n} rows is not a positive multiple of {P_MAX}; pad the rows")
    if x.dtype not in DTYPES:
        fail(f"softmax: x dtype {x.dtype} is not one of {', '.join(DTYPES)}")
    per_row = d * (2 * x.dtype.itemsize + 4)  # input, output, fp32 exponentials
    budget = nl.tile_size.total_available_sbuf_size * SBUF_SHARE / 2
    if per_row > budget:
        fail(
            f"softmax: D={d} needs {per_row} bytes per partition per row; at most {int(budget)} fit"
        )
    g = max(1, -(-MIN_DMA_BYTES // (d * x.dtype.itemsize)))
    while g > 1 and ((n // P_MAX) % g or g * per_row > budget):
        g -= 1

    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm, name="softmax_out")
    for b in nl.affine_range(n // (g * P_MAX)):
        r0 = b * g * P_MAX
        # Row r0 + p*G + j sits at partition p, slot j: one contiguous run per partition.
        xt = nl.ndarray((P_MAX, g, d), dtype=x.dtype, buffer=nl.sbuf, name="x_blk")
        nisa.dma_copy(dst=xt, src=x[r0 : r0 + g * P_MAX, :].reshape((P_MAX, g, d)))
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
            nisa.tensor_scalar(
                dst=yt[:, j, :], data=ex[:, j, :], op0=nl.multiply, operand0=inv[:, j : j + 1]
            )
        nisa.dma_copy(dst=out[r0 : r0 + g * P_MAX, :].reshape((P_MAX, g, d)), src=yt)
    return out


def softmax_ref(x: np.ndarray) -> np.ndarray:
    """Row softmax in float64."""
    x64 = np.asarray(x, dtype=np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
