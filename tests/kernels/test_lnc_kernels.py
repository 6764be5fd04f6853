"""Library kernels on a two-core launch (kernel[2], LNC=2): gemm computes a disjoint share of
out per core (batch entries, 512-column or 128-row tile ranges), pointwise and the Adam step
share their tiles. Results equal the references (or the one-core run), no cross-core HBM race
is reported, and work big enough to split takes less simulated time than on one core; a
product too small to split runs on core 0 alone."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from kernel_testing import assert_close
from trnsim.kernels.gemm import gemm, gemm_ref

import trnsim

CASES = [
    # (batch, m, k, n, bias, cores): bias = a [N] row of c, beta 1
    pytest.param((), 256, 256, 1024, False, [0, 1], id="columns-256x256x1024"),
    pytest.param((), 512, 128, 256, True, [0, 1], id="rows-512x128x256-bias"),
    pytest.param((5,), 16, 32, 48, False, [0, 1], id="batch-5x16x32x48"),
    pytest.param((), 64, 64, 64, False, [0], id="unsplit-64x64x64"),
]


def _profile(a, b, c, out_shape, lnc):
    out = np.zeros(out_shape, np.float32)
    kw = {"c": c, "alpha": 1.0, "beta": 1.0} if c is not None else {"alpha": 1.0, "beta": 0.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a cross-core race would be a SimulationWarning
        prof = trnsim.profile(gemm, out, a, b, chip="trn2", lnc=lnc, **kw)
    return out, prof


@pytest.mark.parametrize(("batch", "m", "k", "n", "bias", "cores"), CASES)
def test_gemm_on_two_cores_shares_the_products(rng, batch, m, k, n, bias, cores):
    a = rng.standard_normal((*batch, m, k), dtype=np.float32)
    b = rng.standard_normal((*batch, k, n), dtype=np.float32)
    c = rng.standard_normal((n,), dtype=np.float32) if bias else None
    out2, prof2 = _profile(a, b, c, (*batch, m, n), lnc=2)
    assert_close(out2, gemm_ref(a, b, c, 1.0, 1.0 if bias else 0.0), "float32", abs_frac=1)
    assert prof2.cores == cores
    _, prof1 = _profile(a, b, c, (*batch, m, n), lnc=1)
    if cores == [0, 1]:
        assert prof2.latency_ns < prof1.latency_ns
    else:
        assert prof2.latency_ns == prof1.latency_ns


def test_pointwise_on_two_cores_splits_its_tiles(rng):
    """An elementwise op of several tiles: each core takes a contiguous half of them."""
    from trnsim.kernels.pointwise import pointwise

    x = rng.standard_normal((2048, 1024), dtype=np.float32)  # several tiles (512 x 700: one)
    y = rng.standard_normal((1024,), dtype=np.float32)  # broadcast over rows
    lat = {}
    for lnc in (1, 2):
        out = np.zeros_like(x)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            prof = trnsim.profile(pointwise, out, x, y, chip="trn2", lnc=lnc, op="mul")
        np.testing.assert_array_equal(out, x * y)  # one fp32 multiply: exact
        lat[lnc] = prof
    assert lat[2].cores == [0, 1]
    assert lat[2].latency_ns < lat[1].latency_ns


def test_adam_on_two_cores_matches_one_core(rng):
    """The multi-tensor Adam step: tiles of every tensor shared over the cores, in place."""
    from trnsim.kernels import optim

    shapes = [(300, 64), (130,), (128, 600)]
    start = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    results, profs = {}, {}
    for lnc in (1, 2):
        params = [p.copy() for p in start]
        m = [np.zeros(s, np.float32) for s in shapes]
        v = [np.zeros(s, np.float32) for s in shapes]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            profs[lnc] = trnsim.profile(optim.adam, params, grads, m, v, None, chip="trn2",
                                        lnc=lnc, steps=[1] * 3, lr=0.01, weight_decay=0.1)
        results[lnc] = params
    for a, b in zip(results[1], results[2], strict=True):
        np.testing.assert_array_equal(a, b)  # the same instructions per element, either core
    assert profs[2].cores == [0, 1]
