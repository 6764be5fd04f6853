"""Cost models: an instruction's initiation interval and latency in engine cycles.

The numbers live in isa/costs.yaml (one record per opcode: model name, per-generation params,
source); the models here are the documented formulas, registered by name. A cost depends only on
the instruction record and the chip, never on time or values.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from trnsim.chipspec import ChipSpec
from trnsim.errors import SpecError
from trnsim.program import Instruction, Operand

SIXTEEN_BIT = frozenset({"bfloat16", "float16"})
FP8 = frozenset({"float8_e4m3", "float8_e5m2", "float8_e4m3fn"})
GENERATIONS = ("v2", "v3", "v4")


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


@dataclass(frozen=True)
class CostRecord:
    """One isa/costs.yaml record."""

    opcode: str
    model: str
    params: Mapping[str, Mapping[str, Any]]  # generation ("all", "v2", ...) -> params
    source: str
    kind: str
    formula: str

    def params_for(self, chip: ChipSpec) -> dict[str, Any]:
        """Params of this chip's generation, chip-constant names resolved to numbers."""
        merged = dict(self.params.get("all", {}))
        merged.update(self.params.get(f"v{chip.nc_version}", {}))
        out: dict[str, Any] = {}
        for k, v in merged.items():
            if isinstance(v, str) and k != "op":
                if v not in chip.timing:
                    raise SpecError(f"costs.yaml: {self.opcode}.params.{k}: '{v}' is not a chip "
                                    f"timing constant (known: {', '.join(sorted(chip.timing))})")
                v = chip.timing[v]
            out[k] = v
        return out


Model = Callable[[Instruction, dict[str, Any], ChipSpec], Cost]
MODELS: dict[str, Model] = {}


def cost_model(name: str) -> Callable[[Model], Model]:
    def register(fn: Model) -> Model:
        MODELS[name] = fn
        return fn

    return register


def _costs_path() -> Path:
    try:
        p = resources.files("trnsim._isa") / "costs.yaml"
        if p.is_file():
            return Path(str(p))
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "isa" / "costs.yaml"


@functools.cache
def cost_records() -> Mapping[str, CostRecord]:
    """Every record of isa/costs.yaml, validated (model known, source present)."""
    raw = yaml.safe_load(_costs_path().read_text())
    out: dict[str, CostRecord] = {}
    for op, rec in raw.items():
        where = f"costs.yaml: {op}"
        if not isinstance(rec, dict):
            raise SpecError(f"{where}: expected a mapping")
        model = rec.get("model")
        if model not in MODELS and model != "dma":
            raise SpecError(f"{where}.model: {model!r} is not a cost model "
                            f"(known: {', '.join(sorted([*MODELS, 'dma']))})")
        if not rec.get("source"):
            raise SpecError(f"{where}.source: every cost needs a source")
        params = rec.get("params") or {}
        bad = set(params) - {"all", *GENERATIONS}
        if bad:
            raise SpecError(f"{where}.params: unknown generation keys {sorted(bad)}")
        out[op] = CostRecord(op, model, MappingProxyType(params), rec["source"],
                             rec.get("kind", "documented"), str(rec.get("formula", "")))
    if "default" not in out:
        raise SpecError("costs.yaml: default: the fallback record is missing")
    return MappingProxyType(out)


def record_for(opcode: str) -> CostRecord:
    recs = cost_records()
    return recs.get(opcode) or recs["default"]


def instruction_cost(instr: Instruction, chip: ChipSpec) -> Cost:
    """The cost of one (non-DMA) instruction on its engine."""
    rec = record_for(instr.opcode)
    return MODELS[rec.model](instr, rec.params_for(chip), chip)


class CostTable:
    """Costs on one chip, with resolved params per opcode and a cache keyed by what a cost
    model reads (opcode, engine, operand placement/shape/dtype, scalar attrs)."""

    def __init__(self, chip: ChipSpec):
        self.chip = chip
        self._ops: dict[str, tuple[CostRecord, dict[str, Any]]] = {}
        self._cache: dict[tuple, Cost] = {}

    def record(self, opcode: str) -> tuple[CostRecord, dict[str, Any]]:
        got = self._ops.get(opcode)
        if got is None:
            rec = record_for(opcode)
            got = self._ops[opcode] = (rec, rec.params_for(self.chip))
        return got

    def cost(self, instr: Instruction) -> Cost:
        key = _signature(instr)
        got = self._cache.get(key) if key is not None else None
        if got is None:
            rec, params = self.record(instr.opcode)
            got = MODELS[rec.model](instr, params, self.chip)
            if key is not None:
                self._cache[key] = got
        return got


def _signature(ins: Instruction) -> tuple | None:
    """What cost models read, as a hashable key (None: do not cache)."""
    ops = tuple([(o.name, o.region.space, o.dtype, o.elems_per_partition, o.inner_stride_bytes,
                  o.nbytes, o.partitions, o.region.byte_start) for o in ins.reads])
    wops = tuple([(o.name, o.region.space, o.dtype, o.elems_per_partition, o.inner_stride_bytes,
                   o.nbytes, o.partitions, o.region.byte_start) for o in ins.writes])
    try:
        attrs = tuple(sorted(ins.attrs.items())) if ins.attrs else ()
        return hash((ins.opcode, ins.engine, ops, wops, attrs)), ins.opcode
    except TypeError:
        return None


# ---------------------------------------------------------------- helpers


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


