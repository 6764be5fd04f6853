"""Beta-1 block tensors larger than their memory: allocation by live block, with spills.

The B1 compiler allocates a tensor with block dimensions (`nl.ndarray((B0, B1, nl.par_dim(P),
F), buffer=nl.sbuf)`) block by block: only blocks that are live occupy SBUF, and a live block
it cannot keep is spilled to HBM and reloaded (the profiler's `qSyncSpillReload` DMAs). When
such a tensor does not fit where trnsim would place it whole, its storage is a `BlockSlots`:

* a block gets an SBUF/PSUM slot (an allocation of one [P, F] block) when it is first
  accessed, filled with the tensor's initial value if it has one (nl.zeros: lazily);
* when the memory is full, a block of any such tensor of the core gives its slot up (never one
  used by the instruction being built; which one: BlockPool.evict_one). If it was written since
  its value was last saved, a spill DMA copies it to an HBM spill area at that point;
* a block read again after its eviction is reloaded by a DMA into a fresh slot, and its
  spill stays in the program. A block never read again was dead when it was evicted (the
  compiler, knowing its last use, would not have saved it): `finish` drops those spills from
  the program at the end of the kernel, and the trace shows only the spills that carry values;
* a block that is a clean copy of HBM (filled by DMAs from HBM tensors not written since) is
  re-read from its source instead of reloaded from its spill, whose save is then dropped too
  (rule refetch_clean_blocks, _refetch.py; the launch's Placement switches it).

Whether a block tensor that fits whole at its declaration is placed whole or block by block is
the launch's `Placement` (_placement.py): whole first, and block by block for every block
tensor when that runs out of memory, or would have to evict a block (`placed_launch`): a tensor
placed whole holds its memory to the end, where the compiler's liveness-based allocation frees
it. Which block is evicted: the one whose value is needed again last, known from a first run
of the launch (rule evict_by_next_use, _nextuse.py); without the rule (and in that first run)
the least recently used one (BlockPool.evict_one). The compiler's order is not documented.
A live PSUM block that is evicted is copied to an SBUF area and back (_psum_spill: DMAs do not
reach PSUM). Knows blocks and slots; instructions go through NeuronCore.issue.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict
from typing import Any

from trnsim import dtypes as dt
from trnsim.allocation import drop_from_records
from trnsim.compat.neuronxcc.nki import _psum_spill, _refetch
from trnsim.compat.neuronxcc.nki._nextuse import NEVER, NextUse, block_key
from trnsim.compat.neuronxcc.nki._placement import Placement
from trnsim.errors import AllocationError, UnsupportedError
from trnsim.memory import Layout, TensorLabel, View, interned
from trnsim.program import SourceLocation, capture_location

# Attribute of the spill ("save") and reload DMAs: their profiler queue is qSyncSpillReload and
# the summary counts them as spill_save_bytes / spill_reload_bytes, as neuron-profile does.
SPILL_ATTR = "spill_reload"
_SERIALS = itertools.count()  # names BlockSlots in pool keys (ids are reused)


class BlockPool:
    """The block slots of one core in access order, and the pinning epoch."""

    def __init__(self) -> None:
        # (owner serial, block) -> (owner ref, epoch of the last access, read since written,
        # position of its next need: rule evict_by_next_use, NEVER when not known)
        self.order: OrderedDict[tuple[int, int], tuple[Any, int, bool, int]] = OrderedDict()
        self.epoch = 0  # advanced after every front-end instruction (see _emit.issue)
        # (owner serial, block) -> the block's latest spill, while no reload needs it; kept here
        # (not only by its tensor, which may be gone when the kernel ends)
        self.tentative: dict[tuple[int, int], Any] = {}
        self.placement: Placement | None = None  # the launch's, once a block tensor exists
        self.writes: list = []  # blocks the instruction being built writes (see _refetch)
        self.refetched: set[int] = set()  # tentative spills a re-read from HBM did not need
        self.superseded: set[int] = set()  # of those, spills a later save replaced (dead)
        # rule evict_by_next_use (_nextuse.py): this run's block accesses, and a recorded run's
        self.number = 0  # the pool's number in its launch's placement
        self.tensors = 0  # block tensors made in this pool so far (a tensor's number)
        self.keys: list[int] = []  # block_key of each access, in order
        self.whole_writes: list[bool] = []  # whether each access writes its block whole
        self.foresight: NextUse | None = None
        self.returns = 0  # evicted blocks read again (reloaded or re-read): evictions that cost

    @property
    def refetch_clean(self) -> bool:
        return self.placement is None or self.placement.refetch_clean

    def attach(self, placement: Placement | None) -> None:
        """The launch's placement (the same for every block tensor of one run)."""
        if placement is None or placement is self.placement:
            return
        self.placement = placement
        self.number = placement.pools
        placement.pools += 1
        self.foresight = placement.next_use.get(self.number)

    def touch(self, owner: BlockSlots, block: int, mode: str, whole_write: bool) -> None:
        key = (owner.serial, block)
        bkey = block_key(owner.number, block)
        needed_next = NEVER
        if self.foresight is not None:
            known = self.foresight.at(len(self.keys), bkey)
            if known is None:  # this run left the recorded accesses: least recently used
                self.foresight = None
                if self.placement is not None:
                    self.placement.diverged = True
            else:
                needed_next = known
        self.keys.append(bkey)
        self.whole_writes.append(whole_write)
        self.order[key] = (weakref.ref(owner), self.epoch, mode == "read", needed_next)
        self.order.move_to_end(key)

    def forget(self, owner: BlockSlots, block: int) -> None:
        self.order.pop((owner.serial, block), None)

    def evict_one(self, space: str) -> bool:
        """Give up one slot in `space` not pinned by the current instruction (False: none).

        The victim is the least recently used block if it was read since it was last written
        (a value consumed: dead, or a weight read again later; a weight in use stays recent).
        When the least recently used block is still unread, the victim is the most recently
        written unread block instead: when a loop fills more blocks than fit before another
        reads them in order, the first ones stay resident for the reader. (Preferring any
        consumed block to an unread one evicted weights a loop reads again and again:
        NKIBench swiglu reloaded 3.3 GB where its profile shows 84 MB.)

        With foresight (rule evict_by_next_use, a recorded run's accesses) the victim is the
        block whose value is needed again last, the least recently used of equals."""
        if self.foresight is not None:
            return self._evict_farthest(space)
        first, newest_unread = None, None
        for key, (ref, epoch, consumed, _) in self.order.items():
            owner = ref()
            if owner is None or owner.space != space or epoch == self.epoch:
                continue
            if first is None:
                if consumed:
                    owner.evict(key[1])
                    return True
                first = key
            if not consumed:
                newest_unread = (owner, key[1])
        if newest_unread is None:
            return False
        newest_unread[0].evict(newest_unread[1])
        return True

    def _evict_farthest(self, space: str) -> bool:
        victim, farthest = None, -1
        for key, (ref, epoch, _, needed_next) in self.order.items():
            owner = ref()
            if owner is None or owner.space != space or epoch == self.epoch:
                continue
            if needed_next > farthest:
                victim, farthest = (owner, key[1]), needed_next
                if needed_next == NEVER:
                    break
        if victim is None:
            return False
        victim[0].evict(victim[1])
        return True

    def record(self) -> bool:
        """Leave this run's block accesses with its placement; True if the run should be made
        again knowing them (rule evict_by_next_use: an evicted block was read again, and this
        pool's accesses were not known ahead)."""
        placement = self.placement
        if placement is None or not placement.foresight:
            return False
        placement.recorded[self.number] = NextUse(self.keys, self.whole_writes)
        return self.returns > 0 and self.number not in placement.next_use

    def live(self, space: str) -> list[str]:
        """Labels of the resident blocks in `space`, most recently used first."""
        out = []
        for (_, block), (ref, _, _, _) in reversed(self.order.items()):
            owner = ref()
            if owner is not None and owner.space == space:
                out.append(owner.block_label(block))
        return out


