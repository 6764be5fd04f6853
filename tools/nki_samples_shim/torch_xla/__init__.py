"""A stand-in for torch-xla, for tools/run_nki_samples.py only (not installed with trnsim):
AWS's nki-samples tutorials ask torch-xla for its device; here that is trnsim's `trn` device,
so their NKI kernels run on device tensors. Nothing of XLA is simulated (no lazy tensors)."""

import torch
import trnsim.backend  # noqa: F401  (registers the device)


def device(index: int = 0) -> torch.device:
    return torch.device("trn", index)
