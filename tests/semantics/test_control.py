"""Registers, NkiScalar arithmetic and device loops (dynamic_range, fori_loop, while_loop,
`while reg:`): values vs Python, the program record, and one ConstraintError per rule."""

from __future__ import annotations

import linecache

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from source_paths import assert_no_internal_path

from trnsim.errors import ConstraintError, UnsupportedError
from trnsim.nki.runner import run_kernel


def run(kernel, *arrays, chip="trn3"):
    return nki.simulate(kernel, chip=chip)(*arrays)


def statement_at(filename: str, lineno: int) -> str:
    """The source of the statement starting at `lineno` (up to balanced parentheses)."""
    text, depth, n = "", 0, lineno
    while True:
        line = linecache.getline(filename, n)
        text += line
        depth += line.count("(") - line.count(")")
        if depth <= 0 or not line:
            return text
        n += 1


def assert_at_user_line(exc: pytest.ExceptionInfo) -> None:
    loc = exc.value.loc
    assert loc is not None
    assert loc.filename == __file__
    assert "# ERR" in statement_at(loc.filename, loc.lineno)
    assert_no_internal_path(str(exc.value))


def store_registers(*regs):
    """A (1, n) int32 HBM tensor holding the registers' values (register_store each)."""
    out = nl.ndarray((1, len(regs)), nl.int32, buffer=nl.shared_hbm)
    for k, r in enumerate(regs):
        nisa.register_store(out[0:1, k : k + 1], r)
    return out


# ---------------------------------------------------------------- registers
def test_register_alloc_move_load_store():
    vals = np.array([[-7, 123456789]], dtype=np.int32)

    def kernel(v):
        a = nisa.register_alloc(5)
        b = nisa.register_alloc()
        nisa.register_move(b, a)
        c = nisa.register_alloc()
        s = nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=v)
        nisa.register_load(c, s[0:1, 0:1])
        d = nisa.register_alloc(v[0:1, 1:2])  # from an HBM tensor
        z = nisa.register_alloc()
        return store_registers(a, b, c, d, z)

    np.testing.assert_array_equal(run(kernel, vals), [[5, 5, -7, 123456789, 0]])


def test_registers_are_32_bit_signed():
    def kernel():
        a = nisa.register_alloc(2**32 - 1)  # the bits of -1
        b = nisa.register_alloc(-(2**31))
        out = store_registers(a, b)
        u = nl.ndarray((1, 1), nl.uint32, buffer=nl.shared_hbm)
        nisa.register_store(u, a)
        return out, u

    out, u = run(kernel)
    np.testing.assert_array_equal(out, [[-1, -(2**31)]])
    assert u[0, 0] == 2**32 - 1


