"""QA: deliberately buggy GA kernels. Each must raise a trnsim error at the kernel's own line,
naming the operand, the value and what is allowed, with no simulator path in the text."""

from __future__ import annotations

import nki.isa as nisa
import nki.language as nl
import numpy as np
from qa_helpers import X, expect_error

from trnsim.errors import ConstraintError, OutOfBoundsError

X256 = np.ones((256, 64), np.float32)


# ---------------------------------------------------------------- shapes and partitions


def k_partition_256(a):
    t = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.sbuf)  # BUG
    nisa.dma_copy(dst=t, src=a)
    return a


def test_partition_dim_256():
    expect_error(k_partition_256, ConstraintError, "256", "128", "pmax", args=(X256,))


def k_reshape_partition_256(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    v = t.reshape((256, 32))  # BUG
    nisa.memset(dst=v, value=0.0)
    return a


def test_reshape_changes_partition_dim():
    expect_error(k_reshape_partition_256, ConstraintError, "256", "partition")


def k_nl_load_256(a):
    nl.load(a)  # BUG
    return a


def test_nl_load_too_many_rows():
    expect_error(k_nl_load_256, ConstraintError, "256", "128", args=(X256,))


def k_tt_free_mismatch(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    u = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.memset(dst=u, value=0.0)
    nisa.tensor_tensor(dst=t, data1=t, data2=u, op=nl.add)  # BUG
    return a


def test_tensor_tensor_free_size_mismatch():
    expect_error(k_tt_free_mismatch, ConstraintError, "data2", "32", "64")


def k_tt_partition_mismatch(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    u = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.memset(dst=u, value=0.0)
    nisa.tensor_tensor(dst=t, data1=t, data2=u, op=nl.add)  # BUG
    return a


def test_tensor_tensor_partition_mismatch():
    expect_error(k_tt_partition_mismatch, ConstraintError, "data2", "64", "partition")


def k_nl_add_shapes(a):
    t = nl.load(a)
    u = nl.load(a[:, 0:32])
    nl.add(t, u)  # BUG
    return a


def test_nl_add_no_implicit_broadcast():
    expect_error(k_nl_add_shapes, ConstraintError, r"\[128, 64\]", r"\[128, 32\]", "broadcast")


def k_dma_count(a):
    t = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)  # BUG
    return a


def test_dma_element_count_mismatch():
    expect_error(k_dma_count, ConstraintError, "4096", "8192", "must match")


def k_reduce_axis0(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    r = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=0)  # BUG
    return a


def test_tensor_reduce_partition_axis():
    expect_error(k_reduce_axis0, ConstraintError, "axis=0", "partition")


def k_reduce_non_trailing(a):
    t = nl.ndarray((128, 8, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    r = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=1)  # BUG
    return a


def test_tensor_reduce_non_trailing_axis():
    expect_error(k_reduce_non_trailing, ConstraintError, "axis=1", "trailing", r"\(1, 2\)")


def k_reduce_dst_shape(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    r = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=1)  # BUG
    return a


def test_tensor_reduce_dst_shape():
    expect_error(k_reduce_dst_shape, ConstraintError, "dst", r"\(128, 2\)")


def k_bn_stats_wide(a):
    t = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    s = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(dst=s, data=t)  # BUG
    return a


def test_bn_stats_free_size():
    expect_error(k_bn_stats_wide, ConstraintError, "data", "1024", "512", "bn_stats_fmax")


def k_bn_stats_dst(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    s = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(dst=s, data=t)  # BUG
    return a


def test_bn_stats_dst_size():
    expect_error(k_bn_stats_dst, ConstraintError, "dst", "4", "6")


def k_iota_count(a):
    t = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=t, pattern=[[1, 32]], offset=0)  # BUG
    return a


def test_iota_pattern_count():
    expect_error(k_iota_count, ConstraintError, "32", "64", "pattern")


# ---------------------------------------------------------------- memory spaces


def k_compute_on_hbm(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.tensor_scalar(dst=out, data=a, op0=nl.add, operand0=1.0)  # BUG
    return out


def test_vector_op_on_hbm():
    expect_error(k_compute_on_hbm, ConstraintError, "dst", "hbm", "sbuf")


def k_hbm_input_operand(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=t, data1=a, data2=a, op=nl.add)  # BUG
    return a


def test_hbm_operand_to_vector_engine():
    expect_error(k_hbm_input_operand, ConstraintError, "data1", "hbm", "sbuf, psum")


def k_dma_from_psum(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ps = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=ps, value=0.0)
    nisa.dma_copy(dst=out, src=ps)  # BUG
    return out


def test_dma_source_in_psum():
    expect_error(k_dma_from_psum, ConstraintError, "src", "psum", "hbm, sbuf")


def k_gpsimd_psum(a):
    ps = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_copy(dst=ps, src=t, engine=nisa.gpsimd_engine)  # BUG
    return a


def test_gpsimd_cannot_write_psum():
    expect_error(k_gpsimd_psum, ConstraintError, "gpsimd", "psum", "dst")


def k_iota_psum(a):
    ps = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.iota(dst=ps, pattern=[[1, 64]], offset=0)  # BUG
    return a


def test_iota_into_psum():
    expect_error(k_iota_psum, ConstraintError, "dst", "psum", "sbuf")


def k_affine_select_psum(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.affine_select(
        dst=t, pattern=[[-1, 64]], channel_multiplier=1, on_true_tile=s, on_false_value=0.0
    )  # BUG
    return a


def test_affine_select_into_psum():
    expect_error(k_affine_select_psum, ConstraintError, "dst", "psum", "sbuf")


def k_matmul_sbuf_dst(a):
    s = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    d = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_matmul(dst=d, stationary=s, moving=s)  # BUG
    return a


def test_matmul_dst_in_sbuf():
    expect_error(k_matmul_sbuf_dst, ConstraintError, "dst", "sbuf", "psum")


def k_both_psum(a):
    p1 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    p2 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=p1, value=0.0)
    nisa.memset(dst=p2, value=0.0)
    nisa.tensor_tensor(dst=t, data1=p1, data2=p2, op=nl.add)  # BUG
    return a


def test_two_psum_inputs():
    expect_error(k_both_psum, ConstraintError, "psum", "at most 1")


def k_psum_too_big(a):
    nl.ndarray((128, 4097), dtype=nl.float32, buffer=nl.psum)  # BUG
    return a


def test_psum_allocation_over_capacity():
    from trnsim.errors import AllocationError

    expect_error(k_psum_too_big, AllocationError, "16388", "16384")


# ---------------------------------------------------------------- tensor engine limits


def k_moving_640(a):
    s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    m = nl.ndarray((128, 640), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=m, value=1.0)
    ps = nl.ndarray((128, 640), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=s, moving=m)  # BUG
    return a


def test_moving_free_size_over_512_on_trn2():
    expect_error(k_moving_640, ConstraintError, "moving", "640", "512", chip="trn2")


def k_matmul_k_mismatch(a):
    s = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    m = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=m, value=1.0)
    ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=s, moving=m)  # BUG
    return a


def test_matmul_contraction_mismatch():
    expect_error(k_matmul_k_mismatch, ConstraintError, "moving", "64", "128")


def k_matmul_dst_wrong_shape(a):
    s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    m = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=m, value=1.0)
    ps = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=s, moving=m)  # BUG
    return a


