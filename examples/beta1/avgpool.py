"""Beta-1 2-D average pooling with nl.mgrid: one 5-D access pattern splits each spatial axis
into (window index, offset in window), and nl.sum reduces the two offset axes.
Run with `trnsim run`.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
from neuronxcc.nki.typing import tensor


@nki.jit
def avgpool2d(x, pool):
    """Mean over non-overlapping pool x pool windows.

    Dimensions:
        x: [C, H, W], C <= 128 (channels on partitions), H and W multiples of pool
    Returns:
        out: [C, H // pool, W // pool]
    """
    channels, height, width = x.shape
    h_out, w_out = height // pool, width // pool
    out = nl.ndarray((channels, h_out, w_out), dtype=x.dtype, buffer=nl.shared_hbm)
    i_c, i_h, i_dh, i_w, i_dw = nl.mgrid[0:channels, 0:h_out, 0:pool, 0:w_out, 0:pool]
    tile: tensor[channels, height, width] = nl.load(x)
    windows = tile[i_c, pool * i_h + i_dh, pool * i_w + i_dw]
    pooled: tensor[channels, h_out, w_out] = nl.sum(windows, axis=[2, 4]) / (pool * pool)
    nl.store(out, value=pooled)
    return out


def reference(x, pool):
    c, h, w = x.shape
    return x.astype(np.float32).reshape(c, h // pool, pool, w // pool, pool).mean(axis=(2, 4))


if __name__ == "__main__":
    x = np.arange(2 * 6 * 6, dtype=np.float16).reshape(2, 6, 6)
    np.testing.assert_allclose(avgpool2d(x, 2).astype(np.float32), reference(x, 2), rtol=1e-3)
    y = np.random.default_rng(0).random((64, 16, 24)).astype(np.float32)
    np.testing.assert_allclose(avgpool2d(y, 4), reference(y, 4), rtol=1e-5)
    print("avgpool: ok")
