"""Fast paths of the simulator's hot loop agree with the general code they shortcut.

Each speed-up (cached layout data, simple-key indexing, PSUM index slices, strided views over
the memory buffer, the static dma_copy, poison fills by bits, reused matmul work arrays) is
checked against the general computation, written out here or reached through the slow path.
"""

from __future__ import annotations

import itertools

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim import dtypes as dt
from trnsim.allocation import OnChipMemory
from trnsim.core import _poison_bits, fill_poison
from trnsim.errors import OutOfBoundsError
from trnsim.memory import Buffer, Layout, View, check_bounds, interned, poison_value, region_of
from trnsim.nki import views as vw
from trnsim.semantics._tensor_rules import psum_words

# ---------------------------------------------------------------- indexing


def _layouts():
    yield Layout(dt.bfloat16, 0, (128, 512), (512, 1)), True
    yield Layout(dt.float32, 64, (128, 4, 8), (96, 16, 2)), True
    yield Layout(dt.bfloat16, 10, (6, 1024), (2048, 1)), False
    yield Layout(dt.int32, 0, (3, 5, 7), (35, 7, 1)), False


_KEYS = [
    0,
    2,
    -1,
    5,
    slice(None),
    slice(1, 3),
    slice(0, 0),
    slice(2, 1),
    slice(None, 4),
    slice(-2, None),
    slice(0, 9999),
    slice(0, 4, 2),
    slice(0, 4, 1),
    (slice(None), 3),
    (1, slice(0, 2)),
    (slice(0, 2), slice(1, 2), 0),
    (0, 0),
    (0, 0, 0),
    (True, 0),
    [0, 1],
    (slice(None), slice(None), slice(None), slice(None)),
    Ellipsis,
    (Ellipsis, 0),
    (np.int64(1), 0),
    (slice(np.int64(0), 2),),
]


@pytest.mark.parametrize(("lay", "on_chip"), list(_layouts()))
def test_simple_index_layout_matches_index_layout(lay, on_chip):
    """Where the fast indexer answers, it gives index_layout's layout and kept dims; keys it
    declines (negative, out of range, stepped, non-int) are left to index_layout."""
    answered = 0
    for key in _KEYS:
        fast = vw.simple_index_layout(lay, key, on_chip)
        if fast is None:
            continue
        answered += 1
        assert fast == vw.index_layout(lay, key, on_chip), key
    assert answered >= 8


# ---------------------------------------------------------------- layout caches


def test_region_cache_follows_the_buffer_placement():
    """A Layout shared by two buffers gets each buffer's own region."""
    mem = OnChipMemory("sbuf", 128, 4096, 64)
    a = Buffer(mem, "sbuf", 0, 0, 128, 0, 1024, "sbuf")
    b = Buffer(mem, "sbuf", 0, 32, 64, 2048, 1024, "sbuf")
    lay = Layout(dt.float32, 4, (32, 8), (256, 1))
    ra, rb = region_of(a, lay), region_of(b, lay)
    assert (ra.partition_start, ra.byte_start) == (0, 16)
    assert (rb.partition_start, rb.byte_start) == (32, 2048 + 16)
    assert region_of(a, lay) == ra


def test_operand_record_cache_follows_name_tensor_and_placement():
    """A cached operand record is the record built from scratch for the same view: one per
    name, tensor name and buffer placement of a layout, never another buffer's."""
    from trnsim.operands import _geometry_fields, _new_operand, operand_record

    mem = OnChipMemory("sbuf", 128, 4096, 64)
    bufs = [Buffer(mem, "sbuf", 0, 0, 128, 0, 1024, "sbuf", "x"),
            Buffer(mem, "sbuf", 0, 0, 128, 0, 1024, "sbuf", "y"),  # same place, other name
            Buffer(mem, "sbuf", 0, 32, 64, 2048, 1024, "sbuf", "x"),
            Buffer(mem, "sbuf", 0, 0, 128, 0, 1024, "sbuf", "x")]  # a new tile, same place
    lay = interned(Layout(dt.float32, 4, (32, 8), (256, 1)))
    for _ in range(2):
        for buf in bufs:
            for name in ("src", "dst"):
                view = View(buf, lay)
                got = operand_record(name, view)
                want = _new_operand(_geometry_fields(lay.dtype, lay.shape, lay.strides, True),
                                    name, region_of(buf, lay), buf.name)
                assert got == want


