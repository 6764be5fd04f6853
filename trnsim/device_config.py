"""The PyTorch device's settings (trnsim.backend), read from the environment once at
registration. Pure data: importing this registers nothing.

TRNSIM_DEVICE    trn (default) | neuron: the device name torch sees (neuron: TorchNeuron's,
                 so its scripts run unchanged; one PrivateUse1 device exists per process)
TRNSIM_CHIP      trn1 | trn2 | trn3 (default) | a what-if chip YAML: the simulated chip
TRNSIM_MODE      kernel (default: ops run as NKI kernels on the simulated NeuronCore, values
                 and timing) | reference (PyTorch's CPU kernels on the same HBM bytes; no
                 timing; for speed)
TRNSIM_FALLBACK  unset (an op with no implementation raises) | cpu (it runs on host aliases
                 of the same bytes, with a warning once per op; torch.trn.fallback_ops()
                 counts them)
TRNSIM_GC_FREEZE 1 (default) | 0: at registration, collect garbage and move the objects alive
                 then (torch's and trnsim's modules) out of the cyclic collector's reach
                 (gc.freeze): the collections a stream of small ops triggers then scan only
                 newer objects (about 15 us an op otherwise)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

DEVICE_NAMES = ("trn", "neuron")
MODES = ("kernel", "reference")
FALLBACKS = ("", "cpu")


class ConfigError(ValueError):
    """A TRNSIM_* environment variable holds a value that is not allowed."""


@dataclass(frozen=True)
class Settings:
    device: str = "trn"
    chip: str = "trn3"
    mode: str = "kernel"
    fallback: str = ""
    gc_freeze: bool = True


def _choice(var: str, default: str, allowed: tuple[str, ...]) -> str:
    value = os.environ.get(var, "").strip().lower() or default
    if value not in allowed:
        shown = ", ".join(a or "unset" for a in allowed)
        raise ConfigError(f"{var}={os.environ.get(var)!r} is not allowed; use one of: {shown}")
    return value


def from_environment() -> Settings:
    """Settings from TRNSIM_DEVICE, TRNSIM_CHIP, TRNSIM_MODE and TRNSIM_FALLBACK."""
    return Settings(
        device=_choice("TRNSIM_DEVICE", "trn", DEVICE_NAMES),
        chip=os.environ.get("TRNSIM_CHIP", "").strip() or "trn3",
        mode=_choice("TRNSIM_MODE", "kernel", MODES),
        fallback=_choice("TRNSIM_FALLBACK", "", FALLBACKS),
        gc_freeze=_choice("TRNSIM_GC_FREEZE", "1", ("1", "0")) == "1",
    )