def test_matmul_dst_partitions_not_stationary_free():
    expect_error(k_matmul_dst_wrong_shape, ConstraintError, "dst", "128", "64")


def k_matmul_int_dst(a):
    s = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    ps = nl.ndarray((128, 128), dtype=nl.int32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=s, moving=s)  # BUG
    return a


def test_matmul_int32_dst():
    expect_error(k_matmul_int_dst, ConstraintError, "dst", "int32", "float32")


def k_matmul_bf16_dst(a):
    s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    ps = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=s, moving=s)  # BUG
    return a


def test_matmul_bf16_dst_only_on_trn3():
    expect_error(k_matmul_bf16_dst, ConstraintError, "bfloat16", "float32", "trn2", chip="trn2")


def k_matmul_fp32_bf16(a):
    s = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    m = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=m, value=1.0)
    ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=s, moving=m)  # BUG
    return a


def test_matmul_fp32_with_bf16():
    expect_error(k_matmul_fp32_bf16, ConstraintError, "float32", "bfloat16")


def k_matmul_fp8fn_trn2(a):
    s = nl.ndarray((128, 128), dtype=nl.float8_e4m3fn, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=s, moving=s)  # BUG
    return a


def test_matmul_fp8_e4m3fn_on_trn2():
    expect_error(
        k_matmul_fp8fn_trn2, ConstraintError, "stationary", "float8_e4m3fn", "trn2", chip="trn2"
    )


def k_vector_transpose_64(a):
    t = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    u = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_transpose(dst=u, data=t, engine=nisa.vector_engine)  # BUG
    return a


def test_vector_engine_transpose_limit():
    expect_error(k_vector_transpose_64, ConstraintError, r"\[64, 64\]", r"\[32, 32\]")


def k_transpose_dst_shape(a):
    t = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    u = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=u, data=t)  # BUG
    return a


def test_transpose_dst_shape():
    expect_error(k_transpose_dst_shape, ConstraintError, "dst", r"\[32, 64\]")


