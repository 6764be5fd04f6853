"""Deliberately buggy B1 kernels, one per documented B1 error (nki-api.md §11.1) in the forms a
porting author writes them: each must raise a trnsim error with the B1 code at the kernel's
own `# BUG` line, with no simulator path in the text (never a non-trnsim exception)."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from qab1_helpers import expect_b1_error
from source_paths import assert_no_internal_path


def k_partitions_256(x):
    t = nl.load(x.reshape((256, 256)))  # BUG
    return t


def k_store_into_smaller(x):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))  # BUG
    return out


def k_assign_into_column(x):
    s = nl.ndarray((128, 1), dtype=nl.float32)
    s[...] = nl.load(x)  # BUG
    return x


def k_oob_shifted_arange(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    t = nl.load(x[i_p, i_f + 1])  # BUG
    return t


def k_oob_in_loop(x):
    for i in nl.affine_range(5):
        nl.load(x[:, nl.ds(i * 128, 128)])  # BUG
    return x


def k_1d_arange(x):
    t = nl.load(x[nl.arange(128), 0])  # BUG
    return t


def k_mixed_indexing(x):
    i_p = nl.arange(128)[:, None]
    t = nl.load(x[i_p, 0:512])  # BUG
    return t


def k_write_parameter(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(x, nl.load(x))  # BUG
    nl.store(out, nl.load(x))
    return out


def k_if_on_tile(x):
    t = nl.load(x)
    if t:  # BUG
        pass
    return x


def k_if_on_arange(x):
    i_p = nl.arange(128)[:, None]
    if i_p < 5:  # BUG
        pass
    return x


def k_while_on_tile(x):
    t = nl.load(x[0:1, 0:1])
    while t < 1:  # BUG
        t = t + 1
    return x


def k_matmul_stationary_too_wide(x):
    r = nl.matmul(nl.load(x[:, 0:256]), nl.load(x), transpose_x=True)  # BUG
    return r


def k_exp_of_hbm(x):
    r = nl.exp(x)  # BUG
    return r


def k_load_from_psum(x):
    p = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.psum)
    r = nl.load(p)  # BUG
    return r


def k_activation_scale_matrix(x):
    t = nl.load(x)
    r = nisa.activation(op=nl.exp, data=t, scale=nl.load(x[:, 0:2]))  # BUG
    return r


def k_index_assignment(x):
    i_p = nl.arange(128)[:, None]
    i_p[0] = 3  # BUG
    return x


def k_tile_used_after_loop(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for _ in nl.affine_range(2):
        tmp = nl.load(x)
    nl.store(out, tmp)  # BUG
    return out


def k_affine_overwrite(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for _ in nl.affine_range(2):
        nl.store(out, nl.load(x))  # BUG
    return out


def k_affine_rebinding_accumulator(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), dtype=nl.float32)
    for _ in nl.affine_range(3):
        acc = acc + nl.load(x)  # BUG: iteration 1 reads iteration 0's local `acc`
    nl.store(out, acc)
    return out


def k_nonaffine_mask(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    r = nl.exp(nl.load(x), mask=(i_p * i_f < 10))  # BUG
    return r


def k_tensor_mask(x):
    t = nl.load(x)
    r = nl.exp(t, mask=(t > 0))  # BUG
    return r


def k_or_mask(x):
    i_p = nl.arange(128)[:, None]
    r = nl.exp(nl.load(x), mask=(i_p < 3) | (i_p > 100))  # BUG
    return r


def k_annotation(x: nt.tensor[128, 256]):  # BUG
    return x


def k_local_annotation(x):
    t: nt.tensor[128, 256] = nl.load(x)  # BUG
    assert t is not None
    return x


def k_hbm_zeros(x):
    t = nl.zeros((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)  # BUG
    return t


def k_shared_hbm_in_loop(x):
    for _ in nl.affine_range(2):
        nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)  # BUG
    return x


def k_float64(x):
    t = nl.load(x, dtype=np.float64)  # BUG
    return t


def k_shape_broadcast(x):
    r = nl.load(x[:, 0:256]) + nl.load(x[:, 0:128])  # BUG
    return r


def k_partition_broadcast_operator(x):
    r = nl.load(x[0:64, :]) + nl.load(x[0:1, :])  # BUG
    return r


def k_transpose_rank3(x):
    r = nl.transpose(nl.load(x.reshape((128, 4, 128))))  # BUG
    return r


def k_never_written(x):  # BUG
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for _ in nl.affine_range(0):
        nl.store(out, nl.load(x))
    return out


def k_mutable_not_returned(x: nt.mutable_tensor):  # BUG
    nl.store(x[:, 0:4], nl.load(x[:, 4:8]))
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x[0:1, 0:1]))
    return out


def _inner(x):
    return x


def k_nested_grid(x):
    r = nki.jit(_inner)[2](x)  # BUG
    return r


CASES = [
    (k_partitions_256, "err_num_partition_exceed_arch_limit", "256 exceed"),
    (k_store_into_smaller, "err_store_dst_shape_smaller_than_other_shape", r"\[128, 256\]"),
    (k_assign_into_column, "err_store_dst_shape_smaller_than_other_shape", r"\[128, 1\]"),
    (k_oob_shifted_arange, "err_tensor_access_out_of_bound", r"\[1, 512\]"),
    (k_oob_in_loop, "err_tensor_access_out_of_bound", r"\[512, 639\]"),
    (k_1d_arange, "err_1d_arange_not_supported", "1-D"),
    (k_mixed_indexing, "err_unsupported_mixing_basic_advanced_tensor_indexing", "mixing"),
    (k_write_parameter, "err_cannot_update_immutable_parameter", "mutable_tensor"),
    (k_if_on_tile, "err_dynamic_control_flow_not_supported", "control-flow"),
    (k_if_on_arange, "err_control_flow_condition_depending_on_arange", "arange"),
    (k_while_on_tile, "err_while_loop_requires_unconditional_entry", "do-while"),
    (k_matmul_stationary_too_wide, "err_size_of_dimension_exceed_arch_limit", "128"),
    (k_exp_of_hbm, "err_unsupported_memory", "'hbm'"),
    (k_load_from_psum, "err_unsupported_memory", "'psum'"),
    (k_activation_scale_matrix, "err_activation_scale_scalar_or_vector", "scale"),
    (k_index_assignment, "err_cannot_assign_to_index", "item assignment"),
    (k_tile_used_after_loop, "err_local_variable_used_out_of_scope", "'tmp'"),
    (k_affine_overwrite, "err_unexpected_output_dependencies", "sequential_range"),
    (k_affine_rebinding_accumulator, "err_local_variable_used_out_of_scope", "'acc'"),
    (k_nonaffine_mask, "err_unsupported_expression_in_mask", "affine"),
    (k_tensor_mask, "err_unsupported_expression_in_mask", "mask"),
    (k_or_mask, "err_logic_or_not_supported", "&"),
    (k_annotation, "err_annotation_shape_mismatch", r"\[128, 256\]"),
    (k_local_annotation, "err_annotation_shape_mismatch", r"\[128, 256\]"),
    (k_hbm_zeros, "err_hbm_tensor_with_init_value_not_supported", "init value"),
    (k_shared_hbm_in_loop, "err_shared_hbm_must_in_kernel_level", "top level"),
    (k_float64, "err_unsupported_dtype_value", "float64"),
    (k_shape_broadcast, "err_param_shape_incompatible_with_numpy", "broadcast"),
    (k_partition_broadcast_operator, "err_num_partition_mismatch", "partition"),
    (k_transpose_rank3, "err_exceed_max_supported_dimension", "dimensions of 2"),
    (k_never_written, "err_tensor_output_not_written_to", "never written"),
    (k_mutable_not_returned, "err_mutable_parameter_not_returned", "not returned"),
    (k_nested_grid, "err_nested_kernel_with_spmd_grid", "grid"),
]


@pytest.mark.parametrize(("kernel", "code", "word"), CASES, ids=[c[0].__name__ for c in CASES])
def test_b1_error(kernel, code, word):
    expect_b1_error(kernel, code, word)


def test_api_outside_a_kernel_is_a_located_trnsim_error():
    from trnsim.errors import KernelError

    with pytest.raises(KernelError) as exc:
        nl.exp(np.ones((4, 4), np.float32))
    assert exc.value.code == "err_nki_api_outside_of_nki_kernel"
    assert_no_internal_path(str(exc.value))
