"""The pointwise op table, part 4: the activation backward ops of autograd (ATen names and
argument order: grad_output first), and dropout, each with its tile bodies and float64 numpy
reference.

Layer: kernel library (trnsim.kernels); NKI API only. Derivatives come from ScalarE's derivative
activations where the table has them (gelu_dx, silu_dx), otherwise from the forward
functions composed the way PyTorch's CPU kernels write them. Selections use select_reduce or a
predicated copy, never a 0/1 multiply, so a masked-out inf or nan gradient gives 0 as PyTorch.
"""

from __future__ import annotations

import math

import numpy as np

from trnsim.nki import language as nl

from . import _pw_math as M
from ._pw_tile import OpSpec, register

_ERF = np.vectorize(math.erf, otypes=[np.float64])
K_BETA = math.sqrt(2.0 / math.pi)  # gelu tanh approximation constants (PyTorch's kBeta, kKappa)
K_KAPPA = 0.044715


def _gx(v):
    return v["grad_output"], v["input"]


def _threshold_backward(k, dst, v, a):
    g, x = _gx(v)
    k.select(dst, k.pred(x, nl.greater, float(a["threshold"])), g, 0.0)


def _gelu_backward(k, dst, v, a):
    g, x = _gx(v)
    if a["approximate"] != "tanh":
        d = k.tmp(name="gelu_dx")
        k.act(d, nl.gelu_dx, x)
        k.tt(dst, g, d, nl.multiply)
        return
    # PyTorch: 0.5*(1+t) + 0.5*x*(1-t^2)*kBeta*(1+3*kKappa*x^2), t = tanh(kBeta*(x+kKappa*x^3))
    x2 = k.tmp(name="gb_x2")
    k.act(x2, nl.square, x)
    inner = k.tmp(name="gb_in")
    k.ts(inner, x2, nl.multiply, K_KAPPA, nl.add, 1.0)
    k.tt(inner, x, inner, nl.multiply)
    t = k.tmp(name="gb_t")
    k.act(t, nl.tanh, inner, scale=K_BETA)
    k.ts(x2, x2, nl.multiply, 3.0 * K_KAPPA, nl.add, 1.0)  # 1 + 3*kKappa*x^2
    s = k.tmp(name="gb_s")
    k.act(s, nl.square, t)
    k.ts(s, s, nl.multiply, -K_BETA, nl.add, K_BETA)  # kBeta*(1-t^2)
    k.tt(s, s, x2, nl.multiply)
    k.stt(s, x, nl.multiply, 0.5, nl.multiply, s)  # left * right_derivative
    k.ts(t, t, nl.add, 1.0, nl.multiply, 0.5)  # left_derivative
    k.tt(t, t, s, nl.add)
    k.tt(dst, g, t, nl.multiply)


def _act_backward(fn):
    def body(k, dst, v, a):
        g, x = _gx(v)
        d = k.tmp(name="act_dx")
        k.act(d, fn, x)
        k.tt(dst, g, d, nl.multiply)

    return body


def _sigmoid_backward(k, dst, v, a):  # grad * (1 - y) * y
    g, y = v["grad_output"], v["output"]
    t = k.tmp(name="sigb_t")
    k.stt(t, y, nl.subtract, 1.0, nl.multiply, y, rev0=True)
    k.tt(dst, g, t, nl.multiply)


def _tanh_backward(k, dst, v, a):  # grad * (1 - y^2)
    g, y = v["grad_output"], v["output"]
    s = k.tmp(name="tanhb_s")
    k.act(s, nl.square, y)
    k.stt(dst, s, nl.subtract, 1.0, nl.multiply, g, rev0=True)


def _leaky_relu_backward(k, dst, v, a):
    g, x = _gx(v)
    k.ts(dst, g, nl.multiply, float(a["negative_slope"]))
    k.overwrite(dst, k.pred(x, nl.greater, 0.0), M.like(k, dst, g))


def _hardtanh_backward(k, dst, v, a):
    g, x = _gx(v)
    inside = k.tmp(name="htb_lo")
    k.ts(inside, x, nl.greater, float(a["min_val"]))
    p = k.tmp(nl.uint8, "htb_p")
    k.stt(p, x, nl.less, float(a["max_val"]), nl.multiply, inside)
    k.select(dst, p, g, 0.0)


def _elu_backward(k, dst, v, a):
    g, x = v["grad_output"], v["self_or_result"]
    alpha, scale, iscale = float(a["alpha"]), float(a["scale"]), float(a["input_scale"])
    if a["is_result"]:  # x is the forward result: grad * input_scale * (x + alpha*scale)
        u = k.tmp(name="elub_u")
        k.ts(u, x, nl.add, alpha * scale, nl.multiply, iscale)
        k.tt(dst, u, g, nl.multiply)
    else:  # grad * input_scale * alpha * scale * exp(x * input_scale)
        e = k.tmp(name="elub_e")
        k.act(e, nl.exp, x, scale=iscale)
        k.stt(dst, e, nl.multiply, iscale * alpha * scale, nl.multiply, g)
    pos = k.tmp(dst.dtype, "elub_pos")
    k.ts(pos, g, nl.multiply, scale)
    k.overwrite(dst, k.pred(x, nl.greater, 0.0), pos)


