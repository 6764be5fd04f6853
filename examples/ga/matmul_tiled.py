"""Tiled matrix multiply with PSUM accumulation over the contraction dimension (GA NKI).

Run on the simulator:  trnsim run examples/ga/matmul_tiled.py
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

TILE_K = 128  # contraction rows per matmul: the partition dimension (pmax)
TILE_M = 128  # stationary free size (gemm_stationary_fmax)
TILE_N = 512  # moving free size: one 2 KiB PSUM bank of fp32 (psum_bank_fmax)


@nki.jit
def matmul_tiled_kernel(lhs_t, rhs):
    """C = lhs_t.T @ rhs, accumulating the K tiles of each output tile in one PSUM bank.

    Dimensions:
        K: contraction size, a multiple of TILE_K.
        M: output rows, a multiple of TILE_M.
        N: output columns, a multiple of TILE_N.

    Args:
        lhs_t: [K, M] HBM tensor, the left operand already transposed (K on partitions).
        rhs: [K, N] HBM tensor.

    Returns:
        result: [M, N] shared-HBM fp32 tensor.

    Pseudocode:
        for m, n: psum = sum_k lhs_t[k, m].T @ rhs[k, n]; result[m, n] = psum
    """
    k_size, m_size = lhs_t.shape
    _, n_size = rhs.shape
    result = nl.ndarray((m_size, n_size), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // TILE_M):
        for n in nl.affine_range(n_size // TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_size // TILE_K):
                lhs_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhs_t.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(
                    dst=lhs_tile, src=lhs_t[nl.ds(k * TILE_K, TILE_K), nl.ds(m * TILE_M, TILE_M)]
                )
                nisa.dma_copy(
                    dst=rhs_tile, src=rhs[nl.ds(k * TILE_K, TILE_K), nl.ds(n * TILE_N, TILE_N)]
                )
                # The first matmul into a PSUM location overwrites it, later ones accumulate.
                nisa.nc_matmul(dst=acc, stationary=lhs_tile, moving=rhs_tile)
            out_tile = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=acc)
            nisa.dma_copy(
                dst=result[nl.ds(m * TILE_M, TILE_M), nl.ds(n * TILE_N, TILE_N)], src=out_tile
            )
    return result


def main():
    rng = np.random.default_rng(0)
    k, m, n = 512, 256, 1024
    lhs_t = rng.standard_normal((k, m)).astype(np.float32)
    rhs = rng.standard_normal((k, n)).astype(np.float32)
    result = nki.simulate(matmul_tiled_kernel)(lhs_t, rhs)
    expected = lhs_t.astype(np.float64).T @ rhs.astype(np.float64)
    np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-3)
    print("matmul_tiled: OK")


if __name__ == "__main__":
    main()
