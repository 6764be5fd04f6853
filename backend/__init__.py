"""PyTorch device backend: a `trn` device (`neuron` with TRNSIM_DEVICE=neuron) whose tensors
live in the simulated chip's HBM and whose ATen ops run as NKI kernels on the simulated
NeuronCore. Importing this package registers the device (trnsim.backend.device.register)."""

from __future__ import annotations

from trnsim.backend.device import register

runtime = register()

__all__ = ["register", "runtime"]
