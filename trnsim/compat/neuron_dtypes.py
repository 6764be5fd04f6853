"""trnsim's `neuron_dtypes`: the host-side dtype helpers that NKI test code imports from AWS's
`neuron_dtypes` package (nki-library's tests and goldens), built on ml_dtypes and
trnsim.dtypes. Served as `neuron_dtypes` only where no real installation exists.

What it holds (the names nki-library uses; AWS's package has more):
* element dtypes as numpy scalar types (`bfloat16`, `float8_e4m3`, ... from ml_dtypes, ints
  from numpy), so `arr.astype(neuron_dtypes.bfloat16)` works;
* the packed MX dtypes `float8_e4m3fn_x4`, `float8_e5m2_x4`, `float4_e2m1fn_x4` as numpy
  dtypes of their words (uint32 / uint16) tagged with the NKI name (see trnsim.dtypes);
* `static_cast(values, dtype)`: the device's conversion (trnsim.dtypes.cast: through fp32,
  round to nearest even, ints saturate). Into a packed type it packs groups of 4 along the
  last axis ([..., 4n] -> [..., n]); from a packed array it unpacks ([..., n] -> [..., 4n]);
* `sizeinbytes(dtype)` (bytes per element; a packed word counts once), `finfo(dtype)`
  (ml_dtypes.finfo, whose `.dtype` is a numpy dtype) and `is_float_type(dtype)`.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from trnsim import dtypes as _dt

bfloat16 = ml_dtypes.bfloat16
float16 = np.float16
float32 = np.float32
float8_e4m3 = ml_dtypes.float8_e4m3
float8_e4m3fn = ml_dtypes.float8_e4m3fn
float8_e5m2 = ml_dtypes.float8_e5m2
float8_e8m0fnu = ml_dtypes.float8_e8m0fnu
float4_e2m1fn = ml_dtypes.float4_e2m1fn
int8, int16, int32 = np.int8, np.int16, np.int32
uint8, uint16, uint32 = np.uint8, np.uint16, np.uint32
float8_e4m3fn_x4 = _dt.float8_e4m3fn_x4.storage
float8_e5m2_x4 = _dt.float8_e5m2_x4.storage
float4_e2m1fn_x4 = _dt.float4_e2m1fn_x4.storage


def _device_dtype(dtype: Any) -> _dt.DType | None:
    """The trnsim DType of `dtype`, or None for a host-only type (float64, int64, ...)."""
    try:
        return _dt.resolve(dtype)
    except TypeError:
        return None


def static_cast(values: Any, dtype: Any) -> np.ndarray:
    """`values` converted to `dtype` as the device converts (see the module docstring)."""
    a = np.asarray(values)
    src = _device_dtype(a.dtype)
    if src is not None and src.is_packed:
        a = _dt.unpack_x4(a, src)
    dst = _device_dtype(dtype)
    if dst is None:
        return a.astype(np.dtype(dtype))
    if dst.is_packed:
        return _dt.pack_x4(a, dst)
    return _dt.cast(a, dst)


def sizeinbytes(dtype: Any) -> int:
    """Bytes one element of `dtype` occupies (4 for float8_*_x4, 2 for float4_e2m1fn_x4)."""
    d = _device_dtype(dtype)
    return d.itemsize if d is not None else np.dtype(dtype).itemsize


def finfo(dtype: Any) -> Any:
    """Machine limits of a float dtype (ml_dtypes.finfo: max, min, eps, tiny, bits, dtype)."""
    d = _device_dtype(dtype)
    if d is not None and not d.is_float:
        raise TypeError(f"finfo: {d} is not a float dtype")
    if d is _dt.tfloat32:  # no ml_dtypes type: trnsim's numbers (same field names)
        return _dt.finfo(d)
    return ml_dtypes.finfo(d.storage if d is not None else np.dtype(dtype))


def is_float_type(dtype: Any) -> bool:
    """True for floating-point dtypes, ml_dtypes' narrow floats included."""
    d = _device_dtype(dtype)
    if d is not None:
        return d.is_float
    try:
        return np.dtype(dtype).kind == "f"
    except TypeError:
        return False


__all__ = ["bfloat16", "finfo", "float4_e2m1fn", "float4_e2m1fn_x4", "float8_e4m3",
           "float8_e4m3fn", "float8_e4m3fn_x4", "float8_e5m2", "float8_e5m2_x4",
           "float8_e8m0fnu", "float16", "float32", "int8", "int16", "int32", "is_float_type",
           "sizeinbytes", "static_cast", "uint8", "uint16", "uint32"]
