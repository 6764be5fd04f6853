"""Beta-1 buffers: nl.sbuf / nl.psum / nl.hbm markers, nl.par_dim, and the direct allocators of
nki.compiler (ncc.sbuf.alloc / mod_alloc / auto_alloc, ncc.psum.alloc / mod_alloc / auto_alloc).

The markers are the current API's MemoryRegion members (B1's nl.sbuf is documented as an alias
of ncc.sbuf.auto_alloc()). A direct allocator computes each tile's (start partition, byte
address) exactly as B1 documents; tiles without block dimensions are placed at that address
(overlaps allowed, as on hardware). Tensors with block dimensions get the simulator's own
placement after every block's address has been computed and validated: values are the same
for kernels whose aliased blocks have disjoint lifetimes (the purpose of mod_alloc).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trnsim.errors import ConstraintError
from trnsim.nki.language import MemoryRegion, private_hbm, psum, sbuf, shared_hbm

hbm = private_hbm
PSUM_BANK_BYTES = 2048  # one PSUM bank per partition (nki-api.md §3.1)


class par_dim(int):
    """nl.par_dim(n): marks the partition axis of an on-chip shape; axes before it are block
    dimensions (`(B, nl.par_dim(128), F)`)."""

    def __repr__(self) -> str:
        return f"par_dim({int(self)})"


@dataclass(frozen=True)
class DirectAllocator:
    """A B1 direct-allocation request: where each (block index) tile of a tensor lives."""

    space: str  # sbuf | psum
    func: Callable[[tuple[int, ...], int, int], tuple[int, int]]
    kind: str = "alloc"

    @property
    def memory_region(self) -> MemoryRegion:
        return sbuf if self.space == "sbuf" else psum

    def address(self, idx: tuple[int, ...], pdim_size: int, fdim_bytes: int) -> tuple[int, int]:
        """(start partition, byte address per partition) of block `idx`. A PSUM function
        returns (bank_id, start_partition, byte_addr), the byte address within the bank
        (nki.compiler.psum.alloc docs); (start_partition, byte_address) is taken too."""
        got = _call_alloc_func(self.func, idx, pdim_size, fdim_bytes)
        psum = self.space == "psum"
        try:
            vals = tuple(int(x) for x in got)
            if psum and len(vals) == 3:
                bank, p, b = vals
                return p, bank * PSUM_BANK_BYTES + b
            p, b = vals
        except (TypeError, ValueError) as e:
            form = "(bank_id, start_partition, byte_addr)" if psum else ""
            form = form or "(start_partition, byte_address)"
            raise ConstraintError(
                f"ncc.{self.space}.{self.kind}: the allocation function must "
                f"return {form}, got {got!r}"
            ) from e
        return p, b


def _call_alloc_func(func: Callable[..., Any], idx: tuple[int, ...], pdim_size: int,
                     fdim_size: int) -> Any:
    """func(idx, pdim_size, fdim_size): positionally, or by the documented parameter names
    when the positions are taken (AWS's allocated SD attention passes
    `functools.partial(psum_addr, bank_map=...)` for `def psum_addr(bank_map, idx, pdim_size,
    fdim_size)`)."""
    try:
        inspect.signature(func).bind(idx, pdim_size, fdim_size)
    except TypeError:
        return func(idx=idx, pdim_size=pdim_size, fdim_size=fdim_size)
    except ValueError:  # no signature (a builtin): positional
        pass
    return func(idx, pdim_size, fdim_size)


def _mod_index(idx: tuple[int, ...], tiles: tuple[int, ...]) -> int:
    """Row-major index of idx wrapped modulo the physical tile counts (mod_alloc)."""
    tiles = tuple(tiles) + (1,) * (len(idx) - len(tiles))
    flat, mult = 0, 1
    for i, n in reversed(list(zip(idx, tiles, strict=False))):
        flat += (i % max(n, 1)) * mult
        mult *= max(n, 1)
    return flat


class _SbufAllocators:
    """ncc.sbuf: alloc(func), mod_alloc(base_addr, ...), auto_alloc()."""

    space = "sbuf"

    def alloc(self, func: Callable[..., tuple[int, int]]) -> DirectAllocator:
        return DirectAllocator(self.space, func, "alloc")

    def mod_alloc(
        self,
        base_addr: int,
        base_partition: int = 0,
        num_par_tiles: Any = (),
        num_free_tiles: Any = (),
    ) -> DirectAllocator:
        free = (
            tuple(num_free_tiles)
            if isinstance(num_free_tiles, (tuple, list))
            else (int(num_free_tiles),)
        )

        def func(idx: tuple[int, ...], pdim_size: int, fdim_bytes: int) -> tuple[int, int]:
            return base_partition, base_addr + _mod_index(idx, free) * fdim_bytes

        return DirectAllocator(self.space, func, "mod_alloc")

    def auto_alloc(self) -> MemoryRegion:
        return sbuf


class _PsumAllocators(_SbufAllocators):
    """ncc.psum: alloc(func), mod_alloc(base_bank, ...), auto_alloc()."""

    space = "psum"

    def mod_alloc(
        self,
        base_bank: int,
        base_addr: int = 0,
        base_partition: int = 0,  # type: ignore[override]
        num_bank_tiles: Any = (),
        num_par_tiles: Any = (),
        num_free_tiles: Any = (),
    ) -> DirectAllocator:
        banks = (
            tuple(num_bank_tiles)
            if isinstance(num_bank_tiles, (tuple, list))
            else (int(num_bank_tiles),)
        )

        def func(idx: tuple[int, ...], pdim_size: int, fdim_bytes: int) -> tuple[int, int]:
            bank = base_bank + _mod_index(idx, banks)
            return base_partition, bank * PSUM_BANK_BYTES + base_addr

        return DirectAllocator(self.space, func, "mod_alloc")

    def auto_alloc(self) -> MemoryRegion:
        return psum


sbuf_allocators = _SbufAllocators()
psum_allocators = _PsumAllocators()


def resolve(buffer: Any, default: MemoryRegion = sbuf) -> tuple[str, DirectAllocator | None]:
    """(space or HBM kind, direct allocator) of a buffer= argument."""
    if buffer is None:
        buffer = default
    if isinstance(buffer, DirectAllocator):
        return buffer.space, buffer
    if isinstance(buffer, (_SbufAllocators,)):  # ncc.sbuf / ncc.psum passed bare
        return buffer.space, None
    if isinstance(buffer, MemoryRegion):
        return buffer.value, None
    raise ConstraintError(
        f"buffer={buffer!r} is not a buffer (use nl.sbuf, nl.psum, nl.hbm, "
        "nl.private_hbm, nl.shared_hbm or an ncc allocator)"
    )


def marker_of(t: Any) -> MemoryRegion:
    """The buffer marker of a tensor (tensor.buffer)."""
    space = t.space
    if space in ("sbuf", "psum"):
        return sbuf if space == "sbuf" else psum
    return shared_hbm if t._buf is not None and t._buf.kind == "shared_hbm" else private_hbm


__all__ = [
    "DirectAllocator",
    "MemoryRegion",
    "hbm",
    "par_dim",
    "private_hbm",
    "psum",
    "psum_allocators",
    "resolve",
    "sbuf",
    "sbuf_allocators",
    "shared_hbm",
]
