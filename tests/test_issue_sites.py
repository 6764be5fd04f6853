"""NeuronCore.issue's call-site cache (core.Site): a repeated instruction is recorded exactly as
the uncached path records it, per-address checks still run on every hit, and errors still point
at the user's line."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import trnsim.core
from trnsim.errors import KernelError
from trnsim.nki.jit import _as_kernel
from trnsim.timing.profile import time_program


def _blocked(a_t, b):
    """A small blocked matmul: DMAs, matmuls into PSUM, a copy out and scalar attributes."""
    k_dim, m_dim = a_t.shape
    n_dim = b.shape[1]
    out = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_dim // 128):
        for n in nl.affine_range(n_dim // 128):
            acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_dim // 128):
                at = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
                bt = nl.ndarray((128, 128), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=at, src=a_t[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                nisa.dma_copy(dst=bt, src=b[k * 128:(k + 1) * 128, n * 128:(n + 1) * 128])
                nisa.nc_matmul(dst=acc, stationary=at, moving=bt)
            res = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=res, op=nl.copy, data=acc, scale=1.0)
            nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, n * 128:(n + 1) * 128], src=res)
    return out


def _launch(values: bool):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 384)).astype(np.float32)
    return _as_kernel(nki.jit(_blocked)).launch((a, b), {}, chip="trn2", values=values), a, b


def _record(run):
    return [(i.index, i.opcode, i.engine, i.core, i.reads, i.writes, i.attrs, i.loc, i.loops)
            for i in run.program]


@pytest.mark.parametrize("values", [False, True], ids=["timing-only", "values"])
def test_cached_sites_record_what_the_uncached_path_records(monkeypatch, values):
    cached, a, b = _launch(values)
    monkeypatch.setattr(trnsim.core, "check_key", lambda *args: None)  # no site is kept
    uncached, _, _ = _launch(values)
    assert _record(cached) == _record(uncached)
    t_cached = time_program(cached.program, cached.chip, values=values)
    t_uncached = time_program(uncached.program, uncached.chip, values=values)
    assert t_cached.timeline.end == t_uncached.timeline.end
    if values:
        np.testing.assert_array_equal(cached.outputs, uncached.outputs)
        np.testing.assert_allclose(cached.outputs, a.T.astype(np.float64) @ b, rtol=1e-5,
                                   atol=1e-4)


def test_a_repeated_instruction_is_checked_once_but_recorded_at_each_address(monkeypatch):
    calls = []
    real = trnsim.core.check_instruction

    def counting(spec, *args, **kwargs):
        calls.append(spec.name)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(trnsim.core, "check_instruction", counting)
    run, _, _ = _launch(False)
    matmuls = [i for i in run.program if i.opcode == "nc_matmul"]
    # PSUM bank rules read the dst's byte position: checked once per PSUM position only.
    psum_starts = {i.writes[0].region.byte_start for i in matmuls}
    assert len(matmuls) == 12 and calls.count("nc_matmul") == len(psum_starts) < 12
    # Each tile slot's own address is recorded, not the first one's.
    starts = {(i.reads[0].region.byte_start, i.writes[0].region.byte_start) for i in matmuls}
    assert len(starts) > 1


def test_a_tile_of_an_earlier_launch_is_refused_on_a_cached_site():
    kept = {}

    def kernel(x):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        old = kept.setdefault("t", t)
        nisa.activation(dst=t, op=nl.copy, data=t)  # checked, then cached
        nisa.activation(dst=old, op=nl.copy, data=old)  # same geometry, maybe another launch
        return x

    x = np.zeros((128, 64), np.float32)
    nki.simulate(kernel)(x)
    with pytest.raises(KernelError, match="belongs to an earlier kernel launch") as exc:
        nki.simulate(kernel)(x)
    assert exc.value.loc.lineno == kernel.__code__.co_firstlineno + 5


def test_the_live_tile_index_stays_bounded_and_names_live_tiles():
    from trnsim.core import Device
    from trnsim.errors import AllocationError
    from trnsim.nki.runner import resolve_chip

    device = Device(resolve_chip("trn2"), values=False)  # (a core holds its Device weakly)
    core = device.core(0)
    for _ in range(5000):  # each tile dropped at once: its entry goes when the index doubles
        core.allocate("sbuf", (128, 64), trnsim.core.dt.resolve("float32"), name="t")
    assert len(core._live["sbuf"]) <= 2048
    f32 = trnsim.core.dt.resolve("float32")
    keep = [core.allocate("sbuf", (128, 4096), f32, name="big") for _ in range(12)]
    with pytest.raises(AllocationError) as exc:
        keep.append(core.allocate("sbuf", (128, 4096), f32, name="big"))
    assert "live: tensor 'big'" in str(exc.value) and "'t'" not in str(exc.value)
