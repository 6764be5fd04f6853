"""Re-inplacing the foreach updates of an inference graph (a compiled optimizer step).

AOTAutograd traces torch.optim's in-place `_foreach_*_` updates functionally: each becomes an
out-of-place `_foreach_*` whose results are copied back into the parameters and optimizer
state at the end (`copy_(state, new)`), so eager's one launch per update becomes that launch,
one copy per tensor, and the new tensors' allocation. Where a foreach op's first list is
graph inputs that the graph overwrites at its end anyway, and nothing reads them after the
op but that copy back, the op runs in place instead (`_foreach_*_`; later readers of its
results read the inputs) and copies that became copy_(x, x) go: the launches eager makes.
Lerp's decomposition, `addcmul(a, full_like(end - a, w), end - a)`, becomes lerp again.
"""

from __future__ import annotations

import operator

import torch

aten = torch.ops.aten


def reinplace_foreach(gm: torch.fx.GraphModule) -> int:
    """Rewrite `gm` in place; returns how many foreach ops now run in place."""
    _fold_filled_weights(gm.graph)
    graph = gm.graph
    order = {n: i for i, n in enumerate(graph.nodes)}
    copies = {n.args[0]: n for n in graph.nodes
              if n.op == "call_function" and n.target is aten.copy_.default
              and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder"}
    done = 0
    for node in list(graph.nodes):
        inplace = _inplace_of(node)
        if inplace is None:
            continue
        dsts = list(node.args[0])
        items = {u.args[1]: u for u in node.users if u.target is operator.getitem}
        if len(items) != len(dsts) or len(items) != len(node.users) or len(set(dsts)) != len(
                dsts):
            continue
        if not all(_writable(i, dst, node, items, copies, order) for i, dst in enumerate(dsts)):
            continue
        with graph.inserting_before(node):
            new = graph.call_function(inplace, node.args, node.kwargs)
        new.meta = dict(node.meta)
        for i, dst in enumerate(dsts):
            cp = copies[dst]
            items[i].replace_all_uses_with(dst)
            graph.erase_node(items[i])
            if cp.args[1] is dst:  # the copy back became copy_(dst, dst)
                del copies[dst]
                cp.replace_all_uses_with(dst)
                graph.erase_node(cp)
        graph.erase_node(node)
        order = {n: i for i, n in enumerate(graph.nodes)}
        done += 1
    if done:
        graph.lint()
        gm.recompile()
    return done


def _inplace_of(node: torch.fx.Node):
    """The in-place overload of a functional `_foreach_*` node over a list of nodes."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return None
    name = node.target._schema.name
    if not name.startswith("aten::_foreach_") or name.endswith("_"):
        return None
    if not node.args or not isinstance(node.args[0], list | tuple):
        return None
    packet = getattr(aten, name.removeprefix("aten::") + "_", None)
    return getattr(packet, node.target._overloadname, None) if packet is not None else None


def _writable(i: int, dst, node, items: dict, copies: dict, order: dict) -> bool:
    """Graph input `dst` is one the graph overwrites at its end (a copy back), and nothing
    but that copy reads it after `node`: writing `node`'s result i into it in place loses no
    value anyone still needs (later readers of the result read `dst` instead)."""
    if not isinstance(dst, torch.fx.Node) or dst.op != "placeholder" or i not in items:
        return False
    cp = copies.get(dst)
    if cp is None or order[cp] < order[node]:
        return False
    return all(u is node or u is cp or order[u] < order[node] for u in dst.users)


def _fold_filled_weights(graph: torch.fx.Graph) -> None:
    """_foreach_addcmul(a, [full_like(d_i, w)], d, value=v): lerp's decomposition. With
    d = _foreach_sub(end, a) it is _foreach_lerp(a, end, w * v) (one launch, as eager's);
    otherwise _foreach_add(a, d, alpha=w * v). Only when the filled tensors (and d) serve
    only that op."""
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten._foreach_addcmul.Scalar:
            continue
        a, fills, ds = node.args[:3]
        value = node.args[3] if len(node.args) > 3 else node.kwargs.get("value", 1)
        w = _filled_weight(fills, ds)
        if w is None or not isinstance(value, int | float):
            continue
        end = _sub_from(ds, a, node)
        with graph.inserting_before(node):
            if end is not None:
                new = graph.call_function(aten._foreach_lerp.Scalar, (a, end, w * value))
            else:
                new = graph.call_function(aten._foreach_add.List, (a, ds),
                                          {"alpha": w * value})
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        for f in fills:
            graph.erase_node(f)
        if end is not None:
            sub = ds[0].args[0]
            for d in ds:
                graph.erase_node(d)
            graph.erase_node(sub)


def _filled_weight(fills, ds):
    """w when fills[i] = full_like(ds[i], w) for every i, each used only once, else None."""
    weights = set()
    if len(fills) != len(ds):
        return None
    for f, d in zip(fills, ds, strict=True):
        if not (isinstance(f, torch.fx.Node) and f.target is aten.full_like.default
                and f.args[0] is d and len(f.users) == 1 and len(f.args) == 2
                and set(f.kwargs) <= {"pin_memory"}):
            return None
        weights.add(f.args[1])
    return weights.pop() if len(weights) == 1 and isinstance(next(iter(weights)), int | float) \
        else None


def _sub_from(ds, a, user):
    """`end` when ds are the results of one _foreach_sub.List(end, a), used only by `user`
    and the fills."""
    if not ds or not all(isinstance(d, torch.fx.Node) and d.target is operator.getitem
                         for d in ds):
        return None
    sub = ds[0].args[0]
    if sub.target is not aten._foreach_sub.List or list(sub.args[1]) != list(a) or \
            sub.kwargs.get("alpha", 1) != 1 or len(sub.args) != 2:
        return None
    if [d.args[0] for d in ds] != [sub] * len(ds) or [d.args[1] for d in ds] != list(
            range(len(ds))) or len(sub.users) != len(ds):
        return None
    if any(set(d.users) - {user} - {f for f in d.users if f.target is aten.full_like.default}
           for d in ds):
        return None
    return sub.args[0]
