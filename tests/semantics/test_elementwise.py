"""Element-wise Vector-family instructions vs numpy computed another way (nki-api.md §7.3, §8.1,
§5A): tensor_tensor, tensor_scalar, scalar_tensor_tensor, copies, reciprocal, memset, iota."""

from __future__ import annotations

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from vector_helpers import BF16, load, op, rne_int, run, store, tile

P, N = 8, 16


def _binary_ref(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The exact (float64) result of x <op> y on fp32-representable inputs."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    table = {
        "add": x + y,
        "subtract": x - y,
        "multiply": x * y,
        "divide": x / y,
        "maximum": np.maximum(x, y),
        "minimum": np.minimum(x, y),
        "equal": (x == y) * 1.0,
        "not_equal": (x != y) * 1.0,
        "greater": (x > y) * 1.0,
        "greater_equal": (x >= y) * 1.0,
        "less": (x < y) * 1.0,
        "less_equal": (x <= y) * 1.0,
        "logical_and": ((x != 0) & (y != 0)) * 1.0,
        "logical_or": ((x != 0) | (y != 0)) * 1.0,
        "logical_xor": ((x != 0) ^ (y != 0)) * 1.0,
        "abs_max": np.where(abs(x) > abs(y), x, y),
        "abs_min": np.where(abs(x) < abs(y), x, y),
        "fmod": np.fmod(x, y),
        "mod": x - np.floor(x / y) * y,
    }
    return table[name]


def _tt_kernel(name, space1="sbuf", space2="sbuf", out_dtype=None, engine=None):
    def kernel(a, b):
        x, y = load(a, space1), load(b, space2)
        z = tile(a.shape, out_dtype or a.dtype)
        if engine is None:
            nisa.tensor_tensor(dst=z, data1=x, data2=y, op=op(name))
        else:
            nisa.tensor_tensor(dst=z, data1=x, data2=y, op=op(name), engine=engine)
        return store(z)

    return kernel


ARITH = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "equal",
    "not_equal",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "abs_max",
    "abs_min",
    "fmod",
    "mod",
]


@pytest.mark.parametrize("name", ARITH)
def test_tensor_tensor_fp32_ops_are_correctly_rounded(rng, name):
    a = rng.standard_normal((P, N)).astype(np.float32)
    b = rng.standard_normal((P, N)).astype(np.float32)
    b[0, :4] = a[0, :4]  # ties for comparisons and abs_max/abs_min
    b[1, :4] = -a[1, :4]
    a[2, :2] = 0
    out = run(_tt_kernel(name), a, b)
    np.testing.assert_array_equal(out, _binary_ref(name, a, b).astype(np.float32))


def test_tensor_tensor_power_defaults_to_gpsimd(rng):
    a = rng.uniform(0.5, 2.0, (P, N)).astype(np.float32)
    b = rng.uniform(-2, 2, (P, N)).astype(np.float32)
    out = run(_tt_kernel("power"), a, b)
    np.testing.assert_allclose(out, a.astype(np.float64) ** b, rtol=2e-7)


@pytest.mark.parametrize(("space1", "space2"), [("psum", "sbuf"), ("sbuf", "psum")])
def test_tensor_tensor_one_psum_input(rng, space1, space2):
    a = rng.standard_normal((P, N)).astype(np.float32)
    b = rng.standard_normal((P, N)).astype(np.float32)
    out = run(_tt_kernel("multiply", space1, space2), a, b)
    np.testing.assert_array_equal(out, (a.astype(np.float64) * b).astype(np.float32))


def test_tensor_tensor_bf16_rounds_the_fp32_result_once(rng):
    a = rng.standard_normal((P, N)).astype(BF16)
    b = rng.standard_normal((P, N)).astype(BF16)
    out = run(_tt_kernel("add"), a, b)
    exact = a.astype(np.float64) + b.astype(np.float64)
    np.testing.assert_array_equal(out, exact.astype(np.float32).astype(BF16))
    assert out.dtype == BF16


def test_tensor_tensor_fp16_inputs_fp32_output(rng):
    a = rng.standard_normal((P, N)).astype(np.float16)
    b = rng.standard_normal((P, N)).astype(np.float16)
    out = run(_tt_kernel("multiply", out_dtype=nl.float32), a, b)
    np.testing.assert_array_equal(out, (a.astype(np.float64) * b).astype(np.float32))


