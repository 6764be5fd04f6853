"""Batch normalization of [N, C, *spatial] strided views, forward (training with running-stat
updates, and eval) and backward (the device kernels of aten.native_batch_norm and
native_batch_norm_backward), with references.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.

Channels go on partitions (tiles of up to 128 channels), N and the spatial dims on the free
axis (merged where every operand allows, cut into chunks that fit SBUF): every statistic is a
per-partition reduction, and the normalization is one ScalarE activation per chunk
(x * scale + shift with per-channel scale and shift).
"""

from __future__ import annotations

import math

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._channels import ChannelSpace, load_chan, store_chan
from ._common import P_MAX, fail
from ._rows import Prefetch

DTYPES = ("bfloat16", "float16", "float32")
BN_STATS_FMAX = 512  # elements per bn_stats instruction (bn_stats_fmax)
BN_STATS_WIDTH = 6  # bn_stats output per partition: (count, mean, var*count) x (even, odd)
F32 = nl.float32


def _check(what: str, x, tensors: dict, vectors: dict) -> None:
    if len(x.shape) < 2:
        fail(f"{what}: x must be [N, C, ...] (at least 2-D), got shape {list(x.shape)}")
    for name, t in {"x": x, **tensors}.items():
        if t is None:
            continue
        if tuple(t.shape) != tuple(x.shape):
            fail(f"{what}: {name} has shape {list(t.shape)}, expected {list(x.shape)}")
        if t.dtype not in DTYPES:
            fail(f"{what}: {name} dtype {t.dtype} is not one of {', '.join(DTYPES)}")
    c = x.shape[1]
    for name, v in vectors.items():
        if v is not None and tuple(v.shape) != (c,):
            fail(f"{what}: {name} must have shape [C]=[{c}], got {list(v.shape)}")
        if v is not None and v.dtype not in DTYPES:
            fail(f"{what}: {name} dtype {v.dtype} is not one of {', '.join(DTYPES)}")


def _invstd(var, eps_t):
    t = ro.sbuf(var.shape, F32, "invstd")
    nisa.activation(dst=t, op=nl.rsqrt, data=var, bias=eps_t)
    return t


# ---------------------------------------------------------------- forward
def batch_norm_forward(
    out,
    save_mean,
    save_invstd,
    x,
    weight,
    bias,
    running_mean,
    running_var,
    *,
    training: bool,
    momentum: float,
    eps: float,
) -> None:
    """out = (x - mean) * invstd * weight + bias per channel (dim 1) of x [N, C, *S].

    Training: mean and biased variance over N and S (VectorE bn_stats/bn_aggr, merged per
    chunk); save_mean / save_invstd receive them; running_mean / running_var (if given) are
    updated in place: r = (1 - momentum) * r + momentum * stat, with the unbiased variance
    (var * n / (n - 1)). Eval: the running statistics normalize; save_mean / save_invstd
    (if given, as on CUDA) receive running_mean and 1/sqrt(running_var + eps).

    Dimensions:
        x, out: [N, C, *S] views, any strides. weight, bias, running_*, save_*: [C] or None.
    """
    what = "batch_norm"
    vecs = dict(
        weight=weight,
        bias=bias,
        running_mean=running_mean,
        running_var=running_var,
        save_mean=save_mean,
        save_invstd=save_invstd,
    )
    _check(what, x, {"out": out}, vecs)
    if not training and (running_mean is None or running_var is None):
        fail(f"{what}: eval mode (training=False) needs running_mean and running_var")
    space = ChannelSpace(tuple(x.shape), {"x": x, "out": out})
    chunks = space.chunks(x.dtype.itemsize + out.dtype.itemsize + 4)
    reuse = training and len(chunks) == 1
    passes = 2 if training and not reuse else 1
    ctiles = space.channel_tiles()
    reqs = [(ct, c) for ct in ctiles for _ in range(passes) for c in chunks]
    pf = Prefetch(reqs, lambda r: space.load("x", *r[0], *r[1], x.dtype))
    eps_t = ro.sbuf((P_MAX, 1), F32, "eps")
    nisa.memset(dst=eps_t, value=float(eps))
    for c0, c1 in ctiles:
        m = c1 - c0
        if training:
            mean, var, kept = _channel_stats(pf, m, chunks, reuse)
        else:
            mean = load_chan(running_mean, c0, c1, "mean")
            var = load_chan(running_var, c0, c1, "var")
        invstd = _invstd(var, eps_t[:m])
        scale, shift = _scale_shift(
            mean, invstd, load_chan(weight, c0, c1, "w"), load_chan(bias, c0, c1, "b")
        )
        for i, (f0, f1) in enumerate(chunks):
            xt = kept[i] if reuse else pf.next()
            y = ro.sbuf(xt.shape, out.dtype, "y")
            nisa.activation(dst=y, op=nl.copy, data=xt, scale=scale, bias=shift)
            space.store("out", c0, c1, f0, f1, y)
        store_chan(save_mean, c0, c1, mean)
        store_chan(save_invstd, c0, c1, invstd)
        if training:
            n = space.n
            unbias = n / (n - 1) if n > 1 else math.inf
            _update_running(running_mean, c0, c1, mean, momentum, 1.0)
            _update_running(running_var, c0, c1, var, momentum, unbias)


