"""Exact 32-bit integer arithmetic for the reduction and scan device kernels.

Layer: kernel library (trnsim.kernels); public NKI API only. 32-bit integer add and multiply
are exact only on GpSimd (nki-api.md §8.1; VectorE and ScalarE compute in fp32), so integer
sums, products, maxima and minima run as GpSimd tensor_tensor trees. Results wrap modulo 2^32
as int32 arithmetic does (int64 results: `_int64.store_int32_as_pairs`).
"""

from __future__ import annotations

from trnsim.nki import isa as nisa

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