def test_tensor_tensor_int32_on_gpsimd_is_exact_and_wraps():
    big = 2**24 + 1
    a = np.array([[big, 2**31 - 1, -5, 70000]] * 4, dtype=np.int32)
    b = np.array([[2, 1, 7, 70000]] * 4, dtype=np.int32)
    for name in ("add", "multiply", "subtract"):
        out = run(_tt_kernel(name), a, b)
        py = {
            "add": lambda x, y: x + y,
            "multiply": lambda x, y: x * y,
            "subtract": lambda x, y: x - y,
        }[name]
        ref = [
            [((py(int(x), int(y)) + 2**31) % 2**32) - 2**31 for x, y in zip(ra, rb, strict=True)]
            for ra, rb in zip(a, b, strict=True)
        ]
        np.testing.assert_array_equal(out, np.array(ref, dtype=np.int32), err_msg=name)
    # the default engine is recorded as GpSimd
    # (int32 operands, all in SBUF: nki-api.md §5A.2)


def test_tensor_tensor_int32_with_psum_uses_vector_fp32_math():
    a = np.full((4, 4), 2**24 + 1, dtype=np.int32)
    b = np.ones((4, 4), dtype=np.int32)
    out = run(_tt_kernel("add", "psum", "sbuf"), a, b)
    ref = rne_int(np.float32(np.float32(2**24 + 1) + np.float32(1)), np.int32)
    np.testing.assert_array_equal(out, np.full((4, 4), ref, dtype=np.int32))
    assert int(ref) != 2**24 + 2  # fp32 cannot hold 2^24 + 1 (precision loss is the point)


def test_tensor_tensor_default_engines_recorded():
    from trnsim.nki.runner import run_kernel

    a = np.ones((4, 4), np.int32)
    run_i = run_kernel(_tt_kernel("add"), (a, a), {})
    run_p = run_kernel(_tt_kernel("add", "psum"), (a, a), {})
    run_f = run_kernel(_tt_kernel("add"), (a.astype(np.float32),) * 2, {})
    eng = [
        next(i.engine for i in r.program if i.opcode == "tensor_tensor")
        for r in (run_i, run_p, run_f)
    ]
    assert eng == ["gpsimd", "vector", "vector"]
    instr = next(i for i in run_i.program if i.opcode == "tensor_tensor")
    assert instr.attrs["op"] == "add"


@pytest.mark.parametrize(
    "name", ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]
)
@pytest.mark.parametrize("dtype", [np.int32, np.uint16, np.int8])
def test_tensor_tensor_bitvec_on_raw_bits(rng, name, dtype):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (P, N), endpoint=True).astype(dtype)
    b = rng.integers(0, 33 if "shift" in name else info.max, (P, N)).astype(dtype)
    out = run(_tt_kernel(name, engine=nisa.engine.vector), a, b)
    bits = info.bits
    ua = [[int(v) & 0xFFFFFFFF for v in row] for row in a]  # 32-bit lane patterns
    ub = [[int(v) & 0xFFFFFFFF for v in row] for row in b]

    def f(x, y):
        if name == "bitwise_and":
            return x & y
        if name == "bitwise_or":
            return x | y
        if name == "bitwise_xor":
            return x ^ y
        if name == "left_shift":
            return (x << y) & 0xFFFFFFFF if y < 32 else 0
        return x >> y if y < 32 else 0

    low = [
        [f(x, y) & ((1 << bits) - 1) for x, y in zip(ra, rb, strict=True)]
        for ra, rb in zip(ua, ub, strict=True)
    ]
    ref = np.array(low, dtype=np.uint64).astype(f"uint{bits}").view(dtype)
    np.testing.assert_array_equal(out, ref)


def test_tensor_tensor_shapes_differ_in_free_factorisation(rng):
    a = rng.standard_normal((P, 4, 4)).astype(np.float32)
    b = rng.standard_normal((P, 16)).astype(np.float32)

    def kernel(a, b):
        x, y = load(a), load(b)
        z = tile((P, 2, 8), nl.float32)
        nisa.tensor_tensor(dst=z, data1=x, data2=y, op=op("add"))
        return store(z)

    out = run(kernel, a, b)
    ref = (a.reshape(P, 16).astype(np.float64) + b).astype(np.float32).reshape(P, 2, 8)
    np.testing.assert_array_equal(out, ref)


# ---------------------------------------------------------------- tensor_scalar


