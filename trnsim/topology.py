"""Topologies: how many chips, joined how (isa/topologies/<name>.yaml or a what-if file).

``load_topology("trn2-instance")`` returns a frozen, validated TopologySpec: its chip, its chip
count and the fabric levels that join them, innermost first (a 2-D torus inside an instance, a
ring of instances, a switch), each with its links per chip, per-link bandwidth (each way) and
hop latency. Every number keeps its source, as chip numbers do. Ranks are logical NeuronCores:
rank r sits on chip r // ranks_per_chip. Knows nothing about time or values.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from trnsim.chip import load_chip
from trnsim.chipfile import _apply_override, _coerce, _flatten, _read_yaml
from trnsim.chipspec import ChipSpec, Provenance
from trnsim.errors import SpecError

BUILTIN_TOPOLOGIES = ("trn1-instance", "trn2-instance", "trn2-ultraserver",
                      "trn3-ultraserver-gen1", "trn3-ultraserver-gen2")
# The topology a chip's ranks use when none is named: the largest scale-up domain of that chip.
DEFAULT_FOR_CHIP = MappingProxyType({"trn1": "trn1-instance", "trn2": "trn2-ultraserver",
                                     "trn3": "trn3-ultraserver-gen2"})
FABRICS = ("torus", "ring", "switch")
# Above the Mesh threshold: the faster of the modelled Mesh and Ring (standing in for the
# runtime's RDH and KangaRing), or always one of them (what-if topologies, timing tests).
ABOVE_MESH = ("fastest", "ring", "mesh")
_LEVEL_KEYS = {"fabric": "str", "units": "int", "shape": "tuple[int, ...]",
               "links_per_chip": "int", "link_gbps": "float", "latency_ns": "float"}


@dataclass(frozen=True)
class LevelSpec:
    """One fabric level: it joins `units` copies of the level below (level 0: chips)."""

    name: str
    fabric: str  # torus | ring | switch
    units: int
    shape: tuple[int, ...]  # torus: its dimensions (product = units); else (units,)
    links_per_chip: int
    link_gbps: float  # per link, each way
    latency_ns: float  # per hop on this level, beyond the DMA's own trigger latency

    @property
    def bandwidth_gbps(self) -> float:
        """A chip's bandwidth on this level, each way (all its links)."""
        return self.links_per_chip * self.link_gbps

    def hops(self, a: int, b: int) -> int:
        """Hops between units a and b of this level (0 when equal)."""
        if a == b:
            return 0
        if self.fabric == "switch":
            return 1
        dims = self.shape if self.fabric == "torus" else (self.units,)
        total = 0
        for n in reversed(dims):
            d = abs(a % n - b % n)
            total += min(d, n - d)  # wrap-around links
            a, b = a // n, b // n
        return total


@dataclass(frozen=True)
class Placement:
    """Where a rank runs: its chip, its logical core on the chip, the physical cores."""

    rank: int
    chip: int
    logical_core: int
    cores: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class TopologySpec:
    """An immutable, validated topology (one isa/topologies/<name>.yaml)."""

    name: str
    description: str
    chip: ChipSpec
    chips: int
    lnc2_core_pairs: tuple[tuple[int, ...], ...]
    levels: tuple[LevelSpec, ...]
    mesh_max_bytes: int
    provenance: Mapping[str, Provenance]
    path: str = ""
    above_mesh: str = "fastest"  # algorithm above mesh_max_bytes: fastest | ring | mesh

    def source_of(self, key_path: str) -> tuple[str, str]:
        """(source ID, kind) of one number, e.g. source_of("levels.instance.link_gbps")."""
        try:
            p = self.provenance[key_path]
        except KeyError:
            raise SpecError(f"{self.name}: no topology value at '{key_path}'") from None
        return p.source, p.kind

    # ------------------------------------------------------------ ranks
    def ranks_per_chip(self, lnc: int) -> int:
        return self.chip.cores_per_chip // lnc

    def max_ranks(self, lnc: int) -> int:
        """Logical NeuronCores in the whole topology at this LNC."""
        return self.chips * self.ranks_per_chip(lnc)

    def place(self, rank: int, lnc: int) -> Placement:
        per = self.ranks_per_chip(lnc)
        chip, logical = divmod(rank, per)
        if lnc == 2 and self.lnc2_core_pairs and logical < len(self.lnc2_core_pairs):
            cores = tuple(self.lnc2_core_pairs[logical])
        else:
            cores = tuple(range(logical * lnc, logical * lnc + lnc))
        return Placement(rank, chip, logical, cores)

    def coords(self, chip: int) -> tuple[int, ...]:
        """The chip's unit index on each level, innermost first."""
        out = []
        for lv in self.levels:
            chip, unit = divmod(chip, lv.units)
            out.append(unit)
        return tuple(out)

    def hops(self, chip_a: int, chip_b: int) -> tuple[int, ...]:
        """Hops a transfer from chip_a to chip_b makes on each level (all 0: same chip).

        Routing is dimension-ordered, outermost level first: a ring of instances joins chips
        at the same torus coordinate, so a transfer crosses the ring, then the torus."""
        a, b = self.coords(chip_a), self.coords(chip_b)
        out = [lv.hops(x, y) for lv, x, y in zip(self.levels, a, b, strict=True)]
        for i, lv in enumerate(self.levels):  # a switch level needs no inner hops below it
            if lv.fabric == "switch" and out[i]:
                for j in range(i):
                    if self.levels[j].fabric != "switch":
                        continue
                    out[j] = 0
        return tuple(out)

    def __repr__(self) -> str:
        lv = " / ".join(f"{v.name}:{v.fabric}x{v.units}" for v in self.levels)
        return f"TopologySpec({self.name!r}, {self.chips} x {self.chip.name}, {lv})"


