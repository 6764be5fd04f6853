"""Beta-1 PSUM block tensors larger than PSUM (AWS's attention tutorial, attn_fwd_v3): live
blocks are copied to an SBUF spill tensor by VectorE and back when read again (DMAs do not
reach PSUM); that SBUF tensor spills to HBM in turn when SBUF is short."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

import trnsim

RNG = np.random.default_rng(11)
A = RNG.standard_normal((128, 128)).astype(np.float32)
B = RNG.standard_normal((128, 12 * 512)).astype(np.float32)  # 12 banks' worth: PSUM holds 8


@nki.jit(mode="simulation", platform_target="trn2")
def all_products_then_read(a, b):
    """Twelve [128, 512] fp32 products live in one PSUM tensor before any is read."""
    lhs = nl.load(a)
    ps = nl.ndarray((12, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    for j in nl.affine_range(12):
        ps[j] = nisa.nc_matmul(lhs, nl.load(b[:, j * 512:(j + 1) * 512]))
    out = nl.ndarray((128, 12 * 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for j in nl.affine_range(12):
        nl.store(out[:, j * 512:(j + 1) * 512], value=nl.multiply(ps[j], 2.0))
    return out


def _psum_spill_copies(program):
    saves = [i for i in program if i.opcode == "tensor_copy"
             and i.reads[0].region.space == "psum"
             and "ps_psum_spill" in (i.writes[0].tensor_name or "")]
    reloads = [i for i in program if i.opcode == "tensor_copy"
               and i.reads[0].region.space == "sbuf" and i.writes[0].region.space == "psum"]
    return saves, reloads


def test_live_psum_blocks_spill_to_sbuf_and_come_back():
    want = 2 * (A.astype(np.float64).T @ B)
    np.testing.assert_allclose(all_products_then_read(A, B), want, rtol=1e-4, atol=1e-4)
    prof = trnsim.profile(all_products_then_read, A, B, chip="trn2")
    np.testing.assert_allclose(prof.outputs, want, rtol=1e-4, atol=1e-4)
    saves, reloads = _psum_spill_copies(prof.program)
    assert saves and len(saves) == len(reloads)  # each saved block is read again
    assert all(i.engine == "vector" for i in saves + reloads)
    assert not [i for i in prof.program if i.opcode == "dma_copy"
                and "psum" in (i.reads[0].region.space, i.writes[0].region.space)]
