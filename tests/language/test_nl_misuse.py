"""Kernel mistakes the current API must reject at the user's line: partition-strided operands
on compute engines, non-integer index values, Python operators / assignment / numpy on tensors,
raw integers no enum member has, wrong nki.isa signatures, returned outputs, SBUF/PSUM
capacity, and the wording of messages about unnamed tensors and host arrays."""

from __future__ import annotations

import re

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from source_paths import assert_no_internal_path

from trnsim.errors import AllocationError, ConstraintError, KernelError, OutOfBoundsError
from trnsim.nki._isa_base import public_instruction
from trnsim.nki.tensor import return_location

X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def fails_at(kernel, exc_type, *patterns, args=(X,), chip="trn3", in_lambda=False):
    """Run kernel: it must raise exc_type at its line marked `# ERR` (in_lambda: inside the
    parametrized lambda the kernel calls), the message matching every regex in patterns,
    with no simulator path in the text. Returns the exception."""
    with pytest.raises(exc_type) as exc:
        nki.simulate(kernel, chip=chip)(*args)
    err = exc.value
    assert err.loc is not None, str(err)
    assert err.loc.filename == __file__
    if in_lambda:
        assert err.loc.function == "<lambda>", (err.loc, str(err))
    else:
        assert err.loc.code.endswith("# ERR"), (err.loc.code, str(err))
    assert_no_internal_path(str(err))
    for p in patterns:
        assert re.search(p, err.message), (p, err.message)
    return err


def loaded(a):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, name="t")
    nisa.dma_copy(dst=t, src=a)
    return t


def out_of(t):
    o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t)
    return o


# ---------------------------------------------------------------- dense partitions


def test_partition_stride_message_names_operand_and_stride():
    def kernel(a):
        t = loaded(a)
        u = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=u, data1=t[0:64, :], data2=t[::2, :], op=nl.add)  # ERR
        return a

    err = fails_at(kernel, ConstraintError)
    assert err.message == (
        "tensor_tensor: operand 'data2' steps over partitions with stride 2; compute engines "
        "access a contiguous range of partitions; allowed: dense partitions (use a DMA to "
        "gather partitions)"
    )


def test_reversed_partitions_rejected_on_scalar_engine():
    def kernel(a):
        t = loaded(a)
        nisa.activation(dst=t, op=nl.exp, data=t[::-1, :])  # ERR
        return a

    fails_at(
        kernel,
        ConstraintError,
        r"operand 'data' steps over partitions with stride -1 "
        r"\(reversed\)",
    )


def test_partition_stride_rejected_on_destination_and_tensor_engine():
    def kernel(a):
        t = loaded(a)
        nisa.memset(dst=t[0:128:4, :], value=0.0)  # ERR
        return a

    fails_at(kernel, ConstraintError, "operand 'dst'", "stride 4")

    def matmul(a):
        t = loaded(a)
        ps = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=t[0:64, :], moving=t[::2, :])  # ERR
        return a

    fails_at(matmul, ConstraintError, "nc_matmul", "operand 'moving'", "stride 2")


def test_single_and_dense_partition_views_are_fine(rng):
    x = rng.standard_normal((128, 64)).astype(np.float32)

    def kernel(a):
        t = loaded(a)
        one = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=one, src=t[96, :])  # a single partition has no stride
        dense = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=dense, src=t[32:64:1, :])
        return out_of(one), out_of(dense)

    one, dense = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(one, x[96:97])
    np.testing.assert_array_equal(dense, x[32:64])


def test_dma_may_reverse_partitions(rng):
    x = rng.standard_normal((32, 8)).astype(np.float32)

    def kernel(a):
        t = loaded(a)
        u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=u, src=t[::-1, :])
        return out_of(u)

    np.testing.assert_array_equal(nki.simulate(kernel)(x), x[::-1])


# ---------------------------------------------------------------- integer index values


