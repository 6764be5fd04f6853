"""trnsim.kernels.softmax_nd: softmax / log_softmax over any dim of strided views, forward and
backward, against float64 references."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, assert_close, randn
from trnsim.kernels import softmax_nd as sm
from views_testing import Same, assert_rejected_views, launch, strided_of, transposed

FWD_CASES = [
    pytest.param((1, 10), id="1-row"),
    pytest.param((7, 33), id="7x33"),
    pytest.param((129, 20), id="129x20"),
    pytest.param((1000, 24), id="1000x24"),  # 8 rows per partition
    pytest.param((5, 1), id="length-1-rows"),
]


def _fwd(x, dim, log, out_dtype=None):
    out = np.zeros(x.shape, out_dtype or x.dtype)
    return launch(sm.softmax_forward, out, x, dim=dim, log=log)[0]


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", FWD_CASES)
@pytest.mark.parametrize("dim", [0, -1])
def test_forward_2d(rng, shape, dim, log):
    x = randn(rng, shape, np.float32, scale=3.0)
    assert_close(_fwd(x, dim, log), sm.softmax_forward_ref(x, dim, log), "float32", 2)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize(
    ("shape", "dim"),
    [
        *[pytest.param((3, 4, 5), d, id=f"3d-dim{d}") for d in range(3)],
        *[pytest.param((2, 3, 4, 6), d, id=f"4d-dim{d}") for d in range(4)],
    ],
)
def test_forward_every_dim(rng, shape, dim, log):
    x = randn(rng, shape, np.float32, scale=2.0)
    assert_close(_fwd(x, dim, log), sm.softmax_forward_ref(x, dim, log), "float32", 2)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize(
    ("dtype", "out_dtype"),
    [
        pytest.param(BF16, BF16, id="bf16"),
        pytest.param(np.float16, np.float16, id="fp16"),
        pytest.param(BF16, np.float32, id="bf16-to-fp32"),  # half_to_float
    ],
)
def test_forward_dtypes(rng, dtype, out_dtype, log):
    x = randn(rng, (130, 40), dtype, scale=3.0)
    got = _fwd(x, 1, log, out_dtype)
    assert got.dtype == np.dtype(out_dtype)
    # the result is rounded once to out's dtype; log-probabilities are also exact sums in fp32
    assert_close(got, sm.softmax_forward_ref(x, 1, log), np.dtype(out_dtype).name, 2)


def test_forward_large_logits_need_the_max(rng):
    x = randn(rng, (64, 50), np.float32, scale=400.0)
    assert_close(_fwd(x, 1, False), sm.softmax_forward_ref(x, 1, False), "float32", 2)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_forward_permuted_and_sliced_views(rng, log):
    """A permuted input (NCHW stored as NHWC), softmax over C; the output is a column slice
    with a storage offset of a bigger buffer."""
    xv, xs = transposed(rng, (2, 5, 3, 7), np.float32, (0, 2, 3, 1))
    out_base = np.zeros((2, 5, 3, 9), np.float32)
    out_view = out_base[:, :, :, 1:8]
    got = launch(sm.softmax_forward, strided_of(out_base, out_view), xs, dim=1, log=log)[0]
    assert_close(got, sm.softmax_forward_ref(xv, 1, log), "float32", 2)


def test_forward_broadcast_input(rng):
    """A stride-0 (expanded) input dim: every row along it is the same."""
    base = randn(rng, (1, 6, 11), np.float32)
    view = np.broadcast_to(base, (4, 6, 11))
    got = _fwd_views(strided_of(base, view), (4, 6, 11), dim=2)
    assert_close(got, sm.softmax_forward_ref(view, 2, False), "float32", 2)


def _fwd_views(xs, shape, dim):
    out = np.zeros(shape, np.float32)
    return launch(sm.softmax_forward, out, xs, dim=dim, log=False)[0]


def test_forward_in_place(rng):
    x = randn(rng, (200, 30), np.float32)
    want = sm.softmax_forward_ref(x, 1, True)
    got = launch(sm.softmax_forward, x.copy(), Same(0), dim=1, log=True)[0]
    assert_close(got, want, "float32", 2)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize(
    ("shape", "dim"),
    [
        pytest.param((9, 300), 1, id="9x300"),
        pytest.param((300, 130), 0, id="dim0"),
    ],
)
def test_forward_long_rows_in_chunks(rng, monkeypatch, shape, dim, log):
    """Rows longer than a chunk take two passes (chunk of 64 columns here)."""
    monkeypatch.setattr(sm, "MAX_CHUNK_COLS", 64)
    x = randn(rng, shape, np.float32, scale=5.0)
    x[3, 7] = 60.0  # one chunk's max far above the others
    assert_close(_fwd(x, dim, log), sm.softmax_forward_ref(x, dim, log), "float32", 2)


# ---------------------------------------------------------------- backward
def _bwd_inputs(rng, shape, dim, log, dtype):
    g = randn(rng, shape, dtype)
    y = sm.softmax_forward_ref(randn(rng, shape, np.float64, 2.0), dim, log).astype(dtype)
    return g, y


def _bwd(g, y, dim, log, out_dtype=None):
    gi = np.zeros(g.shape, out_dtype or g.dtype)
    return launch(sm.softmax_backward, gi, g, y, dim=dim, log=log)[0]


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize(
    ("shape", "dim", "dtype"),
    [
        pytest.param((1, 12), 1, np.float32, id="1-row"),
        pytest.param((129, 40), 1, np.float32, id="129x40"),
        pytest.param((1000, 16), 1, np.float32, id="1000x16"),
        pytest.param((3, 4, 5), 0, np.float32, id="3d-dim0"),
        pytest.param((3, 4, 5), 1, np.float32, id="3d-dim1"),
        pytest.param((2, 3, 4, 6), 2, np.float32, id="4d-dim2"),
        pytest.param((130, 40), 1, BF16, id="bf16"),
    ],
)
def test_backward(rng, shape, dim, log, dtype):
    g, y = _bwd_inputs(rng, shape, dim, log, dtype)
    want = sm.softmax_backward_ref(g, y, dim, log)
    # the row sums cancel: errors scale with the terms, not the result
    assert_close(_bwd(g, y, dim, log), want, np.dtype(dtype).name, 2, abs_frac=1)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_backward_reference_matches_torch(rng, log):
    torch = pytest.importorskip("torch")
    x = torch.tensor(rng.standard_normal((6, 9)), dtype=torch.float64, requires_grad=True)
    y = torch.log_softmax(x, 1) if log else torch.softmax(x, 1)
    g = torch.tensor(rng.standard_normal((6, 9)), dtype=torch.float64)
    (want,) = torch.autograd.grad(y, x, g)
    got = sm.softmax_backward_ref(g.numpy(), y.detach().numpy(), 1, log)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_backward_strided_in_place_and_chunked(rng, monkeypatch, log):
    """Transposed grad_out and out views, grad_in written over grad_out, rows in chunks."""
    monkeypatch.setattr(sm, "MAX_CHUNK_COLS", 64)
    gv, gs = transposed(rng, (5, 200), np.float32, (1, 0))
    y = sm.softmax_forward_ref(randn(rng, (200, 5), np.float64), 0, log).astype(np.float32)
    yv = y.T
    want = sm.softmax_backward_ref(gv, yv, 1, log)
    got = launch(sm.softmax_backward, gs, Same(0), strided_of(y, yv), dim=1, log=log)[0]
    assert_close(got, want, "float32", 2, abs_frac=1)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        pytest.param(((4, 5), (4, 6), np.float32, 1), "shape", id="shape-mismatch"),
        pytest.param(((4, 5), (4, 5), np.int32, 1), "dtype int32", id="dtype"),
        pytest.param(((4, 5), (4, 5), np.float32, 2), "dim=2 is out of range", id="dim"),
    ],
)
def test_forward_rejects(args, match):
    xs, os_, dtype, dim = args
    assert_rejected_views(
        match, sm.softmax_forward, np.zeros(os_, dtype), np.zeros(xs, dtype), dim=dim, log=False
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_shapes_and_dims(seed):
    rng = np.random.default_rng(500 + seed)
    rank = int(rng.integers(1, 5))
    shape = tuple(int(rng.integers(1, 40)) for _ in range(rank))
    dim = int(rng.integers(0, rank))
    perm = tuple(rng.permutation(rank))
    dtype = (np.float32, BF16)[seed % 2]
    log = bool(seed % 3 == 0)
    xv, xs = transposed(rng, shape, dtype, perm)
    got = launch(sm.softmax_forward, np.zeros(shape, np.float32), xs, dim=dim, log=log)[0]
    assert_close(got, sm.softmax_forward_ref(xv, dim, log), "float32", 4)
    g, y = _bwd_inputs(rng, shape, dim, log, np.float32)
    assert_close(
        _bwd(g, y, dim, log), sm.softmax_backward_ref(g, y, dim, log), "float32", 2, abs_frac=1
    )


@pytest.mark.slow
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_long_rows_real_chunks(log):
    rng = np.random.default_rng(7)
    x = randn(rng, (130, 20000), np.float32, scale=4.0)
    assert_close(_fwd(x, 1, log), sm.softmax_forward_ref(x, 1, log), "float32", 2)


@pytest.mark.parametrize("chip", ["trn1", "trn2"])
def test_other_chips(rng, chip):
    x = randn(rng, (130, 40), np.float32, 2.0)
    y = launch(sm.softmax_forward, np.zeros_like(x), x, dim=1, log=False, chip=chip)[0]
    assert_close(y, sm.softmax_forward_ref(x, 1, False), "float32", 2)
    g = randn(rng, (130, 40), np.float32)
    gi = launch(sm.softmax_backward, np.zeros_like(x), g, y, dim=1, log=False, chip=chip)[0]
    assert_close(gi, sm.softmax_backward_ref(g, y, 1, False), "float32", 2, abs_frac=1)
