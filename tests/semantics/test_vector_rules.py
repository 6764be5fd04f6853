"""One deliberately buggy call per documented rule of the Vector arithmetic family
(nki-api.md §7.3, §8.1, §8.3, §5A): ConstraintError, with the message naming the problem,
located at the kernel's own line, and no simulator path in the text."""

from __future__ import annotations

import nki.isa as nisa
import nki.language as nl
import pytest
from source_paths import assert_no_internal_path
from vector_helpers import run

from trnsim.errors import ConstraintError

P, N = 8, 16
E = nisa.engine
C = nisa.reduce_cmd
f32, bf16, i32, u8 = nl.float32, nl.bfloat16, nl.int32, nl.uint8


def t(shape=(P, N), dtype=f32, space="sbuf"):
    """A fresh (uninitialised) tile; the instruction fails before it is read."""
    return nl.ndarray(shape, dtype, buffer=nl.psum if space == "psum" else nl.sbuf)


def col(dtype=f32, space="sbuf"):
    return t((P, 1), dtype, space)


CASES = [
    # ---- tensor_tensor
    (
        "tt_unknown_op",
        lambda: nisa.tensor_tensor(dst=t(), data1=t(), data2=t(), op="frobnicate"),
        "not an ALU operator",
        None,
    ),
    (
        "tt_unary_op",
        lambda: nisa.tensor_tensor(dst=t(), data1=t(), data2=t(), op=nl.abs),
        "unary op",
        None,
    ),
    (
        "tt_power_on_vector",
        lambda: nisa.tensor_tensor(dst=t(), data1=t(), data2=t(), op=nl.power, engine=E.vector),
        "GpSimd engine only",
        None,
    ),
    (
        "tt_bitvec_float",
        lambda: nisa.tensor_tensor(dst=t(), data1=t(), data2=t(), op=nl.bitwise_and),
        "needs integer dtypes",
        None,
    ),
    (
        "tt_two_psum_inputs",
        lambda: nisa.tensor_tensor(
            dst=t(), data1=t(space="psum"), data2=t(space="psum"), op=nl.add
        ),
        "in psum",
        None,
    ),
    (
        "tt_partitions",
        lambda: nisa.tensor_tensor(dst=t(), data1=t((4, N)), data2=t(), op=nl.add),
        "same partition count",
        None,
    ),
    (
        "tt_elements",
        lambda: nisa.tensor_tensor(dst=t(), data1=t((P, 8)), data2=t(), op=nl.add),
        "same elements per partition",
        None,
    ),
    (
        "tt_gpsimd_psum",
        lambda: nisa.tensor_tensor(
            dst=t(), data1=t(space="psum"), data2=t(), op=nl.add, engine=E.gpsimd
        ),
        "gpsimd engine cannot read psum",
        None,
    ),
    (
        "tt_scalar_engine",
        lambda: nisa.tensor_tensor(dst=t(), data1=t(), data2=t(), op=nl.add, engine=E.scalar),
        "cannot run on the scalar",
        None,
    ),
    (
        "tt_abs_max_v3",
        lambda: nisa.tensor_tensor(dst=t(), data1=t(), data2=t(), op=nl.abs_max),
        "NeuronCore-v4",
        "trn2",
    ),
    # ---- tensor_scalar
    (
        "ts_mixed_classes",
        lambda: nisa.tensor_scalar(
            dst=t(dtype=i32),
            data=t(dtype=i32),
            op0=nl.bitwise_and,
            operand0=1,
            op1=nl.add,
            operand1=1,
        ),
        "mix bitvec and arithmetic",
        None,
    ),
    (
        "ts_bitvec_gpsimd",
        lambda: nisa.tensor_scalar(
            dst=t(dtype=i32), data=t(dtype=i32), op0=nl.bitwise_or, operand0=1, engine=E.gpsimd
        ),
        "Vector engine only",
        None,
    ),
    (
        "ts_bitvec_float_data",
        lambda: nisa.tensor_scalar(dst=t(), data=t(), op0=nl.right_shift, operand0=1),
        "needs integer dtypes",
        None,
    ),
    (
        "ts_bitvec_float_operand",
        lambda: nisa.tensor_scalar(
            dst=t(dtype=i32), data=t(dtype=i32), op0=nl.left_shift, operand0=1.5
        ),
        "needs an integer operand0",
        None,
    ),
    (
        "ts_unary_operand",
        lambda: nisa.tensor_scalar(dst=t(), data=t(), op0=nl.abs, operand0=2.0),
        "unary op but operand0",
        None,
    ),
    (
        "ts_square_v3",
        lambda: nisa.tensor_scalar(dst=t(), data=t(), op0=nl.square, operand0=None),
        "NeuronCore-v4",
        "trn2",
    ),
    (
        "ts_operand_shape",
        lambda: nisa.tensor_scalar(dst=t(), data=t(), op0=nl.add, operand0=t((P, 2))),
        r"scalar or a \(P, 1\)",
        None,
    ),
    (
        "ts_operand_partitions",
        lambda: nisa.tensor_scalar(dst=t(), data=t(), op0=nl.add, operand0=t((4, 1))),
        "partitions",
        None,
    ),
    (
        "ts_missing_operand1",
        lambda: nisa.tensor_scalar(dst=t(), data=t(), op0=nl.add, operand0=1.0, op1=nl.multiply),
        "needs operand1",
        None,
    ),
    (
        "ts_operand1_without_op1",
        lambda: nisa.tensor_scalar(dst=t(), data=t(), op0=nl.add, operand0=1.0, operand1=2.0),
        "without op1",
        None,
    ),
    (
        "ts_scalar_engine_v3_pair",
        lambda: nisa.tensor_scalar(
            dst=t(), data=t(), op0=nl.subtract, operand0=1.0, engine=E.scalar
        ),
        "NeuronCore-v3 cannot run",
        "trn2",
    ),
    (
        "ts_scalar_engine_v2",
        lambda: nisa.tensor_scalar(
            dst=t(), data=t(), op0=nl.multiply, operand0=1.0, engine=E.scalar
        ),
        "from NeuronCore-v3 on",
        "trn1",
    ),
    (
        "ts_rsqrt_on_vector",
        lambda: nisa.tensor_scalar(dst=t(), data=t(), op0=nl.rsqrt, operand0=None, engine=E.vector),
        "rsqrt does not run on the Vector",
        None,
    ),
    (
        "ts_gpsimd_not_rsqrt",
        lambda: nisa.tensor_scalar(dst=t(), data=t(), op0=nl.add, operand0=1.0, engine=E.gpsimd),
        "GpSimd engine runs tensor_scalar only for rsqrt",
        None,
    ),
    (
        "ts_layout",
        lambda: nisa.tensor_scalar(dst=t((P, 4)), data=t(), op0=nl.add, operand0=1.0),
        "same elements per partition",
        None,
    ),
    # ---- scalar_tensor_tensor
    (
        "stt_bitvec",
        lambda: nisa.scalar_tensor_tensor(
            dst=t(dtype=i32),
            data=t(dtype=i32),
            op0=nl.bitwise_and,
            operand0=1,
            op1=nl.add,
            operand1=t(dtype=i32),
        ),
        "bitvec op",
        None,
    ),
    (
        "stt_two_psum",
        lambda: nisa.scalar_tensor_tensor(
            dst=t(),
            data=t(space="psum"),
            op0=nl.add,
            operand0=1.0,
            op1=nl.add,
            operand1=t(space="psum"),
        ),
        "both in psum",
        None,
    ),
    (
        "stt_operand1_shape",
        lambda: nisa.scalar_tensor_tensor(
            dst=t(), data=t(), op0=nl.add, operand0=1.0, op1=nl.add, operand1=t((P, 8))
        ),
        "operand1",
        None,
    ),
    (
        "stt_reduce_res_without_op",
        lambda: nisa.scalar_tensor_tensor(
            dst=t(), data=t(), op0=nl.add, operand0=1.0, op1=nl.add, operand1=t(), reduce_res=col()
        ),
        "without reduce_op",
        None,
    ),
    # ---- tensor_tensor_scan
    (
        "scan_bitvec",
        lambda: nisa.tensor_tensor_scan(
            dst=t(dtype=i32),
            data0=t(dtype=i32),
            data1=t(dtype=i32),
            initial=0,
            op0=nl.bitwise_xor,
            op1=nl.add,
        ),
        "not a binary arithmetic op",
        None,
    ),
    (
        "scan_initial_shape",
        lambda: nisa.tensor_tensor_scan(
            dst=t(), data0=t(), data1=t(), initial=t((P, 2)), op0=nl.multiply, op1=nl.add
        ),
        r"\(P, 1\)",
        None,
    ),
    (
        "scan_two_psum",
        lambda: nisa.tensor_tensor_scan(
            dst=t(),
            data0=t(space="psum"),
            data1=t(space="psum"),
            initial=0.0,
            op0=nl.multiply,
            op1=nl.add,
        ),
        "both in psum",
        None,
    ),
    # ---- tensor_reduce
    (
        "reduce_axis0",
        lambda: nisa.tensor_reduce(dst=col(), op=nl.add, data=t(), axis=0),
        "partition axis 0",
        None,
    ),
    (
        "reduce_not_trailing",
        lambda: nisa.tensor_reduce(dst=t((P, 4)), op=nl.add, data=t((P, 4, 4)), axis=1),
        "consecutive trailing",
        None,
    ),
    (
        "reduce_gap",
        lambda: nisa.tensor_reduce(dst=t((P, 2)), op=nl.add, data=t((P, 2, 2, 4)), axis=(1, 3)),
        "consecutive trailing",
        None,
    ),
    (
        "reduce_axis_type",
        lambda: nisa.tensor_reduce(dst=col(), op=nl.add, data=t(), axis=1.0),
        "not an int",
        None,
    ),
    (
        "reduce_too_many_axes",
        lambda: nisa.tensor_reduce(
            dst=col(), op=nl.add, data=t((P, 1, 1, 1, 2, 8)), axis=(1, 2, 3, 4, 5)
        ),
        "at most 4",
        None,
    ),
    (
        "reduce_op",
        lambda: nisa.tensor_reduce(dst=col(), op=nl.divide, data=t(), axis=1),
        "not a reduction op",
        None,
    ),
    (
        "reduce_bitvec_float",
        lambda: nisa.tensor_reduce(dst=col(), op=nl.bitwise_or, data=t(), axis=1),
        "integer dtypes",
        None,
    ),
    (
        "reduce_bitvec_negate",
        lambda: nisa.tensor_reduce(
            dst=col(i32), op=nl.bitwise_or, data=t(dtype=i32), axis=1, negate=True
        ),
        "negate",
        None,
    ),
    (
        "reduce_dst_size",
        lambda: nisa.tensor_reduce(dst=t((P, 2)), op=nl.add, data=t(), axis=1),
        "kept elements",
        None,
    ),
    # ---- tensor_scalar_reduce
    (
        "tsr_bitvec",
        lambda: nisa.tensor_scalar_reduce(
            dst=t(dtype=i32),
            data=t(dtype=i32),
            op0=nl.bitwise_and,
            operand0=1,
            reduce_op=nl.add,
            reduce_res=col(),
        ),
        "bitvec",
        None,
    ),
    (
        "tsr_reduce_op",
        lambda: nisa.tensor_scalar_reduce(
            dst=t(), data=t(), op0=nl.add, operand0=1.0, reduce_op=nl.subtract, reduce_res=col()
        ),
        "reduce_op=subtract is not supported",
        None,
    ),
    (
        "tsr_load_without_init",
        lambda: nisa.tensor_scalar_reduce(
            dst=t(),
            data=t(),
            op0=nl.add,
            operand0=1.0,
            reduce_op=nl.add,
            reduce_res=col(),
            reduce_cmd=C.load_reduce,
        ),
        "needs reduce_init",
        None,
    ),
    (
        "tsr_reduce_res_shape",
        lambda: nisa.tensor_scalar_reduce(
            dst=t(), data=t(), op0=nl.add, operand0=1.0, reduce_op=nl.add, reduce_res=t((P, 2))
        ),
        "reduce_res",
        None,
    ),
    (
        "tsr_rank",
        lambda: nisa.tensor_scalar_reduce(
            dst=t((P, 2, 2, 2, 2)),
            data=t((P, 2, 2, 2, 2)),
            op0=nl.add,
            operand0=1.0,
            reduce_op=nl.add,
        ),
        "at most 4",
        None,
    ),
    (
        "tsr_bad_cmd",
        lambda: nisa.tensor_scalar_reduce(
            dst=t(), data=t(), op0=nl.add, operand0=1.0, reduce_op=nl.add, reduce_cmd=9
        ),
        "not a reduce command",
        None,
    ),
    # ---- tensor_scalar_cumulative
    (
        "cum_int32",
        lambda: nisa.tensor_scalar_cumulative(
            dst=t(dtype=i32), src=t(dtype=i32), op0=nl.add, op1=nl.add, imm0=0.0
        ),
        "dtype int32",
        None,
    ),
    (
        "cum_op1",
        lambda: nisa.tensor_scalar_cumulative(
            dst=t(), src=t(), op0=nl.add, op1=nl.divide, imm0=0.0
        ),
        "not a cumulative op",
        None,
    ),
    (
        "cum_op0_bitvec",
        lambda: nisa.tensor_scalar_cumulative(
            dst=t(dtype=nl.int16), src=t(dtype=nl.int16), op0=nl.bitwise_and, op1=nl.add, imm0=1
        ),
        "not a binary arithmetic op",
        None,
    ),
    (
        "cum_imm0_dtype",
        lambda: nisa.tensor_scalar_cumulative(
            dst=t(), src=t(), op0=nl.add, op1=nl.add, imm0=col(bf16)
        ),
        "must be float32",
        None,
    ),
    (
        "cum_load_without_imm1",
        lambda: nisa.tensor_scalar_cumulative(
            dst=t(), src=t(), op0=nl.add, op1=nl.add, imm0=0.0, reduce_cmd=C.load_reduce
        ),
        "needs imm1",
        None,
    ),
    (
        "cum_reset",
        lambda: nisa.tensor_scalar_cumulative(
            dst=t(), src=t(), op0=nl.add, op1=nl.add, imm0=0.0, reduce_cmd=C.reset
        ),
        "reduce_cmd=reset is not supported",
        None,
    ),
    # ---- tensor_copy
    (
        "copy_scalar_v2",
        lambda: nisa.tensor_copy(dst=t(), src=t(), engine=E.scalar),
        "has no tensor_copy",
        "trn1",
    ),
    (
        "copy_gpsimd_psum",
        lambda: nisa.tensor_copy(dst=t(space="psum"), src=t(), engine=E.gpsimd),
        "gpsimd engine cannot write psum",
        None,
    ),
    (
        "copy_elements",
        lambda: nisa.tensor_copy(dst=t((P, 8)), src=t()),
        "same elements per partition",
        None,
    ),
    (
        "copy_packed_cast",
        lambda: nisa.tensor_copy(dst=t((P, 4), nl.float8_e4m3fn_x4), src=t((P, 4), f32)),
        "packed",
        None,
    ),
    # ---- tensor_copy_predicated
    (
        "pred_dtype",
        lambda: nisa.tensor_copy_predicated(dst=t(), src=t(), predicate=t()),
        "predicate' has dtype float32",
        None,
    ),
    (
        "pred_src_dtype",
        lambda: nisa.tensor_copy_predicated(dst=t(), src=t(dtype=bf16), predicate=t(dtype=u8)),
        "same dtype",
        None,
    ),
    (
        "pred_two_psum",
        lambda: nisa.tensor_copy_predicated(
            dst=t(), src=t(space="psum"), predicate=t(dtype=u8, space="psum")
        ),
        "both in psum",
        None,
    ),
    (
        "pred_reverse_tensor_src",
        lambda: nisa.tensor_copy_predicated(
            dst=t(), src=t(), predicate=t(dtype=u8), reverse_pred=True
        ),
        "src is a scalar",
        None,
    ),
    (
        "pred_float_into_int",
        lambda: nisa.tensor_copy_predicated(dst=t(dtype=i32), src=1.5, predicate=t(dtype=u8)),
        "float src needs a float dst",
        None,
    ),
    (
        "pred_int_into_float",
        lambda: nisa.tensor_copy_predicated(dst=t(), src=3, predicate=t(dtype=u8)),
        "int src needs an integer dst",
        None,
    ),
    (
        "pred_shape",
        lambda: nisa.tensor_copy_predicated(dst=t(), src=1.0, predicate=t((P, 4), u8)),
        "predicate",
        None,
    ),
    # ---- reciprocal, memset, iota
    (
        "recip_shape",
        lambda: nisa.reciprocal(dst=t((P, 4)), data=t()),
        "same elements per partition",
        None,
    ),
    (
        "memset_float_into_int",
        lambda: nisa.memset(dst=t(dtype=i32), value=1.0),
        "pass an int for integer tensors",
        None,
    ),
    (
        "memset_half_into_uint",
        lambda: nisa.memset(dst=t(dtype=nl.uint32), value=0.5),
        "pass an int for integer tensors",
        None,
    ),
    (
        "memset_packed_nonzero",
        lambda: nisa.memset(dst=t((P, 4), nl.float8_e5m2_x4), value=1),
        "only be set to 0",
        None,
    ),
    ("memset_tensor_value", lambda: nisa.memset(dst=t(), value=col()), "compile-time scalar", None),
    (
        "memset_gpsimd_psum",
        lambda: nisa.memset(dst=t(space="psum"), value=0, engine=E.gpsimd),
        "cannot write psum",
        None,
    ),
    ("iota_count", lambda: nisa.iota(dst=t(dtype=i32), pattern=[[1, 8]]), "generates 8", None),
    ("iota_levels", lambda: nisa.iota(dst=t((P, 32), i32), pattern=[[1, 2]] * 5), "1 to 4", None),
    (
        "iota_psum",
        lambda: nisa.iota(dst=t(dtype=i32, space="psum"), pattern=[[1, N]]),
        "is in psum",
        None,
    ),
    (
        "iota_offset",
        lambda: nisa.iota(dst=t(dtype=i32), pattern=[[1, N]], offset=0.5),
        "offset=0.5 is not an integer",
        None,
    ),
    # ---- exponential
    ("exp_v3", lambda: nisa.exponential(dst=t(), src=t()), "NeuronCore-v4", "trn2"),
    (
        "exp_reduce_init",
        lambda: nisa.exponential(
            dst=t(), src=t(), reduce_res=col(), reduce_cmd=C.reset_reduce, reduce_init=1.0
        ),
        "reduce_init must be unset or 0.0",
        None,
    ),
    (
        "exp_max_value_dtype",
        lambda: nisa.exponential(dst=t(), src=t(), max_value=col(bf16)),
        "must be float32",
        None,
    ),
    (
        "exp_dst_dtype",
        lambda: nisa.exponential(dst=t(dtype=nl.uint32), src=t()),
        "dtype uint32",
        None,
    ),
    (
        "exp_rank",
        lambda: nisa.exponential(dst=t((P, 2, 2, 2, 2)), src=t((P, 2, 2, 2, 2))),
        "at most 4",
        None,
    ),
    # ---- dropout, rng, seeds, states
    ("dropout_prob_range", lambda: nisa.dropout(dst=t(), data=t(), prob=1.5), "outside", None),
    (
        "dropout_int_prob_dtype",
        lambda: nisa.dropout(dst=t(dtype=i32), data=t(dtype=i32), prob=col(bf16)),
        "float32 for integer data",
        None,
    ),
    (
        "dropout_dst_dtype",
        lambda: nisa.dropout(dst=t(dtype=bf16), data=t(), prob=0.5),
        "same dtype",
        None,
    ),
    ("rng_float_dst", lambda: nisa.rng(dst=t()), "integer dst", None),
    ("rng_gpsimd_v2", lambda: nisa.rng(dst=t(dtype=i32), engine=E.gpsimd), "NeuronCore-v3", "trn1"),
    (
        "rng_gpsimd_psum",
        lambda: nisa.rng(dst=t(dtype=i32, space="psum"), engine=E.gpsimd),
        "cannot write psum",
        None,
    ),
    ("seed_shape", lambda: nisa.set_rng_seed(src_seeds=t((1, 2), i32)), r"\[1, 1\]", None),
    ("seed_dtype", lambda: nisa.set_rng_seed(src_seeds=t((1, 1), f32)), "dtype float32", None),
    ("rand2_v3", lambda: nisa.rand2(dst=t(), min=0.0, max=1.0), "NeuronCore-v4", "trn2"),
    ("rand2_min_shape", lambda: nisa.rand2(dst=t(), min=t(), max=1.0), r"\(P, 1\)", None),
    (
        "state_v2",
        lambda: nisa.rand_set_state(src_seeds=t((P, 6), nl.uint32)),
        "NeuronCore-v3",
        "trn1",
    ),
    (
        "state_vector_v3",
        lambda: nisa.rand_get_state(dst=t((P, 24), nl.uint32), engine=E.vector),
        "NeuronCore-v4",
        "trn2",
    ),
    (
        "state_words",
        lambda: nisa.rand_set_state(src_seeds=t((P, 24), nl.uint32)),
        "6 uint32 per lane",
        None,
    ),
    ("state_dtype", lambda: nisa.rand_get_state(dst=t((P, 6), i32)), "dtype int32", None),
]


@pytest.mark.parametrize(
    ("call", "match", "chip"), [pytest.param(c, m, ch, id=i) for i, c, m, ch in CASES]
)
def test_rule_raises_at_the_kernel_line(call, match, chip):
    def kernel():
        call()

    with pytest.raises(ConstraintError, match=match) as exc:
        run(kernel, chip=chip)
    assert exc.value.loc is not None
    assert exc.value.loc.lineno == call.__code__.co_firstlineno
    assert exc.value.loc.filename == __file__
    assert_no_internal_path(str(exc.value))


def test_removed_dynamic_copies_name_their_replacement():
    def kernel():
        nisa.tensor_copy_dynamic_src(dst=t(), src=t())

    with pytest.raises(ConstraintError, match=r"removed in NKI 0.4.0.*scalar_offset") as exc:
        run(kernel)
    assert exc.value.loc.lineno == kernel.__code__.co_firstlineno + 1
    assert_no_internal_path(str(exc.value))


def test_rules_still_checked_without_values():
    def kernel():
        nisa.tensor_tensor(dst=t(), data1=t(space="psum"), data2=t(space="psum"), op=nl.add)

    with pytest.raises(ConstraintError, match="in psum"):
        run(kernel, values=False)
