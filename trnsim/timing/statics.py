"""What an instruction's timing needs that does not depend on time, per instruction signature.

A kernel's loops record the same few kinds of instruction (same opcode, operand shapes, dtypes,
attributes) again and again, so the scheduler's preparation asks here once per signature: the
engine queue and issue kind, the cost in ticks (with a matmul's PE-array cells), the Vector/
Scalar/GpSimd port keys (also by operand address: PSUM banks), and a DMA's plan and trigger
cost. Signatures hold what the cost models and plan_dma read, never more: a key that says too
much only misses the cache, one that says too little would time the wrong instruction.
"""

from __future__ import annotations

import math

from trnsim.chipspec import ChipSpec
from trnsim.layout import token
from trnsim.program import Instruction
from trnsim.timing.costs import CostTable, operand_cost_key
from trnsim.timing.dma import DmaPlan, plan_dma
from trnsim.timing.pe_array import cells_of
from trnsim.timing.ports import Ports

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync")
# How a queue issues an instruction; TABLE_LOAD: compute after an activation-table load.
COMPUTE, TENSOR, DMA, BARRIER, TABLE_LOAD = range(5)
_PORT_ENGINES = ("vector", "scalar", "gpsimd")  # the engines Ports.keys_of books
_MISSING = object()
# The attrs plan_dma and the trigger cost read.
_DMA_ATTRS = ("dge_mode", "queue_engine", "engine", "spill_reload", "cc_extra_latency_ns",
              "cc_rate_gbps")


class Statics:
    """Per-signature caches of the time-independent parts of instruction timing."""

    def __init__(
        self, chip: ChipSpec, period: dict[str, int], costs: CostTable, ports: Ports
    ) -> None:
        self.chip, self.period, self.costs, self.ports = chip, period, costs, ports
        self._compute: dict[tuple, tuple] = {}  # signature -> what compute() returns
        self._dma: dict[tuple, tuple] = {}

    def compute(self, ins: Instruction) -> tuple:
        """(engine, kind, cost, (II, latency) in ticks, port keys) of a non-DMA instruction.

        Cached under what the cost models read (not addresses: a tile shape at another address
        hits), and the port keys under that plus the operands' addresses (PSUM banks)."""
        sig = _compute_signature(ins)
        try:
            got = self._compute.get(sig)
        except TypeError:  # an attr that is not plain data: nothing is cached
            sig = got = None
        if got is None:
            eng, kind, cost, ticks = self._compute_uncached(ins)
            # Port keys depend on the engine, the operands' spaces (in the signature) and, on
            # NC-v3+, the PSUM operands' banks: with no PSUM operand they are the signature's;
            # else cached by the PSUM operands' addresses, for this signature only.
            if eng not in _PORT_ENGINES:
                ports = None
            elif self.chip.nc_version <= 2 or not any(
                o.region.space == "psum" for o in ins.reads + ins.writes
            ):
                ports = self.ports.keys_of(ins, eng, cost)
            else:
                ports = {}
            got = (eng, kind, cost, ticks, ports)
            if sig is not None:
                self._compute[sig] = got
        ports = got[4]
        if type(ports) is not dict:
            return got
        eng, kind, cost, ticks, _ = got
        starts = tuple([o.region.byte_start for o in ins.reads + ins.writes])
        keys = ports.get(starts, _MISSING)
        if keys is _MISSING:
            keys = ports[starts] = self.ports.keys_of(ins, eng, cost)
        return eng, kind, cost, ticks, keys

    def _compute_uncached(self, ins: Instruction) -> tuple:
        # Control instructions recorded on "dma" (register_load/store) run in the Sync engine's
        # sequencer.
        eng = ins.engine if ins.engine in ENGINES else "sync" if ins.engine == "dma" else "vector"
        cost = self.costs.cost(ins)
        kind = COMPUTE
        if eng == "tensor":
            kind = TENSOR
        elif ins.opcode == "core_barrier":
            kind = BARRIER
        p = self.period[eng]
        if kind == TENSOR:  # MultiplyMoving's II and latency, LoadStationary's, PE cells
            a = ins.attrs
            cells = cells_of(a.get("tile_position") or (), a.get("tile_size") or ())
            ticks = (cost.ii * p, cost.latency * p, cost.ls_ii * p, cost.ls_latency * p, cells)
            return eng, kind, cost, ticks
        return eng, kind, cost, (cost.ii * p, cost.latency * p)

    def dma(self, ins: Instruction) -> tuple[DmaPlan, tuple[int, int], tuple[DmaPlan, int, int]]:
        """A DMA's plan, its trigger's (issue ticks, 0) and (plan, -1, -1) (its Timeline entry
        before it issues; the tuples are shared), cached by what planning reads."""
        sig = _dma_signature(ins)
        try:
            got = self._dma.get(sig)
        except TypeError:  # (as in compute)
            sig = got = None
        if got is None:
            params = self.costs.record(ins.opcode)[1]
            plan = plan_dma(ins, self.chip, bool(params.get("transpose")))
            timing = self.chip.timing
            if plan.issuer == "cc":  # the collective cores trigger it, no engine queue
                cycles = 0
            elif plan.dge == "swdge":
                cycles = (
                    timing["gpsimd_start_cycles"]
                    + plan.descriptors * self.chip.dma.swdge_descriptor_cycles
                )
            else:
                cycles = params.get("trigger_cycles", timing["min_ii_cycles"])
            got = (plan, (math.ceil(cycles) * self.period.get(plan.issuer, 1), 0), (plan, -1, -1))
            if sig is not None:
                self._dma[sig] = got
        return got


def _compute_signature(ins: Instruction) -> tuple:
    """What the cost models read of a non-DMA instruction, and its core, as one flat tuple
    (unhashable if an attr is: the caller's lookup finds out, hashing only once). Attrs in
    recorded order: at worst an extra cache miss."""
    key = [ins.opcode, ins.engine, ins.core, len(ins.reads)]
    for o in ins.reads + ins.writes:
        # Kept on the record (records are immutable and shared) as a KeyToken: one
        # identity-hashed object per value, so the signature hashes a pointer per operand.
        k = o.__dict__.get("_cost_key")
        if k is None:
            k = o.__dict__["_cost_key"] = token(operand_cost_key(o))
        key.append(k)
    key += ins.attrs.items()
    return tuple(key)


def _dma_signature(ins: Instruction) -> tuple:
    """What plan_dma reads, as one flat tuple (unhashable if an attr is, as _compute_signature).
    Attrs are taken raw (an enum member, not its name): at worst an extra cache miss, never a
    wrong hit."""
    key = [ins.opcode, ins.engine, len(ins.reads)]
    key += map(ins.attrs.get, _DMA_ATTRS)
    for o in ins.reads + ins.writes:
        k = o.__dict__.get("_dma_key")  # (a KeyToken, as _compute_signature's cost keys)
        if k is None:
            k = o.__dict__["_dma_key"] = token((
                o.name,
                o.region.space,
                o.nbytes,
                o.partitions,
                o.contiguous_bytes,
                o.shape,  # plan_dma reads the dst's shape (its rank and first dim)
            ))
        key.append(k)
    return tuple(key)
