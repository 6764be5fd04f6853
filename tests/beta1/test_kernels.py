"""Beta-1 entry points: nki.jit modes, simulate_kernel, baremetal, benchmark, profile, trace,
SPMD grids (nl.nc, nl.spmd_dim, shared HBM), nl.all_reduce, ncc allocation and decorators."""

from __future__ import annotations

import json

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest

import trnsim
from trnsim.nki.runner import record_launches, stop_recording

X = np.random.default_rng(0).random((256, 512)).astype(np.float32)


def exp_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(x.shape[1])[None, :]
    for p in nl.affine_range((x.shape[0] + 127) // 128):
        i_p = p * 128 + nl.arange(128)[:, None]
        nl.store(
            out[i_p, i_f],
            value=nl.exp(nl.load(x[i_p, i_f], mask=i_p < x.shape[0])),
            mask=i_p < x.shape[0],
        )
    return out


@pytest.mark.parametrize("mode", ["auto", "simulation", "baremetal", "jax", "torchxla"])
def test_jit_modes_simulate(mode):
    np.testing.assert_allclose(nki.jit(mode=mode)(exp_kernel)(X), np.exp(X), rtol=1e-6)


def test_simulate_kernel_baremetal_and_trace():
    np.testing.assert_allclose(nki.simulate_kernel(exp_kernel, X), np.exp(X), rtol=1e-6)
    np.testing.assert_allclose(nki.simulate_kernel(nki.jit(exp_kernel), X), np.exp(X), rtol=1e-6)
    np.testing.assert_allclose(nki.baremetal(exp_kernel)(X), np.exp(X), rtol=1e-6)
    np.testing.assert_allclose(
        nki.baremetal(save_neff_name="k.neff")(exp_kernel)(X), np.exp(X), rtol=1e-6
    )

    @nki.trace
    def sub(t):
        return nl.multiply(t, 2.0)

    @nki.jit
    def outer(x):
        out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=sub(nl.load(x[0:128])))
        return out

    np.testing.assert_allclose(outer(X), 2 * X[:128])


def test_legacy_pass_by_reference_kernel():
    def add(a, b, c):
        nl.store(c, value=nl.load(a) + nl.load(b))

    a, b = X[:128], X[128:]
    c = np.zeros_like(a)
    nki.baremetal(add)(a, b, c)
    np.testing.assert_allclose(c, a + b)


def test_spmd_grid_with_cores_and_shared_output():
    @nki.jit
    def add_tile(a, b):
        c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
        cols = nl.program_id(1) * 256 + nl.arange(256)[None, :]
        nl.store(c[rows, cols], value=nl.load(a[rows, cols]) + nl.load(b[rows, cols]))
        return c

    want = X + 1
    ones = np.ones_like(X)
    np.testing.assert_allclose(add_tile[2, 2](X, ones), want)
    sink = []
    token = record_launches(sink)
    try:
        got = add_tile[nl.nc(2), nl.spmd_dim(2)](X, ones)
        got2 = add_tile[nl.spmd_dim(nl.nc(2), 1), 2](X, ones)
    finally:
        stop_recording(token)
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(got2, want)
    assert {ins.core for ins in sink[0].program} == {0, 1}


def test_all_reduce_across_programs():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((2, 3, 128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        p, q = nl.program_id(0), nl.program_id(1)
        total = nl.all_reduce(nl.load(x[p, q]), op=np.add, program_axes=[0, 1])
        peak = nl.all_reduce(nl.load(x[p, q]), op=np.maximum, program_axes=1)
        nl.store(out[p, q], value=nl.add(total, peak))
        return out

    x = np.random.default_rng(1).random((2, 3, 128, 8)).astype(np.float32)
    want = x.sum(axis=(0, 1), keepdims=True) + x.max(axis=1, keepdims=True)
    np.testing.assert_allclose(kernel[2, 3](x), np.broadcast_to(want, x.shape), rtol=1e-5)


def test_benchmark_reports_simulated_latency():
    bench = nki.benchmark(warmup=2, iters=5)(nki.jit(exp_kernel))
    np.testing.assert_allclose(bench(X), np.exp(X), rtol=1e-6)
    lat = bench.benchmark_result.nc_latency
    p50 = lat.get_latency_percentile(50)
    assert p50 > 0 and lat.get_latency_percentile(99) == p50
    abstract = nki.benchmark(exp_kernel)
    abstract(nt.tensor[[256, 512], nl.float32])  # shapes only: a timing-only run
    assert abstract.benchmark_result.nc_latency.get_latency_percentile(0) == pytest.approx(p50)


def test_profile_writes_a_trace(tmp_path):
    prof = nki.profile(working_directory=tmp_path, save_trace_name="profile.ntff")(exp_kernel)
    np.testing.assert_allclose(prof(X), np.exp(X), rtol=1e-6)
    trace = tmp_path / "profile.json"
    assert trace.exists()
    json.loads(trace.read_text())
    assert prof.profile_result.latency_ns > 0
    assert trnsim.profile(nki.jit(exp_kernel), X).latency_ns == prof.profile_result.latency_ns


def test_platform_target_and_torch_io():
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(X[:128].copy()).to(torch.bfloat16)
    out = nki.jit(exp_kernel, platform_target="trn1")(t)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    want = np.exp(X[:128].astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_allclose(out.float().numpy(), want, rtol=1e-2)


def test_direct_allocation_and_compiler_decorators():
    @ncc.skip_middle_end_transformations
    @ncc.enable_stack_allocator(log_level=50)
    @ncc.force_auto_alloc
    def kernel(x):
        out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        b = nl.ndarray(
            (2, nl.par_dim(128), 512),
            dtype=nl.float32,
            buffer=ncc.sbuf.mod_alloc(base_addr=2048 * 4, num_free_tiles=(2,)),
        )
        p = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=1))
        c = nl.ndarray(
            (128, 512), dtype=nl.float32, buffer=ncc.sbuf.alloc(lambda idx, p, f: (0, 4096 * 4))
        )
        a[...] = nl.load(x)
        b[0] = nl.multiply(a, 2.0)
        b[1] = nl.add(b[0], 1.0)
        p[...] = nl.copy(b[1])
        c[...] = nl.copy(p)
        with ncc.allocation_scope(), ncc.no_reorder(), ncc.multi_buffer(2):
            nl.store(out, value=c)
        return out

    np.testing.assert_allclose(nki.jit(kernel)(X[:128]), 2 * X[:128] + 1)
    assert ncc.sbuf.auto_alloc() is nl.sbuf and ncc.psum.auto_alloc() is nl.psum


def test_scalar_do_while_pattern():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        n = nl.zeros((1, 1), dtype=nl.int32)
        cond = nt.scalar(True)
        while cond:
            n[...] = nl.add(n, 1)
            cond = nt.scalar(nl.less(n, 3))
        nl.store(out, value=n)
        return out

    assert kernel(X)[0, 0] == 3
