"""Loops, no_reorder, device_print, program identity, tile_size, NKIObject and 0.7 grids."""

from __future__ import annotations

from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl
import nki.typing as nt
import numpy as np
import pytest

from trnsim.errors import ConstraintError, KernelError
from trnsim.nki.runner import record_launches, stop_recording


def _program(fn, *args, **kw):
    runs = []
    token = record_launches(runs)
    try:
        out = nki.simulate(fn, **kw)(*args)
    finally:
        stop_recording(token)
    return out, runs[-1].program


def test_loop_nesting_is_recorded_per_instruction():
    def kernel():
        t = nl.ndarray((4, 4), nl.float32)
        for i in nl.affine_range(2):
            for j in nl.sequential_range(1, 4, 2):
                nisa.memset(dst=t, value=float(i + j))
        for _k in nl.static_range(1):
            nisa.memset(dst=t, value=0.0)
        nisa.memset(dst=t, value=1.0)

    _, prog = _program(kernel)
    loops = [i.loops for i in prog]
    assert [(a[1], a[2], b[1], b[2]) for a, b in loops[:4]] == [
        ("affine_range", 0, "sequential_range", 1),
        ("affine_range", 0, "sequential_range", 3),
        ("affine_range", 1, "sequential_range", 1),
        ("affine_range", 1, "sequential_range", 3),
    ]
    assert loops[0][0][0] == loops[2][0][0]  # same outer loop id
    assert loops[4][0][1] == "static_range"
    assert loops[5] == ()


def test_no_reorder_marks_instructions():
    def kernel():
        t = nl.ndarray((4, 4), nl.float32)
        nisa.memset(dst=t, value=0.0)
        with nl.no_reorder():
            nisa.memset(dst=t, value=1.0)
            nisa.memset(dst=t, value=2.0)
        nisa.memset(dst=t, value=3.0)

    _, prog = _program(kernel)
    marked = [any(k == "no_reorder" for _, k, _ in i.loops) for i in prog]
    assert marked == [False, True, True, False]


