"""Row softmax of an HBM matrix, 128 rows per tile (GA NKI).

Run on the simulator:  trnsim run examples/ga/softmax.py
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

P_MAX = 128  # rows per tile (pmax)


@nki.jit
def softmax_kernel(x):
    """softmax(x) along the last axis.

    Dimensions:
        M: rows, a multiple of P_MAX.
        N: columns (reduced over).

    Args:
        x: [M, N] HBM fp32 tensor.

    Returns:
        out: [M, N] shared-HBM tensor, exp(x - max) / sum(exp(x - max)) per row.

    Pseudocode:
        neg_max = -max(x)                      # VectorE tensor_reduce(negate=True)
        e, total = exp(x + neg_max), sum(e)    # ScalarE activation with the row sum
        out = e * (1 / total)                  # VectorE reciprocal + tensor_scalar
    """
    m, n = x.shape
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(m // P_MAX):
        rows = nl.ds(i * P_MAX, P_MAX)
        tile = nl.ndarray((P_MAX, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[rows, :])
        neg_max = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(
            dst=neg_max, op=nl.maximum, data=tile, axis=(1,), negate=True, keepdims=True
        )
        exp_tile = nl.ndarray((P_MAX, n), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=exp_tile,
            op=nl.exp,
            data=tile,
            bias=neg_max,
            reduce_op=nl.add,
            reduce_res=total,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        inv = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        result = nl.ndarray((P_MAX, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=result, data=exp_tile, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[rows, :], src=result)
    return out


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512)).astype(np.float32) * 4
    out = nki.simulate(softmax_kernel)(x)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-6)
    print("softmax: OK")


if __name__ == "__main__":
    main()
