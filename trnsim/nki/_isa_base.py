"""Shared base of the nki.isa wrappers: enums and `_issue`, which records one instruction."""

from __future__ import annotations

import enum
from typing import Any

from trnsim import semantics as _sem
from trnsim.errors import KernelError
from trnsim.nki.context import current
from trnsim.program import capture_location
from trnsim.spec import instruction_specs


class engine(enum.IntEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.IntEnum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(enum.IntEnum):
    error = 0
    skip = 1


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


class matmul_perf_mode(enum.Enum):
    none = "none"
    double_row = "double_row"


class dma_engine(enum.IntEnum):
    dma = 1
    gpsimd_dma = 2


def _engine_name(e: Any) -> str | None:
    if e is None:
        return None
    if isinstance(e, engine):
        return None if e is engine.unknown else e.name
    if isinstance(e, str):
        return None if e == "unknown" else e
    name = getattr(e, "name", None)
    return None if name in (None, "unknown") else name


class NkiInstruction:
    """Handle on an issued instruction (returned by every nki.isa call, NKI 0.6).

    `c.depends_on(a, b)` adds scheduling edges: c waits for a and b to complete, on top of the
    dependencies derived from the memory regions they touch.
    """

    __slots__ = ("_instr",)

    def __init__(self, instr: Any):
        self._instr = instr

    @property
    def index(self) -> int:
        return self._instr.index

    @property
    def name(self) -> str:
        return self._instr.name

    @property
    def opcode(self) -> str:
        return self._instr.opcode

    def depends_on(self, *others: NkiInstruction) -> NkiInstruction:
        extra = []
        for o in others:
            if not isinstance(o, NkiInstruction):
                raise KernelError(f"depends_on: expected instructions returned by nki.isa calls, "
                                  f"got {type(o).__name__}", capture_location())
            if o.index >= self.index:
                raise KernelError(f"depends_on: {o.opcode} (#{o.index}) is issued after "
                                  f"{self.opcode} (#{self.index}); an instruction can only wait "
                                  "for earlier ones", capture_location())
            extra.append(o.index)
        self._instr.deps = tuple(sorted({*self._instr.deps, *extra}))
        return self

    def __repr__(self) -> str:
        return f"NkiInstruction(#{self.index} {self.opcode}{' ' + self.name if self.name else ''})"


def _issue(opcode: str, eng: Any = None, *, name: str | None = None,
           **kwargs: Any) -> NkiInstruction:
    """Record and execute one instruction on the current core, errors at the user's line."""
    loc = capture_location()
    ctx = current(f"nisa.{opcode}")
    try:
        spec = instruction_specs().get(opcode)
        op_names = set(spec.operands) if spec is not None else set()
        operands = {k: v for k, v in kwargs.items() if k in op_names}
        attrs = {k: v for k, v in kwargs.items() if k not in op_names}
        chosen = _engine_name(eng)
        if chosen is None and spec is not None:
            chosen = _sem.default_engine(opcode, ctx.chip, operands, attrs) or spec.engines[0]
        instr = ctx.core.issue(opcode, chosen or "vector", operands, attrs, loc=loc,
                               name=name or "", loops=tuple(ctx.loops))
    except KernelError as e:
        raise e.with_loc(loc) from None
    return NkiInstruction(instr)


def get_nc_version() -> nc_version:
    return nc_version(current("nisa.get_nc_version").chip.nc_version)


