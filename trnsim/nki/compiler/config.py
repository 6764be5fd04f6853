"""nki.compiler.CompileConfig and SpecializationConfig: the per-kernel configuration of
`@nki.jit(compile_config=..., specialization_config=...)` (NKI docs of SDK 2.33, 2026-11).

The configuration selects who allocates the kernel's tiles and who orders its instructions:
`allocation=Allocation.COLORING` (the default: neuronx-cc allocates after tracing, by graph
coloring) or `Allocation.LINEAR` (NKI allocates first, by linear scan, each tile from its first
write to its last read); `scheduling=True` (NKI orders the instructions, by
`experimental_scheduling_heuristic`; it needs LINEAR). The rest are optimizations of those flows.

What trnsim does with it (timing only; values never change): `timing_options()` turns a
configuration into the scheduler's inputs: the instruction order (TRIVIAL: program order;
ASAP, the default, and no NKI scheduling: the compiler order of trnsim.timing.reorder;
CRITICAL_PATH and DMA_PREFETCH: a list scheduler with that priority), the allocation policy of
LINEAR's modes (RING / FAST / MAX_REUSE: CompilerRules.allocation, timing/realloc.py) and the
engine placement of LINEAR's opt levels (O0: none; O1, O2: nisa.tensor_copy only, or every
engine=unknown instruction with engine_balancing; the current flow places them all). The other
options are checked and kept but do not change the timeline (README, Conformance, lists them).

Checks, as documented: an enum option given anything but a member of its enum is a TypeError;
an option that acts only when NKI allocates, set with COLORING, and one that acts only when NKI
schedules, set without scheduling=True, are ValueErrors; `scheduling=True` needs LINEAR.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from trnsim.errors import ConfigTypeError, ConfigValueError
from trnsim.program import capture_location
from trnsim.timing.compiler import CompilerRules


class Allocation(enum.Enum):
    """Who assigns SBUF/PSUM/HBM addresses: neuronx-cc's graph coloring or NKI's linear scan."""

    COLORING = "coloring"
    LINEAR = "linear"


class AllocationMode(enum.Enum):
    """How NKI's linear scan picks an address for each tile (needs Allocation.LINEAR)."""

    RING = "ring"  # a fresh address per tile; freed memory reused only after wrapping around
    FAST = "fast"  # nested lifetimes stacked, others best-fit into freed memory
    MAX_REUSE = "max_reuse"  # always best fit into freed memory: least memory, least overlap


class SchedulingHeuristic(enum.Enum):
    """Which ready instruction NKI's scheduler issues next (needs scheduling=True)."""

    ASAP = "asap"  # the one that can start first (the default)
    CRITICAL_PATH = "critical_path"  # the one on the longest path to the kernel's outputs
    DMA_PREFETCH = "dma_prefetch"  # a DMA before any other instruction
    TRIVIAL = "trivial"  # the kernel's program order


class AddressRotation(enum.Enum):
    """Whether the backend may move a memloc's address for a better layout."""

    AUTO = "auto"  # off for fixed addresses (the kernel's or NKI's allocation), on otherwise
    ENABLE = "enable"
    DISABLE = "disable"


class OptLevel(enum.Enum):
    """How many optimizations the new (LINEAR) flow applies; the current flow ignores it."""

    O0 = 0  # every multi-engine instruction without engine= on its default engine
    O1 = 1  # (default) the compiler picks the engine of each nisa.tensor_copy without engine=
    O2 = 2  # O1 plus the flow's optimizations (prefetch_auto, dma_copy_elim, element_widening...)


# Options that act only when NKI allocates (allocation=LINEAR): set with COLORING, a ValueError.
_NEEDS_LINEAR = ("prefetch_auto", "split_reused_buffers", "experimental_allocation_mode")
# Options that act only when NKI schedules (scheduling=True).
_NEEDS_SCHEDULING = ("experimental_scheduling_heuristic",)
_ENUM_OPTIONS = {
    "allocation": (Allocation, False),
    "opt_level": (OptLevel, False),
    "experimental_allocation_mode": (AllocationMode, True),
    "experimental_scheduling_heuristic": (SchedulingHeuristic, True),
    "address_rotation": (AddressRotation, False),
}


def _enum_message(name: str, cls: type, optional: bool, value: Any) -> str:
    tail = " or None" if optional else ""
    hint = f" (e.g. {cls.__name__}.{next(iter(cls)).name})"
    return (f"{name} must be an nki.compiler.{cls.__name__}{tail}{hint}, got {value!r} "
            f"({type(value).__name__})")


