"""Replacing a matched region of a Dynamo graph with one call of its fused op.

A `Match` lists the region's nodes, the fused op's arguments (graph nodes or constants) and
the nodes whose values the op's outputs replace. The call goes where its inputs are all
defined and before any outside user of an output; the call node carries the region's name
(`custom` meta, which AOTAutograd copies onto the ATen nodes of forward and backward), the
user's stack trace, and a fake value so later patterns can read shapes.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from trnsim.backend.compile.fusion.fused_op import FusedOp
from trnsim.backend.compile.fusion.match import tensor, value


@dataclass
class Match:
    nodes: list[torch.fx.Node]  # the region (erased once replaced)
    args: list[Any]  # the fused op's arguments: graph nodes, constants, None
    outputs: list[torch.fx.Node]  # region nodes replaced by the op's outputs, in order
    anchor: torch.fx.Node  # whose source line the region reports
    parts: str = ""  # overrides the op's description ("linear -> gelu")
    extra: dict = field(default_factory=dict)


def placeable(graph: torch.fx.Graph, m: Match) -> torch.fx.Node | None:
    """The node after which the fused call can go, or None when none can (an outside user
    of an output comes before an input is defined)."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    region = set(m.nodes)
    inputs = [a for a in m.args if isinstance(a, torch.fx.Node)]
    for n in m.nodes:  # inner nodes feed only the region
        if n not in m.outputs and any(u not in region for u in n.users):
            return None
    after = max((order[a] for a in inputs), default=-1)
    users = [u for out in m.outputs for u in out.users if u not in region]
    if users and min(order[u] for u in users) <= after:
        return None
    first = min(order[n] for n in m.nodes)
    nodes = list(graph.nodes)
    return nodes[max(after, first - 1)]


def replace(gm: torch.fx.GraphModule, m: Match, op: FusedOp, region: str,
            where: torch.fx.Node) -> torch.fx.Node:
    """Insert op.call(*m.args) after `where`, route the outputs, erase the region."""
    graph = gm.graph
    meta = {"stack_trace": m.anchor.meta.get("stack_trace"),
            "custom": {"trn_region": region}}
    with graph.inserting_after(where):
        call = graph.call_function(op.call, tuple(m.args))
    call.meta.update(meta)
    fakes = _fake_outputs(op, m)
    call.meta["example_value"] = fakes
    prev = call
    for i, out in enumerate(m.outputs):
        with graph.inserting_after(prev):
            item = graph.call_function(operator.getitem, (call, i))
        item.meta.update(meta)
        item.meta["example_value"] = fakes[i] if fakes is not None else None
        out.replace_all_uses_with(item)
        prev = item
    order = {n: i for i, n in enumerate(graph.nodes)}
    for n in sorted(m.nodes, key=order.__getitem__, reverse=True):
        graph.erase_node(n)
    return call


def extract(gm: torch.fx.GraphModule, m: Match) -> torch.fx.GraphModule | None:
    """The region's own nodes as a callable of the fused op's arguments (constants ignored):
    eager's computation of the region, for timing its parts; None if a region node reads a
    value that is not an argument."""
    g = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for i, a in enumerate(m.args):
        ph = g.placeholder(f"arg{i}")
        if isinstance(a, torch.fx.Node):
            env[a] = ph
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    try:
        for n in sorted(m.nodes, key=order.__getitem__):
            env[n] = g.node_copy(n, env.__getitem__)
    except KeyError:
        return None
    g.output(tuple(env[o] for o in m.outputs))
    return torch.fx.GraphModule(gm, g)


def _fake_outputs(op: FusedOp, m: Match) -> Any:
    vals = [value(a) for a in m.args]
    modes = [v.fake_mode for v in vals if isinstance(v, FakeTensor)]
    if not modes:
        return None
    with modes[0]:  # the mode of Dynamo's example values (not the tracing context's)
        return op.call(*vals)


def requires_grad(node: Any) -> bool:
    t = tensor(node)
    return bool(t is not None and t.requires_grad)
