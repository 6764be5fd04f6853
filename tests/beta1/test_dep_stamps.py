"""The affine_range dependency tracker's whole-tile fast path (one stamp for a tile written
whole) answers exactly as the element-precise stamps do, over random write/read sequences."""

from __future__ import annotations

import numpy as np
import pytest

from trnsim import dtypes as dt
from trnsim.allocation import OnChipMemory
from trnsim.compat.neuronxcc.nki import _deps
from trnsim.compat.neuronxcc.nki._state import LoopFrame
from trnsim.memory import Buffer, Layout, View

F32 = dt.resolve("float32")


def _views():
    mem = OnChipMemory("sbuf", 8, 1024, 64)
    buf = Buffer(mem, "sbuf", 0, 0, 8, 0, 64, "sbuf", "t")  # 8 partitions x 16 fp32
    whole = View(buf, Layout(F32, 0, (8, 16), (16, 1)))
    parts = [
        View(buf, Layout(F32, 0, (4, 16), (16, 1))),  # partitions 0-3
        View(buf, Layout(F32, 64, (4, 8), (16, 1))),  # partitions 4-7, first half
        View(buf, Layout(F32, 8, (8, 8), (16, 1))),  # every partition, second half
    ]
    return whole, parts


@pytest.mark.parametrize("seed", range(20))
def test_whole_tile_stamps_match_element_stamps(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    whole, parts = _views()
    views = [whole, *parts]
    fast, exact = _deps.Tracker(), _deps.Tracker()
    frames = [LoopFrame(loop_id=0, kind="affine_range", start=0, iter_start=0)]
    for index in range(60):
        if rng.random() < 0.2:  # a new iteration: earlier writes become loop-carried
            frames[0].iter_start = index
            frames[0].iteration += 1
        view = views[rng.integers(len(views))]
        rmw, acc_ok = bool(rng.random() < 0.4), bool(rng.random() < 0.5)
        got = fast._hit(frames, view, acc_ok)
        with monkeypatch.context() as m:
            m.setattr(_deps, "_whole", lambda sh, v: False)  # element-precise only
            want = exact._hit(frames, view, acc_ok)
            exact.stamp({"dst": views[index % len(views)]}, index, rmw)
        assert got == want, (seed, index)
        fast.stamp({"dst": views[index % len(views)]}, index, rmw)
