"""Beta-1 block tensors: an evicted block that is a clean copy of HBM is re-read, not spilled.

The rule refetch_clean_blocks (a switch of trnsim.timing.compiler.CompilerRules, on by
default; the launch's `Placement` carries it). A block whose SBUF contents are an unmodified
copy of HBM data (every write to it since it last held a value was a DMA from HBM tensors,
`dma_copy` with HBM sources only, and none of those tensors has been written since) is dropped
by the compiler when it must give its slot up, and re-read from its HBM source when it is read
again: no spill save, and the reload is the same DMA(s) from the source, an ordinary HBM read
(queue and summary as any load). The NKIBench trn1 large matmul's profile reads its weights
32 times over and spills nothing; trnsim without the rule saved and reloaded 16 GB.

trnsim's spill model still saves the block at its eviction (a tentative spill, as for a block
that may be dead): whether the source is written before the block is read again is known only
then. If it was not, the block is re-read from the source and the save stays tentative
(`_spill.finish` drops it from the program); if it was, the block is reloaded from its spill
and the save is kept. Values are the same either way: a re-read copies the bytes the source
still holds. A source is judged per HBM tensor (any write to the tensor after the copy counts),
which never re-reads changed bytes and may spill a block whose own bytes did not change.
Knows blocks and the instructions that wrote them; issues through NeuronCore.issue.
"""

from __future__ import annotations

from typing import Any

from trnsim.memory import Layout, View
from trnsim.program import Instruction

_COPIES = ("dma_copy",)  # opcodes that copy HBM bytes unchanged into their destination
_MAX_PIECES = 16  # more DMAs than this filling one block: treated as not a copy (spilled)

# One DMA that filled (part of) a block: opcode, engine, the written operand's name, its
# layout within the block's slot, its other operands (HBM Views), its attributes and index.
Piece = tuple[str, str, str, Layout, dict[str, View], dict[str, Any], int]


def hbm_copy_operand(
    ins: Instruction | None, operands: dict[str, Any] | None, attrs: dict[str, Any] | None
) -> str | None:
    """The name of the operand `ins` writes if it is a plain DMA from HBM into on-chip memory
    (every other operand an HBM View; no dst_rmw_op, which adds onto the old bytes), else None."""
    if ins is None or operands is None or ins.opcode not in _COPIES or len(ins.writes) != 1:
        return None
    if (attrs or {}).get("dst_rmw_op") is not None:
        return None
    dst = ins.writes[0].name
    for k, v in operands.items():
        if not isinstance(v, View):
            return None
        if (k == dst) == (v.buffer.space == "hbm"):
            return None
    return dst if dst in operands else None


def note_writes(
    writes: list[tuple[Any, int, Layout, bool]],
    ins: Instruction | None,
    operands: dict[str, Any] | None,
    attrs: dict[str, Any] | None,
) -> None:
    """The instruction `ins` (issued with `operands`, `attrs`) wrote these blocks ((owner,
    block, layout in its slot, whether the write starts the block's value afresh)): keep each
    block's pieces while they are all HBM copies, forget them at any other write."""
    dst = hbm_copy_operand(ins, operands, attrs)
    for owner, block, local, fresh in writes:
        slot = owner.slots.get(block)
        if dst is None or slot is None or operands[dst].buffer is not slot.buffer:
            owner.copies.pop(block, None)
            continue
        pieces = owner.copies.get(block)
        if pieces and pieces[-1][6] == ins.index:
            continue  # the same write seen twice
        sources = {k: v for k, v in operands.items() if k != dst}
        piece = (ins.opcode, ins.engine, dst, local, sources, dict(attrs or {}), ins.index)
        if fresh:
            owner.copies[block] = [piece]
        elif pieces is not None and len(pieces) < _MAX_PIECES:
            pieces.append(piece)
        else:
            owner.copies.pop(block, None)
    writes.clear()


def clean_pieces(owner: Any, block: int) -> list[Piece] | None:
    """The DMAs that re-read `block` from HBM if it is still a clean copy of its sources (none
    written or freed since its copy), else None."""
    pieces = owner.copies.get(block)
    if not pieces:
        return None
    for *_, sources, _, index in pieces:
        for v in sources.values():
            if v.buffer.last_write > index or v.buffer._handle is None:
                return None
    return pieces


def refetch(core: Any, pieces: list[Piece], slot: View, loc: Any, loops: tuple) -> None:
    """Re-read a clean block into its new `slot`: each DMA that filled it, again."""
    for opcode, engine, dst, local, sources, attrs, _ in pieces:
        ops = {**sources, dst: View(slot.buffer, local)}
        core.issue(opcode, engine, ops, attrs, loc=loc, loops=loops)
