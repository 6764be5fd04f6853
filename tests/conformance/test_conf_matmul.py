"""Beta-1 Tensor Engine forms (issue 12, classes 4 and 5): value-returning PE-tiled matmuls
land where the hardware writes them, and FP8 double-row matmuls with 3-D operands."""

from __future__ import annotations

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from trnsim.errors import ConstraintError

RNG = np.random.default_rng(5)


def test_value_returning_pe_tiles_land_in_their_psum_partitions():
    """A 32-column PE tile at column c writes PSUM partitions [c, c + 32): the fresh result
    tile is placed there, so the user never indexes PSUM."""
    g = RNG.standard_normal((4, 32, 32)).astype(np.float32)
    h = RNG.standard_normal((4, 32, 64)).astype(np.float32)

    @nki.jit(mode="simulation", platform_target="trn2")
    def kernel(a, b):
        out = nl.ndarray((4, 32, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            res = nisa.nc_matmul(
                nl.load(a[i]), nl.load(b[i]), tile_position=(0, i * 32), tile_size=(32, 32)
            )
            nl.store(out[i], res)
        return out

    want = np.einsum("bkm,bkn->bmn", g.astype(np.float64), h.astype(np.float64))
    np.testing.assert_allclose(kernel(g, h), want, rtol=1e-5, atol=1e-5)


def test_double_row_gen3_contracts_the_pair_axis():
    """perf_mode="double_row_gen3": [K, 2, M] x [K, 2, N] -> [M, N] over K x 2, FP8 inputs
    made with numpy from nl.float8_e5m2 (numpy takes NKI dtypes)."""
    a = RNG.integers(-3, 4, (64, 2, 128)).astype(nl.float8_e5m2)
    b = RNG.integers(-3, 4, (64, 2, 96)).astype(nl.float8_e5m2)
    assert a.dtype == ml_dtypes.float8_e5m2

    @nki.jit(mode="simulation", platform_target="trn2")
    def kernel(x, y):
        out = nl.ndarray((128, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nisa.nc_matmul(nl.load(x), nl.load(y), perf_mode="double_row_gen3")
        nl.store(out, res)
        return out

    want = np.einsum("kpm,kpn->mn", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_array_equal(kernel(a, b), want.astype(np.float32))


def test_double_row_still_needs_fp8_inputs():
    a = RNG.standard_normal((64, 2, 16)).astype(np.float32)

    @nki.jit(mode="simulation", platform_target="trn2")
    def kernel(x):
        out = nl.ndarray((16, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, nisa.nc_matmul(t, t, perf_mode="double_row_gen3"))
        return out

    with pytest.raises(ConstraintError, match="double_row"):
        kernel(a)
