"""Python-level misuse of current-API (GA) tensors: operators, item assignment, truth value,
float()/int(), iteration and numpy functions. Each raises a KernelError at the user's line with
the NKI way to do it, instead of a bare TypeError or a silently wrong answer.

A mixin of NkiTensor (trnsim.nki.tensor). Every guard is an ordinary method, so a subclass
(the Beta-1 front end's tensor) can define its own operators and assignment.
"""

from __future__ import annotations

import warnings
from typing import Any, NoReturn

import numpy as np

from trnsim.errors import KernelError, SimulationWarning
from trnsim.program import capture_location

_B1 = "(operators on tiles are the Beta-1 `neuronxcc.nki` style)"

# dunder -> (symbol, nl function that does it)
_BINARY = {
    "add": ("+", "nl.add"),
    "sub": ("-", "nl.subtract"),
    "mul": ("*", "nl.multiply"),
    "truediv": ("/", "nl.divide"),
    "floordiv": ("//", "nl.divide then nl.floor"),
    "mod": ("%", "nl.mod"),
    "pow": ("**", "nl.power"),
    "matmul": ("@", "nl.matmul or nisa.nc_matmul"),
    "and": ("&", "nl.bitwise_and"),
    "or": ("|", "nl.bitwise_or"),
    "xor": ("^", "nl.bitwise_xor"),
    "lshift": ("<<", "nl.left_shift"),
    "rshift": (">>", "nl.right_shift"),
}
_COMPARE = {
    "lt": ("<", "nl.less"),
    "le": ("<=", "nl.less_equal"),
    "gt": (">", "nl.greater"),
    "ge": (">=", "nl.greater_equal"),
}
_UNARY = {
    "neg": ("-", "nl.negative"),
    "pos": ("+", "nl.copy"),
    "abs": ("abs()", "nl.abs"),
    "invert": ("~", "nl.invert"),
}


def _raise(message: str) -> NoReturn:
    raise KernelError(message, capture_location())


def _operator(symbol: str, nl_fn: str) -> Any:
    def guard(self: Any, *_: Any) -> NoReturn:
        _raise(
            f"operator {symbol} on {self.buffer.label}: current-API tensors have no Python "
            f"operators; call {nl_fn} or issue "
            f"the instruction yourself (nisa.tensor_tensor / nisa.tensor_scalar / "
            f"nisa.activation) with a destination tile {_B1}"
        )

    return guard


class PythonGuards:
    """NkiTensor's answers to Python operations a kernel cannot perform on device data."""

    __slots__ = ()
    buffer: Any
    size: int

    def __setitem__(self, key: Any, value: Any) -> None:
        _raise(
            f"item assignment to {self.buffer.label}: current-API tensors are written by "
            "instructions: nisa.tensor_copy(dst=t[...], src=...), nisa.dma_copy(dst=..., "
            "src=...) or nisa.memset(dst=..., value=...) (item assignment is the Beta-1 "
            "`neuronxcc.nki` style)"
        )

    def __bool__(self) -> bool:
        if self.buffer.space == "hbm":
            # An HBM tensor is a handle while the kernel is traced (its values are not on the
            # chip): `if t:` tests that the argument was given, as nki-library writes
            # `if params.expert_index:` for an optional [T, K] tensor.
            return True
        if self.size != 1 and getattr(self.buffer, "computed_by", None) is None:
            # A multi-element tile has no single value to test: like an HBM tensor it is a
            # handle, true, as nki-library's production kernels take it (mlp_tkg's
            # `if params.expert_params.expert_index:` gets an SBUF tile from moe_block_tkg).
            # Beta 1 refused this (err_ambiguous_tensor_truth_value, trnsim.compat); a kernel
            # meaning the values is told once per line.
            loc = capture_location()
            warnings.warn_explicit(
                f"`if`/`bool()` on {self.buffer.label}, a multi-element tile: taken as true "
                "(the tensor exists), not from its values; control flow cannot depend on tile "
                "values (err_dynamic_control_flow_not_supported): compare into a tile with "
                "nl.equal / nisa.tensor_scalar, or test `is not None`",
                SimulationWarning, loc.filename if loc else "<kernel>", loc.lineno if loc else 0)
            return True
        if self.size != 1:  # the result of an nl operation: a truth test asks for its values
            _raise(
                "cannot evaluate the truth value of a multi-element tensor (control flow "
                f"cannot depend on tensor values): {self.buffer.label}; compare with "
                "nl.equal / nisa.tensor_scalar into a tile, or branch on Python values"
            )
        # One element: its current value, as AWS's CPU simulator evaluates `assert nl.equal(a,
        # b)` in doc examples (hardware cannot branch on it; trnsim records no instruction).
        return bool(np.all(self.read_f32() != 0))  # type: ignore[attr-defined]

    def _to_python(self, kind: str) -> NoReturn:
        _raise(
            f"{kind}() of {self.buffer.label}: tensor values live on the device and are not "
            "Python numbers while the kernel is traced; keep the value in a tile (or a "
            "register: nisa.register_load) and use it as an instruction operand"
        )

    def __float__(self) -> float:
        self._to_python("float")

    def __int__(self) -> int:
        self._to_python("int")

    def __index__(self) -> int:
        self._to_python("int")

    def __complex__(self) -> complex:
        self._to_python("complex")

    def __iter__(self) -> NoReturn:
        _raise(
            f"iterating over {self.buffer.label} in Python: a kernel cannot loop over tensor "
            "values; loop over indices (for i in nl.affine_range(n)) and index the tensor "
            "(t[i], t[:, nl.ds(i * 128, 128)])"
        )

    def __contains__(self, item: Any) -> NoReturn:
        self.__iter__()

    # numpy: np.exp(t), np.sum(t), np.asarray(t) on a device tensor
    def _numpy(self, name: str) -> NoReturn:
        from trnsim.nki import lang_ops

        alt = f"nl.{name}" if name in lang_ops.__all__ else "the nl.* / nisa.* instructions"
        _raise(
            f"numpy function np.{name} applied to {self.buffer.label}: numpy cannot run on "
            f"device tensors inside a kernel; use {alt} with a destination tile (or "
            "compute on the host arrays before / after nki.simulate)"
        )

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> NoReturn:
        self._numpy(getattr(ufunc, "__name__", str(ufunc)))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> NoReturn:
        self._numpy(getattr(func, "__name__", str(func)))

    def __array__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._numpy("asarray")


for _name, (_sym, _fn) in _BINARY.items():
    setattr(PythonGuards, f"__{_name}__", _operator(_sym, _fn))
    setattr(PythonGuards, f"__r{_name}__", _operator(_sym, _fn))
for _name, (_sym, _fn) in _COMPARE.items():
    setattr(PythonGuards, f"__{_name}__", _operator(_sym, _fn))
for _name, (_sym, _fn) in _UNARY.items():
    setattr(PythonGuards, f"__{_name}__", _operator(_sym, _fn))
