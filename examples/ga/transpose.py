"""2-D transpose of an HBM matrix in 128 x 128 blocks on the Tensor Engine (GA NKI).

Run on the simulator:  trnsim run examples/ga/transpose.py
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

BLOCK = 128  # block edge: the partition count (pmax) and the stationary limit


@nki.jit
def transpose_kernel(x):
    """out = x.T, one BLOCK x BLOCK block at a time through PSUM.

    Dimensions:
        M, N: matrix sizes, multiples of BLOCK.

    Args:
        x: [M, N] HBM tensor.

    Returns:
        out: [N, M] shared-HBM tensor, out = x.T.
    """
    m, n = x.shape
    out = nl.ndarray((n, m), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(m // BLOCK):
        for j in nl.affine_range(n // BLOCK):
            tile = nl.ndarray((BLOCK, BLOCK), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=x[nl.ds(i * BLOCK, BLOCK), nl.ds(j * BLOCK, BLOCK)])
            tile_t = nl.ndarray((BLOCK, BLOCK), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=tile_t, data=tile)
            staged = nl.ndarray((BLOCK, BLOCK), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=staged, src=tile_t)
            nisa.dma_copy(dst=out[nl.ds(j * BLOCK, BLOCK), nl.ds(i * BLOCK, BLOCK)], src=staged)
    return out


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 384)).astype(np.float32)
    out = nki.simulate(transpose_kernel)(x)
    np.testing.assert_array_equal(out, x.T)
    print("transpose: OK")


if __name__ == "__main__":
    main()
