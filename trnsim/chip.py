"""Chip descriptions: load and validate isa/chips/<name>.yaml into a frozen ChipSpec.

Every number in a chip file is a leaf ``{value, unit?, source, kind, note?}``; the loader converts
units, checks types and cross-field rules, and keeps each value's provenance so
``chip.source_of("sbuf.bytes_per_partition")`` answers where it came from. Knows nothing about
instructions, values or time.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

import yaml

from trnsim.errors import SpecError, UnsupportedError

# Source IDs of trainium-hw.md's Sources table (plus KLR, a third-party NKI front end).
SOURCES: Mapping[str, str] = MappingProxyType({
    "ARCH-TRN1": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/trainium.html",
    "ARCH-TRN2": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/trainium2.html",
    "ARCH-TRN3": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/trainium3.html",
    "ARCH-INF2": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/inferentia2.html",
    "NC-V2": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/neuron-core-v2.html",
    "NC-V3": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/neuron-core-v3.html",
    "NC-V4": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/neuron-core-v4.html",
    "INST-TRN1": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/trn1-arch.html",
    "INST-TRN2": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/trn2-arch.html",
    "INST-TRN3": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/trn3-arch.html",
    "LNC": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-features/logical-neuroncore-config.html",
    "NKI-ARCH-V2": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/architecture/trainium_inferentia2_arch.html",
    "NKI-ARCH-V3": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/architecture/trainium2_arch.html",
    "NKI-ARCH-V4": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/architecture/trainium3_arch.html",
    "NKI-PERF": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki_perf_guide.html",
    "NKI-DMA-BW": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-dma-bandwidth-guide.html",
    "NKI-DMA-INTRO": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/get-started/about/nki-dma-overview.html",
    "NKI-DGE": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-dge.html",
    "NKI-MEM": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/get-started/about/memory-hierarchy-overview.html",
    "NKI-ISA-226": "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.26.1/nki/api/generated/nki.isa.nc_matmul.html",
    "NKI-ISA-LATEST": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.nc_matmul.html",
    "NKI-SHARED": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.api.shared.html",
    "NKI-TILE": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.language.tile_size.html",
    "NKI-SIM": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/nki_simulator.html",
    "TUT-MM": "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.20.0/general/nki/tutorials/matrix_multiplication.html",
    "TUT-KOPT": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/tutorials/kernel-optimization.html",
    "NX-DEVICE": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-explorer/overview-device-profiles.html",
    "NX-SUMMARY": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-explorer/overview-summary-page.html",
    "NX-SCHEMA": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-explorer/profile-schema-reference.html",
    "NX-GLOSS": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-explorer/glossary.html",
    "NP-UG": "https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae261e12925e53437a0f690478e6366155/archive/profiler/neuron-profile-user-guide.rst",
    "TOMS": "https://www.tomshardware.com/tech-industry/artificial-intelligence/amazon-launches-trainium3-ai-accelerator-competing-directly-against-blackwell-ultra-in-fp8-performance-new-trn3-gen2-ultraserver-takes-vertical-scaling-notes-from-nvidias-playbook",
    "KLR": "https://github.com/leanprover/KLR (KLR/Trace: tile_size constants per arch)",
})
KINDS = ("documented", "inferred", "third-party", "estimate", "what-if")
BUILTIN_CHIPS = ("trn1", "trn2", "trn3")
ALIASES = MappingProxyType({"inf2": "trn1", "gen2": "trn1", "gen3": "trn2", "gen4": "trn3"})

# Unit conversion: the key's suffix fixes its canonical unit; the leaf's `unit` must convert to it.
_UNITS: dict[str, dict[str, float]] = {
    "bytes": {"B": 1, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30},
    "gbps": {"GB/s": 1, "B/ns": 1, "TB/s": 1000},
    "tbps": {"TB/s": 1, "GB/s": 0.001},
    "ghz": {"GHz": 1, "MHz": 0.001},
    "ns": {"ns": 1, "us": 1000},
    "cycles": {"cycles": 1},
}
_SUFFIX_DIM = (("_bytes_per_ns", "gbps"), ("bytes_per_partition", "bytes"), ("_bytes", "bytes"),
               ("_gbps", "gbps"), ("_tbps", "tbps"), ("_ghz", "ghz"), ("_ns", "ns"),
               ("_cycles", "cycles"), ("bytes", "bytes"))
_LEAF_KEYS = {"value", "unit", "source", "kind", "note"}

DTYPE_ALIASES = MappingProxyType({
    "bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "tfloat32": "tf32",
    "float8_e4m3": "fp8", "float8_e5m2": "fp8", "float8_e4m3fn": "fp8", "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8", "float8_e4m3fn_x4": "mxfp8", "float8_e5m2_x4": "mxfp8",
    "float4_e2m1fn_x4": "mxfp4", "mx": "mxfp8",
})


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


_SECTIONS: dict[str, type] = {
    "tensor": TensorSpec, "vector": VectorSpec, "scalar": ScalarSpec, "gpsimd": GpSimdSpec,
    "sbuf": SbufSpec, "psum": PsumSpec, "hbm": HbmSpec, "dma": DmaSpec,
    "interconnect": InterconnectSpec, "throttle": ThrottleSpec,
}
ENGINE_NAMES = ("tensor", "vector", "scalar", "gpsimd", "sync")
TILE_SIZE_KEYS = ("pmax", "psum_fmax", "psum_bank_fmax", "psum_bank_fmax_bytes", "psum_num_banks",
                  "gemm_stationary_fmax", "gemm_moving_fmax", "bn_stats_fmax", "sbuf_min_align",
                  "psum_min_align", "total_available_sbuf_size", "sbuf_size_bytes", "sbuf_fmax",
                  "sbuf_fmax_bytes")
TIMING_KEYS = ("min_ii_cycles", "min_ii_dynamic_cycles", "gpsimd_start_cycles",
               "access_overhead_cycles", "vector_static_overhead_cycles", "tiny_elems",
               "semaphore_latency_ns", "stride_threshold_bytes", "stride_penalty")


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
            raise UnsupportedError(f"{self.name}: no TensorE rate for dtype {dtype_name!r} "
                                   f"(known: {', '.join(sorted(self.tensor.rate))})")
        if per not in ("core", "chip"):
            raise ValueError(f"peak_tflops: per must be 'core' or 'chip', got {per!r}")
        t = self.tensor
        flops = self.engines["tensor"].clock_ghz * 1e9 * t.pe_rows * t.pe_cols * 2 * t.rate[key]
        return flops / 1e12 * (self.cores_per_chip if per == "chip" else 1)

    def __repr__(self) -> str:
        return f"ChipSpec({self.name!r}, NC-v{self.nc_version}, {self.cores_per_chip} cores)"


# ---------------------------------------------------------------- loading


def chips() -> list[str]:
    """Names of the built-in chips."""
    return list(BUILTIN_CHIPS)


def _chip_dir() -> Path:
    try:
        d = resources.files("trnsim._isa") / "chips"
        if d.is_dir():
            return Path(str(d))
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parent.parent / "isa" / "chips"


def builtin_path(name: str) -> Path:
    return _chip_dir() / f"{name}.yaml"


def load_chip(name_or_path: Any = "trn2", **overrides: Any) -> ChipSpec:
    """A frozen ChipSpec from a built-in name, a YAML path or a ChipSpec, with overrides.

    Overrides name a key path with dots or double underscores:
    ``load_chip("trn2", hbm__bandwidth_gbps=4000)`` or ``**{"dma.engines_per_core": 8}``;
    a plain value is in the key's canonical unit and is recorded as kind "what-if".
    A user YAML may start with ``base: trn2`` and give only the keys it changes.
    """
    if isinstance(name_or_path, ChipSpec):
        if not overrides:
            return name_or_path
        name_or_path = name_or_path.path or name_or_path.name
    key = str(name_or_path)
    key = ALIASES.get(key.lower(), key)
    if key.lower() in BUILTIN_CHIPS and not overrides:
        return _load_builtin(key.lower())
    path = builtin_path(key.lower()) if key.lower() in BUILTIN_CHIPS else Path(key)
    if not path.is_file():
        raise SpecError(f"load_chip: {name_or_path!r} is neither a built-in chip "
                        f"(known: {', '.join(BUILTIN_CHIPS)}) nor a YAML file")
    return _load_file(path, overrides)


@functools.cache
def _load_builtin(name: str) -> ChipSpec:
    return _load_file(builtin_path(name), {})


def _read_yaml(path: Path, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise SpecError(f"{path.name}: not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise SpecError(f"{path.name}: top level must be a mapping")
    base = raw.pop("base", None)
    if base is None:
        return raw
    base_key = ALIASES.get(str(base).lower(), str(base))
    bpath = builtin_path(base_key.lower()) if base_key.lower() in BUILTIN_CHIPS else \
        (path.parent / str(base))
    if str(bpath) in seen or not bpath.is_file():
        raise SpecError(f"{path.name}: base: {base!r} is not a chip file or built-in chip")
    merged = _read_yaml(bpath, (*seen, str(path)))
    _deep_merge(merged, raw)
    return merged


def _deep_merge(dst: dict[str, Any], src: dict[str, Any]) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and not _is_leaf(v) and isinstance(dst.get(k), dict) \
                and not _is_leaf(dst[k]):
            _deep_merge(dst[k], v)
        else:
            dst[k] = v


def _is_leaf(d: Any) -> bool:
    return isinstance(d, dict) and "value" in d


def _load_file(path: Path, overrides: Mapping[str, Any]) -> ChipSpec:
    raw = _read_yaml(path)
    for k, v in overrides.items():
        _apply_override(raw, k.replace("__", "."), v, path.name)
    values: dict[str, Any] = {}
    prov: dict[str, Provenance] = {}
    for key in ("name", "description"):
        if not isinstance(raw.get(key), str):
            raise SpecError(f"{path.name}: {key}: required text is missing")
    _flatten(raw, "", values, prov, path.name)
    chip = _build(values, prov, path)
    _validate(chip, path.name)
    return chip


def _apply_override(raw: dict[str, Any], dotted: str, value: Any, fname: str) -> None:
    parts = dotted.split(".")
    node = raw
    for p in parts[:-1]:
        if not isinstance(node.get(p), dict) or _is_leaf(node[p]):
            raise SpecError(f"{fname}: override {dotted!r}: no section '{p}'")
        node = node[p]
    leaf = parts[-1]
    if leaf not in node and not _wildcard_section(parts[:-1]):
        raise SpecError(f"{fname}: override {dotted!r}: no key '{leaf}' "
                        f"(known: {', '.join(sorted(node))})")
    node[leaf] = value if _is_leaf(value) else {"value": value, "source": "override",
                                               "kind": "what-if"}


def _wildcard_section(parts: list[str]) -> bool:
    return parts in (["tensor", "rate"], ["documented_peak_tflops"])


def _flatten(node: dict[str, Any], prefix: str, values: dict[str, Any],
             prov: dict[str, Provenance], fname: str) -> None:
    for k, v in node.items():
        path = f"{prefix}{k}"
        if prefix == "" and k in ("name", "description"):
            values[k] = v
        elif _is_leaf(v):
            values[path], prov[path] = _leaf(v, path, fname)
        elif isinstance(v, dict):
            _flatten(v, path + ".", values, prov, fname)
        else:
            raise SpecError(f"{fname}: {path}: expected {{value, source, kind}}, got {v!r}")


def _leaf(d: dict[str, Any], path: str, fname: str) -> tuple[Any, Provenance]:
    extra = set(d) - _LEAF_KEYS
    if extra:
        raise SpecError(f"{fname}: {path}: unknown leaf keys {sorted(extra)} "
                        f"(allowed: {', '.join(sorted(_LEAF_KEYS))})")
    src, kind = d.get("source"), d.get("kind")
    if not isinstance(src, str) or not src:
        raise SpecError(f"{fname}: {path}.source: every chip number needs a source")
    if kind not in KINDS:
        raise SpecError(f"{fname}: {path}.kind: {kind!r} is not a kind "
                        f"(known: {', '.join(KINDS)})")
    unit = str(d.get("unit", ""))
    value = d["value"]
    if unit:
        dim = next((dim for suf, dim in _SUFFIX_DIM if path.endswith(suf)), None)
        if dim is None or unit not in _UNITS[dim]:
            allowed = ", ".join(_UNITS[dim]) if dim else "none (no unit for this key)"
            raise SpecError(f"{fname}: {path}.unit: {unit!r} does not fit (allowed: {allowed})")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise SpecError(f"{fname}: {path}.value: expected a number, got {value!r}")
        value = value * _UNITS[dim][unit]
    return value, Provenance(src, kind, unit, str(d.get("note", "")))


def _coerce(value: Any, ann: str, path: str, fname: str) -> Any:
    bad = SpecError(f"{fname}: {path}: expected {ann}, got {value!r}")
    if ann == "bool":
        if not isinstance(value, bool):
            raise bad
        return value
    if ann == "int":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise bad
        return int(value)
    if ann == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        return float(value)
    if ann == "str":
        if not isinstance(value, str):
            raise bad
        return value
    if ann.startswith("tuple["):
        inner = ann[6:].split(",")[0]
        if not isinstance(value, list) or not value:
            raise bad
        return tuple(_coerce(x, inner, path, fname) for x in value)
    raise AssertionError(ann)  # a field annotation this loader does not know: a trnsim bug


def _section(cls: type, prefix: str, values: dict[str, Any], fname: str,
             used: set[str]) -> Any:
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        path = f"{prefix}.{f.name}"
        if f.type.startswith("Mapping"):
            sub = {k[len(path) + 1:]: v for k, v in values.items() if k.startswith(path + ".")}
            if not sub:
                raise SpecError(f"{fname}: {path}: required section is missing")
            used.update(f"{path}.{k}" for k in sub)
            kw[f.name] = MappingProxyType({k: _coerce(v, "float", f"{path}.{k}", fname)
                                           for k, v in sub.items()})
            continue
        if path not in values:
            raise SpecError(f"{fname}: {path}: required key is missing")
        used.add(path)
        kw[f.name] = _coerce(values[path], f.type, path, fname)
    return cls(**kw)


def _build(values: dict[str, Any], prov: dict[str, Provenance], path: Path) -> ChipSpec:
    fname = path.name
    used = {"name", "description"}

    def get(key: str, ann: str) -> Any:
        if key not in values:
            raise SpecError(f"{fname}: {key}: required key is missing")
        used.add(key)
        return _coerce(values[key], ann, key, fname)

    def mapping(prefix: str, keys: tuple[str, ...] | None, ann: str) -> Mapping[str, Any]:
        sub = {k[len(prefix) + 1:]: v for k, v in values.items() if k.startswith(prefix + ".")}
        for k in keys or ():
            if k not in sub:
                raise SpecError(f"{fname}: {prefix}.{k}: required key is missing")
        used.update(f"{prefix}.{k}" for k in sub)
        return MappingProxyType({k: _coerce(v, ann, f"{prefix}.{k}", fname)
                                 for k, v in sub.items()})

    engines = {}
    for e in ENGINE_NAMES:
        engines[e] = EngineSpec(
            e, get(f"engines.{e}.clock_ghz", "float"),
            get(f"engines.{e}.mm_latency_cycles" if e == "tensor" else
                f"engines.{e}.latency_cycles", "int"),
            get("engines.tensor.ls_latency_cycles", "int") if e == "tensor" else 0)
    sections = {name: _section(cls, name, values, fname, used) for name, cls in _SECTIONS.items()}
    chip = ChipSpec(
        name=values["name"], description=values["description"],
        nc_version=get("nc_version", "int"), cores_per_chip=get("cores_per_chip", "int"),
        lnc_default=get("lnc.default", "int"), lnc_allowed=get("lnc.allowed", "tuple[int, ...]"),
        engines=MappingProxyType(engines), **sections,
        timing=mapping("timing", TIMING_KEYS, "float"),
        tile_size=mapping("tile_size", TILE_SIZE_KEYS, "int"),
        documented_peak_tflops=mapping("documented_peak_tflops", None, "float"),
        provenance=MappingProxyType(prov), path=str(path))
    unknown = sorted(set(values) - used)
    if unknown:
        raise SpecError(f"{fname}: {unknown[0]}: unknown key"
                        + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""))
    return chip


def _validate(chip: ChipSpec, fname: str) -> None:
    def need(ok: bool, key: str, msg: str) -> None:
        if not ok:
            raise SpecError(f"{fname}: {key}: {msg}")

    need(chip.nc_version in (2, 3, 4), "nc_version",
         f"{chip.nc_version} is not a NeuronCore generation (2, 3, 4)")
    need(chip.cores_per_chip >= 1, "cores_per_chip", "must be at least 1")
    need(chip.lnc_default in chip.lnc_allowed, "lnc.default",
         f"{chip.lnc_default} is not in lnc.allowed {list(chip.lnc_allowed)}")
    for e, spec in chip.engines.items():
        need(spec.clock_ghz > 0, f"engines.{e}.clock_ghz", "must be positive")
        need(spec.latency_cycles >= 0, f"engines.{e}", "latencies must be >= 0")
    s, p = chip.sbuf, chip.psum
    need(0 < s.usable_bytes_per_partition <= s.bytes_per_partition,
         "sbuf.usable_bytes_per_partition", f"{s.usable_bytes_per_partition} is not in "
         f"(0, bytes_per_partition={s.bytes_per_partition}]")
    need(p.banks * p.bank_bytes == p.bytes_per_partition, "psum.banks",
         f"{p.banks} banks x {p.bank_bytes} B != {p.bytes_per_partition} B per partition")
    need(chip.hbm.capacity_bytes > 0 and chip.hbm.bandwidth_gbps > 0, "hbm",
         "capacity and bandwidth must be positive")
    d = chip.dma
    need(d.engines_per_core >= 1 and d.queues_per_engine >= 1, "dma.engines_per_core",
         "needs at least one engine and one queue")
    need(d.engine_bytes_per_ns > 0, "dma.engine_bytes_per_ns", "must be positive")
    need(chip.tile_size["pmax"] <= s.partitions, "tile_size.pmax",
         f"{chip.tile_size['pmax']} exceeds sbuf.partitions={s.partitions}")
    need(chip.tile_size["psum_num_banks"] <= p.banks, "tile_size.psum_num_banks",
         f"exceeds psum.banks={p.banks}")
    need("bf16" in chip.tensor.rate, "tensor.rate.bf16", "required key is missing")
    t = chip.throttle
    need(0 < t.initial_fraction <= 1, "throttle.initial_fraction", "must be in (0, 1]")


# ---------------------------------------------------------------- the `trnsim chips` table


def format_chips_table(names: list[str] | None = None) -> str:
    """A text table of chips: cores, clocks, SBUF/PSUM, HBM, peak TFLOPS."""
    cols = ("chip", "NC", "cores", "LNC", "clocks GHz T/V/S/G", "SBUF/core", "PSUM/core",
            "HBM", "HBM BW", "DMA/core", "bf16 TF core/chip", "fp8|mx TF core/chip")
    rows = [cols]
    for n in names or chips():
        c = load_chip(n)
        clocks = "/".join(f"{c.engines[e].clock_ghz:g}" for e in ("tensor", "vector", "scalar",
                                                                   "gpsimd"))
        fp8 = "mxfp8" if "mxfp8" in c.tensor.rate else "fp8"
        rows.append((
            c.name, f"v{c.nc_version}", str(c.cores_per_chip),
            "/".join(map(str, c.lnc_allowed)), clocks,
            f"{c.sbuf.partitions}x{c.sbuf.bytes_per_partition // 1024} KiB",
            f"{c.psum.banks}x{c.psum.bank_bytes // 1024} KiB",
            f"{c.hbm.capacity_bytes / (1 << 30):g} GiB", f"{c.hbm.bandwidth_gbps / 1000:g} TB/s",
            f"{c.dma.engines_per_core}x{c.dma.engine_bytes_per_ns:g} B/ns",
            f"{c.peak_tflops('bf16'):.1f}/{_doc_peak(c, 'bf16')}",
            f"{c.peak_tflops(fp8):.1f}/{_doc_peak(c, fp8)}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("core TFLOPS = TensorE clock x 128x128 PEs x 2 x dtype rate; "
                 "chip TFLOPS = the documented figure.")
    return "\n".join(lines)


def _doc_peak(c: ChipSpec, dtype: str) -> str:
    v = c.documented_peak_tflops.get(dtype)
    return f"{v:g}" if v is not None else f"{c.peak_tflops(dtype, per='chip'):.0f}"


def print_chips(file: IO[str] | None = None) -> None:
    """Print format_chips_table() (the `trnsim chips` subcommand)."""
    out = file or sys.stdout
    out.write(format_chips_table() + os.linesep)
