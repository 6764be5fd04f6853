"""Chip descriptions: load_chip() and chips(), the built-in isa/chips/*.yaml, the chips table.

``trnsim.load_chip(name_or_path, **overrides)`` returns a frozen, validated ChipSpec; every
number keeps where it came from (``chip.source_of("sbuf.bytes_per_partition")``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

from trnsim import yamlfile
from trnsim.chipfile import KINDS, load_file
from trnsim.chipspec import ChipSpec as ChipSpec
from trnsim.chipspec import (
    DmaSpec,
    EngineSpec,
    HbmSpec,
    PsumSpec,
    SbufSpec,
    TensorSpec,
    ThrottleSpec,
)
from trnsim.errors import SpecError

__all__ = [
    "KINDS",
    "ChipSpec",
    "DmaSpec",
    "EngineSpec",
    "HbmSpec",
    "PsumSpec",
    "SbufSpec",
    "TensorSpec",
    "ThrottleSpec",
    "chips",
    "format_chips_table",
    "load_chip",
    "print_chips",
    "sources",
]

BUILTIN_CHIPS = ("trn1", "trn2", "trn3")
ALIASES = MappingProxyType({"inf2": "trn1", "gen2": "trn1", "gen3": "trn2", "gen4": "trn3"})


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
        raise SpecError(
            f"load_chip: {name_or_path!r} is neither a built-in chip "
            f"(known: {', '.join(BUILTIN_CHIPS)}) nor a YAML file"
        )
    return load_file(path, overrides, _resolve_base)


@functools.cache
def _load_builtin(name: str) -> ChipSpec:
    return load_file(builtin_path(name), {}, _resolve_base)


def _resolve_base(name: str, here: Path) -> Path | None:
    key = ALIASES.get(name.lower(), name.lower())
    if key in BUILTIN_CHIPS:
        return builtin_path(key)
    path = here / name
    return path if path.is_file() else None


def sources() -> Mapping[str, str]:
    """Source IDs a chip or cost number may cite (isa/sources.yaml): ID -> URL."""
    return MappingProxyType(yamlfile.load((_chip_dir().parent / "sources.yaml").read_text()))


# ---------------------------------------------------------------- the `trnsim chips` table


def format_chips_table(names: list[str] | None = None) -> str:
    """A text table of chips: cores, clocks, SBUF/PSUM, HBM, peak TFLOPS."""
    cols = (
        "chip",
        "NC",
        "cores",
        "LNC",
        "clocks GHz T/V/S/G",
        "SBUF/core",
        "PSUM/core",
        "HBM",
        "HBM BW",
        "DMA/core",
        "bf16 TF core/chip",
        "fp8|mx TF core/chip",
    )
    rows = [cols]
    for n in names or chips():
        c = load_chip(n)
        clocks = "/".join(
            f"{c.engines[e].clock_ghz:g}" for e in ("tensor", "vector", "scalar", "gpsimd")
        )
        fp8 = "mxfp8" if "mxfp8" in c.tensor.rate else "fp8"
        rows.append(
            (
                c.name,
                f"v{c.nc_version}",
                str(c.cores_per_chip),
                "/".join(map(str, c.lnc_allowed)),
                clocks,
                f"{c.sbuf.partitions}x{c.sbuf.bytes_per_partition // 1024} KiB",
                f"{c.psum.banks}x{c.psum.bank_bytes // 1024} KiB",
                f"{c.hbm.capacity_bytes / (1 << 30):g} GiB",
                f"{c.hbm.bandwidth_gbps / 1000:g} TB/s",
                f"{c.dma.engines_per_core}x{c.dma.engine_bytes_per_ns:g} B/ns",
                f"{c.peak_tflops('bf16'):.1f}/{_doc_peak(c, 'bf16')}",
                f"{c.peak_tflops(fp8):.1f}/{_doc_peak(c, fp8)}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(
        "core TFLOPS = TensorE clock x 128x128 PEs x 2 x dtype rate; "
        "chip TFLOPS = the documented figure."
    )
    return "\n".join(lines)


def _doc_peak(c: ChipSpec, dtype: str) -> str:
    v = c.documented_peak_tflops.get(dtype)
    return f"{v:g}" if v is not None else f"{c.peak_tflops(dtype, per='chip'):.0f}"


def print_chips(file: IO[str] | None = None) -> None:
    """Print format_chips_table() (the `trnsim chips` subcommand)."""
    out = file or sys.stdout
    out.write(format_chips_table() + os.linesep)
