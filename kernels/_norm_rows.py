"""Shared pieces of the norm device kernels (kernels/layer_norm.py): argument checks, the
row space of a [R, D] view with its per-row statistics, and weight/bias on every partition.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._common import P_MAX, fail
from ._rows import RowSpace, broadcast_vector, col_operand, vector_operand

DTYPES = ("bfloat16", "float16", "float32")
RESIDENT_SHARE = 0.25  # SBUF share for weight/bias kept on every partition for the kernel
F32 = nl.float32


def check_rows(what: str, x, **same) -> tuple[int, int]:
    """(R, D) of the 2-D view x; `same` views must have its shape and a float dtype."""
    if len(x.shape) != 2:
        fail(
            f"{what}: x must be a 2-D [R, D] view (the backend flattens the normalized and "
            f"the leading dims), got shape {list(x.shape)}"
        )
    for name, v in {"x": x, **same}.items():
        if v is None:
            continue
        if tuple(v.shape) != tuple(x.shape):
            fail(f"{what}: {name} has shape {list(v.shape)}, expected {list(x.shape)}")
        if v.dtype not in DTYPES:
            fail(f"{what}: {name} dtype {v.dtype} is not one of {', '.join(DTYPES)}")
    return x.shape[0], x.shape[1]


def check_vectors(what: str, d: int, **vecs) -> dict:
    """The non-None [D] vectors, checked."""
    out = {}
    for name, v in vecs.items():
        if v is None:
            continue
        if len(v.shape) != 1 or v.shape[0] != d:
            fail(f"{what}: {name} must have shape [D]=[{d}], got {list(v.shape)}")
        out[name] = v
    return out


def const_col(value: float, name: str):
    t = ro.sbuf((P_MAX, 1), F32, name)
    nisa.memset(dst=t, value=float(value))
    return t


class Vectors:
    """weight/bias on every partition: resident [128, D] fp32 tiles when they fit in
    RESIDENT_SHARE of SBUF, else loaded with each chunk (`load`)."""

    def __init__(self, vecs: dict, d: int):
        self.vecs = vecs
        self.resident = 4 * d * len(vecs) <= RESIDENT_SHARE * nl.tile_size.total_available_sbuf_size
        self.tiles = (
            {k: broadcast_vector(v, P_MAX, 0, d, F32, k) for k, v in vecs.items()}
            if self.resident
            else {}
        )

    @property
    def fixed_bytes(self) -> int:
        return sum(t.shape[1] * 4 for t in self.tiles.values())

    @property
    def col_bytes(self) -> int:
        return 0 if self.resident else 4 * len(self.vecs)

    def load(self, parts: int, c0: int, c1: int) -> dict:
        if self.resident:
            return {}
        return {k: broadcast_vector(v, parts, c0, c1, F32, k) for k, v in self.vecs.items()}

    def view(self, name: str, loaded: dict, parts: int, g: int, c0: int, c1: int):
        """Vector `name` for a chunk as [parts, G, c1-c0] (stride 0 over G), or None."""
        if name not in self.vecs:
            return None
        t = self.tiles[name][:parts, c0:c1] if self.resident else loaded[name]
        t = t.expand_dim(1)
        return t if g == 1 else t.broadcast(1, g)


def norm_row_space(what: str, r: int, x, cols: dict, rows: dict) -> RowSpace:
    ops = {k: col_operand(v, 1) for k, v in cols.items() if v is not None}
    for k, v in rows.items():
        if v is not None:
            ops[k] = vector_operand(v, r, what, k)
    return RowSpace((r,), x.shape[1], ops)