def k_transpose_dtype(a):
    t = nl.ndarray((64, 32), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    u = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=u, data=t)  # BUG
    return a


def test_transpose_dtype_change():
    expect_error(k_transpose_dtype, ConstraintError, "float32", "bfloat16", "dtype")


# ---------------------------------------------------------------- quadrant rule


def k_quadrant_16(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t[16:80, :], data=t[16:80, :], op0=nl.add, operand0=1.0)  # BUG
    return a


def test_quadrant_rule_64_partitions_at_16():
    expect_error(k_quadrant_16, ConstraintError, "64 partitions", "16", "0 or 64")


def k_quadrant_96(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t[32:128, :], data=t[32:128, :], op0=nl.add, operand0=1.0)  # BUG
    return a


def test_quadrant_rule_96_partitions_at_32():
    expect_error(k_quadrant_96, ConstraintError, "96", "32", "partition 0")


def k_quadrant_ok_dma(a):
    """DMA is not bound by the quadrant rule: this kernel is legal."""
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[16:80, :], src=a[0:64, :])
    return a


def test_quadrant_rule_does_not_apply_to_dma():
    import nki

    nki.simulate(k_quadrant_ok_dma)(X)


# ---------------------------------------------------------------- scalar operands


def k_bias_wide(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.activation(dst=t, op=nl.exp, data=t, bias=t)  # BUG
    return a


def test_activation_bias_not_p1():
    expect_error(k_bias_wide, ConstraintError, "bias", r"\(128, 64\)", r"\(P, 1\)")


def k_ts_operand_wide(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=t[:, 0:2])  # BUG
    return a


def test_tensor_scalar_operand_two_columns():
    expect_error(k_ts_operand_wide, ConstraintError, "operand0", r"\(128, 2\)", r"\(P, 1\)")


def k_ts_operand_partitions(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=t[0:64, 0:1])  # BUG
    return a


def test_tensor_scalar_operand_partitions():
    expect_error(k_ts_operand_partitions, ConstraintError, "operand0", "64", "128")


def k_act_bad_op(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.activation(dst=t, op=nl.add, data=t)  # BUG
    return a


def test_activation_with_alu_op():
    expect_error(k_act_bad_op, ConstraintError, "add", "exp")


def k_bitvec_on_float(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.bitwise_and)  # BUG
    return a


def test_bitvec_op_on_float():
    expect_error(k_bitvec_on_float, ConstraintError, "bitwise_and", "float32", "integer")


def k_memset_float_into_int(a):
    t = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.5)  # BUG
    return a


def test_memset_float_into_int():
    expect_error(k_memset_float_into_int, ConstraintError, "1.5", "int32")


def k_exponential_trn2(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.exponential(dst=t, src=t)  # BUG
    return a


def test_trn3_only_instruction_on_trn2():
    expect_error(k_exponential_trn2, ConstraintError, "exponential", "trn2", chip="trn2")


# ---------------------------------------------------------------- bounds and views


def k_oob_hbm_ds(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[nl.ds(64, 128), :])  # BUG
    return a


def test_out_of_bounds_ds_on_hbm():
    expect_error(k_oob_hbm_ds, OutOfBoundsError, "dimension 0", r"\[64, 191\]", "128")


def k_oob_python_slice(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:80], src=a[:, 0:80])  # BUG
    return a


def test_python_slice_past_end_is_not_clamped():
    expect_error(k_oob_python_slice, OutOfBoundsError, "dimension 1", "79", "64")


def k_oob_sbuf_ds(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t[:, nl.ds(48, 32)])  # BUG
    return a


def test_out_of_bounds_ds_on_sbuf():
    expect_error(k_oob_sbuf_ds, OutOfBoundsError, r"\[48, 79\]", "64")


def k_oob_int(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[:, 64]  # BUG
    return a


def test_out_of_bounds_integer_index():
    expect_error(k_oob_int, OutOfBoundsError, "64")


def k_negative_ds(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:16], src=a[:, nl.ds(-8, 16)])  # BUG
    return a


def test_negative_ds_start():
    expect_error(k_negative_ds, OutOfBoundsError, "-8")


def k_too_many_indices(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[:, 0, 0]  # BUG
    return a


def test_too_many_indices():
    expect_error(k_too_many_indices, ConstraintError, "3", "2-D")


def k_ap_oob(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap(pattern=[[64, 128], [2, 64]], offset=0))  # BUG
    return a


def test_ap_reaches_past_the_tensor():
    expect_error(k_ap_oob, OutOfBoundsError, "8254", "8191")


def k_ap_partition_step(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    u = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t.ap(pattern=[[128, 64], [1, 64]]))  # BUG
    return a


def test_sbuf_ap_partition_step():
    expect_error(k_ap_partition_step, ConstraintError, "128", "64")


def k_reshape_count(a):
    a.reshape((100, 100))  # BUG
    return a


def test_reshape_wrong_element_count():
    expect_error(k_reshape_count, ConstraintError, "8192", "10000")


def k_permute_partition(a):
    t = nl.ndarray((128, 4, 16), dtype=nl.float32, buffer=nl.sbuf)
    t.permute((1, 0, 2))  # BUG
    return a


def test_permute_moves_partition_dim():
    expect_error(k_permute_partition, ConstraintError, r"\(1, 0, 2\)", "partition")


def k_broadcast_non_unit(a):
    t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    t.broadcast(1, 16)  # BUG
    return a


def test_broadcast_non_unit_dim():
    expect_error(k_broadcast_non_unit, ConstraintError, "size 4", "size-1")


# ---------------------------------------------------------------- argument kinds


def k_buffer_string(a):
    nl.ndarray((128, 64), dtype=nl.float32, buffer="sbuf")  # BUG
    return a


def test_buffer_given_as_string():
    expect_error(k_buffer_string, ConstraintError, "'sbuf'", "nl.sbuf")


def k_unknown_dtype(a):
    nl.ndarray((128, 64), dtype="float33", buffer=nl.sbuf)  # BUG
    return a


def test_unknown_dtype():
    expect_error(k_unknown_dtype, ConstraintError, "float33", "float32")


def k_numpy_operand(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=t, data1=t, data2=np.ones((128, 64), np.float32), op=nl.add)  # BUG
    return a


def test_numpy_array_as_operand():
    exc = expect_error(k_numpy_operand, ConstraintError, "data2", "tensor")
    assert len(exc.message) < 400, f"message dumps the whole array: {len(exc.message)} chars"


def test_float_ds_start():
    def k_float_ds(a):
        t = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, nl.ds(1.5, 16)])  # BUG
        return a

    expect_error(k_float_ds, ConstraintError, "1.5")


