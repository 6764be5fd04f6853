"""The compiler's behaviours that change time, not values: rules over a program record.

Values are final when the timing model runs, so each rule only changes what the scheduler
times. Every rule is a switch of CompilerRules (on by default; `CompilerRules.none()` times the
kernel as its instructions are written). Data (activation function sets, placement engines) in
isa/compiler.yaml. Knows instruction records and chips; nothing about values or the event loop.

- drop_psum_zero_fill: a zero memset of PSUM whose every byte is next written by the Tensor
  Engine (the first matmul of an accumulation group overwrites its bank; trainium-hw.md B.2) is
  not executed: it takes no engine time and its dependants wait for its own producers instead.
- place_unknown_engine: an instruction the kernel left on engine=unknown, where no documented
  rule picks the engine, goes to whichever placement engine would finish it first, counting
  each engine's work so far (greedy, program order); `place_opcodes` limits it to those
  opcodes (NKI's LINEAR flow at opt level O1 places nisa.tensor_copy alone).
- psum_port_placement: on NC-v2, where VectorE and ScalarE cannot touch PSUM at the same time
  (the compiler serialises such pairs; trainium-hw.md B.5), that greedy counts the shared PSUM
  port as a resource of its own: an instruction touching PSUM starts on an engine only when both
  the engine and the port are free, so two engines buy a PSUM copy no parallelism and it goes
  to the engine where it costs less (ScalarE's faster clock for a PSUM -> SBUF copy).
- reuse_stationary: a matmul whose stationary is the one the previous matmul on the same PE
  cells loaded (same bytes, not written since) issues no LoadStationary.
- act_table_load: an activation whose function is in no loaded activation function set pays a
  table load (chip timing `act_table_load_ns`) before it runs on ScalarE.
- scalar_equivalent: a VectorE instruction with a ScalarE activation equivalent (reciprocal:
  activation(op=reciprocal), documented N cycles against VectorE's 8N) runs on ScalarE as that
  activation when the function set ScalarE has loaded at that point of the program (its last
  activation's) holds the function, so the move costs no table load; otherwise it stays.
- refetch_clean_blocks: an evicted Beta-1 block whose SBUF contents are an unmodified copy of
  HBM (filled by DMAs from HBM tensors not written since) is not spilled: it is re-read from
  its source when read again. Applied by the allocation while the kernel runs
  (trnsim/compat/neuronxcc/nki/_refetch.py), so it changes the program record itself:
  `trnsim.profile(..., rules=...)` passes it to the launch; time_program cannot undo it.
- evict_by_next_use: when SBUF is full, the Beta-1 block evicted is the one whose value the
  kernel needs again last (Belady's rule; the compiler knows the whole traced program), found
  by running a launch that read evicted blocks again a second time with the first run's
  accesses (trnsim/compat/neuronxcc/nki/_nextuse.py). Off: least recently used. Acts on the
  program record like refetch_clean_blocks.
- reuse_loads: a DMA load from HBM into SBUF that reads the same HBM bytes, in the same layout,
  into a tile of the same shape, dtype and partitions as one of the core's last
  `timing.load_reuse_window` loads, with neither those HBM bytes nor that load's SBUF tile
  written since, is not issued: the compiler keeps the tile it loaded, and the readers of the
  second load wait for the first. The window (in loads, program order) is a chip number,
  `timing.load_reuse_window`; 0 (no reuse, the rule inert) on every chip until a fit adopts it.
- allocation: not a switch but a policy (ALLOCATIONS): where the automatic SBUF/PSUM tiles
  are placed. The default (None) is the chip's (isa/compiler.yaml allocation_policies;
  "traced" for a chip not listed, and CompilerRules.none()'s). "traced" keeps the trace-time
  addresses; "ring", "fast" and "max_reuse" re-place them by their true live ranges (first to
  last access) as NKI's documented linear-scan allocation modes RING, FAST and MAX_REUSE
  describe (trnsim/timing/realloc.py), which changes the false WAR/WAW waits between tiles
  sharing bytes. Explicit addresses never move; a policy that cannot fit the live tiles keeps
  the traced addresses and says so in the profile's notes.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

from trnsim import yamlfile
from trnsim.errors import SpecError
from trnsim.program import Instruction, Operand
from trnsim.spec import instruction_specs
from trnsim.timing.statics import COMPUTE, TABLE_LOAD, TENSOR

_MATMULS = ("nc_matmul", "nc_matmul_mx")
# Policies of the rule `allocation` (timing/realloc.py): the trace's addresses, then NKI's
# linear-scan modes RING, FAST, MAX_REUSE.
ALLOCATIONS = ("traced", "ring", "fast", "max_reuse")
_ACTIVATIONS = ("activation", "activation_reduce", "activate2")


@dataclass(frozen=True)
class CompilerRules:
    """Which compiler behaviours the timing model applies (each documented in this module)."""

    drop_psum_zero_fill: bool = True
    place_unknown_engine: bool = True
    reuse_stationary: bool = True
    act_table_load: bool = True
    scalar_equivalent: bool = True
    psum_port_placement: bool = True
    refetch_clean_blocks: bool = True
    evict_by_next_use: bool = True
    reuse_loads: bool = True
    sequential_buffers: bool = True
    # None: the chip's policy (isa/compiler.yaml allocation_policies; "traced" if not listed)
    allocation: str | None = None
    # place_unknown_engine moves only these opcodes (None: any); NKI's LINEAR flow at O1
    # chooses the engine of nisa.tensor_copy alone (nki.compiler.OptLevel)
    place_opcodes: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.allocation is not None and self.allocation not in ALLOCATIONS:
            raise ValueError(f"CompilerRules: allocation {self.allocation!r} is not an "
                             f"allocation policy (allowed: {', '.join(ALLOCATIONS)}, or None "
                             "for the chip's)")

    def allocation_for(self, chip_name: str) -> str:
        """The allocation policy on chip `chip_name`: the rule's, else the chip's."""
        if self.allocation is not None:
            return self.allocation
        return compiler_data()["allocation_policies"].get(chip_name, "traced")

    @classmethod
    def none(cls) -> CompilerRules:
        """Every rule off: the instructions as the kernel wrote them."""
        return cls(False, False, False, False, False, False, False, False, False, False,
                   "traced")


# The on/off switches of CompilerRules that act on a recorded program's timing (the other two,
# refetch_clean_blocks and evict_by_next_use, change the program record while the kernel runs).
TIMING_RULES = tuple(
    f.name for f in fields(CompilerRules)
    if f.type in (bool, "bool") and f.name not in ("refetch_clean_blocks", "evict_by_next_use"))


def _data_path() -> Path:
    try:
        p = resources.files("trnsim._isa") / "compiler.yaml"
        if p.is_file():
            return Path(str(p))
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "isa" / "compiler.yaml"


@functools.cache
def compiler_data() -> Mapping[str, Any]:
    """isa/compiler.yaml, checked: function -> the sets holding it (in file order), the
    placement engines, and opcode -> its ScalarE activation function."""
    raw = yamlfile.load(_data_path().read_text())
    try:
        sets = raw["act_function_sets"]["sets"]
        engines = tuple(raw["placement_engines"]["engines"])
        equivalents = dict(raw["scalar_equivalents"]["ops"])
        policies = dict(raw["allocation_policies"]["chips"] or {})
    except (KeyError, TypeError) as e:
        raise SpecError(f"compiler.yaml: missing or malformed key {e}") from e
    function_set: dict[str, tuple[str, ...]] = {}
    for name, funcs in sets.items():
        for f in funcs:
            if name in function_set.get(f, ()):
                raise SpecError(f"compiler.yaml: act_function_sets.sets.{name}: {f!r} twice")
            function_set[f] = (*function_set.get(f, ()), name)
    for op, f in equivalents.items():
        if f not in function_set:
            raise SpecError(
                f"compiler.yaml: scalar_equivalents.ops.{op}: {f!r} is in no activation set"
            )
    for chip, policy in policies.items():
        if policy not in ALLOCATIONS:
            raise SpecError(f"compiler.yaml: allocation_policies.chips.{chip}: {policy!r} is not "
                            f"an allocation policy (allowed: {', '.join(ALLOCATIONS)})")
    return {
        "allocation_policies": policies,
        "function_set": function_set,
        "placement_engines": engines,
        "scalar_equivalents": equivalents,
    }


# ---------------------------------------------------------------- PSUM zero-fill
def _box(o: Operand) -> tuple[int, int, int, int]:
    r = o.region
    return r.partition_start, r.partition_start + r.partitions, r.byte_start, r.byte_end


def _inter(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> int:
    p = min(a[1], b[1]) - max(a[0], b[0])
    f = min(a[3], b[3]) - max(a[2], b[2])
    return p * f if p > 0 and f > 0 else 0


def dropped_zero_fills(program: Sequence[Instruction]) -> set[int]:
    """Indices of PSUM zero memsets the Tensor Engine's writes cover before anything else
    touches their bytes (distinct matmul dst boxes are taken as disjoint: tiles of one bank)."""
    pending: dict[int, tuple[int, tuple, int, set]] = {}  # memset -> (core, box, left, seen)
    out: set[int] = set()
    for ins in program:
        if pending:
            tensor_write = ins.opcode in _MATMULS
            for m in list(pending):
                core, box, left, seen = pending[m]
                if core != ins.core:
                    continue
                nr = len(ins.reads)
                for k, o in enumerate(ins.reads + ins.writes):
                    if o.region.space != "psum":
                        continue
                    n = _inter(box, _box(o))
                    if not n:
                        continue
                    if not (tensor_write and k >= nr):  # a read, or another engine's write
                        del pending[m]
                        break
                    if _box(o) not in seen:
                        seen.add(_box(o))
                        left -= n
                    if left <= 0:
                        out.add(m)
                        del pending[m]
                        break
                    pending[m] = (core, box, left, seen)
        if ins.opcode == "memset" and ins.attrs.get("value") == 0 and ins.writes:
            dst = ins.writes[0]
            if dst.region.space == "psum":
                box = _box(dst)
                pending[ins.index] = (ins.core, box, (box[1] - box[0]) * (box[3] - box[2]), set())
    return out


# ---------------------------------------------------------------- loads kept resident
_SBUF_BUCKET = 2048  # bytes per partition: granularity of the index of resident tiles
_HBM_BUCKET = 1 << 20  # bytes: granularity of the index of their HBM sources


def _load_key(ins: Instruction) -> tuple | None:
    """What identifies the data a plain HBM -> SBUF load brings, and where: its core, source
    bytes and layout, and the destination tile's shape, dtype, partitions and stride (None for
    any other instruction, spill reloads included)."""
    if ins.opcode != "dma_copy" or len(ins.reads) != 1 or len(ins.writes) != 1:
        return None
    s, d = ins.reads[0], ins.writes[0]
    if s.region.space != "hbm" or d.region.space != "sbuf" or ins.attrs.get("spill_reload"):
        return None
    r, q = s.region, d.region
    return (ins.core, r.byte_start, r.byte_end, s.pattern, s.dtype, s.shape, s.inner_stride_bytes,
            d.dtype, d.shape, q.partition_start, q.partitions, d.inner_stride_bytes)


def reused_loads(program: Sequence[Instruction], window: int) -> dict[int, int]:
    """Loads not issued (rule reuse_loads) -> the issued load whose tile they reuse.

    In program order, per core: a load whose key (_load_key) one of the last `window` loads
    had, with no write since to that load's SBUF tile or to the HBM bytes it read, reuses it
    (a reused load's tile then stands for the data, so a chain of them reuses the first)."""
    out: dict[int, int] = {}
    if window <= 0:
        return out
    live: dict[tuple, tuple] = {}  # key -> (SBUF box, load ordinal, root, its index entries)
    index: dict[tuple, set] = {}  # ("sbuf", core, bucket) / ("hbm", bucket) -> live keys
    loads: dict[int, int] = {}  # core -> loads so far

    def forget(k: tuple) -> None:
        for e in live.pop(k)[3]:
            index[e].discard(k)

    for ins in program:
        key = _load_key(ins)
        if key is not None:
            n = loads[ins.core] = loads.get(ins.core, 0) + 1
            got = live.get(key)
            root = ins.index
            if got is not None:
                if n - got[1] <= window:
                    root = out[ins.index] = got[2]
                forget(key)
        for o in ins.writes:
            r = o.region
            if r.space == "hbm":
                lo, hi = r.byte_start // _HBM_BUCKET, (r.byte_end - 1) // _HBM_BUCKET
                near = (live if hi - lo >= len(live) else
                        {k for b in (-1, *range(lo, hi + 1)) for k in index.get(("hbm", b), ())})
                hit = [k for k in near if k[1] < r.byte_end and r.byte_start < k[2]]
            elif r.space == "sbuf":
                box = _box(o)
                lo, hi = r.byte_start // _SBUF_BUCKET, (r.byte_end - 1) // _SBUF_BUCKET
                near = (live if hi - lo >= len(live) else
                        {k for b in range(lo, hi + 1) for k in index.get(("sbuf", r.core, b), ())})
                hit = [k for k in near if k[0] == r.core and _inter(live[k][0], box)]
            else:
                continue
            for k in hit:
                forget(k)
        if key is not None:
            dst = ins.writes[0].region
            box = _box(ins.writes[0])
            entries = [("sbuf", dst.core, b)
                       for b in range(box[2] // _SBUF_BUCKET, (box[3] - 1) // _SBUF_BUCKET + 1)]
            lo, hi = key[1] // _HBM_BUCKET, (key[2] - 1) // _HBM_BUCKET
            # (a source spread over many buckets, e.g. rows far apart, is checked on every write)
            entries += [("hbm", b) for b in range(lo, hi + 1)] if hi - lo < 64 else [("hbm", -1)]
            for e in entries:
                index.setdefault(e, set()).add(key)
            live[key] = (box, n, root, entries)
    return out


# ---------------------------------------------------------------- engine placement
def place_engines(
    program: list[Instruction], engine_ns: Any, shared_psum: bool = False,
    only: frozenset[str] | None = None,
) -> list[Instruction]:
    """`program` with each engine=unknown instruction (Instruction.engine_unknown) moved to the
    placement engine of its ISA record that would finish it first: each engine's work so far
    plus its own cost there (engine_ns(ins) = its II in ns on its engine). With `shared_psum`
    (rule psum_port_placement, NC-v2) an instruction touching PSUM also waits for the port the
    placement engines share, which it then holds. `only`: the opcodes that may move (None:
    any; the rest keep their default engine). The list is copied only if one moves."""
    engines = compiler_data()["placement_engines"]
    specs = instruction_specs()
    candidates: dict[str, list[str]] = {}  # opcode -> placement engines it may move between

    def cands_of(opcode: str) -> list[str]:
        got = candidates.get(opcode)
        if got is None:
            spec = specs.get(opcode)
            movable = (spec is not None and spec.family != "control"  # barriers stay put
                       and (only is None or opcode in only))
            got = candidates[opcode] = (
                [e for e in spec.engines if e in engines] if movable else [])
        return got

    # Nothing can move (e.g. only DMAs left to the compiler): the program as it is, without
    # the pass's per-instruction costs.
    if not any(getattr(ins, "engine_unknown", False) and len(c := cands_of(ins.opcode)) > 1
               and ins.engine in c for ins in program):
        return program
    free: dict[tuple[int, str], float] = {}  # (core, engine or "psum port") -> busy until
    out: list[Instruction] | None = None
    for ins in program:
        unknown = getattr(ins, "engine_unknown", False)
        if not unknown and ins.engine not in engines:
            continue  # (neither moves nor adds work to a placement engine)
        port = (ins.core, "psum port")
        on_port = shared_psum and any(o.region.space == "psum" for o in ins.operands)
        chosen = ins
        if unknown:
            cands = cands_of(ins.opcode)
            if len(cands) > 1 and ins.engine in cands:
                best = None
                for e in cands:
                    alt = ins if e == ins.engine else replace(ins, engine=e)
                    t = free.get((ins.core, e), 0.0)
                    if on_port:
                        t = max(t, free.get(port, 0.0))
                    t += engine_ns(alt)
                    if best is None or t < best[0]:
                        best = (t, alt)
                chosen = best[1]
                if chosen is not ins:
                    if out is None:
                        out = list(program)
                    out[ins.index] = chosen
        if chosen.engine in engines:
            key = (chosen.core, chosen.engine)
            start = free.get(key, 0.0)
            if on_port:
                start = max(start, free.get(port, 0.0))
            free[key] = start + engine_ns(chosen)
            if on_port:
                free[port] = free[key]
    return program if out is None else out


# ---------------------------------------------------------------- order-dependent costs
def stationary_key(ins: Instruction, deps: Sequence[tuple[int, str, str]]) -> tuple | None:
    """What identifies the weights a matmul loads: the stationary's bytes, layout and its
    producers (a write in between changes them); None for instructions with no stationary."""
    if ins.opcode not in _MATMULS:
        return None
    for st in ins.reads:
        if st.name == "stationary":
            break
    else:
        return None
    producers = frozenset([j for j, kind, name in deps if name == "stationary" and kind == "flow"])
    r = st.region  # (its fields: a plain tuple compares without the dataclass's __eq__)
    return (
        (r.space, r.core, r.partition_start, r.partitions, r.byte_start, r.byte_end),
        st.dtype,
        st.shape,
        st.inner_stride_bytes,
        producers,
        ins.attrs.get("tile_position"),
        ins.attrs.get("tile_size"),
        ins.attrs.get("is_transpose"),
        ins.attrs.get("perf_mode"),
    )


def table_sets(ins: Instruction) -> tuple[str, ...]:
    """The activation function sets any of which an activation can run from (empty: no
    table, or not an activation)."""
    if ins.opcode not in _ACTIVATIONS:
        return ()
    op = ins.attrs.get("op")
    return compiler_data()["function_set"].get(str(op), ()) if op is not None else ()


# ---------------------------------------------------------------- ScalarE equivalents
def place_scalar_equivalents(program: list[Instruction]) -> list[Instruction]:
    """`program` with each VectorE instruction that has a ScalarE activation equivalent
    (isa/compiler.yaml scalar_equivalents) rewritten as that activation on ScalarE when the
    set ScalarE holds at that point (per core, program order: the last activation's, the first
    set holding its function unless the loaded one does) holds the function. The list is
    copied only if one moves."""
    data = compiler_data()
    equivalents, function_set = data["scalar_equivalents"], data["function_set"]
    loaded: dict[int, str] = {}
    out: list[Instruction] | None = None
    for ins in program:
        # (only where the kernel left the engine to the compiler: an explicit engine stays)
        func = equivalents.get(ins.opcode) if ins.engine == "vector" and ins.engine_unknown \
            else None
        if func is not None and loaded.get(ins.core) in function_set[func]:
            attrs = {**ins.attrs, "op": func}
            ins = replace(ins, opcode="activation", engine="scalar", attrs=attrs)
            if out is None:
                out = list(program)
            out[ins.index] = ins
        sets = table_sets(ins) if ins.engine == "scalar" else ()
        if sets and loaded.get(ins.core) not in sets:
            loaded[ins.core] = sets[0]
    return program if out is None else out


def reuse_stationary(
    items: Sequence[int], kinds: list[int], ticks: list[tuple], deps: Sequence, program: Sequence,
    keys: dict[int, tuple | None] | None = None,
) -> None:
    """In Tensor-queue order, drop the LoadStationary (zero ticks) of a matmul whose PE cells
    still hold its stationary; a matmul on overlapping cells replaces what they hold. `keys`
    (optional) memoises stationary_key by instruction across calls with the same deps."""
    held: dict[tuple, tuple | None] = {}  # PE cells -> stationary they hold
    keys = {} if keys is None else keys
    for i in items:
        if kinds[i] != TENSOR:
            continue
        ii, lat, _, _, cells = ticks[i]
        key = keys.get(i, _MISSING)
        if key is _MISSING:
            key = keys[i] = stationary_key(program[i], deps[i])
        if key is not None and held.get(cells) == key:
            ticks[i] = (ii, lat, 0, 0, cells)
        if len(held) > (cells in held):  # other cell groups held: drop those overlapping
            mine = set(cells)
            for c in [c for c in held if c != cells and mine.intersection(c)]:
                del held[c]
        held[cells] = key


_MISSING = object()


def mark_table_loads(items: Sequence[int], kinds: list[int], program: Sequence, on: bool) -> None:
    """In Scalar-queue order, mark (kind TABLE_LOAD) each activation whose function set is not
    the one loaded last; with `on` False, clear the marks."""
    loaded = None
    for i in items:
        if kinds[i] == TABLE_LOAD:
            kinds[i] = COMPUTE
        need = table_sets(program[i]) if on else ()
        if need and loaded not in need and kinds[i] == COMPUTE:
            kinds[i] = TABLE_LOAD
            loaded = need[0]
