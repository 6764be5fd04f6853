"""Pointwise ATen ops: unary, binary, ternary, activations and their backward, comparisons."""

from __future__ import annotations

from trnsim.backend.registry import cpu_overloads, reference_only

UNARY = [
    "neg", "abs", "sign", "sgn", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
    "rsqrt", "reciprocal", "sigmoid", "tanh", "relu", "gelu", "silu", "mish", "softplus", "elu",
    "leaky_relu", "hardtanh", "hardsigmoid", "hardswish", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "floor", "ceil",
    "round", "trunc", "frac", "logical_not", "bitwise_not", "isnan", "isinf", "isposinf",
    "isneginf", "nan_to_num", "logit", "celu", "selu", "relu6", "threshold", "signbit"
]
BINARY = [
    "add", "sub", "rsub", "mul", "div", "remainder", "fmod", "pow", "maximum", "minimum", "fmax",
    "fmin", "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
    "hypot", "copysign", "floor_divide", "xlogy"
]
TERNARY = [
    "where", "addcmul", "addcdiv", "lerp", "clamp", "clamp_min", "clamp_max", "masked_fill"
]
BACKWARD = [
    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
    "leaky_relu_backward", "hardtanh_backward", "elu_backward", "softplus_backward",
    "mish_backward", "hardsigmoid_backward", "hardswish_backward", "logit_backward"
]

reference_only(*cpu_overloads(*UNARY, *BINARY, *TERNARY, *BACKWARD), group="pointwise")
