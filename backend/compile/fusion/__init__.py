"""The fusion pass of torch.compile(backend="trn"): known subgraphs of Dynamo's graph become
one fused op each, run as library kernels (the rest runs node by node, as eager).

Patterns, in the order they are tried (a node joins one region at most):

* `swiglu_mlp`   down(act(gate(x)) * up(x)), act silu or gelu   -> kernels.fused_mlp.mlp
* `mlp`          fc2(act(fc1(x))), act gelu, relu or silu        -> kernels.fused_mlp.mlp
* `attention`    softmax(q @ k^T * scale [+ mask]) @ v           -> kernels.flash_attention
* `rms_norm`     x * rsqrt(mean(x^2, -1) + eps) [* w], written out -> kernels.layer_norm
* `add_norm`     rms_norm / layer_norm (x + residual)            -> kernels.add_norm
* `linear_act`   act(linear(x)), act gelu/relu/silu/tanh/sigmoid -> kernels.fused_linear
* `cross_entropy` F.cross_entropy or nll_loss(log_softmax(x))    -> kernels.cross_entropy

Each pattern checks what its kernel serves (device tensors of one float dtype, shapes,
SBUF fit) and leaves the region alone otherwise. Graphs traced under torch.autocast are not
fused (the fused ops would not see autocast's casts): they run node by node.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from trnsim.backend.compile.fusion.fused_op import FusedOp
from trnsim.backend.compile.fusion.rewrite import (
    Match,
    extract,
    placeable,
    replace,
    requires_grad,
)
from trnsim.backend.compile.source import node_location


@dataclass(frozen=True)
class Context:
    device: str  # the trn device's name
    sbuf_bytes: int  # usable SBUF per partition of the device's chip


@dataclass(frozen=True)
class Pattern:
    name: str
    op: FusedOp
    find: Callable[[torch.fx.Graph, Context], Iterator[Match]]


@dataclass(frozen=True)
class FusedRegion:
    """What the region timer needs of a region (state.specs)."""

    op: FusedOp
    grad_inputs: tuple[int, ...]  # op arguments that require grad in the traced graph
    eager: Callable[..., Any]  # the region's own ops (the op's arguments -> its outputs)


def patterns() -> tuple[Pattern, ...]:
    from trnsim.backend.compile.fusion import attention, linear, losses, mlp, norms

    return (*mlp.PATTERNS, *attention.PATTERNS, *norms.PATTERNS, *linear.PATTERNS,
            *losses.PATTERNS)


def fuse(gm: torch.fx.GraphModule, graph: Any, st: Any, rt: Any) -> list[str]:
    """Rewrite `gm` in place; returns the names of the regions it fused."""
    if _autocast(gm, rt.name):
        return []
    ctx = Context(rt.name, int(rt.chip.tile_size["total_available_sbuf_size"]))
    names: list[str] = []
    for pattern in patterns():
        # A match found before an earlier replacement may name erased nodes: find again
        # until a pass replaces nothing it had to skip (each such pass replaces one at least).
        while True:
            erased: set[torch.fx.Node] = set()
            skipped = 0
            for m in _find(pattern, gm, ctx, graph):
                touched = {*m.nodes, *(a for a in m.args if isinstance(a, torch.fx.Node))}
                if touched & erased:
                    skipped += 1
                    continue
                name = _apply(gm, m, pattern, st, graph)
                if name is not None:
                    erased.update(m.nodes)
                    names.append(name)
            if not skipped:
                break
    if names:
        gm.graph.lint()
        gm.recompile()
    return names


def _apply(gm: torch.fx.GraphModule, m: Match, pattern: Pattern, st: Any,
           graph: Any) -> str | None:
    """Replace one match (when its call can be placed); the new region's name."""
    where = placeable(gm.graph, m)
    if where is None:
        return None
    op = m.extra.get("op", pattern.op)
    grads = tuple(i for i, a in enumerate(m.args) if requires_grad(a))
    stats = st.new_region(pattern.name, m.parts or op.parts, node_location(m.anchor), graph)
    eager = extract(gm, m)
    replace(gm, m, op, stats.name, where)
    st.specs[stats.name] = FusedRegion(op, grads, eager or _eager_of(op, len(m.outputs)))
    return stats.name


def _find(pattern: Pattern, gm: torch.fx.GraphModule, ctx: Context, graph: Any) -> list[Match]:
    """The pattern's matches; a pattern that fails on a graph it does not expect is skipped
    with a warning (the graph then runs that region unfused) rather than failing the compile."""
    try:
        return list(pattern.find(gm.graph, ctx))
    except Exception as e:  # a trnsim bug: report it, keep the user's compile going
        from trnsim.backend.compile.regions import CompileWarning

        warnings.warn(f"trnsim torch.compile: fusion pattern {pattern.name!r} failed on graph "
                      f"{graph.number} ({graph.frame}) and was skipped: {type(e).__name__}: "
                      f"{e}", CompileWarning, stacklevel=3)
        return []


def _eager_of(op: FusedOp, n: int) -> Callable[..., Any]:
    """The op's own composite, when the region's nodes cannot be lifted out."""
    return lambda *args: op.unfused(*args)[:n]


def _autocast(gm: torch.fx.GraphModule, device: str) -> bool:
    """Autocast is on where the graph was traced (a torch.autocast around the compiled call),
    or the graph enters it somewhere (Dynamo records the enter/exit calls)."""
    if torch.is_autocast_enabled(device) or torch.is_autocast_enabled("cpu"):
        return True
    for n in gm.graph.nodes:
        name = getattr(n.target, "__name__", "") if n.op == "call_function" else ""
        if "autocast" in name or "autocast" in str(n.target):
            return True
    return False


__all__ = ["Context", "FusedRegion", "Match", "Pattern", "fuse", "patterns"]
