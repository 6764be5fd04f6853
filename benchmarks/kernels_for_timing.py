"""Kernels the timing benchmarks run (not part of the test suite)."""

from __future__ import annotations

import trnsim.compat.neuronxcc.nki as b1nki
import trnsim.compat.neuronxcc.nki.language as b1nl
import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl

TILE_K, TILE_M, TILE_N = 128, 128, 512  # contraction (pmax), stationary free, moving free


@nki.jit
def blocked_matmul(a_t, b):
    """out[M, N] = a_t.T @ b. Dimensions: a_t [K, M], b [K, N], K, M multiples of 128, N of 512.

    A^T column blocks (K x 128) stay in SBUF for a whole row of output tiles; B tiles stream.
    """
    k_dim, m_dim = a_t.shape
    _, n_dim = b.shape
    kt = k_dim // TILE_K
    out = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_dim // TILE_M):
        a_blk = nl.ndarray((TILE_K, kt * TILE_M), dtype=a_t.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(kt):
            nisa.dma_copy(
                dst=a_blk[:, k * TILE_M : (k + 1) * TILE_M],
                src=a_t[k * TILE_K : (k + 1) * TILE_K, m * TILE_M : (m + 1) * TILE_M],
            )
        for n in nl.affine_range(n_dim // TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(kt):
                bt = nl.ndarray((TILE_K, TILE_N), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(
                    dst=bt, src=b[k * TILE_K : (k + 1) * TILE_K, n * TILE_N : (n + 1) * TILE_N]
                )
                nisa.nc_matmul(
                    dst=acc, stationary=a_blk[:, k * TILE_M : (k + 1) * TILE_M], moving=bt
                )
            res = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(
                dst=out[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N], src=res
            )
    return out


@nki.jit
def elementwise_chain(x):
    """y = exp(x) * x + x on [128, F] tiles of a [R, F] tensor: 3 compute ops per 2 DMAs."""
    rows, free = x.shape
    y = nl.ndarray((rows, free), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range(rows // 128):
        t = nl.ndarray((128, free), dtype=x.dtype, buffer=nl.sbuf)
        e = nl.ndarray((128, free), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r * 128 : (r + 1) * 128, :])
        nisa.activation(dst=e, op=nl.exp, data=t)
        nisa.tensor_tensor(dst=e, data1=e, data2=t, op=nl.multiply)
        nisa.tensor_tensor(dst=e, data1=e, data2=t, op=nl.add)
        nisa.dma_copy(dst=y[r * 128 : (r + 1) * 128, :], src=e)
    return y


@nki.jit
def column_chain(x):
    """y = exp(x) on column blocks [128, 512] of a [128, F] tensor (strided HBM rows: the
    dependency tracker's pitched regions)."""
    rows, free = x.shape
    y = nl.ndarray((rows, free), dtype=x.dtype, buffer=nl.shared_hbm)
    for c in nl.affine_range(free // 512):
        t = nl.ndarray((rows, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, c * 512 : (c + 1) * 512])
        nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.dma_copy(dst=y[:, c * 512 : (c + 1) * 512], src=t)
    return y


@nki.jit
def compute_chain(x, n: int = 1000):
    """n rounds of matmul -> activation -> tensor_tensor on resident tiles: no DMA at all.

    x only sets the dtype; the tiles' values are never initialised (run with values=False)."""
    a = nl.ndarray((TILE_K, TILE_M), dtype=x.dtype, buffer=nl.sbuf)
    b = nl.ndarray((TILE_K, TILE_N), dtype=x.dtype, buffer=nl.sbuf)
    c = nl.ndarray((TILE_K, TILE_N), dtype=x.dtype, buffer=nl.sbuf)
    for _ in nl.affine_range(n):
        acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=a, moving=b)
        nisa.activation(dst=c, op=nl.exp, data=acc)
        nisa.tensor_tensor(dst=b, data1=c, data2=b, op=nl.add)
    return x


@nki.jit
def tile_roundtrip(x):
    """x -> SBUF -> a new HBM tensor: two DMAs, for what a launch costs beside its work."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def hbm_stream(x, y):
    """Copy x [R, F] into y through SBUF in [128, F] tiles: two transfers per tile.

    Writes its argument instead of returning a tensor, so a timing-only run never has to
    hand a huge result back to the host."""
    rows, free = x.shape
    for r in nl.affine_range(rows // 128):
        t = nl.ndarray((128, free), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r * 128 : (r + 1) * 128, :])
        nisa.dma_copy(dst=y[r * 128 : (r + 1) * 128, :], src=t)


@b1nki.jit
def blocked_matmul_b1(a_t, b):
    """The same product in the Beta-1 API (value-returning nl.load / nl.matmul, PSUM `+=`),
    tiled 128 (K) x 128 (M) x 512 (N); the output is fp32 in HBM."""
    k_dim, m_dim = a_t.shape
    n_dim = b.shape[1]
    out = b1nl.ndarray((m_dim, n_dim), dtype=b1nl.float32, buffer=b1nl.shared_hbm)
    for m in b1nl.affine_range(m_dim // TILE_M):
        for n in b1nl.affine_range(n_dim // TILE_N):
            acc = b1nl.zeros((TILE_M, TILE_N), b1nl.float32, buffer=b1nl.psum)
            for k in b1nl.affine_range(k_dim // TILE_K):
                a_tile = b1nl.load(
                    a_t[k * TILE_K : (k + 1) * TILE_K, m * TILE_M : (m + 1) * TILE_M]
                )
                b_tile = b1nl.load(b[k * TILE_K : (k + 1) * TILE_K, n * TILE_N : (n + 1) * TILE_N])
                acc += b1nl.matmul(a_tile, b_tile, transpose_x=True)
            b1nl.store(
                out[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N],
                value=b1nl.copy(acc, dtype=b1nl.float32),
            )
    return out


# The scheduler benchmarks' workloads (sched_compare.py, profile_scheduler.py): name ->
# (kernel, argument shapes) at the full size; `quick` halves the matmuls and quarters the
# column blocks' base width.
def workload_args(name: str, quick: bool = False, columns: int = 1) -> tuple:
    """(kernel, args) of workload `name`: matmul, elementwise, b1, compute, columns (columns:
    the column-block count multiplier). Arguments are broadcast zeros (timing only)."""
    import ml_dtypes
    import numpy as np

    def zeros(shape):
        return np.broadcast_to(np.zeros((), ml_dtypes.bfloat16), shape)

    n = 1024 if quick else 2048
    base = 64 if quick else 256
    a = zeros((n, n))
    return {
        "matmul": (blocked_matmul, (a, a)),
        "elementwise": (elementwise_chain, (zeros((128 * 64, 2048)),)),
        "b1": (blocked_matmul_b1, (a, a)),
        "compute": (compute_chain, (zeros((128, 128)),)),
        "columns": (column_chain, (zeros((128, 512 * base * columns)),)),
    }[name]


def traced_workload(name: str, quick: bool = False, columns: int = 1):
    """The timing-only launch (program record) of workload `name` on trn2."""
    from trnsim.nki.jit import _as_kernel

    kernel, args = workload_args(name, quick, columns)
    return _as_kernel(kernel).launch(args, {}, chip="trn2", values=False)
