"""Beta-1 matmul, residual add, then RMSNorm with a gain, fp32 throughout, after the algorithm of
NKIBench's baseline `matmul_add_rmsnorm_M4096_N2048_K2048_0.py` (zhang677/AccelOpt):
y = x @ w + z, out = y / sqrt(mean(y^2) + eps) * g, normalised over the N columns of each row.

One 128-row tile of x at a time, loaded whole ([128, K]); per 512-column chunk of N, the K/128
tiles of w ([128, 512], loaded inside the K loop, as the baseline does: w is loaded again for
every row tile) are multiplied into one PSUM tile with nl.matmul (which transposes its
[128 rows, 128 K] slice of x on the PE array), and the chunk is copied into a [128, N] SBUF
strip. Then z's [128, N] tile is loaded and added, the strip squared and summed along N, scaled
by 1/N, eps added, rsqrt taken, the row scale and the gain (g loaded once, broadcast over the
partitions) applied, and the strip stored. Used by the calibration set (benchmarks/heldout.py,
benchmarks/calibrate.py); timed with values=False on trn1 at M=4096, N=2048, K=2048. Run with
`trnsim run`.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

P = 128  # partitions: rows per row tile and K rows per w tile
N_CHUNK = 512  # columns of w per matmul: one fp32 PSUM bank (gemm_moving_fmax)


@nki.jit
def matmul_add_rmsnorm(x, w, z, g, eps=1e-5):
    """(x @ w + z) normalised by its row RMS over N, times the gain g, in fp32.

    Dimensions:
        x: [M, K]; w: [K, N]; z: [M, N]; g: [N]; fp32; M and K multiples of 128, N of 512
    Args:
        eps: added to the mean square before the rsqrt (a Python float; the baseline takes
            it as its third argument)
    Returns:
        out: [M, N], fp32
    """
    m, k = x.shape
    n = w.shape[1]
    assert w.shape[0] == k, f"w {w.shape} must have K={k} rows"
    assert z.shape == (m, n), f"z {z.shape} must be [M, N] = {(m, n)}"
    assert g.shape == (n,), f"g {g.shape} must have N={n} entries"
    assert m % P == 0, f"M {m} is not a multiple of {P}"
    assert k % P == 0, f"K {k} is not a multiple of {P}"
    assert n % N_CHUNK == 0, f"N {n} is not a multiple of {N_CHUNK}"
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    rows = nl.arange(P)[:, None]
    cols_k = nl.arange(k)[None, :]
    cols_n = nl.arange(n)[None, :]
    chunk = nl.arange(N_CHUNK)[None, :]
    gain = nl.load(g.reshape((1, n))[nl.arange(1)[:, None], cols_n])  # once, [1, N]

    for t in nl.affine_range(m // P):
        strip = nl.ndarray((P, n), dtype=x.dtype, buffer=nl.sbuf)
        x_rows = nl.load(x[t * P + rows, cols_k])
        for c in nl.affine_range(n // N_CHUNK):
            acc = nl.zeros((P, N_CHUNK), nl.float32, buffer=nl.psum)
            for kt in nl.affine_range(k // P):
                w_tile = nl.load(w[kt * P : (kt + 1) * P, c * N_CHUNK : (c + 1) * N_CHUNK])
                acc += nl.matmul(x_rows[:, kt * P : (kt + 1) * P], w_tile)
            strip[rows, c * N_CHUNK + chunk] = nl.copy(acc, dtype=x.dtype)
        y = nl.add(strip, nl.load(z[t * P + rows, cols_n]))
        mean_sq = nl.add(nl.sum(nl.square(y), axis=[1]) / n, eps)
        normed = nl.multiply(y, nl.rsqrt(mean_sq))
        normed[...] = nl.multiply(normed, gain.broadcast_to((P, n)))
        nl.store(out[t * P + rows, cols_n], value=normed)
    return out


def reference(x, w, z, g, eps=1e-5):
    """float64 numpy of the same formula."""
    y = x.astype(np.float64) @ w + z
    return y / np.sqrt(np.mean(y * y, axis=1, keepdims=True) + eps) * g


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x, w = (rng.normal(size=s).astype(np.float32) for s in ((256, 256), (256, 1024)))
    z, g = (rng.normal(size=s).astype(np.float32) for s in ((256, 1024), (1024,)))
    got = matmul_add_rmsnorm(x, w, z, g)
    np.testing.assert_allclose(got, reference(x, w, z, g), rtol=1e-3, atol=1e-3)
    print("matmul_add_rmsnorm: ok")
