"""The PSUM writer tags' remembered rectangle (semantics/psum_writers.py) changes no value: random
programs of matmuls (accumulate None/True/False), memsets and reallocations over overlapping PSUM
tiles give the same bits with it as with every tag read back."""

from __future__ import annotations

import warnings

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim.semantics.psum_writers import PsumWriters

M, N = 32, 128


def _script(seed: int, steps: int = 40) -> list[tuple]:
    rng = np.random.default_rng(seed)
    ops = []
    for _ in range(steps):
        t = int(rng.integers(3))
        c0 = int(rng.choice([0, 0, 0, 32, 64]))
        c1 = int(rng.choice([c for c in (32, 64, 96, 128, 128, 128) if c > c0]))
        kind = rng.choice(["mm", "mm", "mm", "mm", "memset", "realloc"])
        acc = [None, None, True, False][int(rng.integers(4))]
        ops.append((str(kind), t, c0, c1, acc))
    return ops


def _kernel(script):
    def kernel(a, b):
        at = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        bt = nl.ndarray(b.shape, b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=at, src=a)
        nisa.dma_copy(dst=bt, src=b)
        # tiles 0 and 1 share PSUM words (separate accumulation groups); tile 2 is apart
        where = [(0, 0), (0, 0), (M, 0)]

        def fresh(t):
            return nl.ndarray((M, N), nl.float32, buffer=nl.psum, address=where[t])

        tiles = [fresh(t) for t in range(3)]
        for kind, t, c0, c1, acc in script:
            if kind == "mm":
                nisa.nc_matmul(dst=tiles[t][:, c0:c1], stationary=at, moving=bt[:, c0:c1],
                               accumulate=acc)
            elif kind == "memset":
                nisa.memset(dst=tiles[t][:, c0:c1], value=0.25)
            else:
                tiles[t] = fresh(t)
        outs = []
        for tile in tiles:
            sb = nl.ndarray((M, N), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=sb, src=tile)
            out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=sb)
            outs.append(out)
        return tuple(outs)

    return kernel


def _run(script, a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # accumulate=True onto unwritten words warns
        outs = nki.simulate(_kernel(script), chip="trn2")(a, b)
    return [np.asarray(o).view(np.uint32) for o in outs]


@pytest.mark.parametrize("seed", range(6))
def test_remembered_rectangle_gives_the_bits_of_reading_every_tag(seed, monkeypatch):
    rng = np.random.default_rng(100 + seed)
    a = rng.standard_normal((64, M)).astype(np.float32)
    b = rng.standard_normal((64, N)).astype(np.float32)
    script = _script(seed)
    hits = []
    known = PsumWriters.uniform_tag

    def counting(self, rows, words):
        tag = known(self, rows, words)
        hits.append(tag is not None)
        return tag

    monkeypatch.setattr(PsumWriters, "uniform_tag", counting)
    fast = _run(script, a, b)
    monkeypatch.setattr(PsumWriters, "uniform_tag", lambda self, rows, words: None)
    slow = _run(script, a, b)
    assert any(hits)
    for f, s in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(f, s)


def test_uniform_tag_is_what_the_tags_hold():
    """Random stores: whenever a rectangle is answered, every tag in it is that tag."""
    rng = np.random.default_rng(1)
    w = PsumWriters(8, 16)
    rects = [(slice(0, 8), slice(0, 16)), (slice(0, 4), slice(4, 12)), (slice(2, 8), slice(0, 8))]
    answered = 0
    for step in range(300):
        rows, words = rects[int(rng.integers(len(rects)))]
        tag = int(rng.integers(1, 4))
        if rng.random() < 0.5:
            w.set_rect(rows, words, tag)
        elif rng.random() < 0.5:
            w[rows, words] = tag
        else:
            w[int(rng.integers(8)), int(rng.integers(16))] = tag
        rows, words = rects[int(rng.integers(len(rects)))]
        got = w.uniform_tag(rows, words)
        if got is not None:
            answered += 1
            assert (w[rows, words] == got).all(), step
    assert answered > 20
