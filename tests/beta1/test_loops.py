"""Beta-1 loops: iteration records, the affine_range independence check, and the difference
from the B1 tracer (trnsim runs every iteration)."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from b1_testing import check_located

from trnsim.errors import ConstraintError
from trnsim.nki.runner import record_launches, stop_recording

X = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)


def _program(kernel, *args):
    sink = []
    token = record_launches(sink)
    try:
        out = nki.jit(kernel)(*args)
    finally:
        stop_recording(token)
    return out, sink[-1].program


def test_iterations_are_recorded_with_their_loop():
    def kernel(x):
        out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            t = nl.exp(nl.load(x[:, i * 128 : (i + 1) * 128]))
            nl.store(out[:, i * 128 : (i + 1) * 128], value=t)
        return out

    out, program = _program(kernel, X)
    np.testing.assert_allclose(out, np.exp(X), rtol=1e-6)
    acts = [ins for ins in program if ins.opcode == "activation"]
    assert [ins.loops[-1][1:] for ins in acts] == [("affine_range", i) for i in range(4)]


def test_python_side_effects_run_every_iteration():
    counter = {"n": 0}

    def kernel(x):
        out = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.shared_hbm)
        for _ in nl.affine_range(8):
            counter["n"] += 1  # the B1 tracer would run this once
        nl.store(out, value=nl.load(x[0:1, 0:1]))
        return out

    nki.jit(kernel)(X)
    assert counter["n"] == 8


def test_accumulations_are_allowed_in_affine_range():
    def kernel(x):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 128), dtype=nl.float32)
        psum = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.psum)
        for i in nl.affine_range(4):
            t = nl.load(x[:, i * 128 : (i + 1) * 128])
            acc += t
            psum[...] += nisa.nc_matmul(t, t)
        nl.store(out, value=nl.add(acc, psum))
        return out

    blocks = [X[:, i * 128 : (i + 1) * 128] for i in range(4)]
    want = sum(blocks) + sum(b.T @ b for b in blocks)
    np.testing.assert_allclose(nki.jit(kernel)(X), want, rtol=1e-4, atol=1e-3)


def test_fresh_tiles_per_iteration_are_independent():
    def kernel(x):
        out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            tmp = nl.ndarray((128, 128), dtype=nl.float32)
            tmp[...] = nl.load(x[:, i * 128 : (i + 1) * 128])
            tmp[...] = nl.multiply(tmp, 2.0)
            nl.store(out[:, i * 128 : (i + 1) * 128], value=tmp)
        return out

    np.testing.assert_allclose(nki.jit(kernel)(X), 2 * X)


def test_loop_carried_read_is_an_error_at_the_read():
    def kernel(x):
        out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        prev = nl.zeros((128, 128), dtype=nl.float32)
        for i in nl.affine_range(4):
            cur = nl.load(x[:, i * 128 : (i + 1) * 128])
            prev[...] = nl.maximum(prev, cur)
        nl.store(out, value=prev)
        return out

    with pytest.raises(ConstraintError, match=r"earlier iteration of nl\.affine_range") as exc:
        nki.jit(kernel)(X)
    assert exc.value.code == "err_loop_carried_dependency"
    assert "nl.sequential_range" in str(exc.value)
    check_located(exc, kernel, "prev[...] = nl.maximum")


def test_outer_loop_dependency_is_attributed_to_the_outer_loop():
    def kernel(x):
        out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.zeros((128, 128), dtype=nl.float32)
        for _i in nl.affine_range(2):
            for _j in nl.affine_range(1):
                t[...] = nl.add(t, 1.0)
        nl.store(out, value=t)
        return out

    with pytest.raises(ConstraintError, match=r"iteration 1 depends on it") as exc:
        nki.jit(kernel)(X)
    check_located(exc, kernel, "t[...] = nl.add(t, 1.0)")


def test_sequential_and_static_range_allow_dependencies():
    def kernel(x):
        out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 128), dtype=nl.float32)
        for i in nl.sequential_range(2):
            acc[...] = nl.add(acc, nl.load(x[:, i * 128 : (i + 1) * 128]))
        for i in nl.static_range(2, 4):
            acc[...] = nl.add(acc, nl.load(x[:, i * 128 : (i + 1) * 128]))
        for _ in range(4):  # plain Python range behaves as sequential_range
            acc[...] = nl.add(acc, 0.0)
        nl.store(out, value=acc)
        return out

    want = sum(X[:, i * 128 : (i + 1) * 128] for i in range(4))
    np.testing.assert_allclose(nki.jit(kernel)(X), want, rtol=1e-5)


def test_distinct_slices_written_per_iteration_are_fine():
    def kernel(x):
        out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((128, 512), dtype=nl.float32)
        for i in nl.affine_range(4):
            buf[:, i * 128 : (i + 1) * 128] = nl.load(x[:, i * 128 : (i + 1) * 128])
        nl.store(out, value=buf)
        return out

    np.testing.assert_array_equal(nki.jit(kernel)(X), X)


def test_sequential_range_takes_a_no_reorder_directive():
    """nl.sequential_range(n, directives=ncc.no_reorder()) (AWS's attention tutorial,
    attn_fwd_v11): the loop's instructions carry the no_reorder marker the timing model's
    compiler order honours; values unchanged. Anything else as a directive is refused."""
    import neuronxcc.nki.compiler as ncc

    def kernel(x, directives):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for k in nl.sequential_range(x.shape[0] // 128, directives=directives):
            t = nl.load(x[k * 128:(k + 1) * 128, :])
            nl.store(out[k * 128:(k + 1) * 128, :], value=nl.exp(t))
        return out

    x = np.concatenate([X, X])
    out, program = _program(lambda x: kernel(x, ncc.no_reorder()), x)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-5)
    assert program and all(any(k == "no_reorder" for _, k, _ in ins.loops) for ins in program)
    _, plain = _program(lambda x: kernel(x, None), x)
    assert not any(any(k == "no_reorder" for _, k, _ in ins.loops) for ins in plain)
    with pytest.raises(ConstraintError, match="directives=3 is not a compiler directive"):
        nki.jit(lambda x: kernel(x, 3))(x)
