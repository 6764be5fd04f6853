"""nl.tiles / nl.blocks / nl.alloc_tiles / nl.alloc_blocks (NKI 0.7): tile-coordinate views.

A grid is a view: creating or indexing one allocates nothing and issues no instruction.
`grid.data` is the NkiTensor operand of the current selection (when one access pattern can
express it). Tiled dims are the trailing len(tile_shape) dims of the source; leading dims are
untiled (one slab per coordinate). Edge tiles and blocks are clamped to the source extent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trnsim.errors import ConstraintError, KernelError
from trnsim.nki.tensor import NkiTensor
from trnsim.program import capture_location


class _TensorSource:
    """Elements of a plain tensor: a selection is a slice of it."""

    def __init__(self, t: NkiTensor):
        self.t = t
        self.shape = tuple(t.shape)

    def view(self, lo: tuple[int, ...], hi: tuple[int, ...], consumed: tuple[bool, ...]) -> Any:
        key = tuple(lo[d] if consumed[d] else slice(lo[d], hi[d]) for d in range(len(lo)))
        return self.t[key]

    @property
    def meta(self) -> NkiTensor:
        return self.t


class _RowTiledSource:
    """alloc_tiles on chip with more element rows than one tile: row-tiles side by side in
    the free dim of one (tile_rows, row_tiles * cols) tensor ("dense rank-two" layout)."""

    def __init__(self, storage: NkiTensor, element_shape: tuple[int, int], tile_rows: int):
        self.t = storage
        self.shape = element_shape
        self.tile_rows = tile_rows

    def view(self, lo: tuple[int, ...], hi: tuple[int, ...], consumed: tuple[bool, ...]) -> Any:
        i = lo[0] // self.tile_rows
        if (hi[0] - 1) // self.tile_rows != i:
            return None
        cols = self.shape[1]
        r0 = lo[0] - i * self.tile_rows
        return self.t[r0 : r0 + hi[0] - lo[0], i * cols + lo[1] : i * cols + hi[1]]

    @property
    def meta(self) -> NkiTensor:
        return self.t


@dataclass(frozen=True)
class _Sel:
    start: int  # in cells (tiles or blocks) from the region start
    stop: int
    step: int = 1
    consumed: bool = False


class NkiGrid:
    """Base of tile and block grids: shape counts cells; data is the selection's operand."""

    def __init__(
        self,
        src: Any,
        lo: tuple[int, ...],
        hi: tuple[int, ...],
        tile: tuple[int, ...],
        ntiled: int,
        block: tuple[int, ...] | None,
        sel: tuple[_Sel, ...] | None = None,
    ):
        self._src = src
        self._lo, self._hi = lo, hi
        self._tile = tile  # per source dim (1 on untiled dims)
        self._ntiled = ntiled
        self._block = block  # tiles per block per source dim, None for a tile grid
        cells = self._cells_total()
        self._sel = sel if sel is not None else tuple(_Sel(0, n) for n in cells)

    # ---------------------------------------------------------------- geometry
    def _cell(self) -> tuple[int, ...]:
        if self._block is None:
            return self._tile
        return tuple(t * b for t, b in zip(self._tile, self._block, strict=True))

    def _cells_total(self) -> tuple[int, ...]:
        return tuple(
            -(-(h - lo) // c) for lo, h, c in zip(self._lo, self._hi, self._cell(), strict=True)
        )

    def _cell_range(self, d: int, k: int) -> tuple[int, int]:
        c = self._cell()[d]
        a = self._lo[d] + k * c
        return a, min(a + c, self._hi[d])

    def _selected(self, d: int) -> range:
        s = self._sel[d]
        return range(s.start, s.stop, s.step)

    @property
    def shape(self) -> tuple[int, ...]:
        """Cells (tiles or blocks) along each remaining grid dimension."""
        return tuple(len(self._selected(d)) for d, s in enumerate(self._sel) if not s.consumed)

    @property
    def tile_shape(self) -> tuple[int, ...]:
        return self._tile[len(self._tile) - self._ntiled :]

    @property
    def element_shape(self) -> tuple[int, ...]:
        """Selected elements along each source dim (clamped at ragged edges)."""
        out = []
        for d, s in enumerate(self._sel):
            if s.consumed and d < len(self._tile) - self._ntiled:
                continue  # an untiled slab index drops its dim
            n = 0
            for k in self._selected(d):
                a, b = self._cell_range(d, k)
                n += b - a
            out.append(n)
        return tuple(out)

    @property
    def is_remainder(self) -> bool:
        """True if any selected cell is clamped by the source extent."""
        for d in range(len(self._sel)):
            c = self._cell()[d]
            for k in self._selected(d):
                a, b = self._cell_range(d, k)
                if b - a < c:
                    return True
        return False

    @property
    def index_step_elements(self) -> tuple[int, ...]:
        c = self._cell()
        return tuple(s.step * c[d] for d, s in enumerate(self._sel) if not s.consumed)

    @property
    def dtype(self) -> Any:
        return self._src.meta.dtype

    @property
    def buffer(self) -> Any:
        return self._src.meta.buffer

    def _element_bounds(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[bool, ...]]:
        lo, hi, consumed = [], [], []
        for d, s in enumerate(self._sel):
            ks = self._selected(d)
            a = self._cell_range(d, ks[0])[0] if len(ks) else self._lo[d]
            b = self._cell_range(d, ks[-1])[1] if len(ks) else self._lo[d]
            lo.append(a)
            hi.append(b)
            consumed.append(s.consumed and d < len(self._tile) - self._ntiled)
        return tuple(lo), tuple(hi), tuple(consumed)

    @property
    def is_data_representable(self) -> bool:
        if any(s.step != 1 and len(self._selected(d)) > 1 for d, s in enumerate(self._sel)):
            return False
        lo, hi, consumed = self._element_bounds()
        return self._src.view(lo, hi, consumed) is not None

    @property
    def data(self) -> NkiTensor:
        """The selection as one NkiTensor operand."""
        try:
            if not self.is_data_representable:
                raise ConstraintError(
                    f"{type(self).__name__}.data: the selection (element shape "
                    f"{list(self.element_shape)}) is not one access pattern; "
                    "index single tiles or contiguous ranges"
                )
            lo, hi, consumed = self._element_bounds()
            return self._src.view(lo, hi, consumed)
        except KernelError as e:
            raise e.with_loc(capture_location()) from None

    # ---------------------------------------------------------------- indexing
    def __getitem__(self, key: Any) -> NkiGrid:
        try:
            return self._index(key)
        except KernelError as e:
            raise e.with_loc(capture_location()) from None

    def _index(self, key: Any) -> NkiGrid:
        key = list(key) if isinstance(key, tuple) else [key]
        free = [d for d, s in enumerate(self._sel) if not s.consumed]
        if len(key) > len(free):
            raise ConstraintError(
                f"{type(self).__name__}: {len(key)} indices for a grid of shape {list(self.shape)}"
            )
        sel = list(self._sel)
        for d, k in zip(free, key, strict=False):
            cur = self._selected(d)
            if isinstance(k, slice):
                sub = cur[k]
                sel[d] = _Sel(sub.start, sub.stop, sub.step) if len(sub) else _Sel(0, 0)
            else:
                i = int(k)
                if i < 0:
                    i += len(cur)
                if not 0 <= i < len(cur):
                    raise ConstraintError(
                        f"{type(self).__name__}: index {k} is out of range for "
                        f"a grid dimension of {len(cur)} cells"
                    )
                sel[d] = _Sel(cur[i], cur[i] + 1, 1, True)
        return self._with(sel=tuple(sel))

    def _with(self, **changes: Any) -> NkiGrid:
        g = object.__new__(type(self))
        g.__dict__.update(self.__dict__)
        for k, v in changes.items():
            setattr(g, f"_{k}", v)
        return g

    def _region(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[_Sel, ...]]:
        """Element bounds of the selection, and the consumed flags to carry to a regrouping."""
        lo, hi, _ = self._element_bounds()
        untiled = len(self._tile) - self._ntiled
        carried = tuple(
            _Sel(0, 1, 1, True) if s.consumed and d < untiled else _Sel(0, 0)
            for d, s in enumerate(self._sel)
        )
        return lo, hi, carried

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(shape={list(self.shape)}, tile_shape="
            f"{list(self.tile_shape)}, element_shape={list(self.element_shape)})"
        )


class NkiTileGrid(NkiGrid):
    """A tensor view navigated in tile coordinates (nl.tiles)."""


class NkiBlockGrid(NkiGrid):
    """A tensor view navigated in block coordinates; a block is block_shape tiles (nl.blocks)."""

    @property
    def block_shape(self) -> tuple[int, ...]:
        return self._block[len(self._block) - self._ntiled :]


def _check_shape(x: Any, what: str, min_rank: int = 1) -> tuple[int, ...]:
    if (
        not isinstance(x, tuple)
        or len(x) < min_rank
        or not all(isinstance(v, int) and v > 0 for v in x)
    ):
        raise ConstraintError(
            f"{what} must be a tuple of at least {min_rank} positive integers, got {x!r}"
        )
    return x


def _grid(cls: type, source: Any, tile_shape: Any, block_shape: Any) -> NkiGrid:
    if isinstance(source, NkiGrid):
        lo, hi, carried = source._region()
        src = source._src
        tile_shape = tile_shape if tile_shape is not None else source.tile_shape
    elif isinstance(source, NkiTensor):
        src = _TensorSource(source)
        lo, hi, carried = (0,) * source.ndim, tuple(source.shape), None
    else:
        raise ConstraintError(
            f"nl.tiles/nl.blocks: source must be an NkiTensor or a grid, got "
            f"{type(source).__name__}"
        )
    tile_shape = _check_shape(
        tuple(tile_shape) if tile_shape is not None else None, "tile_shape", 2
    )
    nd = len(lo)
    if len(tile_shape) > nd:
        raise ConstraintError(f"tile_shape {list(tile_shape)} has more dims than the source ({nd})")
    tile = (1,) * (nd - len(tile_shape)) + tuple(tile_shape)
    block = None
    if cls is NkiBlockGrid:
        block_shape = _check_shape(tuple(block_shape), "block_shape", 1)
        if len(block_shape) != len(tile_shape):
            raise ConstraintError(
                f"block_shape {list(block_shape)} must have the rank of "
                f"tile_shape {list(tile_shape)}"
            )
        block = (1,) * (nd - len(tile_shape)) + tuple(block_shape)
    g = cls(src, lo, hi, tile, len(tile_shape), block)
    if carried is not None:
        sel = tuple(
            _Sel(0, 1, 1, True) if c.consumed else s for c, s in zip(carried, g._sel, strict=True)
        )
        g = g._with(sel=sel)
    return g


def tiles(source: Any, *, tile_shape: Any = None) -> NkiTileGrid:
    """A tile-coordinate view of a tensor (or regrouping of a grid selection)."""
    try:
        return _grid(NkiTileGrid, source, tile_shape, None)
    except KernelError as e:
        raise e.with_loc(capture_location()) from None


def blocks(source: Any, *, tile_shape: Any = None, block_shape: Any) -> NkiBlockGrid:
    """A block-coordinate view: each block groups block_shape tiles."""
    try:
        return _grid(NkiBlockGrid, source, tile_shape, block_shape)
    except KernelError as e:
        raise e.with_loc(capture_location()) from None


def _alloc(
    tile_shape: Any, element_shape: Any, buffer: Any, dtype: Any, address: Any, name: str
) -> Any:
    from trnsim.nki import language as nl

    tile_shape = _check_shape(tuple(tile_shape), "tile_shape", 2)
    element_shape = _check_shape(tuple(element_shape), "element_shape", 1)
    if len(tile_shape) > len(element_shape):
        raise ConstraintError(
            f"tile_shape {list(tile_shape)} has more dims than element_shape {list(element_shape)}"
        )
    if nl.is_on_chip(buffer) and element_shape[0] > tile_shape[0]:
        if len(element_shape) != 2 or len(tile_shape) != 2:
            raise ConstraintError(
                "alloc_tiles on chip with more rows than one tile supports rank-2 shapes only"
            )
        rows = -(-element_shape[0] // tile_shape[0])
        storage = nl.ndarray((tile_shape[0], rows * element_shape[1]), dtype, buffer, name, address)
        return _RowTiledSource(storage, element_shape, tile_shape[0]), tile_shape
    t = nl.ndarray(element_shape, dtype, buffer, name, address)
    return _TensorSource(t), tile_shape


def alloc_tiles(
    *,
    tile_shape: Any,
    element_shape: Any,
    buffer: Any,
    dtype: Any,
    address: Any = None,
    name: str = "",
) -> NkiTileGrid:
    """Allocate uninitialised storage organised as a grid of tiles."""
    try:
        src, tile_shape = _alloc(tile_shape, element_shape, buffer, dtype, address, name)
        nd = len(src.shape)
        tile = (1,) * (nd - len(tile_shape)) + tuple(tile_shape)
        return NkiTileGrid(src, (0,) * nd, tuple(src.shape), tile, len(tile_shape), None)
    except KernelError as e:
        raise e.with_loc(capture_location()) from None


def alloc_blocks(
    *,
    tile_shape: Any,
    block_shape: Any,
    element_shape: Any,
    buffer: Any,
    dtype: Any,
    address: Any = None,
    name: str = "",
) -> NkiBlockGrid:
    """Allocate uninitialised storage organised as a grid of tile blocks."""
    try:
        src, tile_shape = _alloc(tile_shape, element_shape, buffer, dtype, address, name)
        block_shape = _check_shape(tuple(block_shape), "block_shape", 1)
        if len(block_shape) != len(tile_shape):
            raise ConstraintError(
                f"block_shape {list(block_shape)} must have the rank of "
                f"tile_shape {list(tile_shape)}"
            )
        nd = len(src.shape)
        pad = (1,) * (nd - len(tile_shape))
        return NkiBlockGrid(
            src,
            (0,) * nd,
            tuple(src.shape),
            pad + tuple(tile_shape),
            len(tile_shape),
            pad + tuple(block_shape),
        )
    except KernelError as e:
        raise e.with_loc(capture_location()) from None
