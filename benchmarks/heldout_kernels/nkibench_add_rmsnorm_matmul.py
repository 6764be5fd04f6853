"""Beta-1 residual add, RMSNorm with a gain, then a matmul, fp32 throughout, after the algorithm
of NKIBench's baseline `add_rmsnorm_matmul_M4096_N2048_K1024_0.py` (zhang677/AccelOpt):
out = ((x + z) / sqrt(mean((x + z)^2) + eps) * g) @ w.

One 128-row tile of x and z at a time: both loaded whole ([128, K]), added, squared, summed
along K, scaled by 1/K, eps added, rsqrt, the row scale and the gain (broadcast over the
partitions) applied; then per 512-column chunk of N, 8 K tiles of w ([128, 512], loaded
inside the K loop, as the baseline does: w is loaded again for every row tile) multiplied
into one PSUM tile with nl.matmul, copied to SBUF and stored. nl.matmul transposes its
[128 rows, 128 K] stationary slice on the PE array, as the compiler does for the baseline's
nl.matmul. Used by the calibration set (benchmarks/heldout.py, benchmarks/calibrate.py);
timed with values=False on trn1 at M=4096, N=2048, K=1024. Run with `trnsim run`.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

P = 128  # partitions: rows per row tile and K rows per w tile
N_CHUNK = 512  # columns of w per matmul: one fp32 PSUM bank (gemm_moving_fmax)


@nki.jit
def add_rmsnorm_matmul(x, w, z, g, eps=1e-5):
    """((x + z) normalised by its row RMS, times the gain g) @ w, in fp32.

    Dimensions:
        x, z: [M, K]; w: [K, N]; g: [K]; fp32; M a multiple of 128, K of 128, N of 512
    Args:
        eps: added to the mean square before the rsqrt (a Python float; the baseline takes
            it as its third argument)
    Returns:
        out: [M, N], fp32
    """
    m, k = x.shape
    n = w.shape[1]
    assert z.shape == (m, k), f"z {z.shape} must match x {x.shape}"
    assert g.shape == (k,), f"g {g.shape} must have K={k} entries"
    assert m % P == 0, f"M {m} is not a multiple of {P}"
    assert k % P == 0, f"K {k} is not a multiple of {P}"
    assert n % N_CHUNK == 0, f"N {n} is not a multiple of {N_CHUNK}"
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    rows = nl.arange(P)[:, None]
    cols_k = nl.arange(k)[None, :]
    cols_n = nl.arange(N_CHUNK)[None, :]
    gain = nl.load(g.reshape((1, k))[nl.arange(1)[:, None], cols_k])  # once, [1, K]

    for t in nl.affine_range(m // P):
        resid = nl.add(nl.load(x[t * P + rows, cols_k]), nl.load(z[t * P + rows, cols_k]))
        mean_sq = nl.add(nl.sum(nl.square(resid), axis=[1]) / k, eps)
        normed = nl.multiply(resid, nl.rsqrt(mean_sq))
        normed[...] = nl.multiply(normed, gain.broadcast_to((P, k)))
        for c in nl.affine_range(n // N_CHUNK):
            acc = nl.zeros((P, N_CHUNK), nl.float32, buffer=nl.psum)
            for kt in nl.affine_range(k // P):
                w_tile = nl.load(w[kt * P : (kt + 1) * P, c * N_CHUNK : (c + 1) * N_CHUNK])
                acc += nl.matmul(normed[:, kt * P : (kt + 1) * P], w_tile)
            nl.store(out[t * P + rows, c * N_CHUNK + cols_n], value=nl.copy(acc, dtype=out.dtype))
    return out


def reference(x, w, z, g, eps=1e-5):
    """float64 numpy of the same formula."""
    y = x.astype(np.float64) + z
    y = y / np.sqrt(np.mean(y * y, axis=1, keepdims=True) + eps) * g
    return y @ w.astype(np.float64)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    args = [rng.normal(size=s).astype(np.float32) for s in ((256, 256), (256, 512))]
    zg = [rng.normal(size=s).astype(np.float32) for s in ((256, 256), (256,))]
    got = add_rmsnorm_matmul(*args, *zg)
    np.testing.assert_allclose(got, reference(*args, *zg), rtol=1e-3, atol=1e-3)
    print("add_rmsnorm_matmul: ok")
