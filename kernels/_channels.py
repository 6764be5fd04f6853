"""Channel tiling of [N, C, *spatial] strided views for the batch-norm device kernels:
channels on partitions (tiles of up to 128), N and the spatial dims on the free axis, merged
where every view allows and cut into chunks that fit SBUF.

Layer: kernel library (trnsim.kernels). Knows views, access patterns and DMAs; nothing about
the math.
"""

from __future__ import annotations

import math

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._common import P_MAX
from ._rows import CHUNK_ALIGN, coalesce, flat_blocks, sbuf_budget

MAX_CHUNK = 16384  # free elements per channel per chunk
F32 = nl.float32


class ChannelSpace:
    """Same-shape [N, C, *S] views with the channels on partitions and (N, *S) on the free
    axis; free dims merged where every view allows."""

    def __init__(self, shape: tuple[int, ...], views: dict):
        self.views = views
        free = (shape[0], *shape[2:])
        fs, st = coalesce(free, [(v.strides[0], *v.strides[2:]) for v in views.values()])
        self.free_shape = fs
        self.free_strides = dict(zip(views, st, strict=True))
        self.n = math.prod(free)
        self.c = shape[1]

    def channel_tiles(self) -> list[tuple[int, int]]:
        return [(c0, min(self.c, c0 + P_MAX)) for c0 in range(0, self.c, P_MAX)]

    def chunks(self, col_bytes: int, fixed_bytes: int = 0) -> list[tuple[int, int]]:
        step = min(MAX_CHUNK, int(sbuf_budget(fixed_bytes) // col_bytes))
        if CHUNK_ALIGN <= step < self.n:
            step = step // CHUNK_ALIGN * CHUNK_ALIGN
        return [(f, min(self.n, f + step)) for f in range(0, self.n, step)]

    def _dmas(self, name: str, c0: int, c1: int, f0: int, f1: int):
        """(free offset in the tile, count, HBM view) of each rectangle of free range f0..f1."""
        v, st, fs = self.views[name], self.free_strides[name], self.free_shape
        cs = v.strides[1]
        p = 0
        for pre, lo, hi in flat_blocks(f0, f1, fs):
            j = len(pre)
            off = v.offset + c0 * cs + sum(i * s for i, s in zip(pre, st, strict=False))
            pat = [[cs, c1 - c0], [st[j], hi - lo]] + [
                [st[k], fs[k]] for k in range(j + 1, len(fs))
            ]
            n = (hi - lo) * math.prod(fs[j + 1 :])
            yield p, n, v.ap(pat, offset=off + lo * st[j])
            p += n

    def load(self, name: str, c0: int, c1: int, f0: int, f1: int, dtype):
        t = ro.sbuf((c1 - c0, f1 - f0), dtype, name)
        for p, n, src in self._dmas(name, c0, c1, f0, f1):
            nisa.dma_copy(dst=t[:, p : p + n], src=src)
        return t

    def store(self, name: str, c0: int, c1: int, f0: int, f1: int, src) -> None:
        for p, n, dst in self._dmas(name, c0, c1, f0, f1):
            nisa.dma_copy(dst=dst, src=src[:, p : p + n])


def chan_ap(vec, c0: int, c1: int):
    step = vec.strides[0]
    return vec.ap([[step, c1 - c0], [1, 1]], offset=vec.offset + c0 * step)


def load_chan(vec, c0: int, c1: int, name: str):
    """Channels c0..c1 of a [C] vector as a [c1-c0, 1] fp32 tile, or None."""
    if vec is None:
        return None
    t = ro.sbuf((c1 - c0, 1), F32, name)
    nisa.dma_copy(dst=t, src=chan_ap(vec, c0, c1))
    return t


def store_chan(vec, c0: int, c1: int, src) -> None:
    if vec is not None:
        nisa.dma_copy(dst=chan_ap(vec, c0, c1), src=src)
