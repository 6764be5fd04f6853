"""Vector reductions, scans and the shared accumulator registers vs numpy computed another way
(nki-api.md §7.3, §8.3): tensor_reduce, tensor_scalar_reduce, tensor_scalar_cumulative,
tensor_tensor_scan, exponential, scalar_tensor_tensor's 0.7.0 reduction."""

from __future__ import annotations

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from vector_helpers import BF16, load, op, run, store, tile

P, N = 8, 32
CMD = nisa.reduce_cmd


def _np_reduce(name, x, axes):
    x = x.astype(np.float64)
    if name == "subtract":
        flat = x.reshape(*x.shape[: axes[0]], -1)
        return flat[..., 0] - flat[..., 1:].sum(-1)
    fn = {"add": np.sum, "multiply": np.prod, "maximum": np.max, "minimum": np.min}[name]
    return fn(x, axis=axes)


# ---------------------------------------------------------------- tensor_reduce


@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "minimum", "subtract"])
@pytest.mark.parametrize(
    ("shape", "axis"),
    [((P, N), 1), ((P, 4, 8), (1, 2)), ((P, 2, 4, 4), (2, 3)), ((P, 2, 2, 2, 4), -1)],
)
def test_tensor_reduce_arith(rng, name, shape, axis):
    a = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    axes = tuple(sorted(x % len(shape) for x in (axis if isinstance(axis, tuple) else (axis,))))
    kept = shape[1 : axes[0]]

    def kernel(a):
        z = tile((P, *kept) if kept else (P, 1), nl.float32)
        nisa.tensor_reduce(dst=z, op=op(name), data=load(a), axis=axis)
        return store(z)

    ref = _np_reduce(name, a, axes).astype(np.float32)
    np.testing.assert_allclose(run(kernel, a).reshape(ref.shape), ref, rtol=1e-6)


def test_tensor_reduce_negate_keepdims_psum_bf16(rng):
    a = rng.standard_normal((P, 4, 8)).astype(BF16)

    def kernel(a):
        z = tile((P, 4, 1), nl.bfloat16, "psum")
        nisa.tensor_reduce(
            dst=z, op=op("add"), data=load(a, "psum"), axis=2, negate=True, keepdims=True
        )
        return store(z)

    ref = (-a.astype(np.float64).sum(axis=2, keepdims=True)).astype(np.float32).astype(BF16)
    np.testing.assert_array_equal(run(kernel, a), ref)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor"])
def test_tensor_reduce_bitvec_on_integer_bits(rng, name):
    a = rng.integers(-(2**31), 2**31, (P, N), dtype=np.int64).astype(np.int32)
    fn = {
        "bitwise_and": np.bitwise_and,
        "bitwise_or": np.bitwise_or,
        "bitwise_xor": np.bitwise_xor,
    }[name]

    def kernel(a):
        z = tile((P, 1), nl.int32)
        nisa.tensor_reduce(dst=z, op=op(name), data=load(a), axis=1)
        return store(z)

    np.testing.assert_array_equal(run(kernel, a), fn.reduce(a, axis=1, keepdims=True))


def test_tensor_reduce_logical_ops():
    a = np.array([[0, 1, 2, 3], [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 5, 0]], np.float32)

    def kernel(a):
        outs = []
        for name in ("logical_and", "logical_or", "logical_xor"):
            z = tile((4, 1), nl.float32)
            nisa.tensor_reduce(dst=z, op=op(name), data=load(a), axis=1)
            outs.append(store(z))
        return tuple(outs)

    land, lor, lxor = run(kernel, a)
    nz = a != 0
    np.testing.assert_array_equal(land[:, 0], nz.all(1))
    np.testing.assert_array_equal(lor[:, 0], nz.any(1))
    np.testing.assert_array_equal(lxor[:, 0], nz.sum(1) % 2)


# ---------------------------------------------------------------- tensor_scalar_reduce


