"""Reading Dynamo's torch-level graphs: what a node computes, whatever the spelling.

Dynamo records calls as the user wrote them, after inlining Python functions: `F.linear`,
`torch.relu`, `x.softmax(-1)`, `a @ b`, `operator.add`. `kind(node)` names the computation
("linear", "softmax", "add", ...) for every spelling this table knows, and `args(node)` binds
its arguments by name (positional, keyword and defaults alike). Knows nothing of patterns.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.nn.functional as F

# kind -> parameter names (after the tensor `input`) with defaults; a `None` default is a
# real default of None, REQUIRED marks a parameter without one.
REQUIRED = object()
SIGNATURES: dict[str, tuple[tuple[str, Any], ...]] = {
    "linear": (("weight", REQUIRED), ("bias", None)),
    "gelu": (("approximate", "none"),),
    "silu": (("inplace", False),),
    "relu": (("inplace", False),),
    "tanh": (),
    "sigmoid": (),
    "add": (("other", REQUIRED), ("alpha", 1)),
    "mul": (("other", REQUIRED),),
    "div": (("other", REQUIRED), ("rounding_mode", None)),
    "matmul": (("other", REQUIRED),),
    "softmax": (("dim", None), ("dtype", None)),
    "softmax_f": (("dim", None), ("_stacklevel", 3), ("dtype", None)),
    "log_softmax": (("dim", None), ("dtype", None)),
    "log_softmax_f": (("dim", None), ("_stacklevel", 3), ("dtype", None)),
    "rms_norm": (("normalized_shape", REQUIRED), ("weight", None), ("eps", None)),
    "layer_norm": (("normalized_shape", REQUIRED), ("weight", None), ("bias", None),
                   ("eps", 1e-5)),
    "cross_entropy": (("target", REQUIRED), ("weight", None), ("size_average", None),
                      ("ignore_index", -100), ("reduce", None), ("reduction", "mean"),
                      ("label_smoothing", 0.0)),
    "nll_loss": (("target", REQUIRED), ("weight", None), ("size_average", None),
                 ("ignore_index", -100), ("reduce", None), ("reduction", "mean")),
    "pow": (("exponent", REQUIRED),),
    "square": (),
    "mean": (("dim", None), ("keepdim", False), ("dtype", None)),
    "rsqrt": (),
    "transpose": (("dim0", REQUIRED), ("dim1", REQUIRED)),
    "masked_fill": (("mask", REQUIRED), ("value", REQUIRED)),
    "dropout": (("p", 0.5), ("training", True), ("inplace", False)),
}
# the Python-level spellings whose positional order differs from the method's
_ALIAS = {"softmax_f": "softmax", "log_softmax_f": "log_softmax"}

FUNCTIONS: dict[Any, str] = {
    F.linear: "linear", F.gelu: "gelu", torch._C._nn.silu: "silu", F.silu: "silu",
    F.relu: "relu", torch.relu: "relu", torch.tanh: "tanh", F.tanh: "tanh",
    torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid",
    operator.add: "add", operator.iadd: "add", torch.add: "add",
    operator.mul: "mul", operator.imul: "mul", torch.mul: "mul",
    operator.truediv: "div", torch.div: "div",
    operator.matmul: "matmul", torch.matmul: "matmul", torch.bmm: "matmul",
    torch.softmax: "softmax", F.softmax: "softmax_f",
    torch.log_softmax: "log_softmax", F.log_softmax: "log_softmax_f",
    torch.rms_norm: "rms_norm", F.rms_norm: "rms_norm",
    torch.layer_norm: "layer_norm", F.layer_norm: "layer_norm",
    F.cross_entropy: "cross_entropy", F.nll_loss: "nll_loss",
    torch.pow: "pow", operator.pow: "pow", torch.square: "square",
    torch.mean: "mean", torch.rsqrt: "rsqrt", torch.transpose: "transpose",
    torch.masked_fill: "masked_fill", F.dropout: "dropout",
}
METHODS: dict[str, str] = {
    "relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "add": "add", "mul": "mul",
    "div": "div", "matmul": "matmul", "softmax": "softmax", "log_softmax": "log_softmax",
    "pow": "pow", "square": "square", "mean": "mean", "rsqrt": "rsqrt",
    "transpose": "transpose", "masked_fill": "masked_fill", "__matmul__": "matmul",
}
ACTIVATIONS = ("gelu", "relu", "silu", "tanh", "sigmoid")


def _raw_kind(node: torch.fx.Node) -> str | None:
    if node.op == "call_function":
        try:
            return FUNCTIONS.get(node.target)
        except TypeError:  # an unhashable target
            return None
    if node.op == "call_method":
        return METHODS.get(node.target)
    return None


def kind(node: Any) -> str | None:
    """The computation of a graph node ("linear", "softmax", ...), or None."""
    if not isinstance(node, torch.fx.Node):
        return None
    k = _raw_kind(node)
    return _ALIAS.get(k, k) if k is not None else None


def args(node: torch.fx.Node) -> dict[str, Any]:
    """The node's arguments by name: {"input": ..., "weight": ..., ...} with defaults."""
    k = _raw_kind(node)
    if k is None:
        raise KeyError(f"no signature for {node.format_node()}")
    names = ("input", *(n for n, _ in SIGNATURES[k]))
    bound: dict[str, Any] = {n: d for n, d in SIGNATURES[k]}
    for name, value in zip(names, node.args, strict=False):
        bound[name] = value
    for name, value in node.kwargs.items():
        bound["input" if name in ("self", "input") else name] = value
    return bound


def value(node: Any) -> Any:
    """The fake value Dynamo recorded for a node (or the constant itself)."""
    if isinstance(node, torch.fx.Node):
        return node.meta.get("example_value")
    return node


def tensor(node: Any) -> torch.Tensor | None:
    v = value(node)
    return v if isinstance(v, torch.Tensor) else None


def only_user(node: torch.fx.Node, user: torch.fx.Node) -> bool:
    """`user` is the one consumer of `node` (the region can swallow node's value)."""
    return len(node.users) == 1 and user in node.users


def on_device(device: str, *nodes: Any) -> bool:
    """Every given node is a float32/bf16/fp16 tensor of one dtype on `device`."""
    dtypes = set()
    for n in nodes:
        if n is None:
            continue
        t = tensor(n)
        if t is None or t.device.type != device:
            return False
        dtypes.add(t.dtype)
    return len(dtypes) == 1 and dtypes <= {torch.float32, torch.bfloat16, torch.float16}


def last_dim(node: Any, dim: Any) -> bool:
    """`dim` names the last dim of the tensor `node` (-1, or ndim - 1)."""
    t = tensor(node)
    return t is not None and isinstance(dim, int) and dim in (-1, t.dim() - 1)
