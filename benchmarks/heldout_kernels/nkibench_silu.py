"""Beta-1 SiLU, out = x / (1 + exp(-x)), after NKIBench's baseline silu kernel (AccelOpt,
NKIBench/kernels/silu_M4096_N7168_0.py): fp32 in, fp32 out, all arithmetic in fp32.

NKIBench hands the kernel the [M, N] = [4096, 7168] input reshaped to [128, 32, 7168]
(row r lives on partition r // 32), so one load of a [128, 1024] tile reads 4 KiB per
partition. The published latency (trn1.32xlarge, one NeuronCore, mean neuron-profile
`total_time` of 10 runs) is a held-out figure for benchmarks/heldout.py; nothing here or in
the simulator is tuned to it.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

LOAD_F = 1024  # free size of a load / store tile (fp32: 4 KiB per partition)
OP_F = 512  # free size of each compute instruction (two per loaded tile)


@nki.jit
def silu(x):
    """SiLU of every element, tiled as the NKIBench baseline.

    Dimensions:
        x: [128, B, N] fp32 (NKIBench: [4096, 7168] reshaped to [128, 32, 7168]);
           N a multiple of 1024
    Returns:
        out: [128, B, N] fp32

    Instruction sequence (as in the baseline):
      0. (once) a [128, 1] fp32 zero tile for the activation bias (nisa.memset, engine left to
         the toolchain)
      per (b, 1024-column block), loops nl.affine_range(B) x nl.affine_range(N // 1024):
      1. nl.load of x[:, b, block] -> [128, 1024] fp32 SBUF tile
      per 512-column half (nl.affine_range(2)):
      2. e = exp(-x) on the Scalar engine (nisa.activation, scale=-1.0, bias = zero tile)
      3. d = 1 + e (nisa.tensor_scalar add, reverse0=True, engine left to the toolchain)
      4. r = 1 / d (nisa.reciprocal, Vector engine)
      5. out[:, half] = x * r (nl.multiply, fp32) into the [128, 1024] output tile
      6. nl.store of the output tile to out[:, b, block]

    One deviation, for memory only: the baseline declares every intermediate as one SBUF
    tensor with block dimensions [B, N // 1024, (2,) 128, F] before the loops (the compiler
    allocates them by liveness; taken literally they need 0.9 MiB per partition). Here each
    tile is created inside the loop body that uses it, which trnsim frees at the end of the
    iteration: the same instructions, shapes and dependencies.
    """
    parts, n_rows, n_cols = x.shape
    out = nl.ndarray((parts, n_rows, n_cols), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(parts)[:, None]
    i_load = nl.arange(LOAD_F)[None, :]
    i_op = nl.arange(OP_F)[None, :]
    zero_bias = nl.ndarray((nl.par_dim(parts), 1), dtype=nl.float32, buffer=nl.sbuf)
    zero_bias[i_p, 0] = nisa.memset(
        shape=(parts, 1), value=np.uint16(0), dtype=nl.float32, engine=nisa.unknown_engine
    )
    for b in nl.affine_range(n_rows):
        for j in nl.affine_range(n_cols // LOAD_F):
            x_tile = nl.ndarray((nl.par_dim(parts), LOAD_F), dtype=nl.float32, buffer=nl.sbuf)
            x_tile[i_p, i_load] = nl.load(x[i_p, b, j * LOAD_F + i_load], dtype=nl.float32)
            y_tile = nl.ndarray((nl.par_dim(parts), LOAD_F), dtype=nl.float32, buffer=nl.sbuf)
            for h in nl.affine_range(LOAD_F // OP_F):
                x_half = x_tile[i_p, h * OP_F + i_op]
                exp_neg = nisa.activation(
                    op=nl.exp, data=x_half, bias=zero_bias[i_p, 0], scale=-1.0, dtype=nl.float32
                )
                denom = nisa.tensor_scalar(
                    data=exp_neg,
                    op0=nl.add,
                    operand0=np.float32(1.0),
                    reverse0=True,
                    dtype=nl.float32,
                    engine=nisa.unknown_engine,
                )
                recip = nisa.reciprocal(data=denom, dtype=nl.float32)
                y_tile[i_p, h * OP_F + i_op] = nl.multiply(x_half, recip, dtype=nl.float32)
            nl.store(out[i_p, b, j * LOAD_F + i_load], value=y_tile[i_p, i_load])
    return out


def reference(x):
    """x / (1 + exp(-x)) in float64."""
    x = np.asarray(x, dtype=np.float64)
    return x / (1.0 + np.exp(-x))


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 2, 2048)).astype(np.float32)
    np.testing.assert_allclose(silu(x), reference(x), rtol=1e-5, atol=1e-6)
    print("silu: ok")