@pytest.mark.parametrize(
    ("index", "shown"),
    [
        (lambda a: a[:, np.float32(2)], "2.0"),
        (lambda a: a[:, 0:16:2.0], "slice step float 2.0"),
        (lambda a: a[:, nl.ds(0, 4.0)], "nl.ds: size float 4.0"),
        (lambda a: a.slice(1, 0.0, 4), "0.0"),
        (lambda a: a.reshape((128.0, 64)), "128.0"),
    ],
    ids=["numpy-float", "slice-step", "ds-size", "slice-method", "reshape"],
)
def test_float_index_values_are_rejected(index, shown):
    def kernel(a):
        index(a)  # ERR
        return a

    fails_at(kernel, ConstraintError, shown, "integer", in_lambda=True)


def test_integer_like_index_values_are_accepted(rng):
    x = rng.standard_normal((16, 32)).astype(np.float32)

    class Two:
        def __index__(self):
            return 2

    def kernel(a):
        t = nl.ndarray((16, 4), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, nl.ds(np.int64(Two()), np.int32(4))])
        return out_of(t)

    np.testing.assert_array_equal(nki.simulate(kernel)(x), x[:, 2:6])


def test_float_loop_bound_and_address():
    def loop(a):
        for _ in nl.affine_range(2.0):  # ERR
            pass
        return a

    fails_at(loop, ConstraintError, "loop bound float 2.0")

    def address(a):
        nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, address=(0, 1.5))  # ERR
        return a

    fails_at(address, ConstraintError, "free offset float 1.5")


# ---------------------------------------------------------------- Python on tensors


@pytest.mark.parametrize(
    ("misuse", "pattern"),
    [
        (lambda t: 1 + t, r"operator \+ .*nl\.add"),
        (lambda t: t - 1, r"operator - .*nl\.subtract"),
        (lambda t: -t, r"operator - .*nl\.negative"),
        (lambda t: t @ t, r"operator @ .*nc_matmul"),
        (lambda t: t <= 0, r"operator <= .*nl\.less_equal"),
        (lambda t: np.float32(2) * t, r"np\.multiply .*nl\.multiply"),
        (lambda t: np.sum(t), r"np\.sum"),
        (lambda t: np.asarray(t), r"np\.asarray"),
        (lambda t: int(t), r"int\(\) of tensor 't'"),
        (lambda t: list(t), r"iterating over tensor 't'"),
        (lambda t: 0 in t, r"iterating over tensor 't'"),
    ],
    ids=[
        "radd",
        "sub",
        "neg",
        "matmul",
        "le",
        "np-scalar",
        "np-sum",
        "asarray",
        "int",
        "list",
        "contains",
    ],
)
def test_python_operations_on_tensors_raise_kernel_errors(misuse, pattern):
    def kernel(a):
        t = loaded(a)
        misuse(t)  # ERR
        return a

    fails_at(kernel, KernelError, pattern, in_lambda=True)


def test_in_place_operator_and_slice_assignment():
    def iadd(a):
        t = loaded(a)
        t += 1  # ERR
        return a

    fails_at(iadd, KernelError, r"operator \+")

    def assign(a):
        t = loaded(a)
        t[0:4, :] = 0.0  # ERR
        return a

    fails_at(assign, KernelError, "item assignment to tensor 't'", "nisa.memset", "Beta-1")


# ---------------------------------------------------------------- enum parameters


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda t, a: nisa.tensor_copy(dst=t, src=t, engine=42), r"engine=42 is not an engine"),
        (lambda t, a: nisa.dma_copy(dst=t, src=a, dge_mode=7), r"dge_mode=7 is not a DGE mode"),
    ],
    ids=["engine-not-a-member", "dge-not-a-member"],
)
def test_raw_integers_for_enum_parameters(call, pattern):
    def kernel(a):
        t = loaded(a)
        call(t, a)  # ERR
        return a

    fails_at(kernel, ConstraintError, pattern, "raw integer", in_lambda=True)


