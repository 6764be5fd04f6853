"""Deferred poison fills of fresh SBUF/PSUM tiles (hostmem.PendingFills): every access sees
the bytes it would see had each tile been poisoned when it was allocated."""

from __future__ import annotations

import numpy as np
import pytest

from trnsim import core as core_mod
from trnsim import dtypes as dt
from trnsim import hostmem
from trnsim.core import Device
from trnsim.memory import Layout, View
from trnsim.nki.runner import resolve_chip

SHAPES = ((128, 64), (64, 32), (128, 16), (32, 128))
DTYPES = (dt.float32, dt.bfloat16, dt.uint8)


def script(rng: np.random.Generator, steps: int = 60) -> list[tuple]:
    """A random sequence of allocations (some at explicit, overlapping addresses), whole and
    partial writes, and reads."""
    ops = []
    for _ in range(steps):
        kind = rng.choice(["alloc", "alloc_at", "write", "write_part", "write_box",
                           "write_bytes", "write_strided", "read", "read_part", "drop"])
        ops.append((str(kind), int(rng.integers(1 << 30))))
    return ops


def play(ops: list[tuple], lazy: bool, monkeypatch: pytest.MonkeyPatch, space: str) -> list:
    """Run the script on a fresh core; returns every value read, as bits."""
    if not lazy:
        monkeypatch.setattr(core_mod, "PendingFills", lambda data: None)
    device = Device(resolve_chip("trn2"), values=True)
    core = device.core(0)
    live, seen = [], []
    for kind, seed in ops:
        r = np.random.default_rng(seed)
        if len(live) >= 6:  # PSUM holds few bank-aligned tiles
            seen.append(np.ascontiguousarray(live.pop(0).read()).view(np.uint8).copy())
        if kind in ("alloc", "alloc_at") or not live:
            shape = SHAPES[r.integers(len(SHAPES))]
            dtype = DTYPES[r.integers(len(DTYPES))]
            if space == "psum":
                dtype = dt.float32
            address = None
            if kind == "alloc_at":
                address = (int(r.integers(0, 128 - shape[0] + 1)), int(r.integers(0, 64)))
            live.append(core.allocate(space, shape, dtype, name=f"t{len(live)}",
                                      address=address))
            continue
        v = live[r.integers(len(live))]
        if kind == "write":
            v.write_raw(r.integers(0, 200, v.shape).astype(v.dtype.storage))
        elif kind == "write_part":
            v2 = View(v.buffer, Layout(v.dtype, 0, (v.shape[0], v.shape[1] // 2), v.layout.strides))
            v2.write_raw(r.integers(0, 200, v2.shape).astype(v.dtype.storage))
        elif kind == "write_box":  # partitions [p0, p1) x columns [c0, c1): a dense box
            p0, c0 = int(r.integers(v.shape[0])), int(r.integers(v.shape[1]))
            p1, c1 = int(r.integers(p0, v.shape[0])) + 1, int(r.integers(c0, v.shape[1])) + 1
            _window(v, p0, p1, c0, c1).write_raw(
                r.integers(0, 200, (p1 - p0, c1 - c0)).astype(v.dtype.storage))
        elif kind == "write_bytes":  # a byte view off the elements' boundaries
            b = _bytes(v)
            c0 = int(r.integers(b.shape[1]))
            c1 = int(r.integers(c0, b.shape[1])) + 1
            _window(b, 0, b.shape[0], c0, c1).write_raw(
                r.integers(0, 200, (b.shape[0], c1 - c0)).astype(np.uint8))
        elif kind == "write_strided":  # every other column: not a dense box
            lay = v.layout
            v2 = View(v.buffer, Layout(v.dtype, 0, (v.shape[0], v.shape[1] // 2),
                                       (lay.strides[0], 2)))
            v2.write_raw(r.integers(0, 200, v2.shape).astype(v.dtype.storage))
        elif kind == "read":
            seen.append(np.ascontiguousarray(v.read()).view(np.uint8).copy())
        elif kind == "read_part":
            p0, c0 = int(r.integers(v.shape[0])), int(r.integers(v.shape[1]))
            seen.append(np.ascontiguousarray(_window(v, p0, v.shape[0], c0, v.shape[1]).read())
                        .view(np.uint8).copy())
        elif kind == "drop" and len(live) > 1:
            live.remove(v)
    seen.extend(np.ascontiguousarray(v.read()).view(np.uint8).copy() for v in live)
    return seen


def _window(v: View, p0: int, p1: int, c0: int, c1: int) -> View:
    """Partitions [p0, p1) and columns [c0, c1) of a 2-D on-chip view."""
    lay = v.layout
    return View(v.buffer, Layout(v.dtype, lay.offset + p0 * lay.strides[0] + c0 * lay.strides[1],
                                 (p1 - p0, c1 - c0), lay.strides))


def _bytes(v: View) -> View:
    """The whole tile of `v` as uint8 elements."""
    buf = v.buffer
    return View(buf, Layout(dt.uint8, 0, (buf.partitions, buf.nbytes), (buf.nbytes, 1)))


@pytest.mark.parametrize("space", ["sbuf", "psum"])
@pytest.mark.parametrize("seed", range(12))
def test_deferred_fills_read_like_eager_fills(seed, space, monkeypatch):
    ops = script(np.random.default_rng(seed))
    lazy = play(ops, True, monkeypatch, space)
    eager = play(ops, False, monkeypatch, space)
    assert len(eager) == len(lazy)
    for a, b in zip(eager, lazy, strict=True):
        np.testing.assert_array_equal(a, b)


def test_fresh_tile_reads_poison_and_whole_write_drops_the_fill():
    device = Device(resolve_chip("trn2"), values=True)
    core = device.core(0)
    t = core.allocate("sbuf", (128, 64), dt.float32, name="t")
    assert t.buffer.fresh and core.sbuf.fills.fills
    t.write_raw(np.ones((128, 64), np.float32))
    assert not core.sbuf.fills.fills and not t.buffer.fresh
    np.testing.assert_array_equal(t.read(), 1.0)
    u = core.allocate("sbuf", (128, 64), dt.float32, name="u")
    assert np.isnan(u.read()).all()  # never written: reads as poison


def test_a_failed_write_keeps_the_fill():
    device = Device(resolve_chip("trn2"), values=True)
    core = device.core(0)
    t = core.allocate("sbuf", (128, 64), dt.float32, name="t")
    with pytest.raises(ValueError, match="broadcast"):
        t.write_raw(np.ones((3, 5), np.float32))
    assert np.isnan(t.read()).all()


def _hbm_script(monkeypatch, lazy: bool) -> np.ndarray:
    if not lazy:
        monkeypatch.setattr(hostmem.PendingPoison, "overwrite", lambda self, lo, hi: False)
    device = Device(resolve_chip("trn2"), values=True)
    n = 3 * hostmem.HOST_CHUNK // 4 + 1000  # float32 elements: three chunks and a bit
    t = device.allocate_hbm((n,), dt.float32, name="t")
    rng = np.random.default_rng(3)
    spans = [(0, 10), (hostmem.HOST_CHUNK // 4 - 7, hostmem.HOST_CHUNK // 2 + 5), (n - 900, n)]
    for a, b in spans:  # contiguous writes: inside a chunk, across two chunk edges, the tail
        v = View(t.buffer, Layout(dt.float32, a, (b - a,), (1,)))
        v.write_raw(rng.standard_normal(b - a).astype(np.float32))
    return np.ascontiguousarray(t.read()).view(np.uint32)


def test_hbm_contiguous_writes_skip_only_poison_they_overwrite(monkeypatch):
    lazy = _hbm_script(monkeypatch, True)
    eager = _hbm_script(monkeypatch, False)
    np.testing.assert_array_equal(lazy, eager)
    assert np.isnan(lazy.view(np.float32)[20])  # never written: poison
