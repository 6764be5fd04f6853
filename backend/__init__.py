"""PyTorch device backend: a `trn` device (`neuron` with TRNSIM_DEVICE=neuron) whose tensors
live in the simulated chip's HBM and whose ATen ops run as NKI kernels on the simulated
NeuronCore. Importing this package registers the device (trnsim.backend.device.register)."""

from __future__ import annotations

from trnsim.backend.device import register

runtime = register()


def compile_stats():  # -> trnsim.backend.compile.CompileStats (imported lazily: Dynamo is big)
    """What torch.compile(backend="trn") compiled and ran (trnsim.backend.compile)."""
    from trnsim.backend.compile import compile_stats as stats

    return stats()


__all__ = ["compile_stats", "register", "runtime"]