def test_tensor_scalar_two_ops_with_vector_operand_and_reverse(rng):
    a = rng.standard_normal((P, N)).astype(np.float32)
    s = rng.standard_normal((P, 1)).astype(np.float32)

    def kernel(a, s):
        x, v = load(a), load(s)
        z = tile(a.shape, nl.float32)
        nisa.tensor_scalar(
            dst=z,
            data=x,
            op0=op("subtract"),
            operand0=v,
            reverse0=True,
            op1=op("multiply"),
            operand1=3.0,
        )
        return store(z)

    out = run(kernel, a, s)
    tmp = (s.astype(np.float64) - a).astype(np.float32)
    np.testing.assert_array_equal(out, (tmp.astype(np.float64) * 3).astype(np.float32))


def test_tensor_scalar_keeps_fp32_between_ops_bf16_out(rng):
    a = rng.standard_normal((P, N)).astype(BF16)

    def kernel(a):
        z = tile(a.shape, nl.bfloat16)
        nisa.tensor_scalar(
            dst=z,
            data=load(a, "psum"),
            op0=op("multiply"),
            operand0=1.0 / 3,
            op1=op("add"),
            operand1=0.1,
            reverse1=True,
        )
        return store(z)

    out = run(kernel, a)
    t = (a.astype(np.float64) * np.float32(1.0 / 3)).astype(np.float32)
    ref = (np.float64(np.float32(0.1)) + t).astype(np.float32).astype(BF16)
    np.testing.assert_array_equal(out, ref)


def test_tensor_scalar_unary_abs_and_v4_square(rng):
    a = rng.standard_normal((P, N)).astype(np.float32)

    def kernel(a):
        x = load(a)
        z = tile(a.shape, nl.float32)
        nisa.tensor_scalar(dst=z, data=x, op0=op("abs"), operand0=None, op1=op("add"), operand1=1.0)
        w = tile(a.shape, nl.float32)
        nisa.tensor_scalar(dst=w, data=z, op0=op("square"), operand0=0)
        return store(w)

    out = run(kernel, a)
    t = (np.abs(a).astype(np.float64) + 1).astype(np.float32)
    np.testing.assert_array_equal(out, (t.astype(np.float64) ** 2).astype(np.float32))


def test_tensor_scalar_bitvec_int(rng):
    a = rng.integers(-1000, 1000, (P, N)).astype(np.int32)

    def kernel(a):
        z = tile(a.shape, nl.int32)
        nisa.tensor_scalar(
            dst=z,
            data=load(a),
            op0=op("bitwise_and"),
            operand0=0xFF,
            op1=op("left_shift"),
            operand1=4,
        )
        return store(z)

    out = run(kernel, a)
    np.testing.assert_array_equal(out, ((a.astype(np.int64) & 0xFF) << 4).astype(np.int32))


def test_tensor_scalar_rsqrt_defaults_to_gpsimd():
    from trnsim.nki.runner import run_kernel

    a = np.linspace(0.5, 4, P * N, dtype=np.float32).reshape(P, N)

    def kernel(a):
        z = tile(a.shape, nl.float32)
        nisa.tensor_scalar(dst=z, data=load(a), op0=op("rsqrt"), operand0=None)
        return store(z)

    r = run_kernel(kernel, (a,), {})
    ins = next(i for i in r.program if i.opcode == "tensor_scalar")
    assert ins.engine == "gpsimd"
    np.testing.assert_allclose(r.outputs, 1 / np.sqrt(a.astype(np.float64)), rtol=1e-6)


def test_tensor_scalar_on_scalar_engine_trn2(rng):
    a = rng.standard_normal((P, N)).astype(np.float32)

    def kernel(a):
        z = tile(a.shape, nl.float32)
        nisa.tensor_scalar(
            dst=z,
            data=load(a),
            op0=op("multiply"),
            operand0=2.0,
            op1=op("add"),
            operand1=-1.0,
            engine=nisa.engine.scalar,
        )
        return store(z)

    out = run(kernel, a, chip="trn2")
    np.testing.assert_array_equal(out, (a.astype(np.float64) * 2 - 1).astype(np.float32))


# ---------------------------------------------------------------- scalar_tensor_tensor


def test_scalar_tensor_tensor(rng):
    a = rng.standard_normal((P, N)).astype(np.float32)
    b = rng.standard_normal((P, N)).astype(BF16)
    s = rng.standard_normal((P, 1)).astype(np.float32)

    def kernel(a, b, s):
        z = tile(a.shape, nl.float32)
        nisa.scalar_tensor_tensor(
            dst=z,
            data=load(a, "psum"),
            op0=op("subtract"),
            operand0=load(s),
            op1=op("multiply"),
            operand1=load(b),
            reverse1=True,
        )
        return store(z)

    out = run(kernel, a, b, s)
    t = (a.astype(np.float64) - s).astype(np.float32)
    np.testing.assert_array_equal(out, (b.astype(np.float64) * t).astype(np.float32))


