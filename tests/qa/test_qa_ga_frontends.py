"""QA: entry points (nki.jit, NKI_SIMULATOR=1, nki.simulate, kernel[2]), torch CPU tensors,
low-precision numpy inputs (ml_dtypes), trn2 vs trn3 selection, nl convenience wrappers."""

from __future__ import annotations

import math

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim.errors import ConstraintError

torch = pytest.importorskip("torch")


@nki.jit
def add_one(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_jit_with_nki_simulator_env_and_torch(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    x = torch.randn(64, 32)
    y = add_one(x)
    assert isinstance(y, torch.Tensor)
    assert y.dtype == torch.float32
    assert torch.equal(y, x + 1)


def test_jit_torch_bf16_roundtrip(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    x = torch.randn(32, 16, dtype=torch.bfloat16)
    y = add_one(x)
    assert y.dtype == torch.bfloat16
    assert torch.equal(y, (x.float() + 1).bfloat16())


def test_simulate_accepts_jit_kernel_and_numpy():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = nki.simulate(add_one)(x)
    assert isinstance(y, np.ndarray)
    np.testing.assert_array_equal(y, x + 1)


@pytest.mark.parametrize(
    "dtype", [ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]
)
def test_low_precision_numpy_inputs_keep_dtype(dtype):
    x = np.array([[0.5, 1.0, 2.0, -3.0]], dtype=dtype)
    y = nki.simulate(add_one)(x)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y, (x.astype(np.float32) + 1).astype(dtype))


def test_float64_input_is_a_clear_error():
    with pytest.raises(ConstraintError, match="float64"):
        nki.simulate(add_one)(np.zeros((2, 2), np.float64))


def _version_kernel(dummy):
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=int(nisa.get_nc_version()))
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize(("target", "gen"), [("trn2", 3), ("gen3", 3), ("trn3", 4), ("gen4", 4)])
def test_platform_target_env(monkeypatch, target, gen):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    out = nki.simulate(_version_kernel)(np.zeros((1, 1), np.float32))
    assert int(out[0, 0]) == gen


def test_default_target_is_trn3(monkeypatch):
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    out = nki.simulate(_version_kernel)(np.zeros((1, 1), np.float32))
    assert int(out[0, 0]) == 4


def test_bad_platform_target_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9")
    with pytest.raises(ConstraintError, match="trn9"):
        nki.simulate(_version_kernel)(np.zeros((1, 1), np.float32))


@pytest.mark.parametrize(("target", "gen"), [("trn1", 2), ("gen3", 3), ("trn3", 4)])
def test_jit_platform_target_names_the_chip(monkeypatch, target, gen):
    """@nki.jit(platform_target=...) picks the chip (AWS's trn3 MX tutorial passes it; NKI
    0.3.0 refused it, later releases take **kwargs again); an explicit chip= still wins."""
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    out = nki.jit(_version_kernel, platform_target=target)(np.zeros((1, 1), np.float32))
    assert int(out[0, 0]) == gen
    out = nki.jit(_version_kernel, platform_target=target, chip="trn2")(
        np.zeros((1, 1), np.float32))
    assert int(out[0, 0]) == 3


def test_jit_bad_platform_target_names_the_allowed_ones():
    with pytest.raises(ConstraintError, match=r"platform_target='trn9'.*trn1 \(inf2, gen2\)"):
        nki.jit(_version_kernel, platform_target="trn9")


def wide_matmul(a_t, b):
    """N = 1024 in one nc_matmul: legal on trn3 (up to 8 PSUM banks), not on trn2."""
    k, m = a_t.shape
    _, n = b.shape
    at = nl.ndarray((k, m), dtype=a_t.dtype, buffer=nl.sbuf)
    bt = nl.ndarray((k, n), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=at, src=a_t)
    nisa.dma_copy(dst=bt, src=b)
    ps = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=at, moving=bt)
    o = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=ps)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=o)
    return out


