"""nl.empty_like of tensors and grids (transpose_axes, address) and nl.alloc_stream_buffers."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from source_paths import assert_no_internal_path

from trnsim.errors import ConstraintError
from trnsim.nki.runner import record_launches, stop_recording
from trnsim.timing.profile import profile


def _program(fn, *args):
    runs = []
    token = record_launches(runs)
    try:
        out = nki.simulate(fn)(*args)
    finally:
        stop_recording(token)
    return out, runs[-1].program


# ---------------------------------------------------------------- empty_like
def test_empty_like_grid_keeps_type_shape_tiles_and_edges():
    got = {}

    def kernel(src):
        g = nl.tiles(src, tile_shape=(128, 128))  # (300, 200): 3 x 2 tiles, clamped edges
        e = nl.empty_like(g, buffer=nl.sbuf)
        got["tile"] = (type(e).__name__, e.shape, e.tile_shape, e.element_shape, e.dtype)
        got["edge"] = (e[2, 1].element_shape, e[2, 1].is_remainder, e[0, 0].is_remainder)
        got["buffer"] = e.buffer == nl.sbuf
        got["default_buffer"] = nl.empty_like(g).buffer == nl.shared_hbm
        s = nl.empty_like(g[:, ::2], dtype=nl.bfloat16)  # strided: columns 0 (only) packed
        got["strided"] = (s.shape, s.element_shape, s.dtype)
        s = nl.empty_like(g[::2, :])  # rows 0 and 2 (clamped to 44) packed into 172 rows
        got["rows"] = (s.shape, s.element_shape, s[1, 1].element_shape)
        r = nl.empty_like(g[1, :])  # an integer index consumes the coordinate
        got["row"] = (r.shape, r.element_shape)
        b = nl.blocks(src, tile_shape=(64, 64), block_shape=(2, 2))  # 3 x 2 blocks
        eb = nl.empty_like(b[1:, :])
        got["blocks"] = (
            type(eb).__name__,
            eb.shape,
            eb.block_shape,
            eb.tile_shape,
            eb.element_shape,
            eb[1, 1].element_shape,
            nl.tiles(eb[1, 1]).shape,
            nl.tiles(eb[1, 1])[0, 1].element_shape,
        )
        return src

    nki.simulate(kernel)(np.zeros((300, 200), np.float32))
    assert got["tile"] == ("NkiTileGrid", (3, 2), (128, 128), (300, 200), nl.float32)
    assert got["edge"] == ((44, 72), True, False)
    assert got["buffer"] and got["default_buffer"]
    assert got["strided"] == ((3, 1), (300, 128), nl.bfloat16)
    assert got["rows"] == ((2, 2), (172, 200), (44, 72))
    assert got["row"] == ((2,), (128, 200))
    assert got["blocks"] == (
        "NkiBlockGrid",
        (2, 2),
        (2, 2),
        (64, 64),
        (172, 200),
        (44, 72),
        (1, 2),
        (44, 8),
    )


def test_empty_like_grid_round_trip_through_sbuf():
    """Every tile of an HBM grid with ragged edges copied into its empty_like in SBUF and back."""

    def kernel(src):
        g = nl.tiles(src, tile_shape=(128, 96))
        sb = nl.empty_like(g, buffer=nl.sbuf)
        out = nl.empty_like(g)
        for i in range(g.shape[0]):
            for j in range(g.shape[1]):
                nisa.dma_copy(dst=sb[i, j].data, src=g[i, j].data)
                nisa.tensor_scalar(dst=sb[i, j].data, data=sb[i, j].data, op0=nl.add, operand0=1.0)
                nisa.dma_copy(dst=out[i, j].data, src=sb[i, j].data)
        return out.data

    x = np.arange(200 * 250, dtype=np.float32).reshape(200, 250)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x + 1)


def test_empty_like_tensor_transpose_axes_and_address():
    got = {}

    def kernel(src):
        t = nl.load(src)  # (64, 32)
        dst = nl.empty_like(t, transpose_axes=(1, 0), address=(0, 1024))
        got["place"] = (tuple(dst.shape), dst.buffer.partition_start, dst.buffer.byte_start)
        nisa.dma_transpose(dst=dst, src=t, axes=(1, 0))
        out = nl.ndarray(dst.shape, dst.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        return out

    x = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x.T)
    assert got["place"] == ((32, 64), 0, 1024)


def test_empty_like_grid_transpose_axes():
    """A (64, 256) grid of (64, 128) tiles: its transposed copy is 2 x 1 tiles of (128, 64)."""
    got = {}

    def kernel(src):
        g = nl.tiles(src, tile_shape=(64, 128))
        t = nl.empty_like(g, buffer=nl.sbuf, transpose_axes=(1, 0))
        got["t"] = (t.shape, t.tile_shape, t.element_shape)
        for j in range(g.shape[1]):
            nisa.dma_transpose(dst=t[j, 0].data, src=g[0, j].data, axes=(1, 0))
        out = nl.ndarray((256, 64), src.dtype, buffer=nl.shared_hbm)
        ot = nl.tiles(out, tile_shape=(128, 64))
        for j in range(t.shape[0]):
            nisa.dma_copy(dst=ot[j, 0].data, src=t[j, 0].data)
        return out

    x = np.arange(64 * 256, dtype=np.float32).reshape(64, 256)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x.T)
    assert got["t"] == ((2, 1), (128, 64), (256, 64))


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda s: nl.empty_like(nl.load(s), transpose_axes=(0, 1)), r"supports \(1, 0\) for"),
        (lambda s: nl.empty_like(s[0], transpose_axes=(1, 0)), r"for 1 \(tiled\) dims"),
        (
            lambda s: nl.empty_like(nl.load(s), buffer=nl.psum, transpose_axes=(1, 0)),
            "prepares an SBUF destination",
        ),
        (
            lambda s: nl.empty_like(s, buffer=nl.sbuf, transpose_axes=(1, 0)),
            "extent 256 the destination partition extent; at most 128",
        ),
        (
            lambda s: nl.empty_like(
                nl.tiles(s, tile_shape=(64, 256)), buffer=nl.sbuf, transpose_axes=(1, 0)
            ),
            r"tiled dim 1 \(per tile\) extent 256",
        ),
        (lambda s: nl.empty_like(np.zeros(3)), "got ndarray"),
        (lambda s: nl.zeros_like(nl.tiles(s, tile_shape=(64, 128))), "zeros_like takes a tensor"),
    ],
    ids=["order", "rank", "psum", "partitions", "grid-partitions", "not-a-view", "zeros_like"],
)
def test_empty_like_errors(make, match):
    def kernel(src):
        make(src)
        return src

    with pytest.raises(ConstraintError, match=match) as exc:
        nki.simulate(kernel)(np.zeros((64, 256), np.float32))
    assert exc.value.loc.filename == __file__
    assert_no_internal_path(str(exc.value))


# ---------------------------------------------------------------- stream buffers
def _scale_chunks(src, num_slots=2):
    """The streaming pattern: load step m into buffers[m], scale it, store it."""
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    bufs = nl.alloc_stream_buffers(src, buffer=nl.sbuf, dim=1, num_slots=num_slots)
    for m in range(src.shape[1]):
        chunk = bufs[m]
        nisa.dma_copy(dst=chunk, src=src[:, m, :])
        nisa.tensor_scalar(dst=chunk, data=chunk, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[:, m, :], src=chunk)
    return out


def test_stream_over_a_tensor_matches_numpy():
    x = np.random.default_rng(0).standard_normal((128, 6, 64), dtype=np.float32)
    np.testing.assert_array_equal(nki.simulate(_scale_chunks)(x), 2 * x)


def test_two_slots_overlap_one_slot_is_serial():
    """With one slot, load m + 1 waits for store m (it overwrites what the store reads);
    with two, it overlaps the previous step's compute and store."""
    x = np.zeros((128, 8, 512), np.float32)
    one = profile(lambda s: _scale_chunks(s, 1), x, chip="trn2", values=False)
    two = profile(lambda s: _scale_chunks(s, 2), x, chip="trn2", values=False)
    steps = x.shape[1]
    for m in range(steps - 1):  # program: load, scale, store per step
        assert one.start_ns(3 * (m + 1)) >= one.end_ns(3 * m + 2)
    overlapped = [m for m in range(steps - 1) if two.start_ns(3 * (m + 1)) < two.end_ns(3 * m + 2)]
    assert len(overlapped) == steps - 1
    assert two.latency_ns < 0.7 * one.latency_ns


