"""How one Beta-1 launch places tensors with block dimensions (whole or block by block) and
whether evicted clean copies of HBM are re-read (rule refetch_clean_blocks, _refetch.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trnsim.errors import AllocationError


class Placement:
    """How one launch places tensors with block dimensions. First attempt: one allocation of
    the whole tensor when it fits at its declaration (fewer, larger instructions), else block
    by block. The compiler gives a block memory only while it is live, so a tensor placed
    whole early may hold memory a block tensor needs before the first is used: a launch that
    then runs out of memory, or has to evict a block, runs again with every block tensor
    placed block by block (`placed_launch`), and only that attempt's AllocationError is final."""

    def __init__(self, whole_first: bool = True, refetch_clean: bool = True) -> None:
        self.whole_first = whole_first
        self.refetch_clean = refetch_clean  # rule refetch_clean_blocks (_refetch.py)
        self.placed_whole = False  # some block tensor of this attempt was placed whole


def placed_launch(attempt: Callable[[Placement], Any], refetch_clean: bool = True) -> Any:
    """attempt(placement), again by live block if the first placement ran out of memory."""
    first = Placement(refetch_clean=refetch_clean)
    try:
        return attempt(first)
    except AllocationError:
        if not first.placed_whole:
            raise
    return attempt(Placement(whole_first=False, refetch_clean=refetch_clean))
