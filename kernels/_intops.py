"""Exact 32-bit integer arithmetic for the reduction and scan device kernels.

Layer: kernel library (trnsim.kernels); public NKI API only. 32-bit integer add and multiply
are exact only on GpSimd (nki-api.md §8.1; VectorE and ScalarE compute in fp32), so integer
sums, products, maxima and minima run as GpSimd tensor_tensor trees. Results wrap modulo 2^32
as int32 arithmetic does (int64 results: `_int64.store_int32_as_pairs`).
"""

from __future__ import annotations

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

GPSIMD = nisa.engine.gpsimd


def tree(t, op, n: int) -> None:
    """Reduce the last axis (length n) of SBUF int32 view t [P, A, n] into t[:, :, 0] with op,
    halving on GpSimd (ceil(log2 n) instructions; t is overwritten)."""
    while n > 1:
        h = n // 2
        nisa.tensor_tensor(
            dst=t[:, :, 0:h], data1=t[:, :, 0:h], data2=t[:, :, n - h : n], op=op, engine=GPSIMD
        )
        n -= h


def copy(dst, src) -> None:
    """dst = src, bit-exact when the dtypes match (GpSimd tensor_copy)."""
    nisa.tensor_copy(dst=dst, src=src, engine=GPSIMD)


# ---------------------------------------------------------------- 64-bit sums of int32 values
# A sum with an int64 result is kept as two int32 words per output: lo in [0, 2^16) and hi,
# value = hi * 2^16 + lo. Each int32 input splits exactly into its low 16 bits and the rest;
# the halves sum on GpSimd without overflow (lo sums of 4096 values stay below 2^28, and after
# each step lo's carry moves into hi), so the result is exact while the sum of |x| stays below
# 2^47 (hi within int32).
HALF = 1 << 16


def split16(lo, hi, x) -> None:
    """lo = x & 0xFFFF, hi = (x - lo) / 2^16 for int32 x (exact: x - lo is a multiple of 2^16
    of magnitude <= 2^31, exact in fp32)."""
    nisa.tensor_scalar(dst=lo, data=x, op0=nl.bitwise_and, operand0=HALF - 1)
    nisa.tensor_tensor(dst=hi, data1=x, data2=lo, op=nl.subtract, engine=GPSIMD)
    nisa.tensor_scalar(dst=hi, data=hi, op0=nl.multiply, operand0=1.0 / HALF)


def carry16(lo, hi) -> None:
    """Move lo's bits above 16 into hi (lo >= 0): hi += lo >> 16, lo &= 0xFFFF."""
    c = sbuf_like(lo, "carry16")
    nisa.tensor_scalar(dst=c, data=lo, op0=nl.right_shift, operand0=16)
    nisa.tensor_tensor(dst=hi, data1=hi, data2=c, op=nl.add, engine=GPSIMD)
    nisa.tensor_scalar(dst=lo, data=lo, op0=nl.bitwise_and, operand0=HALF - 1)


def words16(dst, lo, hi) -> None:
    """dst [..., 2] = the int64 words of hi * 2^16 + lo: low word (hi << 16) | lo, high word
    hi >> 16 (arithmetic: (hi - (hi & 0xFFFF)) / 2^16, exact in fp32)."""
    nd = len(lo.shape)
    low = dst[(slice(None),) * nd + (0,)]
    high = dst[(slice(None),) * nd + (1,)]
    nisa.tensor_scalar(dst=low, data=hi, op0=nl.left_shift, operand0=16)
    nisa.tensor_tensor(dst=low, data1=low, data2=lo, op=nl.bitwise_or)
    t = sbuf_like(hi, "hi_low")
    nisa.tensor_scalar(dst=t, data=hi, op0=nl.bitwise_and, operand0=HALF - 1)
    nisa.tensor_tensor(dst=t, data1=hi, data2=t, op=nl.subtract, engine=GPSIMD)
    nisa.tensor_scalar(dst=high, data=t, op0=nl.multiply, operand0=1.0 / HALF)


def sbuf_like(t, name: str):
    return nl.ndarray(tuple(t.shape), dtype=nl.int32, buffer=nl.sbuf, name=name)