def test_stream_over_a_tile_grid_with_a_remainder_column():
    got = {}

    def kernel(src):
        g = nl.tiles(src, tile_shape=(128, 128))  # (256, 300): 2 x 3 tiles, last column 44
        out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
        og = nl.tiles(out, tile_shape=(128, 128))
        bufs = nl.alloc_stream_buffers(g, buffer=nl.sbuf, dim=1)
        got["num_slots"] = bufs.num_slots
        for k in range(g.shape[1]):
            col = bufs[k]
            got[k] = (type(col).__name__, col.shape, col.element_shape, col.is_remainder)
            for i in range(g.shape[0]):
                nisa.dma_copy(dst=col[i].data, src=g[i, k].data)
                nisa.tensor_scalar(dst=col[i].data, data=col[i].data, op0=nl.add, operand0=1.0)
                nisa.dma_copy(dst=og[i, k].data, src=col[i].data)
        got["clamped_shares_slot"] = bufs[2][0].data.buffer is bufs[0][0].data.buffer
        return out

    x = np.arange(256 * 300, dtype=np.float32).reshape(256, 300)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x + 1)
    assert got["num_slots"] == 2
    assert got[0] == ("NkiTileGrid", (2,), (256, 128), False)
    assert got[1] == got[0]
    assert got[2] == ("NkiTileGrid", (2,), (256, 44), True)
    assert got["clamped_shares_slot"]


