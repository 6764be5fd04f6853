"""Multi-tensor optimizer steps (SGD, Adam, AdamW) in one launch each, updating parameters and
optimizer states in place; with their float64 references.

Layer: kernel library (trnsim.kernels); NKI API only. Formulas and operation order follow
PyTorch's single-tensor implementations (torch/optim/sgd.py `_single_tensor_sgd`, adam.py
`_single_tensor_adam`, AdamW = Adam with decoupled weight decay): every intermediate PyTorch
materializes as a tensor is rounded to the parameters' dtype at the same point (fp32 or bf16
tiles), the rest is fp32 engine math. Where PyTorch's CPU kernels fuse a multiply-add (add with
alpha, lerp) or divide (x / scalar, addcdiv), the engines round twice (multiply by the
reciprocal; no divide on hardware, nki-api.md §6.2), so results agree to within an ulp or two
of the dtype per step. Each list element is tiled on its own (kernels/_tiles.py) and all tiles
of all elements go through one prefetched stream.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from trnsim.nki import jit
from trnsim.nki import language as nl

from . import _tiles as T
from ._common import fail
from ._cores import share
from ._pw_tile import ConstPool, TileOps, Turns, dtype_scalar

DTYPES = ("float32", "bfloat16")
SBUF_SHARE = 0.75
TEMPS = 8  # fp32 scratch tiles per tile of the Adam body


def _lists(what: str, names: Sequence[str], lists: Sequence[Any]) -> list[list]:
    """The tensor lists, checked: same lengths, same shapes per element, one dtype."""
    n = len(lists[0])
    out = []
    for name, lst in zip(names, lists, strict=True):
        lst = list(lst)
        if len(lst) != n:
            fail(f"{what}: {name} has {len(lst)} tensors, params has {n}")
        out.append(lst)
    for j in range(n):
        p = out[0][j]
        if p.dtype.name not in DTYPES:
            fail(f"{what}: params[{j}] dtype {p.dtype.name} is not one of {', '.join(DTYPES)}")
        for name, lst in zip(names[1:], out[1:], strict=True):
            t = lst[j]
            if tuple(t.shape) != tuple(p.shape) or t.dtype != p.dtype:
                fail(
                    f"{what}: {name}[{j}] is {t.dtype.name} {list(t.shape)}, params[{j}] is "
                    f"{p.dtype.name} {list(p.shape)}; they must match"
                )
    return out


def _work(lists: list[list], temps: int) -> list[T.Work]:
    """Tiles of every element, loading every tensor of the element."""
    work = []
    for j in range(len(lists[0])):
        tensors = [lst[j] for lst in lists]
        shape = tuple(tensors[0].shape)
        ops = [T.operand(t, shape, "optim") for t in tensors]
        per_elem = sum(t.dtype.itemsize for t in tensors) * 2 + 4 * temps
        tiles = T.plan(shape, ops, T.free_budget(per_elem, SBUF_SHARE))
        loads = [T.Load(i) for i in range(len(ops))]
        work += [T.Work(j, tile, ops, loads) for tile in tiles]
    return work


@jit
def sgd(
    params,
    grads,
    momentum_bufs,
    *,
    lr,
    momentum=0.0,
    dampening=0.0,
    weight_decay=0.0,
    nesterov=False,
    maximize=False,
    first_step=False,
):
    """One SGD step over lists of tensors, in place (torch.optim.SGD, foreach=False).

    Args:
        params, grads: lists of HBM tensors, element j of one shape and dtype (fp32 or bf16).
        momentum_bufs: list of momentum buffers (same shapes), or None when momentum == 0.
        lr, momentum, dampening, weight_decay, nesterov, maximize: PyTorch's hyperparameters.
        first_step: the buffers are new this step (PyTorch's buf = grad.clone()).

    Notes:
        g = -grad if maximize; g += weight_decay * p; buf = buf * momentum + (1 - dampening)
        * g (buf = g on the first step); g = g + momentum * buf (nesterov) or buf;
        p += -lr * g. params and buffers are written back; grads are not.
    """
    what = "sgd"
    use_buf = momentum != 0
    names = ["params", "grads"] + (["momentum_bufs"] if use_buf else [])
    lists = [params, grads] + ([momentum_bufs] if use_buf else [])
    if use_buf and momentum_bufs is None:
        fail(f"{what}: momentum={momentum} needs momentum_bufs")
    lists = _lists(what, names, lists)
    pool, turns = ConstPool(), Turns()
    for w, tiles in T.prefetched_work(share(_work(lists, 3)), "sgd_in"):
        k = TileOps(w.tile.shape, pool, turns)
        _sgd_tile(
            k, w, tiles, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step
        )


def _sgd_tile(
    k: TileOps,
    w: T.Work,
    tiles: list,
    lr,
    momentum,
    dampening,
    weight_decay,
    nesterov,
    maximize,
    first_step,
) -> None:
    p, g = tiles[0], tiles[1]
    d = p.dtype
    use_buf = momentum != 0

    def alpha(x: float) -> float:  # add(..., alpha=x) converts alpha to the tensors' dtype
        return dtype_scalar(x, d.name)

    sign = -1.0 if maximize else 1.0  # PyTorch's grad is sign * g (negation is exact)
    if weight_decay != 0:  # grad.add(param, alpha=weight_decay), in p's dtype
        g2 = k.tmp(d, "sgd_g")
        k.stt(g2, p, nl.multiply, alpha(weight_decay), nl.add if sign > 0 else nl.subtract, g)
        g, sign = g2, 1.0
    if use_buf:
        nb = k.tmp(d, "sgd_buf")
        if first_step:  # buf = grad.clone()
            k.ts(nb, g, nl.multiply, sign)
        else:  # buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            k.ts(nb, tiles[2], nl.multiply, float(momentum))
            k.stt(nb, g, nl.multiply, sign * alpha(1.0 - dampening), nl.add, nb)
        T.store(w.tile, w.operands[2], 2, nb)
        if nesterov:  # grad.add(buf, alpha=momentum) = momentum * buf +- g
            g2 = k.tmp(d, "sgd_g")
            k.stt(g2, nb, nl.multiply, alpha(momentum), nl.add if sign > 0 else nl.subtract, g)
            g = g2
        else:
            g = nb
        sign = 1.0
    np_ = k.tmp(d, "sgd_p")  # param.add_(grad, alpha=-lr)
    k.stt(np_, g, nl.multiply, alpha(-float(lr)) * sign, nl.add, p)
    T.store(w.tile, w.operands[0], 0, np_)


@jit
def adam(
    params,
    grads,
    exp_avgs,
    exp_avg_sqs,
    max_exp_avg_sqs,
    *,
    steps,
    lr,
    beta1=0.9,
    beta2=0.999,
    eps=1e-8,
    weight_decay=0.0,
    amsgrad=False,
    maximize=False,
    decoupled_weight_decay=False,
):
    """One Adam (AdamW with decoupled_weight_decay) step over lists of tensors, in place
    (torch.optim.Adam / AdamW, foreach=False, capturable=False).

    Args:
        params, grads, exp_avgs, exp_avg_sqs: lists of HBM tensors, element j of one shape
            and dtype (fp32 or bf16).
        max_exp_avg_sqs: list (amsgrad) or None.
        steps: list of host ints, each element's step count after this step's increment.
        lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay:
            PyTorch's hyperparameters.

    Notes:
        g = -grad if maximize; decoupled: p *= 1 - lr*wd, else g += wd*p;
        m = lerp(m, g, 1 - beta1); v = v*beta2 + (1 - beta2)*g*g; vmax = max(vmax, v);
        denom = sqrt(v or vmax) / sqrt(1 - beta2^t) + eps; p += -(lr / (1 - beta1^t)) * m /
        denom. The bias corrections are host scalars (float64) per element.
    """
    what = "adam"
    names = ["params", "grads", "exp_avgs", "exp_avg_sqs"] + (
        ["max_exp_avg_sqs"] if amsgrad else []
    )
    lists = [params, grads, exp_avgs, exp_avg_sqs] + ([max_exp_avg_sqs] if amsgrad else [])
    if amsgrad and max_exp_avg_sqs is None:
        fail(f"{what}: amsgrad=True needs max_exp_avg_sqs")
    lists = _lists(what, names, lists)
    steps = list(steps)
    if len(steps) != len(lists[0]):
        fail(f"{what}: steps has {len(steps)} entries, params has {len(lists[0])}")
    pool, turns = ConstPool(), Turns()
    hp = dict(
        lr=float(lr),
        beta1=float(beta1),
        beta2=float(beta2),
        eps=float(eps),
        wd=float(weight_decay),
        amsgrad=amsgrad,
        maximize=maximize,
        decoupled=decoupled_weight_decay,
    )
    for w, tiles in T.prefetched_work(share(_work(lists, TEMPS)), "adam_in"):
        k = TileOps(w.tile.shape, pool, turns)
        out = _adam_tile(k, tiles, int(steps[w.tag]), **hp)
        for i, t in out.items():
            T.store(w.tile, w.operands[i], i, t)


def _adam_tile(
    k: TileOps, tiles: list, step: int, *, lr, beta1, beta2, eps, wd, amsgrad, maximize, decoupled
) -> dict[int, Any]:
    """One tile of Adam: {operand index: updated tile} for params and states."""
    p, g, m, v = tiles[:4]
    d = p.dtype
    f32 = d.name == "float32"  # fp32: rounding to d is fp32's, so steps may fuse
    if maximize:
        g2 = k.tmp(d, "adam_g")
        k.ts(g2, g, nl.multiply, -1.0)
        g = g2
    if wd != 0 and decoupled:  # param.mul_(1 - lr * weight_decay)
        p2 = k.tmp(d, "adam_p")
        k.ts(p2, p, nl.multiply, 1.0 - lr * wd)
        p = p2
    elif wd != 0:  # grad = grad.add(param, alpha=weight_decay)
        g2 = k.tmp(d, "adam_g")
        k.stt(g2, p, nl.multiply, dtype_scalar(wd, d.name), nl.add, g)
        g = g2
    # exp_avg.lerp_(grad, 1 - beta1)
    wt = 1.0 - beta1
    diff = k.tmp(name="adam_d")
    k.tt(diff, g, m, nl.subtract)
    m2 = k.tmp(d, "adam_m")
    if abs(wt) < 0.5:
        k.stt(m2, diff, nl.multiply, wt, nl.add, m)
    else:
        k.stt(m2, diff, nl.multiply, wt - 1.0, nl.add, g)
    # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    gg = k.tmp(name="adam_gg")
    k.ts(gg, g, nl.multiply, 1.0 - beta2)
    k.tt(gg, gg, g, nl.multiply)
    v2 = k.tmp(d, "adam_v")
    if f32:
        k.stt(v2, v, nl.multiply, beta2, nl.add, gg)
    else:
        k.ts(v2, v, nl.multiply, beta2)
        k.tt(v2, v2, gg, nl.add)
    out = {2: m2, 3: v2}
    src = v2
    if amsgrad:
        vmax = k.tmp(d, "adam_vmax")
        k.tt(vmax, tiles[4], v2, nl.maximum)
        out[4] = src = vmax
    # denom = (sqrt(v) / sqrt(1 - beta2^t)).add_(eps)
    bc1, bc2 = 1.0 - beta1**step, 1.0 - beta2**step
    step_size = lr / bc1
    den = k.tmp(d, "adam_den")
    k.ts(den, src, nl.power, 0.5)
    c = math.sqrt(bc2)
    if f32:
        k.ts(den, den, nl.multiply, 1.0 / c, nl.add, eps)
    else:  # two bf16 roundings, a correctly rounded division, the eps in bf16 (add's rule)
        q = k.tmp(name="adam_q")
        _divide_scalar(k, q, den, c)
        k.copy(den, q)
        k.ts(den, den, nl.add, dtype_scalar(eps, d.name))
    # param.addcdiv_(exp_avg, denom, value=-step_size): p + (value * m) / denom
    num = k.tmp(name="adam_num")
    k.ts(num, m2, nl.multiply, -step_size)
    r = k.tmp(name="adam_r")
    k.ts(r, den, nl.reciprocal)
    if f32:
        k.tt(r, num, r, nl.multiply)
    else:
        _refine_quotient(k, r, num, den)
    p3 = k.tmp(d, "adam_p")
    k.tt(p3, p, r, nl.add)
    out[0] = p3
    return out


def _divide_scalar(k: TileOps, dst: Any, x: Any, c: float) -> None:
    """dst = x / c (fp32), x * (1/c) refined by one residual step: the correctly rounded
    quotient in nearly all cases (no divide on hardware)."""
    k.ts(dst, x, nl.multiply, 1.0 / c)
    e = k.tmp(name="div_e")
    k.stt(e, dst, nl.multiply, -c, nl.add, x)
    k.stt(dst, e, nl.multiply, 1.0 / c, nl.add, dst)


def _refine_quotient(k: TileOps, r: Any, a: Any, b: Any) -> None:
    """r = a / b (fp32) given r = 1/b on entry: a * r refined by one residual step."""
    q = k.tmp(name="div_q")
    k.tt(q, a, r, nl.multiply)
    e = k.tmp(name="div_e")
    k.tt(e, q, b, nl.multiply)
    k.tt(e, a, e, nl.subtract)
    k.tt(e, e, r, nl.multiply)
    k.tt(r, q, e, nl.add)


# ---------------------------------------------------------------- references


def sgd_ref(
    p,
    g,
    buf,
    *,
    lr,
    momentum=0.0,
    dampening=0.0,
    weight_decay=0.0,
    nesterov=False,
    maximize=False,
    first_step=False,
):
    """One SGD step in float64: returns (param, momentum_buf)."""
    p, g = np.asarray(p, np.float64), np.asarray(g, np.float64)
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    nb = None
    if momentum:
        nb = (
            g.copy() if first_step else np.asarray(buf, np.float64) * momentum + (1 - dampening) * g
        )
        g = g + momentum * nb if nesterov else nb
    return p - lr * g, nb


def adam_ref(
    p,
    g,
    m,
    v,
    vmax,
    *,
    step,
    lr,
    beta1=0.9,
    beta2=0.999,
    eps=1e-8,
    weight_decay=0.0,
    amsgrad=False,
    maximize=False,
    decoupled_weight_decay=False,
):
    """One Adam/AdamW step in float64: returns (param, exp_avg, exp_avg_sq, max_exp_avg_sq)."""
    p, g = np.asarray(p, np.float64), np.asarray(g, np.float64)
    m, v = np.asarray(m, np.float64), np.asarray(v, np.float64)
    g = -g if maximize else g
    if weight_decay and decoupled_weight_decay:
        p = p * (1 - lr * weight_decay)
    elif weight_decay:
        g = g + weight_decay * p
    m = m + (1 - beta1) * (g - m)
    v = v * beta2 + (1 - beta2) * g * g
    if amsgrad:
        vmax = np.maximum(np.asarray(vmax, np.float64), v)
    den = np.sqrt(vmax if amsgrad else v) / math.sqrt(1 - beta2**step) + eps
    return p - lr / (1 - beta1**step) * m / den, m, v, vmax
