"""2-D pooling device kernels (NCHW) for the PyTorch device: max pool with int64 indices,
average pool, the 1x1 adaptive average pool, their backward, and float64 references.

Layer: kernel library (trnsim.kernels); public NKI API only. Follows docs/device-kernels.md.
Planes (n, c) sit on partitions; each kernel tap is one VectorE/GpSimd instruction over a
strided window of a padded input band (kernels/_pool_bands.py).
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import fail
from ._pool_bands import (
    P_MAX,
    PoolAxis,
    geometry,
    load_band,
    plane_runs,
    row_bands,
    scatter_bands,
    window,
)

DTYPES = ("float32", "bfloat16", "float16")
NEG_INF = float("-inf")


def _check(what: str, x, out, ya: PoolAxis, xa: PoolAxis, indices=None) -> None:
    if len(x.shape) not in (3, 4) or x.dtype.name not in DTYPES:
        fail(f"{what}: input must be a 3-D or 4-D float tensor (N, C, H, W), got "
             f"{list(x.shape)} {x.dtype.name}")
    want = (*x.shape[:-2], ya.out, xa.out)
    if tuple(out.shape) != tuple(want) or out.dtype.name not in DTYPES:
        fail(f"{what}: output has shape {list(out.shape)} {out.dtype.name}; expected "
             f"{list(want)} float")
    if indices is not None and (tuple(indices.shape) != (*want, 2)
                                or indices.dtype.name != "int32"):
        fail(f"{what}: indices must be the int64 pair view [{', '.join(map(str, want))}, 2] "
             f"int32 (docs/device-kernels.md), got {list(indices.shape)} {indices.dtype.name}")


def _taps(ya: PoolAxis, xa: PoolAxis):
    return [(i, j) for i in range(ya.k) for j in range(xa.k)]


# ---------------------------------------------------------------- max pool


def max_pool2d(out, indices, x, *, kernel_size, stride, padding, dilation, ceil_mode) -> None:
    """``out = max over each window`` (-inf padding) and, unless indices is None, the flat
    index ih * W + iw of the first maximum of each window (torch's order), as int64 pairs.

    Per band of output rows: the padded input band is loaded once; per tap VectorE compares
    the window with the running max (greater -> uint8 mask), overwrites the best tap's
    offset where it is larger (tensor_copy_predicated, int32) and takes the max; the flat
    index is the window origin (an iota pattern) plus the best offset (GpSimd, exact int32).

    Args:
        out: [N, C, OH, OW] (or [C, OH, OW]) HBM view; indices: its int64 pair view
            [..., OH, OW, 2] or None; x: [N, C, H, W] float32/bfloat16/float16, any strides.
        kernel_size, stride (None or [] = kernel_size), padding, dilation: int or pair;
        ceil_mode: torch's output-size rule.

    Notes:
        A NaN in a window gives out NaN (VectorE max) but its index is not tracked (torch
        returns the NaN's index).
    """
    what = "max_pool2d"
    ya, xa = geometry(what, x.shape[-2:], kernel_size, stride, padding, dilation, ceil_mode)
    _check(what, x, out, ya, xa, indices)
    for count, (xv, ov, iv) in plane_runs([x, out, indices]):
        for q0 in range(0, count, P_MAX):
            qn = min(P_MAX, count - q0)
            for o0, nr in row_bands(ya, xa, x.dtype.itemsize):
                v0, v1 = ya.span(o0, nr)
                band = load_band(xv, q0, qn, ya, xa, v0, v1, NEG_INF, x.dtype)
                _max_band(band, qn, ya, xa, v0, o0, nr, ov, iv, q0, out.dtype)


def _max_band(band, qn, ya, xa, v0, o0, nr, ov, iv, q0, dtype) -> None:
    ow = xa.out
    best = nl.ndarray((P_MAX, nr, ow), dtype=dtype, buffer=nl.sbuf, name="pool_max")
    off = mask = None
    if iv is not None:
        off = nl.ndarray((P_MAX, nr, ow), dtype=nl.int32, buffer=nl.sbuf, name="pool_off")
        mask = nl.ndarray((P_MAX, nr, ow), dtype=nl.uint8, buffer=nl.sbuf, name="pool_gt")
        nisa.memset(dst=off[0:qn], value=0, engine=nisa.engine.gpsimd)
    for t, (i, j) in enumerate(_taps(ya, xa)):
        win = window(band, qn, ya, xa, v0, o0, nr, i, j)
        if t == 0:
            nisa.tensor_copy(dst=best[0:qn], src=win)
            continue
        if iv is not None:
            nisa.tensor_tensor(dst=mask[0:qn], data1=win, data2=best[0:qn], op=nl.greater)
            nisa.tensor_copy_predicated(dst=off[0:qn], src=i * ya.d * xa.inp + j * xa.d,
                                        predicate=mask[0:qn])
        nisa.tensor_tensor(dst=best[0:qn], data1=best[0:qn], data2=win, op=nl.maximum)
    nisa.dma_copy(dst=ov.rows(q0, qn, o0, nr, 0, ow), src=best[0:qn])
    if iv is None:
        return
    pairs = nl.ndarray((P_MAX, nr, ow, 2), dtype=nl.int32, buffer=nl.sbuf, name="pool_idx")
    base = _window_origins(qn, ya, xa, o0, nr)
    nisa.tensor_tensor(dst=pairs[0:qn, :, :, 0], data1=base[0:qn], data2=off[0:qn],
                       op=nl.add, engine=nisa.engine.gpsimd)
    nisa.memset(dst=pairs[0:qn, :, :, 1], value=0, engine=nisa.engine.gpsimd)  # indices >= 0
    nisa.dma_copy(dst=iv.rows(q0, qn, o0, nr, 0, ow), src=pairs[0:qn])


def _window_origins(qn: int, ya: PoolAxis, xa: PoolAxis, o0: int, nr: int):
    """int32 [qn, nr, OW]: flat input index of each window's first tap, (oh*s - p)*W + ow*s - p
    (may be negative at the padded edges; the chosen tap is always inside)."""
    base = nl.ndarray((P_MAX, nr, xa.out), dtype=nl.int32, buffer=nl.sbuf, name="pool_org")
    nisa.iota(dst=base[0:qn], pattern=[[ya.s * xa.inp, nr], [xa.s, xa.out]],
              offset=(o0 * ya.s - ya.p) * xa.inp - xa.p, channel_multiplier=0)
    return base


def max_pool2d_backward(grad_input, grad_out, indices, *, kernel_size, stride, padding,
                        dilation, ceil_mode) -> None:
    """grad_input[n, c, idx] = sum of grad_out over the windows whose max was at idx.

    Per band and tap: the window offset of each output's max (index - window origin) is
    compared with the tap's offset and the matching grad_out added into that tap's window of
    an fp32 band of grad_input (scalar_tensor_tensor on VectorE, the add on GpSimd); rows
    shared by consecutive bands carry over (kernels/_pool_bands.scatter_bands).
    """
    what = "max_pool2d_backward"
    ya, xa = geometry(what, grad_input.shape[-2:], kernel_size, stride, padding, dilation,
                      ceil_mode)
    _check(what, grad_input, grad_out, ya, xa, indices)
    for count, (gv, ov, iv) in plane_runs([grad_input, grad_out, indices]):
        for q0 in range(0, count, P_MAX):
            qn = min(P_MAX, count - q0)

            def contribute(acc, v0, o0, nr, ov=ov, iv=iv, q0=q0, qn=qn):
                go, _ = _grad_rows(ov, q0, qn, o0, nr, xa.out)
                pairs = nl.ndarray((P_MAX, nr, xa.out, 2), dtype=nl.int32, buffer=nl.sbuf,
                                   name="pool_idx")
                nisa.dma_copy(dst=pairs[0:qn], src=iv.rows(q0, qn, o0, nr, 0, xa.out))
                off = nl.ndarray((P_MAX, nr, xa.out), dtype=nl.int32, buffer=nl.sbuf,
                                 name="pool_off")
                nisa.tensor_tensor(dst=off[0:qn], data1=pairs[0:qn, :, :, 0],
                                   data2=_window_origins(qn, ya, xa, o0, nr)[0:qn],
                                   op=nl.subtract, engine=nisa.engine.gpsimd)
                for i, j in _taps(ya, xa):
                    part = nl.ndarray((P_MAX, nr, xa.out), dtype=nl.float32, buffer=nl.sbuf,
                                      name="pool_part")
                    nisa.scalar_tensor_tensor(
                        dst=part[0:qn], data=off[0:qn], op0=nl.equal,
                        operand0=float(i * ya.d * xa.inp + j * xa.d), op1=nl.multiply,
                        operand1=go[0:qn])
                    _add_into(window(acc, qn, ya, xa, v0, o0, nr, i, j), part[0:qn])

            scatter_bands(gv, q0, qn, ya, xa, contribute)


def _grad_rows(ov, q0, qn, o0, nr, ow):
    """grad_out rows o0..o0+nr-1 of planes q0.. as fp32 [128, nr, OW] (the DMA casts)."""
    go = nl.ndarray((P_MAX, nr, ow), dtype=nl.float32, buffer=nl.sbuf, name="pool_go")
    nisa.dma_copy(dst=go[0:qn], src=ov.rows(q0, qn, o0, nr, 0, ow))
    return go, None


def _add_into(dst_view, part) -> None:
    """dst += part on GpSimd (SBUF fp32; VectorE is busy forming the parts)."""
    nisa.tensor_tensor(dst=dst_view, data1=dst_view, data2=part, op=nl.add,
                       engine=nisa.engine.gpsimd)


# ---------------------------------------------------------------- average pool


def _avg_factors(ax: PoolAxis, count_include_pad: bool) -> list[int]:
    """torch's per-output divisor factor along one axis (avg_pool2d: the divisor is the
    product of the row and column factors)."""
    out = []
    for o in range(ax.out):
        start = o * ax.s - ax.p
        end = min(start + ax.k, ax.inp + ax.p)
        size = end - start
        start, end = max(start, 0), min(end, ax.inp)
        out.append(size if count_include_pad else end - start)
    return out


def _runs(vals: list[int]) -> list[tuple[int, int, int]]:
    """(start, length, value) of the runs of equal values."""
    runs, i = [], 0
    while i < len(vals):
        j = i
        while j < len(vals) and vals[j] == vals[i]:
            j += 1
        runs.append((i, j - i, vals[i]))
        i = j
    return runs


def _recip_tile(qn, ya, xa, o0, nr, count_include_pad, divisor_override):
    """fp32 [qn, nr, OW] of 1 / divisor, by memsets of the rectangles of equal divisors."""
    t = nl.ndarray((P_MAX, nr, xa.out), dtype=nl.float32, buffer=nl.sbuf, name="pool_recip")
    if divisor_override:
        nisa.memset(dst=t[0:qn], value=1.0 / divisor_override, engine=nisa.engine.gpsimd)
        return t
    fh = _avg_factors(ya, count_include_pad)[o0 : o0 + nr]
    fw = _avg_factors(xa, count_include_pad)
    for r0, rn, hv in _runs(fh):
        for c0, cn, wv in _runs(fw):
            nisa.memset(dst=t[0:qn, r0 : r0 + rn, c0 : c0 + cn], value=1.0 / (hv * wv),
                        engine=nisa.engine.gpsimd)
    return t


def _check_avg(what: str, divisor_override) -> None:
    if divisor_override is not None and (not isinstance(divisor_override, int)
                                         or divisor_override == 0):
        fail(f"{what}: divisor_override={divisor_override!r} must be None or a non-zero int")


def avg_pool2d(out, x, *, kernel_size, stride, padding, ceil_mode, count_include_pad=True,
               divisor_override=None) -> None:
    """``out = sum over each window / divisor`` (zero padding; torch's divisor: the window
    clipped to the padded input, or to the input when count_include_pad is False, or
    divisor_override). Per band: one fp32 add per tap (VectorE and GpSimd alternating), one
    multiply by the reciprocal divisors (memsets of equal-divisor rectangles)."""
    what = "avg_pool2d"
    _check_avg(what, divisor_override)
    ya, xa = geometry(what, x.shape[-2:], kernel_size, stride, padding, 1, ceil_mode)
    _check(what, x, out, ya, xa)
    for count, (xv, ov) in plane_runs([x, out]):
        for q0 in range(0, count, P_MAX):
            qn = min(P_MAX, count - q0)
            for o0, nr in row_bands(ya, xa, x.dtype.itemsize):
                v0, v1 = ya.span(o0, nr)
                band = load_band(xv, q0, qn, ya, xa, v0, v1, 0.0, x.dtype)
                acc = nl.ndarray((P_MAX, nr, xa.out), dtype=nl.float32, buffer=nl.sbuf,
                                 name="pool_sum")
                for t, (i, j) in enumerate(_taps(ya, xa)):
                    win = window(band, qn, ya, xa, v0, o0, nr, i, j)
                    if t == 0:
                        nisa.tensor_copy(dst=acc[0:qn], src=win)
                    else:
                        eng = nisa.engine.vector if t % 2 else nisa.engine.gpsimd
                        nisa.tensor_tensor(dst=acc[0:qn], data1=acc[0:qn], data2=win,
                                           op=nl.add, engine=eng)
                res = nl.ndarray((P_MAX, nr, xa.out), dtype=out.dtype, buffer=nl.sbuf,
                                 name="pool_avg")
                recip = _recip_tile(qn, ya, xa, o0, nr, count_include_pad, divisor_override)
                nisa.tensor_tensor(dst=res[0:qn], data1=acc[0:qn], data2=recip[0:qn],
                                   op=nl.multiply)
                nisa.dma_copy(dst=ov.rows(q0, qn, o0, nr, 0, xa.out), src=res[0:qn])


def avg_pool2d_backward(grad_input, grad_out, *, kernel_size, stride, padding, ceil_mode,
                        count_include_pad=True, divisor_override=None) -> None:
    """grad_input = sum over the windows covering each input of grad_out / divisor."""
    what = "avg_pool2d_backward"
    _check_avg(what, divisor_override)
    ya, xa = geometry(what, grad_input.shape[-2:], kernel_size, stride, padding, 1, ceil_mode)
    _check(what, grad_input, grad_out, ya, xa)
    for count, (gv, ov) in plane_runs([grad_input, grad_out]):
        for q0 in range(0, count, P_MAX):
            qn = min(P_MAX, count - q0)

            def contribute(acc, v0, o0, nr, ov=ov, q0=q0, qn=qn):
                go, _ = _grad_rows(ov, q0, qn, o0, nr, xa.out)
                recip = _recip_tile(qn, ya, xa, o0, nr, count_include_pad, divisor_override)
                nisa.tensor_tensor(dst=go[0:qn], data1=go[0:qn], data2=recip[0:qn],
                                   op=nl.multiply)
                for t, (i, j) in enumerate(_taps(ya, xa)):
                    dst = window(acc, qn, ya, xa, v0, o0, nr, i, j)
                    eng = nisa.engine.vector if t % 2 else nisa.engine.gpsimd
                    nisa.tensor_tensor(dst=dst, data1=dst, data2=go[0:qn], op=nl.add,
                                       engine=eng)

            scatter_bands(gv, q0, qn, ya, xa, contribute)


# ---------------------------------------------------------------- adaptive average pool


def adaptive_avg_pool2d(out, x) -> None:
    """adaptive_avg_pool2d to a 1x1 output: the mean of each plane (one tensor_reduce per
    band of rows, then a multiply by 1 / (H * W)). Other output sizes are not served."""
    what = "adaptive_avg_pool2d"
    _check_adaptive(what, x, out)
    h, w = (int(v) for v in x.shape[-2:])
    rows = max(1, min(h, 4096 // w))
    for count, (xv, ov) in plane_runs([x, out]):
        for q0 in range(0, count, P_MAX):
            qn = min(P_MAX, count - q0)
            acc = nl.ndarray((P_MAX, 1, 1), dtype=nl.float32, buffer=nl.sbuf, name="gap_acc")
            for r0 in range(0, h, rows):
                nr = min(rows, h - r0)
                t = nl.ndarray((P_MAX, nr, w), dtype=x.dtype, buffer=nl.sbuf, name="gap_in")
                nisa.dma_copy(dst=t[0:qn], src=xv.rows(q0, qn, r0, nr, 0, w))
                part = acc if r0 == 0 else nl.ndarray((P_MAX, 1, 1), dtype=nl.float32,
                                                      buffer=nl.sbuf, name="gap_part")
                nisa.tensor_reduce(dst=part[0:qn, 0], op=nl.add, data=t[0:qn], axis=(1, 2))
                if r0:
                    nisa.tensor_tensor(dst=acc[0:qn], data1=acc[0:qn], data2=part[0:qn],
                                       op=nl.add)
            res = nl.ndarray((P_MAX, 1, 1), dtype=out.dtype, buffer=nl.sbuf, name="gap_out")
            nisa.tensor_scalar(dst=res[0:qn], data=acc[0:qn], op0=nl.multiply,
                               operand0=1.0 / (h * w))
            nisa.dma_copy(dst=ov.rows(q0, qn, 0, 1, 0, 1), src=res[0:qn])


def adaptive_avg_pool2d_backward(grad_input, grad_out) -> None:
    """grad_input = grad_out / (H * W) broadcast over each plane (1x1 output only)."""
    what = "adaptive_avg_pool2d_backward"
    _check_adaptive(what, grad_input, grad_out)
    h, w = (int(v) for v in grad_input.shape[-2:])
    rows = max(1, min(h, 4096 // w))
    for count, (gv, ov) in plane_runs([grad_input, grad_out]):
        for q0 in range(0, count, P_MAX):
            qn = min(P_MAX, count - q0)
            go = nl.ndarray((P_MAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="gap_go")
            nisa.dma_copy(dst=go[0:qn], src=ov.rows(q0, qn, 0, 1, 0, 1))
            nisa.tensor_scalar(dst=go[0:qn], data=go[0:qn], op0=nl.multiply,
                               operand0=1.0 / (h * w))
            zero = nl.ndarray((P_MAX, rows, w), dtype=nl.float32, buffer=nl.sbuf, name="gap_0")
            nisa.memset(dst=zero[0:qn], value=0.0, engine=nisa.engine.gpsimd)
            for r0 in range(0, h, rows):
                nr = min(rows, h - r0)
                res = nl.ndarray((P_MAX, nr, w), dtype=grad_input.dtype, buffer=nl.sbuf,
                                 name="gap_gin")
                nisa.tensor_scalar(dst=res[0:qn], data=zero[0:qn, 0:nr], op0=nl.add,
                                   operand0=go[0:qn])
                nisa.dma_copy(dst=gv.rows(q0, qn, r0, nr, 0, w), src=res[0:qn])


def _check_adaptive(what: str, x, out) -> None:
    if len(x.shape) not in (3, 4) or x.dtype.name not in DTYPES:
        fail(f"{what}: input must be a 3-D or 4-D float tensor, got {list(x.shape)} "
             f"{x.dtype.name}")
    if tuple(out.shape) != (*x.shape[:-2], 1, 1) or out.dtype.name not in DTYPES:
        fail(f"{what}: output has shape {list(out.shape)}; only a 1x1 output "
             f"{[*x.shape[:-2], 1, 1]} is served (the plane mean)")


# ---------------------------------------------------------------- references


def _windows(x64, ya: PoolAxis, xa: PoolAxis, fill: float):
    """[..., OH, OW, kh*kw] windows of the padded input (fill outside) and their flat input
    indices (-1 outside)."""
    h, w = x64.shape[-2:]
    pad_h = ya.virtual - h - ya.p
    pad_w = xa.virtual - w - xa.p
    lead = [(0, 0)] * (x64.ndim - 2)
    xp = np.pad(x64, [*lead, (ya.p, max(pad_h, 0)), (xa.p, max(pad_w, 0))],
                constant_values=fill)
    idx = np.pad(np.arange(h * w).reshape(h, w), [(ya.p, max(pad_h, 0)), (xa.p, max(pad_w, 0))],
                 constant_values=-1)
    wins, ids = [], []
    for i in range(ya.k):
        for j in range(xa.k):
            rows = slice(i * ya.d, i * ya.d + (ya.out - 1) * ya.s + 1, ya.s)
            cols = slice(j * xa.d, j * xa.d + (xa.out - 1) * xa.s + 1, xa.s)
            wins.append(xp[..., rows, cols])
            ids.append(idx[rows, cols])
    return np.stack(wins, -1), np.stack(ids, -1)


def max_pool2d_ref(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """(out, int64 indices) in float64, the first maximum of each window (torch's order)."""
    x64 = np.asarray(x, np.float64)
    ya, xa = geometry("max_pool2d_ref", x64.shape[-2:], kernel_size, stride, padding, dilation,
                      ceil_mode)
    wins, ids = _windows(x64, ya, xa, -np.inf)
    arg = np.argmax(wins, axis=-1)
    out = np.take_along_axis(wins, arg[..., None], -1)[..., 0]
    return out, np.take_along_axis(np.broadcast_to(ids, wins.shape), arg[..., None], -1)[..., 0]


def avg_pool2d_ref(x, kernel_size, stride=None, padding=0, ceil_mode=False,
                   count_include_pad=True, divisor_override=None):
    """avg_pool2d in float64 with torch's divisor rules."""
    x64 = np.asarray(x, np.float64)
    ya, xa = geometry("avg_pool2d_ref", x64.shape[-2:], kernel_size, stride, padding, 1,
                      ceil_mode)
    wins, _ = _windows(x64, ya, xa, 0.0)
    if divisor_override:
        div = float(divisor_override)
    else:
        div = np.outer(_avg_factors(ya, count_include_pad), _avg_factors(xa, count_include_pad))
    return wins.sum(-1) / div