def test_float_slice_bounds():
    def k_float_slice(a):
        t = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, 2.0:18.0])  # BUG
        return a

    expect_error(k_float_slice, ConstraintError, "2.0")


def test_missing_required_argument():
    def k_missing(a):
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add)  # BUG
        return a

    expect_error(k_missing, ConstraintError, "operand0")


def test_beta1_keyword_on_ga_call():
    def k_mask(a):
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=t, mask=None)  # BUG
        return a

    expect_error(k_mask, ConstraintError, "mask")


# ---------------------------------------------------------------- kernel outputs


def k_return_private_hbm(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out, src=a)
    return out  # BUG


def k_return_sbuf(a):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    return t  # BUG


def test_return_private_hbm_warns_at_return():
    """Accepted with a warning at the return line: the migration guide says nl.hbm outputs
    fail to compile, AWS's optimization tutorial returns one (issue 12)."""
    import warnings

    import nki

    from trnsim.errors import SimulationWarning

    a = np.ones((128, 64), np.float32)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = nki.simulate(k_return_private_hbm)(a)
    hits = [x for x in w if issubclass(x.category, SimulationWarning)]
    assert len(hits) == 1 and "shared_hbm" in str(hits[0].message)
    assert hits[0].lineno == k_return_private_hbm.__code__.co_firstlineno + 3
    np.testing.assert_array_equal(out, a)


def test_return_sbuf_points_at_return():
    from trnsim.errors import KernelError

    expect_error(k_return_sbuf, KernelError, "sbuf", "shared_hbm")


def k_return_psum_in_tuple(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=t, value=0.0)
    return (a, t)  # BUG


def test_return_psum_inside_a_tuple_points_at_return():
    expect_error(k_return_psum_in_tuple, ConstraintError, "psum", "shared_hbm")


def test_return_of_jit_kernel_points_at_return():
    import nki

    @nki.jit
    def k_jit_return_sbuf(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        return t  # BUG

    expect_error(k_jit_return_sbuf, ConstraintError, "sbuf", "shared_hbm")


def k_sbuf_past_usable(a):
    fmax = nl.tile_size.sbuf_fmax  # usable fp32 elements per partition on this chip
    t = nl.ndarray((128, fmax + 1000), dtype=nl.float32, buffer=nl.sbuf)  # BUG
    nisa.memset(dst=t, value=0.0)
    return a


def test_sbuf_allocation_respects_usable_size():
    from trnsim.errors import AllocationError

    exc = expect_error(k_sbuf_past_usable, AllocationError, "sbuf")
    # requested / capacity: (61438 + 1000) fp32 elements = 249752 bytes > 245752 usable
    assert "requested 249752 bytes per partition" in exc.message
    assert "a partition holds 245752 usable bytes" in exc.message
    assert "total_available_sbuf_size" in exc.message
