"""Beta-1 RMSNorm: out = x / sqrt(mean(x^2)) * g, 128 rows per tile, masked last tile.

Written in the older pass-by-reference style (the output is a kernel argument and the kernel
returns nothing), run through nki.baremetal. Run with `trnsim run`.
"""

import math

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np


def rmsnorm_kernel(x, g, out):
    """RMSNorm of each row of x, scaled by g.

    Dimensions:
        x, out: [N, D]; g: [D]
    """
    n_rows, dim = x.shape
    i_p = nl.arange(128)[:, None]
    i_1 = nl.arange(1)[:, None]
    i_f = nl.arange(dim)[None, :]
    g_tile = nl.load(g.reshape((1, dim))[i_1, i_f])
    g_wide = g_tile.broadcast_to((128, dim))
    for t in nl.affine_range(math.ceil(n_rows / 128)):
        valid = t * 128 + i_p < n_rows
        x_tile = nl.load(x[t * 128 + i_p, i_f], mask=valid)
        mean_sq = nl.sum(nl.square(x_tile), axis=[1]) / dim
        scaled = nl.multiply(x_tile, nl.rsqrt(mean_sq))
        scaled[...] = nl.multiply(scaled, g_wide, mask=valid)
        nl.store(out[t * 128 + i_p, i_f], value=scaled, mask=valid)


def reference(x, g):
    return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True)) * g


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.random((250, 512)).astype(np.float32)
    g = rng.random(512).astype(np.float32)
    out = np.zeros_like(x)
    nki.baremetal(rmsnorm_kernel)(x, g, out)
    np.testing.assert_allclose(out, reference(x, g), rtol=1e-4, atol=1e-5)
    print("rmsnorm: ok")
