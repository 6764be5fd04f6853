"""Cost models: the documented formulas, registered by name. Knows nothing about time or values.

A model maps one instruction record, its params (from isa/costs.yaml, already resolved for the
chip's generation) and the chip to a Cost: the initiation interval and the latency in cycles of
the instruction's engine.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trnsim.chipspec import ChipSpec
from trnsim.program import Instruction, Operand

SIXTEEN_BIT = frozenset({"bfloat16", "float16"})
FP8 = frozenset({"float8_e4m3", "float8_e5m2", "float8_e4m3fn"})


@dataclass(frozen=True)
class Cost:
    """Engine cycles: ii = issue-to-issue interval, latency = issue to completion (>= ii).

    For the Tensor Engine, ii/latency describe MultiplyMoving and ls_ii/ls_latency the
    LoadStationary that precedes it. `tiny` marks VectorE instructions that pay the static
    overhead; `perf_mode` is the profiler's performance_mode tag ("", "2x", "4x").
    """

    ii: int
    latency: int
    ls_ii: int = 0
    ls_latency: int = 0
    perf_mode: str = ""
    tiny: bool = False


Model = Callable[[Instruction, dict[str, Any], ChipSpec], Cost]
MODELS: dict[str, Model] = {}


def cost_model(name: str) -> Callable[[Model], Model]:
    def register(fn: Model) -> Model:
        MODELS[name] = fn
        return fn

    return register


# ---------------------------------------------------------------- helpers


def attr(instr: Instruction, key: str, default: Any = None) -> Any:
    """An attribute as plain data: enums and functions (nl.add, np.exp) by name."""
    v = instr.attrs.get(key, default)
    if isinstance(v, enum.Enum):
        return v.name
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    name = getattr(v, "name", None) or getattr(v, "__name__", None)
    return name if isinstance(name, str) else v


def main_input(instr: Instruction) -> Operand | None:
    """The operand whose elements per partition are the formulas' N."""
    best = None
    for op in instr.reads or instr.writes:
        if best is None or op.elems_per_partition > best.elems_per_partition:
            best = op
    return best


def _n(instr: Instruction) -> int:
    op = main_input(instr)
    return op.elems_per_partition if op is not None else 1


def _onchip(instr: Instruction) -> list[Operand]:
    return [o for o in instr.operands if o.region.space != "hbm"]


def strided(instr: Instruction, chip: ChipSpec) -> bool:
    """Minor free-dimension stride above 16 bytes halves the SBUF/PSUM rate (NKI-ARCH-V2)."""
    limit = chip.timing["stride_threshold_bytes"]
    return any(o.inner_stride_bytes > limit and o.elems_per_partition > 1 for o in _onchip(instr))