def test_enum_members_and_none_are_accepted(rng):
    x = rng.standard_normal((128, 64)).astype(np.float32)

    def kernel(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, dge_mode=nisa.dge_mode.unknown, oob_mode=nisa.oob_mode.error)
        u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t, engine=None)
        nisa.tensor_copy(u, u, nisa.engine.gpsimd)
        return out_of(u)

    np.testing.assert_array_equal(nki.simulate(kernel)(x), x)


# ---------------------------------------------------------------- call signatures


def test_signature_errors_name_argument_and_signature():
    def missing(a):
        t = loaded(a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add)  # ERR
        return a

    err = fails_at(missing, ConstraintError, "nisa.tensor_scalar: missing 1 required")
    assert "'operand0'" in err.message
    assert "signature: nisa.tensor_scalar(dst, data, op0, operand0, " in err.message
    assert isinstance(err, TypeError)  # still the TypeError Python raises for a bad call

    def typo(a):
        t = loaded(a)
        nisa.tensor_copy(dst=t, scr=t)  # ERR
        return a

    fails_at(typo, ConstraintError, "unexpected keyword argument 'scr'", "did you mean 'src'")

    def b1_mask(a):
        t = loaded(a)
        nisa.memset(dst=t, value=0.0, mask=None)  # ERR
        return a

    err = fails_at(b1_mask, ConstraintError, "'mask'", "Beta-1")
    assert "engine=nisa.engine.unknown" in err.message


def test_nl_signature_errors():
    def add(a):
        t = loaded(a)
        nl.add(t)  # ERR
        return a

    fails_at(
        add,
        ConstraintError,
        r"nl\.add: missing 1 required positional argument: 'y'",
        r"signature: nl\.add\(x, y, dtype=None\)",
    )

    def ndarray(a):
        nl.ndarray((128, 64), buffer=nl.sbuf)  # ERR
        return a

    fails_at(ndarray, ConstraintError, "nl.ndarray: missing 1 required", "'dtype'")


def test_type_error_inside_an_instruction_is_not_rewritten():
    def instruction(dst):
        return len(dst)  # a TypeError from the body, not from binding the call

    wrapped = public_instruction(instruction)
    with pytest.raises(TypeError) as exc:
        wrapped(3)
    assert not isinstance(exc.value, KernelError)


# ---------------------------------------------------------------- kernel outputs


def test_return_location_is_the_last_return_of_the_kernel_itself():
    def kernel(a, flag):
        def helper():
            return 1  # nested: not the kernel's return

        if flag:
            return a  # first
        return helper()  # last

    loc = return_location(kernel)
    assert loc.code == "return helper()  # last"
    assert return_location(lambda a: a).lineno > 0  # falls back to the def line


# ---------------------------------------------------------------- capacity


def test_psum_allocation_larger_than_a_partition():
    def kernel(a):
        nl.ndarray((128, 5000), dtype=nl.float32, buffer=nl.psum)  # ERR
        return a

    fails_at(
        kernel, AllocationError, "requested 20000 bytes per partition but a partition holds 16384$"
    )


def test_full_sbuf_reports_requested_free_and_capacity():
    def kernel(a):
        first = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf, name="first")
        nl.ndarray((128, 30000), dtype=nl.float32, buffer=nl.sbuf)  # ERR
        nisa.memset(dst=first, value=0.0)
        return a

    fails_at(
        kernel,
        AllocationError,
        "requested 120000",
        "free 85752",
        r"\(full\)",
        "capacity 245752 usable bytes per partition",
    )


def test_explicit_address_is_bounded_by_the_usable_size():
    def inside(a):
        t = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf, address=(0, 245688))
        nisa.memset(dst=t, value=1.0)
        return out_of(t)

    np.testing.assert_array_equal(nki.simulate(inside)(X), np.ones((128, 16), np.float32))

    def past(a):
        nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf, address=(0, 245720))  # ERR
        return a

    fails_at(past, AllocationError, r"outside \[0, 128\) x \[0, 245752\) usable bytes")


