"""nc_matmul(accumulate=None) into PSUM tensors placed at one address (address=): each tensor is
its own accumulation group, as nki-library's attention kernel expects of its per-group PSUM
tiles (one bank shared by the tiles of successive query groups)."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

BANK = 2048  # bytes per PSUM bank in each partition


def _two_groups(same_tensor: bool, second: bool | None = None):
    """Two matmuls a0.T@b0 and a1.T@b1 into PSUM at bank 1: through two tensors placed at that
    bank, or twice through one; `second` is the second matmul's accumulate. Returns both
    results as copied out after each matmul."""

    def kernel(a, b):
        out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
        p0 = nl.ndarray((128, 64), nl.float32, buffer=nl.psum, address=(0, BANK))
        p1 = p0 if same_tensor else nl.ndarray((128, 64), nl.float32, buffer=nl.psum,
                                               address=(0, BANK))
        for g, ps in enumerate((p0, p1)):
            a_sb = nl.ndarray((32, 128), nl.float32, buffer=nl.sbuf)
            b_sb = nl.ndarray((32, 64), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_sb, src=a[g])
            nisa.dma_copy(dst=b_sb, src=b[g])
            nisa.nc_matmul(ps, a_sb, b_sb, accumulate=None if g == 0 else second)
            res = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=ps)
            nisa.dma_copy(dst=out[g], src=res)
        return out

    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 32, 128)).astype(np.float32)
    b = rng.standard_normal((2, 32, 64)).astype(np.float32)
    got = nki.simulate(kernel)(a, b)
    want = np.stack([a[g].astype(np.float64).T @ b[g] for g in range(2)])
    return got, want


def test_tensors_placed_at_one_psum_address_start_their_own_group():
    """The first matmul into the second tensor overwrites what the first tensor left there."""
    got, want = _two_groups(same_tensor=False)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_one_tensor_keeps_accumulating():
    """Through one tensor, the second matmul adds onto the first (accumulate=None)."""
    got, want = _two_groups(same_tensor=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[1], want[0] + want[1], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("accumulate", [False, True], ids=["overwrite", "add"])
def test_explicit_accumulate_ignores_tensor_identity(accumulate):
    """accumulate=False always overwrites; True adds onto whatever the bank holds."""
    got, want = _two_groups(same_tensor=False, second=accumulate)
    expected = want[0] + want[1] if accumulate else want[1]
    np.testing.assert_allclose(got[1], expected, rtol=1e-5, atol=1e-4)