# ---------------------------------------------------------------- strided views


def _reference_array(buf: Buffer, lay: Layout) -> np.ndarray:
    """The elements by explicit positions: partition-major storage flattened to 1-D."""
    isz = lay.dtype.itemsize
    raw = buf.raw()
    typed = raw.view(lay.dtype.storage).reshape(-1) if buf.on_chip else raw.view(lay.dtype.storage)
    f = buf.nbytes // isz
    out = np.empty(lay.shape, lay.dtype.storage)
    for idx in itertools.product(*(range(n) for n in lay.shape)):
        pos = lay.offset + sum(i * s for i, s in zip(idx, lay.strides, strict=True))
        if buf.on_chip:
            p, e = divmod(pos, f)
            out[idx] = raw[p].view(lay.dtype.storage)[e]
        else:
            out[idx] = typed[pos]
    return out


@pytest.mark.parametrize("dtype", [dt.float32, dt.bfloat16, dt.float8_e5m2, dt.int16])
@pytest.mark.parametrize(
    ("offset", "shape", "strides"),
    [
        (0, (4, 6), (16, 1)),
        (21, (3, 2, 3), (16, -2, 3)),
        (5, (4, 3), (16, 0)),
        (3, (3, 2), (32, 1)),
        (47, (4,), (-1,)),
    ],
)
def test_strided_array_reads_the_layout_elements(dtype, offset, shape, strides, rng):
    mem = OnChipMemory("sbuf", 8, 256, 64)
    mem.data[...] = rng.integers(0, 255, mem.data.shape, dtype=np.uint8)
    isz = dtype.itemsize
    buf = Buffer(mem, "sbuf", 0, 2, 6, 64, 16 * isz, "sbuf")
    lay = Layout(dtype, offset, shape, strides)
    got = View(buf, lay).array()
    np.testing.assert_array_equal(got.view(f"u{isz}"), _reference_array(buf, lay).view(f"u{isz}"))
    hbm_buf = Buffer(mem, "hbm", None, 0, 1, 0, mem.data.size, "hbm")
    hbm_buf.memory = type("Flat", (), {"data": mem.data.reshape(-1)})()
    flat = View(hbm_buf, Layout(dtype, offset + 40, shape, strides)).array()
    ref = _reference_array(hbm_buf, Layout(dtype, offset + 40, shape, strides))
    np.testing.assert_array_equal(flat.view(f"u{isz}"), ref.view(f"u{isz}"))


def test_poison_fill_writes_the_cast_poison_value():
    mem = OnChipMemory("sbuf", 4, 64, 64)
    for name in dt.ALL:
        d = dt.resolve(name)
        buf = Buffer(mem, "sbuf", 0, 0, 4, 0, 8 * d.itemsize, "sbuf")
        view = View(buf, Layout(d, 0, (4, 8), (8, 1)))
        fill_poison(view)
        want = np.zeros((4, 8), d.storage)
        if d.kind != "packed":
            want[...] = dt.cast(np.asarray(poison_value(d)), d)
        assert view.array().tobytes() == want.tobytes(), name
        assert not _poison_bits(d).flags.writeable


# ---------------------------------------------------------------- PSUM words


def _words_reference(view: View) -> tuple[np.ndarray, np.ndarray]:
    lay, buf = view.layout, view.buffer
    f = buf.nbytes // lay.dtype.itemsize
    part = np.empty(lay.shape, np.int64)
    word = np.empty(lay.shape, np.int64)
    for idx in itertools.product(*(range(n) for n in lay.shape)):
        pos = lay.offset + sum(i * s for i, s in zip(idx, lay.strides, strict=True))
        p, e = divmod(pos, f)
        part[idx] = buf.partition_start + p
        word[idx] = (buf.byte_start + e * lay.dtype.itemsize) // 4
    return part, word


