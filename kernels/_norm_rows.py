"""Shared pieces of the norm device kernels (kernels/layer_norm.py): argument checks, the
row space of a [R, D] view with its per-row statistics, weight/bias on every partition, the
forward's statistics and normalization steps, and the fp32 accumulators of the weight/bias
gradients (summed over G and the partitions at the end).

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._common import P_MAX, fail
from ._rows import Prefetch, RowSpace, broadcast_vector, col_operand, vector_operand

DTYPES = ("bfloat16", "float16", "float32")
RESIDENT_SHARE = 0.25  # SBUF share for weight/bias kept on every partition for the kernel
ACC_SHARE = 0.5  # SBUF share for the grad_weight/grad_bias accumulators
BN_STATS_FMAX = 512  # elements per bn_stats instruction (bn_stats_fmax)
BN_STATS_WIDTH = 6  # bn_stats output per partition: (count, mean, var*count) x (even, odd)
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
            {k: broadcast_vector(v, P_MAX, 0, d, v.dtype, k) for k, v in vecs.items()}
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
        return {k: broadcast_vector(v, parts, c0, c1, v.dtype, k) for k, v in self.vecs.items()}

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


# ---------------------------------------------------------------- weight/bias gradients
def acc_bytes(n_accs: int, g: int) -> int:
    """SBUF bytes per partition and column for n_accs accumulators of G slots, the G-summed
    rows (G > 1) and the partition-summed row of store_accs."""
    return 0 if n_accs == 0 else 4 * (n_accs * g + (g > 1) + 1)


def acc_columns(d: int, bytes_per_col: int) -> int:
    """Columns of weight/bias gradient accumulators that fit in ACC_SHARE of SBUF (all D, or
    a multiple of 512)."""
    if bytes_per_col == 0:
        return d
    cols = int(ACC_SHARE * nl.tile_size.total_available_sbuf_size // bytes_per_col)
    return d if cols >= d else max(512, cols // 512 * 512)


def zero_accs(accs: dict, g: int, cols: int) -> dict:
    acc = {k: ro.sbuf((P_MAX, g, cols), F32, k + "_acc") for k in accs}
    for t in acc.values():
        nisa.memset(dst=t, value=0.0)
    return acc


def store_accs(acc: dict, dsts: dict, g: int, a0: int, a1: int) -> None:
    """Sum accumulators [128, G, cols] over G and the partitions; store to dsts[k][a0:a1].
    One [1, cols] row serves every accumulator in turn (acc_bytes counts it)."""
    cols = a1 - a0
    total = ro.sbuf((1, cols), F32, "grad_total") if acc else None
    for name, t in acc.items():
        full = t[:, 0, :]
        if g > 1:
            full = ro.sbuf((P_MAX, cols), F32, name + "_rows")
            ro.row_reduce(full, t.permute((0, 2, 1)), nl.add)
        ro.partition_sum(total, full)
        dst = dsts[name]
        step = dst.strides[0]
        nisa.dma_copy(dst=dst.ap([[0, 1], [step, cols]], offset=dst.offset + a0 * step), src=total)


# ---------------------------------------------------------------- forward steps
def normalize_rows(xt, mu, rs, nmr, w, b, out_dtype):
    """y = (x - mean) * rstd [* w] [+ b] of a chunk with G = 1 (per-partition mean, rstd).
    With a weight, VectorE's (x - mean) * w comes first (one pass when x and w are bf16) and
    ScalarE scales by rstd; without one, ScalarE's activation x * rstd + (-mean * rstd)
    normalizes. GpSimd adds the bias: three engines, one pass each (VectorE also runs
    bn_stats)."""
    y = ro.sbuf(xt.shape, out_dtype, "y")
    if w is not None:
        t = ro.sbuf(xt.shape, F32, "x_centered_w")
        if mu is None:  # RMSNorm
            nisa.tensor_tensor(dst=t, data1=xt, data2=w, op=nl.multiply)
        else:
            nisa.scalar_tensor_tensor(
                dst=t, data=xt, op0=nl.subtract, operand0=mu, op1=nl.multiply, operand1=w
            )
        u = y if b is None else ro.sbuf(xt.shape, F32, "xhat_w")
        nisa.activation(dst=u, op=nl.copy, data=t, scale=rs)
        if b is not None:
            nisa.tensor_tensor(dst=y, data1=u, data2=b, op=nl.add, engine=nisa.engine.gpsimd)
        return y
    xhat = y if b is None else ro.sbuf(xt.shape, F32, "xhat")
    nisa.activation(dst=xhat, op=nl.copy, data=xt, scale=rs, bias=nmr)
    if b is not None:
        nisa.tensor_tensor(dst=y, data1=xhat, data2=b, op=nl.add, engine=nisa.engine.gpsimd)
    return y


def normalize_block(y, src, rs, w, b) -> None:
    """y = src * rstd [* w] [+ b] for G > 1 (src already centred for LayerNorm)."""
    last = [k for k, v in (("r", True), ("w", w is not None), ("b", b is not None)) if v][-1]
    t = y if last == "r" else ro.sbuf(src.shape, F32, "xhat")
    ro.apply_col(t, src, nl.multiply, rs)
    if w is not None:
        z = y if last == "w" else ro.sbuf(src.shape, F32, "xhat_w")
        nisa.tensor_tensor(dst=z, data1=t, data2=w, op=nl.multiply)
        t = z
    if b is not None:
        nisa.tensor_tensor(dst=y, data1=t, data2=b, op=nl.add)


def row_stats_forward(pf: Prefetch, plan, m: int, g: int, d: int, eps_t, centered: bool):
    """Pass 1 over the chunks of one row tile: (mean or None, rstd, centered block or None,
    the loaded chunk when there is only one) with per-row values [parts, G]."""
    n_chunks = len(plan.chunks)
    rstd = ro.sbuf((m, g), F32, "rstd")
    mean = xc = None
    if centered and g == 1:
        pieces = [
            (c, p0, min(c1 - c0, p0 + BN_STATS_FMAX))
            for c, (c0, c1) in enumerate(plan.chunks)
            for p0 in range(0, c1 - c0, BN_STATS_FMAX)
        ]
        stats = ro.sbuf((m, len(pieces), BN_STATS_WIDTH), F32, "bn_stats")
    else:
        part = ro.sbuf((m, g, n_chunks), F32, "sum_sq")
    kept = []
    for c in range(n_chunks):
        ld = pf.next()
        xt = ld["x"]
        if n_chunks == 1:
            kept.append(ld)
        if centered and g == 1:
            for k, (_, p0, p1) in enumerate(pieces):
                if pieces[k][0] == c:
                    nisa.bn_stats(dst=stats[:, k, :], data=xt[:, 0, p0:p1])
            continue
        if centered:  # G > 1, one chunk: two-pass variance over the block
            mean = ro.sbuf((m, g), F32, "mean")
            ro.row_reduce(mean, xt, nl.add)
            nisa.tensor_scalar(dst=mean, data=mean, op0=nl.multiply, operand0=1.0 / d)
            xc = ro.sbuf(xt.shape, F32, "x_centered")
            ro.apply_col(xc, xt, nl.subtract, mean)
            xt = xc
        sq = ro.sbuf(xt.shape, F32, "x_sq")
        ro.act_rows(sq, xt, nl.square, sums=part[:, :, c])
    if centered and g == 1:
        mv = ro.sbuf((m, 2), F32, "mean_var")
        nisa.bn_aggr(dst=mv, data=stats)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=mv[:, 1:2], bias=eps_t)
        return mv[:, 0:1], rstd, None, kept
    ss = part[:, :, 0]
    if n_chunks > 1:
        ss = ro.sbuf((m, g), F32, "sum_sq_total")
        ro.row_reduce(ss, part, nl.add)
    nisa.activation(dst=rstd, op=nl.rsqrt, data=ss, scale=1.0 / d, bias=eps_t)
    return mean, rstd, xc, kept