def test_stream_over_a_block_grid():
    """Blocks of 2 x 2 (64, 64) tiles streamed by block row; the last block row is 72 rows."""
    got = {}

    def kernel(src):
        b = nl.blocks(src, tile_shape=(64, 64), block_shape=(2, 2))  # (200, 256): 2 x 2 blocks
        out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
        ob = nl.blocks(out, tile_shape=(64, 64), block_shape=(2, 2))
        bufs = nl.alloc_stream_buffers(b, buffer=nl.sbuf, dim=0, num_slots=3)
        for r in range(b.shape[0]):
            row = bufs[r]
            got[r] = (type(row).__name__, row.shape, row.block_shape, row.element_shape)
            for c in range(b.shape[1]):
                # on chip, tile rows sit side by side: a block of 2 x 2 tiles moves tile by tile
                src_t, slot_t, out_t = (nl.tiles(v) for v in (b[r, c], row[c], ob[r, c]))
                for i in range(slot_t.shape[0]):
                    for j in range(slot_t.shape[1]):
                        t = slot_t[i, j].data
                        nisa.dma_copy(dst=t, src=src_t[i, j].data)
                        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3.0)
                        nisa.dma_copy(dst=out_t[i, j].data, src=t)
        return out

    x = np.arange(200 * 256, dtype=np.float32).reshape(200, 256)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), 3 * x)
    assert got[0] == ("NkiBlockGrid", (2,), (2, 2), (128, 256))
    assert got[1] == ("NkiBlockGrid", (2,), (2, 2), (72, 256))


def test_transposed_stream_slots_clamp_the_ragged_step():
    """transpose_axes=(1, 0): each column of (128, 128) tiles lands as a row of tiles; the
    44-column last step gets a 44-row view of its slot."""
    got = {}

    def kernel(src):
        g = nl.tiles(src, tile_shape=(128, 128))  # (256, 300)
        out = nl.ndarray((300, 256), src.dtype, buffer=nl.shared_hbm)
        og = nl.tiles(out, tile_shape=(128, 128))
        bufs = nl.alloc_stream_buffers(g, buffer=nl.sbuf, dim=1, transpose_axes=(1, 0))
        for k in range(g.shape[1]):
            got[k] = bufs[k].element_shape
            for i in range(g.shape[0]):
                nisa.dma_transpose(dst=bufs[k][i].data, src=g[i, k].data, axes=(1, 0))
                nisa.dma_copy(dst=og[k, i].data, src=bufs[k][i].data)
        return out

    x = np.arange(256 * 300, dtype=np.float32).reshape(256, 300)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x.T)
    assert got == {0: (128, 256), 1: (128, 256), 2: (44, 256)}


def test_slots_alias_modulo_num_slots_and_selecting_issues_nothing():
    got = {}

    def kernel(src):
        bufs = nl.alloc_stream_buffers(src, buffer=nl.sbuf, dim=1, num_slots=2)
        got["same"] = bufs[0].buffer is bufs[2].buffer and bufs[1].buffer is bufs[3].buffer
        got["distinct"] = bufs[0].buffer is not bufs[1].buffer
        nisa.memset(dst=bufs[0], value=7.0)
        nisa.memset(dst=bufs[1], value=1.0)
        out = nl.ndarray((2, *bufs[0].shape), src.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[0], src=bufs[2])  # slot 0 again
        nisa.dma_copy(dst=out[1], src=bufs[3])  # slot 1 again
        for k in range(src.shape[1]):
            bufs[k]  # selecting: no instruction, no allocation
        return out

    out, program = _program(kernel, np.zeros((32, 4, 16), np.float32))
    assert got == {"same": True, "distinct": True}
    np.testing.assert_array_equal(out[0], 7.0)
    np.testing.assert_array_equal(out[1], 1.0)
    assert [i.opcode for i in program] == ["memset", "memset", "dma_copy", "dma_copy"]