# ---------------------------------------------------------------- loading


def topologies() -> list[str]:
    """Names of the built-in topologies."""
    return list(BUILTIN_TOPOLOGIES)


def _topology_dir() -> Path:
    try:
        d = resources.files("trnsim._isa") / "topologies"
        if d.is_dir():
            return Path(str(d))
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parent.parent / "isa" / "topologies"


def builtin_path(name: str) -> Path:
    return _topology_dir() / f"{name}.yaml"


def default_topology(chip: ChipSpec | str) -> str:
    """The built-in topology a chip's ranks use when none is named."""
    name = chip if isinstance(chip, str) else chip.name
    return DEFAULT_FOR_CHIP.get(name, "")


def load_topology(name_or_path: Any = "trn2-instance", **overrides: Any) -> TopologySpec:
    """A frozen TopologySpec from a built-in name, a YAML path or a TopologySpec.

    Overrides name a key path with dots or double underscores, as load_chip's do:
    ``load_topology("trn2-instance", levels__instance__link_gbps=256)``. A user YAML may start
    with ``base: trn2-instance`` and give only the keys it changes.
    """
    if isinstance(name_or_path, TopologySpec):
        if not overrides:
            return name_or_path
        name_or_path = name_or_path.path or name_or_path.name
    key = str(name_or_path)
    if key in BUILTIN_TOPOLOGIES and not overrides:
        return _load_builtin(key)
    path = builtin_path(key) if key in BUILTIN_TOPOLOGIES else Path(key)
    if not path.is_file():
        raise SpecError(
            f"load_topology: {name_or_path!r} is neither a built-in topology "
            f"(known: {', '.join(BUILTIN_TOPOLOGIES)}) nor a YAML file"
        )
    return _load_file(path, overrides)


@functools.cache
def _load_builtin(name: str) -> TopologySpec:
    return _load_file(builtin_path(name), {})


def _resolve_base(name: str, here: Path) -> Path | None:
    if name in BUILTIN_TOPOLOGIES:
        return builtin_path(name)
    path = here / name
    return path if path.is_file() else None


