"""RMS normalisation of the rows of an HBM matrix with a learned weight (GA NKI).

Run on the simulator:  trnsim run examples/ga/rmsnorm.py
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

P_MAX = 128  # rows per tile (pmax)
EPS = 1e-6  # added to the mean square before the reciprocal square root


@nki.jit
def rmsnorm_kernel(x, weight):
    """out = x / sqrt(mean(x**2) + EPS) * weight, per row.

    Dimensions:
        M: rows, a multiple of P_MAX.
        N: hidden size (normalised over).

    Args:
        x: [M, N] HBM fp32 tensor.
        weight: [N] HBM fp32 tensor, broadcast to every row.

    Returns:
        out: [M, N] shared-HBM tensor.

    Notes:
        The weight is DMA'd once into all 128 partitions through a stride-0 (broadcast)
        view of its single row.
    """
    m, n = x.shape
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    w_tile = nl.ndarray((P_MAX, n), dtype=weight.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_tile, src=weight.reshape((1, n)).broadcast(0, P_MAX))
    for i in nl.affine_range(m // P_MAX):
        rows = nl.ds(i * P_MAX, P_MAX)
        tile = nl.ndarray((P_MAX, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[rows, :])
        squares = nl.ndarray((P_MAX, n), dtype=nl.float32, buffer=nl.sbuf)
        sum_sq = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=squares,
            op=nl.square,
            data=tile,
            reduce_op=nl.add,
            reduce_res=sum_sq,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        mean_sq = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=mean_sq, data=sum_sq, op0=nl.multiply, operand0=1.0 / n, op1=nl.add, operand1=EPS
        )
        inv_rms = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv_rms, op=nl.rsqrt, data=mean_sq)
        result = nl.ndarray((P_MAX, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(
            dst=result,
            data=tile,
            op0=nl.multiply,
            operand0=inv_rms,
            op1=nl.multiply,
            operand1=w_tile,
        )
        nisa.dma_copy(dst=out[rows, :], src=result)
    return out


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 384)).astype(np.float32)
    weight = rng.uniform(0.5, 1.5, 384).astype(np.float32)
    out = nki.simulate(rmsnorm_kernel)(x, weight)
    x64 = x.astype(np.float64)
    expected = x64 / np.sqrt((x64**2).mean(axis=1, keepdims=True) + EPS) * weight
    np.testing.assert_allclose(out, expected, rtol=2e-3, atol=2e-4)
    print("rmsnorm: OK")


if __name__ == "__main__":
    main()
