"""Semantics of Tensor Engine instructions. Pure numpy; knows nothing about time."""

from __future__ import annotations

import numpy as np

from trnsim.memory import View
from trnsim.semantics import semantics


def _psum_words(core, dst: View) -> tuple[slice, slice]:
    r = dst.region()
    return (slice(r.partition_start, r.partition_start + r.partitions),
            slice(r.byte_start // 4, -(-r.byte_end // 4)))


@semantics("nc_matmul")
def nc_matmul(core, *, engine: str, dst: View, stationary: View, moving: View,
              accumulate=None, **attrs) -> None:
    """dst = stationary.T @ moving (K on partitions), fp32 accumulation in PSUM.

    accumulate=None: the first write to a PSUM location overwrites, later ones add.
    """
    k = stationary.shape[0]
    s = stationary.read_f32().reshape(k, -1).astype(np.float64)
    m = moving.read_f32().reshape(k, -1).astype(np.float64)
    prod = (s.T @ m).astype(np.float32).reshape(dst.shape)
    rows, words = _psum_words(core, dst)
    flags = core.psum_accumulating[rows, words]
    if accumulate is None:
        old = dst.read_f32()
        acc_mask = np.broadcast_to(flags.any(), dst.shape)  # coarse: whole tile
        prod = np.where(acc_mask, old + prod, prod)
    elif accumulate:
        prod = dst.read_f32() + prod
    dst.write(prod)
    core.psum_accumulating[rows, words] = True
