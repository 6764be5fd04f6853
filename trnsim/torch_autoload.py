"""torch's device-backend autoload entry point (group `torch.backends`): `import torch` registers
the trn device. A bad TRNSIM_* setting, or any failure to register, must not break `import
torch` for every script in the environment: it is reported as one warning and the device
stays unregistered (an explicit `import trnsim.backend` raises it).
TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns autoloading off."""

from __future__ import annotations

import warnings


def autoload() -> None:
    from trnsim.device_config import ConfigError, from_environment

    try:
        from_environment()
    except ConfigError as e:
        warnings.warn(f"trnsim: the {e} ; the device is not registered", RuntimeWarning,
                      stacklevel=2)
        return
    try:
        import trnsim.backend  # noqa: F401  (registers the device)
    except Exception as e:  # any failure: torch itself must still import
        warnings.warn(f"trnsim: the trn device could not be registered ({type(e).__name__}: "
                      f"{e}); `import trnsim.backend` shows the full error", RuntimeWarning,
                      stacklevel=2)
