"""Launching NKI kernels on device tensors: HBM views in, simulated time out.

`launch(kernel, *args, **attrs)` runs one kernel from trnsim.kernels (or a user's) on the
device's own HBM (no copy: device tensors become NkiTensor views of their bytes), times the
launch on the chip model, advances the device's simulated clock and hands the timed launch
to any open `profile_torch` session, labelled with the ATen op and the user's source line.
A trnsim error inside the kernel is re-raised naming the op and its shapes.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

import torch
from trnsim.backend import storage
from trnsim.backend.runtime import Runtime, runtime

from trnsim.errors import OutOfBoundsError, TrnsimError
from trnsim.program import SourceLocation

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_OURS = tuple(os.path.dirname(os.path.abspath(p)) + os.sep for p in (
    __file__, sys.modules["trnsim"].__file__))


class DeviceOpError(TrnsimError, RuntimeError):
    """A device op's kernel refused its inputs (the ATen op and shapes, then the rule)."""


class DeviceIndexError(DeviceOpError, IndexError):
    """An index out of range: an IndexError as the CPU raises for index_select, embedding and
    advanced indexing, and a RuntimeError as it raises for gather and scatter."""


@dataclass
class LaunchRecord:
    """One timed launch: what ran, for which op, from where, and when on the device clock."""

    op: str  # "aten::mm", or a user kernel's name
    kernel: str
    loc: SourceLocation | None
    start_ns: float
    latency_ns: float
    shapes: str = ""
    backward: str = ""  # the autograd node it ran for ("MmBackward0"), if any
    profile: Any = None  # timing Profile, kept while a profile_torch session is open
    extra: dict = field(default_factory=dict)


_LIB_DIRS: tuple[str, ...] = ()


def _lib_dirs() -> tuple[str, ...]:
    global _LIB_DIRS
    if not _LIB_DIRS:
        import trnsim.kernels

        _LIB_DIRS = (*_OURS, os.path.dirname(os.path.abspath(trnsim.kernels.__file__)) + os.sep,
                     _TORCH_DIR)
    return _LIB_DIRS


def user_location() -> SourceLocation | None:
    """The innermost frame outside torch and trnsim: the user's line that made the op."""
    lib = _lib_dirs()
    frame = sys._getframe(1)
    while frame is not None:
        fname = frame.f_code.co_filename
        if not fname.startswith("<") and not os.path.abspath(fname).startswith(lib):
            import linecache

            return SourceLocation(fname, frame.f_lineno, frame.f_code.co_name,
                                  linecache.getline(fname, frame.f_lineno).strip())
        frame = frame.f_back
    return None


def autograd_node() -> str:
    """Name of the autograd node being run (backward ops), or ''."""
    node = torch._C._current_autograd_node()
    return node.name() if node is not None else ""


def describe(args: Any, kwargs: Any) -> str:
    """The tensor arguments as messages show them: "[3, 5] float32, [5] bfloat16"."""
    parts = []
    for a in (*args, *kwargs.values()):
        items = a if isinstance(a, (list, tuple)) else (a,)
        for x in items:
            if isinstance(x, torch.Tensor):
                parts.append(f"{list(x.shape)} {str(x.dtype).replace('torch.', '')}")
    return ", ".join(parts)


def to_nki(rt: Runtime, a: Any, name: str) -> Any:
    if isinstance(a, torch.Tensor) and a.device.type == rt.name:
        return storage.hbm_view(rt, a, name)
    if isinstance(a, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in a):
        return type(a)(to_nki(rt, x, f"{name}_{i}") for i, x in enumerate(a))
    return a


def launch(kernel: Any, *args: Any, aten_op: str = "", names: tuple[str, ...] = (),
           lnc: int = 1, **attrs: Any) -> LaunchRecord:
    """Run `kernel(*args, **attrs)` on the device: tensors by reference into HBM.

    `aten_op` labels the launch ("aten::mm"); `names` name the tensor arguments in messages and
    on the timeline (default arg0, arg1, ...); `lnc` launches `kernel[lnc]` on that many
    physical cores (only for kernels that share their work over nl.program_id)."""
    from trnsim.nki.runner import run_kernel

    rt = runtime()
    fn = getattr(kernel, "fn", kernel)
    kname = getattr(fn, "__name__", str(fn))
    nargs = [to_nki(rt, a, names[i] if i < len(names) else f"arg{i}")
             for i, a in enumerate(args)]
    nattrs = {k: to_nki(rt, v, k) for k, v in attrs.items()}
    try:
        run = run_kernel(fn, nargs, nattrs, chip=rt.chip, hbm=rt.hbm, host_outputs=False,
                         onchip_pool=rt.onchip_pool, lnc=lnc)
    except TrnsimError as e:
        rt.kernel_errors += 1
        raise op_error(rt, aten_op or kname, kname, describe(args, attrs), e) from None
    return record(rt, run, aten_op or kname, kname, describe(args, attrs))


def op_error(rt: Runtime, op: str, kname: str, shapes: str, e: Exception) -> DeviceOpError:
    """The error of a device op whose kernel refused its inputs: op, shapes, the user's line,
    then the kernel's rule (with the kernel line only for a user's own kernel)."""
    loc = user_location()
    where = f" (called at {loc.filename}:{loc.lineno})" if loc is not None else ""
    text = getattr(e, "message", None) or str(e)
    kloc = getattr(e, "loc", None)
    if kloc is not None and not os.path.abspath(kloc.filename).startswith(_lib_dirs()):
        text = f"{kloc.describe()}\n{text}"
    cls = DeviceIndexError if isinstance(e, OutOfBoundsError) else DeviceOpError
    return cls(f"{op} on {rt.name} with {shapes or 'no tensors'}: kernel {kname} "
               f"refused the inputs{where}: {type(e).__name__}: {text}")


def record(rt: Runtime, run: Any, op: str, kname: str, shapes: str) -> LaunchRecord:
    """Time a finished launch, advance the clock, give it to open profiling sessions."""
    from trnsim.nki.runner import _RECORDER
    from trnsim.timing.profile import time_run

    prof = time_run(run)  # (on rt.chip; a user kernel's compile_config: user_kernels.py)
    prof.kernel_name = kname
    with rt.lock:
        rec = LaunchRecord(op, kname, None, rt.clock_ns, prof.latency_ns, shapes)
        rt.clock_ns += prof.latency_ns
        rt.launch_count += 1
        sessions = list(rt.sessions)
    # `trnsim profile script.py` records launches in a sink it sets in the script's thread;
    # run_kernel has put this launch there already unless it ran on autograd's thread.
    sink = _RECORDER.get()
    if sink is not None:
        rt.cli_sink = sink
    cli = rt.cli_sink
    if sessions or cli is not None:
        node = rt.graph_node  # a torch.compile graph node: its label and the user's line
        rec.loc = node.loc if node is not None and node.loc is not None else user_location()
        if node is not None:
            rec.extra["graph_node"] = node.label
        rec.backward = autograd_node()
        rec.profile = prof
        for s in sessions:
            s.add(rec)
        if cli is not None:
            run.kernel_name = label(rec)
            if sink is None:
                cli.append(run)
    return rec


def label(rec: LaunchRecord) -> str:
    """How timelines name a launch: op, compiled-graph node, autograd node, user's line."""
    where = f" {rec.loc.short()}" if rec.loc is not None else ""
    back = f" [{rec.backward}]" if rec.backward else ""
    node = f" <{rec.extra['graph_node']}>" if rec.extra.get("graph_node") else ""
    return f"{rec.op}{node}{back}{where}"
