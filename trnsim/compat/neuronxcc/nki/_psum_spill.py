"""Beta-1 PSUM block tensors larger than PSUM: live blocks spilled to SBUF.

AWS's attention tutorial (attn_fwd_v3) keeps all Q·K blocks of a 4096 x 4096 score matrix in
one PSUM tensor, (32, 8, nl.par_dim(128), 512) fp32, 64 times PSUM's 16 KiB per partition; the
B1 compiler allocates it block by block like an SBUF block tensor (_spill). DMA engines do not
reach PSUM, so a live PSUM block that loses its bank is copied to an SBUF area by VectorE
(`tensor_copy`, bit exact) and copied back into a fresh bank when it is read again; the SBUF
areas are the blocks of an SBUF block tensor of the same geometry, which _spill allocates block by
block and spills to HBM in turn when SBUF is short. A save whose
block is never read again is dropped at the end of the kernel, as SBUF spills are (_spill.finish).
"""

from __future__ import annotations

from typing import Any

from trnsim.memory import Layout, View
from trnsim.program import capture_location


def save(blocks: Any, block: int, slot: View) -> None:
    """Copy live PSUM `block` (resident in `slot`) to its SBUF area before the slot goes."""
    area = _area(blocks, block, "write")
    blocks.saved[block] = area
    blocks.pool.tentative[(blocks.serial, block)] = blocks.ctx.core.issue(
        "tensor_copy", "vector", {"dst": area, "src": slot}, {},
        loc=capture_location(), loops=tuple(blocks.ctx.loops))


def reload(blocks: Any, block: int, slot: View) -> None:
    """Copy PSUM `block`'s saved value from its SBUF area into its new `slot`."""
    blocks.pool.returns += 1
    blocks.pool.tentative.pop((blocks.serial, block), None)  # the save carries a value
    blocks.ctx.core.issue("tensor_copy", "vector", {"dst": slot, "src": _area(blocks, block,
                                                                              "read")}, {},
                          loc=capture_location(), loops=tuple(blocks.ctx.loops))


def release(blocks: Any) -> None:
    """The tensor went out of scope: so does its SBUF spill tensor."""
    spill = blocks.__dict__.pop("psum_spill", None)
    if spill is not None:
        spill.release()
    blocks.saved.clear()


def _area(blocks: Any, block: int, mode: str) -> View:
    """Block `block` of the PSUM tensor's SBUF spill tensor: an SBUF block tensor of the same
    geometry, allocated block by block (and itself spilled to HBM when SBUF is short)."""
    from trnsim.compat.neuronxcc.nki._spill import BlockSlots

    spill = blocks.__dict__.get("psum_spill")
    if spill is None:
        spill = blocks.__dict__["psum_spill"] = BlockSlots(
            blocks.ctx, "sbuf", f"{blocks.name or 'psum'}_psum_spill", blocks.partitions,
            blocks.block_elems, blocks.nblocks, blocks.blocks, blocks.dtype, blocks.loc)
    fb, total = blocks.block_elems, blocks.nblocks * blocks.block_elems
    whole = Layout(blocks.dtype, block * fb, (blocks.partitions, fb), (total, 1))
    return spill.view(whole, mode)
