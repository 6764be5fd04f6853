"""ChipSpec and its parts: the frozen description of one chip. Knows nothing about YAML or time."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from trnsim.errors import SpecError, UnsupportedError

DTYPE_ALIASES = MappingProxyType(
    {
        "bfloat16": "bf16",
        "float16": "fp16",
        "float32": "fp32",
        "tfloat32": "tf32",
        "float8_e4m3": "fp8",
        "float8_e5m2": "fp8",
        "float8_e4m3fn": "fp8",
        "fp8_e4m3": "fp8",
        "fp8_e5m2": "fp8",
        "float8_e4m3fn_x4": "mxfp8",
        "float8_e5m2_x4": "mxfp8",
        "float4_e2m1fn_x4": "mxfp4",
        "mx": "mxfp8",
    }
)


# The timing model ticks at the least common multiple of the engine clocks (every engine's
# cycle a whole number of ticks); chip files whose clocks need a faster tick are refused.
MAX_TICK_MHZ = 10**9  # 1 PHz: integer ticks stay exact in floats (2**53) for 9 s of kernel time


def tick_clock_mhz(engines: Iterable[Any]) -> int:
    """The least common multiple of the engines' clocks (`clock_ghz`), in whole MHz."""
    base = 1
    for e in engines:
        base = math.lcm(base, max(1, round(e.clock_ghz * 1000)))
    return base

@dataclass(frozen=True)
class Provenance:
    """Where one chip number came from."""

    source: str
    kind: str
    unit: str = ""
    note: str = ""


@dataclass(frozen=True, eq=False)
class EngineSpec:
    """One instruction-issuing engine: its clock and completion latency (cycles past the II)."""

    name: str
    clock_ghz: float
    latency_cycles: int
    ls_latency_cycles: int = 0  # Tensor Engine only: LoadStationary latency


@dataclass(frozen=True, eq=False)
class TensorSpec:
    """Tensor Engine geometry and per-dtype rates (products per PE per cycle, BF16 = 1)."""

    pe_rows: int
    pe_cols: int
    rate: Mapping[str, float]
    perf_modes: tuple[str, ...]
    tile_sizes: tuple[int, ...]
    ls_speedup: float
    transpose_fp32_speedup: float
    moving_fmax: int  # nc_matmul's moving free size for an fp32 dst (TC3; NC-v4 spans banks)


@dataclass(frozen=True, eq=False)
class VectorSpec:
    lanes: int
    elems_per_cycle_16bit: int
    elems_per_cycle_other: int
    perf_modes: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class ScalarSpec:
    lanes: int
    perf_modes: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class GpSimdSpec:
    cores: int
    partitions_per_core: int
    dma_gbps: float


@dataclass(frozen=True, eq=False)
class SbufSpec:
    partitions: int
    bytes_per_partition: int
    usable_bytes_per_partition: int
    bandwidth_tbps: float


@dataclass(frozen=True, eq=False)
class PsumSpec:
    partitions: int
    bytes_per_partition: int
    banks: int
    bank_bytes: int


@dataclass(frozen=True, eq=False)
class HbmSpec:
    capacity_bytes: int
    stacks: int
    bandwidth_gbps: float  # GB/s == bytes per ns, shared by every core of the chip


@dataclass(frozen=True, eq=False)
class DmaSpec:
    engines_per_core: int
    queues_per_engine: int
    partitions_per_engine: int
    engine_bytes_per_ns: float
    engine_theoretical_gbps: float
    # The per-descriptor cost table (one per generation): rows `<class>.from_bytes`,
    # `<class>.overhead_ns`, `<class>.time_factor`; a descriptor (one partition's contiguous
    # run) of s bytes takes the row with the largest from_bytes <= s (see descriptor_cost).
    descriptor_cost: Mapping[str, float]
    trigger_latency_ns: float
    hwdge_blocks_per_core: int
    hwdge_issue_ns: float
    swdge_descriptor_cycles: float
    transpose_hbm_efficiency: float
    transpose_sbuf_efficiency: float
    qos_classes: int
    chip_bandwidth_gbps: float
    # Per transfer and DMA engine: the queue's descriptor fetch and the completion semaphore
    # write every engine makes (NKI-DMA-INTRO); optional, 0 when a chip file omits it.
    transfer_overhead_ns: float = 0.0
    # Per transfer, serial on its DMA queue (core, queue name) before its chunks start: the
    # queue's per-DMA processing; optional, 0 when a chip file omits it.
    queue_dma_overhead_ns: float = 0.0

    @functools.cached_property
    def descriptor_classes(self) -> tuple[tuple[int, float, float, str], ...]:
        """The descriptor cost table as (from_bytes, overhead_ns, time_factor, class), by size."""
        return descriptor_classes(self.descriptor_cost)

    def descriptor_cost_at(self, nbytes: int) -> tuple[float, float]:
        """(fixed ns, streaming time factor) of one descriptor of `nbytes` bytes: the row with
        the largest from_bytes <= nbytes. It then costs fixed + nbytes x factor / rate."""
        row = self.descriptor_classes[0]
        for r in self.descriptor_classes:
            if r[0] > nbytes:
                break
            row = r
        return row[1], row[2]


_DESCRIPTOR_FIELDS = ("from_bytes", "overhead_ns", "time_factor")