def _channel_stats(pf: Prefetch, m: int, chunks: list, reuse: bool):
    """(mean, biased var, [the chunk] if reuse) of a channel tile over all its chunks: per
    chunk bn_stats + bn_aggr into a (count, mean, var * count) triple, then one bn_aggr."""
    tri = ro.sbuf((m, len(chunks), 3), F32, "chunk_moments")
    kept = []
    for i, (f0, f1) in enumerate(chunks):
        xt = pf.next()
        if reuse:
            kept.append(xt)
        n = f1 - f0
        pieces = range(0, n, BN_STATS_FMAX)
        st = ro.sbuf((m, len(pieces), BN_STATS_WIDTH), F32, "bn_stats")
        for k, p0 in enumerate(pieces):
            nisa.bn_stats(dst=st[:, k, :], data=xt[:, p0 : min(n, p0 + BN_STATS_FMAX)])
        if len(chunks) == 1:
            mv = ro.sbuf((m, 2), F32, "mean_var")
            nisa.bn_aggr(dst=mv, data=st)
            return mv[:, 0:1], mv[:, 1:2], kept
        nisa.bn_aggr(dst=tri[:, i, 1:3], data=st)
    nisa.memset(dst=tri[:, :, 0:1], value=float(chunks[0][1] - chunks[0][0]))
    last = chunks[-1][1] - chunks[-1][0]
    if last != chunks[0][1] - chunks[0][0]:
        nisa.memset(dst=tri[:, len(chunks) - 1, 0:1], value=float(last))
    nisa.tensor_tensor(dst=tri[:, :, 2], data1=tri[:, :, 2], data2=tri[:, :, 0], op=nl.multiply)
    mv = ro.sbuf((m, 2), F32, "mean_var")
    nisa.bn_aggr(dst=mv, data=tri)
    return mv[:, 0:1], mv[:, 1:2], kept


def _scale_shift(mean, invstd, w, b):
    """Per channel: scale = invstd * w, shift = b - mean * scale."""
    scale = invstd
    if w is not None:
        scale = ro.sbuf(invstd.shape, F32, "scale")
        nisa.tensor_tensor(dst=scale, data1=invstd, data2=w, op=nl.multiply)
    shift = ro.sbuf(invstd.shape, F32, "shift")
    nisa.scalar_tensor_tensor(
        dst=shift, data=mean, op0=nl.multiply, operand0=-1.0, op1=nl.multiply, operand1=scale
    )
    if b is not None:
        nisa.tensor_tensor(dst=shift, data1=shift, data2=b, op=nl.add)
    return scale, shift


def _update_running(vec, c0: int, c1: int, stat, momentum: float, factor: float) -> None:
    """vec[c0:c1] = (1 - momentum) * vec + momentum * factor * stat, in place."""
    if vec is None:
        return
    r = load_chan(vec, c0, c1, "running")
    nisa.tensor_scalar(dst=r, data=r, op0=nl.multiply, operand0=1.0 - momentum)
    nisa.scalar_tensor_tensor(
        dst=r, data=stat, op0=nl.multiply, operand0=momentum * factor, op1=nl.add, operand1=r
    )
    store_chan(vec, c0, c1, r)


