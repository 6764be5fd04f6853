"""Result dtypes of arithmetic: two device dtypes (the Beta-1 table, nki-api.md §5A.3), or a
tile and a Python or numpy scalar. Knows dtypes only.
"""

from __future__ import annotations

import numpy as np

from trnsim.dtypes import (
    _BY_STORAGE,
    ALL,
    DType,
    bfloat16,
    float32,
    int16,
    int32,
    resolve,
    uint8,
)

_FP8 = ("float8_e4m3", "float8_e4m3fn", "float8_e5m2")


def promote(a: object, b: object) -> DType:
    """Result dtype of a binary op on a and b (Beta-1 table, nki-api.md §5A.3)."""
    x, y = resolve(a), resolve(b)
    if x.is_packed or y.is_packed:
        raise TypeError(f"promote: packed types take part in no arithmetic (got {x}, {y})")
    if x == y:
        return x
    if x.is_float and y.is_float:
        return _promote_float({x.name, y.name})
    if x.is_float or y.is_float:
        return x if x.is_float else y  # (float, int) -> the float type
    if x.kind == "bool" or y.kind == "bool":
        return y if x.kind == "bool" else x
    if x.kind == y.kind:
        return x if x.itemsize > y.itemsize else y
    s, u = (x, y) if x.kind == "int" else (y, x)  # signed, unsigned
    if s.itemsize > u.itemsize:
        return s
    # widened to fit both ranges: (int8, uint8) -> int16, (int32, uint32) -> float32
    return {1: int16, 2: int32}.get(u.itemsize, float32)


def _promote_float(pair: set[str]) -> DType:
    # containment order: each listed type holds every value of the later ones
    for wide in ("float32", "tfloat32"):
        if wide in pair:
            return ALL[wide]
    if pair == {"float16", "bfloat16"} or pair == {"float16", "float8_e8m0fnu"}:
        return float32  # fp16 lacks bf16's/e8m0's range, bf16 lacks fp16's precision
    for wide in ("bfloat16", "float16"):
        if wide in pair:
            return ALL[wide]
    fp8 = pair & set(_FP8)
    if "float4_e2m1fn" in pair and len(fp8) == 1:
        return ALL[fp8.pop()]  # every fp8 format holds every fp4 value
    return bfloat16  # two different 8-bit formats, e.g. (fp8_e4m3, fp8_e5m2)


def promote_scalar(dtype: object, value: object) -> DType:
    """Result dtype of `tile <op> value`. Python scalars are weakly typed and take the
    widest device type of their kind (bool -> uint8, int -> int32, float -> float32);
    numpy scalars of a device dtype keep their type."""
    d = resolve(dtype)
    if isinstance(value, np.generic):
        strong = _BY_STORAGE.get(value.dtype)
        if strong is not None:
            return promote(d, strong)
    if isinstance(value, (bool, np.bool_)):
        return promote(d, uint8)
    if isinstance(value, (int, np.integer)):
        return promote(d, int32)
    if isinstance(value, (float, np.floating)):
        return promote(d, float32)
    raise TypeError(f"promote_scalar: {value!r} is not a real scalar")
