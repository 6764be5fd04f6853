"""Memory model: lazy HBM, allocators, views, bounds and poisoning."""

from __future__ import annotations

import resource

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trnsim import dtypes as dt
from trnsim.allocation import HBM, Allocator, OnChipMemory
from trnsim.errors import AllocationError, OutOfBoundsError
from trnsim.memory import Buffer, Layout, View, check_bounds

GiB = 1 << 30


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def test_100gib_hbm_allocation_stays_lazy():
    """Allocate 100 GiB of trn3-sized HBM, write 1 MiB at its far end, read it back."""
    hbm = HBM(144 * GiB)
    before = _rss_bytes()
    handle, off = hbm.allocate(100 * GiB)
    buf = Buffer(hbm, "hbm", None, 0, 1, off, 100 * GiB, "shared_hbm", "big", handle)
    mib = 1 << 20
    n = mib // 4
    view = View(buf, Layout(dt.float32, (100 * GiB - mib) // 4, (n,), (1,)))
    data = np.arange(n, dtype=np.float32)
    view.write(data)
    np.testing.assert_array_equal(view.read(), data)
    grown = _rss_bytes() - before
    assert grown < 64 * (1 << 20), f"resident memory grew by {grown / 2**20:.1f} MiB"


def test_hbm_full_raises_allocation_error_with_numbers():
    hbm = HBM(1 << 20)
    hbm.allocate(1 << 19)
    with pytest.raises(AllocationError, match=r"cannot allocate 786432 bytes") as e:
        hbm.allocate(3 << 18)
    assert "free" in str(e.value)
    assert "capacity 1048576" in str(e.value)


def test_allocator_rotates_addresses_for_multibuffering():
    a = Allocator("sbuf", 128, 4096, 64)
    h1, b1 = a.allocate(0, 128, 1024)
    a.free(h1)
    h2, b2 = a.allocate(0, 128, 1024)
    assert b2 != b1  # next-fit: a freed tile is not reused at once
    a.free(h2)
    offsets = set()
    for _ in range(4):
        h, b = a.allocate(0, 128, 1024)
        offsets.add(b)
        a.free(h)
    assert len(offsets) == 4


def test_allocator_respects_partition_ranges():
    a = Allocator("sbuf", 128, 1024, 64)
    a.allocate(0, 64, 1024)
    _, b = a.allocate(64, 64, 1024)  # other partitions are still free at byte 0
    assert b == 0
    with pytest.raises(AllocationError):
        a.allocate(0, 128, 64)


def _probing_allocate(a: Allocator, p0: int, parts: int, size: int, align: int | None):
    """The next-fit search by definition: probe from the cursor (then from 0), skipping past
    each blocking allocation (Allocator.try_allocate finds the same start in one sweep)."""
    align = align or a.align
    size = max(size, 1)
    for start in (a._cursor, 0):
        b0 = -(-start // align) * align
        while b0 + size <= a.nbytes:
            block = a._fits(p0, p0 + parts, b0, b0 + size)
            if block is None:
                return a._take(p0, p0 + parts, b0, size), b0
            b0 = -(-block // align) * align
    return None


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_allocator_sweep_matches_probing_next_fit(data):
    parts = data.draw(st.sampled_from([1, 4, 128]))
    nbytes = data.draw(st.sampled_from([64, 256, 4096]))
    align = data.draw(st.sampled_from([1, 4, 64]))
    fast, ref = Allocator("sbuf", parts, nbytes, align), Allocator("sbuf", parts, nbytes, align)
    held = []
    for _ in range(data.draw(st.integers(1, 40))):
        p0 = data.draw(st.integers(0, parts - 1))
        n = data.draw(st.integers(1, parts - p0))
        action = data.draw(st.sampled_from(["alloc", "alloc", "alloc", "free", "place"]))
        if action == "free" and held:
            h = held.pop(data.draw(st.integers(0, len(held) - 1)))
            fast.free(h)
            ref.free(h)
        elif action == "place":  # explicit addresses may overlap, or be empty
            b0 = data.draw(st.integers(0, nbytes - 1))
            size = data.draw(st.integers(0, nbytes - b0))
            held.append(fast.place(p0, n, b0, size))
            ref.place(p0, n, b0, size)
        else:
            size = data.draw(st.integers(0, nbytes // 2))
            how = data.draw(st.sampled_from([None, 2, 128]))
            got = fast.try_allocate(p0, n, size, how)
            want = _probing_allocate(ref, p0, n, size, how)
            assert got == want
            assert fast._cursor == ref._cursor and fast._live == ref._live
            if got is None:
                with pytest.raises(AllocationError, match="cannot allocate"):
                    fast.allocate(p0, n, size, how)
            else:
                held.append(got[0])


def test_onchip_view_strides_and_region():
    mem = OnChipMemory("sbuf", 128, 1024, 64)
    buf = Buffer(mem, "sbuf", 0, 32, 32, 128, 256, "sbuf", "t")
    f = 256 // 4
    view = View(buf, Layout(dt.float32, 0, (32, f), (f, 1)))
    vals = np.arange(32 * f, dtype=np.float32).reshape(32, f)
    view.write(vals)
    # Every other column of partitions 4..8.
    sub = View(buf, Layout(dt.float32, 4 * f + 1, (4, f // 2), (f, 2)))
    np.testing.assert_array_equal(sub.read(), vals[4:8, 1::2])
    r = sub.region()
    assert (r.partition_start, r.partitions) == (36, 4)
    assert (r.byte_start, r.byte_end) == (128 + 4, 128 + 4 * f)
    raw = mem.data[36, 128 + 4:128 + 8].view(np.float32)
    assert raw[0] == vals[4, 1]


@pytest.mark.parametrize(("layout", "msg"), [
    (Layout(dt.float32, 0, (33, 64), (64, 1)), "partitions"),
    (Layout(dt.float32, 0, (32, 65), (64, 1)), "elements"),
    (Layout(dt.float32, -1, (1, 1), (64, 1)), "elements"),
])
def test_onchip_bounds(layout, msg):
    mem = OnChipMemory("sbuf", 128, 1024, 64)
    buf = Buffer(mem, "sbuf", 0, 0, 32, 0, 256, "sbuf", "t")
    with pytest.raises(OutOfBoundsError, match=msg):
        check_bounds(buf, layout)


def test_kernel_allocations_are_poisoned():
    import nki
    import nki.isa as nisa
    import nki.language as nl

    def kernel(a):
        out_f = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=out_f, src=t)
        return out_f

    out = nki.simulate(kernel)(np.zeros((4, 8), np.float32))
    assert np.isnan(out).all()

    def ikernel(a):
        out_i = nl.ndarray((4, 8), nl.int32, buffer=nl.shared_hbm)
        return out_i

    assert (nki.simulate(ikernel)(np.zeros((4, 8), np.float32)) == 4).all()


def test_linear_allocator_next_fit_matches_the_rectangle_allocator():
    """HBM's LinearAllocator (policy "next") hands out the addresses the general rectangle
    Allocator would for one partition, over random allocate/free sequences."""
    from trnsim.allocation import LinearAllocator

    rng = np.random.default_rng(7)
    for _ in range(20):
        cap = int(rng.integers(1, 64)) * 4096
        lin, rect = LinearAllocator("hbm", cap, 64), Allocator("hbm", 1, cap, 64)
        live: list[tuple[int, int]] = []
        for _ in range(200):
            if live and rng.random() < 0.45:
                hl, hr = live.pop(int(rng.integers(len(live))))
                lin.free(hl)
                rect.free(hr)
                continue
            size = int(rng.integers(1, cap // 4))
            try:
                hr, br = rect.allocate(0, 1, size)
            except AllocationError:
                with pytest.raises(AllocationError):
                    lin.allocate(0, 1, size)
                continue
            hl, bl = lin.allocate(0, 1, size)
            assert bl == br
            live.append((hl, hr))
        assert lin.used_bytes == rect.used_bytes


def test_linear_allocator_first_fit_reuses_the_lowest_gap_and_coalesces():
    from trnsim.allocation import LinearAllocator

    a = LinearAllocator("hbm", 1 << 20, 64, policy="first")
    handles = [a.allocate(0, 1, 1000)[0] for _ in range(4)]  # at 0, 1024, 2048, 3072
    a.free(handles[1])
    a.free(handles[2])
    h, b = a.allocate(0, 1, 2000)  # the two freed neighbours merged into one gap
    assert b == 1024
    assert a.peak_bytes == 4 * 1000
    a.free(h)
    for x in (handles[0], handles[3]):
        a.free(x)
    assert a.used_bytes == 0
    assert a.largest_free() == 1 << 20
