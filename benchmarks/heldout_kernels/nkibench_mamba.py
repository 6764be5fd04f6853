"""Beta-1 selective-scan step of Mamba, fp32, after the algorithm of NKIBench's baseline
`mamba_M7168_C256_S16_0.py` (zhang677/AccelOpt; the NKI Mamba tutorial's first version):
for every channel c, state s and position t,

    h[c, s, t] = exp(delta[c, t] * a[c, s]) * h[c, s, t - 1] + delta[c, t] * b[s, t] * u[c, t]
    out[c, t]  = sum over s of c_[s, t] * h[c, s, t]

Channels go on the partitions (tiles of 128), positions on the free axis. The state loop is
outermost and the channel tiles inside it, as in the baseline: for every (state, channel tile)
delta and u are loaded again (whole rows, [128, L], 4 L bytes per partition), the state's
column of a ([128, 1]) and its rows of b and c ([1, L], broadcast over the partitions) too; then
exp(delta * a) on the Scalar Engine (the column of a as the activation's per-partition scale),
delta * u and * b on the Vector Engine, the scan along the positions
(nisa.tensor_tensor_scan: multiply by exp(delta * a), add delta * b * u), times c, and the
result added into the channel tile's accumulator, which stays in SBUF across the state loop
(zeroed once, stored once at the end). Used by the calibration set (benchmarks/heldout.py,
benchmarks/calibrate.py); timed with values=False on trn1 at 256 channels, L = 7168
positions, 16 states. Run with `trnsim run`.

Where this differs in form from the baseline (the same instructions): each intermediate is
`del`eted after its last use, as the compiler's liveness allocation frees it (trnsim frees a
tile when its Python object dies; kept alive to the next iteration, nine [128, 7168] fp32
tiles and the accumulators need more than the 192 KiB of a trn1 partition), and b's row is
loaded after delta * u, when delta and u are dead. The baseline's compiler fitted the loop in
SBUF another way: its profile shows 55 MB of spill saves and reloads.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

P = 128  # partitions: channels per tile


@nki.jit
def mamba(delta, u, a, b, c):
    """Selective scan summed over the states, in fp32.

    Steps (every instruction fp32):
      0. (once) a zeroed [128, L] accumulator per channel tile (nl.zeros: a memset)
      per state s and channel tile t:
      1. load delta[tile, :] and a[tile, s] -> [128, L], [128, 1]
      2. exp(delta * a) (nisa.activation, Scalar Engine, scale = the column of a)
      3. load u[tile, :]; delta * u; load b[s, :]; times b broadcast over the partitions
         (two nisa.tensor_tensor multiplies)
      4. scan: h[t] = exp(delta * a)[t] * h[t - 1] + (delta * b * u)[t], h[-1] = 0
         (nisa.tensor_tensor_scan)
      5. load c[s, :]; h times c broadcast over the partitions (nisa.tensor_tensor), added
         into the tile's accumulator
      per channel tile: store the accumulator to out[tile, :]

    Dimensions:
        delta, u: [C, L]; a: [C, S]; b, c: [S, L]; fp32; C a multiple of 128
    Returns:
        out: [C, L], fp32
    """
    channels, length = delta.shape
    states = a.shape[1]
    assert u.shape == (channels, length), f"u {u.shape} must match delta {delta.shape}"
    assert a.shape == (channels, states), f"a {a.shape} must be [{channels}, S]"
    assert b.shape == c.shape == (states, length), f"b, c must be [{states}, {length}]"
    assert channels % P == 0, f"{channels} channels is not a multiple of {P}"
    fp32 = np.float32
    n_tiles = channels // P
    out = nl.ndarray((channels, length), dtype=fp32, buffer=nl.shared_hbm)
    i_p = nl.arange(P)[:, None]
    i_1 = nl.arange(1)[:, None]
    i_l = nl.arange(length)[None, :]
    i_s = nl.arange(1)[None, :]

    accum = nl.zeros((n_tiles, nl.par_dim(P), length), dtype=fp32, buffer=nl.sbuf)
    for s in nl.affine_range(states):
        for t in nl.affine_range(n_tiles):
            rows = t * P + i_p
            delta_t = nl.load(delta[rows, i_l])
            a_col = nl.load(a[rows, s + i_s])
            decay = nisa.activation(op=nl.exp, data=delta_t, scale=a_col, dtype=fp32)
            u_t = nl.load(u[rows, i_l])
            delta_u = nisa.tensor_tensor(delta_t, u_t, op=nl.multiply, dtype=fp32)
            del delta_t, u_t  # dead: the compiler frees them (trnsim: Python lifetimes)
            b_row = nl.load(b[s + i_1, i_l])
            drive = nisa.tensor_tensor(
                delta_u, b_row.broadcast_to((P, length)), op=nl.multiply, dtype=fp32
            )
            del delta_u, b_row
            h = nisa.tensor_tensor_scan(
                decay, drive, initial=0, op0=np.multiply, op1=np.add, dtype=fp32
            )
            del decay, drive
            c_row = nl.load(c[s + i_1, i_l])
            weighted = nisa.tensor_tensor(
                h, c_row.broadcast_to((P, length)), op=nl.multiply, dtype=fp32
            )
            del h, c_row
            accum[t, i_p, i_l] += weighted
            del weighted
    for t in nl.affine_range(n_tiles):
        nl.store(out[t * P + i_p, i_l], value=accum[t, i_p, i_l])
    return out


def reference(delta, u, a, b, c):
    """float64 numpy: the recurrence position by position, summed over the states."""
    d, uu, aa, bb, cc = (np.asarray(v, dtype=np.float64) for v in (delta, u, a, b, c))
    decay = np.exp(d[:, None, :] * aa[:, :, None])  # [C, S, L]
    drive = d[:, None, :] * bb[None, :, :] * uu[:, None, :]
    h = np.zeros(decay.shape[:2])
    out = np.zeros_like(d)
    for t in range(d.shape[1]):
        h = decay[..., t] * h + drive[..., t]
        out[:, t] = np.sum(cc[None, :, t] * h, axis=1)
    return out


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    shapes = ((256, 512), (256, 512), (256, 4), (4, 512), (4, 512))
    args = [rng.normal(scale=0.05, size=s).astype(np.float32) for s in shapes]
    np.testing.assert_allclose(mamba(*args), reference(*args), rtol=1e-4, atol=1e-7)
    print("mamba: ok")
