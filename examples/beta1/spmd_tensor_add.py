"""Beta-1 SPMD tensor add: one program per 128 x 512 tile of a 2-D launch grid.

Run with `trnsim run examples/beta1/spmd_tensor_add.py` (neuronxcc.nki resolves to trnsim).
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

TILE_P = 128  # partitions per tile (pmax)
TILE_F = 512  # free elements per tile


@nki.jit
def tensor_add_kernel(a, b):
    """Element-wise a + b; program (i, j) of the grid handles tile (i, j).

    Dimensions:
        a, b: [grid_x * 128, grid_y * 512]
    Returns:
        c: a + b, in shared HBM (written by every program)
    """
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows = nl.program_id(0) * TILE_P + nl.arange(TILE_P)[:, None]
    cols = nl.program_id(1) * TILE_F + nl.arange(TILE_F)[None, :]
    a_tile = nl.load(a[rows, cols])
    b_tile = nl.load(b[rows, cols])
    nl.store(c[rows, cols], value=a_tile + b_tile)
    return c


def tensor_add(a, b):
    """Launch one program per tile on a 2-D grid."""
    grid_x, grid_y = a.shape[0] // TILE_P, a.shape[1] // TILE_F
    return tensor_add_kernel[grid_x, grid_y](a, b)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    a = rng.random((256, 1024)).astype(np.float16)
    b = rng.random((256, 1024)).astype(np.float16)
    out = tensor_add(a, b)
    np.testing.assert_allclose(out.astype(np.float32), (a + b).astype(np.float32), rtol=1e-3)
    # The same kernel with its first grid dimension spread over two NeuronCores.
    out2 = tensor_add_kernel[nl.nc(2), b.shape[1] // TILE_F](a, b)
    np.testing.assert_array_equal(out2, out)
    print("spmd_tensor_add: ok")