def test_nki_scalar_arithmetic_and_scalar_store():
    def kernel(v):
        s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=v)
        i = nisa.scalar_load(s)
        out = nl.ndarray((1, 6), nl.int32, buffer=nl.shared_hbm)
        for k, e in enumerate((i * 4 + 1, 10 - i, -i, i // 2, i % 2, (i << 3) | 1)):
            nisa.scalar_store(out[0:1, k : k + 1], e)
        return out

    i = 7
    np.testing.assert_array_equal(
        run(kernel, np.array([[i]], np.int32)),
        [[i * 4 + 1, 10 - i, -i, i // 2, i % 2, (i << 3) | 1]],
    )


def test_nki_scalar_as_scalar_offset():
    table = np.arange(40, dtype=np.float32).reshape(10, 4)

    def kernel(t, v):
        s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=v)
        i = nisa.scalar_load(s)
        row = nl.ndarray((1, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=t.ap([[4, 1], [1, 4]], scalar_offset=i * 4 + 1))
        out = nl.ndarray((1, 4), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=row)
        return out

    np.testing.assert_array_equal(run(kernel, table, np.array([[2]], np.int32)), table[9:10])


def test_register_instructions_are_recorded_on_sync():
    def kernel():
        r = nisa.register_alloc(3)
        nisa.register_move(r, 4)
        return store_registers(r)

    kr = run_kernel(kernel, (), {}, chip="trn3")
    ops = [(i.opcode, i.engine) for i in kr.program]
    assert ops == [("register_move", "sync"), ("register_move", "sync"), ("register_store", "dma")]
    assert kr.program[1].attrs == {"dst": "r0", "src": 4}


# ---------------------------------------------------------------- loops
def _row_copy_kernel(loop):
    """out[i] = table[i] for i in the loop (one DMA per iteration, scalar_offset = i)."""

    def kernel(t, n):
        n_sb = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=n_sb, src=n)
        bound = nisa.register_alloc()
        nisa.register_load(bound, n_sb)
        out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
        zero = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
        nisa.memset(dst=zero, value=0.0)
        nisa.dma_copy(dst=out, src=zero)
        row = nl.ndarray((1, t.shape[1]), t.dtype, buffer=nl.sbuf)

        def body(i):
            pattern = [[t.shape[1], 1], [1, t.shape[1]]]
            nisa.dma_copy(dst=row, src=t.ap(pattern, scalar_offset=i))
            nisa.dma_copy(dst=out.ap(pattern, scalar_offset=i), src=row)

        loop(bound, body)
        return out

    return kernel


def _dynamic_range_loop(n, body):
    for i in nl.dynamic_range(n):
        body(i)


@pytest.mark.parametrize(
    ("loop", "rows"),
    [
        pytest.param(_dynamic_range_loop, [0, 1, 2, 3, 4], id="dynamic_range"),
        pytest.param(lambda n, body: nl.fori_loop(0, n, body), [0, 1, 2, 3, 4], id="fori_loop"),
        pytest.param(
            lambda n, body: nl.fori_loop(1, n, body, step=2), [1, 3], id="fori_loop-step2"
        ),
    ],
)
def test_device_loop_with_register_bound(loop, rows):
    table = np.arange(24, dtype=np.float32).reshape(6, 4) + 1
    got = run(_row_copy_kernel(loop), table, np.array([[5]], np.int32))
    want = np.zeros_like(table)
    want[rows] = table[rows]
    np.testing.assert_array_equal(got, want)


def test_dynamic_range_runs_the_body_once_per_iteration_and_records_branches():
    calls = []

    def kernel():
        r = nisa.register_alloc(4)
        for i in nl.dynamic_range(1, r):
            calls.append(i.value)
        return store_registers(r)

    kr = run_kernel(kernel, (), {}, chip="trn3")
    assert calls == [1, 2, 3]
    branches = [i for i in kr.program if i.opcode == "loop_branch"]
    assert [b.attrs["taken"] for b in branches] == [True, True, True, False]
    assert [b.attrs["value"] for b in branches] == [1, 2, 3, 4]
    assert all(b.engine == "sync" for b in branches)


def test_loop_context_is_recorded_on_body_instructions():
    def kernel():
        t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        for i in nl.dynamic_range(3):
            nisa.register_store(t, i)
        return store_registers(nisa.register_alloc(0))

    kr = run_kernel(kernel, (), {}, chip="trn3")
    stores = [i for i in kr.program if i.opcode == "register_store"][:3]
    assert [s.loops[-1][1:] for s in stores] == [
        ("dynamic_range", 0),
        ("dynamic_range", 1),
        ("dynamic_range", 2),
    ]


def test_timing_only_run_keeps_register_trip_counts():
    def kernel():
        r = nisa.register_alloc()
        nisa.register_move(r, 6)
        nl.fori_loop(0, r, lambda i: nisa.register_move(nisa.register_alloc(), i))
        return None

    kr = run_kernel(kernel, (), {}, chip="trn3", values=False)
    taken = [i for i in kr.program if i.opcode == "loop_branch" and i.attrs["taken"]]
    assert len(taken) == 6


def test_while_loop_counts_down():
    def kernel(v):
        s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=v)
        n = nisa.scalar_load(s)
        acc = nisa.register_alloc(0)
        seen = []

        def body(r):
            seen.append(r.value)
            nisa.register_move(acc, r)
            return r - 1

        nl.while_loop(n, body)
        return store_registers(acc), seen

    out, seen = run(kernel, np.array([[3]], np.int32))
    assert seen == [3, 2, 1]
    np.testing.assert_array_equal(out, [[1]])


def test_while_loop_with_zero_init_never_runs():
    def kernel():
        z = nisa.register_alloc(0)
        hits = []
        nl.while_loop(z, lambda r: hits.append(1) or r)
        return hits

    assert run(kernel) == []


def test_while_register_loop():
    def kernel(v):
        s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=v)
        reg = nisa.register_alloc()
        nisa.register_load(reg, s)
        n = 0
        while reg:
            n += 1
            k = nisa.scalar_load(s) - 1
            nisa.scalar_store(s, k)
            nisa.register_load(reg, s)
        return n

    assert run(kernel, np.array([[4]], np.int32)) == 4


# ---------------------------------------------------------------- rules
def test_dynamic_range_induction_variable_is_read_only():
    def kernel():
        for i in nl.dynamic_range(2):
            nisa.register_move(i, 0)  # ERR

    with pytest.raises(ConstraintError, match="read-only") as exc:
        run(kernel)
    assert_at_user_line(exc)


def test_register_load_needs_one_element():
    def kernel():
        t = nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf)
        nisa.register_load(nisa.register_alloc(), t)  # ERR

    with pytest.raises(ConstraintError, match="exactly one element") as exc:
        run(kernel)
    assert_at_user_line(exc)


