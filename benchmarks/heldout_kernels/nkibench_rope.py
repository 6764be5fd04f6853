"""Beta-1 rotary position embedding (one frequency table, halves layout), fp32, after the
algorithm of NKIBench's baseline `rope_single_freq_apply_B1_H64_N4096_D128_0.py`
(zhang677/AccelOpt).

The head dimension lies on partitions: x is [d_head, S] with S = batch * heads * seqlen
positions on the free axis, and the cos / sin tables are [d_head / 2, S]. The kernel walks S in
512-column tiles with a plain Python loop (sequential), loading one x tile and one tile of each
table, and computes both output halves on the Vector Engine with six elementwise instructions
of [d_head / 2, 512]. Used by the held-out check (benchmarks/heldout.py); timed with
values=False on trn1 at d_head=128, S=1*64*4096. Run with `trnsim run`.

The baseline also allocates three [d_head, 512] SBUF tiles per iteration that it never uses
(its names for the halves are rebound to fresh results); they issue no instruction and are
left out here.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

TILE_S = 512  # positions per tile (free size of every instruction)


@nki.jit
def rope(x, cos, sin):
    """out[:h] = x[:h] * cos - x[h:] * sin, out[h:] = x[h:] * cos + x[:h] * sin, h = d_head/2.

    Per 512-column tile, as in the baseline:
      1. three loads: x [d_head, 512], cos [h, 512], sin [h, 512] (each table at
         partitions 0..h-1)
      2. the upper half of x (partitions h..d_head-1) copied to partitions 0..h-1 (nl.copy),
         so both inputs of every tensor_tensor start at the same partition; the lower half is
         used in place
      3. four products (nisa.tensor_tensor multiply): lower*cos, upper*cos, lower*sin,
         upper*sin, each into its own tile
      4. lower*cos - upper*sin into partitions 0..h-1 and upper*cos + lower*sin into
         partitions h..d_head-1 of the output tile (nisa.tensor_tensor subtract / add)
      5. one store of the [d_head, 512] output tile

    Dimensions:
        x: [d_head, S], cos, sin: [d_head / 2, S]; d_head <= 128 and even, S a multiple of
        512, one dtype
    Returns:
        out: [d_head, S], the dtype of x
    """
    d_head, s = x.shape
    half = d_head // 2
    assert d_head <= 128, f"d_head {d_head} > 128 partitions"
    assert d_head % 2 == 0, f"d_head {d_head} is odd"
    assert tuple(cos.shape) == tuple(sin.shape) == (half, s), "cos / sin must be [d_head/2, S]"
    assert s % TILE_S == 0, f"S {s} is not a multiple of {TILE_S}"
    out = nl.ndarray((d_head, s), dtype=x.dtype, buffer=nl.shared_hbm)

    i_d = nl.arange(d_head)[:, None]
    i_lo = nl.arange(half)[:, None]
    i_hi = i_lo + half
    i_s = nl.arange(TILE_S)[None, :]
    for s0 in range(0, s, TILE_S):  # a Python loop, as in the baseline (sequential)
        # step 1
        x_sb = nl.ndarray((d_head, TILE_S), dtype=x.dtype, buffer=nl.sbuf)
        x_sb[i_d, i_s] = nl.load(x[i_d, s0 + i_s])
        cos_sb = nl.load(cos[i_lo, s0 + i_s])
        sin_sb = nl.load(sin[i_lo, s0 + i_s])
        # step 2
        lower = x_sb[i_lo, i_s]
        upper = nl.copy(x_sb[i_hi, i_s])
        # step 3
        lower_cos = nisa.tensor_tensor(lower, cos_sb, nl.multiply)
        upper_cos = nisa.tensor_tensor(upper, cos_sb, nl.multiply)
        lower_sin = nisa.tensor_tensor(lower, sin_sb, nl.multiply)
        upper_sin = nisa.tensor_tensor(upper, sin_sb, nl.multiply)
        # step 4
        out_sb = nl.ndarray((d_head, TILE_S), dtype=x.dtype, buffer=nl.sbuf)
        out_sb[i_lo, i_s] = nisa.tensor_tensor(lower_cos, upper_sin, nl.subtract)
        out_sb[i_hi, i_s] = nisa.tensor_tensor(upper_cos, lower_sin, nl.add)
        # step 5
        nl.store(out[i_d, s0 + i_s], value=out_sb)
    return out


def reference(x, cos, sin):
    """float64 numpy: rotate the (lower, upper) halves of the head dimension by (cos, sin)."""
    half = x.shape[0] // 2
    x64, c, s = (a.astype(np.float64) for a in (x, cos, sin))
    lower, upper = x64[:half], x64[half:]
    return np.concatenate([lower * c - upper * s, upper * c + lower * s], axis=0)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 2048)).astype(np.float32)
    cos = rng.normal(size=(64, 2048)).astype(np.float32)
    sin = rng.normal(size=(64, 2048)).astype(np.float32)
    np.testing.assert_allclose(rope(x, cos, sin), reference(x, cos, sin), rtol=1e-5, atol=1e-5)
    print("rope: ok")
