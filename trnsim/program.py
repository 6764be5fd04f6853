"""Program record: Instruction, Operand, Region, SourceLocation. Knows nothing of values or time."""

from __future__ import annotations

import functools
import linecache
import os
import sys
from dataclasses import dataclass, field
from typing import Any

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# trnsim.kernels lives in kernels/ (package-dir mapping); its frames are user code.
_INTERNAL_DIRS = (_PKG_DIR + os.sep,)
_USER_SUBDIRS = (os.path.join(_PKG_DIR, "kernels") + os.sep,)


@dataclass(frozen=True)
class SourceLocation:
    """A place in the user's code: file, line, function and the source text of that line."""

    filename: str
    lineno: int
    function: str = ""
    code: str = ""

    @property
    def line(self) -> int:
        return self.lineno

    def short(self) -> str:
        return f"{os.path.basename(self.filename)}:{self.lineno}"

    def describe(self) -> str:
        head = f"{self.filename}:{self.lineno}"
        if self.function:
            head += f" in {self.function}"
        return f"{head}\n    {self.code}" if self.code else head


@functools.lru_cache(maxsize=4096)
def is_internal_file(filename: str) -> bool:
    """True for frames inside the simulator (trnsim/ but not the kernel library)."""
    path = os.path.abspath(filename)
    if path.startswith(_USER_SUBDIRS):
        return False
    return path.startswith(_INTERNAL_DIRS) or ("importlib" in path and "<frozen" in filename)


# Per code object (by id, with the object kept to rule out a reused id): whether it is the
# simulator's own, and the SourceLocation of each instruction offset already seen. Every
# instruction walks the same frames; hashing a code object hashes its contents, and f_lineno
# decodes the line table, so both are looked up once.
_CODE_INFO: dict[int, tuple[Any, bool, dict[int, SourceLocation]]] = {}


def capture_location(skip_internal: bool = True) -> SourceLocation | None:
    """The first stack frame outside trnsim: where the user called us."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        info = _CODE_INFO.get(id(code))
        if info is None or info[0] is not code:
            info = _code_info(frame)
        if not skip_internal or not info[1]:
            at = info[2]
            loc = at.get(frame.f_lasti)
            if loc is None:
                loc = at[frame.f_lasti] = _location(code.co_filename, frame.f_lineno, code.co_name)
            return loc
        frame = frame.f_back
    return None


def declaration_site() -> tuple[tuple[int, int], ...]:
    """Where in the user's code the current call sits, as the compiler would tell two tile
    declarations apart: (id of the code object, instruction offset) of each frame of the
    innermost run of user frames (the kernel and the helpers it called, up to the simulator
    frame that called the kernel). The same statement reached again by a Python loop gives
    the same site; the same helper called from two lines gives two."""
    frame = sys._getframe(1)
    site: list[tuple[int, int]] = []
    while frame is not None:
        info = _CODE_INFO.get(id(frame.f_code))
        if info is None or info[0] is not frame.f_code:
            info = _code_info(frame)
        if not info[1]:
            site.append((id(info[0]), frame.f_lasti))
        elif site:
            break
        frame = frame.f_back
    return tuple(site)


def _code_info(frame: Any) -> tuple[Any, bool, dict[int, SourceLocation]]:
    """Fill and return _CODE_INFO's entry for the frame's code object (whether it is the
    simulator's own)."""
    if len(_CODE_INFO) > 16384:
        _CODE_INFO.clear()
    code = frame.f_code
    fname = code.co_filename
    internal = is_internal_file(fname) or fname.startswith("<frozen") or (
        # code trnsim generated, e.g. a dataclass's __init__ (its globals are ours)
        fname == "<string>" and str(frame.f_globals.get("__name__", "")).startswith("trnsim."))
    info = _CODE_INFO[id(code)] = (code, internal, {})
    return info


@functools.lru_cache(maxsize=4096)
def _location(filename: str, lineno: int, function: str) -> SourceLocation:
    """One SourceLocation per kernel line (a kernel's loop issues from the same lines)."""
    return SourceLocation(filename, lineno, function, linecache.getline(filename, lineno).strip())


@dataclass(frozen=True)
class Region:
    """Bytes an operand touches, as a bounding box.

    On-chip (sbuf/psum): partitions [partition_start, partition_start + partitions) and
    bytes [byte_start, byte_end) inside each partition. HBM: absolute bytes
    [byte_start, byte_end) of the chip's HBM address space (partitions = 1).
    """

    space: str
    core: int
    partition_start: int
    partitions: int
    byte_start: int
    byte_end: int

    def overlaps(self, other: Region) -> bool:
        if self.space != other.space:
            return False
        if self.space != "hbm" and self.core != other.core:
            return False
        if self.byte_end <= other.byte_start or other.byte_end <= self.byte_start:
            return False
        p0, p1 = self.partition_start, self.partition_start + self.partitions
        q0, q1 = other.partition_start, other.partition_start + other.partitions
        return not (p1 <= q0 or q1 <= p0)


@dataclass(frozen=True)
class Operand:
    """One tensor argument of an instruction, as the timing model sees it."""

    name: str
    region: Region
    dtype: str
    shape: tuple[int, ...]
    partitions: int  # partition count (1 for HBM)
    elems_per_partition: int  # N of the cost formulas
    nbytes: int  # bytes actually moved (elements x itemsize)
    inner_stride_bytes: int  # stride of the innermost free dim, in bytes
    contiguous_bytes: int  # longest contiguous run, in bytes (DMA descriptor size)
    tensor_name: str = ""
    # HBM operands: the exact bytes touched, as (first byte's offset from region.byte_start,
    # ((stride_bytes, count), ...)); None when not recorded (on chip, or a hand-made record).
    pattern: tuple[int, tuple[tuple[int, int], ...]] | None = None


@dataclass
class Instruction:
    """One executed instruction, appended in program order. The timing model's input."""

    index: int
    opcode: str
    engine: str
    core: int
    reads: tuple[Operand, ...]
    writes: tuple[Operand, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    loc: SourceLocation | None = None
    name: str = ""
    # Loop context: ((loop_id, kind, iteration), ...) from outermost to innermost.
    loops: tuple[tuple[int, str, int], ...] = ()
    # Explicit extra dependencies (instruction indices), e.g. from depends_on/with_schedule.
    deps: tuple[int, ...] = ()
    # The kernel left the engine to the compiler (engine=unknown) and no documented rule picked
    # it: the timing model's placement rule may move it (timing/compiler.py).
    engine_unknown: bool = False

    @property
    def operands(self) -> tuple[Operand, ...]:
        return self.reads + self.writes
