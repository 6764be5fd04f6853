"""Device and NeuronCore: the composition root. An instruction is checked, executed, recorded.

Values are computed eagerly in program order; timing is computed later from the record.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim import semantics as sem
from trnsim.allocation import HBM, OnChipMemory, TileRecord
from trnsim.errors import AllocationError, ConstraintError, KernelError, UnsupportedError
from trnsim.hostmem import PendingFills
from trnsim.memory import (
    ON_CHIP,
    Buffer,
    Layout,
    View,
    check_bounds,
    interned,
    poison_value,
    row_major,
)
from trnsim.operands import operand_record
from trnsim.program import Instruction, SourceLocation, capture_location
from trnsim.semantics import _tensor_rules as rules
from trnsim.semantics.psum_writers import PsumWriters
from trnsim.spec import check_instruction, check_key, instruction_specs, is_tensor

# How values are computed: "exact" is machine-independent (nc_matmul: float64 products and
# K-sum, rounded to fp32 once); "fast" multiplies in fp32 BLAS (deterministic on one machine,
# may differ in the last bits from "exact" and across BLAS builds).
NUMERICS = ("exact", "fast")
PSUM_ALIGN = 2048  # auto-allocated PSUM tiles start on a bank (nki-api.md §3.3)
SBUF_ALIGN = 64


@functools.cache
def _poison_bits(dtype: dt.DType) -> np.ndarray:
    """The poison value of `dtype` as its storage bits (0 for packed types)."""
    isz = dtype.storage.itemsize
    if dtype.kind == "packed":
        bits = np.zeros((), np.dtype(f"u{isz}"))
    else:
        bits = dt.cast(np.asarray(poison_value(dtype)), dtype).view(np.dtype(f"u{isz}"))
    bits.flags.writeable = False  # shared by every allocation
    return bits


def fill_poison(view: View) -> None:
    """Fill a fresh tensor with the poison value, written as bits with ndarray.fill (assigning
    a bfloat16 value element by element, or even a broadcast uint16, is several times slower)."""
    arr = view.array()
    bits = _poison_bits(view.dtype)
    arr.view(bits.dtype).fill(bits)


def _data_of(memory: Callable[[], Any]) -> Callable[[], np.ndarray]:
    """The bytes of a weakly held memory, made on first use (PendingFills' data)."""
    return lambda: memory().data


class NeuronCore:
    """One physical NeuronCore: SBUF, PSUM, engine registers, and its instruction stream."""

    def __init__(self, device: Device, index: int):
        chip = device.chip
        # Weakly: the Device holds its cores, and a cycle would keep a finished launch's HBM
        # (its mapping and host RAM) alive until a full garbage collection.
        self._device = weakref.ref(device)
        self.chip = chip
        self.index = index
        self.sbuf = OnChipMemory("sbuf", chip.sbuf.partitions, chip.sbuf.bytes_per_partition,
                                 SBUF_ALIGN, chip.sbuf.usable_bytes_per_partition)
        self.psum = OnChipMemory("psum", chip.psum.partitions, chip.psum.bytes_per_partition,
                                 PSUM_ALIGN)
        pool = device.onchip_pool
        if pool is not None:  # a long-lived device: the bytes of earlier launches' cores
            for mem in (self.sbuf, self.psum):
                key = (index, mem.space, mem.partitions, mem.bytes_per_partition)
                if key in pool:
                    mem.__dict__["data"] = pool[key]
                else:
                    pool[key] = mem.data
        # The launch these memories belong to: a tile kept by Python past its launch is refused
        # in a later one (NeuronCore.issue).
        self.sbuf.owner = self.psum.owner = device
        if pool is None:  # fresh memories, seen by this launch only: poison fills can wait
            for mem in (self.sbuf, self.psum):
                mem.fills = PendingFills(_data_of(weakref.ref(mem)))
        parts = chip.sbuf.partitions
        # Per-lane fp32 accumulator registers of ScalarE and VectorE (nki-api.md §8.3).
        self.accumulators = {"scalar": np.zeros(parts, np.float32),
                             "vector": np.zeros(parts, np.float32)}
        # Per PSUM fp32 word, the psum_tag of the tensor that last wrote it (0: nothing since
        # the allocation covering it): nc_matmul(accumulate=None) adds where it is the dst's.
        self.psum_writer = PsumWriters(chip.psum.partitions, chip.psum.bytes_per_partition // 4)
        self._psum_tags = 0
        self.registers: dict[int, int] = {}
        self.rng = np.random.default_rng(device.seed + index)
        self.state: dict[str, Any] = {}  # per-instruction-family state (e.g. PRNG states)
        # spec.check_key of a combination whose checks passed -> its Site (issue)
        self._sites: dict[tuple, Site] = {}
        # Live on-chip tiles by allocation handle, to name them when memory is full.
        self._live: dict[str, dict[int, weakref.ref]] = {"sbuf": {}, "psum": {}}
        self._live_limit = 1024

    @property
    def device(self) -> Device:
        dev = self._device()
        if dev is None:
            raise ReferenceError(f"NeuronCore {self.index}: its Device is gone (a core holds its "
                                 "Device weakly: keep a reference to the Device while you use "
                                 "its cores)")
        return dev

    @property
    def values(self) -> bool:
        return self.device.values

    @property
    def numerics(self) -> str:
        return self.device.numerics

    # ------------------------------------------------------------ allocation
    def allocate(self, space: str, shape: tuple[int, ...], dtype: dt.DType, name: str = "",
                 address: tuple[int, int] | None = None, poison: bool = True,
                 loc: SourceLocation | None = None, or_none: bool = False) -> View | None:
        """A fresh on-chip tensor: axis 0 on partitions, the rest row-major in each partition.
        `or_none`: None instead of an AllocationError when the space is full (for callers that
        evict and try again; the error's message is then not made)."""
        if space not in ON_CHIP:
            raise ValueError(space)
        mem = self.sbuf if space == "sbuf" else self.psum
        if type(shape) is not tuple or not _all_ints(shape):
            shape = tuple(int(s) for s in shape)
        if loc is None and not name:  # messages describe unnamed tensors by where they were made
            loc = capture_location()
        if len(shape) < 1 or not 1 <= shape[0] <= mem.partitions:
            what = f"{space} tensor '{name}'" if name else f"{space} tensor {list(shape)}"
            if len(shape) < 1:
                raise ConstraintError(f"{what}: on-chip tensors need a partition "
                                      f"dimension, got shape {shape}")
            if shape[0] < 1:
                raise ConstraintError(f"{what}: partition dimension {shape[0]}; an on-chip "
                                      f"tensor has 1 to {mem.partitions} partitions (pmax)")
            raise ConstraintError(f"{what}: partition dimension {shape[0]} "
                                  f"exceeds the {mem.partitions} partitions (pmax)")
        parts = shape[0]
        free = math.prod(shape[1:])
        nbytes = free * dtype.itemsize
        if address is None:
            found = mem.allocator.try_allocate(0, parts, nbytes)
            if found is None and or_none:
                return None
            try:
                handle, b0 = found or mem.allocator.allocate(0, parts, nbytes)
            except AllocationError as e:
                if nbytes > mem.allocator.nbytes:  # too large alone: nothing else to say
                    raise
                raise AllocationError(f"{e.message}; {self._live_tiles(space)}") from None
            p0 = 0
        else:
            p0, foff = address
            b0 = foff * dtype.itemsize
            handle = mem.allocator.place(p0, parts, b0, nbytes)
        buf = Buffer(mem, space, self.index, p0, parts, b0, nbytes, space, name, handle,
                     loc=loc, shape=shape, dtype=dtype)
        dev = self.device
        buf.record = rec = TileRecord(space, self.index, p0, parts, b0, nbytes,
                                      mem.allocator.align, mem.allocator.nbytes,
                                      address is None, dev.program)
        if address is None:
            rec.decl = dev.declaring
        dev.allocations.append(rec)
        self._remember_live(space, handle, buf)
        view = View(buf, _whole_layout(dtype, shape))
        if space == "psum":
            self._psum_tags += 1
            buf.psum_tag = self._psum_tags
            if self.values:  # (read by semantics only, which timing-only runs skip)
                self.psum_writer[p0:p0 + parts, b0 // 4:-(-(b0 + nbytes) // 4)] = 0
        if poison and self.values:
            bits = _poison_bits(dtype)
            fills = getattr(mem, "fills", None)
            if fills is not None and bits.itemsize == dtype.itemsize:
                buf.fresh = fills.add(p0, parts, b0, nbytes, bits)
            else:
                fill_poison(view)
        return view

    def _remember_live(self, space: str, handle: int, buf: Buffer) -> None:
        """Keep a weak reference to a new on-chip tile by its allocation handle (a plain dict
        of weakref.ref: a WeakValueDictionary entry costs ~7x as much), dropping the entries
        of released or dead tiles whenever the dict doubles."""
        live = self._live[space]
        live[handle] = weakref.ref(buf)
        if len(live) > self._live_limit:
            held = (self.sbuf if space == "sbuf" else self.psum).allocator._live
            for h in [h for h, r in live.items() if h not in held or r() is None]:
                del live[h]
            self._live_limit = max(1024, 2 * max(len(self._live["sbuf"]),
                                                 len(self._live["psum"])))

    def live_buffers(self, space: str) -> list[Buffer]:
        """The on-chip tiles of `space` whose allocation is live, in allocation order."""
        held = (self.sbuf if space == "sbuf" else self.psum).allocator._live
        return [b for h, r in list(self._live[space].items())
                if h in held and (b := r()) is not None]

    def _live_tiles(self, space: str, shown: int = 6) -> str:
        """What holds the memory: the largest live tiles of `space` (for AllocationError)."""
        live = self.live_buffers(space)
        live.sort(key=lambda b: -b.nbytes * b.partitions)
        if not live:
            return "no tile is live"
        parts = [f"{b.label} ({b.nbytes} B x {b.partitions} partitions)" for b in live[:shown]]
        more = f" and {len(live) - shown} more" if len(live) > shown else ""
        return f"live: {', '.join(parts)}{more}"

    # ------------------------------------------------------------ instructions
    def _mark_psum_written(self, written: tuple[str, ...], operands: Mapping[str, Any]) -> None:
        """Any write to PSUM marks its fp32 words written by that tensor: nc_matmul(accumulate=
        None) adds onto words its dst tensor wrote and overwrites the rest; a fresh PSUM
        allocation clears them (semantics/_tensor_rules.py)."""
        for k in written:
            v = operands[k]
            if v.buffer.space == "psum":
                self.psum_writer[rules.psum_words(v)] = v.buffer.psum_tag

    def issue(self, opcode: str, engine: str, operands: Mapping[str, Any],
              attrs: Mapping[str, Any], loc: SourceLocation | None = None, name: str = "",
              loops: tuple = (), deps: tuple[int, ...] = ()) -> Instruction:
        """Check, execute and record one instruction.

        A combination that passed check_instruction without a warning is remembered as a Site
        under spec.check_key (everything the checks read: opcode, engine, each operand's type,
        buffer geometry, dtype, shape and strides, each attribute's type and value), so the
        same instruction again (a kernel's loop) costs a lookup, the checks that depend on
        the operand's address and buffer (bounds, this launch's memory) and its record."""
        key = check_key(opcode, engine, operands, attrs)
        site = None if key is None else self._sites.get(key)
        if site is None:
            site = self._site(opcode, operands, loc)
        dev = self.device
        for k, what in site.tensors:
            v = operands[k]
            buf = v.buffer
            if buf.on_chip:
                if getattr(buf.memory, "owner", dev) is not dev:
                    raise _foreign_tensor(opcode, k, buf)
            elif buf.memory is not dev.hbm:
                raise _foreign_tensor(opcode, k, buf)
            check_bounds(buf, v.layout, what)
        if site.attrs is None:  # not proven for these operands: check them
            warned = rules.warnings_issued
            check_instruction(site.spec, self.chip, engine, operands, attrs)
            simple_attrs = {k: _attr_value(v) for k, v in attrs.items()}
            for k in site.scalars:
                if operands[k] is not None:
                    simple_attrs[k] = _attr_value(operands[k])
            if key is not None and rules.warnings_issued == warned:
                if len(self._sites) >= 4096:
                    self._sites.clear()
                self._sites[key] = site.passed(dict(simple_attrs))
        else:
            simple_attrs = dict(site.attrs)
        if dev.guarded:
            _refuse_guarded_writes(site.spec.name, site.written, operands, loc)
        fn = site.fn
        if dev.values or site.always_execute:  # registers: trip counts
            fn(self, engine=engine, **operands, **attrs)
            if dev.values and not site.marks_psum:
                self._mark_psum_written(site.written, operands)
        # (loops, not comprehensions: a comprehension is a function call of its own)
        recs = []
        for k in site.reads:
            recs.append(operand_record(k, operands[k]))
        reads = tuple(recs)
        recs = []
        for k in site.written:
            recs.append(operand_record(k, operands[k]))
        writes = tuple(recs)
        program = dev.program
        instr = Instruction(len(program), opcode, engine, self.index, reads, writes,
                            simple_attrs, loc, name or "", loops, deps)
        program.append(instr)
        if dev.progress is not None and instr.index % 2048 == 0:
            dev.progress(instr.index)
        return instr

    def _site(self, opcode: str, operands: Mapping[str, Any], loc: SourceLocation | None
              ) -> Site:
        """The Site of an instruction not yet checked with these operands (attrs None)."""
        specs = instruction_specs()
        spec = specs.get(opcode)
        fn = sem.lookup(opcode)
        if spec is None or fn is None:
            known = sorted(set(specs) & set(sem.registered()))
            raise UnsupportedError(f"{opcode}: not simulated yet (simulated: {', '.join(known)})",
                                   loc)
        tensors, scalars, reads, written = [], [], [], []
        for k, v in operands.items():
            if not is_tensor(v):
                scalars.append(k)
                continue
            tensors.append((k, f"{opcode} operand '{k}'"))
            ospec = spec.operands.get(k)
            access = ospec.access if ospec is not None else "read"
            if access in ("read", "readwrite"):
                reads.append(k)
            if access in ("write", "readwrite"):
                written.append(k)
        return Site(spec, fn, tuple(tensors), tuple(scalars), tuple(reads), tuple(written))


class Site:
    """What NeuronCore.issue keeps of one checked combination (its check_key): the spec and
    semantics, which operands are tensors and how each is accessed, and the attributes as
    recorded (None until check_instruction passed)."""

    __slots__ = ("always_execute", "attrs", "fn", "marks_psum", "reads", "scalars", "spec",
                 "tensors", "written")

    def __init__(self, spec: Any, fn: Any, tensors: tuple[tuple[str, str], ...],
                 scalars: tuple[str, ...], reads: tuple[str, ...], written: tuple[str, ...],
                 attrs: dict[str, Any] | None = None):
        self.spec, self.fn, self.tensors, self.scalars = spec, fn, tensors, scalars
        self.reads, self.written, self.attrs = reads, written, attrs
        self.always_execute = getattr(fn, "always_execute", False)
        self.marks_psum = getattr(fn, "marks_psum", False)

    def passed(self, attrs: dict[str, Any]) -> Site:
        """This site with its checks passed and `attrs` recorded."""
        return Site(self.spec, self.fn, self.tensors, self.scalars, self.reads, self.written,
                    attrs)


def _foreign_tensor(opcode: str, name: str, buf: Buffer) -> KernelError:
    """A tensor of another launch (kept by Python in a variable, then used in this one)."""
    what = "its SBUF/PSUM" if buf.on_chip else "its HBM"
    return KernelError(
        f"{opcode} operand '{name}': {buf.label} belongs to an earlier kernel launch: "
        f"{what} is gone when that launch ends (nki-api.md §2.4: sbuf, psum and private "
        "HBM are per kernel instance); allocate it in this kernel, or pass its values in "
        "as an argument")


def _refuse_guarded_writes(opcode: str, written: tuple[str, ...], operands: Mapping[str, Any],
                           loc: SourceLocation | None) -> None:
    """KernelError, before it runs, for an instruction writing a buffer whose write guard
    refuses the write (Buffer.write_guard)."""
    for k in written:
        guard = operands[k].buffer.write_guard
        if guard is not None:
            why = guard(operands[k].buffer)
            if why:
                raise KernelError(f"{opcode} operand '{k}': {why}", loc)


_RECORDED_AS_IS = frozenset({bool, int, float, str, type(None)})


def _all_ints(shape: tuple) -> bool:
    """Whether every dimension is an int (a loop: all() over a generator costs a frame)."""
    for s in shape:  # noqa: SIM110
        if type(s) is not int:
            return False
    return True


def _attr_value(v: Any) -> Any:
    """Attributes as plain data for the record (enums and callables by name)."""
    if type(v) in _RECORDED_AS_IS:
        return v
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (tuple, list)):
        return tuple(_attr_value(x) for x in v)
    if isinstance(v, dt.DType):
        return v.name
    name = getattr(v, "name", None) or getattr(v, "__name__", None)
    return name if isinstance(name, str) else repr(v)


_WHOLE_LAYOUTS: dict[tuple[str, tuple[int, ...]], Layout] = {}


def _whole_layout(dtype: dt.DType, shape: tuple[int, ...]) -> Layout:
    """The row-major Layout of a whole fresh tensor (interned: its caches carry over). Looked
    up by the dtype's name: a DType hashes in Python, its name in C (and dtypes of one name
    are equal)."""
    key = (dtype.name, shape)
    lay = _WHOLE_LAYOUTS.get(key)
    if lay is None:
        if len(_WHOLE_LAYOUTS) >= 1024:
            _WHOLE_LAYOUTS.clear()
        lay = _WHOLE_LAYOUTS[key] = interned(Layout(dtype, 0, shape, row_major(shape)))
    return lay


class Device:
    """One chip: HBM shared by its NeuronCores, and the program record of a run."""

    def __init__(self, chip: Any, values: bool = True, seed: int = 0, hbm: HBM | None = None,
                 onchip_pool: dict | None = None, numerics: str = "exact"):
        """A fresh chip; `hbm` (optional) an existing HBM of the same chip to run on instead
        of a fresh one: the launches of a long-lived device (the PyTorch backend) share it.
        `onchip_pool` (optional, a dict the caller keeps) lends the SBUF/PSUM byte arrays of
        earlier launches' cores to this one's, so a launch does not fault in fresh pages
        (each allocation is poisoned as always: no value carries over)."""
        self.chip = chip
        self.values = values
        self.numerics = numerics  # one of NUMERICS
        self.seed = seed
        if hbm is not None and hbm.capacity_bytes != chip.hbm.capacity_bytes:
            raise ValueError(f"an HBM of {hbm.capacity_bytes} bytes is not {chip.name}'s")
        self.hbm = hbm if hbm is not None else HBM(chip.hbm.capacity_bytes)
        self.onchip_pool = onchip_pool
        self.hbm.reset_peak()
        self.cores: dict[int, NeuronCore] = {}
        self.program: list[Instruction] = []
        # Every on-chip allocation of the launch, in allocation order (the timing model's
        # allocation rule, trnsim/timing/realloc.py, re-places the automatic ones).
        self.allocations: list[TileRecord] = []
        # what the API layer says the automatic tiles now being made were declared as (their
        # TileRecord.decl; None: no declaration the compiler would reuse across iterations)
        self.declaring: Any = None
        self.progress: Any = None  # optional callback(instruction count) for progress displays
        self.guarded = False  # some buffer has a Buffer.write_guard: check written operands

    @property
    def host_peak_resident_bytes(self) -> int:
        """Peak host RAM behind this launch's simulated memories: HBM chunks reached (peak
        since the launch began) plus the SBUF/PSUM arrays made (each whole)."""
        onchip = sum(m.partitions * m.bytes_per_partition for c in self.cores.values()
                     for m in (c.sbuf, c.psum) if "data" in m.__dict__)
        return self.hbm.peak_resident_bytes + onchip

    def core(self, index: int) -> NeuronCore:
        if not 0 <= index < self.chip.cores_per_chip:
            raise ConstraintError(f"{self.chip.name} has {self.chip.cores_per_chip} NeuronCores; "
                                  f"core {index} does not exist")
        if index not in self.cores:
            self.cores[index] = NeuronCore(self, index)
        return self.cores[index]

    def allocate_hbm(self, shape: tuple[int, ...], dtype: dt.DType, name: str = "",
                     kind: str = "shared_hbm", core: int | None = None,
                     poison: bool = True, loc: SourceLocation | None = None) -> View:
        shape = tuple(int(s) for s in shape)
        if loc is None and not name:
            loc = capture_location()
        n = math.prod(shape)
        nbytes = n * dtype.itemsize
        handle, off = self.hbm.allocate(nbytes)
        buf = Buffer(self.hbm, "hbm", core, 0, 1, off, nbytes, kind, name, handle,
                     loc=loc, shape=shape, dtype=dtype)
        view = View(buf, _whole_layout(dtype, shape))
        if poison and self.values and n:  # written out chunk by chunk on first touch
            what = f"hbm tensor '{name}'" if name else str(buf.label)
            buf.poison = self.hbm.pending_poison(off, nbytes, _poison_bits(dtype), what)
        return view

    def hbm_from_array(self, array: np.ndarray, dtype: dt.DType, name: str = "",
                       what: str = "") -> View:
        """A fresh HBM tensor holding `array` (`what` names it in a HostMemoryError)."""
        view = self.allocate_hbm(array.shape, dtype, name, poison=False)
        if self.values and view.size:
            buf = view.buffer
            self.hbm.materialize(buf.byte_start, buf.byte_start + buf.nbytes,
                                 what or f"the HBM copy of '{name}'")
            if dtype.kind == "packed":
                view.write_raw(np.ascontiguousarray(array).view(dtype.storage))
            elif array.dtype == dtype.storage and dtype.name != "tfloat32":
                view.write_raw(array)
            else:
                view.write_raw(dt.cast(array, dtype))
        return view
