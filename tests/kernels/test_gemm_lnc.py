"""gemm on a two-core launch (gemm[2], LNC=2): each core computes a disjoint share of out
(batch entries, 512-column or 128-row tile ranges), the result equals the float64 reference,
no cross-core HBM race is reported, and a product big enough to split takes less simulated
time than on one core. A product too small to split runs on core 0 alone."""

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
    pytest.param((), 300, 100, 1100, True, [0, 1], id="ragged-columns-300x100x1100-bias"),
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
