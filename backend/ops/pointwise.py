"""Pointwise ATen ops (unary, binary, ternary, activations and their backward, comparisons),
the device's copies, fills and triangles: trnsim.kernels.pointwise / fill.

Every functional, in-place and out= overload of an op the kernel table serves gets the same
implementation: PyTorch's meta kernel runs first (it gives the result's shape, strides and
dtype by ATen's own broadcasting and type promotion, and raises ATen's errors for bad
inputs), then one launch of `pointwise(out, *operands, op=...)`. Argument names follow the
schema ("self" is the kernels' "input"); Python and 0-d CPU scalars become kernel scalars.
"""

from __future__ import annotations

from typing import Any

import torch
from trnsim.backend import storage
from trnsim.backend.ops._common import launch
from trnsim.backend.ops._meta import bind, check_int64_range, run_meta, scalar_of, written
from trnsim.backend.registry import REGISTRY, HostOnly, cpu_overloads, op, reference_only
from trnsim.backend.runtime import runtime
from trnsim.kernels import fill as fill_kernels
from trnsim.kernels._pw_tile import OPS
from trnsim.kernels.pointwise import ops as kernel_ops
from trnsim.kernels.pointwise import pointwise

KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int16,
                 torch.int8, torch.uint8, torch.bool, torch.int64)

UNARY = [
    "neg", "abs", "sign", "sgn", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
    "rsqrt", "reciprocal", "sigmoid", "tanh", "relu", "gelu", "silu", "mish", "softplus", "elu",
    "leaky_relu", "hardtanh", "hardsigmoid", "hardswish", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "floor", "ceil",
    "round", "trunc", "frac", "logical_not", "bitwise_not", "isnan", "isinf", "isposinf",
    "isneginf", "nan_to_num", "logit", "celu", "selu", "relu6", "threshold", "signbit",
]
BINARY = [
    "add", "sub", "rsub", "mul", "div", "remainder", "fmod", "pow", "maximum", "minimum", "fmax",
    "fmin", "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
    "bitwise_right_shift", "hypot", "copysign", "floor_divide", "xlogy",
]
TERNARY = ["where", "addcmul", "addcdiv", "lerp", "clamp", "clamp_min", "clamp_max",
           "masked_fill"]
BACKWARD = [
    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
    "leaky_relu_backward", "hardtanh_backward", "elu_backward", "softplus_backward",
    "mish_backward", "hardsigmoid_backward", "hardswish_backward", "logit_backward",
]
# Elementwise functions no kernel serves yet (special functions, log-sum-exp pairs, integer
# gcd/lcm): on the host, so torch.distributions and losses that use them run.
HOST_ONLY = [
    "logaddexp", "logaddexp2", "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "sinc",
    "heaviside", "igamma", "igammac", "gcd", "lcm", "nextafter", "angle", "special_entr",
    "special_erfcx", "special_i0e", "special_i1", "special_i1e", "special_log_ndtr",
    "special_ndtri", "special_xlog1py", "special_airy_ai", "special_bessel_j0",
    "special_bessel_j1", "special_bessel_y0", "special_bessel_y1", "special_modified_bessel_i0",
    "special_modified_bessel_i1", "special_modified_bessel_k0", "special_modified_bessel_k1",
    "special_scaled_modified_bessel_k0", "special_scaled_modified_bessel_k1",
    "special_spherical_bessel_j0", "special_zeta", "special_chebyshev_polynomial_t",
    "special_chebyshev_polynomial_u", "special_chebyshev_polynomial_v",
    "special_chebyshev_polynomial_w", "special_shifted_chebyshev_polynomial_t",
    "special_shifted_chebyshev_polynomial_u", "special_shifted_chebyshev_polynomial_v",
    "special_shifted_chebyshev_polynomial_w", "special_hermite_polynomial_h",
    "special_hermite_polynomial_he", "special_laguerre_polynomial_l",
    "special_legendre_polynomial_p", "frexp", "conj_physical", "_add_relu", "__lshift__",
    "__rshift__", "__ilshift__", "__irshift__",
]

# ATen op -> (kernel op, fixed kernel attributes): where the names differ.
RENAMED = {"sgn": ("sign", {}), "clamp_min": ("clamp", {"max": None}),
           "clamp_max": ("clamp", {"min": None})}
# Overloads the kernel table does not serve as they are (decimals, the scalar base of pow is
# served; these are not).
NOT_SERVED = {"round.decimals", "round.decimals_out", "round_.decimals"}


def _base(name: str) -> str:
    packet = name.split(".")[0]
    return packet[:-1] if packet.endswith("_") and packet[:-1] in _ALL else packet


_ALL = set(UNARY + BINARY + TERNARY + BACKWARD)


def _kernel_dtype_ok(t: torch.Tensor) -> bool:
    return t.dtype in KERNEL_DTYPES


