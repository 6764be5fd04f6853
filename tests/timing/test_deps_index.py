"""The dependency tracker's region index (deps._Space): each new region is linked to every
earlier region sharing a byte with it (never fewer: a missed link is a missed dependency),
exactly as before for plain/plain and same-pitch pairs, only to bounding-box overlaps
otherwise, and in a fixed order; checked against byte sets over random mixes of plain and
row-pitched regions (column blocks of HBM rows)."""

from __future__ import annotations

import numpy as np
import pytest

from trnsim.timing.deps import _Space


def _runs(n) -> list[tuple[int, int]]:
    if not n.pitch:
        return [(n.b0, n.b1)]
    return [(s, s + n.run) for s in range(n.b0, n.b1 - n.run + 1, n.pitch)]


def _share_byte(a, b) -> bool:
    return any(s < e2 and s2 < e for s, e in _runs(a) for s2, e2 in _runs(b))


def _box(o, n) -> bool:
    return not (o.b1 <= n.b0 or n.b1 <= o.b0 or o.p1 <= n.p0 or n.p1 <= o.p0)


@pytest.mark.parametrize("seed", range(30))
def test_index_links_every_shared_byte(seed):
    rng = np.random.default_rng(seed)
    shift = 12
    space = _Space(shift)
    made = []
    for _ in range(100):
        p0 = int(rng.integers(0, 4))
        p1 = p0 + int(rng.integers(1, 3))
        if rng.random() < 0.6:  # a column block of rows of a row-major tensor
            pitch = int(rng.choice([4096, 6000, 1 << 13]))
            run = int(rng.integers(1, 9)) * 256
            rows = int(rng.integers(2, 12))
            b0 = int(rng.integers(0, 40000))
            b1 = b0 + (rows - 1) * pitch + run
        else:
            pitch, run = 0, 0
            b0 = int(rng.integers(0, 60000))
            b1 = b0 + int(rng.integers(1, 20000))
        key = (p0, p1, b0, b1, pitch)
        if key in space.nodes:
            continue
        n = space.node(key, run)
        linked = {id(o) for o in n.neighbours}
        for o in made:
            shares = _box(o, n) and _share_byte(o, n)
            if shares:
                assert id(o) in linked, (seed, key, o.seq)  # sound
            if o.pitch == n.pitch:
                assert (id(o) in linked) == o.overlaps(n), (seed, key, o.seq)  # as before
            elif id(o) in linked:
                assert _box(o, n), (seed, key, o.seq)
        first = n.b0 >> shift
        assert n.neighbours == sorted(
            n.neighbours, key=lambda o: (max(first, o.b0 >> shift), o.seq)
        )
        made.append(n)
