"""Printing device tensors: the contents are formatted from a host copy.

torch's printer would run about ten ops on the tensor (slices, abs, max, ...); each would be a
device op (a kernel launch in kernel mode). Instead the values are formatted from the bytes on
the host and handed to torch's printer as `tensor_contents`, so the text is exactly what the
same tensor prints on the CPU, with `device='trn:0'`.
"""

from __future__ import annotations

from typing import Any

import torch
import torch._tensor_str as tensor_str
from trnsim.backend.runtime import Runtime


def _has_no_data(t: torch.Tensor) -> bool:
    """Fake and functional tensors (torch.compile's tracing, aot_autograd's structured logs
    print them) have no bytes: torch's own printer shows their metadata."""
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(t) or torch._is_functional_tensor(t)


def install(rt: Runtime) -> None:
    original = tensor_str._str
    if getattr(original, "_trnsim", False):
        return

    def _str(self: Any, *, tensor_contents: Any = None) -> str:
        if tensor_contents is None and isinstance(self, torch.Tensor) and \
                self.device.type == rt.name and not self.is_sparse and not _has_no_data(self):
            with torch.no_grad():
                host = rt.host_views.of(self.detach()).clone()
            prefix = "tensor(" if type(self) in (torch.Tensor, torch.nn.Parameter) else \
                f"{type(self).__name__}("
            tensor_contents = tensor_str._tensor_str(host, len(prefix))
        return original(self, tensor_contents=tensor_contents)

    _str._trnsim = True
    tensor_str._str = _str