def pool_of(ctx: Any) -> BlockPool:
    pools = ctx.extra.setdefault("b1_block_pools", {})
    pool = pools.get(ctx.core.index)
    if pool is None:
        pool = pools[ctx.core.index] = BlockPool()
    return pool


def advance(ctx: Any, ins: Any = None, operands: Any = None, attrs: Any = None) -> None:
    """Instruction `ins` was issued (with `operands`, `attrs`): the blocks its operands used
    may be evicted again, and the blocks it wrote are (or are no longer) copies of HBM."""
    pools = ctx.extra.get("b1_block_pools")
    if pools:
        pool = pools.get(ctx.core.index)
        if pool is not None:
            pool.epoch += 1
            if pool.writes:
                _refetch.note_writes(pool.writes, ins, operands, attrs)


def evict_for(ctx: Any, space: str) -> bool:
    """Free one block slot of `space` for another allocation (False: none can go)."""
    pools = ctx.extra.get("b1_block_pools")
    pool = pools.get(ctx.core.index) if pools else None
    return pool is not None and pool.evict_one(space)


def block_slots(
    ctx: Any,
    space: str,
    logical: tuple[int, ...],
    pdim: int,
    dtype: dt.DType,
    name: str,
    placement: Placement | None = None,
) -> BlockSlots:
    """The block-by-block storage of a tensor with block dimensions logical[:pdim], under the
    launch's `placement`."""
    pool_of(ctx).attach(placement)
    parts, block_elems, nblocks = logical[pdim], 1, 1
    for n in logical[pdim + 1 :]:
        block_elems *= n
    for n in logical[:pdim]:
        nblocks *= n
    return BlockSlots(
        ctx, space, name, parts, block_elems, nblocks, logical[:pdim], dtype, capture_location()
    )


