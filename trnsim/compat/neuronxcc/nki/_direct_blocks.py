"""Beta-1 block tensors under direct allocation: every block at the address its allocator gave.

`nl.ndarray((B0, B1, nl.par_dim(P), F), buffer=ncc.psum.mod_alloc(base_bank=0,
num_bank_tiles=(1, 7)))` asks for B0 x B1 logical blocks cycling over 7 physical PSUM banks
(nki-api.md §3.3: "mod_alloc cycles logical blocks over num_free_tiles/num_par_tiles physical
tiles"); AWS's attention tutorial (attn_fwd_v9/v10) declares 32 x 8 blocks of a 2 KiB bank
that way. The tensor is then stored as its blocks, each placed at its (start partition, byte
address) at the declaration; blocks that share an address share bytes, as on hardware, so a
kernel whose aliased blocks have overlapping lifetimes computes what the hardware computes.
Nothing is evicted or spilled: the user owns placement.
"""

from __future__ import annotations

from typing import Any

from trnsim import dtypes as dt
from trnsim.compat.neuronxcc.nki._spill import BlockSlots
from trnsim.memory import Layout, TensorLabel, View


class DirectBlocks(BlockSlots):
    """A direct-allocated block tensor: block -> its own placed allocation (see module)."""

    def __init__(self, ctx: Any, space: str, name: str, parts: int, block_elems: int,
                 blocks: tuple[int, ...], dtype: dt.DType, loc: Any,
                 addresses: list[tuple[int, int]]):
        super().__init__(ctx, space, name, parts, block_elems, len(addresses), blocks, dtype,
                         loc)
        self.addresses = addresses  # row-major block -> (start partition, element offset)
        # Every block is placed (and its bytes made undefined) at the declaration, as the
        # hardware's direct allocation claims them then: placing a block at its first access
        # would overwrite what an aliased tensor wrote there in between.
        for block, address in enumerate(addresses):
            self.slots[block] = ctx.core.allocate(
                space, (parts, block_elems), dtype, name=self.block_label(block),
                address=address, loc=loc)

    @property
    def label(self) -> TensorLabel:
        what = f"tensor '{self.name}'" if self.name else f"{self.space} tensor"
        return TensorLabel(f"{what} (directly allocated blocks)")

    def release(self) -> None:
        for slot in self.slots.values():
            slot.buffer.release()
        self.slots.clear()

    def view(self, lay: Layout, mode: str) -> View:
        block, local = self._locate(lay)
        slot = self.slots[block]
        if mode != "read":
            self.written.add(block)
        return View(slot.buffer, local)
