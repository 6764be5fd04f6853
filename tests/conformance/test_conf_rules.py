"""Rules checked against their documented scope (issue 12, class 2): what the documentation
allows runs, and the documented refusals still raise."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from trnsim.errors import ConstraintError, KernelError, SimulationWarning

RNG = np.random.default_rng(12)
A = RNG.standard_normal((32, 16)).astype(np.float32)
B = RNG.standard_normal((32, 16)).astype(np.float32)
MASK = A > 0.25


def test_bool_predicates_are_uint8_predicates():
    """bool is "stored as uint8" (NKI supported data types), so both predicated copies take
    one: tensor_copy_predicated keeps dst where false, select_reduce picks and reduces."""

    @nki.jit(mode="simulation")
    def kernel(pred, x, y):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        sel = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        top = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
        p, tx, ty = nl.load(pred), nl.load(x), nl.load(y)
        nisa.tensor_copy_predicated(src=tx, dst=ty, predicate=p)
        nl.store(out, ty)
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.select_reduce(
            dst=d,
            predicate=p,
            on_true=tx,
            on_false=-5.0,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            reduce_res=r,
            reduce_op=nl.max,
        )
        nl.store(sel, d)
        nl.store(top, r)
        return out, sel, top

    out, sel, top = kernel(MASK, A, B)
    np.testing.assert_array_equal(out, np.where(MASK, A, B))
    picked = np.where(MASK, A, -5.0).astype(np.float32)
    np.testing.assert_array_equal(sel, picked)
    np.testing.assert_array_equal(top[:, 0], picked.max(axis=1))


def test_float_predicates_are_still_refused():
    @nki.jit(mode="simulation")
    def kernel(x, y):
        tx, ty = nl.load(x), nl.load(y)
        nisa.tensor_copy_predicated(src=tx, dst=ty, predicate=tx)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, ty)
        return out

    with pytest.raises(ConstraintError, match="'predicate' has dtype float32; allowed: uint8"):
        kernel(A, B)


def test_python_and_between_masks_keeps_the_right_operand_and_warns():
    """AWS's simulator treats a mask as truthy, so `a and b` is b (its nc_match_replace8
    example relies on it); the B1 known issues say the compiler does not support `and`."""

    @nki.jit(mode="simulation")
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        ip, jf = nl.mgrid[0:32, 0:16]
        r = nl.zeros((32, 16), dtype=x.dtype)
        r[ip, jf] = nl.multiply(t[ip, jf], 2.0, mask=(ip < 8 and jf < 4))
        nl.store(out, r)
        return out

    with pytest.warns(SimulationWarning, match="keeps only b"):
        got = kernel(A)
    want = np.zeros_like(A)
    want[:, :4] = 2 * A[:, :4]  # only `jf < 4` applied
    np.testing.assert_array_equal(got, want)


def test_a_mask_in_an_if_is_still_control_flow_on_arange():
    @nki.jit(mode="simulation")
    def kernel(x):
        ip = nl.arange(32)[:, None]
        if ip < 3:
            pass
        return x

    with pytest.raises(ConstraintError, match="err_control_flow_condition_depending_on_arange"):
        kernel(A)


def test_simulation_returns_an_sbuf_tile_with_a_warning_but_a_compiled_kernel_refuses():
    def body(x):
        return nl.exp(nl.load(x))

    with pytest.warns(SimulationWarning, match="compiler supports only HBM kernel outputs"):
        got = nki.jit(body, mode="simulation")(A)
    np.testing.assert_allclose(got, np.exp(A), rtol=1e-6)
    with pytest.warns(SimulationWarning):
        np.testing.assert_allclose(nki.simulate_kernel(nki.jit(body), A), np.exp(A), rtol=1e-6)
    with pytest.raises(KernelError, match="top-level tensors must be on HBM"):
        nki.jit(body)(A)


def test_par_dim_on_an_hbm_tensor_marks_nothing():
    @nki.jit(mode="simulation")
    def kernel(x):
        out = nl.ndarray((2, nl.par_dim(16), 16), dtype=x.dtype, buffer=nl.shared_hbm)
        for b in nl.affine_range(2):
            nl.store(out[b], value=nl.load(x[b * 16 : b * 16 + 16, :]))
        return out

    np.testing.assert_array_equal(kernel(A), A.reshape(2, 16, 16))


def test_psum_allocation_function_returns_bank_partition_byte():
    """ncc.psum.alloc's function returns (bank_id, start_partition, byte_addr)."""

    @nki.jit(mode="simulation")
    def kernel(x):
        out = nl.ndarray((16, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        xt = nl.ndarray((nl.par_dim(16), 16), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        xt[...] = nl.load(x[0:16, :])
        acc = nl.ndarray(
            (2, nl.par_dim(16), 16),
            dtype=nl.float32,
            buffer=ncc.psum.alloc(lambda i, p, f: (3 - i[0], 0, 0)),
        )
        for k in nl.affine_range(2):
            acc[k] = nisa.nc_matmul(xt, xt)
        res = nl.ndarray(
            (nl.par_dim(16), 16), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=1024)
        )
        res[...] = nl.add(acc[0], acc[1])
        nl.store(out, res)
        return out

    x16 = A[:16].astype(np.float64)
    np.testing.assert_allclose(kernel(A), 2 * x16.T @ x16, rtol=1e-5, atol=1e-5)


def test_one_partition_starts_anywhere_wider_accesses_keep_the_quadrant_rule():
    @nki.jit(mode="simulation")
    def per_row(x):
        out = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.zeros((8, 4), dtype=nl.float32)
        for i in nl.static_range(8):
            t[i, 1] = i * 3.0
        nl.store(out, t)
        return out

    want = np.zeros((8, 4), np.float32)
    want[:, 1] = 3.0 * np.arange(8)
    np.testing.assert_array_equal(per_row(A), want)

    @nki.jit(mode="simulation")
    def two_rows(x):
        t = nl.zeros((8, 4), dtype=nl.float32)
        t[1:3, :] = 1.0
        return x

    with pytest.raises(ConstraintError, match="2 partitions starting at partition 1"):
        two_rows(A)


def test_a_bare_tile_indexes_a_free_dimension_of_an_sbuf_tensor_at_run_time():
    """`src[ix, offsets[0, i], iz]` is a runtime offset (tensor_copy_dynamic_src example)."""
    src = np.arange(16 * 10 * 3, dtype=np.float32).reshape(16, 10, 3)
    offs = np.array([[7, 2, 9]], np.int32)

    @nki.jit(mode="simulation")
    def kernel(s, o):
        out = nl.ndarray((16, 3, 3), dtype=s.dtype, buffer=nl.shared_hbm)
        st, ot = nl.load(s), nl.load(o)
        res = nl.ndarray((16, 3, 3), dtype=s.dtype, buffer=nl.sbuf)
        ix, _, iz = nl.mgrid[0:16, 0:1, 0:3]
        for i in nl.affine_range(3):
            res[ix, i, iz] = nisa.tensor_copy_dynamic_src(st[ix, ot[0, i], iz])
        nl.store(out, res)
        return out

    np.testing.assert_array_equal(kernel(src, offs), src[:, [7, 2, 9], :])


def test_local_gather_result_is_index_column_by_core_partition_by_element():
    src = RNG.standard_normal((16, 64)).astype(np.float32)
    idx = (RNG.integers(0, 32, (16, 3)) * 2).astype(np.uint16)

    @nki.jit(mode="simulation")
    def kernel(s, i):
        g = nisa.local_gather(nl.load(s), nl.load(i), 2)
        out = nl.ndarray(g.shape, dtype=s.dtype, buffer=nl.shared_hbm)
        nl.store(out, g)
        return out

    got = kernel(src, idx)
    assert got.shape == (16, 3, 16, 2)
    flat = idx.flatten(order="F")  # the core's 48 indices, partition first
    want = np.stack([src[:, flat], src[:, flat + 1]], axis=-1).reshape(16, 3, 16, 2)
    np.testing.assert_array_equal(got, want)
