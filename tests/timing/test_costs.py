"""Cost models: the documented formulas, one case each, in engine cycles (isa/costs.yaml)."""

from __future__ import annotations

import pytest
import yaml

from trnsim.chip import load_chip, sources
from trnsim.program import Instruction
from trnsim.timing.costs import MODELS, _costs_path, cost_records, instruction_cost

from .builders import TINY, tile


def cost(opcode, engine, reads, writes, chip="tiny", **attrs):
    c = load_chip(TINY) if chip == "tiny" else load_chip(chip)
    return instruction_cost(
        Instruction(0, opcode, engine, 0, tuple(reads), tuple(writes), attrs), c
    )


def sb(shape, dtype="bfloat16", name="data", offset=0, stride=1, space="sbuf"):
    return tile(space, shape, dtype, offset, name=name, stride=stride)


def test_every_record_is_valid_and_every_instruction_has_one():
    recs = cost_records()
    known = sources()
    for op, rec in recs.items():
        assert rec.model in MODELS or rec.model == "dma", op
        assert rec.source in known, f"{op}: source {rec.source}"
    isa_dir = _costs_path().parent / "instructions"
    for f in sorted(isa_dir.glob("*.yaml")):
        for op in yaml.safe_load(f.read_text()) or {}:
            assert op in recs, f"{f.name}: {op} has no cost record in isa/costs.yaml"


@pytest.mark.parametrize(("n", "ii"), [(1, 64), (64, 64), (1000, 1000)])
def test_activation_min_ii(n, ii):
    c = cost("activation", "scalar", [sb((128, n))], [sb((128, n), name="dst")], op="exp")
    assert (c.ii, c.latency) == (ii, ii + 100)


def test_activation_reduce_adds_min_ii():
    c = cost(
        "activation",
        "scalar",
        [sb((128, 512))],
        [sb((128, 512), name="dst"), sb((128, 1), "float32", name="reduce_res")],
        op="exp",
    )
    assert c.ii == 512 + 64


def test_partition_count_does_not_change_cost():
    a = cost("activation", "scalar", [sb((128, 512))], [sb((128, 512), name="dst")])
    b = cost("activation", "scalar", [sb((64, 512))], [sb((64, 512), name="dst")])
    assert a == b


def test_stride_over_16_bytes_halves_the_rate():
    fast = cost(
        "activation",
        "scalar",
        [sb((128, 512), "float32", stride=4)],
        [sb((128, 512), "float32", name="dst")],
    )
    slow = cost(
        "activation",
        "scalar",
        [sb((128, 512), "float32", stride=8)],
        [sb((128, 512), "float32", name="dst")],
    )
    assert (fast.ii, slow.ii) == (512, 1024)


@pytest.mark.parametrize(
    ("dtype", "src_space", "stride", "ii", "mode"),
    [
        ("bfloat16", "sbuf", 1, 256, "4x"),  # 16-bit, SBUF, contiguous
        ("bfloat16", "sbuf", 2, 512, "2x"),  # 16-bit but strided
        ("bfloat16", "psum", 1, 512, "2x"),  # one side in PSUM
        ("float32", "sbuf", 1, 1024, ""),  # no uplift for fp32
    ],
)
def test_vector_perf_modes_nc_v3(dtype, src_space, stride, ii, mode):
    c = cost(
        "tensor_copy",
        "vector",
        [sb((128, 1024), dtype, "src", stride=stride, space=src_space)],
        [sb((128, 1024), dtype, "dst", 65536)],
        chip="trn2",
    )
    assert (c.ii, c.perf_mode) == (ii, mode)


def test_scalar_2x_on_trn3_only():
    args = ([sb((128, 1024), name="src")], [sb((128, 1024), name="dst", offset=4096)])
    assert cost("tensor_copy", "scalar", *args, chip="trn3").ii == 512
    assert cost("tensor_copy", "scalar", *args, chip="trn2").ii == 1024


