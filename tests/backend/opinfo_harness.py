"""PyTorch's own OpInfo samples run on the device against the CPU.

Each selected OpInfo's samples (torch.testing._internal.common_methods_invocations) run on the
CPU and, with their tensors moved to the device, on the device; outputs are compared with
per-dtype tolerances (rtol, and atol times the result's largest magnitude), and for float32
the gradients of a random projection of the outputs too; where the CPU disagrees, the float64
result referees. Which device kernels each OpInfo exercised is recorded
(Runtime.kernel_runs), so the coverage test can check every op the table claims was run
against CPU.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
import trnsim.backend

RT = trnsim.backend.runtime
DEV = RT.name

POINTWISE = [
    "abs", "neg", "sign", "sgn", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "sqrt", "rsqrt", "reciprocal", "sigmoid", "tanh", "nn.functional.relu",
    "nn.functional.gelu", "nn.functional.silu", "nn.functional.mish", "nn.functional.softplus",
    "nn.functional.elu", "nn.functional.leaky_relu", "nn.functional.hardtanh",
    "nn.functional.hardsigmoid", "nn.functional.hardswish", "sin", "cos", "erf", "floor",
    "ceil", "round", "trunc", "frac", "square", "logical_not", "bitwise_not", "isnan", "isinf",
    "isfinite", "nan_to_num", "clamp", "add", "sub", "rsub", "mul", "div", "remainder", "fmod",
    "pow", "maximum", "minimum", "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
    "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "where",
    "addcmul", "addcdiv", "lerp", "masked_fill", "clamp_min", "clamp_max", "tril", "triu",
    "zeros_like", "ones_like", "full_like", "clone", "contiguous", "acos", "asin", "atan",
    "atanh", "cosh", "sinh", "tan", "hypot", "copysign", "fmax", "fmin", "xlogy", "logit",
    "bitwise_left_shift", "bitwise_right_shift", "signbit", "isposinf", "isneginf",
    "floor_divide", "nn.functional.threshold", "nn.functional.relu6", "nn.functional.selu",
    "nn.functional.celu",
]
REDUCTIONS = [
    "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "all", "any",
    "var", "std", "var_mean", "std_mean", "linalg.vector_norm", "count_nonzero", "cumsum",
    "cumprod",
]
LINALG = ["mm", "addmm", "bmm", "baddbmm", "mv", "addmv", "dot", "matmul",
          "nn.functional.linear"]
NN = [
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.rms_norm",
    "nn.functional.batch_norm", "nn.functional.conv2d", "nn.functional.conv_transpose2d",
    "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d", "nn.functional.nll_loss",
    "nn.functional.cross_entropy", "nn.functional.embedding",
    "nn.functional.scaled_dot_product_attention",
]
INDEXING = ["cat", "stack", "index_select", "index_add", "gather", "scatter", "scatter_add",
            "__getitem__", "index_put", "arange"]
FOREACH = ["_foreach_add", "_foreach_sub", "_foreach_mul", "_foreach_div", "_foreach_clamp_min",
           "_foreach_clamp_max", "_foreach_minimum", "_foreach_maximum", "_foreach_pow",
           "_foreach_copy", "_foreach_sqrt", "_foreach_neg", "_foreach_exp", "_foreach_abs",
           "_foreach_reciprocal", "_foreach_addcmul", "_foreach_addcdiv", "_foreach_lerp",
           "_foreach_zero", "_foreach_acos", "_foreach_asin", "_foreach_atan", "_foreach_ceil",
           "_foreach_clone", "_foreach_cos", "_foreach_cosh", "_foreach_erf", "_foreach_expm1",
           "_foreach_floor", "_foreach_frac", "_foreach_log", "_foreach_log10", "_foreach_log1p",
           "_foreach_log2", "_foreach_round", "_foreach_rsqrt", "_foreach_sigmoid",
           "_foreach_sign", "_foreach_sin", "_foreach_sinh", "_foreach_tan", "_foreach_tanh",
           "_foreach_trunc"]
SELECTED = POINTWISE + REDUCTIONS + LINALG + NN + INDEXING + FOREACH

TOL = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (1.6e-2, 1e-2),
       torch.float16: (2e-3, 1e-3)}


@functools.cache
@functools.cache
def opinfos() -> dict[str, list[Any]]:
    """OpInfo name -> its OpInfos (variants included)."""
    from torch.testing._internal import common_methods_invocations as cmi

    out: dict[str, list[Any]] = {}
    for info in (*cmi.op_db, *cmi.foreach_unary_op_db, *cmi.foreach_binary_op_db,
                 *cmi.foreach_pointwise_op_db, *getattr(cmi, "foreach_other_op_db", ())):
        out.setdefault(info.name, []).append(info)
    return out


def to_device(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        d = x.detach().to(DEV)
        return d.requires_grad_(x.requires_grad) if x.is_floating_point() else d
    if isinstance(x, (list, tuple)):
        return type(x)(to_device(v) for v in x)
    if isinstance(x, dict):
        return {k: to_device(v) for k, v in x.items()}
    if isinstance(x, torch.device) or (isinstance(x, str) and x == "cpu"):
        return torch.device(DEV)
    return x


def tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors(v)]
    return []


def _fix_device_kwargs(kwargs: dict) -> dict:
    return {k: (torch.device(DEV) if k == "device" else v) for k, v in kwargs.items()}


@dataclass
class Outcome:
    samples: int = 0
    compared: int = 0
    grads: int = 0
    failures: list[str] = field(default_factory=list)
    kernels: Counter = field(default_factory=Counter)


_RTOL: list[float | None] = [None]  # the op's own rtol, while run_op runs it


def _compare(got: Any, want: Any, dtype: torch.dtype, what: str) -> str | None:
    g, w = tensors(got), tensors(want)
    if len(g) != len(w):
        return f"{what}: {len(g)} outputs, CPU {len(w)}"
    rtol, atol = TOL.get(dtype, (1e-4, 1e-5))
    rtol = _RTOL[0] or rtol
    for a, b in zip(g, w, strict=True):
        if a.device.type != DEV:
            return f"{what}: an output on {a.device}"
        # atol scales with the result's magnitude: sums of products carry errors of the size
        # of their terms, not of their (possibly tiny) results
        finite = b.detach()[torch.isfinite(b.detach())] if b.is_floating_point() else b
        scale = max(1.0, float(finite.abs().max())) if finite.numel() and \
            finite.is_floating_point() else 1.0
        try:
            torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=rtol, atol=atol * scale,
                                       equal_nan=True, check_stride=False)
        except AssertionError as e:
            return f"{what}: {str(e).splitlines()[0]} ({str(e).splitlines()[-1][:120]})"
    return None


def to_float64(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        d = x.detach().double() if x.is_floating_point() else x.detach()
        return d.requires_grad_(x.requires_grad) if x.is_floating_point() else d
    if isinstance(x, (list, tuple)):
        return type(x)(to_float64(v) for v in x)
    if isinstance(x, dict):
        return {k: to_float64(v) for k, v in x.items()}
    return x


def _refereed(fn, args, kwargs, got, dtype, what) -> bool:
    """When the device and the CPU disagree: the device result stands if it is as close to
    the float64 result as the tolerances ask (the CPU's own rounding of intermediates, e.g.
    bf16 quotients, differs from the exact result the device's fp32 datapath gives)."""
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return False
    try:
        exact = fn(*to_float64(args), **to_float64(kwargs))
    except Exception:
        return False
    cast = [t.to(dtype) if t.is_floating_point() else t for t in tensors(exact)]
    return _compare(got, cast, dtype, what) is None


def run_sample(info: Any, sample: Any, dtype: torch.dtype, grads: bool, out: Outcome,
               label: str) -> None:
    fn = info.op
    args, kwargs = (sample.input, *sample.args), dict(sample.kwargs)
    if info.name == "arange":  # a factory: on the device when asked
        kwargs = {**kwargs, "device": "cpu"}
    try:
        want = fn(*args, **kwargs)
    except Exception:  # the CPU refuses this sample: the device must refuse it too
        try:
            fn(*to_device(args), **_fix_device_kwargs(to_device(kwargs)))
        except Exception:
            return
        out.failures.append(f"{label}: the CPU raises, the device does not")
        return
    dargs, dkwargs = to_device(args), _fix_device_kwargs(to_device(kwargs))
    before = Counter(RT.kernel_runs)
    try:
        got = fn(*dargs, **dkwargs)
    except Exception as e:
        out.failures.append(f"{label}: device raised {type(e).__name__}: {str(e)[:200]}")
        return
    out.compared += 1
    bad = _compare(got, want, dtype, label)
    if bad and not _refereed(fn, args, kwargs, got, dtype, label):
        out.failures.append(bad)
    if grads:
        _check_grads(fn, args, kwargs, dargs, want, got, dtype, out, label)
    out.kernels.update(Counter(RT.kernel_runs) - before)


def _check_grads(fn, args, kwargs, dargs, want, got, dtype, out: Outcome, label: str) -> None:
    inputs = [t for t in tensors(args) if t.requires_grad]
    dinputs = [t for t in tensors(dargs) if t.requires_grad]
    outs = [t for t in tensors(want) if t.requires_grad and t.is_floating_point()]
    douts = [t for t in tensors(got) if t.requires_grad and t.is_floating_point()]
    if not inputs or not outs or len(outs) != len(douts):
        return
    g = torch.Generator().manual_seed(0)
    cot = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs]
    try:
        want_g = torch.autograd.grad(outs, inputs, cot, allow_unused=True)
    except Exception:  # the CPU cannot differentiate this sample (e.g. empty foreach lists)
        return
    before = Counter(RT.kernel_runs)
    try:
        got_g = torch.autograd.grad(douts, dinputs, [c.to(DEV) for c in cot], allow_unused=True)
    except Exception as e:
        out.failures.append(f"{label} backward: device raised {type(e).__name__}: "
                            f"{str(e)[:200]}")
        return
    out.kernels.update(Counter(RT.kernel_runs) - before)
    out.grads += 1
    pairs = [(a, b) for a, b in zip(got_g, want_g, strict=True) if b is not None]
    bad = _compare([a for a, _ in pairs], [b for _, b in pairs], dtype, f"{label} backward")
    if bad and not _grad_refereed(fn, args, kwargs, cot, got_g, want_g, dtype, label):
        out.failures.append(bad)


