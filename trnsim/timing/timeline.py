"""The scheduler's raw result (Timeline, in ticks), its per-engine queues and its tick clock.
Knows nothing of values."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from trnsim.chipspec import MAX_TICK_MHZ, ChipSpec, tick_clock_mhz
from trnsim.timing.costs import Cost
from trnsim.timing.dma import ChunkRecord, DmaPlan
from trnsim.timing.pe_array import PEArray
from trnsim.timing.throttle import Throttle


def base_clock_mhz(chip: ChipSpec) -> int:
    """The tick frequency: the least common multiple of the engine clocks, in MHz (chip files
    are validated to keep it exact and at most MAX_TICK_MHZ)."""
    return min(tick_clock_mhz(chip.engines.values()), MAX_TICK_MHZ)


@dataclass
class Timeline:
    """Raw schedule in ticks, indexed by instruction (Profile converts to ns).

    start/end: issue and completion (DMA: trigger issue and last byte landed); issue_end: when
    the queue could issue again; wait: ticks stalled on semaphores, blocker: the producer waited
    on last (-1 if none). Tensor instructions also have ls (LoadStationary start, end); an
activation that loads its activation table has table_loads (the load's start, end).
    """

    ticks_per_ns: float
    start: list[int]
    end: list[int]
    issue_end: list[int]
    wait: list[int]
    blocker: list[int]
    deps: list[list[tuple[int, str, str]]]  # (producer, kind, operand): see deps.Dep
    queue: list[tuple[int, str]]
    costs: list[Cost | None]
    ls: dict[int, tuple[int, int]] = field(default_factory=dict)
    table_loads: dict[int, tuple[int, int]] = field(default_factory=dict)  # ScalarE, before i
    dma: dict[int, tuple[DmaPlan, int, int]] = field(default_factory=dict)  # plan, trig end, ready
    chunk_rows: list[tuple] = field(default_factory=list)  # ChunkRecord fields + count
    pending_samples: list[tuple[int, int]] = field(default_factory=list)
    throttle: dict[int, Throttle] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what a compiler rule could not do

    @functools.cached_property
    def chunks(self) -> list[ChunkRecord]:
        """DMA chunks, one per engine, in the order they were scheduled."""
        out = []
        for *r, count in self.chunk_rows:
            if count == 1:
                out.append(ChunkRecord(*r))
            else:
                out.extend(ChunkRecord(r[0], r[1], r[2] + k, *r[3:]) for k in range(count))
        return out


class EngineQueue:
    """One in-order engine queue of one core: its instructions and issue state."""

    __slots__ = ("cum", "engine", "free", "head", "items", "key", "last", "mm_start", "pe")

    def __init__(self, key: tuple[int, str]) -> None:
        self.key = key
        self.engine = key[1]
        self.items: list[int] = []
        self.head = 0
        self.free = 0  # next issue tick (Tensor: LoadStationary side)
        self.last = -1
        self.cum = 0  # latest completion so far on this queue
        self.mm_start = 0  # Tensor: start of the last MultiplyMoving
        self.pe = PEArray() if self.engine == "tensor" else None  # Tensor: per-cell times