def _load_file(path: Path, overrides: Mapping[str, Any]) -> TopologySpec:
    fname = path.name
    raw = _read_yaml(path, _resolve_base)
    for k, v in overrides.items():
        _apply_override(raw, k.replace("__", "."), v, fname)
    for key in ("name", "description"):
        if not isinstance(raw.get(key), str):
            raise SpecError(f"{fname}: {key}: required text is missing")
    levels_raw = raw.get("levels")
    if not isinstance(levels_raw, dict) or not levels_raw:
        raise SpecError(f"{fname}: levels: required section is missing (innermost level first)")
    values: dict[str, Any] = {}
    prov: dict[str, Provenance] = {}
    _flatten(raw, "", values, prov, fname)
    used = {"name", "description"}

    def get(key: str, ann: str) -> Any:
        if key not in values:
            raise SpecError(f"{fname}: {key}: required key is missing")
        used.add(key)
        return _coerce(values[key], ann, key, fname)

    chip = _chip(get("chip", "str"), path)
    levels = []
    for lname in levels_raw:
        kw = {}
        for k, ann in _LEVEL_KEYS.items():
            full = f"levels.{lname}.{k}"
            if k == "shape" and full not in values:
                continue
            kw[k] = get(full, ann)
        kw.setdefault("shape", (kw["units"],))
        levels.append(LevelSpec(lname, **kw))
    pairs = ()
    if "lnc2_core_pairs" in values:
        used.add("lnc2_core_pairs")
        pairs = tuple(tuple(_coerce(c, "int", "lnc2_core_pairs", fname) for c in p)
                      for p in values["lnc2_core_pairs"])
    topo = TopologySpec(
        name=values["name"], description=values["description"], chip=chip,
        chips=get("chips", "int"), lnc2_core_pairs=pairs, levels=tuple(levels),
        mesh_max_bytes=get("algorithms.mesh_max_bytes", "int"),
        provenance=MappingProxyType(prov), path=str(path),
        above_mesh=get("algorithms.above_mesh", "str") if "algorithms.above_mesh" in values
        else "fastest",
    )
    unknown = sorted(set(values) - used)
    if unknown:
        raise SpecError(f"{fname}: {unknown[0]}: unknown key"
                        + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""))
    _validate(topo, fname)
    return topo


def _chip(ref: str, path: Path) -> ChipSpec:
    """The topology's chip: a built-in name, or a chip file next to the topology file."""
    local = path.parent / ref
    return load_chip(local if local.is_file() else ref)


def _validate(t: TopologySpec, fname: str) -> None:
    def need(ok: bool, key: str, msg: str) -> None:
        if not ok:
            raise SpecError(f"{fname}: {key}: {msg}")

    for lv in t.levels:
        key = f"levels.{lv.name}"
        need(lv.fabric in FABRICS, f"{key}.fabric",
             f"{lv.fabric!r} is not a fabric (known: {', '.join(FABRICS)})")
        need(lv.units >= 1, f"{key}.units", "must be at least 1")
        need(math.prod(lv.shape) == lv.units, f"{key}.shape",
             f"{list(lv.shape)} holds {math.prod(lv.shape)} units, not units={lv.units}")
        need(lv.links_per_chip >= 1 and lv.link_gbps > 0, f"{key}.link_gbps",
             "needs at least one link of positive bandwidth")
        need(lv.latency_ns >= 0, f"{key}.latency_ns", "must be >= 0")
    units = math.prod(lv.units for lv in t.levels)
    need(units == t.chips, "chips",
         f"{t.chips} chips, but the levels join {' x '.join(str(v.units) for v in t.levels)}"
         f" = {units}")
    # Links of every level together cannot exceed the chip's interconnect (chip file, both ways).
    both_ways = 2 * sum(lv.bandwidth_gbps for lv in t.levels)
    cap = t.chip.interconnect.bandwidth_gbps
    need(both_ways <= cap * (1 + 1e-9), "levels",
         f"the links add up to {both_ways:g} GB/s per chip (both ways), more than "
         f"{t.chip.name}'s interconnect.bandwidth_gbps = {cap:g}")
    for p in t.lnc2_core_pairs:
        need(len(p) == 2 and all(0 <= c < t.chip.cores_per_chip for c in p), "lnc2_core_pairs",
             f"{list(p)} is not a pair of {t.chip.name} cores (0..{t.chip.cores_per_chip - 1})")
    need(t.mesh_max_bytes >= 0, "algorithms.mesh_max_bytes", "must be >= 0")
    need(t.above_mesh in ABOVE_MESH, "algorithms.above_mesh",
         f"{t.above_mesh!r} is not one of {', '.join(ABOVE_MESH)}")


def format_topologies_table() -> str:
    """A text table of the built-in topologies: chips, levels, bandwidth per chip."""
    rows = [("topology", "chips", "chip", "levels (innermost first)", "GB/s/chip each way")]
    for n in topologies():
        t = load_topology(n)
        lv = ", ".join(f"{v.name} {v.fabric} {'x'.join(map(str, v.shape))}" for v in t.levels)
        bw = " + ".join(f"{v.bandwidth_gbps:g}" for v in t.levels)
        rows.append((t.name, str(t.chips), t.chip.name, lv, bw))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
