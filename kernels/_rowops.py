"""Per-row arithmetic on row tiles [parts, G, cols] with per-row values [parts, G], for the
row-wise device kernels.

Layer: kernel library (trnsim.kernels). With G = 1 a per-row value is a per-partition scalar
operand ((P, 1) tile: tensor_scalar, scalar_tensor_tensor, ScalarE bias/scale and its
accumulator); with G > 1 it is broadcast along the columns (a stride-0 view) into
tensor_tensor. Callers write one code path for both.
"""

from __future__ import annotations

from typing import Any

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

F32 = nl.float32


def sbuf(shape: tuple[int, ...], dtype: Any = F32, name: str = "t"):
    return nl.ndarray(tuple(shape), dtype=dtype, buffer=nl.sbuf, name=name)


def _is_tile(v: Any) -> bool:
    return hasattr(v, "shape")


def bcast(col, cols: int):
    """[parts, G] per-row values as [parts, G, cols] (stride 0 along the columns)."""
    return col.expand_dim(2).broadcast(2, cols)


def _single(data) -> bool:
    return data.shape[1] == 1


def apply_col(dst, data, op, col, op1=None, col1=None) -> None:
    """dst = (data op col) [op1 col1], col/col1 per-row tiles [parts, G] or numbers."""
    if _single(data) or not (_is_tile(col) or _is_tile(col1)):
        nisa.tensor_scalar(dst=dst, data=data, op0=op, operand0=col, op1=op1, operand1=col1)
        return
    cols = data.shape[2]
    first = dst if op1 is None else sbuf(data.shape, F32, "col_tmp")
    if _is_tile(col):
        nisa.tensor_tensor(dst=first, data1=data, data2=bcast(col, cols), op=op)
    else:
        nisa.tensor_scalar(dst=first, data=data, op0=op, operand0=col)
    if op1 is None:
        return
    if _is_tile(col1):
        nisa.tensor_tensor(dst=dst, data1=first, data2=bcast(col1, cols), op=op1)
    else:
        nisa.tensor_scalar(dst=dst, data=first, op0=op1, operand0=col1)


def fma_col(dst, data, op0, col, op1, other, reverse1: bool = False) -> None:
    """dst = (data op0 col) op1 other (other op1 (data op0 col) with reverse1); col per row,
    other a full tile."""
    if _single(data) or not _is_tile(col):
        nisa.scalar_tensor_tensor(
            dst=dst, data=data, op0=op0, operand0=col, op1=op1, operand1=other, reverse1=reverse1
        )
        return
    t = sbuf(data.shape, F32, "fma_tmp")
    nisa.tensor_tensor(dst=t, data1=data, data2=bcast(col, data.shape[2]), op=op0)
    a, b = (other, t) if reverse1 else (t, other)
    nisa.tensor_tensor(dst=dst, data1=a, data2=b, op=op1)


def row_reduce(dst, data, op, negate: bool = False) -> None:
    """dst [parts, G] = reduction of data [parts, G, cols] over the columns."""
    nisa.tensor_reduce(dst=dst, op=op, data=data, axis=2, negate=negate)


def row_sum(dst, data) -> None:
    """dst [parts, G] = row sums of data [parts, G, cols]: the ScalarE accumulator (a copy
    pass) for G = 1, to keep VectorE free; VectorE tensor_reduce over the block for G > 1."""
    if data.shape[1] == 1:
        junk = sbuf(data.shape, F32, "row_sum_copy")
        act_rows(junk, data, nl.copy, sums=dst)
    else:
        row_reduce(dst, data, nl.add)


def act_rows(dst, data, op, bias=None, scale: Any = 1.0, sums=None) -> None:
    """dst = op(data * scale + bias) on ScalarE with per-row bias/scale; sums [parts, G]
    (optional) receives the row sums of dst."""
    if _single(data) or not (_is_tile(bias) or _is_tile(scale)):
        kw = {}
        if sums is not None and _single(data):
            kw = dict(reduce_op=nl.add, reduce_res=sums, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activation(dst=dst, op=op, data=data, bias=bias, scale=scale, **kw)
        if sums is not None and not kw:
            row_reduce(sums, dst, nl.add)
        return
    t = sbuf(data.shape, F32, "act_in")
    if bias is None:
        apply_col(t, data, nl.multiply, scale)
    elif not _is_tile(scale) and scale == 1.0:
        apply_col(t, data, nl.add, bias)
    else:
        apply_col(t, data, nl.multiply, scale, nl.add, bias)
    nisa.activation(dst=dst, op=op, data=t)
    if sums is not None:
        row_reduce(sums, dst, nl.add)


def partition_sum(dst, data) -> None:
    """dst [1, F] = sum over the partitions of data [parts, F] (GpSimd, fp32)."""
    nisa.tensor_partition_reduce(dst=dst, op=nl.add, data=data)


def lse_chunk(neg_max, sums, xt) -> None:
    """Softmax statistics of one column chunk xt [parts, G, cols]: neg_max [parts, G] = the
    negated row maxima, sums [parts, G] = sum(exp(x - max)) (ScalarE accumulator when G=1)."""
    row_reduce(neg_max, xt, nl.maximum, negate=True)
    junk = sbuf(xt.shape, F32, "exp")
    act_rows(junk, xt, nl.exp, bias=neg_max, sums=sums)


def neg_lse(neg_maxes, sums):
    """-log(sum(exp(x))) [parts, G] of whole rows from lse_chunk's per-chunk statistics
    [parts, G, n_chunks] (several chunks only with G = 1): each chunk's sum is relative to its
    own max m_c, so it is rescaled by exp(m_c - m) before the sums are added."""
    m, g, nc = neg_maxes.shape
    nb = sbuf((m, g), F32, "neg_lse")
    if nc == 1:
        nisa.activation(dst=nb, op=nl.log, data=sums[:, :, 0])
        nisa.tensor_tensor(dst=nb, data1=neg_maxes[:, :, 0], data2=nb, op=nl.subtract)
        return nb
    nmx, sm = neg_maxes[:, 0, :], sums[:, 0, :]
    neg_max = sbuf((m, 1), F32, "neg_max")
    row_reduce(neg_max, neg_maxes, nl.minimum)
    w = sbuf((m, nc), F32, "rescale")
    nisa.activation(dst=w, op=nl.exp, data=nmx, scale=-1.0, bias=neg_max)
    nisa.tensor_tensor(dst=w, data1=w, data2=sm, op=nl.multiply)
    total = sbuf((m, 1), F32, "sum")
    row_reduce(total, w.expand_dim(1), nl.add)
    nisa.activation(dst=nb, op=nl.log, data=total)
    nisa.tensor_tensor(dst=nb, data1=neg_max, data2=nb, op=nl.subtract)
    return nb