def test_register_load_needs_an_integer_tensor():
    def kernel():
        t = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        nisa.register_load(nisa.register_alloc(), t)  # ERR

    with pytest.raises(ConstraintError, match="registers hold 32-bit integers") as exc:
        run(kernel)
    assert_at_user_line(exc)


def test_register_store_needs_a_register():
    def kernel():
        t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.register_store(t, 3)  # ERR

    with pytest.raises(ConstraintError, match="src must be a register") as exc:
        run(kernel)
    assert_at_user_line(exc)


@pytest.mark.parametrize(
    ("src", "match"),
    [
        pytest.param(1.5, "must be an integer or a register", id="float"),
        pytest.param(2**33, "does not fit a 32-bit register", id="too-big"),
    ],
)
def test_register_move_source(src, match):
    def kernel():
        nisa.register_move(nisa.register_alloc(), src)  # ERR

    with pytest.raises(ConstraintError, match=match) as exc:
        run(kernel)
    assert_at_user_line(exc)


def test_register_move_dst_must_be_a_register():
    def kernel():
        t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.register_move(t, 1)  # ERR

    with pytest.raises(ConstraintError, match="dst must be a register") as exc:
        run(kernel)
    assert_at_user_line(exc)


@pytest.mark.parametrize("step", [0, -1, 1.5])
def test_loop_step_must_be_a_positive_int(step):
    def kernel():
        nl.fori_loop(0, 4, lambda i: None, step=step)  # ERR

    with pytest.raises(ConstraintError, match="compile-time positive integer") as exc:
        run(kernel)
    assert_at_user_line(exc)


def test_loop_bound_must_be_int_or_register():
    def kernel():
        for _ in nl.dynamic_range(2.5):  # ERR
            pass

    with pytest.raises(ConstraintError, match="int or a register") as exc:
        run(kernel)
    assert_at_user_line(exc)


def test_while_loop_body_must_return_a_register():
    def kernel():
        nl.while_loop(nisa.register_alloc(1), lambda r: 0)  # ERR

    with pytest.raises(ConstraintError, match="next condition register") as exc:
        run(kernel)
    assert_at_user_line(exc)


def test_nki_scalar_division_by_zero():
    def kernel():
        s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=s, value=0)
        z = nisa.scalar_load(s)
        return z // z  # ERR

    with pytest.raises(ConstraintError, match="by zero") as exc:
        run(kernel)
    assert_at_user_line(exc)


def test_nc_sub_version_and_cross_core_needs_lnc2():
    def kernel(x):
        assert nisa.get_nc_sub_version() == 0
        t = nl.ndarray((1, 4), nl.float32, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=0)  # ERR

    with pytest.raises(UnsupportedError, match="kernel\\[2\\]") as exc:
        run(kernel, np.zeros((1, 4), np.float32))
    assert exc.value.loc.filename == __file__