# ---------------------------------------------------------------- copies


def _copy_kernel(dst_dtype, engine, space="sbuf"):
    def kernel(a):
        z = tile(a.shape, dst_dtype, space)
        nisa.tensor_copy(dst=z, src=load(a), engine=engine)
        return store(z)

    return kernel


def test_tensor_copy_bit_exact_same_dtype_vector_and_gpsimd():
    a = np.array([[2**31 - 1, 2**24 + 1, -(2**30) - 3, 7]] * 4, dtype=np.int32)
    for eng in (nisa.engine.vector, nisa.engine.gpsimd):
        np.testing.assert_array_equal(run(_copy_kernel(nl.int32, eng), a), a)
    nan = np.array([[np.nan, -0.0, np.inf, 1e-45]] * 4, dtype=np.float32)
    nan.view(np.uint32)[0, 0] = 0x7FC01234  # a NaN payload survives a bit-exact copy
    out = run(_copy_kernel(nl.float32, nisa.engine.vector), nan)
    np.testing.assert_array_equal(out.view(np.uint32), nan.view(np.uint32))


def test_tensor_copy_scalar_engine_goes_through_fp32():
    a = np.array([[2**24 + 1, 2**31 - 1, 3, -(2**24) - 1]] * 4, dtype=np.int32)
    out = run(_copy_kernel(nl.int32, nisa.engine.scalar, "psum"), a)
    np.testing.assert_array_equal(out, rne_int(a.astype(np.float32), np.int32))
    assert out[0, 0] != a[0, 0]


def test_tensor_copy_casts_through_fp32_when_dtypes_differ(rng):
    a = rng.standard_normal((P, N)).astype(np.float32) * 100
    np.testing.assert_array_equal(
        run(_copy_kernel(nl.bfloat16, nisa.engine.vector), a), a.astype(BF16)
    )
    np.testing.assert_array_equal(
        run(_copy_kernel(nl.int16, nisa.engine.gpsimd), a), rne_int(a, np.int16)
    )
    big = np.full((4, 4), 2**24 + 1, dtype=np.int32)
    np.testing.assert_array_equal(
        run(_copy_kernel(nl.float32, nisa.engine.vector), big),
        np.full((4, 4), 2**24, dtype=np.float32),
    )


@pytest.mark.parametrize("pred_dtype", [np.uint8, np.uint16, np.uint32])
def test_tensor_copy_predicated_tensor_src(rng, pred_dtype):
    src = rng.standard_normal((P, N)).astype(np.float32)
    old = rng.standard_normal((P, N)).astype(np.float32)
    pred = rng.integers(0, 3, (P, N)).astype(pred_dtype)

    def kernel(src, old, pred):
        d = load(old)
        nisa.tensor_copy_predicated(dst=d, src=load(src, "psum"), predicate=load(pred))
        return store(d)

    np.testing.assert_array_equal(run(kernel, src, old, pred), np.where(pred != 0, src, old))


def test_tensor_copy_predicated_scalar_src_reverse_pred(rng):
    old = rng.integers(-50, 50, (P, N)).astype(np.int8)
    pred = rng.integers(0, 2, (P, N)).astype(np.uint8)

    def kernel(old, pred):
        d = load(old)
        nisa.tensor_copy_predicated(
            dst=d, src=-100, predicate=load(pred, "psum"), reverse_pred=True
        )
        return store(d)

    np.testing.assert_array_equal(run(kernel, old, pred), np.where(pred == 0, -100, old))


def test_reciprocal_is_correctly_rounded_fp32(rng):
    a = rng.standard_normal((P, N)).astype(np.float32)
    a[0, 0] = 0.0

    def kernel(a):
        z = tile(a.shape, nl.float32)
        nisa.reciprocal(dst=z, data=load(a))
        w = tile(a.shape, nl.bfloat16)
        nisa.reciprocal(dst=w, data=load(a, "psum"))
        return store(z), store(w)

    with np.errstate(divide="ignore"):
        ref = (1.0 / a.astype(np.float64)).astype(np.float32)
    z, w = run(kernel, a)
    np.testing.assert_array_equal(z, ref)
    np.testing.assert_array_equal(w, ref.astype(BF16))


# ---------------------------------------------------------------- memset, iota


