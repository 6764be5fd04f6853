"""`torch.trn` (`torch.neuron` in alias mode): the device module torch and users call.

Execution is synchronous (each op has run, values and simulated time, when it returns), so
streams are no-ops and events carry simulated device time: `Event.elapsed_time` is the
device clock between two records, in milliseconds, as CUDA's is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from trnsim.backend.runtime import Runtime, runtime


def _check_index(device: Any) -> None:
    if device is None:
        return
    rt = runtime()
    if isinstance(device, int):
        index = device
    else:
        d = torch.device(device) if not isinstance(device, torch.device) else device
        if d.type != rt.name:
            raise ValueError(f"expected a {rt.name} device, got {d}")
        index = d.index
    from trnsim.backend.distributed.devices import accept

    if not accept(rt, index):
        raise ValueError(device_index_error(rt, index))


def device_index_error(rt: Runtime, index: int) -> str:
    return (f"{rt.name}:{index}: this process simulates one NeuronCore, {rt.name}:0 "
            f"(device_count() is 1); run one process per NeuronCore (torchrun "
            f"--nproc-per-node N) and use {rt.name}:0 in each (in a distributed run "
            f"{rt.name}:<local rank> also names it)")


class Stream:
    """A no-op stream (execution is synchronous)."""

    def __init__(self, device: Any = None, priority: int = 0, **_: Any):
        self.device = runtime().device
        self.priority = priority

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream)

    def __hash__(self) -> int:
        return 0


class Event:
    """Records the simulated device clock; elapsed_time in ms as CUDA events give it."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        self.enable_timing = enable_timing
        self.ns: float | None = None

    def record(self, stream: Any = None) -> None:
        self.ns = runtime().clock_ns

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end_event: Event) -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with enable_timing=True "
                               "to compute elapsed time")
        if self.ns is None or end_event.ns is None:
            raise RuntimeError("Both events must be recorded before computing elapsed time")
        return (end_event.ns - self.ns) / 1e6


_DEFAULT_STREAM: list[Stream] = []


