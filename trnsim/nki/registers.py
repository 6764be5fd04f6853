"""Virtual registers: nisa.VirtualRegister (0.3-0.6) and nisa.NkiScalar (0.7).

A register is a handle (core, index); its 32-bit signed value lives in the core's
`registers` dict and changes only through recorded instructions (register_move/load/op,
loop_branch), so the program record shows every register write. NkiScalar adds 0.7's traced
arithmetic: `i * 4 + 1` issues register_op instructions and yields a new NkiScalar.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim.nki._isa_base import _issue
from trnsim.nki.context import current


class VirtualRegister:
    """A virtual 32-bit register of the current NeuronCore (nisa.register_alloc())."""

    __slots__ = ("core", "read_only", "register_index")

    def __init__(self, core: Any, index: int, read_only: bool = False):
        self.core = core
        self.register_index = index
        self.read_only = read_only

    @property
    def name(self) -> str:
        return f"r{self.register_index}"

    @property
    def value(self) -> int:
        """The register's current value (a simulator convenience; kernels cannot read it)."""
        return self.core.registers.get(self.register_index, 0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}={self.value})"

    def __bool__(self) -> bool:
        """`while reg:` (B2/GA <= 0.6): a device loop test, true while the value is non-zero."""
        taken = self.value != 0
        _issue("loop_branch", None, kind="while_register", value=0, taken=taken, register=self.name)
        return taken


def new_register(cls: type[VirtualRegister] | None = None, read_only: bool = False) -> Any:
    """A fresh register of the current core, value 0 (no instruction: allocation is virtual)."""
    core = current("nisa.register_alloc").core
    index = core.state.get("next_register", 0)
    core.state["next_register"] = index + 1
    core.registers[index] = 0
    return (cls or VirtualRegister)(core, index, read_only)


def _operand(x: Any) -> Any:
    if isinstance(x, VirtualRegister):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    return NotImplemented


class NkiScalar(VirtualRegister):
    """A runtime scalar (0.7: nisa.scalar_load); arithmetic with ints/scalars is traced into
    register_op instructions, usable as scalar_offset and loop bounds."""

    __slots__ = ()

    def _binary(self, op: str, other: Any, reflected: bool = False) -> Any:
        o = _operand(other)
        if o is NotImplemented:
            return NotImplemented
        a, b = (o, self) if reflected else (self, o)
        out = new_register(NkiScalar)
        _issue("register_op", None, dst=out, data0=a, data1=b, op=op)
        return out

    def __add__(self, o: Any) -> Any:
        return self._binary("add", o)

    def __radd__(self, o: Any) -> Any:
        return self._binary("add", o, True)

    def __sub__(self, o: Any) -> Any:
        return self._binary("subtract", o)

    def __rsub__(self, o: Any) -> Any:
        return self._binary("subtract", o, True)

    def __mul__(self, o: Any) -> Any:
        return self._binary("multiply", o)

    def __rmul__(self, o: Any) -> Any:
        return self._binary("multiply", o, True)

    def __floordiv__(self, o: Any) -> Any:
        return self._binary("floor_divide", o)

    def __rfloordiv__(self, o: Any) -> Any:
        return self._binary("floor_divide", o, True)

    def __mod__(self, o: Any) -> Any:
        return self._binary("mod", o)

    def __rmod__(self, o: Any) -> Any:
        return self._binary("mod", o, True)

    def __lshift__(self, o: Any) -> Any:
        return self._binary("left_shift", o)

    def __rshift__(self, o: Any) -> Any:
        return self._binary("right_shift", o)

    def __and__(self, o: Any) -> Any:
        return self._binary("bitwise_and", o)

    def __rand__(self, o: Any) -> Any:
        return self._binary("bitwise_and", o, True)

    def __or__(self, o: Any) -> Any:
        return self._binary("bitwise_or", o)

    def __ror__(self, o: Any) -> Any:
        return self._binary("bitwise_or", o, True)

    def __xor__(self, o: Any) -> Any:
        return self._binary("bitwise_xor", o)

    def __rxor__(self, o: Any) -> Any:
        return self._binary("bitwise_xor", o, True)

    def __neg__(self) -> Any:
        return self._binary("subtract", 0, True)
