"""trnsim.kernels.gemm: out = beta * c + alpha * (a @ b) over strided views, vs float64."""

from __future__ import annotations

import nki
import numpy as np
import pytest
from kernel_testing import BF16, assert_close, randn
from trnsim.kernels import gemm as gm
from views_testing import Same, assert_rejected_views, launch, strided_of, transposed

from trnsim.errors import ConstraintError
from trnsim.nki.runner import run_kernel


def _operand(rng, shape, dtype, layout: str):
    """A [..., R, C] operand: 'n' contiguous, 't' stored transposed (the view of x.t())."""
    if layout == "n":
        x = randn(rng, shape, dtype)
        return x, x
    nd = len(shape)
    perm = (*range(nd - 2), nd - 1, nd - 2)
    return transposed(rng, shape, dtype, perm)


def _run(rng, m, k, n, dtype, layouts="nn", chip="trn3", c=None, **kw):
    a, a_arg = _operand(rng, (m, k), dtype, layouts[0])
    b, b_arg = _operand(rng, (k, n), dtype, layouts[1])
    out = np.zeros((m, n), dtype)
    args = [out, a_arg, b_arg]
    if c is None:
        got = launch(lambda o, x, y: gm.gemm(o, x, y, **kw), *args, chip=chip)[0]
    else:
        c_val, c_arg = c
        got = launch(lambda o, x, y, z: gm.gemm(o, x, y, c=z, **kw), *args, c_arg, chip=chip)[0]
    ref = gm.gemm_ref(a, b, None if c is None else c_val, kw.get("alpha", 1.0), kw.get("beta", 1.0))
    return got, ref


@pytest.mark.parametrize(
    ("m", "k", "n", "layouts"),
    [
        pytest.param(1, 1, 1, "nn", id="1x1x1"),
        pytest.param(3, 5, 7, "tt", id="3x5x7-tt"),
        pytest.param(127, 129, 300, "nn", id="127x129x300-nn"),
        pytest.param(129, 300, 513, "tn", id="129x300x513-tn"),
        pytest.param(130, 257, 600, "nt", id="130x257x600-nt"),  # linear: b = w.t()
        pytest.param(300, 127, 1, "nn", id="mv-300x127"),
        pytest.param(1, 300, 129, "nt", id="row-1x300x129"),
    ],
)
def test_gemm_fp32_shapes_and_layouts(rng, m, k, n, layouts):
    got, ref = _run(rng, m, k, n, np.float32, layouts)
    assert_close(got, ref, "float32", abs_frac=1)


@pytest.mark.parametrize(
    ("dtype", "chip", "layouts"),
    [
        pytest.param(BF16, "trn3", "nt", id="bf16-trn3"),
        pytest.param(np.float16, "trn2", "tn", id="fp16-trn2"),
        pytest.param(BF16, "trn1", "nt", id="bf16-trn1-pe-transposes"),
        pytest.param(np.float32, "trn1", "tt", id="fp32-trn1-pe-transposes"),
    ],
)
def test_gemm_16bit_and_older_chips(rng, dtype, chip, layouts):
    """16-bit products accumulate in fp32 and round once to the output dtype; NeuronCore-v2
    brings K-contiguous operands in by TensorE transposes."""
    got, ref = _run(rng, 200, 300, 520, dtype, layouts, chip=chip)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, ref, np.dtype(dtype).name)


def _bias(rng, kind: str, m: int, n: int, dtype):
    """The addend c as the device passes it (expanded to [m, n] where torch broadcasts)."""
    if kind == "row":  # addmm / linear bias [N], expand(M, N): strides (0, 1)
        v = randn(rng, (n,), dtype)
        return v, strided_of(v, np.broadcast_to(v, (m, n)))
    if kind == "column":  # bias [M, 1] expanded: strides (1, 0)
        v = randn(rng, (m, 1), dtype)
        return v, strided_of(v, np.broadcast_to(v, (m, n)))
    if kind == "scalar":  # a 0-d input arrives as shape (1,)
        v = randn(rng, (1,), dtype)
        return v, v
    if kind == "transposed":
        return transposed(rng, (m, n), dtype, (1, 0))
    v = randn(rng, (m, n), dtype)
    return v, v


@pytest.mark.parametrize("kind", ["row", "column", "scalar", "full", "transposed"])
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 1.0), (0.5, -2.0)])
def test_gemm_addend_kinds_and_scales(rng, kind, alpha, beta):
    m, k, n = 140, 70, 530
    got, ref = _run(rng, m, k, n, np.float32, "nn", c=_bias(rng, kind, m, n, np.float32),
                    alpha=alpha, beta=beta)
    assert_close(got, ref, "float32", abs_frac=1)


def test_gemm_bf16_bias(rng):
    m, k, n = 64, 96, 200
    got, ref = _run(rng, m, k, n, BF16, "nt", c=_bias(rng, "row", m, n, BF16), beta=0.5)
    assert_close(got, ref, "bfloat16")


