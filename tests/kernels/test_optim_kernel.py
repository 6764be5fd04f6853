"""trnsim.kernels.optim: multi-tensor SGD and Adam/AdamW steps against PyTorch's single-tensor
optimizers (5 steps, fp32 and bf16) and the float64 references; rejections."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from kernel_testing import BF16, assert_rejected, run_views
from trnsim.kernels import optim

pytestmark = pytest.mark.filterwarnings("error::trnsim.errors.SimulationWarning")
SHAPES = [(3, 4), (129,), (2, 3, 5)]
STEPS = 5


def _params(rng, dtype):
    return [(rng.standard_normal(s)).astype(np.float32).astype(dtype) for s in SHAPES]


def _torch(a, dtype):
    t = torch.from_numpy(np.array(a, np.float32))  # a copy: the kernels update in place
    return t.to(torch.bfloat16) if dtype is BF16 else t


def _np(t, dtype):
    return t.detach().float().numpy().astype(dtype)


def _grads(rng, dtype):
    return [
        [rng.standard_normal(s).astype(np.float32).astype(dtype) for s in SHAPES]
        for _ in range(STEPS)
    ]


def _compare(ours, theirs, dtype):
    for a, b in zip(ours, theirs, strict=True):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if dtype is BF16:
            # a few bf16 roundings apart: PyTorch's own CPU kernels round differently in their
            # vectorized body and their scalar tail (an ulp at times), and ulps accumulate
            np.testing.assert_allclose(a, b, rtol=2**-6, atol=2**-6 * np.abs(b).max())
        else:
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6 * np.abs(b).max())


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True),
    dict(lr=0.02, weight_decay=0.5, maximize=True),
]


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("hp", SGD_CASES, ids=lambda h: "-".join(f"{k}={v}" for k, v in h.items()))
def test_sgd_matches_torch_over_five_steps(rng, dtype, hp):
    params = _params(rng, dtype)
    grads = _grads(rng, dtype)
    tp = [_torch(p, dtype).requires_grad_() for p in params]
    opt = torch.optim.SGD(tp, foreach=False, **hp)
    bufs = [np.zeros_like(p) for p in params]
    full = {
        "momentum": 0.0,
        "dampening": 0.0,
        "weight_decay": 0.0,
        "nesterov": False,
        "maximize": False,
        **hp,
    }
    for s in range(STEPS):
        for t, g in zip(tp, grads[s], strict=True):
            t.grad = _torch(g, dtype)
        opt.step()
        mb = bufs if full["momentum"] else None
        run_views(optim.sgd, params, grads[s], mb, first_step=s == 0, **full)
    _compare(params, [_np(t, dtype) for t in tp], dtype)
    if full["momentum"]:
        _compare(bufs, [_np(opt.state[t]["momentum_buffer"], dtype) for t in tp], dtype)


ADAM_CASES = [
    dict(lr=0.01),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    dict(lr=0.02, amsgrad=True, maximize=True),
    dict(lr=0.01, weight_decay=0.05, decoupled_weight_decay=True),  # AdamW
    dict(lr=0.01, betas=(0.3, 0.9)),  # lerp's second branch (weight 1 - beta1 >= 0.5)
]


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("hp", ADAM_CASES, ids=lambda h: "-".join(f"{k}={v}" for k, v in h.items()))
def test_adam_matches_torch_over_five_steps(rng, dtype, hp):
    params = _params(rng, dtype)
    grads = _grads(rng, dtype)
    tp = [_torch(p, dtype).requires_grad_() for p in params]
    opt = torch.optim.Adam(tp, foreach=False, **hp)
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    vmax = [np.zeros_like(p) for p in params]
    beta1, beta2 = hp.get("betas", (0.9, 0.999))
    kw = {
        "lr": hp["lr"],
        "beta1": beta1,
        "beta2": beta2,
        "eps": hp.get("eps", 1e-8),
        "weight_decay": hp.get("weight_decay", 0.0),
        "amsgrad": hp.get("amsgrad", False),
        "maximize": hp.get("maximize", False),
        "decoupled_weight_decay": hp.get("decoupled_weight_decay", False),
    }
    for s in range(STEPS):
        for t, g in zip(tp, grads[s], strict=True):
            t.grad = _torch(g, dtype)
        opt.step()
        mx = vmax if kw["amsgrad"] else None
        run_views(optim.adam, params, grads[s], m, v, mx, steps=[s + 1] * len(params), **kw)
    _compare(params, [_np(t, dtype) for t in tp], dtype)
    _compare(m, [_np(opt.state[t]["exp_avg"], dtype) for t in tp], dtype)
    _compare(v, [_np(opt.state[t]["exp_avg_sq"], dtype) for t in tp], dtype)
    if kw["amsgrad"]:
        _compare(vmax, [_np(opt.state[t]["max_exp_avg_sq"], dtype) for t in tp], dtype)


def test_adam_matches_float64_reference_with_per_element_steps(rng):
    params = _params(rng, np.float32)
    grads = _grads(rng, np.float32)[0]
    m = [0.1 * rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    v = [np.abs(0.1 * rng.standard_normal(s)).astype(np.float32) for s in SHAPES]
    steps = [3, 7, 1]
    want = [
        optim.adam_ref(p, g, mm, vv, None, step=st, lr=0.01, weight_decay=0.1)
        for p, g, mm, vv, st in zip(params, grads, m, v, steps, strict=True)
    ]
    run_views(optim.adam, params, grads, m, v, None, steps=steps, lr=0.01, weight_decay=0.1)
    for got, w in zip(params, want, strict=True):
        np.testing.assert_allclose(got, w[0], rtol=1e-5, atol=1e-6)
    p0, g0 = params[0].copy(), grads[0]
    nb = optim.sgd_ref(p0, g0, None, lr=0.1, momentum=0.9, first_step=True)
    b = [np.zeros_like(p0)]
    run_views(optim.sgd, [p0], [g0], b, lr=0.1, momentum=0.9, first_step=True)
    np.testing.assert_allclose(p0, nb[0], rtol=1e-6)
    np.testing.assert_allclose(b[0], nb[1], rtol=1e-6)


@pytest.mark.parametrize(
    ("kernel", "args", "kwargs", "match"),
    [
        (
            optim.sgd,
            ([np.zeros(4, np.int32)], [np.zeros(4, np.int32)], None),
            {"lr": 0.1},
            "params.0. dtype int32 is not one of float32, bfloat16",
        ),
        (
            optim.sgd,
            ([np.zeros(4, np.float32)], [np.zeros(5, np.float32)], None),
            {"lr": 0.1},
            "grads.0. is float32 .5.*they must match",
        ),
        (
            optim.sgd,
            ([np.zeros(4, np.float32)], [np.zeros(4, np.float32)], None),
            {"lr": 0.1, "momentum": 0.9},
            "needs momentum_bufs",
        ),
        (
            optim.adam,
            ([np.zeros(4, np.float32)],) * 4 + (None,),
            {"steps": [1, 2], "lr": 0.1},
            "steps has 2 entries",
        ),
    ],
    ids=["dtype", "shape", "bufs", "steps"],
)
def test_optim_rejections(kernel, args, kwargs, match):
    assert_rejected(match, kernel, *args, **kwargs)
