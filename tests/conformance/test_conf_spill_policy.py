"""Which Beta-1 block is evicted when SBUF is full, and when a whole placement is given up
(trnsim/compat/neuronxcc/nki/_spill.py): weights a loop reads again stay resident, unread
results are what waits in HBM, and a launch that would evict runs block by block."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

import trnsim

W, N, P, F = 8, 64, 128, 1024  # 8 weight blocks and 64 result blocks of 4 KiB per partition
RNG = np.random.default_rng(5)
X = RNG.standard_normal((W, P, F)).astype(np.float32)


@nki.jit(mode="simulation", platform_target="trn2")
def reuse_weights(x):
    """64 results from 8 weight blocks each read 8 times; every result read only at the end
    (256 KiB of results: more than SBUF)."""
    out = nl.ndarray((N, P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.ndarray((W, nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
    r = nl.ndarray((N, nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(W):
        w[k] = nl.load(x[k])
    for a in nl.affine_range(N // W):
        for k in nl.affine_range(W):
            r[a * W + k] = nl.multiply(w[k], float(a + 1))
    for n in nl.affine_range(N):
        nl.store(out[n], value=r[n])
    return out


def _reference(x):
    return np.stack([x[n % W] * (n // W + 1) for n in range(N)])


def _spills(prof, kind):
    return [i for i in prof.program if i.attrs.get("spill_reload") == kind]


def test_reused_weights_stay_and_unread_results_wait_in_hbm():
    prof = trnsim.profile(reuse_weights, X, chip="trn2")
    np.testing.assert_array_equal(prof.outputs, _reference(X))
    saves, reloads = _spills(prof, "save"), _spills(prof, "reload")
    # each result that does not fit is saved once and read back once; no weight leaves SBUF
    assert 0 < len(saves) == len(reloads) < N
    moved = {o.tensor_name.split("[")[0] for i in saves + reloads for o in i.reads + i.writes}
    assert moved == {"r", "r_spill"}


def test_a_launch_that_would_evict_places_every_block_tensor_block_by_block():
    """w (32 KiB) fits whole at its declaration; r then needs evictions, so the launch runs
    again with w allocated block by block too (its loads write blocks 'w[k]')."""
    prof = trnsim.profile(reuse_weights, X, chip="trn2")
    loads = [i for i in prof.program if i.opcode == "dma_copy" and not i.attrs.get("spill_reload")]
    names = {o.tensor_name for i in loads[:W] for o in i.writes}
    assert names == {f"w[{k}] (4096 B/partition)" for k in range(W)}
