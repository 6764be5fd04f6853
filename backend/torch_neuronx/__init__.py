"""`torch_neuronx` as trnsim serves it: TorchNeuron's NKI entry points on the simulated device.

Installed as the module `torch_neuronx` when no real torch-neuronx is importable (as `nki` is
for the NKI API): `nki_op`, `wrap_nki` (also from `torch_neuronx.nki_hop`), `synchronize`.
The device itself is `neuron` under TRNSIM_DEVICE=neuron (else `trn`); TorchNeuron's other
modules (tracing, XLA, parallel layers) are not simulated.
"""

from __future__ import annotations

from typing import Any

from trnsim.backend.user_kernels import nki_op, wrap_nki

__version__ = "2.13.0+trnsim"


def synchronize(device: Any = None) -> None:
    """Wait for the device (a no-op: the simulated device is synchronous)."""


def is_available() -> bool:
    return True


__all__ = ["is_available", "nki_op", "synchronize", "wrap_nki"]
