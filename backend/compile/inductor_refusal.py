"""torch.compile's default backend, inductor, on device tensors: it generates no code for this
device, and without this it fails inside its own code generation (a KeyError on the device
name, or an assertion). Inductor asks the device module for a scheduling and wrapper code
generators when it first compiles (torch/_inductor/codegen/common.py,
init_backend_registration); the ones given here refuse at their first use, on a graph with
device tensors, naming the backend that does compile for the device. Graphs of CPU tensors
never use them."""

from __future__ import annotations

from typing import Any

from trnsim.errors import UsageError


class InductorRefusal:
    """Inductor's scheduling constructor and wrapper code generator class for the device."""

    def __init__(self, device: str):
        self.device = device

    def _refuse(self) -> Any:
        raise UsageError(
            f"torch.compile's default backend, inductor, generates no code for the "
            f"'{self.device}' device: compile with trnsim's TorchNeuron-style backend, "
            f"torch.compile(model, backend=\"{self.device}\") (README, torch.compile)")

    def __call__(self, *_: Any, **__: Any) -> Any:
        return self._refuse()

    def __getattr__(self, name: str) -> Any:  # create, supports_caching, ...: any use refuses
        if name.startswith("__"):
            raise AttributeError(name)
        return self._refuse()


def refusal(device: str) -> InductorRefusal:
    """The refusal, and the device op overrides inductor's wrapper looks up before it."""
    from torch._inductor.codegen.common import DeviceOpOverrides, register_device_op_overrides

    register_device_op_overrides(device, DeviceOpOverrides())
    return InductorRefusal(device)
