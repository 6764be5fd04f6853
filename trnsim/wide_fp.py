"""NKI_PRECISE_FP=0: low-precision float tensors keep fp32 values (nki-api.md §2.2 item 7).

AWS's simulator stores low-precision tensors with ml_dtypes types and rounds them like the
hardware (NKI_PRECISE_FP=1, its default since NKI 0.4.0, and trnsim's). With NKI_PRECISE_FP=0
it "stores everything as float32", which separates algorithm bugs from precision loss, and
which AWS's older example tests assume (an fp32 golden for a bf16 tile at rtol 1e-5).

trnsim's memories are bytes, so a bf16 element has room for a bf16 only. In this mode a Buffer
written through a low-precision float view (bfloat16, float16, tfloat32, the float8/float4
types) also keeps the fp32 value of each element it wrote, in a float32 array per dtype
(`Buffer.wide`), laid out as the buffer's elements of that dtype. The bytes still hold the
rounded value. A read as fp32 takes an element's kept value wherever the bytes still hold that
value rounded (so a later write by any other path, a raw copy, a poison fill or a view of
another dtype, shows through); elsewhere it takes the bytes. Bit-level reads (`View.read`,
`View.array`: predicated copies, gathers, bitcasts) and results copied back to the host see
the bytes: a bf16 output comes back as bf16. The mode is read from the environment at each
kernel launch and holds for that launch.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from trnsim import dtypes as dt

if TYPE_CHECKING:
    from trnsim.memory import Buffer, Layout, View

ACTIVE = False  # True while a launch runs with NKI_PRECISE_FP=0


def requested() -> bool:
    """Whether the environment asks for fp32 storage (NKI_PRECISE_FP=0)."""
    return os.environ.get("NKI_PRECISE_FP", "1").strip() == "0"


@contextlib.contextmanager
def launch() -> Iterator[None]:
    """The mode of one kernel launch, from the environment."""
    global ACTIVE
    before, ACTIVE = ACTIVE, requested()
    try:
        yield
    finally:
        ACTIVE = before


def kept(view: View) -> bool:
    """Whether `view`'s buffer holds kept fp32 values this launch can read."""
    return ACTIVE and view.buffer.wide is not None


def keeps(dtype: dt.DType) -> bool:
    """Whether values of `dtype` are kept as fp32 in this mode: the floats narrower than fp32
    (and tfloat32, which rounds fp32)."""
    return dtype.kind == "float" and (dtype.itemsize < 4 or dtype.name == "tfloat32")


def _wide_view(buf: Buffer, lay: Layout, create: bool) -> np.ndarray | None:
    """The float32 elements of buf's kept values that `lay` addresses (None: none kept)."""
    store = buf.wide
    dtype = lay.dtype
    arr = None if store is None else store.get(dtype.name)
    if arr is None:
        if not create:
            return None
        shape = ((buf.partitions, buf.nbytes // dtype.itemsize) if buf.on_chip
                 else (buf.nbytes // dtype.itemsize,))
        arr = np.full(shape, np.nan, dtype=np.float32)
        buf.wide = {**(store or {}), dtype.name: arr}
    # Element e of the layout is element offset + sum(i*s) of the buffer's elements of that
    # dtype, on chip as in HBM (partition p, element j of a row is p * F + j).
    start = lay.offset * 4
    strides = tuple(s * 4 for s in lay.strides)
    return np.ndarray(lay.shape, np.float32, buffer=arr, offset=start, strides=strides)


def keep(view: View, values: np.ndarray) -> None:
    """Remember the fp32 values a write through `view` stores (its bytes get them rounded)."""
    wide = _wide_view(view.buffer, view.layout, create=True)
    with np.errstate(invalid="ignore", over="ignore"):
        wide[...] = values


def overlay(view: View, raw: np.ndarray, f32: np.ndarray) -> np.ndarray:
    """`f32` (the bytes `raw` as fp32) with each element's kept value where the bytes still
    hold that value rounded."""
    wide = _wide_view(view.buffer, view.layout, create=False)
    if wide is None:
        return f32
    rounded = dt.cast(wide, view.dtype)
    isz = view.dtype.itemsize
    bits = np.dtype(f"u{isz}")
    same = rounded.view(bits) == np.ascontiguousarray(raw).view(bits)
    return np.where(same, wide, f32)
