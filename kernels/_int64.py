"""int64 tensors in device kernels: the int32 pair views of device-kernels.md.

Layer: kernel library (trnsim.kernels); NKI API only.

The backend hands an int64 tensor of shape S and strides T to a kernel as an int32 view of shape
S + (2,) and strides 2*T + (1,): word 0 of each element is the low 32 bits, word 1 the high 32
bits (little-endian). Kernels compute on the low word, a plain int32 (the backend checks on the
host that values lie in int32 range), and write a result as both words, the high word being the
sign extension of the low one (0 or -1). In SBUF a pair tile is [P, *free, 2]: one DMA moves the
words of a tile together (long contiguous runs when the tensor is contiguous), and the engines
address the low or high words through stride-2 views.
"""

from __future__ import annotations

from typing import Any

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import fail

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def is_pair(t: Any) -> bool:
    """Whether HBM tensor `t` looks like an int64 pair view (int32, trailing dim 2, stride 1)."""
    return t.dtype.name == "int32" and len(t.shape) >= 2 and t.shape[-1] == 2 and t.strides[-1] == 1


def element_shape(t: Any) -> tuple[int, ...]:
    """The int64 tensor's shape S of pair view `t` (S + (2,))."""
    return tuple(t.shape[:-1])


def low_word(pairs: Any) -> Any:
    """The low words of an SBUF pair tile [P, *free, 2] as an int32 view [P, *free]."""
    return pairs.select(len(pairs.shape) - 1, 0)


def high_word(pairs: Any) -> Any:
    """The high words of an SBUF pair tile [P, *free, 2] as an int32 view [P, *free]."""
    return pairs.select(len(pairs.shape) - 1, 1)


def pair_tile(shape: tuple[int, ...], name: str = "i64") -> Any:
    """A fresh SBUF pair tile [*shape, 2] of int32 words."""
    return nl.ndarray((*shape, 2), dtype=nl.int32, buffer=nl.sbuf, name=name)


def sign_extend(pairs: Any) -> None:
    """Set the high words of a pair tile to the sign extension of its low words: -1 where the
    low word is negative, else 0 (VectorE; comparisons of int32 values are exact in fp32 as to
    their sign, and 0 / -1 are exact)."""
    nisa.tensor_scalar(
        dst=high_word(pairs),
        data=low_word(pairs),
        op0=nl.less,
        operand0=0.0,
        op1=nl.multiply,
        operand1=-1.0,
    )


def store_int32_as_pairs(values: Any, pairs: Any, engine: Any = None) -> None:
    """pairs = int64(values): copy an int32 tile (bit-exact) into the low words of `pairs` and
    sign-extend it into the high words."""
    if engine is None:
        nisa.tensor_copy(dst=low_word(pairs), src=values)
    else:
        nisa.tensor_copy(dst=low_word(pairs), src=values, engine=engine)
    sign_extend(pairs)


def split_int64(value: int, what: str) -> tuple[int, int]:
    """(low, high) int32 words of a Python int in int64 range (two's complement)."""
    v = int(value)
    if not -(2**63) <= v < 2**63:
        fail(f"{what}: {v} is outside the int64 range")
    bits = v & (2**64 - 1)
    lo, hi = bits & 0xFFFFFFFF, bits >> 32
    return (lo - 2**32 if lo >= 2**31 else lo), (hi - 2**32 if hi >= 2**31 else hi)
