"""Pooling helpers: geometry (torch's output-size rules), planes on partitions, input bands
with fill values, and the band-by-band scatter-add of the backward kernels.

Layer: kernel library; public NKI API only. Each partition holds one (n, c) plane; a band is a
run of output rows and the virtual (padded) input rows its windows read. Virtual row v is
real row v - padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import fail

P_MAX = 128  # planes per tile (pmax)
BAND_BYTES = 16384  # target bytes per partition of one (fp32) input band


@dataclass(frozen=True)
class PoolAxis:
    """One spatial axis: input size, output size, kernel, stride, padding, dilation."""

    inp: int
    out: int
    k: int
    s: int
    p: int
    d: int

    def span(self, o0: int, n: int) -> tuple[int, int]:
        """Virtual input rows [v0, v1) read by outputs o0..o0+n-1."""
        return o0 * self.s, (o0 + n - 1) * self.s + (self.k - 1) * self.d + 1

    @property
    def virtual(self) -> int:
        """Virtual extent covering every window and the padded input."""
        return max(self.span(0, self.out)[1], self.inp + self.p)


def pool_out_size(inp: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's pooling_output_shape."""
    num = inp + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= inp + p:
        out -= 1
    return out


def _pair(what: str, name: str, v, default=None) -> tuple[int, int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        if default is None:
            fail(f"{what}: {name} is required")
        return default
    vals = [v] if isinstance(v, int) else list(v) if isinstance(v, (list, tuple)) else None
    if vals is None or len(vals) not in (1, 2) or not all(isinstance(i, int) for i in vals):
        fail(f"{what}: {name}={v!r} must be an int or a pair of ints")
    return (vals[0], vals[0]) if len(vals) == 1 else (vals[0], vals[1])


def geometry(what: str, inp_hw, kernel_size, stride, padding, dilation, ceil_mode):
    """(rows axis, columns axis) of a pooling; fail() with torch's rules otherwise."""
    k = _pair(what, "kernel_size", kernel_size)
    s = _pair(what, "stride", stride, default=k)
    p = _pair(what, "padding", padding, default=(0, 0))
    d = _pair(what, "dilation", dilation, default=(1, 1))
    axes = []
    for a in range(2):
        if k[a] < 1 or s[a] < 1 or d[a] < 1 or p[a] < 0:
            fail(f"{what}: kernel_size {k}, stride {s}, dilation {d} must be >= 1 and padding "
                 f"{p} >= 0")
        if p[a] > (d[a] * (k[a] - 1) + 1) // 2:
            fail(f"{what}: padding {p} must be at most half of the effective kernel size "
                 f"(torch's rule)")
        o = pool_out_size(int(inp_hw[a]), k[a], s[a], p[a], d[a], bool(ceil_mode))
        if o < 1:
            fail(f"{what}: the {k} window does not fit the input {list(inp_hw)}")
        axes.append(PoolAxis(int(inp_hw[a]), o, k[a], s[a], p[a], d[a]))
    return axes[0], axes[1]


# ---------------------------------------------------------------- planes


@dataclass(frozen=True)
class PlaneView:
    """An [N, C, H, W(, 2)] HBM tensor seen as planes: plane q of a run at offset
    base + q * ps, rows at rs, columns at cs (then the pair word at stride 1)."""

    t: Any
    base: int
    ps: int
    rs: int
    cs: int
    pair: bool

    def rows(self, q0: int, nq: int, r0: int, nr: int, c0: int, nc: int):
        pat = [[self.ps, nq], [self.rs, nr], [self.cs, nc]] + ([[1, 2]] if self.pair else [])
        return self.t.ap(pat, offset=self.base + q0 * self.ps + r0 * self.rs + c0 * self.cs)


def plane_runs(tensors: list) -> list[tuple[int, list]]:
    """[(count, [PlaneView per tensor])]: one run of N*C planes when every tensor's batch
    stride is C times its channel stride, else one run per image. None entries stay None;
    3-D tensors [C, H, W] are one image."""
    views = [t for t in tensors if t is not None]
    lead = views[0].shape[:-2] if not _is_pair(views[0]) else views[0].shape[:-3]
    n, c = (1, int(lead[0])) if len(lead) == 1 else (int(lead[0]), int(lead[1]))
    merged = all(_merge_ok(t, c) for t in views)
    runs = []
    for img in ([None] if merged or n == 1 else range(n)):
        pv = []
        for t in tensors:
            if t is None:
                pv.append(None)
                continue
            st = [int(s) for s in t.strides]
            sp = st[:-1] if _is_pair(t) else st
            batch = len(sp) == 4
            off = int(t.offset) + (0 if img is None or not batch else img * sp[0])
            pv.append(PlaneView(t, off, sp[-3], sp[-2], sp[-1], _is_pair(t)))
        runs.append(((n * c if merged else c), pv))
    return runs


def _is_pair(t) -> bool:
    return t.dtype.name == "int32" and int(t.shape[-1]) == 2


def _merge_ok(t, c: int) -> bool:
    sp = [int(s) for s in (t.strides[:-1] if _is_pair(t) else t.strides)]
    return len(sp) == 3 or int(t.shape[0]) == 1 or sp[0] == c * sp[1]


def row_bands(ya: PoolAxis, xa: PoolAxis, per_row_bytes: int = 4) -> list[tuple[int, int]]:
    """(first output row, rows) of the bands: input bands near BAND_BYTES per partition."""
    rows_in = max(1, BAND_BYTES // (xa.virtual * per_row_bytes))
    nr = max(1, (rows_in - (ya.k - 1) * ya.d - 1) // ya.s + 1)
    return [(o, min(nr, ya.out - o)) for o in range(0, ya.out, nr)]


def load_band(pv: PlaneView, q0: int, qn: int, ya: PoolAxis, xa: PoolAxis, v0: int, v1: int,
              fill: float, dtype):
    """SBUF [128, v1 - v0, virtual columns] of virtual rows v0..v1: the real input where it
    lies, `fill` elsewhere (padding, the ceil_mode overhang)."""
    wv = xa.virtual
    t = nl.ndarray((P_MAX, v1 - v0, wv), dtype=dtype, buffer=nl.sbuf, name="pool_band")
    r0, r1 = max(v0 - ya.p, 0), min(v1 - ya.p, ya.inp)
    covered = r0 == v0 - ya.p and r1 == v1 - ya.p and xa.p == 0 and wv == xa.inp
    if not covered:
        nisa.memset(dst=t[0:qn], value=fill, engine=nisa.engine.gpsimd)
    if r1 > r0:
        dst = t[0:qn, r0 + ya.p - v0 : r1 + ya.p - v0, xa.p : xa.p + xa.inp]
        nisa.dma_copy(dst=dst, src=pv.rows(q0, qn, r0, r1 - r0, 0, xa.inp))
    return t


def window(band, qn: int, ya: PoolAxis, xa: PoolAxis, v0: int, o0: int, nr: int, i: int, j: int):
    """The strided band view of tap (i, j) for output rows o0..o0+nr-1 (all columns)."""
    r = o0 * ya.s + i * ya.d - v0
    c = j * xa.d
    return band[0:qn, r : r + (nr - 1) * ya.s + 1 : ya.s, c : c + (xa.out - 1) * xa.s + 1 : xa.s]


def scatter_bands(gin: PlaneView, q0: int, qn: int, ya: PoolAxis, xa: PoolAxis, contribute):
    """grad_input planes q0.. = the sum over output bands of `contribute(acc_window, o0, nr,
    i, j)` into each tap's window: band by band in fp32, the rows shared with the next band
    carried over, every finished real row stored once (rows no window reaches are 0)."""
    bands = row_bands(ya, xa)
    wv = xa.virtual
    carry, carry_v0, done = None, 0, 0
    for b, (o0, nr) in enumerate(bands):
        v0, v1 = ya.span(o0, nr)
        nxt = bands[b + 1][0] * ya.s if b + 1 < len(bands) else ya.virtual
        v1 = max(v1, nxt)
        acc = nl.ndarray((P_MAX, v1 - v0, wv), dtype=nl.float32, buffer=nl.sbuf,
                         name="pool_gin")
        nisa.memset(dst=acc[0:qn], value=0.0, engine=nisa.engine.gpsimd)
        if carry is not None:
            n_c = carry.shape[1]
            nisa.tensor_copy(dst=acc[0:qn, carry_v0 - v0 : carry_v0 - v0 + n_c],
                             src=carry[0:qn])
        contribute(acc, v0, o0, nr)
        keep = min(nxt, v1)  # rows from `keep` on may still receive contributions
        _store_rows(gin, q0, qn, ya, xa, acc, v0, done, keep)
        done = keep
        carry = None
        if keep < v1:
            carry = nl.ndarray((P_MAX, v1 - keep, wv), dtype=nl.float32, buffer=nl.sbuf,
                               name="pool_carry")
            nisa.tensor_copy(dst=carry[0:qn], src=acc[0:qn, keep - v0 : v1 - v0])
            carry_v0 = keep


def _store_rows(gin: PlaneView, q0, qn, ya, xa, acc, v0: int, a: int, b: int) -> None:
    """Store virtual rows [a, b) of acc (tile rows from v0) that are real input rows."""
    r0, r1 = max(a - ya.p, 0), min(b - ya.p, ya.inp)
    if r1 <= r0:
        return
    res = nl.ndarray((P_MAX, r1 - r0, xa.inp), dtype=gin.t.dtype, buffer=nl.sbuf,
                     name="pool_gin_out")
    nisa.tensor_copy(dst=res[0:qn], src=acc[0:qn, r0 + ya.p - v0 : r1 + ya.p - v0,
                                            xa.p : xa.p + xa.inp])
    nisa.dma_copy(dst=gin.rows(q0, qn, r0, r1 - r0, 0, xa.inp), src=res[0:qn])
