"""Layout: a strided window in units of a dtype (offset + sum(strides * index)), the geometry
of every View (trnsim.memory), the table that makes equal layouts one object, and KeyTokens
(one identity-hashed object per plain-data value, for cheap hash keys).

Knows dtypes only; nothing about buffers, memories or instructions.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from trnsim import dtypes as dt


@dataclass(frozen=True)
class Layout:
    """A strided window onto a Buffer in units of `dtype` (NKI: offset + sum(strides*idx)).

    Positions index the buffer's storage flattened to 1-D: on chip, element (p, f) of the
    partition-major storage is at p * F + f with F = elements per partition.

    Derived values (size, span, on-chip span; per buffer placement: bounds, region, operand
    record) are computed once per Layout: it is immutable, the same view is checked and
    recorded several times per instruction, and equal layouts are one object (`interned`).
    """

    dtype: dt.DType
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @functools.cached_property
    def size(self) -> int:
        return int(math.prod(self.shape))

    @functools.cached_property
    def _span(self) -> tuple[int, int]:
        lo = hi = self.offset
        for n, s in zip(self.shape, self.strides, strict=True):
            if n == 0:
                return self.offset, self.offset - 1
            if s >= 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
        return lo, hi

    def span(self) -> tuple[int, int]:
        """Lowest and highest storage position touched (inclusive)."""
        return self._span



def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a dense row-major array of `shape`."""
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


_INTERNED: dict[tuple, Layout] = {}
_INTERN_LIMIT = 1 << 16


def interned(lay: Layout) -> Layout:
    """The one Layout object equal to `lay`: a kernel's loops slice the same windows over and
    over, and what a Layout caches (span, region, bounds, operand record) then carries over.
    The table holds plain data only (no buffers) and starts over when it grows large."""
    key = (lay.dtype.name, lay.offset, lay.shape, lay.strides)
    got = _INTERNED.get(key)
    if got is not None:
        return got
    if len(_INTERNED) >= _INTERN_LIMIT:
        _INTERNED.clear()
    _INTERNED[key] = lay
    return lay


class KeyToken:
    """Stands for one plain-data value inside a hash key: hashed and compared by identity, so a
    key built of tokens costs a few pointer hashes instead of walking nested tuples. `token`
    gives equal values one token (until its table starts over: then a miss, never a wrong hit,
    as a token stands for one value only)."""

    __slots__ = ("value",)

    def __init__(self, value: tuple):
        self.value = value

    def __repr__(self) -> str:
        return f"KeyToken({self.value!r})"


_TOKENS: dict[tuple, KeyToken] = {}


def token(value: tuple) -> KeyToken:
    """The KeyToken of `value` (a hashable tuple of plain data)."""
    got = _TOKENS.get(value)
    if got is None:
        if len(_TOKENS) >= _INTERN_LIMIT:
            _TOKENS.clear()
        got = _TOKENS[value] = KeyToken(value)
    return got