class DeviceModule:
    """What torch.<device> holds; an instance is registered with torch._register_device_module."""

    Stream = Stream
    Event = Event

    def __init__(self, rt: Runtime):
        self._rt = rt

    # -- what torch.compile's default backend, inductor, looks up for a PrivateUse1 device
    # (its init_backend_registration reads these names off the device module)
    @property
    def Scheduling(self) -> Any:
        from trnsim.backend.compile.inductor_refusal import refusal

        return refusal(self._rt.name)

    PythonWrapperCodegen = CppWrapperCodegen = WrapperFxCodegen = Scheduling

    # -- what torch itself calls
    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    @staticmethod
    def _lazy_init() -> None:
        pass

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def set_device(device: Any) -> None:
        _check_index(device)

    @contextlib.contextmanager
    def device(self, device: Any) -> Iterator[None]:
        """torch.load(map_location=...) and user code enter this."""
        _check_index(device)
        yield

    @staticmethod
    def synchronize(device: Any = None) -> None:
        _check_index(device)

    @staticmethod
    def get_amp_supported_dtype() -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16]

    @staticmethod
    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return True

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        rt = runtime()
        return f"trnsim {rt.chip.name} NeuronCore (simulated)"

    @staticmethod
    def get_device_properties(device: Any = None) -> Any:
        from types import SimpleNamespace

        rt = runtime()
        return SimpleNamespace(name=DeviceModule.get_device_name(), chip=rt.chip.name,
                               total_memory=rt.hbm.capacity_bytes,
                               cores_per_chip=rt.chip.cores_per_chip)

    # -- random numbers: drawn from torch's CPU generator (so torch.manual_seed rules them)
    # (torch.manual_seed calls manual_seed_all: seeding the CPU generator directly keeps
    # that from recursing, and is all the device's randomness depends on)
    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.default_generator.manual_seed(int(seed))

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        torch.default_generator.manual_seed(int(seed))

    @staticmethod
    def seed() -> None:
        torch.default_generator.seed()

    @staticmethod
    def seed_all() -> None:
        torch.default_generator.seed()

    @staticmethod
    def initial_seed() -> int:
        return torch.initial_seed()

    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    get_rng_state_all = staticmethod(lambda: [torch.get_rng_state()])
    set_rng_state_all = staticmethod(lambda states: torch.set_rng_state(states[0]))

    # -- streams (no-ops: execution is synchronous)
    @staticmethod
    def current_stream(device: Any = None) -> Stream:
        if not _DEFAULT_STREAM:
            _DEFAULT_STREAM.append(Stream())
        return _DEFAULT_STREAM[0]

    default_stream = current_stream

    @staticmethod
    @contextlib.contextmanager
    def stream(stream: Any) -> Iterator[None]:
        yield

    @staticmethod
    def set_stream(stream: Any) -> None:
        pass

    # -- memory (of the simulated HBM)
    def memory_allocated(self, device: Any = None) -> int:
        """Bytes of the live device tensors."""
        _check_index(device)
        return self._rt.live_bytes

    def max_memory_allocated(self, device: Any = None) -> int:
        _check_index(device)
        return self._rt.peak_live_bytes

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        _check_index(device)
        rt = self._rt
        rt.peak_live_bytes = rt.live_bytes
        rt.allocator.peak_bytes = rt.allocator.used_bytes

    def reset_max_memory_allocated(self, device: Any = None) -> None:
        self.reset_peak_memory_stats(device)

    def memory_reserved(self, device: Any = None) -> int:
        """Bytes held from HBM: live tensors and the cached free blocks (empty_cache)."""
        _check_index(device)
        return self._rt.reserved_bytes

    def max_memory_reserved(self, device: Any = None) -> int:
        _check_index(device)
        return self._rt.allocator.peak_bytes

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        """(free, total) bytes of the chip's HBM, as torch.cuda.mem_get_info (reserved
        bytes are not free)."""
        _check_index(device)
        total = self._rt.hbm.capacity_bytes
        return total - self._rt.reserved_bytes, total

    def memory_stats(self, device: Any = None) -> dict[str, int]:
        _check_index(device)
        rt = self._rt
        return {"allocated_bytes.all.current": rt.live_bytes,
                "allocated_bytes.all.peak": rt.peak_live_bytes,
                "reserved_bytes.all.current": rt.reserved_bytes,
                "reserved_bytes.all.peak": rt.allocator.peak_bytes}

    def memory_summary(self, device: Any = None, abbreviated: bool = False) -> str:
        _check_index(device)
        rt, a = self._rt, self._rt.allocator
        gib = 1 << 30
        lines = [
            f"trnsim {rt.name}:0 memory summary ({rt.chip.name}, simulated HBM)",
            f"  allocated      {rt.live_bytes / gib:12.4f} GiB ({rt.live_bytes} bytes)",
            f"  peak allocated {rt.peak_live_bytes / gib:12.4f} GiB ({rt.peak_live_bytes} bytes)",
            f"  reserved       {rt.reserved_bytes / gib:12.4f} GiB ({rt.reserved_bytes} bytes, "
            f"{rt.cached_bytes} in cached free blocks)",
            f"  capacity       {rt.hbm.capacity_bytes / gib:12.4f} GiB",
            f"  largest free   {a.largest_free() / gib:12.4f} GiB",
        ]
        return "\n".join(lines)

    def empty_cache(self) -> None:
        """Return cached free blocks to the HBM allocator."""
        self._rt.empty_cache()

    # -- trnsim's own
    def fallback_ops(self) -> dict[str, int]:
        """ATen ops run through the host fallback (TRNSIM_FALLBACK=cpu), with counts."""
        return dict(self._rt.fallback_counts)

    def host_ops(self) -> dict[str, int]:
        """Kernel-mode ops that ran on the host for their dtypes ("op (why)"), with counts."""
        return dict(self._rt.host_counts)

    def simulated_time_ns(self) -> float:
        """The device clock: simulated time of every kernel launched so far."""
        return self._rt.clock_ns

    def set_mode(self, mode: str) -> None:
        """'kernel' (ops run as NKI kernels, timed) or 'reference' (CPU kernels, no timing)."""
        from trnsim.device_config import MODES

        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: use one of {', '.join(MODES)}")
        self._rt.mode = mode

    def get_mode(self) -> str:
        return self._rt.mode

    @property
    def chip(self) -> Any:
        return self._rt.chip
