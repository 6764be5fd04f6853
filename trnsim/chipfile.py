"""Chip files: read isa/chips/<name>.yaml (or a user's what-if file) into a validated ChipSpec.

Every number is a leaf ``{value, unit?, source, kind, note?}``; units are converted to the key's
canonical unit (its suffix: _bytes, _gbps, _ghz, _ns, _cycles), types are checked against the
ChipSpec fields, and each value's provenance is kept. Errors name the file and the key path.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from trnsim import yamlfile
from trnsim.chipspec import (
    ENGINE_NAMES,
    MAX_TICK_MHZ,
    SECTIONS,
    TILE_SIZE_KEYS,
    TIMING_KEYS,
    ChipSpec,
    EngineSpec,
    Provenance,
    descriptor_classes,
    tick_clock_mhz,
)
from trnsim.errors import SpecError

# (base name, directory of the file naming it) -> path of the base chip file, or None.
Resolver = Callable[[str, Path], "Path | None"]
KINDS = ("documented", "inferred", "third-party", "estimate", "fitted", "what-if")

# Unit conversion: the key's suffix fixes its canonical unit; the leaf's `unit` must convert to it.
_UNITS: dict[str, dict[str, float]] = {
    "bytes": {"B": 1, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30},
    "gbps": {"GB/s": 1, "B/ns": 1, "TB/s": 1000},
    "tbps": {"TB/s": 1, "GB/s": 0.001},
    "ghz": {"GHz": 1, "MHz": 0.001},
    "ns": {"ns": 1, "us": 1000},
    "cycles": {"cycles": 1},
}
_SUFFIX_DIM = (
    ("_bytes_per_ns", "gbps"),
    ("bytes_per_partition", "bytes"),
    ("_bytes", "bytes"),
    ("_gbps", "gbps"),
    ("_tbps", "tbps"),
    ("_ghz", "ghz"),
    ("_ns", "ns"),
    ("_cycles", "cycles"),
    ("bytes", "bytes"),
)
_LEAF_KEYS = {"value", "unit", "source", "kind", "note"}


def _read_yaml(path: Path, resolve: Resolver, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    try:
        raw = yamlfile.load(path.read_text())
    except yaml.YAMLError as e:
        raise SpecError(f"{path.name}: not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise SpecError(f"{path.name}: top level must be a mapping")
    base = raw.pop("base", None)
    if base is None:
        return raw
    bpath = resolve(str(base), path.parent)
    if bpath is None or str(bpath) in seen or not bpath.is_file():
        raise SpecError(f"{path.name}: base: {base!r} is not a chip file or built-in chip")
    merged = _read_yaml(bpath, resolve, (*seen, str(path)))
    _deep_merge(merged, raw)
    return merged


def _deep_merge(dst: dict[str, Any], src: dict[str, Any]) -> None:
    for k, v in src.items():
        if (
            isinstance(v, dict)
            and not _is_leaf(v)
            and isinstance(dst.get(k), dict)
            and not _is_leaf(dst[k])
        ):
            _deep_merge(dst[k], v)
        else:
            dst[k] = v


def _is_leaf(d: Any) -> bool:
    return isinstance(d, dict) and "value" in d


def load_file(path: Path, overrides: Mapping[str, Any], resolve: Resolver) -> ChipSpec:
    """Read, merge (``base:``), override, convert and validate one chip file."""
    raw = _read_yaml(path, resolve)
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
        raise SpecError(
            f"{fname}: override {dotted!r}: no key '{leaf}' (known: {', '.join(sorted(node))})"
        )
    node[leaf] = (
        value if _is_leaf(value) else {"value": value, "source": "override", "kind": "what-if"}
    )


def _wildcard_section(parts: list[str]) -> bool:
    return parts in (["tensor", "rate"], ["documented_peak_tflops"])


def _flatten(
    node: dict[str, Any],
    prefix: str,
    values: dict[str, Any],
    prov: dict[str, Provenance],
    fname: str,
) -> None:
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
        raise SpecError(
            f"{fname}: {path}: unknown leaf keys {sorted(extra)} "
            f"(allowed: {', '.join(sorted(_LEAF_KEYS))})"
        )
    src, kind = d.get("source"), d.get("kind")
    if not isinstance(src, str) or not src:
        raise SpecError(f"{fname}: {path}.source: every chip number needs a source")
    if kind not in KINDS:
        raise SpecError(f"{fname}: {path}.kind: {kind!r} is not a kind (known: {', '.join(KINDS)})")
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
    if ann in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        if not math.isfinite(value):  # YAML .inf / .nan: no chip has them
            raise SpecError(f"{fname}: {path}: expected a finite number, got {value!r}")
        if ann == "float":
            return float(value)
        if value != int(value):
            raise bad
        return int(value)
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


def _section(cls: type, prefix: str, values: dict[str, Any], fname: str, used: set[str]) -> Any:
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        path = f"{prefix}.{f.name}"
        if f.type.startswith("Mapping"):
            sub = {k[len(path) + 1 :]: v for k, v in values.items() if k.startswith(path + ".")}
            if not sub:
                raise SpecError(f"{fname}: {path}: required section is missing")
            used.update(f"{path}.{k}" for k in sub)
            kw[f.name] = MappingProxyType(
                {k: _coerce(v, "float", f"{path}.{k}", fname) for k, v in sub.items()}
            )
            continue
        if path not in values:
            if f.default is not dataclasses.MISSING:  # an optional key (added later)
                continue
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
        sub = {k[len(prefix) + 1 :]: v for k, v in values.items() if k.startswith(prefix + ".")}
        for k in keys or ():
            if k not in sub:
                raise SpecError(f"{fname}: {prefix}.{k}: required key is missing")
        used.update(f"{prefix}.{k}" for k in sub)
        return MappingProxyType(
            {k: _coerce(v, ann, f"{prefix}.{k}", fname) for k, v in sub.items()}
        )

    engines = {}
    for e in ENGINE_NAMES:
        engines[e] = EngineSpec(
            e,
            get(f"engines.{e}.clock_ghz", "float"),
            get(
                f"engines.{e}.mm_latency_cycles"
                if e == "tensor"
                else f"engines.{e}.latency_cycles",
                "int",
            ),
            get("engines.tensor.ls_latency_cycles", "int") if e == "tensor" else 0,
        )
    sections = {name: _section(cls, name, values, fname, used) for name, cls in SECTIONS.items()}
    chip = ChipSpec(
        name=values["name"],
        description=values["description"],
        nc_version=get("nc_version", "int"),
        cores_per_chip=get("cores_per_chip", "int"),
        lnc_default=get("lnc.default", "int"),
        lnc_allowed=get("lnc.allowed", "tuple[int, ...]"),
        engines=MappingProxyType(engines),
        **sections,
        timing=mapping("timing", TIMING_KEYS, "float"),
        tile_size=mapping("tile_size", TILE_SIZE_KEYS, "int"),
        documented_peak_tflops=mapping("documented_peak_tflops", None, "float"),
        provenance=MappingProxyType(prov),
        path=str(path),
    )
    unknown = sorted(set(values) - used)
    if unknown:
        raise SpecError(
            f"{fname}: {unknown[0]}: unknown key"
            + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
        )
    return chip


def _validate(chip: ChipSpec, fname: str) -> None:
    def need(ok: bool, key: str, msg: str) -> None:
        if not ok:
            raise SpecError(f"{fname}: {key}: {msg}")

    need(
        chip.nc_version in (2, 3, 4),
        "nc_version",
        f"{chip.nc_version} is not a NeuronCore generation (2, 3, 4)",
    )
    need(chip.cores_per_chip >= 1, "cores_per_chip", "must be at least 1")
    need(
        chip.lnc_default in chip.lnc_allowed,
        "lnc.default",
        f"{chip.lnc_default} is not in lnc.allowed {list(chip.lnc_allowed)}",
    )
    for e, spec in chip.engines.items():
        need(spec.clock_ghz > 0, f"engines.{e}.clock_ghz", "must be positive")
        mhz = spec.clock_ghz * 1000
        need(abs(mhz - round(mhz)) < 1e-6, f"engines.{e}.clock_ghz",
             f"{spec.clock_ghz} GHz is not a whole number of MHz (the timing model's tick "
             "clock is a common multiple of the engine clocks in MHz)")
        need(spec.latency_cycles >= 0, f"engines.{e}", "latencies must be >= 0")
    tick = tick_clock_mhz(chip.engines.values())
    need(tick <= MAX_TICK_MHZ, "engines",
         f"clocks {'/'.join(f'{e.clock_ghz:g}' for e in chip.engines.values())} GHz have a "
         f"least common multiple of {tick} MHz; the timing model ticks at one clock that "
         f"every engine's divides, at most {MAX_TICK_MHZ} MHz: pick clocks with a smaller "
         "common multiple (rounder MHz values)")
    s, p = chip.sbuf, chip.psum
    need(
        0 < s.usable_bytes_per_partition <= s.bytes_per_partition,
        "sbuf.usable_bytes_per_partition",
        f"{s.usable_bytes_per_partition} is not in "
        f"(0, bytes_per_partition={s.bytes_per_partition}]",
    )
    need(
        p.banks * p.bank_bytes == p.bytes_per_partition,
        "psum.banks",
        f"{p.banks} banks x {p.bank_bytes} B != {p.bytes_per_partition} B per partition",
    )
    need(
        chip.hbm.capacity_bytes > 0 and chip.hbm.bandwidth_gbps > 0,
        "hbm",
        "capacity and bandwidth must be positive",
    )
    d = chip.dma
    need(
        d.engines_per_core >= 1 and d.queues_per_engine >= 1,
        "dma.engines_per_core",
        "needs at least one engine and one queue",
    )
    need(d.engine_bytes_per_ns > 0, "dma.engine_bytes_per_ns", "must be positive")
    try:
        descriptor_classes(d.descriptor_cost)
    except ValueError as e:
        raise SpecError(f"{fname}: dma.descriptor_cost: {e}") from None
    need(
        chip.tile_size["pmax"] <= s.partitions,
        "tile_size.pmax",
        f"{chip.tile_size['pmax']} exceeds sbuf.partitions={s.partitions}",
    )
    need(
        chip.tile_size["psum_num_banks"] <= p.banks,
        "tile_size.psum_num_banks",
        f"exceeds psum.banks={p.banks}",
    )
    need("bf16" in chip.tensor.rate, "tensor.rate.bf16", "required key is missing")
    t = chip.throttle
    need(0 < t.initial_fraction <= 1, "throttle.initial_fraction", "must be in (0, 1]")
