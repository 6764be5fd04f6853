"""trnsim.kernels.softmax: row softmax against the float64 reference."""

from __future__ import annotations

import nki
import numpy as np
import pytest
from kernel_testing import BF16, assert_close, assert_rejected, randn
from trnsim.kernels import softmax as sm


@pytest.mark.parametrize(
    ("n", "d", "dtype", "scale"),
    [
        pytest.param(256, 512, np.float32, 3.0, id="fp32-256x512"),
        pytest.param(1024, 100, BF16, 3.0, id="bf16-1024x100"),  # 8 rows per partition
        pytest.param(128, 4096, np.float32, 1.0, id="fp32-128x4096"),
        pytest.param(128, 64, np.float32, 500.0, id="fp32-large-logits"),  # exp needs max
    ],
)
def test_softmax_matches_reference(rng, n, d, dtype, scale):
    x = randn(rng, (n, d), dtype, scale=scale)
    out = nki.simulate(sm.softmax)(x)
    assert out.dtype == np.dtype(dtype)
    assert_close(out, sm.softmax_ref(x), np.dtype(dtype).name, 2)


def test_softmax_rows_sum_to_one(rng):
    out = nki.simulate(sm.softmax)(randn(rng, (128, 300), np.float32))
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize(
    ("shape", "dtype", "match"),
    [
        pytest.param((100, 64), np.float32, "N=100", id="rows"),
        pytest.param((128, 64), np.int32, "dtype int32", id="dtype"),
        pytest.param((128, 60000), np.float32, "D=60000 needs", id="too-wide"),
    ],
)
def test_softmax_rejects_bad_operands(shape, dtype, match):
    assert_rejected(match, sm.softmax, np.zeros(shape, dtype))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_softmax_random_shapes(seed):
    rng = np.random.default_rng(300 + seed)
    n, d = int(rng.integers(1, 17)) * 128, int(rng.integers(1, 8193))
    dtype = (BF16, np.float32)[seed % 2]
    x = randn(rng, (n, d), dtype, scale=4.0)
    assert_close(nki.simulate(sm.softmax)(x), sm.softmax_ref(x), np.dtype(dtype).name, 2)
