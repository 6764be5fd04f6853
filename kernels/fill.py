"""Fill device kernels: fill (torch fill_/zeros/ones/full), arange (iota), triangle (tril and
triu), over HBM outputs of any layout; with their float64 references.

Layer: kernel library (trnsim.kernels); NKI API only. The tiling is kernels/_tiles.py's; the
element indices that arange and triangle need come from virtual index operands of the plan, so
each tile's values are one GpSimd iota or affine_select (its offset, channel_multiplier and
pattern are the tile's access pattern of the index).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import jit
from trnsim.nki import language as nl

from . import _int64 as I64
from . import _tiles as T
from ._common import fail
from ._pw_tile import GPSIMD, VECTOR

FLOATS = ("float32", "bfloat16", "float16")
DTYPES = (*FLOATS, "int32", "int16", "int8", "uint8", "bool")
SBUF_SHARE = 0.5


def _out(out: Any, int64: bool, what: str) -> tuple[T.Operand, tuple[int, ...], str]:
    """(operand, element shape, dtype name) of an output; int64 outputs are pair views."""
    if int64:
        shape = I64.element_shape(out)
        return T.pair_operand(out, shape, f"{what}: out"), shape, "int64"
    if out.dtype.name not in DTYPES:
        fail(
            f"{what}: out dtype {out.dtype.name} is not supported (supported: "
            f"{', '.join(DTYPES)}, or int64 as an int32 pair view with int64=True)"
        )
    return T.operand(out, out.shape, f"{what}: out"), tuple(out.shape), out.dtype.name


def _scalar_for(dtype: str, value: Any) -> float | int:
    """A fill value as the memset of a `dtype` tile takes it (PyTorch's conversion)."""
    if dtype == "bool":
        return int(bool(value))
    if dtype in FLOATS:
        return float(value)
    return int(value)  # float -> int truncates towards zero


@jit
def fill(out, value, int64=False):
    """out[...] = value.

    Dimensions:
        out: any shape and strides.

    Args:
        out: HBM tensor (float, integer or bool dtype; an int64 pair view with int64=True).
        value: Python number (converted as PyTorch's fill_: truncated for integer outputs,
            value != 0 for bool; int64 outputs take any value in int64 range).
        int64: out is an int64 pair view.

    Notes:
        One memset per distinct tile shape (a GpSimd memset, two for the words of an int64
        pair), then one DMA per tile from that SBUF tile.
    """
    what = "fill"
    op, shape, dtype = _out(out, int64, what)
    tiles = T.plan(shape, [op], T.free_budget(8, SBUF_SHARE))
    filled: dict[tuple, Any] = {}
    for tile in tiles:
        sb = filled.get(tile.shape)
        if sb is None:
            sb = _memset_tile(tile.shape, dtype, value, out.dtype, what)
            filled[tile.shape] = sb
        T.store(tile, op, 0, sb)


def _memset_tile(shape: tuple, dtype: str, value: Any, out_dtype: Any, what: str) -> Any:
    if dtype == "int64":
        lo, hi = I64.split_int64(int(value), f"{what}: value")
        t = I64.pair_tile(shape, "fill_i64")
        nisa.memset(dst=I64.low_word(t), value=lo, engine=GPSIMD)
        nisa.memset(dst=I64.high_word(t), value=hi, engine=GPSIMD)
        return t
    t = nl.ndarray(shape, dtype=out_dtype, buffer=nl.sbuf, name="fill")
    nisa.memset(dst=t, value=_scalar_for(dtype, value), engine=GPSIMD)
    return t


@jit
def arange(out, start=0, step=1, int64=False):
    """out[i] = start + i * step over the elements of out in row-major order (torch.arange;
    a multi-dim out gets arange(numel).view(out.shape)).

    Args:
        out: HBM tensor of any layout: float, integer, or an int64 pair view (int64=True).
        start, step: Python numbers. Integer outputs need integers, and their values must lie
            in int32 range (int64 outputs too: their high words are the sign extension).

    Notes:
        Integer outputs: one GpSimd iota per tile (int32 math, offset start + step * first
        index). Float outputs: an int32 iota of the indices, then one VectorE tensor_scalar
        ``i * step + start`` in fp32 (exact indices below 2^24; PyTorch rounds start + i*step
        once from double, this rounds twice, so results may differ by one ulp).
    """
    what = "arange"
    op, shape, dtype = _out(out, int64, what)
    n = int(np.prod(shape))
    idx = T.index_operand(T.row_major(shape))
    is_int = dtype not in FLOATS
    if is_int:
        for name, v in (("start", start), ("step", step)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                fail(f"{what}: {name}={v!r} is not an integer; integer outputs take integers")
        last = int(start) + (n - 1) * int(step)
        if not all(I64.INT32_MIN <= v <= I64.INT32_MAX for v in (int(start), last)):
            fail(
                f"{what}: values {start} .. {last} leave the int32 range (the engines' integer "
                f"math is 32-bit); at most {I64.INT32_MAX}"
            )
    tiles = T.plan(shape, [op, idx], T.free_budget(12, SBUF_SHARE))
    for tile in tiles:
        a = tile.access[1]
        pattern = [[s, c] for s, c in zip(a.fsteps, tile.free, strict=True)]
        if dtype == "int64":
            res = I64.pair_tile(tile.shape, "arange_i64")
            _iota(I64.low_word(res), pattern, a, int(start), int(step))
            I64.sign_extend(res)
        elif is_int:
            res = nl.ndarray(tile.shape, dtype=out.dtype, buffer=nl.sbuf, name="arange")
            _iota(res, pattern, a, int(start), int(step))
        else:
            i = nl.ndarray(tile.shape, dtype=nl.int32, buffer=nl.sbuf, name="arange_i")
            _iota(i, pattern, a, 0, 1)
            res = nl.ndarray(tile.shape, dtype=out.dtype, buffer=nl.sbuf, name="arange")
            nisa.tensor_scalar(
                dst=res,
                data=i,
                op0=nl.multiply,
                operand0=float(step),
                op1=nl.add,
                operand1=float(start),
                engine=VECTOR,
            )
        T.store(tile, op, 0, res)


def _iota(dst: Any, pattern: list, a: T.Access, start: int, step: int) -> None:
    """dst = start + step * (index), the index's affine pattern being the tile's access `a`."""
    nisa.iota(
        dst=dst,
        pattern=[[s * step, c] for s, c in pattern],
        offset=start + a.offset * step,
        channel_multiplier=a.pstep * step,
    )


@jit
def triangle(out, x, diagonal=0, upper=False, int64=False):
    """out = tril(x, diagonal) (upper=False) or triu(x, diagonal) (upper=True) over the last two
    dims: element (..., i, j) is kept where j - i <= diagonal (tril) / >= diagonal (triu),
    else 0.

    Dimensions:
        x, out: [..., M, N], any strides; out may be x (in place).

    Args:
        out, x: HBM tensors of one dtype (int64: pair views with int64=True).
        diagonal: Python int, the diagonal offset.
        upper: triu instead of tril.

    Notes:
        One GpSimd affine_select per tile: the predicate is affine in the indices, so it is
        the tile's access pattern of the virtual operand j - i (bit-exact selected elements).
    """
    what = "triu" if upper else "tril"
    if len(x.shape) < (3 if int64 else 2):
        fail(f"{what}: x must have at least 2 dims [..., M, N], got shape {list(x.shape)}")
    op, shape, _ = _out(out, int64, what)
    xop = T.pair_operand(x, shape, f"{what}: x") if int64 else T.operand(x, shape, f"{what}: x")
    if not int64 and x.dtype != out.dtype:
        fail(f"{what}: x has dtype {x.dtype.name} but out has {out.dtype.name}; they must match")
    strides = [0] * len(shape)
    strides[-2], strides[-1] = -1, 1
    diff = T.index_operand(strides)  # j - i
    ops = [op, xop, diff]
    tiles = T.plan(shape, ops, T.free_budget(24, SBUF_SHARE))
    for tile, (xt,) in T.prefetched(tiles, ops, [T.Load(1)], "tri_in"):
        a = tile.access[2]
        pattern = [[s, c] for s, c in zip(a.fsteps, tile.free, strict=True)]
        if int64:
            pattern.append([0, 2])
        res = nl.ndarray(xt.shape, dtype=xt.dtype, buffer=nl.sbuf, name="tri")
        nisa.affine_select(
            dst=res,
            pattern=pattern,
            channel_multiplier=a.pstep,
            on_true_tile=xt,
            on_false_value=0.0,
            cmp_op=nl.greater_equal if upper else nl.less_equal,
            offset=a.offset - int(diagonal),
        )
        T.store(tile, op, 0, res)


# ---------------------------------------------------------------- references


def fill_ref(shape: tuple[int, ...], value: float) -> np.ndarray:
    """An array of `shape` full of `value` (float64)."""
    return np.full(shape, float(value))


def arange_ref(shape: tuple[int, ...], start: float = 0, step: float = 1) -> np.ndarray:
    """start + i * step in float64 over the row-major indices of `shape`."""
    return (start + step * np.arange(int(np.prod(shape)), dtype=np.float64)).reshape(shape)


def triangle_ref(x: np.ndarray, diagonal: int = 0, upper: bool = False) -> np.ndarray:
    """numpy's triu / tril over the last two dims."""
    x = np.asarray(x)
    return np.triu(x, diagonal) if upper else np.tril(x, diagonal)