def test_trn3_allows_wide_moving_trn2_rejects(rng, monkeypatch):
    a_t = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((64, 1024)).astype(np.float32)
    out = nki.simulate(wide_matmul, chip="trn3")(a_t, b)
    np.testing.assert_allclose(out, a_t.astype(np.float64).T @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(ConstraintError, match="1024") as exc:
        nki.simulate(wide_matmul, chip="trn2")(a_t, b)
    assert "512" in str(exc.value)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    with pytest.raises(ConstraintError, match="gemm_moving_fmax"):
        nki.simulate(wide_matmul)(a_t, b)


def test_tile_size_follows_chip():
    seen = {}

    def kernel(dummy):
        seen["v"] = nl.tile_size.gemm_moving_fmax
        return dummy

    nki.simulate(kernel, chip="trn2")(np.zeros((1, 1), np.float32))
    assert seen["v"] == 512
    assert nl.tile_size.pmax == 128
    assert nl.tile_size.gemm_stationary_fmax == 128


def exp_vector_engine(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.exponential(dst=t, src=t, max_value=1.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_trn3_only_instruction(rng):
    x = rng.standard_normal((16, 16)).astype(np.float32)
    out = nki.simulate(exp_vector_engine)(x)
    np.testing.assert_allclose(out, np.exp(x.astype(np.float64) - 1), rtol=1e-5)
    with pytest.raises(ConstraintError, match="trn2"):
        nki.simulate(exp_vector_engine, chip="trn2")(x)


# ---------------------------------------------------------------- nl convenience wrappers


def nl_linear(x_t, w):
    xt = nl.load(x_t)
    wt = nl.load(w)
    ps = nl.matmul(xt, wt, transpose_x=True)
    y = nl.ndarray(ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=y, src=ps)
    act = nl.gelu(y)
    out = nl.ndarray(y.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=act)
    return out


def test_nl_matmul_gelu(rng):
    x_t = rng.standard_normal((64, 32)).astype(np.float32)
    w = rng.standard_normal((64, 80)).astype(np.float32)
    out = nki.simulate(nl_linear)(x_t, w)
    y = x_t.astype(np.float64).T @ w
    ref = 0.5 * y * (1 + np.vectorize(math.erf)(y / math.sqrt(2)))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def nl_matmul_untransposed(x, w):
    ps = nl.matmul(nl.load(x), nl.load(w))
    y = nl.ndarray(ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=y, src=ps)
    out = nl.ndarray(y.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=y)
    return out


def test_nl_matmul_inserts_transpose(rng):
    x = rng.standard_normal((32, 64)).astype(np.float32)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    out = nki.simulate(nl_matmul_untransposed)(x, w)
    np.testing.assert_allclose(out, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)


def nl_elementwise_mix(a, b):
    ta = nl.load(a)
    tb = nl.load(b)
    m = nl.maximum(ta, tb)
    s = nl.silu(m)
    r = nl.sum(s, axis=1, keepdims=True)
    mean = nl.mean(ta, axis=1, keepdims=True)
    w = nl.where(nl.greater(ta, tb), ta, tb)
    outs = []
    for v in (s, r, mean, w):
        o = nl.ndarray(v.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o, value=v)
        outs.append(o)
    return tuple(outs)


def test_nl_elementwise_reductions_where(rng):
    a = rng.standard_normal((16, 40)).astype(np.float32)
    b = rng.standard_normal((16, 40)).astype(np.float32)
    s, r, mean, w = nki.simulate(nl_elementwise_mix)(a, b)
    m = np.maximum(a, b).astype(np.float64)
    silu = m / (1 + np.exp(-m))
    np.testing.assert_allclose(s, silu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r, silu.sum(1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean, a.astype(np.float64).mean(1, keepdims=True), atol=1e-6)
    np.testing.assert_array_equal(w, np.maximum(a, b))


def nl_copy_from_psum_then_store(x_t, w):
    """NKI 0.6.0 docs idiom: `result = nl.copy(result_psum)  # PSUM -> SBUF`, then store."""
    ps = nl.matmul(nl.load(x_t), nl.load(w), transpose_x=True)
    res = nl.copy(ps)
    out = nl.ndarray(res.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=res)
    return out


def test_nl_copy_psum_to_sbuf_idiom(rng):
    x_t = rng.standard_normal((32, 16)).astype(np.float32)
    w = rng.standard_normal((32, 24)).astype(np.float32)
    out = nki.simulate(nl_copy_from_psum_then_store)(x_t, w)
    np.testing.assert_allclose(out, x_t.astype(np.float64).T @ w, rtol=1e-4, atol=1e-4)


@nki.jit
def double_in_place(a):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=a, src=t)


def test_torch_input_updated_in_place(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    x = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    double_in_place(x)
    assert torch.equal(x, torch.arange(16, dtype=torch.float32).reshape(4, 4) * 2)


def test_fp8_matmul_exact_products(rng):
    a_t = rng.standard_normal((128, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((128, 96)).astype(ml_dtypes.float8_e4m3fn)
    out = nki.simulate(wide_matmul)(a_t, b)
    ref = a_t.astype(np.float64).T @ b.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)


def _psum_copy_kernel(copy_dtype, dst_dtype):
    def kernel(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        ps = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=ps, src=t)
        sb = nl.ndarray(a.shape, dtype=dst_dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps, dtype=copy_dtype)
        out = nl.ndarray(a.shape, dtype=dst_dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=sb)
        return out

    return kernel


def test_tensor_copy_takes_a_dtype_that_dst_decides(recwarn):
    """nisa.tensor_copy(dst=, src=, dtype=): not in the documented GA signature, but AWS's
    current tutorials pass it (nki-samples matmul and MX tutorials). dst's dtype is the output
    dtype; a dtype= that names another is ignored with a warning at the kernel's line."""
    import warnings

    from trnsim.errors import SimulationWarning

    a = np.random.default_rng(5).standard_normal((128, 64)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SimulationWarning)
        same = nki.simulate(_psum_copy_kernel(nl.bfloat16, nl.bfloat16))(a)
    np.testing.assert_array_equal(same.astype(np.float32),
                                  a.astype(ml_dtypes.bfloat16).astype(np.float32))
    with pytest.warns(SimulationWarning, match="dtype=bfloat16 is ignored: dst's dtype float32"):
        other = nki.simulate(_psum_copy_kernel(nl.bfloat16, nl.float32))(a)
    np.testing.assert_array_equal(other, a)
    with pytest.raises(ConstraintError, match="unknown dtype"):
        nki.simulate(_psum_copy_kernel("float99", nl.float32))(a)