def _as_bool(name: str, value: Any) -> bool:
    """A flag: True/False, or 0/1 (an int or numpy bool); a string or other value is refused
    (`"False"` would read as on)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, np.bool_) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise ConfigTypeError(f"{name} must be a bool (True or False), got {value!r} "
                          f"({type(value).__name__})", capture_location())


@dataclass(frozen=True, kw_only=True)
class CompileConfig:
    """Per-kernel compile configuration, passed as `@nki.jit(compile_config=CompileConfig(...))`.

    Defaults are the documented ones where the docs give them (COLORING, no NKI scheduling, O1,
    ASAP, address rotation AUTO, the allocation fallback on); the optimizations default off.
    """

    allocation: Allocation = Allocation.COLORING
    scheduling: bool = False
    opt_level: OptLevel = OptLevel.O1
    experimental_allocation_mode: AllocationMode | None = None
    experimental_scheduling_heuristic: SchedulingHeuristic | None = None
    address_rotation: AddressRotation = AddressRotation.AUTO
    prefetch_auto: bool = False
    split_reused_buffers: bool = False
    non_ssa_legalization: bool = False
    tensor_copy_elim: bool = False
    dma_copy_elim: bool = False
    element_widening: bool = False
    engine_balancing: bool = False
    register_load_reuse: bool = False
    dead_code_elim: bool = False
    remove_unused_instructions: bool = False
    remove_overwritten_writes: bool = False
    nki_alloc_fallback: bool = True
    sbuf_allocation_fallback: bool = False
    barrier_check: bool = False

    def __post_init__(self) -> None:
        """The documented checks (module docstring), raised at the user's line: a
        ConfigTypeError is a TypeError, a ConfigValueError a ValueError."""
        for name, (cls, optional) in _ENUM_OPTIONS.items():
            value = getattr(self, name)
            if not (isinstance(value, cls) or (optional and value is None)):
                raise ConfigTypeError(_enum_message(name, cls, optional, value),
                                      capture_location())
        for f in fields(self):
            if f.name not in _ENUM_OPTIONS:
                object.__setattr__(self, f.name, _as_bool(f"CompileConfig.{f.name}",
                                                          getattr(self, f.name)))
        problem = None
        if self.scheduling and self.allocation is not Allocation.LINEAR:
            problem = ("scheduling=True needs allocation=Allocation.LINEAR, got "
                       f"allocation={self.allocation}")
        elif self.allocation is Allocation.COLORING:
            for name in _NEEDS_LINEAR:
                if getattr(self, name) not in (None, False):
                    problem = (f"{name} acts only when NKI allocates; it cannot be set with "
                               "allocation=Allocation.COLORING.")
                    break
        if problem is None and not self.scheduling:
            for name in _NEEDS_SCHEDULING:
                if getattr(self, name) is not None:
                    problem = (f"{name} acts only when NKI schedules; set scheduling=True as "
                               "well.")
        if problem is not None:
            raise ConfigValueError(problem, capture_location())

    def changed(self) -> dict[str, Any]:
        """The options that differ from the defaults (for messages and reports)."""
        default = CompileConfig()
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) != getattr(default, f.name)}

    def timing_options(self, rules: CompilerRules | None = None
                       ) -> tuple[str, CompilerRules | None]:
        """The scheduler's inputs under this configuration (module docstring): the order
        (trnsim.timing.reorder.ORDERS: "compiler", "program", "critical_path",
        "dma_prefetch") and `rules` (the caller's what-if rules, default all on) with what the
        configuration changes in them; `rules` itself when it changes nothing."""
        order = "compiler"
        if self.scheduling:
            h = self.experimental_scheduling_heuristic or SchedulingHeuristic.ASAP
            order = {SchedulingHeuristic.ASAP: "compiler",
                     SchedulingHeuristic.TRIVIAL: "program",
                     SchedulingHeuristic.CRITICAL_PATH: "critical_path",
                     SchedulingHeuristic.DMA_PREFETCH: "dma_prefetch"}[h]
        changes: dict[str, Any] = {}
        if self.allocation is Allocation.LINEAR:  # (the current flow ignores the rest)
            if self.experimental_allocation_mode is not None:
                changes["allocation"] = self.experimental_allocation_mode.value
            if self.opt_level is OptLevel.O0:
                changes["place_unknown_engine"] = False  # every instruction on its default
            elif not self.engine_balancing:
                changes["place_opcodes"] = frozenset({"tensor_copy"})  # O1/O2: copies only
        if not changes:
            return order, rules
        return order, dataclasses.replace(CompilerRules() if rules is None else rules, **changes)


@dataclass(frozen=True, kw_only=True)
class SpecializationConfig:
    """Per-kernel specialization-time configuration (`@nki.jit(specialization_config=...)`)."""

    allow_nested_config_override: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow_nested_config_override", _as_bool(
            "SpecializationConfig.allow_nested_config_override",
            self.allow_nested_config_override))


__all__ = ["AddressRotation", "Allocation", "AllocationMode", "CompileConfig", "OptLevel",
           "SchedulingHeuristic", "SpecializationConfig"]
