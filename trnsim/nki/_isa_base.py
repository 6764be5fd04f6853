"""Shared base of the nki.isa wrappers: enums and `_issue`, which records one instruction."""

from __future__ import annotations

import difflib
import enum
import functools
import inspect
import re
from typing import Any

import numpy as np

from trnsim import semantics as _sem
from trnsim.errors import ConstraintError, KernelError
from trnsim.nki.context import _CURRENT, current, maybe_current
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


# (an enum member's .name is a Python-level property: looked up once per member)
_ENGINE_NAMES = {m: None if m is engine.unknown else m.name for m in engine}


def _engine_name(e: Any) -> str | None:
    if e is None:
        return None
    if type(e) is engine:
        return _ENGINE_NAMES[e]
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
    ctx = _CURRENT.get()
    if ctx is None:
        ctx = current(f"nisa.{opcode}")  # raises: outside a kernel
    try:
        spec, op_names = _opcode_info(opcode)
        operands, attrs = {}, {}
        for k, v in kwargs.items():
            if k in op_names:
                operands[k] = v
            else:
                attrs[k] = v
        chosen = _engine_name(eng)
        unknown = False
        if chosen is None and spec is not None:
            chosen = _sem.default_engine(opcode, ctx.chip, operands, attrs)
            unknown = chosen is None
            chosen = chosen or spec.engines[0]
        instr = ctx.core.issue(opcode, chosen or "vector", operands, attrs, loc=loc,
                               name=name or "", loops=tuple(ctx.loops))
        instr.engine_unknown = unknown
    except KernelError as e:
        raise e.with_loc(loc) from None
    programs = ctx.extra.get("lnc")
    if programs is not None:  # the other core's program runs its share (trnsim.nki.lnc)
        programs.tick(ctx.program_id[0] if ctx.program_id else 0)
    return NkiInstruction(instr)


@functools.cache
def _opcode_info(opcode: str) -> tuple[Any, Any]:
    """(InstructionSpec or None, its operand names) of an opcode (the specs are immutable)."""
    spec = instruction_specs().get(opcode)
    return spec, (spec.operands if spec is not None else {})


def get_nc_version() -> nc_version:
    return nc_version(current("nisa.get_nc_version").chip.nc_version)


# ---------------------------------------------------------------- public wrappers
# GA takes enum members for these parameters and rejects raw integers (nki-api.md §2.1).
_ENUM_PARAMS: dict[str, type[enum.Enum]] = {
    "engine": engine,
    "reduce_cmd": reduce_cmd,
    "dge_mode": dge_mode,
    "oob_mode": oob_mode,
    "dma_engine": dma_engine,
    "perf_mode": matmul_perf_mode,
}
_ENUM_WHAT = {
    engine: "an engine",
    reduce_cmd: "a reduce command",
    dge_mode: "a DGE mode",
    oob_mode: "an out-of-bounds mode",
    dma_engine: "a DMA engine",
    matmul_perf_mode: "a matmul perf mode",
}
# Enums whose GA integer values nki-api.md §7 lists (matmul_perf_mode's are not given).
_NUMBERED = (engine, reduce_cmd, dge_mode, oob_mode, dma_engine)
# Beta-1 keywords that GA instructions dropped, with what to do instead.
_B1_KEYWORDS = {
    "mask": "mask= is Beta-1 (neuronxcc.nki); GA instructions take no mask: slice the "
    "operands to the region instead",
    "dtype": "GA instructions write into dst=, whose dtype is the output dtype",
}


def _enum_params(fn: Any) -> tuple[list[tuple[int, str, type]], list[tuple[str, type]]]:
    """(positional index, name, enum class) and (name, enum class) of fn's enum parameters."""
    positional, keyword = [], []
    for i, p in enumerate(inspect.signature(fn).parameters.values()):
        cls = type(p.default) if type(p.default) in _ENUM_WHAT else _ENUM_PARAMS.get(p.name)
        if cls is None:
            continue
        keyword.append((p.name, cls))
        if p.kind is p.POSITIONAL_OR_KEYWORD:
            positional.append((i, p.name, cls))
    return positional, keyword