def _stream(instr: Instruction, chip: ChipSpec, work: float, min_ii: float,
            extra: float = 0, factor: int = 1) -> Cost:
    """II = max(min_ii, work / perf factor), doubled for >16 B strides; latency adds the pipe."""
    if strided(instr, chip):
        work *= chip.timing["stride_penalty"]
    ii = int(max(min_ii, math.ceil(work / factor)) + extra)
    eng = chip.engines[instr.engine if instr.engine in chip.engines else "vector"]
    tiny = instr.engine == "vector" and _n(instr) < chip.timing["tiny_elems"]
    return Cost(ii, ii + eng.latency_cycles, perf_mode=f"{factor}x" if factor > 1 else "",
                tiny=tiny)


# ---------------------------------------------------------------- models


@cost_model("streaming")
def streaming(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    """max(MIN_II, n_factor * N) + extra_cycles; optional perf mode and GpSimd rsqrt factor."""
    work = p.get("n_factor", 1) * _n(instr)
    factor = perf_factor(instr, chip) if p.get("perf_mode") else 1
    if instr.engine == "gpsimd" and "rsqrt" in (instr.attrs.get("op0"), instr.attrs.get("op1")):
        work *= p.get("gpsimd_rsqrt_factor", 1)
    return _stream(instr, chip, work, p.get("min_ii", chip.timing["min_ii_cycles"]),
                   p.get("extra_cycles", 0), factor)


@cost_model("fixed")
def fixed(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    ii = int(p["cycles"])
    eng = chip.engines.get(instr.engine)
    return Cost(ii, ii + (eng.latency_cycles if eng else 0))


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
        spaces == {"sbuf"} and all(o.dtype == "bfloat16" for o in all_ops)
        and instr.attrs.get("op") in p.get("fast_ops", ()) and all(map(_contiguous, all_ops)))
    work = n if fast else 2 * n
    factor = 1
    if instr.engine == "vector" and 2 in chip.vector.perf_modes and chip.nc_version >= 3 \
            and spaces == {"sbuf"} and all(_narrow(o.dtype, chip) for o in all_ops):
        factor = 2
    return _stream(instr, chip, work, chip.timing["min_ii_cycles"], factor=factor)


@cost_model("scalar_tensor_tensor")
def scalar_tensor_tensor(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    n = _n(instr)
    named = {o.name: o for o in instr.reads}
    fast = (all(named[k].dtype == "bfloat16" for k in ("data", "operand1") if k in named)
            and instr.attrs.get("op0") == "subtract" and instr.attrs.get("op1") == "multiply"
            and n % 2 == 0)
    return _stream(instr, chip, n if fast else 2 * n, 0)


@cost_model("reduce")
def reduce(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    n = _n(instr)
    bf16 = all(o.dtype == "bfloat16" for o in instr.operands)
    fast = bf16 and instr.attrs.get("op") in p.get("fast_ops", ())
    return _stream(instr, chip, n / 2 if fast else n, 0)


@cost_model("predicated")
def predicated(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    spaces = {o.region.space for o in instr.reads if o.name in ("src", "predicate")}
    n = _n(instr)
    return _stream(instr, chip, n if spaces == {"sbuf", "psum"} else 2 * n,
                   chip.timing["min_ii_cycles"])


@cost_model("memset")
def memset(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    dst = instr.writes[0] if instr.writes else None
    n = dst.elems_per_partition if dst is not None else 1
    half = instr.attrs.get("value") in (0, 0.0) and dst is not None and dst.dtype in SIXTEEN_BIT
    return _stream(instr, chip, n / 2 if half else n, chip.timing["min_ii_cycles"])


@cost_model("gpsimd")
def gpsimd(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    """GPSIMD_START + N (iota, affine_select)."""
    n = max((o.elems_per_partition for o in instr.operands), default=1)
    return _stream(instr, chip, p.get("n_factor", 1) * n, 0, chip.timing["gpsimd_start_cycles"])


@cost_model("local_gather")
def local_gather(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    k = int(instr.attrs.get("num_elem_per_idx") or 1)
    idx = next((o for o in instr.reads if o.name == "index"), None)
    n_idx = instr.attrs.get("num_valid_indices") or (idx.elems_per_partition * 16 if idx else 1)
    src = next((o for o in instr.reads if o.name == "src_buffer"), main_input(instr))
    dbytes = max(1, src.nbytes // max(1, src.partitions * src.elems_per_partition)) if src else 4
    c = ((28 + 4 * k) / (4 * k)) / min(4 / dbytes, k)
    return _stream(instr, chip, n_idx * k / c, 0, chip.timing["gpsimd_start_cycles"])


@cost_model("topk")
def topk(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> Cost:
    n = int(instr.attrs.get("n") or _n(instr))
    k = max((o.elems_per_partition for o in instr.writes), default=1)
    return _stream(instr, chip, 4 * n + k, 0)


def _matmul_dims(instr: Instruction) -> tuple[int, int]:
    named = {o.name: o for o in instr.reads}
    stat, mov = named.get("stationary"), named.get("moving")
    m = stat.elems_per_partition if stat else 128
    n = mov.elems_per_partition if mov else 1
    if instr.attrs.get("perf_mode") == "double_row":
        m, n = max(1, m // 2), max(1, n // 2)  # inputs shaped [K/2, 2, M]: two K rows per PE
    return m, n


def _fp32_factor(instr: Instruction, p: dict[str, Any], chip: ChipSpec) -> float:
    dtypes = {o.dtype for o in instr.reads if o.name in ("stationary", "moving", "data")}
    if "float32" not in dtypes:
        return 1
    factor = p.get("fp32_factor", 4)
    if instr.attrs.get("is_transpose") and chip.nc_version >= 3:
        factor /= chip.tensor.transpose_fp32_speedup
    elif instr.attrs.get("is_stationary_onezero") or instr.attrs.get("is_moving_onezero"):
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
