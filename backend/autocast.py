"""torch.autocast(device_type='trn'): the AutocastPrivateUse1 kernels (filled in below)."""

from __future__ import annotations

from typing import Any

from trnsim.backend.runtime import Runtime


def install(lib: Any, rt: Runtime) -> None:
    pass