@pytest.mark.parametrize(
    ("spaces", "dtype", "op", "ii"),
    [
        (("psum", "sbuf"), "float32", "maximum", 512),  # one PSUM, one SBUF: N
        (("sbuf", "sbuf"), "float32", "add", 1024),  # both SBUF, fp32: 2N
        (("sbuf", "sbuf"), "bfloat16", "add", 256),  # bf16 add in SBUF: N, NC-v3 2x
        (("sbuf", "sbuf"), "bfloat16", "divide", 512),  # other op: 2N, NC-v3 2x
    ],
)
def test_tensor_tensor(spaces, dtype, op, ii):
    reads = [
        sb((128, 512), dtype, "data1", space=spaces[0]),
        sb((128, 512), dtype, "data2", 8192, space=spaces[1]),
    ]
    c = cost("tensor_tensor", "vector", reads, [sb((128, 512), dtype, "dst", 16384)], op=op)
    assert c.ii == ii


def test_tensor_tensor_nc_v2_large_is_2n():
    reads = [sb((128, 8192), "float32", "data1"), sb((128, 8192), "float32", "data2", 32768)]
    c = cost(
        "tensor_tensor",
        "vector",
        reads,
        [sb((128, 8192), "float32", "dst", 65536)],
        chip="trn1",
        op="add",
    )
    assert c.ii == 2 * 8192


def test_fixed_start_costs():
    iota = cost("iota", "gpsimd", [], [sb((128, 512), "int32", "dst")])
    dyn = cost(
        "tensor_copy_dynamic_src",
        "vector",
        [sb((128, 100), name="src")],
        [sb((128, 100), name="dst", offset=4096)],
    )
    assert (iota.ii, dyn.ii) == (150 + 512, 600)


def test_memset_zero_bf16_is_half():
    zero = cost("memset", "vector", [], [sb((128, 1024), name="dst")], value=0.0)
    one = cost("memset", "vector", [], [sb((128, 1024), name="dst")], value=1.0)
    assert (zero.ii, one.ii) == (512, 1024)


def test_scalar_tensor_tensor_fast_path():
    reads = [sb((128, 512), name="data"), sb((128, 512), name="operand1", offset=4096)]
    dst = [sb((128, 512), name="dst", offset=8192)]
    fast = cost("scalar_tensor_tensor", "vector", reads, dst, op0="subtract", op1="multiply")
    slow = cost("scalar_tensor_tensor", "vector", reads, dst, op0="add", op1="multiply")
    assert (fast.ii, slow.ii) == (512, 1024)


def test_reciprocal_and_bn_aggr():
    r = cost("reciprocal", "vector", [sb((128, 64), "float32")], [sb((128, 64), "float32", "dst")])
    bn = cost("bn_aggr", "vector", [sb((128, 48), "float32")], [sb((128, 2), "float32", "dst")])
    assert (r.ii, bn.ii) == (512, 208)


def test_matmul_fp8_double_row_same_time_as_bf16():
    bf16 = cost(
        "nc_matmul",
        "tensor",
        [sb((128, 128), name="stationary"), sb((128, 512), name="moving", offset=4096)],
        [sb((128, 512), "float32", "dst", space="psum")],
    )
    fp8 = cost(
        "nc_matmul",
        "tensor",
        [
            sb((128, 2, 128), "float8_e4m3", "stationary"),
            sb((128, 2, 512), "float8_e4m3", "moving", 4096),
        ],
        [sb((128, 512), "float32", "dst", space="psum")],
        perf_mode="double_row",
    )
    assert (bf16.ii, bf16.ls_ii) == (fp8.ii, fp8.ls_ii) == (512, 32)


def test_fp32_matmul_transpose_mode_and_onezero():
    reads = [sb((128, 128), "float32", "stationary"), sb((128, 512), "float32", "moving", 4096)]
    dst = [sb((128, 512), "float32", "dst", space="psum")]
    assert cost("nc_matmul", "tensor", reads, dst).ii == 4 * 512
    assert cost("nc_matmul", "tensor", reads, dst, is_transpose=True).ii == 2 * 512
    assert cost("nc_matmul", "tensor", reads, dst, is_moving_onezero=True).ii == 2 * 512


