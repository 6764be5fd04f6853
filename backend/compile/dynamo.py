"""The Dynamo backend `trn` (and `neuron` under TRNSIM_DEVICE=neuron): torch.compile's graphs
on the simulated chip.

Dynamo hands over a torch-level FX graph; the fusion pass (backend.compile.fusion) replaces
the subgraphs it knows with fused ops; AOTAutograd then traces the forward and backward ATen
graphs (an optimizer step compiled on its own is one inference graph, whose foreach updates
backend.compile.reinplace puts back in place; buffer updates such as batch norm's running
statistics go back in place too: backend.compile.buffers), which run node by node on the device
(backend.compile.executor). Like TorchNeuron's `neuron` backend: static shapes
only (dynamic=True and mark_dynamic are refused; a new shape compiles a new graph, since this
backend turns Dynamo's automatic dynamic shapes off when it loads), mode='default' only
(another mode warns and compiles as default), a few options read (the rest warned about).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch._dynamo
import torch._dynamo.trace_rules
from torch._dynamo.backends.common import aot_autograd
from trnsim.backend.compile.buffers import reinplace_buffers
from trnsim.backend.compile.executor import GraphRunner
from trnsim.backend.compile.regions import CompileWarning
from trnsim.backend.compile.reinplace import reinplace_foreach
from trnsim.backend.compile.source import graph_frame
from trnsim.backend.compile.state import state
from trnsim.backend.runtime import runtime

from trnsim.errors import UnsupportedError

# TorchNeuron compiles static shapes and recompiles per new shape; with automatic dynamic
# shapes on, Dynamo would instead retrace the second shape it sees with symbolic sizes.
torch._dynamo.config.automatic_dynamic_shapes = False

# The device's own Python (op kernels, allocator, simulator) runs where eager ops run, and so
# also in the eager stretches of a compiled function (around a graph break), where Dynamo
# would otherwise trace those frames as user code: slowly, and sometimes into errors of its
# own. Dynamo skips them as it skips torch's. Not skipped: trnsim.backend.models (user-level
# modules Dynamo must inline) and this package (it runs with Dynamo off).
DEVICE_INTERNALS = ("trnsim", "trnsim.kernels", *(f"trnsim.backend.{m}" for m in (
    "autocast", "coverage", "device", "device_module", "dispatch", "host", "launch", "ops",
    "printing", "profiler", "registry", "runtime", "serialization", "storage",
    "torch_neuronx", "user_kernels")))
for _name in DEVICE_INTERNALS:
    torch._dynamo.trace_rules.add(_name)

OPTIONS = {
    "fusion": "replace known subgraphs with fused library kernels (default True)",
    "measure": "time each fused region's eager ops once, for compile_stats() (default True)",
}


def trn_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], mode: str | None = None,
                options: dict[str, Any] | None = None) -> Any:
    """torch.compile(model, backend="trn"): see the module docstring."""
    rt = runtime()
    frame = graph_frame(gm)
    where = f"{frame.function} ({frame.filename}:{frame.lineno})" if frame else "a graph"
    opts = _options(options, where)
    if mode not in (None, "default"):
        warnings.warn(f"torch.compile(backend='{rt.name}'): mode={mode!r} is not supported; "
                      f"compiling {where} with mode='default' (TorchNeuron likewise accepts "
                      f"only the default mode)", CompileWarning, stacklevel=2)
    _refuse_dynamic(gm, example_inputs, where, rt.name)
    st = state(rt)
    cid = torch._guards.CompileContext.current_compile_id()
    graph = st.new_graph(
        compile_id=str(cid) if cid is not None else "?",
        frame=f"{frame.function} ({frame.short()})" if frame else "?",
        recompile=bool(cid is not None and (cid.frame_compile_id or 0) > 0),
        graph_break=bool(frame and frame.function.startswith("torch_dynamo_resume_in_")),
        signature=_signature(gm),
        ops=sum(n.op in ("call_function", "call_method", "call_module") for n in gm.graph.nodes),
    )
    if opts["fusion"]:
        from trnsim.backend.compile.fusion import fuse

        fuse(gm, graph, st, rt)

    def compiler(kind: str):
        def compile_graph(aot_gm: torch.fx.GraphModule, _inputs: list[Any]) -> GraphRunner:
            if kind == "inference":
                reinplace_foreach(aot_gm)
            if kind != "backward":
                reinplace_buffers(aot_gm)
            return GraphRunner(aot_gm, graph, kind, st, rt, opts["measure"])

        return compile_graph

    aot = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                       inference_compiler=compiler("inference"),
                       keep_inference_input_mutations=True)
    return aot(gm, example_inputs)


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Any:
    """torch.compile(model, backend="neuron"): the same backend under TorchNeuron's name, for
    scripts run with TRNSIM_DEVICE=neuron."""
    rt = runtime()
    if rt.name != "neuron":
        raise UnsupportedError(
            f"torch.compile(backend='neuron'): the trnsim device is '{rt.name}' in this "
            f"process; the 'neuron' backend serves TorchNeuron scripts under "
            f"TRNSIM_DEVICE=neuron. Use backend='{rt.name}', or set TRNSIM_DEVICE=neuron")
    return trn_backend(gm, example_inputs, **kwargs)


def _options(options: dict[str, Any] | None, where: str) -> dict[str, Any]:
    opts = {"fusion": True, "measure": True}
    for key, value in (options or {}).items():
        if key in OPTIONS:
            if not isinstance(value, bool):
                raise TypeError(f"torch.compile(backend='trn') compiling {where}: option "
                                f"{key!r} must be True or False, got {value!r}")
            opts[key] = value
        else:
            known = "; ".join(f"{k}: {v}" for k, v in OPTIONS.items())
            warnings.warn(f"torch.compile(backend='trn'): option {key!r} is not read by "
                          f"trnsim (compiling {where}); it reads {known}", CompileWarning,
                          stacklevel=3)
    return opts


def _refuse_dynamic(gm: torch.fx.GraphModule, example_inputs: list[Any], where: str,
                    name: str) -> None:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    found = None
    for i, n in enumerate(placeholders):
        # Dynamo's fake values carry the symbols (the example inputs may be real tensors)
        x = n.meta.get("example_value", example_inputs[i] if i < len(example_inputs) else None)
        if isinstance(x, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in x.shape):
            found = f"{n.name} has shape [{', '.join(str(s) for s in x.shape)}]"
            break
        if found is None and isinstance(x, torch.SymInt | torch.SymFloat):
            found = f"{n.name} is the symbolic size {x}"
    if found is not None:
        raise UnsupportedError(
            f"torch.compile(backend='{name}') compiling {where}: dynamic shapes are not "
            f"supported ({found}). Like TorchNeuron, trnsim compiles static shapes only: "
            f"drop dynamic=True and torch._dynamo.mark_dynamic(); each new shape then "
            f"compiles its own graph (trnsim.backend.compile_stats() counts the recompiles)")


def _signature(gm: torch.fx.GraphModule) -> str:
    """Shapes and dtypes of the graph's inputs other than parameters and buffers."""
    parts = []
    for n in gm.graph.nodes:
        if n.op != "placeholder" or "_parameters_" in n.name or "_buffers_" in n.name:
            continue
        v = n.meta.get("example_value")
        if isinstance(v, torch.Tensor):
            parts.append(f"{n.name}: {list(v.shape)} {str(v.dtype).replace('torch.', '')}")
    return ", ".join(parts)
