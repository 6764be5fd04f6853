"""neuronxcc.nki.language (nl, NKI Beta 1): dtypes, buffers, indexing (arange, mgrid, ds,
par_dim), loops, SPMD identity, tensor creation and the value-returning library.

Every function returns a new tile (or writes into the tile it is assigned to, see _emit) and
takes `dtype=` and `mask=`; meanings live in trnsim.semantics, shared with the current API.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from trnsim import dtypes as _dt
from trnsim.compat.neuronxcc.nki import _operators  # noqa: F401 - installs tile operators
from trnsim.compat.neuronxcc.nki._arange import arange, mgrid
from trnsim.compat.neuronxcc.nki._buffers import (
    hbm,
    par_dim,
    private_hbm,
    psum,
    sbuf,
    shared_hbm,
)
from trnsim.compat.neuronxcc.nki._collective import all_reduce
from trnsim.compat.neuronxcc.nki._create import (
    empty_like,
    full,
    ndarray,
    ones,
    rand,
    random_seed,
    shared_constant,
    shared_identity_matrix,
    zeros,
    zeros_like,
)
from trnsim.compat.neuronxcc.nki._loops import affine_range, sequential_range, static_range
from trnsim.compat.neuronxcc.nki._nl_data import (
    atomic_rmw,
    broadcast_to,
    device_print,
    dropout,
    expand_dims,
    gather_flattened,
    load,
    load_transpose2d,
    matmul,
    store,
    transpose,
    where,
)
from trnsim.compat.neuronxcc.nki._nl_math import FUNCTIONS as _MATH
from trnsim.compat.neuronxcc.nki._nl_reduce import FUNCTIONS as _REDUCE
from trnsim.compat.neuronxcc.nki._nl_reduce import loop_reduce, mean, rms_norm, softmax, var
from trnsim.compat.neuronxcc.nki._spmd import (
    nc,
    num_programs,
    program_id,
    program_ndim,
    spmd_dim,
)
from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.nki.language import tile_size
from trnsim.nki.views import DynSlice

# ---------------------------------------------------------------- dtypes
float32 = _dt.float32
float32r = _dt.float32r  # B1's fast-matmul fp32 (simulated as float32)
tfloat32 = _dt.tfloat32
bfloat16 = _dt.bfloat16
float16 = _dt.float16
float8_e4m3 = _dt.float8_e4m3  # legacy Neuron FP8: IEEE-style, inf = S.1111.000, max 240
float8_e5m2 = _dt.float8_e5m2
int8, int16, int32 = _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
bool_ = _dt.bool_


class _Limits:
    """nl.fp32 / nl.bfp16: the lowest finite-or-documented value as `.min`."""

    def __init__(self, name: str, min_value: float):
        self.name = name
        self.min = min_value

    def __repr__(self) -> str:
        return f"nl.{self.name}(min={self.min})"


fp32 = _Limits("fp32", float(np.uint32(0xFF7FFFFF).view(np.float32)))  # -3.4028235e38
bfp16 = _Limits("bfp16", float(np.uint16(0xFF80).view(ml_dtypes.bfloat16)))  # bit pattern 0xff80


def finfo(dtype: Any) -> _dt.FInfo:
    """Machine limits of a float dtype (max, min, eps, tiny, bits, ...)."""
    return _dt.finfo(dtype)


def static_cast(input_data: Any, dtype: Any) -> Any:
    """Cast a host scalar or array to dtype with the hardware's rounding (host-side helper)."""
    out = _dt.cast(np.asarray(input_data), dtype)
    return out.item() if np.ndim(out) == 0 else out


def ds(start: int, size: int) -> DynSlice:
    """Dynamic slice: `size` elements from `start` (start may depend on loop variables)."""
    return DynSlice(start, size)


# ---------------------------------------------------------------- value-returning library
globals().update(_MATH)
globals().update(_REDUCE)

__all__ = [
    "affine_range",
    "all_reduce",
    "arange",
    "atomic_rmw",
    "bfloat16",
    "bfp16",
    "bool_",
    "broadcast_to",
    "device_print",
    "dropout",
    "ds",
    "empty_like",
    "expand_dims",
    "finfo",
    "float8_e4m3",
    "float8_e5m2",
    "float16",
    "float32",
    "float32r",
    "fp32",
    "full",
    "gather_flattened",
    "hbm",
    "int8",
    "int16",
    "int32",
    "load",
    "load_transpose2d",
    "loop_reduce",
    "matmul",
    "mean",
    "mgrid",
    "nc",
    "ndarray",
    "num_programs",
    "ones",
    "par_dim",
    "private_hbm",
    "program_id",
    "program_ndim",
    "psum",
    "rand",
    "random_seed",
    "rms_norm",
    "sbuf",
    "sequential_range",
    "shared_constant",
    "shared_hbm",
    "shared_identity_matrix",
    "softmax",
    "spmd_dim",
    "static_cast",
    "static_range",
    "store",
    "tensor",
    "tfloat32",
    "tile_size",
    "transpose",
    "uint8",
    "uint16",
    "uint32",
    "var",
    "where",
    "zeros",
    "zeros_like",
]
__all__ += sorted({*_MATH, *_REDUCE} - set(__all__))
