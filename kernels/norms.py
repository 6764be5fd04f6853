"""Row normalizations over [N, D]: RMSNorm and LayerNorm, with their references.

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
BN_STATS_FMAX = 512  # elements per bn_stats instruction (bn_stats_fmax)
BN_STATS_WIDTH = 6  # bn_stats output per partition: (count, mean, var*count) x (even, odd)
SBUF_SHARE = 0.5  # share of usable SBUF for one row block and its result (two in flight)
DTYPES = ("bfloat16", "float16", "float32")


def _check_rows(x, vectors: dict, what: str) -> tuple[int, int, int]:
    """(N, D, G): shape checks, and G rows per partition per block (for >= 2 KiB DMAs)."""
    if len(x.shape) != 2:
        fail(f"{what}: x must be 2-D [N, D], got shape {list(x.shape)}")
    n, d = x.shape
    if n <= 0 or n % P_MAX:
        fail(f"{what}: N={n} rows is not a positive multiple of {P_MAX}; pad the rows")
    if x.dtype not in DTYPES:
        fail(f"{what}: x dtype {x.dtype} is not one of {', '.join(DTYPES)}")
    for name, t in vectors.items():
        if tuple(t.shape) != (d,):
            fail(f"{what}: {name} must have shape [D]=[{d}], got {list(t.shape)}")
    # Per block: x, the result and fp32 scratch, two blocks in flight.
    per_row = d * (2 * x.dtype.itemsize + 4)
    budget = nl.tile_size.total_available_sbuf_size * SBUF_SHARE / 2
    if per_row > budget:
        fail(
            f"{what}: D={d} needs {per_row} bytes per partition per row; at most {int(budget)} fit"
        )
    g = max(1, -(-MIN_DMA_BYTES // (d * x.dtype.itemsize)))
    while g > 1 and ((n // P_MAX) % g or g * per_row > budget):
        g -= 1
    return n, d, g


def _rows(x, b: int, g: int, d: int):
    """Block b of G*128 rows as [128, G, D]: row b*G*128 + p*G + j at partition p, slot j.

    Each partition then reads one contiguous run of G*D elements.
    """
    r0 = b * g * P_MAX
    return x[r0 : r0 + g * P_MAX, :].reshape((P_MAX, g, d))


def _broadcast_row(vec, d: int, name: str):
    """A [D] HBM vector replicated on every partition: one partition-broadcast DMA."""
    t = nl.ndarray((P_MAX, d), dtype=vec.dtype, buffer=nl.sbuf, name=name)
    nisa.dma_copy(dst=t, src=vec.reshape((1, d)).broadcast(0, P_MAX))
    return t


@jit
def rmsnorm(x, w, eps=1e-6):
    """RMSNorm over the last axis: ``y = x / sqrt(mean(x^2) + eps) * w``.

    Rows are spread over partitions, G rows per partition per block so each load and store
    moves >= 2 KiB per partition. Per row: ScalarE squares and sums in one instruction
    (activation with the accumulator), ScalarE gives ``rsqrt(ss / D + eps)`` for the G rows
    of a block at once, and VectorE applies ``(x * rstd) * w`` in one fused instruction.

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

    for b in nl.affine_range(n // (g * P_MAX)):
        xt = nl.ndarray((P_MAX, g, d), dtype=x.dtype, buffer=nl.sbuf, name="x_blk")
        nisa.dma_copy(dst=xt, src=_rows(x, b, g, d))
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
        nisa.dma_copy(dst=_rows(out, b, g, d), src=yt)
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
        G rows per partition per block as in rmsnorm. Statistics are in fp32.
    """
    n, d, g = _check_rows(x, {"gamma": gamma, "beta": beta}, "layernorm")
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm, name="layernorm_out")
    gamma_b = _broadcast_row(gamma, d, "gamma_bcast")
    beta_b = _broadcast_row(beta, d, "beta_bcast")
    eps_t = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="eps")
    nisa.memset(dst=eps_t, value=float(eps))
    n_chunks = -(-d // BN_STATS_FMAX)

    for b in nl.affine_range(n // (g * P_MAX)):
        xt = nl.ndarray((P_MAX, g, d), dtype=x.dtype, buffer=nl.sbuf, name="x_blk")
        nisa.dma_copy(dst=xt, src=_rows(x, b, g, d))
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
        nisa.dma_copy(dst=_rows(out, b, g, d), src=yt)
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