@pytest.mark.parametrize(
    ("dtype", "offset", "shape", "strides"),
    [
        (dt.float32, 0, (128, 512), (512, 1)),
        (dt.float32, 512 * 3 + 128, (4, 64), (512, 1)),
        (dt.float32, 0, (16, 4, 32), (512, 128, 1)),
        (dt.float32, 7, (8, 10), (512, 2)),
        (dt.float32, 0, (1, 600), (5, 1)),
        (dt.float32, 0, (8, 2, 2), (1024, 1, 512)),
        (dt.bfloat16, 2, (8, 9), (1024, 1)),
        (dt.float32, 0, (8,), (512,)),
        (dt.float32, 0, (4, 600), (512, 1)),
    ],
)
def test_psum_words_matches_element_positions(dtype, offset, shape, strides):
    mem = OnChipMemory("psum", 128, 16384, 2048)
    buf = Buffer(mem, "psum", 0, 0, 128, 2048, 2048, "psum")
    view = View(buf, Layout(dtype, offset, shape, strides))
    state = np.arange(128 * 4096).reshape(128, 4096)
    part, word = _words_reference(view)
    np.testing.assert_array_equal(state[psum_words(view)], state[part, word])


# ---------------------------------------------------------------- instructions


def test_static_dma_copy_reads_overlapping_source_before_writing():
    """SBUF -> SBUF inside one tile, shifted by one column: every element moves once."""

    def kernel(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=t[:, 1:8], src=t[:, 0:7])
        out = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    want = x.copy()
    want[:, 1:8] = x[:, 0:7]
    np.testing.assert_array_equal(nki.simulate(kernel)(x), want)


def test_matmul_work_arrays_do_not_leak_between_instructions(rng):
    """Back-to-back matmuls of different shapes reuse work arrays; each result is exact."""

    def kernel(a, b, c, d):
        outs = []
        for s_hbm, m_hbm in ((a, b), (c, d), (a, b)):
            s = nl.ndarray(s_hbm.shape, s_hbm.dtype, buffer=nl.sbuf)
            m = nl.ndarray(m_hbm.shape, m_hbm.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=s, src=s_hbm)
            nisa.dma_copy(dst=m, src=m_hbm)
            acc = nl.ndarray((s.shape[1], m.shape[1]), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=acc, stationary=s, moving=m)
            res = nl.ndarray(acc.shape, nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            out = nl.ndarray(acc.shape, nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=res)
            outs.append(out)
        return tuple(outs)

    bf16 = dt.bfloat16.storage
    a, b = rng.standard_normal((128, 64)).astype(bf16), rng.standard_normal((128, 96)).astype(bf16)
    c, d = rng.standard_normal((32, 128)).astype(bf16), rng.standard_normal((32, 512)).astype(bf16)
    got = nki.simulate(kernel)(a, b, c, d)
    for out, (s, m) in zip(got, ((a, b), (c, d), (a, b)), strict=True):
        ref = (s.astype(np.float64).T @ m.astype(np.float64)).astype(np.float32)
        np.testing.assert_array_equal(out, ref)


def test_an_interned_layout_is_bounds_checked_per_buffer():
    """Equal windows share one Layout (and its caches); whether it fits is still decided per
    buffer: a window that fits a 1 KiB-per-partition tile does not fit a 512 B one."""
    mem = OnChipMemory("sbuf", 128, 4096, 64)
    big = Buffer(mem, "sbuf", 0, 0, 128, 0, 1024, "sbuf")
    small = Buffer(mem, "sbuf", 0, 0, 128, 1024, 512, "sbuf", "small")
    f32 = dt.resolve("float32")
    lay = interned(Layout(f32, 0, (128, 200), (256, 1)))
    assert interned(Layout(f32, 0, (128, 200), (256, 1))) is lay
    check_bounds(big, lay)
    with pytest.raises(OutOfBoundsError, match="small"):
        check_bounds(small, lay)
    check_bounds(big, lay)


def test_an_index_remembered_on_a_layout_depends_on_where_the_tensor_lives():
    """The same Layout indexed with the same key drops an int dim in HBM but keeps the
    partition dim on chip; the memo must not hand one the other's result."""
    from trnsim.nki.views import indexed

    lay = interned(Layout(dt.float32, 0, (4, 8), (8, 1)))
    hbm = indexed(lay, (1, slice(0, 8)), on_chip=False)
    chip = indexed(lay, (1, slice(0, 8)), on_chip=True)
    assert hbm.shape == (8,) and chip.shape == (1, 8)
    assert indexed(lay, (1, slice(0, 8)), on_chip=False) is hbm
    assert indexed(lay, (1, slice(0, 8)), on_chip=True) is chip
    assert indexed(lay, (slice(0, 2, 1), 3), on_chip=True).shape == (2, 1)
