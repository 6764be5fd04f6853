"""Row normalizations over [N, D]: RMSNorm and LayerNorm, with their references.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import jit
from trnsim.nki import language as nl

from ._common import P_MAX, fail, prefetched_row_blocks, row_block, row_group

BN_STATS_FMAX = 512  # elements per bn_stats instruction (bn_stats_fmax)
BN_STATS_WIDTH = 6  # bn_stats output per partition: (count, mean, var*count) x (even, odd)
SBUF_SHARE = 0.5  # share of usable SBUF for the row blocks in flight and their results
DTYPES = ("bfloat16", "float16", "float32")


def _check_rows(x, vectors: dict, what: str) -> tuple[int, int, int]:
    """(N, D, G): shape checks, and G rows per partition per block (for >= 2 KiB DMAs)."""
    if len(x.shape) != 2:
        fail(f"{what}: x must be 2-D [N, D], got shape {list(x.shape)}")
    n, d = x.shape
    if x.dtype not in DTYPES:
        fail(f"{what}: x dtype {x.dtype} is not one of {', '.join(DTYPES)}")
    for name, t in vectors.items():
        if tuple(t.shape) != (d,):
            fail(f"{what}: {name} must have shape [D]=[{d}], got {list(t.shape)}")
    # Per row: x, the result and fp32 scratch.
    per_row = d * (2 * x.dtype.itemsize + 4)
    return n, d, row_group(n, d, x.dtype.itemsize, per_row, SBUF_SHARE, what)


def _broadcast_row(vec, d: int, name: str):
    """A [D] HBM vector replicated on every partition: one partition-broadcast DMA."""
    t = nl.ndarray((P_MAX, d), dtype=vec.dtype, buffer=nl.sbuf, name=name)
    nisa.dma_copy(dst=t, src=vec.reshape((1, d)).broadcast(0, P_MAX))
    return t


@jit
def rmsnorm(x, w, eps=1e-6):
    """RMSNorm over the last axis: ``y = x / sqrt(mean(x^2) + eps) * w``.

    Rows are spread over partitions, G rows per partition per block so each load and store
    moves >= 2 KiB per partition; block b+1 is loaded while block b is computed. Per row,
    ScalarE squares and sums in one instruction (activation with the accumulator); ScalarE
    gives ``rsqrt(ss / D + eps)`` for the G rows of a block at once; VectorE applies
    ``(x * rstd) * w`` in one fused instruction.

    Dimensions:
        N: rows, multiple of 128.
        D: normalized size.

    Args:
        x: [N, D] HBM tensor, bfloat16, float16 or float32.
        w: [D] HBM tensor (any float dtype): the gain.
        eps: added to the mean square.

    Returns:
        [N, D] shared-HBM tensor of x's dtype.

    Notes:
        Statistics are in fp32; ``w`` is read once with a partition-broadcast DMA.
    """
    n, d, g = _check_rows(x, {"w": w}, "rmsnorm")
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm, name="rmsnorm_out")
    w_b = _broadcast_row(w, d, "w_bcast")
    eps_t = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="eps")
    nisa.memset(dst=eps_t, value=float(eps))

    for b, (xt,) in prefetched_row_blocks(g, "x_blk", x):
        sq = nl.ndarray((P_MAX, d), dtype=nl.float32, buffer=nl.sbuf, name="x_sq")
        ss = nl.ndarray((P_MAX, g), dtype=nl.float32, buffer=nl.sbuf, name="sum_sq")
        for j in nl.affine_range(g):
            nisa.activation(
                dst=sq,
                op=nl.square,
                data=xt[:, j, :],
                reduce_op=nl.add,
                reduce_res=ss[:, j : j + 1],
                reduce_cmd=nisa.reduce_cmd.reset_reduce,
            )
        rstd = nl.ndarray((P_MAX, g), dtype=nl.float32, buffer=nl.sbuf, name="rstd")
        nisa.activation(dst=rstd, op=nl.rsqrt, data=ss, scale=1.0 / d, bias=eps_t)
        yt = nl.ndarray((P_MAX, g, d), dtype=x.dtype, buffer=nl.sbuf, name="y_blk")
        for j in nl.affine_range(g):
            nisa.scalar_tensor_tensor(
                dst=yt[:, j, :],
                data=xt[:, j, :],
                op0=nl.multiply,
                operand0=rstd[:, j : j + 1],
                op1=nl.multiply,
                operand1=w_b,
            )
        nisa.dma_copy(dst=row_block(out, b, g), src=yt)
    return out


@jit
def layernorm(x, gamma, beta, eps=1e-5):
    """LayerNorm over the last axis: ``y = (x - mean) / sqrt(var + eps) * gamma + beta``.

    Mean and (biased) variance come from VectorE bn_stats over 512-element chunks,
    aggregated by bn_aggr; ScalarE gives ``rstd = rsqrt(var + eps)``; VectorE then applies
    ``((x - mean) * gamma) * rstd + beta`` as two fused scalar_tensor_tensor instructions.

    Dimensions:
        N: rows, multiple of 128.
        D: normalized size.

    Args:
        x: [N, D] HBM tensor, bfloat16, float16 or float32.
        gamma: [D] HBM tensor (any float dtype): the gain.
        beta: [D] HBM tensor (any float dtype): the shift.
        eps: added to the variance.

    Returns:
        [N, D] shared-HBM tensor of x's dtype.

    Notes:
        G rows per partition per block as in rmsnorm. Statistics are in fp32. VectorE makes
        three passes over each row (bn_stats and the two fused instructions), so the
        kernel is VectorE-bound; splitting the passes across ScalarE and GpSimd puts them
        on one dependency chain per row and was slower on the timing model.
    """
    n, d, g = _check_rows(x, {"gamma": gamma, "beta": beta}, "layernorm")
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm, name="layernorm_out")
    gamma_b = _broadcast_row(gamma, d, "gamma_bcast")
    beta_b = _broadcast_row(beta, d, "beta_bcast")
    eps_t = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="eps")
    nisa.memset(dst=eps_t, value=float(eps))
    n_chunks = -(-d // BN_STATS_FMAX)

    for b, (xt,) in prefetched_row_blocks(g, "x_blk", x):
        yt = nl.ndarray((P_MAX, g, d), dtype=x.dtype, buffer=nl.sbuf, name="y_blk")
        for j in nl.affine_range(g):
            stats = nl.ndarray(
                (P_MAX, n_chunks, BN_STATS_WIDTH), dtype=nl.float32, buffer=nl.sbuf, name="bn_stats"
            )
            for c in nl.affine_range(n_chunks):
                c0 = c * BN_STATS_FMAX
                nisa.bn_stats(dst=stats[:, c, :], data=xt[:, j, c0 : min(d, c0 + BN_STATS_FMAX)])
            mv = nl.ndarray((P_MAX, 2), dtype=nl.float32, buffer=nl.sbuf, name="mean_var")
            nisa.bn_aggr(dst=mv, data=stats)
            rstd = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="rstd")
            nisa.activation(dst=rstd, op=nl.rsqrt, data=mv[:, 1:2], bias=eps_t)
            centered = nl.ndarray((P_MAX, d), dtype=nl.float32, buffer=nl.sbuf, name="xc_g")
            nisa.scalar_tensor_tensor(
                dst=centered,
                data=xt[:, j, :],
                op0=nl.subtract,
                operand0=mv[:, 0:1],
                op1=nl.multiply,
                operand1=gamma_b,
            )
            nisa.scalar_tensor_tensor(
                dst=yt[:, j, :],
                data=centered,
                op0=nl.multiply,
                operand0=rstd,
                op1=nl.add,
                operand1=beta_b,
            )
        nisa.dma_copy(dst=row_block(out, b, g), src=yt)
    return out


def rmsnorm_ref(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """RMSNorm in float64."""
    x64 = np.asarray(x, dtype=np.float64)
    rms = np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps)
    return x64 / rms * np.asarray(w, dtype=np.float64)


def layernorm_ref(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5
) -> np.ndarray:
    """LayerNorm (biased variance) in float64."""
    x64 = np.asarray(x, dtype=np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = x64.var(axis=-1, keepdims=True)
    return (x64 - mean) / np.sqrt(var + eps) * np.asarray(gamma, dtype=np.float64) + np.asarray(
        beta, dtype=np.float64
    )