def test_nl_copy_of_psum_lands_in_sbuf():
    def kernel(a):
        ps = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=ps, value=3.0)
        c = nl.copy(ps)
        assert c.buffer == nl.sbuf
        return out_of(c)

    np.testing.assert_array_equal(nki.simulate(kernel)(X), np.full((128, 64), 3.0, np.float32))


# ---------------------------------------------------------------- messages


def test_unnamed_tensor_is_described_by_shape_dtype_and_line():
    def kernel(a):
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        t[:, 60:70]  # ERR
        return a

    err = fails_at(
        kernel,
        OutOfBoundsError,
        r"^sbuf tensor \[128, 64\] float32 allocated at "
        r"test_nl_misuse\.py:\d+ dimension 1",
    )
    assert "''" not in err.message


def test_numpy_array_operand_is_summarised_with_a_hint():
    def kernel(a):
        t = loaded(a)
        nisa.tensor_tensor(dst=t, data1=t, data2=np.ones((128, 64), np.float32), op=nl.add)  # ERR
        return a

    err = fails_at(
        kernel,
        ConstraintError,
        r"a numpy array \(shape \(128, 64\), dtype float32\)",
        "kernel arguments are passed in as HBM tensors",
    )
    assert "1., 1." not in err.message


def test_scalar_offset_overflow_names_the_row_reached(rng):
    def kernel(table, s):
        s_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s_sb, src=s)
        rows = nl.ndarray((4, 16), dtype=table.dtype, buffer=nl.sbuf)
        src = table.ap(pattern=[[16, 4], [1, 16]], offset=0, scalar_offset=s_sb)
        nisa.dma_copy(dst=rows, src=src)  # ERR
        return out_of(rows)

    table = rng.standard_normal((50, 16)).astype(np.float32)
    fails_at(
        kernel,
        OutOfBoundsError,
        "offset 48 plus 2 rows",
        r"reaches index 50, outside "
        r"\[0, 50\)",
        args=(table, np.array([[48]], np.int32)),
    )
    fails_at(
        kernel,
        OutOfBoundsError,
        r"offset 60 is outside \[0, 50\)",
        args=(table, np.array([[60]], np.int32)),
    )


# ---------------------------------------------------------------- loop-body tiles


def test_loop_body_tile_larger_than_half_the_sbuf(rng):
    """The previous iteration's tile is still bound in Python when the next one is allocated;
    its space is reused (the compiler gives a loop-body tile one buffer)."""
    x = rng.standard_normal((3 * 128, 40000)).astype(np.float32)  # 160000 B per partition

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(3):
            t = nl.ndarray((128, 40000), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[i * 128 : (i + 1) * 128, :])
            nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=t)
        return out

    np.testing.assert_array_equal(nki.simulate(kernel)(x), x)


def test_a_tile_the_kernel_still_reaches_keeps_its_space():
    """The previous iteration's tile is kept in a list: it is live (for the compiler too), so
    its space is not reused and the second allocation fails, naming the live tile."""

    def kernel(a):
        kept = []
        for _ in nl.affine_range(2):
            t = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)  # ERR
            nisa.memset(dst=t, value=0.0)
            kept.append(t)
        nisa.memset(dst=kept[0], value=1.0)
        return a

    fails_at(
        kernel,
        AllocationError,
        "requested 160000",
        r"live: sbuf tensor \[128, 40000\] float32 allocated at test_nl_misuse.py:\d+",
    )


def test_tiles_of_one_iteration_are_never_reclaimed():
    def big_tile():  # 100000 bytes per partition: two fit in the usable 245752
        return nl.ndarray((128, 25000), dtype=nl.float32, buffer=nl.sbuf)  # ERR

    def kernel(a):
        for i in nl.affine_range(2):
            tiles = [big_tile()]  # iteration 1 reuses iteration 0's space
            if i == 1:
                tiles.append(big_tile())
                tiles.append(big_tile())  # a third live tile of this iteration: full
            for t in tiles:
                nisa.memset(dst=t, value=0.0)
        return a

    fails_at(kernel, AllocationError, "requested 100000")
