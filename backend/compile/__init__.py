"""torch.compile(model, backend="trn"): the Dynamo backend of the simulated device.

    model = torch.compile(model, backend="trn")      # "neuron" under TRNSIM_DEVICE=neuron
    loss = model(x); loss.backward(); opt.step()     # forward/backward graphs on the chip
    print(trnsim.backend.compile_stats().report())  # graphs, recompiles, fused regions

Layer: trnsim.backend (imports torch). The backend (dynamo.py) fuses known subgraphs into
library kernels (fusion/), lets AOTAutograd trace forward and backward ATen graphs and runs
them node by node on the device (executor.py; an optimizer step's foreach updates back in
place: reinplace.py), recording graphs and fused regions (state.py, regions.py). torch's
Dynamo finds the backend through the entry points `torch_dynamo_backends` (pyproject.toml),
so `backend="trn"` needs no import.
"""

from __future__ import annotations

from trnsim.backend.compile.dynamo import neuron_backend, trn_backend
from trnsim.backend.compile.regions import CompileWarning
from trnsim.backend.compile.state import CompileStats, compile_stats, reset_compile_stats

__all__ = ["CompileStats", "CompileWarning", "compile_stats", "neuron_backend",
           "reset_compile_stats", "trn_backend"]