def make(name: str, kop: str, fixed: dict[str, Any]) -> Any:
    """The kernel-mode implementation of one overload (see the module docstring)."""
    from trnsim.backend.dispatch import resolve

    overload = resolve(f"aten::{name}")
    inplace, outs = written(overload)
    operands = kernel_ops()[kop]
    scalar_ok = set(OPS[kop].scalar_args)
    defaults = dict(OPS[kop].attrs)
    aten_op = f"aten::{name.split('.')[0]}"

    def run(*args: Any, **kwargs: Any) -> Any:
        meta = run_meta(overload, args, kwargs)
        b = bind(overload, args, kwargs)
        if outs:
            out = b[outs[0]]
            # As ATen: an out= tensor of the result's shape keeps its strides (a view such
            # as a diagonal is written in place); one of another shape is resized.
            if list(out.shape) != list(meta.shape):
                storage.resize(runtime(), out, meta.shape, meta.stride())
        elif inplace:
            out = b[inplace[0]]
        else:
            out = storage.empty_strided(runtime(), meta.shape, meta.stride(), meta.dtype)
        if out.numel() == 0:
            return out
        tensors: list[tuple[int, torch.Tensor]] = []
        attrs = dict(fixed)
        for arg, value in b.items():
            if arg in outs:
                continue
            kname = "input" if arg == "self" else arg
            value = scalar_of(value)
            if kname in operands and isinstance(value, torch.Tensor):
                tensors.append((operands.index(kname), value))
            elif value is None and defaults.get(kname) is not None:
                continue  # ATen's None means the kernel's default (nan_to_num's nan=0.0)
            else:
                attrs[kname] = value
        for kname in operands:  # scalars where the kernel takes only tensors: 0-d tensors
            value = attrs.get(kname)
            if kname not in scalar_ok and isinstance(value, (bool, int, float)):
                like = next((t for _, t in tensors), out)
                t = storage.empty(runtime(), [], torch.result_type(like, value))
                _fill(t, attrs.pop(kname))
                tensors.append((operands.index(kname), t))
        tensors.sort(key=lambda p: p[0])
        ins = [t for _, t in tensors]
        for t in (out, *ins):
            if not _kernel_dtype_ok(t):
                raise HostOnly(f"{t.dtype} operand")
        for t in ins:
            check_int64_range(t, "input")
        int64 = [i for i, t in enumerate((out, *ins)) if t.dtype == torch.int64]
        launch(pointwise, out, *ins, aten_op=aten_op, op=kop, int64=int64 or None, **attrs)
        return out

    run.__name__ = name
    return run


def _register() -> None:
    served = set(kernel_ops())
    for name in cpu_overloads(*UNARY, *BINARY, *TERNARY, *BACKWARD):
        base = _base(name)
        kop, fixed = RENAMED.get(base, (base, {}))
        if kop in served and name not in NOT_SERVED:
            op(name, kernels="pointwise", group="pointwise")(make(name, kop, fixed))
    reference_only(*(n for n in cpu_overloads(*UNARY, *BINARY, *TERNARY, *BACKWARD, *HOST_ONLY)
                     if n not in REGISTRY), group="pointwise")


_register()


# ---------------------------------------------------------------- copies, fills, triangles


def device_copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """dst[...] = src (broadcast, any strides, any dtype pair) in one pointwise launch."""
    if dst.numel() == 0:
        return
    if not (_kernel_dtype_ok(dst) and _kernel_dtype_ok(src)):
        raise HostOnly(f"a copy between {src.dtype} and {dst.dtype}")
    if src.is_complex() or dst.is_complex():
        raise HostOnly("complex")
    check_int64_range(src, "source")
    int64 = [i for i, t in enumerate((dst, src)) if t.dtype == torch.int64]
    launch(pointwise, dst, src, aten_op="aten::copy_", op="copy", int64=int64 or None)


def _fill(self: torch.Tensor, value: Any) -> torch.Tensor:
    if self.numel() == 0:
        return self
    if not _kernel_dtype_ok(self):
        raise HostOnly(f"{self.dtype} tensor")
    value = scalar_of(value)
    if isinstance(value, torch.Tensor):  # a 0-d device tensor: a broadcast copy
        device_copy(self, value)
        return self
    if self.dtype == torch.int64 and not -(2 ** 31) <= int(value) < 2 ** 31:
        raise HostOnly("an int64 fill beyond int32 range")
    launch(fill_kernels.fill, self, value, aten_op="aten::fill_", int64=self.dtype == torch.int64)
    return self


op("fill_.Scalar", kernels="fill", group="factories")(lambda self, value: _fill(self, value))
op("fill_.Tensor", kernels="fill", group="factories")(lambda self, value: _fill(self, value))
op("zero_", kernels="fill", group="factories")(lambda self: _fill(self, 0))


def _triangle(name: str, self, diagonal, upper: bool, out=None):
    if self.dim() < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    target = self if out is None and name.endswith("_") else out
    if target is None:
        target = storage.empty(runtime(), self.shape, self.dtype)
    elif list(target.shape) != list(self.shape):
        storage.resize(runtime(), target, self.shape)
    if self.numel() == 0:
        return target
    if not _kernel_dtype_ok(self):
        raise HostOnly(f"{self.dtype} tensor")
    launch(fill_kernels.triangle, target, self, aten_op=f"aten::{name}", diagonal=int(diagonal),
           upper=upper, int64=self.dtype == torch.int64)
    return target


for _n, _up in (("tril", False), ("triu", True)):
    op(_n, kernels="triangle", group="indexing")(
        lambda self, diagonal=0, _n=_n, _up=_up: _triangle(_n, self, diagonal, _up))
    op(f"{_n}_", kernels="triangle", group="indexing")(
        lambda self, diagonal=0, _n=_n, _up=_up: _triangle(f"{_n}_", self, diagonal, _up))
    op(f"{_n}.out", kernels="triangle", group="indexing")(
        lambda self, diagonal=0, *, out, _n=_n, _up=_up: _triangle(_n, self, diagonal, _up, out))
