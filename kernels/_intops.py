"""Exact 32-bit integer arithmetic for the reduction and scan device kernels, and int64 results
written as int32 pairs.

Layer: kernel library (trnsim.kernels); public NKI API only. 32-bit integer add and multiply
are exact only on GpSimd (nki-api.md §8.1; VectorE and ScalarE compute in fp32), so integer
sums, products, maxima and minima run as GpSimd tensor_tensor trees. Results wrap modulo 2^32
as int32 arithmetic does.
"""

from __future__ import annotations

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import fail

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


def int64_words(dst, src) -> None:
    """dst [..., 2] int32 = the int64 pair of int32 values src [...]: the value (low word) and
    its sign extension (high word, 0 or -1)."""
    nd = len(src.shape)
    low = dst[(slice(None),) * nd + (0,)]
    high = dst[(slice(None),) * nd + (1,)]
    copy(low, src)
    # (src < 0) * -1: fp32 math on an int32 input keeps the sign; 0 and -1 are exact.
    nisa.tensor_scalar(
        dst=high, data=src, op0=nl.less, operand0=0.0, op1=nl.multiply, operand1=-1.0
    )


def words_of(value: int, what: str) -> tuple[int, int]:
    """(low, high) int32 words of a Python int in int64 range (two's complement)."""
    v = int(value)
    if not -(2**63) <= v < 2**63:
        fail(f"{what}: {v} is outside the int64 range")
    lo, hi = v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF
    return (lo - 2**32 if lo >= 2**31 else lo), (hi - 2**32 if hi >= 2**31 else hi)
