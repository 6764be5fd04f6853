"""Semantics of registers, device-loop branches and cross-core instructions. Pure numpy.

A register is any object with an integer `register_index` (trnsim.nki.registers); its value
lives in `core.registers[index]` as a signed 32-bit int. Register instructions carry no tensor
values of their own, so they execute even in timing-only runs (`always_execute`): loop trip
counts and dynamic offsets stay right there (a register loaded from a tensor then reads 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim.errors import ConstraintError
from trnsim.memory import View
from trnsim.semantics import engine_rule, semantics
from trnsim.spec import fail, is_tensor

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
UINT32_MAX = 2**32 - 1
_INT_KINDS = ("int", "uint", "bool")


def wrap32(v: int) -> int:
    """A Python int as the signed 32-bit value a register holds (two's-complement wrap)."""
    return ((int(v) - INT32_MIN) % 2**32) + INT32_MIN


def is_register(x: Any) -> bool:
    return isinstance(getattr(x, "register_index", None), int)


def register_value(core: Any, x: Any) -> int:
    """The current value of a register operand, or an immediate integer."""
    if is_register(x):
        return core.registers.get(x.register_index, 0)
    return wrap32(int(x))


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _always_execute(fn: Any) -> Any:
    fn.always_execute = True
    return fn


# ---------------------------------------------------------------- checks


def _check_dst_register(instr: str, dst: Any) -> None:
    if not is_register(dst):
        fail(
            instr,
            f"dst must be a register (nisa.register_alloc()), got {type(dst).__name__} {dst!r}",
        )
    if getattr(dst, "read_only", False):
        fail(
            instr,
            f"dst {dst.name} is the induction variable of a device loop and is read-only",
            "copy it into another register (nisa.register_move) to modify it",
        )


def _check_source(instr: str, name: str, x: Any) -> None:
    if is_register(x):
        return
    if not _is_int(x):
        fail(instr, f"{name} must be an integer or a register, got {type(x).__name__} {x!r}")
    if not INT32_MIN <= int(x) <= UINT32_MAX:
        fail(
            instr,
            f"{name}={int(x)} does not fit a 32-bit register",
            f"allowed: [{INT32_MIN}, {UINT32_MAX}]",
        )


def _check_one_int_element(instr: str, name: str, t: View) -> None:
    if t.size != 1:
        fail(
            instr,
            f"operand '{name}' has shape {list(t.shape)} ({t.size} elements)",
            "a register moves exactly one element (shape [1] or [1, 1])",
        )
    if t.dtype.kind not in _INT_KINDS:
        fail(
            instr,
            f"operand '{name}' has dtype {t.dtype.name}",
            "registers hold 32-bit integers: use an int8/16/32 or uint8/16/32 tensor",
        )


def check_register_move(*, chip: Any, engine: str, attrs: Any, dst: Any, src: Any) -> None:
    _check_dst_register("register_move", dst)
    _check_source("register_move", "src", src)


def check_register_load(*, chip: Any, engine: str, attrs: Any, dst: Any, src: View) -> None:
    _check_dst_register("register_load", dst)
    _check_one_int_element("register_load", "src", src)


def check_register_store(*, chip: Any, engine: str, attrs: Any, dst: View, src: Any) -> None:
    _check_one_int_element("register_store", "dst", dst)
    if not is_register(src):
        fail("register_store", f"src must be a register, got {type(src).__name__} {src!r}")


def check_register_op(
    *, chip: Any, engine: str, attrs: Any, dst: Any, data0: Any, data1: Any
) -> None:
    _check_dst_register("register_op", dst)
    _check_source("register_op", "data0", data0)
    _check_source("register_op", "data1", data1)


def _require_v3(instr: str, chip: Any) -> None:
    if chip.nc_version < 3:
        fail(
            instr,
            f"{chip.name} has NeuronCore-v{chip.nc_version}",
            "available on NeuronCore-v3 (trn2) or newer",
        )


def check_core_barrier(*, chip: Any, engine: str, attrs: Any) -> None:
    _require_v3("core_barrier", chip)
    cores = attrs.get("cores")
    try:
        ok = tuple(int(c) for c in cores) == (0, 1)
    except TypeError:
        ok = False
    if not ok:
        fail("core_barrier", f"cores={cores!r} is not supported", "only cores=(0, 1)")
    data = attrs.get("data")
    if not is_tensor(data) or data.buffer.space != "hbm":
        where = data.buffer.space if is_tensor(data) else type(data).__name__
        fail(
            "core_barrier",
            f"data must be a tensor in shared HBM, got {where}",
            "pass the nl.shared_hbm tensor both cores write before the barrier",
        )
    if data.buffer.kind == "private_hbm":
        fail(
            "core_barrier",
            f"data '{data.name}' is in private HBM",
            "the barrier's data must be in nl.shared_hbm (visible to both cores)",
        )


# sendrecv over GpSimd's internal DMA: bytes per partition by element size (nki-api.md §7.6).
GPSIMD_DMA_BYTES = {4: 1024, 2: 512, 1: 256}


def check_sendrecv(
    *, chip: Any, engine: str, attrs: Any, src: View, dst: View, peer_src: View
) -> None:
    _require_v3("sendrecv", chip)
    for key in ("send_to_rank", "recv_from_rank"):
        r = attrs.get(key)
        if not _is_int(r) or int(r) not in (0, 1):
            fail("sendrecv", f"{key}={r!r} is not a rank of the LNC2 pair", "allowed: 0 or 1")
    if engine == "gpsimd":
        isz = src.dtype.itemsize
        limit = GPSIMD_DMA_BYTES.get(isz)
        per_partition = src.elems_per_partition() * isz
        if limit is not None and per_partition > limit:
            fail(
                "sendrecv",
                f"dma_engine=gpsimd_dma moves {per_partition} bytes per partition "
                f"of a {8 * isz}-bit dtype",
                f"at most {limit} bytes (use dma_engine.dma)",
            )


# ---------------------------------------------------------------- engines


@engine_rule("register_load")
def _register_load_engine(chip: Any, operands: dict, attrs: dict) -> str | None:
    src = operands.get("src")
    return "dma" if is_tensor(src) and src.buffer.space == "hbm" else "sync"


@engine_rule("register_store")
def _register_store_engine(chip: Any, operands: dict, attrs: dict) -> str | None:
    dst = operands.get("dst")
    return "dma" if is_tensor(dst) and dst.buffer.space == "hbm" else "sync"


# ---------------------------------------------------------------- semantics


@semantics("register_move")
@_always_execute
def register_move(core: Any, *, engine: str, dst: Any, src: Any) -> None:
    core.registers[dst.register_index] = register_value(core, src)


@semantics("register_load")
@_always_execute
def register_load(core: Any, *, engine: str, dst: Any, src: View) -> None:
    v = int(np.asarray(src.read()).reshape(-1)[0])
    core.registers[dst.register_index] = wrap32(v)


@semantics("register_store")
@_always_execute
def register_store(core: Any, *, engine: str, dst: View, src: Any) -> None:
    v = register_value(core, src)
    if dst.dtype.kind == "uint" and dst.dtype.itemsize == 4:
        v &= UINT32_MAX  # the register's 32 bits, read as unsigned
    dst.write(dt.cast(np.full(dst.shape, v, dtype=np.int64), dst.dtype))


_REGISTER_OPS = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "floor_divide": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "left_shift": lambda a, b: a << (b & 31),
    "right_shift": lambda a, b: (a & UINT32_MAX) >> (b & 31),
    "bitwise_and": lambda a, b: a & b,
    "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b,
    "minimum": min,
    "maximum": max,
    "equal": lambda a, b: int(a == b),
    "not_equal": lambda a, b: int(a != b),
    "less": lambda a, b: int(a < b),
    "less_equal": lambda a, b: int(a <= b),
    "greater": lambda a, b: int(a > b),
    "greater_equal": lambda a, b: int(a >= b),
}


@semantics("register_op")
@_always_execute
def register_op(core: Any, *, engine: str, dst: Any, data0: Any, data1: Any, op: str) -> None:
    a, b = register_value(core, data0), register_value(core, data1)
    if op in ("floor_divide", "mod") and b == 0:
        raise ConstraintError(f"register_op: integer {op} by zero (register value {b})")
    core.registers[dst.register_index] = wrap32(_REGISTER_OPS[op](a, b))


@semantics("loop_branch")
@_always_execute
def loop_branch(
    core: Any,
    *,
    engine: str,
    counter: Any = None,
    kind: str = "",
    value: int = 0,
    taken: bool = True,
    **_: Any,
) -> None:
    if counter is not None and taken:
        core.registers[counter.register_index] = wrap32(value)


@semantics("core_barrier")
def core_barrier(core: Any, *, engine: str, **_: Any) -> None:
    """No data effect: the wait itself happens where the programs run (trnsim.nki.lnc)."""


@semantics("sendrecv")
def sendrecv(core: Any, *, engine: str, src: View, dst: View, peer_src: View, **_: Any) -> None:
    """Own dst = the peer's src, bit for bit (same dtype and shape by rule)."""
    dst.write_raw(peer_src.read().reshape(dst.shape))
