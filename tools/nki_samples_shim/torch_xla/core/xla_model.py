"""torch_xla.core.xla_model for tools/run_nki_samples.py: the device is trnsim's `trn`."""

import torch
import trnsim.backend  # noqa: F401  (registers the device)


def xla_device(n: int | None = None) -> torch.device:
    return torch.device("trn", n or 0)


def mark_step() -> None:
    """Eager device: nothing is pending."""
