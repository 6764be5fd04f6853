"""ChipSpec and its parts: the frozen description of one chip. Knows nothing about YAML or time."""

from __future__ import annotations

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
    descriptor_overhead_ns: float
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
    # Descriptors (one partition's contiguous run) shorter than efficient_descriptor_bytes
    # stream small_descriptor_time_factor times slower than the engine rate; optional, no
    # effect when a chip file omits them.
    efficient_descriptor_bytes: int = 0
    small_descriptor_time_factor: float = 1.0


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
