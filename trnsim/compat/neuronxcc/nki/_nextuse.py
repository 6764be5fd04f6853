"""Beta-1 block eviction with foresight: the block whose value is needed again last goes first.

Rule evict_by_next_use (a switch of trnsim.timing.compiler.CompilerRules, on by default). When
SBUF is full, the compiler chooses which live block gives its slot up knowing the whole
program (a B1 kernel is traced, its loops unrolled, before anything is allocated), so it can
keep the blocks it needs soonest: Belady's rule (evict the block whose next use is farthest
away; optimal for the number of reloads, L. A. Belady, IBM Systems Journal 5(2), 1966). The
compiler's own rule is not documented; the evidence is in its profiles. NKIBench trn1 gqa
(github.com/zhang677/AccelOpt profile_results.csv) reads its 16 MB value tensor v once although
a loop reads the same 32 blocks of it (128 KiB per partition) 512 times beside blocks that do
not fit, and spills its scores instead (1.1 GB saved, each reloaded once): least recently used
eviction, whose worst case is a cycle longer than what fits, re-read v 512 times (trnsim
before this rule: 12 GB of HBM reads where the profile shows 1.2 GB).

trnsim runs a kernel eagerly, so the future is known only after a run: when a program of the
launch read an evicted block again, the launch's last program ends with RunAgain (before the
outputs go back to the host), and the launch runs again (`_placement.placed_launch`) with each
program's block accesses from the first run, which are the same in both runs (eviction changes
where a block lives, not what the kernel accesses).
Its next need is the next access that reads the block's value; an access that writes the whole
block first means the value is dead (NEVER). A block never needed again is evicted first; ties
go to the least recently used. If a run's accesses leave the recorded ones (a kernel whose
accesses depend on where its blocks live), the pool falls back to least recently used for the
rest of the run (`Placement.diverged`). Knows block keys and positions; nothing of memory.
"""

from __future__ import annotations

NEVER = 1 << 62  # the position of a next need that never comes
BLOCK_BITS = 32  # a block key: the tensor's number in its pool << BLOCK_BITS | block index


class RunAgain(Exception):
    """A run read evicted blocks again without knowing its accesses ahead: _placement runs the
    launch again with the accesses recorded (Placement.recorded)."""


def block_key(tensor_number: int, block: int) -> int:
    return tensor_number << BLOCK_BITS | block


class NextUse:
    """The block accesses of one pool in one run, in order, and for each the position of the
    next access of the same block that needs its value (NEVER when the block's next access
    writes it whole, or there is none)."""

    __slots__ = ("keys", "needed_next")

    def __init__(self, keys: list[int], whole_writes: list[bool]) -> None:
        self.keys = keys
        needed_next = [NEVER] * len(keys)
        ahead: dict[int, int] = {}  # key -> the next need seen from the position being read
        for t in range(len(keys) - 1, -1, -1):
            k = keys[t]
            needed_next[t] = ahead.get(k, NEVER)
            ahead[k] = NEVER if whole_writes[t] else t
        self.needed_next = needed_next

    def at(self, t: int, key: int) -> int | None:
        """The next need after access `t` if access `t` is to `key` as recorded, else None."""
        if t < len(self.keys) and self.keys[t] == key:
            return self.needed_next[t]
        return None