# ---------------------------------------------------------------- backward
def batch_norm_backward(
    grad_x,
    grad_weight,
    grad_bias,
    grad_out,
    x,
    weight,
    save_mean,
    save_invstd,
    running_mean=None,
    running_var=None,
    *,
    training: bool,
    eps: float,
) -> None:
    """Gradients of batch_norm_forward (aten.native_batch_norm_backward); any output may be
    None.

    Per channel over N and S: sum_g = sum(grad_out), dot = sum(grad_out * (x - mean));
    grad_weight = dot * invstd, grad_bias = sum_g; training: grad_x = (grad_out - sum_g / n -
    (x - mean) * dot * invstd^2 / n) * invstd * weight, computed as grad_out * k + x * a + c
    with per-channel k, a, c; eval: grad_x = grad_out * invstd * weight. Training reads
    mean/invstd from save_mean/save_invstd, eval from running_mean and running_var (+ eps).

    Dimensions:
        grad_x, grad_out, x: [N, C, *S]. weight, save_*, running_*, grad_weight, grad_bias: [C].
    """
    what = "batch_norm_backward"
    _check(
        what,
        x,
        {"grad_out": grad_out, "grad_x": grad_x},
        dict(
            weight=weight,
            save_mean=save_mean,
            save_invstd=save_invstd,
            running_mean=running_mean,
            running_var=running_var,
            grad_weight=grad_weight,
            grad_bias=grad_bias,
        ),
    )
    stats = (save_mean, save_invstd) if training else (running_mean, running_var)
    if stats[0] is None or stats[1] is None:
        need = "save_mean and save_invstd" if training else "running_mean and running_var"
        fail(f"{what}: {'training' if training else 'eval'} mode needs {need}")
    views = {"g": grad_out, "x": x} | ({} if grad_x is None else {"gx": grad_x})
    space = ChannelSpace(tuple(x.shape), views)
    chunks = space.chunks(grad_out.dtype.itemsize + x.dtype.itemsize + 16)
    sums_needed = (
        grad_weight is not None or grad_bias is not None or (training and grad_x is not None)
    )
    reuse = sums_needed and len(chunks) == 1
    passes = [1] * sums_needed + [2] * (grad_x is not None and not reuse)

    def load(r):
        (c0, c1), p, (f0, f1) = r
        g = space.load("g", c0, c1, f0, f1, grad_out.dtype)
        xt = space.load("x", c0, c1, f0, f1, x.dtype) if p == 1 or training else None
        return g, xt

    ctiles = space.channel_tiles()
    pf = Prefetch([(ct, p, c) for ct in ctiles for p in passes for c in chunks], load)
    eps_t = ro.sbuf((P_MAX, 1), F32, "eps")
    nisa.memset(dst=eps_t, value=float(eps))
    for c0, c1 in ctiles:
        m = c1 - c0
        mean = load_chan(stats[0], c0, c1, "mean")
        invstd = load_chan(stats[1], c0, c1, "invstd")
        if not training:
            invstd = _invstd(invstd, eps_t[:m])
        kept, sum_g, dot = [], None, None
        if sums_needed:
            kept, sum_g, dot = _grad_sums(pf, m, chunks, mean, reuse)
        if grad_weight is not None:
            gw = ro.sbuf((m, 1), F32, "grad_weight")
            nisa.tensor_tensor(dst=gw, data1=dot, data2=invstd, op=nl.multiply)
            store_chan(grad_weight, c0, c1, gw)
        store_chan(grad_bias, c0, c1, sum_g)
        if grad_x is not None:
            coefs = _grad_x_coefs(
                invstd, load_chan(weight, c0, c1, "w"), mean, sum_g, dot, space.n, training
            )
            feed = iter(kept) if reuse else (pf.next() for _ in chunks)
            _grad_x_chunks(space, (c0, c1), chunks, feed, grad_x.dtype, coefs)


def _grad_x_chunks(space, ct, chunks, feed, dtype, coefs) -> None:
    """grad_x = grad_out * k + x * a + c per chunk (ScalarE x * a + c, VectorE the rest);
    eval (a None): grad_out * k on ScalarE."""
    k, a, c = coefs
    for f0, f1 in chunks:
        g, xt = next(feed)
        gx = ro.sbuf(g.shape, dtype, "grad_x")
        if a is not None:
            t = ro.sbuf(g.shape, F32, "x_term")
            nisa.activation(dst=t, op=nl.copy, data=xt, scale=a, bias=c)
            nisa.scalar_tensor_tensor(
                dst=gx, data=g, op0=nl.multiply, operand0=k, op1=nl.add, operand1=t
            )
        else:
            nisa.activation(dst=gx, op=nl.copy, data=g, scale=k)
        space.store("gx", *ct, f0, f1, gx)


