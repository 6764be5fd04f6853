"""Beta-1 FP8 matmul: inputs cast on chip to the legacy float8_e4m3 (Neuron "cFP8", max 240),
multiplied on the Tensor Engine with fp32 accumulation in PSUM. Run with `trnsim run`.
"""

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

FP8_MAX = 240.0  # largest finite float8_e4m3 value


@nki.jit
def fp8_matmul(lhsT, rhs):
    """lhsT.T @ rhs with both operands rounded to float8_e4m3 first.

    Dimensions:
        lhsT: [K, M], rhs: [K, N]; K multiple of 128, M <= 128, N <= 512 (fp32)
    Returns:
        out: [M, N] float32
    """
    k_size, m_size = lhsT.shape
    n_size = rhs.shape[1]
    out = nl.ndarray((m_size, n_size), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((m_size, n_size), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(k_size // 128):
        a8 = nl.copy(nl.load(lhsT[k * 128 : (k + 1) * 128, :]), dtype=nl.float8_e4m3)
        b8 = nl.copy(nl.load(rhs[k * 128 : (k + 1) * 128, :]), dtype=nl.float8_e4m3)
        acc += nl.matmul(a8, b8, transpose_x=True)
    nl.store(out, value=nl.copy(acc))
    return out


def reference(lhsT, rhs):
    a = lhsT.astype(ml_dtypes.float8_e4m3).astype(np.float64)
    b = rhs.astype(ml_dtypes.float8_e4m3).astype(np.float64)
    return (a.T @ b).astype(np.float32)


if __name__ == "__main__":
    assert nl.finfo(nl.float8_e4m3).max == FP8_MAX
    rng = np.random.default_rng(0)
    lhsT = rng.uniform(-4, 4, (256, 64)).astype(np.float32)
    rhs = rng.uniform(-4, 4, (256, 512)).astype(np.float32)
    np.testing.assert_allclose(fp8_matmul(lhsT, rhs), reference(lhsT, rhs), rtol=1e-5, atol=1e-3)
    print("fp8_matmul: ok")