def test_gemm_beta_zero_ignores_nan_in_c(rng):
    c = np.full((20, 30), np.nan, np.float32)
    got, ref = _run(rng, 20, 10, 30, np.float32, "nn", c=(c, c), alpha=2.0, beta=0.0)
    assert np.isfinite(got).all()
    assert_close(got, ref, "float32", abs_frac=1)


def test_gemm_empty_contraction_gives_beta_c(rng):
    c = randn(rng, (5, 6), np.float32)
    got, ref = _run(rng, 5, 0, 6, np.float32, "nn", c=(c, c), beta=3.0)
    np.testing.assert_array_equal(got, ref.astype(np.float32))


def test_gemm_batch_broadcast(rng):
    """baddbmm-style: a [B, M, K], b [K, N] (no batch dim: broadcast), b's batch given with
    stride 0 elsewhere, c [B, 1, N] broadcast over rows."""
    bsz, m, k, n = 3, 50, 40, 60
    a = randn(rng, (bsz, m, k), np.float32)
    b = randn(rng, (k, n), np.float32)
    b_arg = strided_of(b, np.broadcast_to(b, (bsz, k, n)))
    c = randn(rng, (bsz, 1, n), np.float32)
    out = np.zeros((bsz, m, n), np.float32)
    got = launch(lambda o, x, y, z: gm.gemm(o, x, y, c=z, alpha=0.5), out, a, b_arg, c)[0]
    assert_close(got, gm.gemm_ref(a, b, c, 0.5), "float32", abs_frac=1)
    got2 = launch(lambda o, x, y: gm.gemm(o, x, y), out, a, b)[0]  # b without batch dims
    assert_close(got2, gm.gemm_ref(a, b), "float32", abs_frac=1)


def test_gemm_batched_transposed_operands(rng):
    """bmm backward multiplies by transposed batched views: a^T per batch entry."""
    a, a_arg = transposed(rng, (4, 33, 65), BF16, (0, 2, 1))
    b, b_arg = transposed(rng, (4, 65, 17), BF16, (2, 0, 1))
    got = launch(lambda o, x, y: gm.gemm(o, x, y), np.zeros((4, 33, 17), BF16), a_arg, b_arg)[0]
    assert_close(got, gm.gemm_ref(a, b), "bfloat16")


def test_gemm_small_batches_share_loads_and_stores(rng):
    """bmm of 20 entries of 16 x 24 x 40: groups of 12 entries (one PSUM bank of results) load
    each operand, evacuate and store once; a batch broadcast whose offsets do not step evenly
    (b [1, 5, K, N] against out [4, 5, M, N]) loads entry by entry."""
    a, b = randn(rng, (20, 16, 24), np.float32), randn(rng, (20, 24, 40), np.float32)
    args = (np.zeros((20, 16, 40), np.float32), a, b)
    prog = run_kernel(lambda o, x, y: gm.gemm(o, x, y), args, {}, chip="trn3").program
    ops = [i.opcode for i in prog]
    assert ops.count("nc_matmul") == 20
    assert ops.count("dma_copy") + ops.count("dma_transpose") == 6  # 2 groups x (a, b, out)
    got = launch(lambda o, x, y: gm.gemm(o, x, y), *args)[0]
    assert_close(got, gm.gemm_ref(a, b), "float32", abs_frac=1)
    a4, b4 = randn(rng, (4, 5, 16, 24), BF16), randn(rng, (1, 5, 24, 40), BF16)
    got = launch(lambda o, x, y: gm.gemm(o, x, y), np.zeros((4, 5, 16, 40), BF16), a4, b4)[0]
    assert_close(got, gm.gemm_ref(a4, b4), "bfloat16")


def test_gemm_column_major_out(rng):
    """A transposed out view is computed as out^T = b^T a^T (contiguous stores)."""
    m, k, n = 70, 50, 90
    a, b = randn(rng, (m, k), np.float32), randn(rng, (k, n), np.float32)
    base = np.zeros((n, m), np.float32)
    out_arg = strided_of(base, base.T)
    got = launch(lambda o, x, y: gm.gemm(o, x, y), out_arg, a, b)[0]
    assert_close(got, gm.gemm_ref(a, b), "float32", abs_frac=1)


def test_gemm_in_place_addend(rng):
    """addmm_: out is the same view as c; each tile of c is read before it is written."""
    m, k, n = 260, 64, 700
    a, b, c = (randn(rng, s, np.float32) for s in ((m, k), (k, n), (m, n)))
    got = launch(lambda o, x, y, z: gm.gemm(o, x, y, c=z, beta=0.25), c.copy(), a, b, Same(0))[0]
    assert_close(got, gm.gemm_ref(a, b, c, 1.0, 0.25), "float32", abs_frac=1)