def descriptor_classes(table: Mapping[str, float]) -> tuple[tuple[int, float, float, str], ...]:
    """Rows of a dma.descriptor_cost table, sorted by from_bytes; ValueError names what is
    wrong (a class without its three numbers, no row from 0 B, a factor < 1, ...)."""
    names: dict[str, dict[str, float]] = {}
    for key, v in table.items():
        cls, _, field = key.rpartition(".")
        if not cls or field not in _DESCRIPTOR_FIELDS:
            raise ValueError(
                f"{key!r}: expected <class>.{{{', '.join(_DESCRIPTOR_FIELDS)}}}"
            )
        names.setdefault(cls, {})[field] = float(v)
    rows = []
    for cls, f in names.items():
        missing = [k for k in _DESCRIPTOR_FIELDS if k not in f]
        if missing:
            raise ValueError(f"{cls}: missing {', '.join(missing)}")
        if f["from_bytes"] < 0 or f["from_bytes"] != int(f["from_bytes"]):
            raise ValueError(f"{cls}.from_bytes: {f['from_bytes']} is not a byte count >= 0")
        if f["overhead_ns"] < 0:
            raise ValueError(f"{cls}.overhead_ns: {f['overhead_ns']} is negative")
        if f["time_factor"] < 1:
            raise ValueError(
                f"{cls}.time_factor: {f['time_factor']} < 1 (a descriptor cannot stream "
                "faster than the engine rate)"
            )
        rows.append((int(f["from_bytes"]), f["overhead_ns"], f["time_factor"], cls))
    rows.sort()
    if not rows or rows[0][0] != 0:
        raise ValueError("needs a class with from_bytes 0 (every size must have a cost)")
    if len({r[0] for r in rows}) != len(rows):
        raise ValueError("two classes have the same from_bytes")
    return tuple(rows)


@dataclass(frozen=True, eq=False)
class InterconnectSpec:
    name: str
    bandwidth_gbps: float
    collective_cores: int


@dataclass(frozen=True, eq=False)
class ThrottleSpec:
    """TensorE utilization cap: starts at initial_fraction, ramps to 1 over ramp_ns."""

    enabled: bool
    initial_fraction: float
    ramp_ns: float
    window_ns: float
    reengage_below: float


SECTIONS: dict[str, type] = {
    "tensor": TensorSpec,
    "vector": VectorSpec,
    "scalar": ScalarSpec,
    "gpsimd": GpSimdSpec,
    "sbuf": SbufSpec,
    "psum": PsumSpec,
    "hbm": HbmSpec,
    "dma": DmaSpec,
    "interconnect": InterconnectSpec,
    "throttle": ThrottleSpec,
}
ENGINE_NAMES = ("tensor", "vector", "scalar", "gpsimd", "sync")
TILE_SIZE_KEYS = (
    "pmax",
    "psum_fmax",
    "psum_bank_fmax",
    "psum_bank_fmax_bytes",
    "psum_num_banks",
    "gemm_stationary_fmax",
    "gemm_moving_fmax",
    "bn_stats_fmax",
    "sbuf_min_align",
    "psum_min_align",
    "total_available_sbuf_size",
    "sbuf_size_bytes",
    "sbuf_fmax",
    "sbuf_fmax_bytes",
)
TIMING_KEYS = (
    "min_ii_cycles",
    "min_ii_dynamic_cycles",
    "gpsimd_start_cycles",
    "access_overhead_cycles",
    "vector_static_overhead_cycles",
    "tiny_elems",
    "semaphore_latency_ns",
    "stride_threshold_bytes",
    "stride_penalty",
)


@dataclass(frozen=True, eq=False)
class ChipSpec:
    """An immutable, validated chip description (one isa/chips/<name>.yaml)."""

    name: str
    description: str
    nc_version: int
    cores_per_chip: int
    lnc_default: int
    lnc_allowed: tuple[int, ...]
    engines: Mapping[str, EngineSpec]
    tensor: TensorSpec
    vector: VectorSpec
    scalar: ScalarSpec
    gpsimd: GpSimdSpec
    sbuf: SbufSpec
    psum: PsumSpec
    hbm: HbmSpec
    dma: DmaSpec
    interconnect: InterconnectSpec
    timing: Mapping[str, float]
    throttle: ThrottleSpec
    tile_size: Mapping[str, int]
    documented_peak_tflops: Mapping[str, float]
    provenance: Mapping[str, Provenance]
    path: str = ""

    def source_of(self, key_path: str) -> tuple[str, str]:
        """(source ID, kind) of one number, e.g. source_of("hbm.bandwidth_gbps")."""
        try:
            p = self.provenance[key_path]
        except KeyError:
            raise SpecError(f"{self.name}: no chip value at '{key_path}'") from None
        return p.source, p.kind

    def peak_tflops(self, dtype_name: str, per: str = "core") -> float:
        """Dense TensorE peak from the clock, the 128x128 array and the dtype's rate."""
        key = DTYPE_ALIASES.get(str(dtype_name), str(dtype_name))
        if key not in self.tensor.rate:
            raise UnsupportedError(
                f"{self.name}: no TensorE rate for dtype {dtype_name!r} "
                f"(known: {', '.join(sorted(self.tensor.rate))})"
            )
        if per not in ("core", "chip"):
            raise ValueError(f"peak_tflops: per must be 'core' or 'chip', got {per!r}")
        t = self.tensor
        flops = self.engines["tensor"].clock_ghz * 1e9 * t.pe_rows * t.pe_cols * 2 * t.rate[key]
        return flops / 1e12 * (self.cores_per_chip if per == "chip" else 1)

    def __repr__(self) -> str:
        return f"ChipSpec({self.name!r}, NC-v{self.nc_version}, {self.cores_per_chip} cores)"
