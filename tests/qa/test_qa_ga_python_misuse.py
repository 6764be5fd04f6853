"""QA: Python-level misuse of GA kernel tensors, typical of kernels ported from Beta 1
(tile assignment, operators on tiles, data-dependent `if`). Each must be a trnsim KernelError at
the kernel's line, never a bare TypeError and never silently accepted."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from qa_helpers import X, expect_error
from source_paths import assert_no_internal_path

from trnsim.errors import AllocationError, ConstraintError, KernelError


def k_b1_tile_assignment(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[...] = nl.load(a)  # BUG
    return a


def test_b1_tile_assignment():
    expect_error(k_b1_tile_assignment, KernelError, "assign|tensor_copy")


def k_operator_on_tile(a):
    t = nl.load(a)
    t + 1  # BUG
    return a


def test_operator_on_tile():
    expect_error(k_operator_on_tile, KernelError, r"\+|add")


def k_compare_hbm(a):
    if a > 0:  # BUG
        pass
    return a


def test_comparison_on_hbm_tensor():
    expect_error(k_compare_hbm, KernelError, ">")


def k_truthiness(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    if t:  # BUG
        nisa.memset(dst=t, value=1.0)
    return a


def test_truthiness_of_tile():
    """`if t:` on a declared tile cannot test its values: trnsim takes it as true (the tensor
    exists, as nki-library's kernels use it) and says so at the line; the result of an nl
    operation in `if` stays an error (tests/conformance/test_nkilib_truth.py)."""
    from trnsim.errors import SimulationWarning

    with pytest.warns(SimulationWarning, match="control flow cannot depend on tile values") as w:
        nki.simulate(k_truthiness)(X)
    assert w[0].lineno == k_truthiness.__code__.co_firstlineno + 3  # the `if t:` line


def k_numpy_on_tile(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    np.exp(t)  # BUG
    return a


def test_numpy_function_on_tile():
    exc = expect_error(k_numpy_on_tile, KernelError)
    assert "index 128 is out of range" not in exc.message


def k_float_of_tile(a):
    t = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    float(t)  # BUG
    return a


def test_float_of_tile():
    expect_error(k_float_of_tile, KernelError)


def k_float_shape(a):
    nl.ndarray((128, 64.0), dtype=nl.float32, buffer=nl.sbuf)  # BUG
    return a


def test_float_shape():
    expect_error(k_float_shape, ConstraintError, "64.0")


def k_raw_int_enum(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    # 9 is no reduce_cmd value (a member's value, e.g. 3, is that member: test_nkilib_enum_ints)
    nisa.activation(dst=t, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=r, reduce_cmd=9)  # BUG
    return a


def test_raw_int_for_enum():
    expect_error(k_raw_int_enum, ConstraintError, "reduce_cmd")


# ---------------------------------------------------------------- these already behave


def k_negative_dim(a):
    nl.ndarray((128, -4), dtype=nl.float32, buffer=nl.sbuf)  # BUG
    return a


def test_negative_dimension():
    expect_error(k_negative_dim, ConstraintError, "-4")


def k_zero_dim(a):
    nl.ndarray((128, 0), dtype=nl.float32, buffer=nl.sbuf)  # BUG
    return a


def test_zero_dimension():
    expect_error(k_zero_dim, ConstraintError, r"\[128, 0\]")


def k_sbuf_overflow(a):
    first = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)
    second = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)  # BUG
    nisa.memset(dst=first, value=0.0)
    nisa.memset(dst=second, value=0.0)
    return a


def test_sbuf_overflow():
    expect_error(k_sbuf_overflow, AllocationError, "sbuf", "160000")


def k_tensor_tensor_unary_op(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.exp)  # BUG
    return a


def test_tensor_tensor_with_unary_op():
    expect_error(k_tensor_tensor_unary_op, ConstraintError, "exp", "binary")


def k_tensor_tensor_on_pe(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add, engine=nisa.tensor_engine)  # BUG
    return a


def test_tensor_tensor_on_tensor_engine():
    expect_error(k_tensor_tensor_on_pe, ConstraintError, "tensor engine", "vector, gpsimd")


def k_activation_reduce_max(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.activation(
        dst=t,
        op=nl.exp,
        data=t,
        reduce_op=nl.maximum,
        reduce_res=r,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )  # BUG
    return a


def test_activation_reduce_with_max():
    expect_error(k_activation_reduce_max, ConstraintError, "maximum", "nl.add")


def k_error_in_helper(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    _bad_helper(t)
    return a


def _bad_helper(t):
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=t)  # BUG in a helper


def test_error_inside_helper_points_at_helper_line():
    import inspect

    src, start = inspect.getsourcelines(_bad_helper)
    line = start + next(i for i, s in enumerate(src) if "# BUG" in s)
    with pytest.raises(ConstraintError, match="operand0") as exc:
        nki.simulate(k_error_in_helper)(X)
    assert exc.value.loc.lineno == line
    assert_no_internal_path(str(exc.value))