def test_tensor_scalar_reduce_reset_then_reduce_chain(rng):
    a = rng.standard_normal((P, N)).astype(np.float32)
    b = rng.standard_normal((P, 2, 8)).astype(np.float32)

    def kernel(a, b):
        r1 = tile((P, 1), nl.float32)
        r2 = tile((P, 1), nl.float32)
        d1 = tile(a.shape, nl.float32)
        d2 = tile(b.shape, nl.bfloat16)
        nisa.tensor_scalar_reduce(
            dst=d1,
            data=load(a),
            op0=op("multiply"),
            operand0=2.0,
            reduce_op=op("add"),
            reduce_res=r1,
            reduce_cmd=CMD.reset_reduce,
        )
        nisa.tensor_scalar_reduce(
            dst=d2,
            data=load(b, "psum"),
            op0=op("add"),
            operand0=1.0,
            reduce_op=op("add"),
            reduce_res=r2,
            reduce_cmd=CMD.reduce,
        )
        return store(d1), store(d2), store(r1), store(r2)

    d1, d2, r1, r2 = run(kernel, a, b)
    t1 = (a.astype(np.float64) * 2).astype(np.float32)
    t2 = (b.astype(np.float64) + 1).astype(np.float32)
    np.testing.assert_array_equal(d1, t1)
    np.testing.assert_array_equal(d2, t2.astype(BF16))
    s1 = t1.astype(np.float64).sum(1, keepdims=True).astype(np.float32)
    np.testing.assert_allclose(r1, s1, rtol=1e-6)
    # the second instruction accumulates onto the first one's registers (fp32 values)
    s2 = s1.astype(np.float64) + t2.reshape(P, -1).astype(np.float64).sum(1, keepdims=True)
    np.testing.assert_allclose(r2, s2.astype(np.float32), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["maximum", "minimum", "multiply"])
