"""`torch_neuronx.nki_hop` as trnsim serves it (wrap_nki)."""

from trnsim.backend.user_kernels import nki_op, wrap_nki

__all__ = ["nki_op", "wrap_nki"]