def _check_enum(instr: str, pname: str, cls: type[enum.Enum], v: Any) -> Any:
    """The value to pass for an enum parameter. In a GA kernel a raw integer equal to a
    member's value is that member: the documented "raw ints rejected" rule is about the kernel
    signature (nki-api.md §2.1), and AWS's nki-library passes `dge_mode=3` to nisa.dma_copy.
    Under Beta 1 (other integer values, §7 dma_copy) and for integers no member has, an error.
    """
    if isinstance(v, enum.Enum) or not isinstance(v, (int, np.integer)) or isinstance(v, bool):
        return v
    members = [m for m in cls if m.value == v]
    ctx = maybe_current()
    if members and cls in _NUMBERED and (ctx is None or ctx.generation == "ga"):
        return members[0]
    prefix = f"nisa.{cls.__name__}"
    if members:
        raise ConstraintError(
            f"nisa.{instr}: {pname}={v!r}: pass {prefix}.{members[0].name}, not the raw "
            f"integer {v} (Beta 1 and GA number {prefix} differently)"
        )
    raise ConstraintError(
        f"nisa.{instr}: {pname}={v!r} is not {_ENUM_WHAT[cls]}; pass a {prefix} member "
        f"({', '.join(m.name for m in cls)}), not a raw integer"
    )


def _show_default(v: Any) -> str:
    if isinstance(v, enum.Enum):
        return f"nisa.{type(v).__name__}.{v.name}"
    return repr(v)


def signature_text(fn: Any, api: str = "nisa") -> str:
    """nisa.<name>(dst, data, op0, operand0, reverse0=False, ...) for messages."""
    parts = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        elif p.default is p.empty:
            parts.append(p.name)
        else:
            parts.append(f"{p.name}={_show_default(p.default)}")
    return f"{api}.{fn.__name__}({', '.join(parts)})"


class CallSignatureError(ConstraintError, TypeError):
    """A wrong nki.isa call signature: a ConstraintError at the user's line, and still the
    TypeError that Python raises for a bad call (code catching TypeError keeps working)."""


def binding_error(fn: Any, e: TypeError, api: str = "nisa") -> ConstraintError | None:
    """A TypeError raised by binding a call's arguments (not from inside fn: the exception's
    traceback, caught in the caller's frame, has no deeper frame) as a message naming the
    function, the bad or missing argument and the signature; None for any other TypeError."""
    tb = e.__traceback__
    if tb is None or tb.tb_next is not None:
        return None
    text = str(e)
    head = f"{fn.__name__}() "
    text = text[len(head):] if text.startswith(head) else text
    hint = ""
    bad = re.search(r"unexpected keyword argument '(\w+)'", text)
    if bad:
        kw = bad.group(1)
        names = list(inspect.signature(fn).parameters)
        close = difflib.get_close_matches(kw, names, n=1)
        hint = _B1_KEYWORDS.get(kw, f"did you mean '{close[0]}'?" if close else "")
    msg = f"{api}.{fn.__name__}: {text}; signature: {signature_text(fn, api)}"
    return CallSignatureError(msg + (f"; {hint}" if hint else ""), capture_location())


def public_instruction(fn: Any) -> Any:
    """Wrap a public nki.isa function: raw integers for enum parameters become their members
    (GA) or ConstraintErrors (_check_enum), wrong call signatures ConstraintErrors at the
    user's line; KernelErrors get that line too.

    Cheap on the success path: enum parameters are found once here, and the signature is
    only consulted when binding the arguments has already failed.
    """
    positional, keyword = _enum_params(fn)
    instr = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            if positional and len(args) > positional[0][0]:
                args = list(args)
                for i, pname, cls in positional:
                    if i < len(args):
                        args[i] = _check_enum(instr, pname, cls, args[i])
            for pname, cls in keyword:
                if pname in kwargs:
                    kwargs[pname] = _check_enum(instr, pname, cls, kwargs[pname])
            return fn(*args, **kwargs)
        except TypeError as e:
            err = binding_error(fn, e)
            if err is None:  # raised inside fn, not by the call
                raise
            raise err from e
        except KernelError as e:
            raise e.with_loc(capture_location()) from None

    return wrapper


def language_function(fn: Any) -> Any:
    """Wrap a public nki.language function: KernelErrors (also from the ISA calls inside) get
    the user's line, and a wrong call signature names the argument and the signature."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KernelError as e:
            raise e.with_loc(capture_location()) from None
        except TypeError as e:
            err = binding_error(fn, e, "nl")
            if err is None:  # raised inside fn, not by the call
                raise
            raise err from e

    wrapper.nki_name = fn.__name__  # type: ignore[attr-defined]
    return wrapper