def test_device_print_writes_prefix_and_values(capsys):
    def kernel(a):
        x = nl.load(a)
        nl.device_print("x =", x)
        nl.device_print("hbm:", a)
        return a

    nki.simulate(kernel)(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = capsys.readouterr().out
    assert "x = [[0. 1. 2.]\n [3. 4. 5.]]" in out
    assert out.count("hbm:") == 1


def test_device_print_prefix_must_be_a_string():
    def kernel(a):
        nl.device_print(3, a)

    with pytest.raises(ConstraintError, match="constant string"):
        nki.simulate(kernel)(np.zeros((2, 2), np.float32))


def test_program_identity_lnc2():
    seen = []

    def kernel(a):
        seen.append((nl.program_id(0), nl.num_programs(), nl.program_ndim()))
        return a

    nki.simulate(kernel)(np.zeros((2, 2), np.float32))
    nki.simulate(nki.jit(kernel)[2])(np.zeros((2, 2), np.float32))
    assert seen[0] == (0, 1, 0)
    assert sorted(seen[1:]) == [(0, 2, 1), (1, 2, 1)]


def test_tile_size_follows_chip():
    got = {}

    def kernel(a):
        got["pmax"] = nl.tile_size.pmax
        got["moving"] = nl.tile_size.gemm_moving_fmax
        got["bank"] = nl.tile_size.psum_bank_fmax
        return a

    nki.simulate(kernel, chip="trn2")(np.zeros((2, 2), np.float32))
    assert got == {"pmax": 128, "moving": 512, "bank": 512}
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = nl.tile_size.nope


def test_nkiobject_structural_equality():
    @dataclass
    class Cfg(nl.NKIObject):
        tile: int
        name: str

    assert Cfg(128, "a") == Cfg(128, "a")
    assert Cfg(128, "a") != Cfg(64, "a")


def test_nkiobject_fields_may_be_assigned_after_construction():
    """A record built with some of its annotated fields and completed by a method (as
    nki-library's MoE and MLP kernels build their dimension records), with or without
    @dataclass; a field never assigned is an AttributeError when read."""

    class Dims(nl.NKIObject):
        T: int
        H: int
        shard: int
        tiles: int = 0

        def derive(self, shards):
            self.shard = self.H // shards
            self.tiles = self.shard // 128

    @dataclass
    class Consts(nl.NKIObject):
        a: int
        b: int
        rest: int

    d = Dims(T=4, H=1024)
    assert d.tiles == 0 and not hasattr(d, "shard")
    d.derive(2)
    assert (d.shard, d.tiles) == (512, 4)
    c = Consts(a=1, b=2)
    assert (c.a, c.b) == (1, 2)
    with pytest.raises(AttributeError, match="rest"):
        _ = c.rest
    with pytest.raises(TypeError, match="unexpected"):
        Dims(T=1, width=3)


def test_truth_value_of_one_element_tile_is_its_value():
    """A 1-element tile is true when its value is non-zero (AWS's CPU simulator)."""

    def kernel(a):
        x = nl.load(a[0:1, 0:1])
        assert nl.equal(x, x)
        assert not nl.greater(x, x)
        return a

    nki.simulate(kernel)(np.ones((4, 4), np.float32))


def test_truth_value_of_multi_element_tile_is_an_error():
    def kernel(a):
        x = nl.load(a)
        assert nl.equal(x, x)  # <- rule
        return a

    with pytest.raises(KernelError, match="truth value of a multi-element tensor") as exc:
        nki.simulate(kernel)(np.ones((4, 4), np.float32))
    assert exc.value.loc.code == "assert nl.equal(x, x)  # <- rule"
    assert "control flow cannot depend on tensor values" in str(exc.value)


def test_device_loops_are_language_names():
    def kernel(a):
        t = nl.ndarray((4, 4), nl.float32)
        for _i in nl.dynamic_range(3):
            nisa.memset(dst=t, value=1.0)
        nl.fori_loop(0, 2, lambda i: nisa.memset(dst=t, value=2.0))
        return a

    _, prog = _program(kernel, np.zeros((2, 2), np.float32))
    assert [i.opcode for i in prog].count("memset") == 5


# ---------------------------------------------------------------- grids (0.7)
def test_tiles_grid_copy_with_ragged_edges():
    def kernel(src):
        tiles = nl.tiles(src, tile_shape=(128, 96))
        dst = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
        dst_tiles = nl.tiles(dst, tile_shape=(128, 96))
        assert tiles.shape == (2, 3)
        assert tiles[1, 2].is_remainder
        assert not tiles[0, 0].is_remainder
        for i in range(tiles.shape[0]):
            for j in range(tiles.shape[1]):
                t = tiles[i, j]
                tile = nl.ndarray(t.element_shape, dtype=src.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=tile, src=t.data)
                nisa.dma_copy(dst=dst_tiles[i, j].data, src=tile)
        return dst

    src = np.arange(200 * 250, dtype=np.float32).reshape(200, 250)
    np.testing.assert_array_equal(nki.simulate(kernel)(src), src)


def test_grid_attributes_and_blocks():
    got = {}

    def kernel(src):
        g = nl.tiles(src, tile_shape=(128, 256))
        got["shape"] = g.shape
        got["row"] = g[1, :].element_shape
        got["step"] = g.index_step_elements
        got["rep"] = g[:, ::2].is_data_representable
        b = nl.blocks(src, tile_shape=(128, 256), block_shape=(2, 2))
        got["bshape"] = b.shape
        got["bblock"] = b[0, 1].block_shape
        inner = nl.tiles(b[0, 1])
        got["inner"] = inner.shape
        got["inner_elems"] = inner[1, 1].element_shape
        got["data"] = tuple(b[0, 1].data.shape)
        return src

    nki.simulate(kernel)(np.zeros((512, 1024), np.float32))
    assert got == {
        "shape": (4, 4),
        "row": (128, 1024),
        "step": (128, 256),
        "rep": False,
        "bshape": (2, 2),
        "bblock": (2, 2),
        "inner": (2, 2),
        "inner_elems": (128, 256),
        "data": (256, 512),
    }


def test_alloc_tiles_on_chip_row_tiled():
    def kernel(src):
        g = nl.alloc_tiles(
            tile_shape=(128, 64), element_shape=(256, 128), buffer=nl.sbuf, dtype=nl.float32
        )
        src_t = nl.tiles(src, tile_shape=(128, 64))
        out = nl.ndarray(src.shape, src.dtype, buffer=nl.shared_hbm)
        out_t = nl.tiles(out, tile_shape=(128, 64))
        for i in range(2):
            nisa.dma_copy(dst=g[i, :].data, src=src_t[i, :].data)
        assert not g[:, 0].is_data_representable
        for i in range(2):
            for j in range(2):
                nisa.dma_copy(dst=out_t[i, j].data, src=g[i, j].data)
        return out

    src = np.arange(256 * 128, dtype=np.float32).reshape(256, 128)
    np.testing.assert_array_equal(nki.simulate(kernel)(src), src)


def test_typing_annotations_are_checked_at_launch():
    def kernel(a: nt.tensor[4, 8], b: nt.tensor[n, 2]):  # noqa: F821
        return a

    nki.simulate(kernel)(np.zeros((4, 8), np.float32), np.zeros((7, 2), np.float32))
    with pytest.raises(
        ConstraintError, match=r"annotation nt.tensor\[4, 8\] expects \[4, 8\]"
    ) as exc:
        nki.simulate(kernel)(np.zeros((4, 9), np.float32), np.zeros((7, 2), np.float32))
    assert exc.value.loc.filename == __file__
    assert nt.tensor[(128, 512), nl.float32].dtype == nl.float32
