"""Every Beta-1 error condition (nki-api.md §11.1): raised with its B1 code, at the kernel's own
line, with no simulator path in the message."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from b1_testing import check_located

from trnsim.errors import KernelError

X = np.random.default_rng(0).random((128, 512)).astype(np.float32)


def _raises(kernel, code, line_text, *args, grid=None, match=None):
    k = nki.jit(kernel)
    if grid:
        k = k[grid]
    with pytest.raises(KernelError, match=match) as exc:
        k(*(args or (X,)))
    assert exc.value.code == code, str(exc.value)
    assert f"[{code}]" in str(exc.value)
    check_located(exc, kernel, line_text)
    return exc


def test_num_partition_exceed_arch_limit():
    def kernel(x):
        t = nl.zeros((256, 4), dtype=nl.float32)
        return t

    _raises(
        kernel,
        "err_num_partition_exceed_arch_limit",
        "nl.zeros(",
        match="number of partitions 256 exceed architecture limitation of 128",
    )


def test_size_of_dimension_and_max_dimensions_of_transpose():
    def big(x):
        t = nl.transpose(nl.load(x[0:128, 0:256]))
        return t

    def rank3(x):
        t = nl.transpose(nl.load(x.reshape((128, 4, 128))))
        return t

    _raises(
        big,
        "err_size_of_dimension_exceed_arch_limit",
        "nl.transpose(",
        match="exceed architecture limitation of 128",
    )
    _raises(rank3, "err_exceed_max_supported_dimension", "nl.transpose(")


def test_num_partition_mismatch():
    def kernel(x):
        a, b = nl.load(x[0:1, :]), nl.load(x[0:128, :])
        c = a + b
        return c

    _raises(kernel, "err_num_partition_mismatch", "c = a + b")

    def isa_kernel(x):
        c = nisa.tensor_tensor(nl.load(x[0:64, :]), nl.load(x[0:128, :]), np.add)
        return c

    _raises(isa_kernel, "err_num_partition_mismatch", "nisa.tensor_tensor(")


def test_unsupported_memory():
    def load_sbuf(x):
        t = nl.load(nl.load(x))
        return t

    def exp_hbm(x):
        t = nl.exp(x)
        return t

    _raises(
        load_sbuf,
        "err_unsupported_memory",
        "nl.load(nl.load(x))",
        match="Expected operand 'src' of 'nl.load' to be in address space 'hbm'",
    )
    _raises(exp_hbm, "err_unsupported_memory", "nl.exp(x)", match="'psum|sbuf'")


def test_tensor_access_out_of_bound():
    def kernel(x):
        t = nl.load(x[nl.arange(128)[:, None], nl.arange(600)[None, :]])
        return t

    _raises(
        kernel,
        "err_tensor_access_out_of_bound",
        "nl.load(",
        match=r"Out-of-bound access for tensor `x` on dimension 1: index range \[0, 599\] "
        r"exceed dimension size of 512",
    )


def test_unexpected_output_dependencies():
    def kernel(x):
        out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            nl.store(out, value=nl.load(x[:, i * 128 : (i + 1) * 128]))
        return out

    _raises(kernel, "err_unexpected_output_dependencies", "nl.store(out")


def test_loop_carried_dependency_suggests_sequential_range():
    def kernel(x):
        out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 128), dtype=nl.float32)
        for i in nl.affine_range(4):
            acc[...] = nl.add(acc, nl.load(x[:, i * 128 : (i + 1) * 128]))
        nl.store(out, value=acc)
        return out

    _raises(kernel, "err_loop_carried_dependency", "acc[...] = nl.add", match="sequential_range")


def test_local_variable_used_out_of_scope():
    def kernel(x):
        out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        for _i in nl.affine_range(1):
            tmp = nl.load(x[:, 0:128])
        nl.store(out, value=tmp)
        return out

    _raises(
        kernel,
        "err_local_variable_used_out_of_scope",
        "nl.store(out",
        match="Local variable 'tmp' is referenced outside of its parent scope",
    )


def test_arange_and_mixed_indexing():
    def one_d(x):
        t = nl.load(x[nl.arange(128)])
        return t

    def mixed(x):
        t = nl.load(x[nl.arange(128)[:, None], 0:4])
        return t

    _raises(one_d, "err_1d_arange_not_supported", "nl.arange(128)]")
    _raises(mixed, "err_unsupported_mixing_basic_advanced_tensor_indexing", "0:4]")


def test_failed_to_infer_tile_from_block_tensor():
    def kernel(x):
        blocks = nl.zeros((2, nl.par_dim(128), 8), dtype=nl.float32)
        t = nl.exp(blocks)
        return t

    _raises(kernel, "err_failed_to_infer_tile_from_local_tensor", "nl.exp(blocks)")


def test_store_dst_shape_smaller_than_value():
    def kernel(x):
        small = nl.ndarray((128, 1), dtype=nl.float32)
        small[...] = nl.load(x)
        return small

    _raises(
        kernel,
        "err_store_dst_shape_smaller_than_other_shape",
        "small[...] =",
        match=r"shape \[128, 1\] of `small` is smaller",
    )


def test_parameter_mutability_rules():
    def immutable(x):
        nl.store(x[:, 0:4], value=nl.load(x[:, 4:8]))
        out = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x[0:1, 0:1]))
        return out

    def not_returned(x: nt.mutable_tensor):
        nl.store(x[:, 0:4], value=nl.load(x[:, 4:8]))
        out = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x[0:1, 0:1]))
        return out

    def never_written(x):
        out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        return out

    _raises(
        immutable,
        "err_cannot_update_immutable_parameter",
        "nl.store(x[:, 0:4]",
        match="Cannot update immutable parameter `x`",
    )
    _raises(not_returned, "err_mutable_parameter_not_returned", "def not_returned")
    _raises(never_written, "err_tensor_output_not_written_to", "def never_written")


def test_mutable_parameter_returned_is_fine():
    @nki.jit
    def kernel(x: nt.mutable_tensor):
        nl.store(x[:, 0:4], value=nl.load(x[:, 4:8]))
        return x

    want = X.copy()
    want[:, 0:4] = X[:, 4:8]
    np.testing.assert_array_equal(kernel(X.copy()), want)


def test_init_values_and_shared_hbm_scope():
    def hbm_zeros(x):
        t = nl.zeros((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        return t

    def allocated_zeros(x):
        t = nl.zeros((128, 4), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        return t

    def shared_in_loop(x):
        for _i in nl.affine_range(2):
            out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        return out

    _raises(hbm_zeros, "err_hbm_tensor_with_init_value_not_supported", "nl.zeros(")
    _raises(
        allocated_zeros,
        "err_tensor_creation_on_scratchpad_with_init_value_not_supported",
        "nl.zeros(",
    )
    _raises(shared_in_loop, "err_shared_hbm_must_in_kernel_level", "nl.ndarray(")


def test_activation_scale_and_bias_rules():
    def bad_scale_dtype(x):
        t = nl.load(x)
        s = nl.zeros((128, 1), dtype=nl.bfloat16)
        r = nisa.activation(np.exp, t, scale=s)
        return r

    def bad_scale_shape(x):
        t = nl.load(x)
        s = nl.zeros((128, 4), dtype=nl.float32)
        r = nisa.activation(np.exp, t, scale=s)
        return r

    def bad_bias(x):
        t = nl.load(x)
        b = nl.zeros((128, 1), dtype=nl.int32)
        r = nisa.activation(np.exp, t, bias=b)
        return r

    _raises(bad_scale_dtype, "err_activation_scale_invalid_type", "nisa.activation(")
    _raises(bad_scale_shape, "err_activation_scale_scalar_or_vector", "nisa.activation(")
    _raises(bad_bias, "err_activation_bias_invalid_type", "nisa.activation(")


def test_allocated_kernel_restrictions():
    def no_bias(x):
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        t[...] = nl.load(x)
        r = nisa.activation(np.exp, t)
        return r

    def pe_transpose(x):
        t = nl.ndarray((128, 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        t[...] = nl.load(x[:, 0:128])
        r = nl.transpose(t)
        return r

    _raises(no_bias, "err_bias_tensor_must_be_specified_in_allocation", "nisa.activation(")
    _raises(
        pe_transpose,
        "err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel",
        "nl.transpose(t)",
    )


def test_mask_expression_rules():
    def modulo(x):
        i = nl.arange(128)[:, None]
        t = nl.load(x[i, nl.arange(4)[None, :]], mask=(i % 2 < 1))
        return t

    def not_equal(x):
        i = nl.arange(128)[:, None]
        t = nl.load(x[i, nl.arange(4)[None, :]], mask=(i != 3))
        return t

    def logic_or(x):
        i = nl.arange(128)[:, None]
        t = nl.load(x[i, nl.arange(4)[None, :]], mask=(i < 3) | (i > 9))
        return t

    def runtime_mask(x):
        t = nl.load(x)
        r = nl.exp(t, mask=t)
        return r

    _raises(modulo, "err_unsupported_expression_in_mask", "i % 2")
    _raises(not_equal, "err_mask_not_equal_not_supported", "i != 3")
    _raises(logic_or, "err_logic_or_not_supported", "(i < 3) | (i > 9)")
    _raises(runtime_mask, "err_unsupported_expression_in_mask", "mask=t")


def test_control_flow_on_index_and_tensor_values():
    def on_arange(x):
        i = nl.arange(128)[:, None]
        if i < 3:
            pass

    def on_tile(x):
        t = nl.load(x)
        if t:
            pass

    def while_tile(x):
        t = nl.load(x)
        while t:
            pass

    def truth(x):
        t = nl.load(x)
        return not t

    _raises(on_arange, "err_control_flow_condition_depending_on_arange", "if i < 3")
    _raises(on_tile, "err_dynamic_control_flow_not_supported", "if t:")
    _raises(while_tile, "err_while_loop_requires_unconditional_entry", "while t:")
    _raises(truth, "err_ambiguous_tensor_truth_value", "return not t")


def test_annotation_shape_mismatch_on_parameter_and_local():
    def param(x: nt.tensor[128, 100]):
        out = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.shared_hbm)
        return out

    def local(x):
        t: nt.tensor[128, 100] = nl.load(x)
        return t

    _raises(
        param,
        "err_annotation_shape_mismatch",
        "def param",
        match=r"shape of `x\[128, 512\]` does not match the expected shape of \[128, 100\]",
    )
    _raises(local, "err_annotation_shape_mismatch", "t: nt.tensor[128, 100]")


def test_cannot_assign_to_index_and_non_integer_index_math():
    def assign(x):
        i = nl.arange(128)[:, None]
        i[0] = 3

    def float_offset(x):
        i = nl.arange(128)[:, None] + 0.5
        return i

    _raises(assign, "err_cannot_assign_to_index", "i[0] = 3")
    _raises(float_offset, "err_tile_index_add_non_integer_scalar", "+ 0.5")


def test_indirect_indexing_misuse():
    idx = np.zeros((128, 1), np.int32)

    def free_dim(x, ix):
        it = nl.load(ix)
        t = nl.load(x[nl.arange(128)[:, None], it])
        return t

    def transpose2d(x, ix):
        it = nl.load(ix)
        t = nl.load_transpose2d(x[it, nl.arange(4)[None, :]])
        return t

    def on_chip(x, ix):
        it = nl.load(ix)
        t = nl.load(x)
        r = nl.copy(t[it, nl.arange(4)[None, :]])
        return r

    def psum_index(x, ix):
        it = nl.zeros((128, 1), dtype=nl.int32, buffer=nl.psum)
        t = nl.load(x[it, nl.arange(4)[None, :]])
        return t

    _raises(free_dim, "err_indirect_indices_free_dim", "nl.load(x[", X, idx)
    _raises(psum_index, "err_indirect_indices_sbuf", "nl.load(x[it", X, idx)
    _raises(
        transpose2d,
        "err_indirect_indices_are_not_supported_with_nki_api",
        "nl.load_transpose2d(",
        X,
        idx,
    )
    _raises(on_chip, "err_copy_dynamic_indirect_indices_not_natively_supported", "t[it,", X, idx)


def test_atomic_rmw_rules():
    idx = np.zeros((128, 1), np.int32)

    def not_add(x, ix):
        it = nl.load(ix)
        nl.atomic_rmw(x[it, nl.arange(4)[None, :]], value=nl.load(x[:, 0:4]), op=np.multiply)

    def static_dst(x, ix):
        nl.atomic_rmw(x[:, 0:4], value=nl.load(x[:, 0:4]), op=np.add)

    _raises(not_add, "err_atomic_rmw_add_only", "nl.atomic_rmw(", X, idx)
    _raises(static_dst, "err_atomic_rmw_dynamic_index", "nl.atomic_rmw(", X, idx)


def test_calling_context_errors():
    def inner(x):
        return x

    def outer(x):
        nki.jit(inner)[2](x)

    def bad_axis(x):
        nl.program_id(3)

    _raises(outer, "err_nested_kernel_with_spmd_grid", "nki.jit(inner)[2](x)")
    _raises(bad_axis, "err_program_id_axis_out_of_bounds", "nl.program_id(3)", grid=(2,))
    with pytest.raises(KernelError) as exc:
        nl.exp(X)
    assert exc.value.code == "err_nki_api_outside_of_nki_kernel"


def test_unknown_dtype():
    def kernel(x):
        t = nl.ndarray((4, 4), dtype="float64x")
        return t

    _raises(kernel, "err_unsupported_dtype_value", "nl.ndarray(")


def test_shape_compatibility():
    def broadcast(x):
        a, b = nl.load(x[:, 0:4]), nl.load(x[:, 0:6])
        c = nl.add(a, b)
        return c

    def contraction(x):
        a, b = nl.load(x[0:128, 0:64]), nl.load(x[0:64, 0:64])
        c = nl.matmul(a, b, transpose_x=True)
        return c

    _raises(broadcast, "err_param_shape_incompatible_with_numpy", "nl.add(a, b)")
    _raises(contraction, "err_param_shape_incompatible_with_matmul", "nl.matmul(")


def test_every_catalogued_code_is_exercised():
    """The catalogue (nki.errors) lists only codes trnsim raises, each tested above."""
    import pathlib

    src = pathlib.Path(__file__).read_text()
    for code in nki.errors.__all__:
        assert f'"{code}"' in src, code