def _contiguous(o: Operand) -> bool:
    itemsize = max(1, o.nbytes // max(1, o.partitions * o.elems_per_partition))
    return o.inner_stride_bytes <= itemsize


def _narrow(dtype: str, chip: ChipSpec) -> bool:
    return dtype in SIXTEEN_BIT or (chip.nc_version >= 4 and dtype in FP8)


def perf_factor(instr: Instruction, chip: ChipSpec) -> int:
    """Automatic performance mode: NC-v3 VectorE 4x/2x, NC-v4 ScalarE 2x (NKI-ARCH-V3/V4)."""
    ops = [o for o in instr.operands if o.elems_per_partition > 1]
    if not ops or not all(_narrow(o.dtype, chip) for o in ops):
        return 1
    if instr.engine == "vector" and 4 in chip.vector.perf_modes:
        in_sbuf = all(o.region.space == "sbuf" for o in ops)
        return 4 if in_sbuf and all(_contiguous(o) for o in ops) else 2
    if instr.engine == "scalar" and 2 in chip.scalar.perf_modes:
        return 2
    return 1


def pipe_latency(eng, ii: int, chip: ChipSpec) -> int:
    """Cycles from an instruction's last issue cycle to its completion on `eng`.

    VectorE's latency is measured once, on a large instruction (NC-v2 TENSOR_TENSOR fp32,
    N = 8192: II 2N = 16,384 cycles, 2N + ~380 end to end): `latency_cycles` at that II
    (`timing.vector_latency_reference_ii_cycles`). How it splits into a fixed pipeline latency and a
    part that grows with the instruction's streaming is not published: the fixed part is
    `timing.vector_fixed_latency_cycles` (fitted on trn1; absent, all of it is fixed) and the
    rest grows in proportion to the II, so the measured instruction keeps its duration."""
    lat = eng.latency_cycles
    if eng.name != "vector":
        return lat
    fixed = chip.timing.get("vector_fixed_latency_cycles", lat)
    ref = chip.timing.get("vector_latency_reference_ii_cycles", 0)
    if ref <= 0 or fixed >= lat:
        return lat
    return int(fixed + round((lat - fixed) * ii / ref))


def _stream(
    instr: Instruction,
    chip: ChipSpec,
    work: float,
    min_ii: float,
    extra: float = 0,
    factor: int = 1,
) -> Cost:
    """II = max(min_ii, work / perf factor), doubled for >16 B strides; latency adds the pipe."""
    if strided(instr, chip):
        work *= chip.timing["stride_penalty"]
    ii = int(max(min_ii, math.ceil(work / factor)) + extra)
    eng = chip.engines[instr.engine if instr.engine in chip.engines else "vector"]
    tiny = instr.engine == "vector" and _n(instr) < chip.timing["tiny_elems"]
    return Cost(
        ii,
        ii + pipe_latency(eng, ii, chip) + int(chip.timing["access_overhead_cycles"]),
        perf_mode=f"{factor}x" if factor > 1 else "",
        tiny=tiny,
    )


# ---------------------------------------------------------------- models


@cost_model("streaming")
def streaming(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    """max(MIN_II, n_factor * N) + extra_cycles; optional perf mode and GpSimd rsqrt factor."""
    work = p.get("n_factor", 1) * _n(instr)
    factor = perf_factor(instr, chip) if p.get("perf_mode") else 1
    if instr.engine == "gpsimd" and "rsqrt" in (attr(instr, "op0"), attr(instr, "op1")):
        work *= p.get("gpsimd_rsqrt_factor", 1)
    return _stream(
        instr,
        chip,
        work,
        p.get("min_ii", chip.timing["min_ii_cycles"]),
        p.get("extra_cycles", 0),
        factor,
    )


@cost_model("fixed")
def fixed(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    ii = int(p["cycles"])
    eng = chip.engines.get(instr.engine)
    return Cost(ii, ii + (pipe_latency(eng, ii, chip) if eng else 0))


@cost_model("activation")
def activation(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    """max(MIN_II, N); reading the accumulator out into reduce_res costs another MIN_II."""
    min_ii = chip.timing["min_ii_cycles"]
    reduce = p.get("always_reduce") or any(o.name == "reduce_res" for o in instr.writes)
    data = next((o for o in instr.reads if o.name == "data"), main_input(instr))
    n = data.elems_per_partition if data is not None else 1
    return _stream(instr, chip, p.get("n_factor", 1) * n, min_ii, min_ii if reduce else 0)


@cost_model("two_input")
def two_input(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    """tensor_tensor: N or 2N by input placement, dtype and op; NC-v3 2x for 16-bit SBUF."""
    n = _n(instr)
    ins = [o for o in instr.reads if o.elems_per_partition > 1] or list(instr.reads)
    spaces = {o.region.space for o in ins}
    all_ops = list(instr.operands)
    fast = spaces == {"sbuf", "psum"} or (
        spaces == {"sbuf"}
        and all(o.dtype == "bfloat16" for o in all_ops)
        and attr(instr, "op") in p.get("fast_ops", ())
        and all(map(_contiguous, all_ops))
    )
    work = n if fast else 2 * n
    factor = 1
    if (
        instr.engine == "vector"
        and 2 in chip.vector.perf_modes
        and chip.nc_version >= 3
        and spaces == {"sbuf"}
        and all(_narrow(o.dtype, chip) for o in all_ops)
    ):
        factor = 2
    return _stream(instr, chip, work, chip.timing["min_ii_cycles"], factor=factor)


@cost_model("scalar_tensor_tensor")
def scalar_tensor_tensor(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    n = _n(instr)
    named = {o.name: o for o in instr.reads}
    fast = (
        all(named[k].dtype == "bfloat16" for k in ("data", "operand1") if k in named)
        and attr(instr, "op0") == "subtract"
        and attr(instr, "op1") == "multiply"
        and n % 2 == 0
    )
    return _stream(instr, chip, n if fast else 2 * n, 0)


@cost_model("reduce")
def reduce(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    n = _n(instr)
    bf16 = all(o.dtype == "bfloat16" for o in instr.operands)
    fast = bf16 and attr(instr, "op") in p.get("fast_ops", ())
    return _stream(instr, chip, n / 2 if fast else n, 0)


@cost_model("predicated")
def predicated(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    spaces = {o.region.space for o in instr.reads if o.name in ("src", "predicate")}
    n = _n(instr)
    return _stream(
        instr, chip, n if spaces == {"sbuf", "psum"} else 2 * n, chip.timing["min_ii_cycles"]
    )


@cost_model("memset")
def memset(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    dst = instr.writes[0] if instr.writes else None
    n = dst.elems_per_partition if dst is not None else 1
    half = attr(instr, "value") in (0, 0.0) and dst is not None and dst.dtype in SIXTEEN_BIT
    return _stream(instr, chip, n / 2 if half else n, chip.timing["min_ii_cycles"])


@cost_model("gpsimd")
def gpsimd(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    """GPSIMD_START + N (iota, affine_select)."""
    n = max((o.elems_per_partition for o in instr.operands), default=1)
    return _stream(instr, chip, p.get("n_factor", 1) * n, 0, chip.timing["gpsimd_start_cycles"])


@cost_model("local_gather")
def local_gather(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    k = int(attr(instr, "num_elem_per_idx") or 1)
    idx = next((o for o in instr.reads if o.name == "index"), None)
    n_idx = attr(instr, "num_valid_indices") or (idx.elems_per_partition * 16 if idx else 1)
    src = next((o for o in instr.reads if o.name == "src_buffer"), main_input(instr))
    dbytes = max(1, src.nbytes // max(1, src.partitions * src.elems_per_partition)) if src else 4
    c = ((28 + 4 * k) / (4 * k)) / min(4 / dbytes, k)
    return _stream(instr, chip, n_idx * k / c, 0, chip.timing["gpsimd_start_cycles"])


@cost_model("topk")
def topk(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    n = int(attr(instr, "n") or _n(instr))
    k = max((o.elems_per_partition for o in instr.writes), default=1)
    return _stream(instr, chip, 4 * n + k, 0)


def _matmul_dims(instr: Instruction) -> tuple[int, int]:
    named = {o.name: o for o in instr.reads}
    stat, mov = named.get("stationary"), named.get("moving")
    m = stat.elems_per_partition if stat else 128
    n = mov.elems_per_partition if mov else 1
    if attr(instr, "perf_mode") == "double_row":
        m, n = max(1, m // 2), max(1, n // 2)  # inputs shaped [K/2, 2, M]: two K rows per PE
    return m, n


def _fp32_factor(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> float:
    dtypes = {o.dtype for o in instr.reads if o.name in ("stationary", "moving", "data")}
    if "float32" not in dtypes:
        return 1
    factor = p.get("fp32_factor", 4)
    if attr(instr, "is_transpose") and chip.nc_version >= 3:
        factor /= chip.tensor.transpose_fp32_speedup
    elif attr(instr, "is_stationary_onezero") or attr(instr, "is_moving_onezero"):
        factor /= p.get("onezero_factor", 1)
    return factor


def _tensor_cost(m: int, n: int, factor: float, chip: ChipSpec) -> Cost:
    """MM II max(min(MIN_II, M), N), latency N + fill; fast LoadStationary ceil(M / 4)."""
    eng = chip.engines["tensor"]
    mm_ii = math.ceil(max(min(chip.timing["min_ii_cycles"], m), n) * factor)
    ls_ii = max(1, math.ceil(m * factor / chip.tensor.ls_speedup))
    mm_lat = max(mm_ii, math.ceil(n * factor) + eng.latency_cycles)
    return Cost(mm_ii, mm_lat, ls_ii, ls_ii + eng.ls_latency_cycles)


@cost_model("matmul")
def matmul(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    m, n = _matmul_dims(instr)
    return _tensor_cost(m, n, _fp32_factor(instr, p, chip), chip)


@cost_model("transpose")
def transpose(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    """TensorE: max(P, min(MIN_II, F)) (identity matmul); VectorE: max(MIN_II, N)."""
    if instr.engine != "tensor":
        return streaming(instr, p, chip)
    data = main_input(instr)
    parts = data.partitions if data else 128
    f = data.elems_per_partition if data else 1
    return _tensor_cost(f, parts, _fp32_factor(instr, p, chip), chip)
