"""Shared helpers of the kernel library: argument errors reported at the kernel's caller, and
the row blocking of the row-wise kernels."""

from __future__ import annotations

import linecache
import os
import sys
from collections.abc import Iterator
from typing import NoReturn

from trnsim.errors import ConstraintError
from trnsim.nki import isa as nisa
from trnsim.nki import language as nl
from trnsim.program import SourceLocation, is_internal_file

_LIBRARY_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def caller_location() -> SourceLocation | None:
    """The first stack frame outside trnsim and this kernel library: where the user called
    the kernel (nki.simulate(kernel)(...), or kernel(...))."""
    frame = sys._getframe(1)
    while frame is not None:
        fname = frame.f_code.co_filename
        path = os.path.abspath(fname)
        if not (
            is_internal_file(fname) or path.startswith(_LIBRARY_DIR) or fname.startswith("<frozen")
        ):
            code = linecache.getline(fname, frame.f_lineno).strip()
            return SourceLocation(fname, frame.f_lineno, frame.f_code.co_name, code)
        frame = frame.f_back
    return None


def fail(message: str) -> NoReturn:
    """Reject a kernel's arguments: ConstraintError located at the kernel's caller."""
    raise ConstraintError(message, caller_location())


def scalar_copy(dst, src) -> None:
    """dst = src (with a cast) on ScalarE: tensor_copy from NeuronCore-v3 on (2x mode for
    16-bit data on v4), an identity activation on NeuronCore-v2, whose ScalarE has no
    tensor_copy."""
    if nisa.get_nc_version() < nisa.nc_version.gen3:
        nisa.activation(dst=dst, op=nl.copy, data=src)
    else:
        nisa.tensor_copy(dst=dst, src=src, engine=nisa.engine.scalar)


# ---------------------------------------------------------------- row-blocked kernels
# Row-wise kernels (norms, softmax, quantization) put rows on partitions, G rows per partition
# per block: row b*G*128 + p*G + j sits at partition p, slot j, so each partition reads and
# writes one contiguous run of G*D elements (G chosen for >= 2 KiB per partition).

P_MAX = 128  # rows per tile, one per partition (pmax)
MIN_DMA_BYTES = 2048  # bytes per partition below which a DMA's fixed cost (~2 us) dominates


def row_group(n: int, d: int, itemsize: int, per_row_bytes: int, share: float, what: str) -> int:
    """G rows per partition per block: enough for >= 2 KiB DMAs, dividing N/128, and with two
    blocks of `per_row_bytes` per row fitting in `share` of the usable SBUF."""
    if n <= 0 or n % P_MAX:
        fail(f"{what}: N={n} rows is not a positive multiple of {P_MAX}; pad the rows")
    budget = nl.tile_size.total_available_sbuf_size * share / 2
    if per_row_bytes > budget:
        fail(
            f"{what}: D={d} needs {per_row_bytes} bytes per partition per row; at most "
            f"{int(budget)} fit"
        )
    g = max(1, -(-MIN_DMA_BYTES // (d * itemsize)))
    while g > 1 and ((n // P_MAX) % g or g * per_row_bytes > budget):
        g -= 1
    return g


def row_block(x, b: int, g: int):
    """Block b of G*128 rows of a [N, D] HBM tensor, viewed as [128, G, D]."""
    r0 = b * g * P_MAX
    return x[r0 : r0 + g * P_MAX, :].reshape((P_MAX, g, x.shape[1]))


def prefetched_row_blocks(g: int, name: str, *srcs) -> Iterator[tuple[int, list]]:
    """Yield (b, [tile per src]) for every block of G*128 rows of the [N, D_i] HBM tensors
    `srcs`, each tile [128, G, D_i] in SBUF.

    The loads of block b+1 are issued before the caller's work on block b: the DMA queue is
    in order, so a load issued after block b's store would wait for block b's compute.
    Each load allocates a fresh tile inside the loop body (double buffering).
    """
    n_blocks = srcs[0].shape[0] // (g * P_MAX)

    def load(b: int) -> list:
        tiles = []
        for src in srcs:
            t = nl.ndarray((P_MAX, g, src.shape[1]), dtype=src.dtype, buffer=nl.sbuf, name=name)
            nisa.dma_copy(dst=t, src=row_block(src, b, g))
            tiles.append(t)
        return tiles

    nxt = load(0)
    for b in nl.affine_range(n_blocks):
        cur = nxt
        if b + 1 < n_blocks:
            nxt = load(b + 1)
        yield b, cur
