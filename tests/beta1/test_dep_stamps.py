"""The affine_range dependency tracker's summaries (one stamp for a tile written whole, one
per block for a buffer written block by block) answer exactly as the element-precise stamps
do, over random write/read sequences."""

from __future__ import annotations

import numpy as np
import pytest

from trnsim import dtypes as dt
from trnsim.allocation import OnChipMemory
from trnsim.compat.neuronxcc.nki import _deps
from trnsim.compat.neuronxcc.nki._state import LoopFrame
from trnsim.memory import Buffer, Layout, View

F32 = dt.resolve("float32")
BF16 = dt.resolve("bfloat16")


def _views():
    mem = OnChipMemory("sbuf", 8, 1024, 64)
    buf = Buffer(mem, "sbuf", 0, 0, 8, 0, 64, "sbuf", "t")  # 8 partitions x 16 fp32
    whole = View(buf, Layout(F32, 0, (8, 16), (16, 1)))
    parts = [
        View(buf, Layout(F32, 0, (4, 16), (16, 1))),  # partitions 0-3
        View(buf, Layout(F32, 64, (4, 8), (16, 1))),  # partitions 4-7, first half
        View(buf, Layout(F32, 8, (8, 8), (16, 1))),  # every partition, second half
        # blocks of a multi-tile buffer [4, par 8, 4], as `t[k, ...]` indexes it
        *(View(buf, Layout(F32, 4 * k, (8, 4), (16, 1))) for k in range(4)),
        View(buf, Layout(F32, 2, (8, 4), (16, 1))),  # straddles blocks 0 and 1
        View(buf, Layout(F32, 0, (8, 8), (16, 2))),  # every other element
        View(buf, Layout(F32, 16, (2, 4), (16, 1))),  # part of block 0 (partitions 1-2)
        View(buf, Layout(F32, 8, (8, 2), (16, 2))),  # columns 8 and 10: strided, in block 2
        View(buf, Layout(F32, 9, (8, 1), (16, 1))),  # column 9: inside that one's box
        View(buf, Layout(BF16, 8, (8, 2), (32, 2))),  # bf16 over block 1, granule aligned
        View(buf, Layout(BF16, 1, (8, 4), (32, 1))),  # bf16, not aligned: untracked
    ]
    return whole, parts


@pytest.mark.parametrize("seed", range(60))
def test_summarised_stamps_match_element_stamps(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    whole, parts = _views()
    views = [whole, *parts]
    blocks = parts[3:7]
    fast, exact = _deps.Tracker(), _deps.Tracker()
    frames = [
        LoopFrame(loop_id=0, kind="affine_range", start=0, iter_start=0),
        LoopFrame(loop_id=1, kind="affine_range", start=0, iter_start=0),
    ]
    for index in range(80):
        if rng.random() < 0.1:  # a new outer iteration: the inner loop starts again
            frames[0].iter_start = frames[1].start = frames[1].iter_start = index
            frames[0].iteration += 1
        elif rng.random() < 0.2:  # a new inner iteration
            frames[1].iter_start = index
            frames[1].iteration += 1
        # mostly blocks, as a kernel's loops write them, with the odd stray access
        pool = blocks if rng.random() < 0.5 else views
        view = pool[rng.integers(len(pool))]
        dst = pool[rng.integers(len(pool))]
        rmw, acc_ok = bool(rng.random() < 0.4), bool(rng.random() < 0.5)
        got = fast._hit(frames, view, acc_ok)
        with monkeypatch.context() as m:
            m.setattr(_deps, "_SUMMARIES", False)  # element-precise only
            want = exact._hit(frames, view, acc_ok)
            exact.stamp({"dst": dst}, index, rmw)
        assert got == want, (seed, index)
        fast.stamp({"dst": dst}, index, rmw)


def test_blocks_written_one_by_one_stay_summarised():
    _, parts = _views()
    blocks = parts[3:7]
    tracker = _deps.Tracker()
    frames = [LoopFrame(loop_id=0, kind="affine_range", start=0, iter_start=0)]
    for k, block in enumerate(blocks):
        frames[0].iter_start, frames[0].iteration = k, k
        assert tracker._hit(frames, block, False) is None
        tracker.stamp({"dst": block}, k, False)
    sh = tracker._shadow(blocks[0], create=False)
    assert sh.pieces is not None and sh._arr is None  # no element array was needed
    frames[0].iter_start, frames[0].iteration = 4, 4
    assert tracker._hit(frames, blocks[2], False) == (frames[0], 2)  # written in iteration 2
