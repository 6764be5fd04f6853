"""Concatenation of strided tensors along one axis (the device kernel of aten.cat), with its
reference.

Layer: kernel library (trnsim.kernels); written against the public NKI API only. cat moves
data and computes nothing, so it is DMA only: each input of out's dtype is copied HBM -> HBM
into its slice of out (an input of another dtype goes through the pointwise "copy" kernel's
conversion), one dma_copy per box of at most DMA_ELEMS elements of the input's axes (`_boxes.Group`:
axes contiguous in both the input and out merge, so contiguous tensors move in long runs); any
strides on either side, zero strides (broadcast inputs) included. An input whose elements are
not adjacent along out's contiguous axis (a transposed gradient) goes through the pointwise
copy's tiled path instead of element-sized DMAs.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa

from ._args import Tensor, axis
from ._boxes import Group
from ._common import fail
from .pointwise import pointwise

DMA_ELEMS = 1 << 20  # elements per DMA (4 MiB of fp32): several DMAs keep several queues busy


def cat(out, inputs, *, dim: int, int64=()) -> None:
    """out = torch.cat(inputs, dim).

    Dimensions:
        inputs: tensors of out's rank whose shapes equal out's except along `dim`, where they
        sum to out's size (empty inputs are skipped, as torch skips them).

    Args:
        out: any dtype, int64 as a pair view named in int64=.
        inputs: any dtypes (an input of another dtype than out's is converted by the pointwise
            "copy" kernel, PyTorch's casts); int64 inputs are pair views named "inputs" (all)
            or "inputs.k" in int64=.
        dim: negative allowed.
    """
    what = "cat"
    ot = Tensor(what, "out", out, int64)
    names = tuple(int64)
    ins = []
    for k, v in enumerate(inputs):
        if any(int(s) == 0 for s in v.shape):
            continue
        name = f"inputs[{k}]"
        pair = "inputs" in names or f"inputs.{k}" in names
        ins.append(Tensor(what, name, v, (name,) if pair else ()))
    if not ins:
        fail(f"{what}: no non-empty input")
    d = axis(what, "dim", dim, len(ot.shape))
    total = 0
    for k, t in enumerate(ins):
        if len(t.shape) != len(ot.shape) or any(
            a != b for j, (a, b) in enumerate(zip(t.shape, ot.shape, strict=True)) if j != d
        ):
            fail(
                f"{what}: input {k} has shape {list(t.shape)}; out {list(ot.shape)} needs the "
                f"same sizes except along dim {d}"
            )
        total += t.shape[d]
    if total != ot.shape[d]:
        fail(f"{what}: the inputs' sizes along dim {d} sum to {total}, out has {ot.shape[d]}")
    step = int(ot.full.strides[d])
    start = 0
    for t in ins:
        if t.dtype != ot.dtype or _scattered(t.full, ot.full):
            # a conversion (PyTorch's casts), or an input read element by element along out's
            # contiguous axis (a transposed gradient): the pointwise copy's tiled path
            part = ot.full.slice(d, start, start + t.shape[d])
            pointwise(part, t.full, op="copy", int64=[i for i, x in ((0, ot), (1, t)) if x.pair])
            start += t.shape[d]
            continue
        src, dst = t.full, ot.full
        group = Group(
            tuple(int(s) for s in src.shape),
            [tuple(int(s) for s in src.strides), tuple(int(s) for s in dst.strides)],
        )
        base = dst.offset + start * step
        for box in group.boxes(DMA_ELEMS):
            nisa.dma_copy(
                dst=dst.ap(box.pattern(1) or [[1, 1]], offset=base + box.offsets[1]),
                src=src.ap(box.pattern(0) or [[1, 1]], offset=src.offset + box.offsets[0]),
            )
        start += t.shape[d]


def _scattered(src, dst) -> bool:
    """Whether src's elements along dst's innermost contiguous axis are not adjacent: a
    direct DMA would move them one element (one descriptor) at a time."""
    strides = [int(s) for s in dst.strides]
    inner = [j for j, (n, st) in enumerate(zip(dst.shape, strides, strict=True))
             if int(n) > 1 and st == 1]
    return bool(inner) and int(src.strides[inner[0]]) != 1


def cat_ref(inputs: list[np.ndarray], dim: int) -> np.ndarray:
    return np.concatenate([np.asarray(a) for a in inputs if np.asarray(a).size], axis=dim)