def _grad_sums(pf: Prefetch, m: int, chunks: list, mean, reuse: bool):
    """([chunk] if reuse, sum(g), sum(g * (x - mean))) of a channel tile, [m, 1] fp32: ScalarE
    centres x and sums g in its accumulator, VectorE multiplies and sums."""
    nmean = ro.sbuf((m, 1), F32, "neg_mean")
    nisa.tensor_scalar(dst=nmean, data=mean, op0=nl.multiply, operand0=-1.0)
    part = ro.sbuf((m, 2, len(chunks)), F32, "chunk_sums")
    kept = []
    for i in range(len(chunks)):
        g, xt = pf.next()
        if reuse:
            kept.append((g, xt))
        junk = ro.sbuf(g.shape, F32, "g_copy")
        nisa.activation(
            dst=junk,
            op=nl.copy,
            data=g,
            reduce_op=nl.add,
            reduce_res=part[:, 0, i : i + 1],
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        xc = ro.sbuf(g.shape, F32, "x_centered")
        nisa.activation(dst=xc, op=nl.copy, data=xt, bias=nmean)
        nisa.tensor_tensor(dst=xc, data1=xc, data2=g, op=nl.multiply)
        nisa.tensor_reduce(dst=part[:, 1, i : i + 1], op=nl.add, data=xc, axis=1)
    if len(chunks) == 1:
        return kept, part[:, 0, :], part[:, 1, :]
    tot = ro.sbuf((m, 2), F32, "sums")
    nisa.tensor_reduce(dst=tot, op=nl.add, data=part, axis=2)
    return kept, tot[:, 0:1], tot[:, 1:2]


def _grad_x_coefs(invstd, w, mean, sum_g, dot, n: int, training: bool):
    """Per channel k = invstd * w; training: a = -dot * invstd^2 * k / n and
    c = -mean * a - sum_g * k / n, so grad_x = grad_out * k + x * a + c."""
    k = invstd
    if w is not None:
        k = ro.sbuf(invstd.shape, F32, "k")
        nisa.tensor_tensor(dst=k, data1=invstd, data2=w, op=nl.multiply)
    if not training:
        return k, None, None
    a = ro.sbuf(k.shape, F32, "a")
    nisa.tensor_scalar(
        dst=a, data=dot, op0=nl.multiply, operand0=invstd, op1=nl.multiply, operand1=invstd
    )
    nisa.scalar_tensor_tensor(
        dst=a, data=a, op0=nl.multiply, operand0=-1.0 / n, op1=nl.multiply, operand1=k
    )
    c = ro.sbuf(k.shape, F32, "c")
    nisa.scalar_tensor_tensor(
        dst=c, data=sum_g, op0=nl.multiply, operand0=-1.0 / n, op1=nl.multiply, operand1=k
    )
    t = ro.sbuf(k.shape, F32, "mean_a")
    nisa.tensor_tensor(dst=t, data1=mean, data2=a, op=nl.multiply)
    nisa.tensor_tensor(dst=c, data1=c, data2=t, op=nl.subtract)
    return k, a, c


# ---------------------------------------------------------------- references
def _bcast(v, ndim: int) -> np.ndarray:
    return np.asarray(v, np.float64).reshape((1, -1) + (1,) * (ndim - 2))


def batch_norm_ref(
    x,
    weight=None,
    bias=None,
    running_mean=None,
    running_var=None,
    *,
    training: bool,
    momentum: float = 0.1,
    eps: float = 1e-5,
):
    """(out, save_mean, save_invstd, new_running_mean, new_running_var) in float64
    (save_* of eval mode as on CUDA: running_mean and 1/sqrt(running_var + eps))."""
    x64 = np.asarray(x, np.float64)
    axes = (0, *range(2, x64.ndim))
    n = x64.size // x64.shape[1]
    new_rm, new_rv = running_mean, running_var
    if training:
        mean, var = x64.mean(axis=axes), x64.var(axis=axes)
        if running_mean is not None:
            new_rm = (1 - momentum) * np.asarray(running_mean, np.float64) + momentum * mean
        if running_var is not None:
            unbiased = var * n / (n - 1)
            new_rv = (1 - momentum) * np.asarray(running_var, np.float64) + momentum * unbiased
    else:
        mean, var = np.asarray(running_mean, np.float64), np.asarray(running_var, np.float64)
    invstd = 1.0 / np.sqrt(var + eps)
    y = (x64 - _bcast(mean, x64.ndim)) * _bcast(invstd, x64.ndim)
    if weight is not None:
        y = y * _bcast(weight, x64.ndim)
    if bias is not None:
        y = y + _bcast(bias, x64.ndim)
    return y, mean, invstd, new_rm, new_rv


def batch_norm_backward_ref(grad_out, x, weight, mean, invstd, *, training: bool):
    """(grad_x, grad_weight, grad_bias) in float64 from the statistics the forward used."""
    g, x64 = np.asarray(grad_out, np.float64), np.asarray(x, np.float64)
    nd = x64.ndim
    axes = (0, *range(2, nd))
    n = x64.size // x64.shape[1]
    mu, inv = _bcast(mean, nd), _bcast(invstd, nd)
    sum_g = g.sum(axis=axes)
    dot = (g * (x64 - mu)).sum(axis=axes)
    k = inv if weight is None else inv * _bcast(weight, nd)
    if training:
        proj = (x64 - mu) * _bcast(dot / n, nd) * inv * inv
        gx = (g - proj - _bcast(sum_g / n, nd)) * k
    else:
        gx = g * k
    return gx, dot * np.asarray(invstd, np.float64), sum_g