def _softplus_backward(k, dst, v, a):  # grad * sigmoid(beta*x), or grad where beta*x > thr
    g, x = _gx(v)
    beta = float(a["beta"])
    s = k.tmp(name="spb_s")
    k.act(s, nl.sigmoid, x, scale=beta)
    big = k.tmp(name="spb_big")
    k.ts(big, x, nl.multiply, beta, nl.greater, float(a["threshold"]))
    k.tt(s, s, big, nl.maximum)
    k.tt(dst, g, s, nl.multiply)


def _mish_backward(k, dst, v, a):
    # PyTorch: grad * (tanh(softplus(x)) + x * sigmoid(x) * (1 - tanh(softplus(x))^2))
    g, x = _gx(v)
    t = k.tmp(name="mishb_t")
    k.act(t, nl.softplus, x)
    k.act(t, nl.tanh, t)
    s = k.tmp(name="mishb_s")
    k.act(s, nl.sigmoid, x)
    t2 = k.tmp(name="mishb_t2")
    k.act(t2, nl.square, t)
    k.stt(t2, t2, nl.subtract, 1.0, nl.multiply, s, rev0=True)
    k.tt(t2, x, t2, nl.multiply)
    k.tt(t, t, t2, nl.add)
    k.tt(dst, g, t, nl.multiply)


def _dropout(k, dst, v, a):  # x * mask * scale
    k.stt(dst, v["mask"], nl.multiply, float(a["scale"]), nl.multiply, v["input"])


# ---------------------------------------------------------------- references


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu_bw_ref(v, a):
    g, x = v["grad_output"], v["input"]
    if a["approximate"] == "tanh":
        inner = K_BETA * (x + K_KAPPA * x**3)
        t = np.tanh(inner)
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * K_BETA * (1 + 3 * K_KAPPA * x * x)
    else:
        d = 0.5 * (1 + _ERF(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return g * d


def _elu_bw_ref(v, a):
    g, x = v["grad_output"], v["self_or_result"]
    al, sc, isc = a["alpha"], a["scale"], a["input_scale"]
    neg = isc * (x + al * sc) if a["is_result"] else isc * al * sc * np.exp(x * isc)
    return np.where(x > 0, g * sc, g * neg)


def _mish_bw_ref(v, a):
    g, x = v["grad_output"], v["input"]
    t = np.tanh(np.logaddexp(0.0, x))
    return g * (t + x * _sig(x) * (1 - t * t))


def _gs(fn):
    return lambda v, a: fn(v["grad_output"], v["input"], a)


def _bw(
    name: str, body, ref, attrs=None, temps: int = 2, args=("grad_output", "input"), predicates=()
) -> OpSpec:
    return OpSpec(name, args, body, None, ref, dict(attrs or {}), temps, (), predicates=predicates)


BACKWARD = (
    _bw(
        "threshold_backward",
        _threshold_backward,
        _gs(lambda g, x, a: np.where(x > a["threshold"], g, 0.0)),
        {"threshold": 0.0},
    ),
    _bw("gelu_backward", _gelu_backward, _gelu_bw_ref, {"approximate": "none"}, temps=5),
    _bw(
        "silu_backward",
        _act_backward(nl.silu_dx),
        _gs(lambda g, x, a: g * _sig(x) * (1 + x * (1 - _sig(x)))),
    ),
    _bw(
        "sigmoid_backward",
        _sigmoid_backward,
        lambda v, a: v["grad_output"] * (1 - v["output"]) * v["output"],
        args=("grad_output", "output"),
    ),
    _bw(
        "tanh_backward",
        _tanh_backward,
        lambda v, a: v["grad_output"] * (1 - v["output"] ** 2),
        args=("grad_output", "output"),
    ),
    _bw(
        "leaky_relu_backward",
        _leaky_relu_backward,
        _gs(lambda g, x, a: np.where(x > 0, g, g * a["negative_slope"])),
        {"negative_slope": 0.01, "self_is_result": False},
    ),
    _bw(
        "hardtanh_backward",
        _hardtanh_backward,
        _gs(lambda g, x, a: np.where((x > a["min_val"]) & (x < a["max_val"]), g, 0.0)),
        {"min_val": -1.0, "max_val": 1.0},
    ),
    _bw(
        "elu_backward",
        _elu_backward,
        _elu_bw_ref,
        {"alpha": 1.0, "scale": 1.0, "input_scale": 1.0, "is_result": False},
        temps=3,
        args=("grad_output", "self_or_result"),
    ),
    _bw(
        "softplus_backward",
        _softplus_backward,
        _gs(lambda g, x, a: np.where(x * a["beta"] > a["threshold"], g, g * _sig(x * a["beta"]))),
        {"beta": 1.0, "threshold": 20.0},
    ),
    _bw("mish_backward", _mish_backward, _mish_bw_ref, temps=3),
    _bw(
        "dropout",
        _dropout,
        lambda v, a: v["input"] * v["mask"] * a["scale"],
        {"scale": 1.0},
        args=("input", "mask"),
        predicates=("mask",),
    ),
)
register(*BACKWARD)