def _grad_refereed(fn, args, kwargs, cot, got_g, want_g, dtype, label) -> bool:
    """The float64 referee for gradients (see _refereed)."""
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return False
    try:
        a64, k64 = to_float64(args), to_float64(kwargs)
        outs = [t for t in tensors(fn(*a64, **k64)) if t.requires_grad]
        ins = [t for t in tensors(a64) if t.requires_grad]
        exact = torch.autograd.grad(outs, ins, [c.double() for c in cot], allow_unused=True)
    except Exception:
        return False
    pairs = [(a, e.to(dtype)) for a, e, w in zip(got_g, exact, want_g, strict=True)
             if w is not None and e is not None]
    return _compare([a for a, _ in pairs], [e for _, e in pairs], dtype, label) is None


@functools.cache
def run_op(name: str, dtype: torch.dtype, max_samples: int | None, grads: int,
           rtol: float | None = None, mode: str = "kernel") -> Outcome:
    """Run up to max_samples samples of every variant of OpInfo `name` (in `mode`), the
    first `grads` of each with a gradient check (rtol: the op's own relative tolerance)."""
    old = RT.mode
    RT.mode = mode
    _RTOL[0] = rtol
    out = Outcome()
    try:
        for info in opinfos().get(name, []):
            supported = info.supported_dtypes("cpu")
            if dtype not in supported:  # integer-only ops (bitwise): their integer samples
                alt = next((d for d in (torch.int32, torch.int64, torch.bool) if d in supported),
                           None)
                if dtype != torch.float32 or alt is None:
                    continue
                dtype = alt
            want_grad = info.supports_autograd and dtype.is_floating_point and grads > 0
            try:
                samples = list(info.sample_inputs("cpu", dtype, requires_grad=False))
                with_grad = list(info.sample_inputs("cpu", dtype, requires_grad=True)) \
                    if want_grad else []
            except Exception as e:
                out.failures.append(f"{name}: sample generation failed: {e}")
                continue
            label = f"{name}{'.' + info.variant_test_name if info.variant_test_name else ''}"
            for k, sample in enumerate(samples[:max_samples]):
                checked = k < grads and k < len(with_grad)
                if checked:
                    sample = with_grad[k]
                out.samples += 1
                summary = sample.summary() if hasattr(sample, "summary") else ""
                run_sample(info, sample, dtype, checked, out, f"{label}[{k}] {summary}"[:160])
    finally:
        RT.mode = old
        _RTOL[0] = None
    return out