@pytest.mark.parametrize(
    ("dtype", "value", "expect"),
    [
        (nl.float32, 1.5, np.float32(1.5)),
        (nl.bfloat16, 0.1, np.float32(0.1).astype(BF16)),
        (nl.int32, 2**31 - 1, np.int32(2**31 - 1)),
        (nl.int8, -7, np.int8(-7)),
        (nl.float16, 3, np.float16(3)),
        (nl.uint32, 0.0, np.uint32(0)),  # 0.0: all-zero bits (nki-library's cross_partition_copy)
    ],
)
def test_memset_values(dtype, value, expect):
    def kernel():
        z = tile((P, N), dtype)
        nisa.memset(dst=z, value=value)
        return store(z)

    out = run(kernel)
    np.testing.assert_array_equal(out, np.full((P, N), expect))


def test_memset_psum_and_packed_zero():
    def kernel():
        z = tile((P, N), nl.float32, "psum")
        nisa.memset(dst=z, value=-2.0, engine=nisa.engine.vector)
        q = tile((P, 4), nl.float8_e4m3fn_x4)
        nisa.memset(dst=q, value=0, engine=nisa.engine.gpsimd)
        return store(z), store(q)

    z, q = run(kernel)
    np.testing.assert_array_equal(z, np.full((P, N), -2.0, np.float32))
    assert not np.asarray(q).view(np.uint8).any()


def test_iota_pattern_offset_channel_multiplier():
    def kernel():
        z = tile((P, 3, 4), nl.int32)
        nisa.iota(dst=z, pattern=[[10, 3], [2, 4]], offset=5, channel_multiplier=100)
        f = tile((P, 12), nl.float32)
        nisa.iota(dst=f, pattern=[[-1, 12]], offset=2**24 + 1)
        return store(z), store(f)

    z, f = run(kernel)
    p, i, j = np.meshgrid(np.arange(P), np.arange(3), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(z, (5 + 100 * p + 10 * i + 2 * j).astype(np.int32))
    ints = 2**24 + 1 - np.arange(12)
    np.testing.assert_array_equal(f, np.broadcast_to(ints.astype(np.float32), (P, 12)))


def test_iota_int32_math_wraps():
    def kernel():
        z = tile((2, 2), nl.int32)
        nisa.iota(dst=z, pattern=[[1, 2]], offset=2**31 - 1)
        return store(z)

    np.testing.assert_array_equal(run(kernel), np.array([[2**31 - 1, -(2**31)]] * 2, np.int32))


def test_tensor_scalar_int32_arithmetic_goes_through_fp32():
    a = np.array([[2**24 + 1, 3, -7, 2**31 - 1]] * 4, np.int32)

    def kernel(a):
        z = tile(a.shape, nl.int32)
        nisa.tensor_scalar(dst=z, data=load(a), op0=op("add"), operand0=0.5)
        return store(z)

    ref = rne_int(a.astype(np.float32) + np.float32(0.5), np.int32)
    np.testing.assert_array_equal(run(kernel, a), ref)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_sweep_tensor_tensor_and_scalar_random_shapes(seed):
    rng = np.random.default_rng(seed)
    parts = int(rng.choice([1, 32, 64, 128]))
    free = tuple(int(x) for x in rng.integers(1, 9, int(rng.integers(1, 4))))
    dtype = [np.float32, np.float16, BF16][seed % 3]
    name = ["add", "subtract", "multiply", "maximum", "minimum"][seed % 5]
    a = rng.standard_normal((parts, *free)).astype(dtype)
    b = rng.standard_normal((parts, *free)).astype(dtype)
    out = run(_tt_kernel(name, "psum" if seed % 2 else "sbuf"), a, b)
    np.testing.assert_array_equal(out, _binary_ref(name, a, b).astype(np.float32).astype(dtype))


def test_comparisons_write_one_zero_in_dst_dtype():
    a = np.array([[1.0, 2.0, 3.0, np.nan]] * 4, np.float32)
    b = np.array([[1.0, 1.0, 4.0, 0.0]] * 4, np.float32)
    out = run(_tt_kernel("greater_equal", out_dtype=nl.uint8), a, b)
    np.testing.assert_array_equal(out, np.array([[1, 1, 0, 0]] * 4, np.uint8))
    # int32 on GpSimd compares exactly even where fp32 could not tell the values apart
    x = np.array([[2**24 + 1, 5, -3, 0]] * 4, np.int32)
    y = np.array([[2**24, 5, -2, 0]] * 4, np.int32)
    np.testing.assert_array_equal(
        run(_tt_kernel("greater"), x, y), np.array([[1, 0, 0, 0]] * 4, np.int32)
    )
