"""trnsim: a cycle-approximate simulator of AWS Trainium NeuronCores that runs NKI kernels."""

from __future__ import annotations

from typing import Any

from trnsim.aliases import install_nki_aliases
from trnsim.errors import (
    AllocationError,
    ConstraintError,
    KernelError,
    OutOfBoundsError,
    SpecError,
    TrnsimError,
    UnsupportedError,
)

__version__ = "0.1.0"


def load_chip(name_or_path: str = "trn3", **overrides: Any) -> Any:
    """A validated, frozen ChipSpec: a built-in name (trn1, trn2, trn3) or a YAML path."""
    from trnsim.chip import load_chip as _load

    return _load(name_or_path, **overrides)


def chips() -> list[str]:
    """Names of the built-in chips."""
    from trnsim.chip import chips as _chips

    return _chips()


def profile(kernel: Any, *args: Any, chip: Any = "trn2", **kwargs: Any) -> Any:
    """Run `kernel(*args, **kwargs)` on the simulated chip and time it: returns a Profile."""
    from trnsim.timing.profile import profile as _profile

    return _profile(kernel, *args, chip=chip, **kwargs)


def profile_ranks(kernel: Any, per_rank_args: Any, **options: Any) -> Any:
    """Run an NKI kernel on every rank of a topology (nki.collectives between them) and time
    it: a RanksProfile with the merged timeline and step metrics (trnsim.multirank)."""
    from trnsim.multirank import profile_ranks as _profile_ranks

    return _profile_ranks(kernel, per_rank_args, **options)


def profile_torch(dma_rows: str = "queue") -> Any:
    """`with trnsim.profile_torch() as p:` around PyTorch code on the trn device: one
    timeline of every kernel it launched (trnsim.backend.profiler.TorchProfile)."""
    from trnsim.backend.profiler import profile_torch as _profile_torch

    return _profile_torch(dma_rows)


__all__ = ["AllocationError", "ConstraintError", "KernelError", "OutOfBoundsError", "SpecError",
           "TrnsimError", "UnsupportedError", "__version__", "chips", "install_nki_aliases",
           "load_chip", "profile", "profile_ranks", "profile_torch"]
