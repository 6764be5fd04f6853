"""The one simulated device of this process: its chip, its HBM, its clock and its counters.

torch keeps one PrivateUse1 device per process (its registration is process-wide), so this is
the one piece of process-wide state trnsim has; everything hangs off the Runtime object
created by `trnsim.backend.register()`. Ops run synchronously, on the calling thread or on
autograd's device thread, one at a time: a lock guards the allocator and the counters.
"""

from __future__ import annotations

import mmap
import threading
import weakref
from collections import Counter
from typing import Any

from trnsim.allocation import HBM
from trnsim.device_config import Settings
from trnsim.errors import AllocationError

_RUNTIME: list[Runtime] = []  # set once by register()
CACHE_GRAIN = 512  # bytes: size classes of cached blocks (as torch's CUDA allocator rounds)
CACHE_BLOCK = 1 << 20  # blocks up to this size are cached when freed
CACHE_LIMIT = 256 << 20  # at most this many bytes of cached free blocks


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
        self.end = self.base + self.hbm.capacity_bytes  # host addresses [base, end) are HBM
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
        self._live: dict[int, tuple[int, int, int]] = {}  # handle -> (bytes, class or 0, offset)
        self._cache: dict[int, list[tuple[int, int]]] = {}  # size class -> free blocks
        self._refs: dict[int, Any] = {}  # handle -> weak reference to its torch storage
        self.cached_bytes = 0
        self.live_bytes = 0  # device tensors' bytes (memory_allocated)
        self.peak_live_bytes = 0
        self.graph_node: Any = None  # the compiled-graph node running (backend.compile)
        self.compiled: Any = None  # torch.compile(backend="trn") state (backend.compile)
        self.distributed: Any = None  # backend.distributed.state.DistState, once distributed

    @property
    def lnc(self) -> int:
        """Physical cores per launch of the kernels that share their work (ops/_common.py
        MULTI_CORE): a rank of a torch.distributed world owns a logical NeuronCore at its LNC
        (TRNSIM_LNC, default the chip's); a process outside one keeps one physical core."""
        return self.distributed.lnc if self.distributed is not None else 1

    # ------------------------------------------------------------ memory
    @property
    def allocator(self) -> Any:
        return self.hbm.allocator

    def allocate(self, nbytes: int) -> tuple[int, int]:
        """(handle, byte offset) of a fresh HBM block; torch.OutOfMemoryError when full.

        Blocks up to CACHE_BLOCK bytes come in CACHE_GRAIN size classes and a freed one is
        kept for the next request of its class (as torch's CUDA caching allocator keeps
        freed blocks): a small op's result then costs a list pop, not a first-fit search.
        `memory_allocated` counts live tensors' bytes; cached blocks count as reserved."""
        import torch

        with self.lock:
            cls = -(-nbytes // CACHE_GRAIN) * CACHE_GRAIN if nbytes <= CACHE_BLOCK else 0
            free = self._cache.get(cls) if cls else None
            if free:
                handle, off = free.pop()
                self.cached_bytes -= cls
            else:
                handle, off = self._fresh_block(cls or nbytes, torch)
            self._live[handle] = (nbytes, cls, off)
            self.live_bytes += nbytes
            if self.live_bytes > self.peak_live_bytes:
                self.peak_live_bytes = self.live_bytes
            return handle, off

    def _fresh_block(self, nbytes: int, torch: Any) -> tuple[int, int]:
        try:
            handle, off = self.hbm.allocate(nbytes)
        except AllocationError:
            if not self.cached_bytes:
                raise self._oom(nbytes, torch) from None
            self.empty_cache()
            try:
                handle, off = self.hbm.allocate(nbytes)
            except AllocationError:
                raise self._oom(nbytes, torch) from None
        try:  # host RAM for the bytes torch will write (HostMemoryError if it cannot)
            self.hbm.materialize(off, off + nbytes, "a device tensor")
        except BaseException:
            self.hbm.allocator.free(handle)
            raise
        return handle, off

    def _oom(self, nbytes: int, torch: Any) -> Exception:
        cap = self.hbm.capacity_bytes
        return torch.OutOfMemoryError(
            f"{self.name}: out of HBM: tried to allocate {_size(nbytes)} ({nbytes} bytes); "
            f"{self.chip.name} has {_size(cap)} ({cap} bytes) of HBM, "
            f"{_size(self.live_bytes)} allocated, {_size(self.allocator.largest_free())} "
            f"largest free block")

    def free(self, handle: int) -> None:
        with self.lock:
            entry = self._live.pop(handle, None)
            self._refs.pop(handle, None)
            if entry is None:
                return
            nbytes, cls, off = entry
            self.live_bytes -= nbytes
            if cls and self.cached_bytes + cls <= CACHE_LIMIT:
                self._cache.setdefault(cls, []).append((handle, off))
                self.cached_bytes += cls
            else:
                self.hbm.allocator.free(handle)

    def adopt(self, handle: int, storage: Any) -> None:
        """Count a block a kernel allocated from HBM (its output) as a device tensor's, freed
        when `storage` dies."""
        with self.lock:
            off, end = self.hbm.allocator.block(handle)
            self._live[handle] = (end - off, 0, off)
            self.live_bytes += end - off
            self.peak_live_bytes = max(self.peak_live_bytes, self.live_bytes)
        self.watch(handle, storage)

    def watch(self, handle: int, storage: Any) -> None:
        """Free the block `handle` when `storage` (its torch storage) dies: a weak reference
        held with the block (what weakref.finalize does, without its registry)."""
        self._refs[handle] = weakref.ref(storage, lambda _r, h=handle: self.free(h))

    def empty_cache(self) -> None:
        """Give the cached free blocks back to the HBM allocator (torch.trn.empty_cache)."""
        with self.lock:
            for blocks in self._cache.values():
                for handle, _ in blocks:
                    self.hbm.allocator.free(handle)
            self._cache.clear()
            self.cached_bytes = 0

    @property
    def reserved_bytes(self) -> int:
        """Bytes held from the HBM allocator: live tensors, cached blocks, kernels' scratch."""
        return self.hbm.allocator.used_bytes

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