def test_gpsimd_rsqrt_is_4x_scalar():
    args = ([sb((128, 512), "float32")], [sb((128, 512), "float32", "dst", 4096)])
    assert cost("tensor_scalar", "gpsimd", *args, op0="rsqrt").ii == 4 * 512


def test_enum_and_function_attributes_are_read_by_name():
    """Records may carry NKI enums (dge_mode.hwdge, matmul_perf_mode.double_row) and ALU
    functions; cost models read them by name."""
    import enum

    import numpy as np

    class PerfMode(enum.IntEnum):
        none = 0
        double_row = 1

    fp8 = cost(
        "nc_matmul",
        "tensor",
        [
            sb((128, 2, 128), "float8_e4m3", "stationary"),
            sb((128, 2, 512), "float8_e4m3", "moving", 4096),
        ],
        [sb((128, 512), "float32", "dst", space="psum")],
        perf_mode=PerfMode.double_row,
    )
    assert fp8.ii == 512
    reads = [sb((128, 512), name="data1"), sb((128, 512), name="data2", offset=4096)]
    c = cost("tensor_tensor", "vector", reads, [sb((128, 512), name="dst", offset=8192)], op=np.add)
    assert c.ii == 256  # bf16 add in SBUF: N, with the NC-v3 2x mode



def _tt_fp32_cost(n, chip):
    reads = (sb((128, n), "float32", "data1"), sb((128, n), "float32", "data2", 4 * n))
    writes = (sb((128, n), "float32", "dst", 8 * n),)
    return instruction_cost(Instruction(0, "tensor_tensor", "vector", 0, reads, writes,
                                        {"op": "add"}), chip)


@pytest.mark.parametrize(("fixed", "n", "pipe"), [
    (100, 512, 100),  # all of it fixed (the tiny chip's own value): 100 past the II
    (20, 512, 20 + 82),  # II 2N = 1024: 20 + 80 * 1024 / 1000, rounded
    (20, 1, 20 + 5),  # II MIN_II = 64: 20 + 80 * 64 / 1000, rounded
    (0, 500, 100),  # at the reference II (2N = 1000) the whole latency, whatever the split
    (0, 2000, 400),  # past it, the proportional part keeps growing: 100 * 4000 / 1000
])
def test_vector_latency_splits_into_fixed_and_proportional(fixed, n, pipe):
    """timing.vector_fixed_latency_cycles of engines.vector.latency_cycles is fixed, the rest
    grows with the II in proportion to timing.vector_latency_reference_ii_cycles."""
    chip = load_chip(TINY, **{"timing.vector_fixed_latency_cycles": fixed})
    c = _tt_fp32_cost(n, chip)
    assert c.latency - c.ii == pipe  # (the tiny chip has no access overhead)


def test_vector_latency_split_leaves_other_engines_alone():
    ins = Instruction(0, "activation", "scalar", 0, (sb((128, 512)),),
                      (sb((128, 512), name="dst"),), {"op": "exp"})
    for fixed in (0, 100):
        c = instruction_cost(ins, load_chip(TINY, **{"timing.vector_fixed_latency_cycles": fixed}))
        assert (c.ii, c.latency) == (512, 612)


@pytest.mark.parametrize("chip_name", ["trn1", "trn2", "trn3"])
def test_measured_large_tensor_tensor_keeps_its_duration_whatever_the_split(chip_name):
    """The split moves latency between small and large VectorE instructions but never off the
    one measured (NC-v2 TENSOR_TENSOR fp32, N = 8192, 2N + latency + access overhead)."""
    base = load_chip(chip_name)
    lat = base.engines["vector"].latency_cycles
    access = int(base.timing["access_overhead_cycles"])
    for fixed in (0, lat // 2, lat):
        chip = (load_chip(chip_name, **{"timing.vector_fixed_latency_cycles": fixed})
                if "vector_fixed_latency_cycles" in base.timing else base)
        c = _tt_fp32_cost(8192, chip)
        assert (c.ii, c.latency) == (16384, 16384 + lat + access)