def test_gemm_several_blocks_and_streamed_k(rng, monkeypatch):
    """Several resident b blocks and a^T blocks (ragged), prefetched or (when only one b
    block fits) loaded on demand, then the streamed-K loop (K chunks accumulated in PSUM)
    when no K x 512 block fits: same values as the reference."""
    m, k, n = 300, 700, 1100
    c = _bias(rng, "row", m, n, np.float32)
    monkeypatch.setattr(gm, "MAX_BLOCK_N", 512)
    got, ref = _run(rng, m, k, n, np.float32, "nt", c=c, alpha=0.5)
    assert_close(got, ref, "float32", abs_frac=1)
    monkeypatch.setattr(gm, "_block_sizes", lambda *args: (128, 512, False))
    got, ref = _run(rng, m, k, n, np.float32, "tn", c=c, alpha=0.5)
    assert_close(got, ref, "float32", abs_frac=1)
    monkeypatch.undo()
    monkeypatch.setattr(gm, "SBUF_SHARE", 0.1)
    monkeypatch.setattr(gm, "STREAM_SHARE", 0.02)
    got, ref = _run(rng, m, k, n, np.float32, "tn", c=c, alpha=0.5)
    assert_close(got, ref, "float32", abs_frac=1)


def test_gemm_tiny_is_five_instructions(rng):
    """1 x 1 x 1: two loads, one matmul, one PSUM copy, one store."""
    prog = run_kernel(lambda o, x, y: gm.gemm(o, x, y),
                      (np.zeros((1, 1), np.float32), np.ones((1, 1), np.float32),
                       np.ones((1, 1), np.float32)), {}, chip="trn3").program
    assert [i.opcode for i in prog].count("nc_matmul") == 1
    assert len(prog) == 5


def test_gemm_1024_bf16_keeps_the_pe_array_busy():
    """Timing sanity on the model (values=False): a 1024^3 bf16 mm with a row-major a (DMA
    transposes) keeps the PE array's MultiplyMoving row busy most of the run (0.81 measured
    on trn3 when written)."""
    from trnsim.timing.profile import profile

    z = np.zeros((1024, 1024), BF16)
    prof = profile(lambda o, x, y: gm.gemm(o, x, y), z, z, z, chip="trn3", values=False)
    busy = prof.engine_active_ns[(0, "tensor_matrix")] / prof.latency_ns
    assert busy > 0.7
    assert prof.mfu > 60


@pytest.mark.parametrize(
    ("shapes", "dtypes", "kw", "match"),
    [
        pytest.param(((4, 5), (4, 3), (3, 6)), "fff", {}, "do not chain", id="chain"),
        pytest.param(((4, 5), (4, 3), (3, 5)), "fbf", {}, "same dtype", id="mixed"),
        pytest.param(((4, 5), (4, 3), (3, 5)), "fii", {}, "dtype int32", id="int"),
        pytest.param(((5,), (4, 3), (3, 5)), "fff", {}, "at least 2 dims", id="rank"),
        pytest.param(((2, 4, 5), (3, 4, 3), (3, 5)), "fff", {}, "batch dim 0", id="batch"),
        pytest.param(((4, 5), (4, 3), (3, 5)), "fff", {"alpha": float("nan")}, "finite",
                     id="alpha"),
    ],
)
def test_gemm_rejects_bad_operands(shapes, dtypes, kw, match):
    dt = {"f": np.float32, "b": BF16, "i": np.int32}
    out, a, b = (np.zeros(s, dt[d]) for s, d in zip(shapes, dtypes, strict=True))
    assert_rejected_views(match, gm.gemm, out, a, b, **kw)


def test_gemm_rejects_unbroadcastable_addend():
    """c is keyword-only: the error is located at the line calling gemm (here, a lambda)."""
    z = np.zeros((4, 5), np.float32)
    with pytest.raises(ConstraintError, match="does not broadcast") as exc:
        launch(lambda o, x, y, c: gm.gemm(o, x, y, c=c), z, np.zeros((4, 3), np.float32),
               np.zeros((3, 5), np.float32), np.zeros((3,), np.float32))
    assert exc.value.loc.filename == __file__
    assert "gm.gemm(o, x, y, c=c)" in exc.value.loc.code


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_gemm_random_shapes_and_layouts(seed):
    rng = np.random.default_rng(1000 + seed)
    m, k, n = (int(x) for x in rng.integers(1, 700, size=3))
    dtype = (np.float32, BF16, np.float16)[seed % 3]
    layouts = ("nn", "nt", "tn", "tt")[seed % 4]
    chip = ("trn3", "trn2", "trn1")[seed % 3]
    kind = ("row", "column", "full", None)[seed % 4]
    c = None if kind is None else _bias(rng, kind, m, n, dtype)
    got, ref = _run(rng, m, k, n, dtype, layouts, chip=chip, c=c, alpha=1.5, beta=0.5)
    assert_close(got, ref, np.dtype(dtype).name, abs_frac=1)


def test_gemm_via_nki_simulate_plain_arrays(rng):
    """The device kernel also runs on plain arrays (contiguous views)."""
    a, b = randn(rng, (8, 9), np.float32), randn(rng, (9, 10), np.float32)
    out = np.zeros((8, 10), np.float32)
    nki.simulate(lambda o, x, y: gm.gemm(o, x, y))(out, a, b)
    assert_close(out, gm.gemm_ref(a, b), "float32", abs_frac=1)
