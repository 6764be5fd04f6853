"""The one simulated device of this process: its chip, its HBM, its clock and its counters.

torch keeps one PrivateUse1 device per process (its registration is process-wide), so this is
the one piece of process-wide state trnsim has; everything hangs off the Runtime object
created by `trnsim.backend.register()`. Ops run synchronously, on the calling thread or on
autograd's device thread, one at a time: a lock guards the allocator and the counters.
"""

from __future__ import annotations

import mmap
import threading
from collections import Counter
from typing import Any

from trnsim.allocation import HBM
from trnsim.device_config import Settings
from trnsim.errors import AllocationError

_RUNTIME: list[Runtime] = []  # set once by register()


class Runtime:
    """The device `trn:0` (or `neuron:0`): one simulated chip whose HBM holds every tensor."""

    def __init__(self, settings: Settings):
        from trnsim.chip import load_chip

        self.settings = settings
        self.name = settings.device
        self.chip = load_chip(settings.chip)
        self.device: Any = None  # torch.device(name, 0), once torch knows the name
        self.host_views: Any = None  # storage.HostViews, once registered
        # First fit: a freed block is reused while its pages are resident (as a caching
        # allocator does); kernels' own HBM scratch uses the same space.
        self.hbm = HBM(self.chip.hbm.capacity_bytes, policy="first")
        self.base = self.hbm.base_address
        # Huge pages: PyTorch's CPU kernels then read and write device tensors as fast as CPU
        # tensors (4 KiB pages cost up to 2x on large tensors through TLB misses).
        if hasattr(mmap, "MADV_HUGEPAGE"):
            self.hbm._map.madvise(mmap.MADV_HUGEPAGE)
        self.mode = settings.mode
        self.fallback = settings.fallback
        self.fallback_counts: Counter[str] = Counter()  # ATen op -> host fallback runs
        self.host_counts: Counter[str] = Counter()  # "op (why)" -> kernel-mode ops run on host
        self.kernel_runs: Counter[str] = Counter()  # ATen overload -> runs on its kernels
        self.warned: set[str] = set()
        self.lock = threading.RLock()
        self.clock_ns = 0.0  # simulated device time of every launch so far
        self.launch_count = 0
        self.sessions: list[Any] = []  # open profile_torch sessions (backend.profiler)
        self.kernel_errors = 0
        self.cli_sink: Any = None  # `trnsim profile`'s launch list, once seen
        self.onchip_pool: dict = {}  # SBUF/PSUM byte arrays lent from launch to launch

    # ------------------------------------------------------------ memory
    @property
    def allocator(self) -> Any:
        return self.hbm.allocator

    def allocate(self, nbytes: int) -> tuple[int, int]:
        """(handle, byte offset) of a fresh HBM block; torch.OutOfMemoryError when full."""
        import torch

        with self.lock:
            try:
                handle, off = self.hbm.allocate(nbytes)
            except AllocationError as e:
                cap = self.hbm.capacity_bytes
                raise torch.OutOfMemoryError(
                    f"{self.name}: out of HBM: tried to allocate {_size(nbytes)} ({nbytes} bytes); "
                    f"{self.chip.name} has {_size(cap)} ({cap} bytes) of HBM, "
                    f"{_size(self.allocator.used_bytes)} allocated ({e})"
                ) from None
            try:  # host RAM for the bytes torch will write (HostMemoryError if it cannot)
                self.hbm.materialize(off, off + nbytes, "a device tensor")
            except BaseException:
                self.hbm.allocator.free(handle)
                raise
            return handle, off

    def free(self, handle: int) -> None:
        with self.lock:
            self.hbm.allocator.free(handle)

    def note_host_run(self, what: str) -> None:
        with self.lock:
            self.host_counts[what] += 1


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} bytes"


def runtime() -> Runtime:
    """The process's device; raises if trnsim.backend has not registered it."""
    if not _RUNTIME:
        raise RuntimeError("the trnsim device is not registered: import trnsim.backend first")
    return _RUNTIME[0]


def set_runtime(rt: Runtime) -> None:
    _RUNTIME[:] = [rt]


def has_runtime() -> bool:
    return bool(_RUNTIME)
