"""Running an AOTAutograd graph on the device: node by node, as eager runs the same ops.

Each call node runs its ATen op (or fused op) on the device tensors, so a graph computes
exactly what eager computes with the same ops. While a node runs, `rt.graph_node` names it
(graph, node, fused region) and carries the user's source line, so every launch it makes is
labelled on `profile_torch`'s timeline. Outputs whose strides differ from the ones the graph
was traced with (a device kernel that lays out an output its own way) are copied into the
traced layout, since the views after them were computed for it; such copies are counted in
compile_stats().layout_copies. Values are freed after their last use, as eager frees them.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx.node import map_arg
from trnsim.backend.compile.source import node_location
from trnsim.backend.compile.state import CompileState, GraphStats
from trnsim.backend.runtime import Runtime

from trnsim.program import SourceLocation


@dataclass(frozen=True)
class NodeLabel:
    """What rt.graph_node holds while a node runs (read by backend.launch.record)."""

    label: str  # "g0/fw:mm_3" or "linear_act#0 g0/fw:linear_act"
    loc: SourceLocation | None
    region: str | None


@dataclass
class _Step:
    node: torch.fx.Node
    label: NodeLabel
    free: tuple[torch.fx.Node, ...]  # values whose last use this node is


def region_of(node: torch.fx.Node) -> str | None:
    custom = node.meta.get("custom") or {}
    return custom.get("trn_region")


class GraphRunner:
    """A compiled AOTAutograd graph (forward, backward or inference) of one Dynamo graph."""

    def __init__(self, gm: torch.fx.GraphModule, graph: GraphStats, kind: str,
                 state: CompileState, rt: Runtime, measure: bool):
        self.gm, self.graph, self.kind, self.state, self.rt = gm, graph, kind, state, rt
        self.measure = measure
        # AOTAutograd passes the inputs as a list the callee may clear. An instance attribute:
        # Dynamo wraps the backward with functools.wraps, which copies __dict__ only.
        self._boxed_call = True
        short = {"forward": "fw", "backward": "bw", "inference": "inf"}[kind]
        nodes = list(gm.graph.nodes)
        last: dict[torch.fx.Node, torch.fx.Node] = {}
        for node in nodes:
            for inp in node.all_input_nodes:
                last[inp] = node
        dying: dict[torch.fx.Node, list[torch.fx.Node]] = {}
        for value, user in last.items():
            dying.setdefault(user, []).append(value)
        self.steps = []
        for node in nodes:
            region = region_of(node)
            text = f"g{graph.number}/{short}:{node.name}"
            label = NodeLabel(f"{region} {text}" if region else text, node_location(node), region)
            self.steps.append(_Step(node, label, tuple(dying.get(node, ()))))
        calls = [n for n in nodes if n.op == "call_function"]
        graph.aot_graphs[kind] = len(calls)
        graph.aot_ops[kind] = tuple(str(n.target) for n in calls)
        self.runs = 0

    def __call__(self, args: list) -> Any:
        from trnsim.backend.compile.regions import RegionTimer

        inputs = list(args)
        args.clear()
        rt = self.rt
        self.runs += 1
        with rt.lock:
            self.graph.runs[self.kind] = self.graph.runs.get(self.kind, 0) + 1
        timer = RegionTimer(self, first=self.runs == 1)
        env: dict[torch.fx.Node, Any] = {}
        feed = iter(inputs)
        inputs = []
        for step in self.steps:
            node = step.node
            if node.op == "placeholder":
                env[node] = next(feed)
            elif node.op == "get_attr":
                env[node] = _attr(self.gm, node.target)
            elif node.op == "output":
                return map_arg(node.args[0], env.__getitem__)
            else:
                env[node] = self._run(step, env, timer)
            for dead in step.free:
                env.pop(dead, None)
        raise AssertionError("graph without an output node")

    def _run(self, step: _Step, env: dict, timer: Any) -> Any:
        node, rt = step.node, self.rt
        args = map_arg(node.args, env.__getitem__)
        kwargs = map_arg(node.kwargs, env.__getitem__)
        prev = rt.graph_node
        rt.graph_node = step.label
        mark = timer.start(step)
        try:
            if node.op == "call_function":
                out = node.target(*args, **kwargs)
            elif node.op == "call_method":
                out = getattr(args[0], node.target)(*args[1:], **kwargs)
            else:
                out = _attr(self.gm, node.target)(*args, **kwargs)
        except Exception as e:
            _note(e, step, self.kind)
            raise
        finally:
            rt.graph_node = prev
        timer.stop(step, mark, args, kwargs)
        if node.target is not operator.getitem or isinstance(out, torch.Tensor):
            out = self._layout(node, out)
        return out

    def _layout(self, node: torch.fx.Node, out: Any) -> Any:
        want = node.meta.get("val")
        if not (isinstance(out, torch.Tensor) and isinstance(want, torch.Tensor)):
            return out
        if out.shape != want.shape or out.numel() < 2 or _same_layout(out, want):
            return out
        fixed = torch.empty_strided(out.shape, want.stride(), dtype=out.dtype, device=out.device)
        fixed.copy_(out)
        src = node.args[0] if node.target is operator.getitem else node
        name = str(getattr(src.target, "__name__", src.target))
        if src is not node:
            name += f"[{node.args[1]}]"
        with self.rt.lock:
            self.state.layout_copies[name] = self.state.layout_copies.get(name, 0) + 1
        return fixed


def _same_layout(t: torch.Tensor, ref: torch.Tensor) -> bool:
    """Equal strides on every dim of size > 1 (a size-1 dim's stride is never used)."""
    return all(n < 2 or a == b for n, a, b in zip(t.shape, t.stride(), ref.stride(), strict=True))


def _attr(gm: torch.fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _note(e: Exception, step: _Step, kind: str) -> None:
    """Say which graph node failed and the user's line it came from (PEP 678 note)."""
    loc = step.label.loc
    where = f" from {loc.filename}:{loc.lineno} ({loc.code})" if loc is not None else ""
    if hasattr(e, "add_note"):
        e.add_note(f"trnsim torch.compile: in the {kind} graph, node {step.node.name} "
                   f"({step.node.target}){where}")