class BlockSlots:
    """The storage of one block tensor that lives block by block (see the module docstring).
    Stands where a Buffer stands in a B1 tensor; `view` maps an access to its block's slot."""

    on_chip = True

    def __init__(
        self,
        ctx: Any,
        space: str,
        name: str,
        parts: int,
        block_elems: int,
        nblocks: int,
        blocks: tuple[int, ...],
        dtype: dt.DType,
        loc: SourceLocation | None,
    ):
        self.ctx = ctx
        self.space = self.kind = space
        self.name = name
        self.core = ctx.core.index
        self.partitions = parts
        self.block_elems = block_elems
        self.nblocks = nblocks
        self.blocks = blocks  # the block dimensions, for labels
        self.dtype = dtype
        self.nbytes = nblocks * block_elems * dtype.itemsize  # logical bytes per partition
        self.loc = loc
        self.shape = (parts, nblocks * block_elems)
        self.fill: Any = None  # every block's initial value (nl.zeros / nl.full), if any
        self.reclaimed = ""
        self.slots: dict[int, View] = {}  # resident block -> its slot
        self.saved: dict[int, View] = {}  # block -> its HBM spill area (holds its value)
        self.dirty: set[int] = set()  # resident blocks written since their value was saved
        self.written: set[int] = set()  # blocks that ever held a value
        self.copies: dict[int, list] = {}  # block -> the HBM DMAs it is a copy of (_refetch)
        self.pool = pool_of(ctx)
        self.serial = next(_SERIALS)
        self.number = self.pool.tensors  # names its blocks in the pool's accesses (_nextuse)
        self.pool.tensors += 1

    # ---------------------------------------------------------------- what Buffer offers
    @property
    def label(self) -> TensorLabel:
        what = f"tensor '{self.name}'" if self.name else f"{self.space} tensor"
        return TensorLabel(f"{what} (allocated block by block)")

    def block_label(self, block: int) -> str:
        idx, rest = [], block
        for n in reversed(self.blocks):
            idx.append(rest % n)
            rest //= n
        size = self.block_elems * self.dtype.itemsize
        return f"{self.name or '?'}[{', '.join(map(str, reversed(idx)))}] ({size} B/partition)"

    def elems_per_partition(self, dtype: dt.DType) -> int:
        return self.nbytes // dtype.itemsize

    def release(self) -> None:
        """The tensor went out of scope: its slots are free, its pending spills dead."""
        for block in list(self.slots):
            self.slots.pop(block).buffer.release()
            self.pool.forget(self, block)
        self.dirty.clear()
        if self.space == "psum":
            _psum_spill.release(self)

    # ---------------------------------------------------------------- access
    def view(self, lay: Layout, mode: str) -> View:
        """The View of access `lay` (over the logical storage) on its block's slot; `mode` is
        read, write or readwrite."""
        block, local = self._locate(lay)
        whole = mode == "write" and local.size == self.partitions * self.block_elems
        slot = self.slots.get(block)
        if slot is None:
            slot = self._bring_in(block, whole)
        self.pool.touch(self, block, mode, whole)
        if mode != "read":
            if self.space == "sbuf":  # a copy of HBM from here? (_refetch.note_writes)
                whole = local.size == self.partitions * self.block_elems
                self.pool.writes.append((self, block, local, whole or block not in self.written))
            self.dirty.add(block)
            self.written.add(block)
        return View(slot.buffer, local)

    def _locate(self, lay: Layout) -> tuple[int, Layout]:
        total, fb = self.nblocks * self.block_elems, self.block_elems
        p0, f0 = divmod(lay.offset, total)
        block = f0 // fb
        strides, lo, hi = [], f0, f0
        for n, s in zip(lay.shape, lay.strides, strict=True):
            q, r = divmod(s, total) if s >= 0 else (0, s)
            if s >= total and r == 0:  # a partition stride: q partitions per step
                strides.append(q * fb)
                continue
            strides.append(s)
            step = (n - 1) * s
            lo, hi = min(lo, lo + step), max(hi, hi + step)
        if lo < block * fb or hi >= (block + 1) * fb:
            raise UnsupportedError(
                f"{self.label}: an access spanning several blocks [{lo}, {hi}] of a block "
                "tensor that does not fit in memory is not simulated (index one block at a "
                "time)"
            )
        local = Layout(lay.dtype, p0 * fb + f0 - block * fb, lay.shape, tuple(strides))
        return block, interned(local)

    def _bring_in(self, block: int, whole_write: bool) -> View:
        slot = self._allocate_slot(block)
        loc, loops = capture_location(), tuple(self.ctx.loops)
        core = self.ctx.core
        if block in self.saved and not whole_write:
            if self.space != "sbuf":  # a PSUM block spilled to SBUF (_psum_spill)
                _psum_spill.reload(self, block, slot)
                self.slots[block] = slot
                return slot
            key = (self.serial, block)
            self.pool.returns += 1
            pieces = _refetch.clean_pieces(self, block) if self.pool.refetch_clean else None
            if pieces is not None:  # re-read from HBM; the spill stays tentative
                _refetch.refetch(core, pieces, slot, loc, loops)
                self.slots[block] = slot
                if key in self.pool.tentative:
                    self.pool.refetched.add(self.pool.tentative[key].index)
                return slot
            self.pool.tentative.pop(key, None)  # its spill carries a value
            core.issue(
                "dma_copy",
                "dma",
                {"dst": slot, "src": self.saved[block]},
                {SPILL_ATTR: "reload"},
                loc=loc,
                loops=loops,
            )
        elif block not in self.written and self.fill is not None and not whole_write:
            core.issue(
                "memset", "vector", {"dst": slot, "value": self.fill}, {}, loc=loc, loops=loops
            )
            self.dirty.add(block)
            self.written.add(block)
        self.slots[block] = slot
        return slot

    def _allocate_slot(self, block: int) -> View:
        core = self.ctx.core

        def allocate(or_none: bool) -> View | None:
            return core.allocate(
                self.space,
                (self.partitions, self.block_elems),
                self.dtype,
                name=self.block_label(block),
                loc=self.loc,
                or_none=or_none,
            )

        while True:
            slot = allocate(or_none=True)  # (no error message is made for a full space)
            if slot is not None:
                return slot
            placement = self.pool.placement
            if placement is not None and placement.placed_whole:
                return allocate(or_none=False)  # raises: placed_launch runs the launch
                # again, block by block
            if self.pool.evict_one(self.space):
                continue
            if self.space == "sbuf" and not self.pool.live(self.space):
                # SBUF is held by whole tiles Python keeps alive: trnsim's overflow
                # fallback for those (see _overflow, which warns) takes the slot too
                from trnsim.compat.neuronxcc.nki import _overflow

                nbytes = self.block_elems * self.dtype.itemsize
                return _overflow.allocate(
                    self.ctx, self.partitions, nbytes, self.dtype, self.block_label(block)
                )
            try:
                return allocate(or_none=False)  # raises the space's error
            except AllocationError as e:
                live = self.pool.live(self.space)
                shown = ", ".join(live[:8]) + (
                    f" and {len(live) - 8} more" if len(live) > 8 else ""
                )
                raise AllocationError(
                    f"{e.message}; {self.block_label(block)} needs a slot but every "
                    f"block in {self.space} is used by this instruction"
                    + (f" (live blocks: {shown})" if live else "")
                ) from None

    def evict(self, block: int) -> None:
        """Give the slot of a resident block up, saving its value first if it changed."""
        slot = self.slots.pop(block)
        self.pool.forget(self, block)
        if block in self.dirty and self.space == "sbuf":
            hbm = self.saved.get(block)
            if hbm is None:
                hbm = self.ctx.device.allocate_hbm(
                    (self.partitions, self.block_elems),
                    self.dtype,
                    f"{self.name or 'block'}_spill",
                    kind="private_hbm",
                    core=self.core,
                    poison=False,
                )
                self.saved[block] = hbm
            old = self.pool.tentative.get((self.serial, block))
            if old is not None and old.index in self.pool.refetched:
                self.pool.superseded.add(old.index)  # re-read from HBM, now overwritten
            self.pool.tentative[(self.serial, block)] = self.ctx.core.issue(
                "dma_copy",
                "dma",
                {"dst": hbm, "src": slot},
                {SPILL_ATTR: "save"},
                loc=capture_location(),
                loops=tuple(self.ctx.loops),
            )
        elif block in self.dirty:
            _psum_spill.save(self, block, slot)  # PSUM -> an SBUF area (DMAs do not reach PSUM)
        self.dirty.discard(block)
        slot.buffer.release()


def finish(ctx: Any, placement: Placement | None = None) -> None:
    """End of a B1 program under the launch's `placement`: the launch runs again if it should
    know its block accesses ahead (RunAgain after its last program, rule evict_by_next_use);
    else drop the spills of blocks never read after them (dead values) and renumber the
    program."""
    dead: set[int] = set()
    pools = (ctx.extra.get("b1_block_pools") or {}).values()
    run_again = any([pool.record() for pool in pools])
    if placement is not None:
        placement.program_finished(run_again)
    for pool in pools:
        dead.update(instr.index for instr in pool.tentative.values())
        dead.update(pool.superseded)
        pool.tentative.clear()
    if dead:
        drop_instructions(ctx.device.program, dead)
        drop_from_records(ctx.device.allocations, dead)


def drop_instructions(program: list, dead: set[int]) -> None:
    """Remove instructions by index and renumber the rest (indices and explicit deps)."""
    remap: dict[int, int] = {}
    kept = []
    for ins in program:
        if ins.index in dead:
            continue
        remap[ins.index] = len(kept)
        kept.append(ins)
    for ins in kept:
        ins.index = remap[ins.index]
        if ins.deps:
            ins.deps = tuple(remap[d] for d in ins.deps if d in remap)
    program[:] = kept
