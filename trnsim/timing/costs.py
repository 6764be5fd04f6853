"""Instruction costs as data: isa/costs.yaml records, resolved per chip, with a cost cache.

One record per opcode: the cost model's name (trnsim/timing/models.py), per-generation params
and the source of the formula. A cost depends only on the instruction record and the chip,
never on time or values.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from trnsim import yamlfile
from trnsim.chipspec import ChipSpec
from trnsim.errors import SpecError
from trnsim.program import Instruction, Operand
from trnsim.timing.models import MODELS, Cost

__all__ = [
    "MODELS",
    "Cost",
    "CostRecord",
    "CostTable",
    "cost_records",
    "instruction_cost",
    "record_for",
]

GENERATIONS = ("v2", "v3", "v4")


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
                    raise SpecError(
                        f"costs.yaml: {self.opcode}.params.{k}: '{v}' is not a chip "
                        f"timing constant (known: {', '.join(sorted(chip.timing))})"
                    )
                v = chip.timing[v]
            out[k] = v
        return out


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
    raw = yamlfile.load(_costs_path().read_text())
    out: dict[str, CostRecord] = {}
    for op, rec in raw.items():
        where = f"costs.yaml: {op}"
        if not isinstance(rec, dict):
            raise SpecError(f"{where}: expected a mapping")
        model = rec.get("model")
        if model not in MODELS and model != "dma":
            raise SpecError(
                f"{where}.model: {model!r} is not a cost model "
                f"(known: {', '.join(sorted([*MODELS, 'dma']))})"
            )
        if not rec.get("source"):
            raise SpecError(f"{where}.source: every cost needs a source")
        params = rec.get("params") or {}
        bad = set(params) - {"all", *GENERATIONS}
        if bad:
            raise SpecError(f"{where}.params: unknown generation keys {sorted(bad)}")
        out[op] = CostRecord(
            op,
            model,
            MappingProxyType(params),
            rec["source"],
            rec.get("kind", "documented"),
            str(rec.get("formula", "")),
        )
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
        return self.cost_and_key(instr)[0]

    def cost_and_key(self, instr: Instruction) -> tuple[Cost, tuple | None]:
        """The cost and the cache key it was filed under (None: not cacheable)."""
        key = _signature(instr)
        got = self._cache.get(key) if key is not None else None
        if got is None:
            rec, params = self.record(instr.opcode)
            got = MODELS[rec.model](instr, params, self.chip)
            if key is not None:
                self._cache[key] = got
        return got, key


def operand_cost_key(o: Operand) -> tuple:
    """The fields of an operand that cost models read (one list for every cost cache)."""
    return (
        o.name,
        o.region.space,
        o.dtype,
        o.elems_per_partition,
        o.inner_stride_bytes,
        o.nbytes,
        o.partitions,
    )


def _signature(ins: Instruction) -> tuple | None:
    """What cost models read, as a hashable key (None: do not cache). Not the operands'
    addresses: no model reads them, so a tile shape at another address hits the cache."""
    ops = tuple([operand_cost_key(o) for o in ins.reads])
    wops = tuple([operand_cost_key(o) for o in ins.writes])
    try:
        attrs = tuple(sorted(ins.attrs.items())) if ins.attrs else ()
        key = (ins.opcode, ins.engine, ops, wops, attrs)
        hash(key)  # the key itself is stored: equal hashes of different keys never share
        return key
    except TypeError:
        return None
