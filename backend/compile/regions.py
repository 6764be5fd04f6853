"""Timing fused regions: the fused kernels as the graph runs them, and the eager ops they
replaced, run once more on the same tensors (off the record, backend.compile.measure).

A region's nodes carry its name (the `trn_region` tag the fusion pass puts on the Dynamo
node, which AOTAutograd copies onto the ATen nodes of the forward and of the backward). Its
fused time is the device time of those nodes on a graph's first run. At that run the fused
op's own node also re-runs the region as eager would: the region's own Dynamo nodes, lifted
out before they were replaced (FusedRegion.eager), on the op's arguments; in a training graph
it then differentiates them with all-ones output gradients (kernel timing does not depend on
values) to time eager's backward.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from trnsim.backend.compile.measure import detached, total_ns


class CompileWarning(UserWarning):
    """torch.compile(backend="trn") did something the user should know about."""


class RegionTimer:
    """Per graph run: accumulates each region's device time into its RegionStats."""

    def __init__(self, runner: Any, first: bool):
        self.runner = runner
        self.first = first
        self.backward = runner.kind == "backward"
        if first:
            for step in runner.steps:
                stats = self._stats(step.label.region)
                if stats is not None:
                    if self.backward:
                        stats.fused_backward_ns, stats.fused_backward_launches = 0.0, 0
                    else:
                        stats.fused_ns, stats.fused_launches = 0.0, 0

    def _stats(self, region: str | None) -> Any:
        return None if region is None else self.runner.state.regions.get(region)

    def start(self, step: Any) -> tuple[float, int] | None:
        if not self.first or step.label.region is None:
            return None
        rt = self.runner.rt
        return rt.clock_ns, rt.launch_count

    def stop(self, step: Any, mark: tuple[float, int] | None, args: Any, kwargs: Any) -> None:
        if mark is None:
            return
        rt = self.runner.rt
        stats = self._stats(step.label.region)
        if stats is None:
            return
        dt, dn = rt.clock_ns - mark[0], rt.launch_count - mark[1]
        if self.backward:
            stats.fused_backward_ns += dt
            stats.fused_backward_launches += dn
            return
        stats.fused_ns += dt
        stats.fused_launches += dn
        spec = self.runner.state.specs.get(stats.name)
        if self.runner.measure and spec is not None and step.node.target is spec.op.overload:
            self._measure(spec, stats, args, kwargs)

    def _measure(self, spec: Any, stats: Any, args: Any, kwargs: Any) -> None:
        training = self.runner.kind == "forward"
        try:
            fwd, bwd = eager_parts(self.runner.rt, spec, args, kwargs, training)
        except Exception as e:  # a figure of the report, never a failure of the user's step
            stats.note = f"eager parts not timed: {type(e).__name__}: {e}"
            warnings.warn(f"trnsim torch.compile: region {stats.name}: {stats.note}",
                          CompileWarning, stacklevel=2)
            return
        stats.eager_ns, stats.eager_launches = total_ns(fwd), len(fwd)
        if bwd is not None:
            stats.eager_backward_ns, stats.eager_backward_launches = total_ns(bwd), len(bwd)


def eager_parts(rt: Any, spec: Any, args: Any, kwargs: Any, training: bool):
    """(forward records, backward records or None) of the region's eager ops on `args`."""
    with detached(rt) as recs:
        ins = [a.detach().requires_grad_() if i in spec.grad_inputs and training else a
               for i, a in enumerate(args)]
        with torch.enable_grad():
            outs = spec.eager(*ins, **kwargs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        fwd = list(recs)
        if not training:
            return fwd, None
        diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        wrt = [ins[i] for i in spec.grad_inputs]
        if not diff or not wrt:
            return fwd, []
        grads = [torch.ones_like(o) for o in diff]
        mark = len(recs)
        torch.autograd.grad(diff, wrt, grads, allow_unused=True)
        return fwd, list(recs[mark:])
