"""2 x 2 average pooling with an explicit access pattern (.ap) over an SBUF tile (GA NKI).

Run on the simulator:  trnsim run examples/ga/avgpool.py
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

POOL = 2  # pooling window and stride


@nki.jit
def avgpool_kernel(x):
    """out[c, i, j] = mean(x[c, 2i:2i+2, 2j:2j+2]).

    Dimensions:
        C: channels, at most 128 (one per partition).
        H, W: image size, multiples of POOL.

    Args:
        x: [C, H, W] HBM fp32 tensor.

    Returns:
        out: [C, H/POOL, W/POOL] shared-HBM tensor.

    Notes:
        The window view [C, H/2, W/2, 2, 2] is one access pattern over the tile's storage:
        [[H*W, C], [2W, H/2], [2, W/2], [W, 2], [1, 2]] (steps and counts in elements);
        one tensor_reduce over its last two axes sums every window.
    """
    c, h, w = x.shape
    ho, wo = h // POOL, w // POOL
    out = nl.ndarray((c, ho, wo), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray((c, h, w), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    windows = tile.ap([[h * w, c], [POOL * w, ho], [POOL, wo], [w, POOL], [1, POOL]], offset=0)
    sums = nl.ndarray((c, ho, wo), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=sums, op=nl.add, data=windows, axis=(3, 4))
    result = nl.ndarray((c, ho, wo), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=result, data=sums, op0=nl.multiply, operand0=1.0 / (POOL * POOL))
    nisa.dma_copy(dst=out, src=result)
    return out


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 16, 24)).astype(np.float32)
    out = nki.simulate(avgpool_kernel)(x)
    expected = x.reshape(64, 8, 2, 12, 2).mean(axis=(2, 4))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    print("avgpool: OK")


if __name__ == "__main__":
    main()
