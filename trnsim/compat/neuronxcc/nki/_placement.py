"""How one Beta-1 launch places tensors with block dimensions (whole or block by block), whether
evicted clean copies of HBM are re-read (rule refetch_clean_blocks, _refetch.py) and which block
is evicted (rule evict_by_next_use, _nextuse.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trnsim.compat.neuronxcc.nki._nextuse import NextUse, RunAgain
from trnsim.errors import AllocationError


class Placement:
    """How one launch places tensors with block dimensions. First attempt: one allocation of
    the whole tensor when it fits at its declaration (fewer, larger instructions), else block
    by block. The compiler gives a block memory only while it is live, so a tensor placed
    whole early may hold memory a block tensor needs before the first is used: a launch that
    then runs out of memory, or has to evict a block, runs again with every block tensor
    placed block by block (`placed_launch`), and only that attempt's AllocationError is final.

    With `foresight` (rule evict_by_next_use), `next_use` holds per block pool (numbered in the
    order the launch makes them) the block accesses of an earlier run; `recorded` collects
    this run's."""

    def __init__(
        self,
        whole_first: bool = True,
        refetch_clean: bool = True,
        foresight: bool = True,
        next_use: dict[int, NextUse] | None = None,
        programs: int = 1,
    ) -> None:
        self.whole_first = whole_first
        self.refetch_clean = refetch_clean  # rule refetch_clean_blocks (_refetch.py)
        self.foresight = foresight  # rule evict_by_next_use (_nextuse.py)
        self.placed_whole = False  # some block tensor of this attempt was placed whole
        self.next_use = next_use or {}  # pool number -> its accesses, known ahead
        self.recorded: dict[int, NextUse] = {}  # pool number -> this run's accesses
        self.pools = 0  # block pools made under this placement so far
        self.diverged = False  # a pool's accesses left the recorded ones (then: LRU order)
        self.programs = programs  # SPMD programs of the launch: RunAgain after the last one
        self.finished = 0  # programs finished so far
        self.run_again = False  # a finished program read evicted blocks without foresight

    def program_finished(self, run_again: bool) -> None:
        """One program of the launch ended (`run_again`: it should have known its accesses
        ahead); after the last one, RunAgain if any should have."""
        self.finished += 1
        self.run_again = self.run_again or run_again
        if self.run_again and self.finished >= self.programs:
            raise RunAgain()


def placed_launch(
    attempt: Callable[[Placement], Any],
    refetch_clean: bool = True,
    next_use: bool = True,
    programs: int = 1,
) -> Any:
    """attempt(placement), again by live block if the first placement ran out of memory; with
    `next_use` (rule evict_by_next_use), a run that read an evicted block again runs once more
    with its block accesses known ahead (RunAgain, raised when its last program ends, before
    the outputs go back to the host)."""
    placement = Placement(refetch_clean=refetch_clean, foresight=next_use, programs=programs)
    while True:
        try:
            return attempt(placement)
        except AllocationError:
            if not (placement.whole_first and placement.placed_whole):
                raise
            placement = Placement(False, refetch_clean, next_use, programs=programs)
        except RunAgain:
            # the same placement decisions as the recorded run: block by block unless a block
            # tensor was placed whole (then only whole tiles evicted blocks)
            known = {**placement.next_use, **placement.recorded}
            whole = placement.whole_first and placement.placed_whole
            placement = Placement(whole, refetch_clean, next_use, known, programs)
