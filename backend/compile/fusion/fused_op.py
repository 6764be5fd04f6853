"""Fused ops: torch custom ops (namespace `trnsim_fused`) that run a matched region as
library kernels.

Each is one node in AOTAutograd's forward graph (and its backward, registered with
`register_autograd`, is a fused backward op or a few nodes of eager's backward ops), so the
region runs as its fused launches. In reference mode, for inputs the kernels do not serve
(float64, a CPU tensor) or when a kernel raises HostOnly, the op computes the same results
with torch ops instead (`run_fused`'s fallback), so results never depend on whether fusion
applied. `unfused` is the region as torch ops on the op's arguments (the stand-in for timing
a region's eager parts when its own nodes cannot be lifted out).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from trnsim.backend.registry import HostOnly
from trnsim.backend.runtime import runtime

LIB = "trnsim_fused"
FLOATS = (torch.float32, torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class FusedOp:
    """A fused op: its overload, the region's eager ops, how many results are outputs."""

    name: str
    overload: Any  # torch.ops.trnsim_fused.<name>.default
    unfused: Callable[..., Any]  # the eager ops on the op's arguments -> the region's outputs
    outputs: int  # leading results the region provides; the rest are saved for the backward
    parts: str  # what the region replaces, for the report

    def call(self, *args: Any) -> Any:
        """The region's outputs (what the rewritten Dynamo graph calls)."""
        res = self.overload(*args)
        return res[: self.outputs] if isinstance(res, tuple) else (res,)


def define(name: str, fn: Callable[..., Any], *, fake: Callable[..., Any],
           unfused: Callable[..., Any], outputs: int, parts: str,
           backward: Callable[..., Any] | None = None,
           setup: Callable[..., Any] | None = None) -> FusedOp:
    """Register trnsim_fused::<name> (typed `fn` as its implementation on every device)."""
    op = torch.library.custom_op(f"{LIB}::{name}", fn, mutates_args=())
    op.register_fake(fake)
    if backward is not None:
        op.register_autograd(backward, setup_context=setup)
    return FusedOp(name, getattr(getattr(torch.ops, LIB), name).default, unfused, outputs, parts)


def run_fused(name: str, kernel_path: Callable[[], Any], fallback: Callable[[], Any],
              *tensors: torch.Tensor | None) -> Any:
    """The body of a fused op: its kernels in kernel mode on device tensors of an engine
    dtype, else (or when the kernel path raises HostOnly) the eager composite."""
    rt = runtime()
    qualified = f"{LIB}::{name}"
    ts = [t for t in tensors if t is not None]
    if rt.mode == "kernel" and all(t.device.type == rt.name for t in ts):
        if all(t.dtype in FLOATS for t in ts if t.is_floating_point()):
            try:
                result = kernel_path()
                with rt.lock:
                    rt.kernel_runs[qualified] += 1
                return result
            except HostOnly as why:
                rt.note_host_run(f"{qualified} ({why.reason}): ran unfused")
        else:
            rt.note_host_run(f"{qualified} (a dtype no engine serves): ran unfused")
    return fallback()
