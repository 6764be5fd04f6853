"""Buffer updates of an AOTAutograd graph back in place: batch norm's running statistics and
counters such as `num_batches_tracked`, as eager updates them.

AOTAutograd traces a module's buffer mutations functionally and copies the new values back at
the graph's end (`copy_(buffer, new)`). For batch norm it traces
`_native_batch_norm_legit_functional` (training), `_native_batch_norm_legit_no_training`
(eval) or `_native_batch_norm_legit.no_stats` (no running statistics), which the device has
no kernel for (they would run on the host, untimed): both become
the device's `native_batch_norm`, which updates the running statistics in place, so the copy
back goes (or, where the graph must keep the old statistics, it runs on clones of them). A
functional op whose only use is the copy back into its own first input (`copy_(n, add(n, 1))`)
runs as its in-place overload (`add_`). Knows nothing of how graphs run.
"""

from __future__ import annotations

import operator

import torch

aten = torch.ops.aten


def reinplace_buffers(gm: torch.fx.GraphModule) -> int:
    """Rewrite `gm` in place; returns how many nodes were rewritten."""
    graph = gm.graph
    done = 0
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is aten._native_batch_norm_legit_functional.default:
            done += _batch_norm(graph, node, training_arg=True)
        elif node.target is aten._native_batch_norm_legit_no_training.default:
            done += _batch_norm(graph, node, training_arg=False)
        elif node.target is aten._native_batch_norm_legit.no_stats:
            done += _batch_norm(graph, node, training_arg=None)
    for cp in [n for n in graph.nodes if n.target is aten.copy_.default]:
        done += _inplace_copy_back(graph, cp)
    if done:
        graph.lint()
        gm.recompile()
    return done


def _copy_back(dst: object, value: torch.fx.Node | None) -> torch.fx.Node | None:
    """The node copy_(dst, value), when `dst` is a graph input."""
    if not isinstance(dst, torch.fx.Node) or dst.op != "placeholder" or value is None:
        return None
    return next((u for u in value.users if u.target is aten.copy_.default
                 and u.args[0] is dst and u.args[1] is value), None)


def _only_read_before(dst: torch.fx.Node, node: torch.fx.Node, allowed: set) -> bool:
    """Nothing but `node` and `allowed` reads `dst` at or after `node`."""
    order = {n: i for i, n in enumerate(node.graph.nodes)}
    return all(u in allowed or u is node or order[u] < order[node] for u in dst.users)


def _batch_norm(graph: torch.fx.Graph, node: torch.fx.Node, training_arg: bool | None) -> int:
    """training_arg: True for the functional op (it has one), False for no_training, None for
    no_stats (no running statistics: the batch's own, in training and eval alike)."""
    if training_arg:
        x, w, b, mean, var, training, momentum, eps = node.args
    elif training_arg is None:
        (x, w, b, training, momentum, eps), mean, var = node.args, None, None
    else:
        (x, w, b, mean, var, momentum, eps), training = node.args, False
    items = {u.args[1]: u for u in node.users if u.target is operator.getitem}
    if len(items) != len(node.users) or node.kwargs:
        return 0
    new_stats = (items.get(3), items.get(4)) if training_arg else (None, None)
    copies = [_copy_back(s, v) for s, v in zip((mean, var), new_stats, strict=True)]
    in_place = (training_arg and all(c is not None for c in copies)
                and all(_only_read_before(s, node, {c}) for s, c in zip((mean, var), copies,
                                                                       strict=True)))
    with graph.inserting_before(node):
        if training_arg and not in_place and mean is not None:
            # the graph keeps the old statistics: update copies, as the functional op does
            mean, var = (graph.call_function(aten.clone.default, (s,)) for s in (mean, var))
        new = graph.call_function(aten.native_batch_norm.default,
                                  (x, w, b, mean, var, training, momentum, eps))
    new.meta = dict(node.meta)
    if "val" in node.meta:
        new.meta["val"] = tuple(node.meta["val"][:3])
    for i, item in items.items():
        if i < 3:
            item.args = (new, i)
        else:
            item.replace_all_uses_with(mean if i == 3 else var)
            graph.erase_node(item)
    if in_place:
        for cp in copies:  # now copy_(stat, stat)
            graph.erase_node(cp)
    graph.erase_node(node)
    return 1


def _inplace_copy_back(graph: torch.fx.Graph, cp: torch.fx.Node) -> int:
    """copy_(dst, f(dst, ...)) with f's result used only there -> f_(dst, ...)."""
    dst, src = cp.args[0], cp.args[1]
    if not (isinstance(src, torch.fx.Node) and src.op == "call_function" and len(src.users) == 1
            and isinstance(src.target, torch._ops.OpOverload) and src.args
            and src.args[0] is dst and _copy_back(dst, src) is cp and not cp.users):
        return 0
    name = src.target._schema.name.removeprefix("aten::")
    packet = getattr(aten, name + "_", None) if src.target.namespace == "aten" else None
    inplace = getattr(packet, src.target._overloadname, None) if packet is not None else None
    have, want = src.meta.get("val"), dst.meta.get("val")
    if inplace is None or not (isinstance(have, torch.Tensor) and isinstance(want, torch.Tensor)
                               and have.shape == want.shape and have.dtype == want.dtype):
        return 0
    if not _only_read_before(dst, src, {cp}):
        return 0
    with graph.inserting_before(src):
        new = graph.call_function(inplace, src.args, src.kwargs)
    new.meta = dict(src.meta)
    graph.erase_node(cp)
    graph.erase_node(src)
    return 1