def test_address_places_slots_one_after_another():
    got = {}

    def kernel(src):
        s = nl.alloc_stream_buffers(src, buffer=nl.sbuf, dim=1, num_slots=3, address=(0, 512))
        got["sbuf"] = [s[k].buffer.byte_start for k in range(3)]
        p = nl.alloc_stream_buffers(src, buffer=nl.psum, dim=1, address=(0, 4096))
        got["psum"] = [p[k].buffer.byte_start for k in range(2)]  # one 2 KiB bank each
        g = nl.alloc_stream_buffers(
            nl.tiles(src[:, 0, :], tile_shape=(128, 8)), dim=1, buffer=nl.sbuf, address=(0, 8192)
        )
        got["grid"] = [g[k].data.buffer.byte_start for k in range(2)]
        return src

    nki.simulate(kernel)(np.zeros((128, 3, 16), np.float32))
    assert got == {"sbuf": [512, 576, 640], "psum": [4096, 6144], "grid": [8192, 8224]}


def _fori(src):
    bufs = nl.alloc_stream_buffers(src, buffer=nl.sbuf, dim=1)
    nl.fori_loop(0, 2, lambda i: bufs[i])


def _iterate(src):
    bufs = nl.alloc_stream_buffers(src, buffer=nl.sbuf, dim=1)
    for b in bufs:
        nisa.memset(dst=b, value=0.0)


@pytest.mark.parametrize(
    ("body", "line", "match"),
    [
        (_fori, "lambda i: bufs[i]", r"runtime value .*nl.fori_loop.*for k in range\(4\)"),
        (
            lambda s: nl.alloc_stream_buffers(s, buffer=nl.sbuf, dim=1)[-1],
            "[-1]",
            "negative index -1 is not supported; index with a nonnegative Python int below 4",
        ),
        (
            lambda s: nl.alloc_stream_buffers(s, buffer=nl.sbuf, dim=1)[4],
            "[4]",
            "index 4 is out of range for a stream of 4 steps",
        ),
        (
            lambda s: nl.alloc_stream_buffers(s, buffer=nl.sbuf, dim=1)[1:3],
            "[1:3]",
            r"index slice\(1, 3, None\) \(slice\) is not an int",
        ),
        (_iterate, "for b in bufs", r"iterating over the pool is not supported.*buffers\[k\]"),
        (
            lambda s: len(nl.alloc_stream_buffers(s, buffer=nl.sbuf, dim=1)),
            "len(",
            r"len\(\) is not supported; the stream has view.shape\[1\] = 4 steps",
        ),
        (
            lambda s: nl.alloc_stream_buffers(s, buffer=nl.sbuf, dim=3),
            "dim=3",
            r"dim=3 must be a Python int in range\(3\)",
        ),
        (
            lambda s: nl.alloc_stream_buffers(s, buffer=nl.sbuf, dim=1, num_slots=0),
            "num_slots=0",
            "num_slots=0 must be a positive int",
        ),
        (
            lambda s: nl.alloc_stream_buffers(s, buffer=nl.shared_hbm, dim=1),
            "shared_hbm",
            "stream slots live on chip",
        ),
        (
            lambda s: nl.alloc_stream_buffers(np.zeros(4), buffer=nl.sbuf, dim=0),
            "np.zeros",
            "view must be an NkiTensor, NkiTileGrid or NkiBlockGrid, got ndarray",
        ),
    ],
    ids=[
        "fori_loop",
        "negative",
        "out-of-range",
        "slice",
        "iterate",
        "len",
        "dim",
        "num_slots",
        "hbm",
        "not-a-view",
    ],
)
def test_stream_buffer_errors_name_the_users_line(body, line, match):
    def kernel(src):
        body(src)
        return src

    with pytest.raises(ConstraintError, match=match) as exc:
        nki.simulate(kernel)(np.zeros((128, 4, 16), np.float32))
    assert exc.value.loc.filename == __file__
    assert line in (exc.value.loc.code or "")
    assert_no_internal_path(str(exc.value))
