"""Layer normalisation with bn_stats / bn_aggr statistics (GA NKI).

Run on the simulator:  trnsim run examples/ga/layernorm.py
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

P_MAX = 128  # rows per tile (pmax)
EPS = 1e-5  # added to the variance


@nki.jit
def layernorm_kernel(x, gamma, beta):
    """out = (x - mean) / sqrt(var + EPS) * gamma + beta, per row.

    Dimensions:
        M: rows, a multiple of P_MAX.
        N: hidden size, normalised over; at most nl.tile_size.bn_stats_fmax per bn_stats,
           so the row is fed in chunks of that size.

    Args:
        x: [M, N] HBM fp32 tensor.
        gamma: [N] HBM fp32 scale.
        beta: [N] HBM fp32 shift.

    Returns:
        out: [M, N] shared-HBM tensor.
    """
    m, n = x.shape
    fmax = nl.tile_size.bn_stats_fmax
    chunks = (n + fmax - 1) // fmax
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    g_tile = nl.ndarray((P_MAX, n), dtype=gamma.dtype, buffer=nl.sbuf)
    b_tile = nl.ndarray((P_MAX, n), dtype=beta.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_tile, src=gamma.reshape((1, n)).broadcast(0, P_MAX))
    nisa.dma_copy(dst=b_tile, src=beta.reshape((1, n)).broadcast(0, P_MAX))
    for i in nl.affine_range(m // P_MAX):
        rows = nl.ds(i * P_MAX, P_MAX)
        tile = nl.ndarray((P_MAX, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[rows, :])
        stats = nl.ndarray((P_MAX, 6 * chunks), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.static_range(chunks):
            width = min(fmax, n - c * fmax)
            nisa.bn_stats(dst=stats[:, nl.ds(6 * c, 6)], data=tile[:, nl.ds(c * fmax, width)])
        mean_var = nl.ndarray((P_MAX, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mean_var, data=stats)
        var_eps = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=var_eps, data=mean_var[:, 1:2], op0=nl.add, operand0=EPS)
        rstd = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=var_eps)
        normed = nl.ndarray((P_MAX, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=normed,
            data=tile,
            op0=nl.subtract,
            operand0=mean_var[:, 0:1],
            op1=nl.multiply,
            operand1=rstd,
        )
        result = nl.ndarray((P_MAX, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=result, data1=normed, data2=g_tile, op=nl.multiply)
        nisa.tensor_tensor(dst=result, data1=result, data2=b_tile, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=result)
    return out


def main():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((256, 768)) * 3 + 1).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 768).astype(np.float32)
    beta = rng.standard_normal(768).astype(np.float32)
    out = nki.simulate(layernorm_kernel)(x, gamma, beta)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = x64.var(axis=1, keepdims=True)
    expected = (x64 - mean) / np.sqrt(var + EPS) * gamma + beta
    np.testing.assert_allclose(out, expected, rtol=2e-3, atol=2e-3)
    print("layernorm: OK")


if __name__ == "__main__":
    main()
