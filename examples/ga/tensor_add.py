"""Element-wise addition of two HBM tensors, one 128-row tile at a time (GA NKI).

Run on the simulator:  trnsim run examples/ga/tensor_add.py
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

P_MAX = 128  # partitions per tile (pmax)


@nki.jit
def tensor_add_kernel(a, b):
    """Element-wise sum of two tensors.

    Dimensions:
        M: rows, a multiple of P_MAX (tiled onto the 128 partitions).
        N: columns (the free dimension of each tile).

    Args:
        a: [M, N] HBM tensor.
        b: [M, N] HBM tensor, same dtype as a.

    Returns:
        c: [M, N] shared-HBM tensor, c = a + b.
    """
    m, n = a.shape
    c = nl.ndarray((m, n), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(m // P_MAX):
        rows = nl.ds(i * P_MAX, P_MAX)
        a_tile = nl.ndarray((P_MAX, n), dtype=a.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((P_MAX, n), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a[rows, :])
        nisa.dma_copy(dst=b_tile, src=b[rows, :])
        c_tile = nl.ndarray((P_MAX, n), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)
        nisa.dma_copy(dst=c[rows, :], src=c_tile)
    return c


def main():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 512)).astype(np.float32)
    b = rng.standard_normal((256, 512)).astype(np.float32)
    c = nki.simulate(tensor_add_kernel)(a, b)
    np.testing.assert_allclose(c, a + b, rtol=1e-6, atol=1e-6)
    print("tensor_add: OK")


if __name__ == "__main__":
    main()