def test_tensor_scalar_reduce_ops_load_reduce_and_negate(rng, name):
    a = rng.uniform(0.5, 1.5, (P, 8)).astype(np.float32)
    init = rng.uniform(0.5, 1.5, (P, 1)).astype(np.float32)

    def kernel(a, init):
        r = tile((P, 1), nl.float32)
        d = tile(a.shape, nl.float32)
        nisa.tensor_scalar_reduce(
            dst=d,
            data=load(a),
            op0=op("subtract"),
            operand0=0.25,
            reverse0=True,
            reduce_op=op(name),
            reduce_res=r,
            reduce_cmd=CMD.load_reduce,
            reduce_init=load(init),
            reduce_res_negate=True,
        )
        return store(r)

    t = (np.float64(0.25) - a).astype(np.float32).astype(np.float64)
    fn = {"maximum": np.max, "minimum": np.min, "multiply": np.prod}[name]
    comb = {"maximum": np.maximum, "minimum": np.minimum, "multiply": np.multiply}[name]
    ref = -comb(init.astype(np.float64), fn(t, axis=1, keepdims=True).astype(np.float32))
    np.testing.assert_allclose(run(kernel, a, init), ref.astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize(
    ("name", "ident"),
    [("add", 0.0), ("multiply", 1.0), ("maximum", -np.inf), ("minimum", np.inf)],
)
def test_reset_sets_the_reduction_identity(rng, name, ident):
    """reduce_cmd=reset clears the registers to the op's identity (nki-api.md §8.1, §8.3)."""
    a = rng.standard_normal((P, 8)).astype(np.float32)

    def kernel(a):
        d = tile(a.shape, nl.float32)
        r = tile((P, 1), nl.float32)
        nisa.tensor_scalar_reduce(
            dst=d,
            data=load(a),
            op0=op("add"),
            operand0=0.0,
            reduce_op=op(name),
            reduce_cmd=CMD.reset_reduce,
        )
        nisa.tensor_scalar_reduce(
            dst=d,
            data=load(a),
            op0=op("add"),
            operand0=0.0,
            reduce_op=op(name),
            reduce_res=r,
            reduce_cmd=CMD.reset,
        )
        return store(r)

    np.testing.assert_array_equal(run(kernel, a), np.full((P, 1), ident, np.float32))


def test_tensor_scalar_reduce_without_reduce_res_keeps_registers_internal(rng):
    a = rng.standard_normal((P, N)).astype(np.float32)
    b = rng.standard_normal((P, N)).astype(np.float32)

    def kernel(a, b):
        d = tile(a.shape, nl.float32)
        nisa.tensor_scalar_reduce(
            dst=d, data=load(a), op0=op("add"), operand0=0.0, reduce_op=op("maximum")
        )
        r = tile((P, 1), nl.float32)
        nisa.tensor_scalar_reduce(
            dst=d,
            data=load(b),
            op0=op("add"),
            operand0=0.0,
            reduce_op=op("maximum"),
            reduce_res=r,
            reduce_cmd=CMD.reduce,
        )
        return store(r)

    ref = np.maximum(a.max(1), b.max(1))[:, None]
    np.testing.assert_array_equal(run(kernel, a, b), ref)


# ---------------------------------------------------------------- tensor_scalar_cumulative


def _seq_scan(op1, v, reg):
    """The documented loop, one fp32 step at a time."""
    out = np.empty(v.shape, np.float32)
    for p in range(v.shape[0]):
        r = np.float32(reg[p])
        for i in range(v.shape[1]):
            x = np.float32(v[p, i])
            r = {
                "add": x + r,
                "subtract": x - r,
                "multiply": x * r,
                "maximum": max(x, r),
                "minimum": min(x, r),
            }[op1]
            out[p, i] = r
    return out


@pytest.mark.parametrize("op1", ["add", "subtract", "multiply", "maximum", "minimum"])
def test_tensor_scalar_cumulative_reset_reduce(rng, op1):
    a = rng.uniform(0.9, 1.1, (P, 4, 4)).astype(np.float32)

    def kernel(a):
        d = tile(a.shape, nl.float32)
        nisa.tensor_scalar_cumulative(
            dst=d,
            src=load(a),
            op0=op("multiply"),
            op1=op(op1),
            imm0=1.5,
            reduce_cmd=CMD.reset_reduce,
        )
        return store(d)

    v = (a.reshape(P, -1).astype(np.float64) * 1.5).astype(np.float32)
    ident = {"add": 0, "subtract": 0, "multiply": 1, "maximum": -np.inf, "minimum": np.inf}
    ref = _seq_scan(op1, v, np.full(P, ident[op1], np.float32)).reshape(a.shape)
    np.testing.assert_array_equal(run(kernel, a), ref)


def test_tensor_scalar_cumulative_load_then_reduce_chain(rng):
    a = rng.standard_normal((P, 8)).astype(np.float32)
    b = rng.standard_normal((P, 8)).astype(BF16)
    init = rng.standard_normal((P, 1)).astype(np.float32)

    def kernel(a, b, init):
        d1 = tile(a.shape, nl.float32)
        nisa.tensor_scalar_cumulative(
            dst=d1,
            src=load(a),
            op0=op("add"),
            op1=op("add"),
            imm0=load(init),
            imm1=load(init),
            reduce_cmd=CMD.load_reduce,
        )
        d2 = tile(b.shape, nl.bfloat16)
        nisa.tensor_scalar_cumulative(
            dst=d2,
            src=load(b, "psum"),
            op0=op("subtract"),
            op1=op("add"),
            imm0=0.5,
            reduce_cmd=CMD.reduce,
        )
        return store(d1), store(d2)

    d1, d2 = run(kernel, a, b, init)
    v1 = (a.astype(np.float64) + init).astype(np.float32)
    r1 = _seq_scan("add", v1, init[:, 0])
    np.testing.assert_array_equal(d1, r1)
    v2 = (b.astype(np.float64) - 0.5).astype(np.float32)
    np.testing.assert_array_equal(d2, _seq_scan("add", v2, r1[:, -1]).astype(BF16))


# ---------------------------------------------------------------- tensor_tensor_scan


@pytest.mark.parametrize(
    ("op0", "op1", "rev0", "rev1"),
    [
        ("multiply", "add", False, False),
        ("subtract", "maximum", True, False),
        ("add", "subtract", False, True),
    ],
)
def test_tensor_tensor_scan(rng, op0, op1, rev0, rev1):
    a = rng.uniform(0.5, 1.0, (P, 2, 8)).astype(np.float32)
    b = rng.standard_normal((P, 16)).astype(np.float32)
    init = rng.standard_normal((P, 1)).astype(np.float32)

    def kernel(a, b, init):
        d = tile((P, 16), nl.float32)
        nisa.tensor_tensor_scan(
            dst=d,
            data0=load(a, "psum"),
            data1=load(b),
            initial=load(init),
            op0=op(op0),
            op1=op(op1),
            reverse0=rev0,
            reverse1=rev1,
        )
        return store(d)

    f = {
        "add": lambda x, y: x + y,
        "subtract": lambda x, y: x - y,
        "multiply": lambda x, y: x * y,
        "maximum": max,
    }
    ref = np.empty((P, 16), np.float32)
    a2 = a.reshape(P, 16)
    for p in range(P):
        r = np.float32(init[p, 0])
        for i in range(16):
            t = f[op0](r, a2[p, i]) if rev0 else f[op0](a2[p, i], r)
            r = np.float32(f[op1](b[p, i], t) if rev1 else f[op1](t, b[p, i]))
            ref[p, i] = r
    np.testing.assert_array_equal(run(kernel, a, b, init), ref)


def test_tensor_tensor_scan_scalar_initial_is_linear_recurrence():
    a = np.full((2, 5), 0.5, np.float32)
    b = np.ones((2, 5), np.float32)

    def kernel(a, b):
        d = tile(a.shape, nl.float32)
        nisa.tensor_tensor_scan(
            dst=d, data0=load(a), data1=load(b), initial=0.0, op0=op("multiply"), op1=op("add")
        )
        return store(d)

    np.testing.assert_array_equal(run(kernel, a, b)[0], [1, 1.5, 1.75, 1.875, 1.9375])


# ---------------------------------------------------------------- exponential


def test_exponential_with_running_sum_chain(rng):
    a = rng.standard_normal((P, N)).astype(np.float32)
    b = rng.standard_normal((P, 4, 4)).astype(BF16)
    m = a.max(1, keepdims=True)

    def kernel(a, b, m):
        e1 = tile(a.shape, nl.float32)
        r1 = tile((P, 1), nl.float32)
        nisa.exponential(
            dst=e1, src=load(a), max_value=load(m), reduce_res=r1, reduce_cmd=CMD.reset_reduce
        )
        e2 = tile(b.shape, nl.bfloat16)
        r2 = tile((P, 1), nl.float32)
        nisa.exponential(
            dst=e2, src=load(b, "psum"), max_value=1.0, reduce_res=r2, reduce_cmd=CMD.reduce
        )
        return store(e1), store(e2), store(r1), store(r2)

    e1, e2, r1, r2 = run(kernel, a, b, m)
    # the subtraction rounds to fp32 before exp (fp32 math inside the engine)
    x1 = np.exp((a.astype(np.float64) - m).astype(np.float32).astype(np.float64))
    x2 = np.exp((b.astype(np.float64) - 1.0).astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(e1, x1, rtol=2e-7)
    np.testing.assert_allclose(e2.astype(np.float64), x2, rtol=2**-8)
    np.testing.assert_allclose(r1[:, 0], x1.sum(1), rtol=1e-6)
    np.testing.assert_allclose(r2[:, 0], x1.sum(1) + x2.reshape(P, -1).sum(1), rtol=1e-6)


def test_exponential_load_reduce_and_idle_keeps_registers(rng):
    a = rng.standard_normal((P, 8)).astype(np.float32)

    def kernel(a):
        e = tile(a.shape, nl.float32)
        r = tile((P, 1), nl.float32)
        nisa.exponential(dst=e, src=load(a), reduce_cmd=CMD.load_reduce, reduce_init=10.0)
        nisa.exponential(dst=e, src=load(a), reduce_res=r)  # idle: registers untouched
        return store(r)

    np.testing.assert_allclose(
        run(kernel, a)[:, 0], 10 + np.exp(a.astype(np.float64)).sum(1), rtol=1e-6
    )


def test_scalar_tensor_tensor_reduce_0_7(rng):
    a = rng.standard_normal((P, N)).astype(np.float32)
    b = rng.standard_normal((P, N)).astype(np.float32)

    def kernel(a, b):
        d = tile(a.shape, nl.float32)
        r = tile((P, 1), nl.float32)
        nisa.scalar_tensor_tensor(
            dst=d,
            data=load(a),
            op0=op("multiply"),
            operand0=2.0,
            op1=op("add"),
            operand1=load(b),
            reduce_op=op("maximum"),
            reduce_res=r,
        )
        return store(d), store(r)

    d, r = run(kernel, a, b)
    ref = (a.astype(np.float64) * 2).astype(np.float32).astype(np.float64) + b
    np.testing.assert_array_equal(d, ref.astype(np.float32))
    np.testing.assert_array_equal(r[:, 0], ref.astype(np.float32).max(1))


def test_accumulators_are_per_lane(rng):
    """A chain on partitions 32..63 is untouched by a reset of partitions 0..31."""
    a = rng.standard_normal((64, 8)).astype(np.float32)

    def kernel(a):
        x = load(a)
        d = tile((64, 8), nl.float32)
        r = tile((64, 1), nl.float32)
        nisa.tensor_scalar_reduce(
            dst=d,
            data=x,
            op0=op("add"),
            operand0=0.0,
            reduce_op=op("add"),
            reduce_cmd=CMD.reset_reduce,
        )
        nisa.tensor_scalar_reduce(
            dst=d[0:32],
            data=x[0:32],
            op0=op("add"),
            operand0=0.0,
            reduce_op=op("add"),
            reduce_cmd=CMD.reset,
        )
        nisa.tensor_scalar_reduce(
            dst=d,
            data=x,
            op0=op("multiply"),
            operand0=0.0,
            reduce_op=op("add"),
            reduce_res=r,
            reduce_cmd=CMD.reduce,
        )
        return store(r)

    r = run(kernel, a)[:, 0]
    np.testing.assert_array_equal(r[:32], 0)
    np.testing.assert_allclose(r[32:], a[32:].astype(np.float64).sum(1), rtol=1e-6)


def test_int32_arithmetic_reduce_is_fp32(rng):
    a = np.full((4, 4), 2**24 + 1, np.int32)

    def kernel(a):
        z = tile((4, 1), nl.int32)
        nisa.tensor_reduce(dst=z, op=op("maximum"), data=load(a), axis=1)
        return store(z)

    np.testing.assert_array_equal(run(kernel, a), np.full((4, 1), 2**24, np.int32))
