"""InstructionSpec: load isa/instructions/*.yaml and check an instruction's operands against it.

The limit vocabulary is closed; each limit is implemented once here with one clear message.
Knows chips, dtypes and memory layouts; knows nothing about semantics or time.
"""

from __future__ import annotations

import enum
import functools
import importlib
import math
import os
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
import yaml

from trnsim import dtypes as dt
from trnsim import yamlfile
from trnsim.errors import ConstraintError, SpecError
from trnsim.layout import token

ACCESS = ("read", "write", "readwrite")
KINDS = ("tensor", "scalar", "tensor_or_scalar", "value")
SPACES = ("hbm", "sbuf", "psum")
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync", "dma")
LIMITS = ("max_partitions", "same_partitions", "same_elems", "same_shape", "same_dtype",
          "max_free", "dtypes", "not_dtypes", "per_partition", "max_psum_inputs", "quadrant",
          "min_partitions", "max_rank")


def isa_dir() -> str:
    """Directory of the isa/ data (installed as the package trnsim._isa)."""
    try:
        import trnsim._isa as pkg

        return os.path.dirname(os.path.abspath(pkg.__file__))
    except ImportError:  # running from a source tree without install
        here = os.path.dirname(os.path.abspath(__file__))
        return os.path.join(os.path.dirname(here), "isa")


@dataclass(frozen=True)
class OperandSpec:
    name: str
    spaces: tuple[str, ...]
    access: str = "read"
    kind: str = "tensor"
    optional: bool = False


@dataclass(frozen=True)
class InstructionSpec:
    """One instruction's engines, operands, attribute domains and limits (from isa/)."""

    name: str
    engines: tuple[str, ...]
    operands: Mapping[str, OperandSpec]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    limits: Mapping[str, Any] = field(default_factory=dict)
    check: str | None = None
    doc: str = ""
    source: str = ""
    family: str = ""

    def __post_init__(self) -> None:
        where = f"{self.family}.yaml: {self.name}"
        if not self.engines:
            raise SpecError(f"{where}.engines: empty (known: {', '.join(ENGINES)})")
        for e in self.engines:
            if e not in ENGINES:
                raise SpecError(f"{where}.engines: '{e}' is not an engine "
                                f"(known: {', '.join(ENGINES)})")
        for key in self.limits:
            if key not in LIMITS:
                raise SpecError(f"{where}.limits.{key}: not a limit (known: {', '.join(LIMITS)})")
        for op in self.operands.values():
            if op.access not in ACCESS:
                raise SpecError(f"{where}.operands.{op.name}.access: '{op.access}' "
                                f"(known: {ACCESS})")
            if op.kind not in KINDS:
                raise SpecError(f"{where}.operands.{op.name}.kind: '{op.kind}' (known: {KINDS})")
            for s in op.spaces:
                if s not in SPACES:
                    raise SpecError(f"{where}.operands.{op.name}.spaces: '{s}' (known: {SPACES})")

    def check_fn(self) -> Callable[..., None] | None:
        return self._check_fn

    @functools.cached_property
    def _check_fn(self) -> Callable[..., None] | None:
        if not self.check:
            return None
        mod, _, fn = self.check.partition(":")
        try:
            return getattr(importlib.import_module(mod), fn)
        except (ImportError, AttributeError) as e:
            raise SpecError(f"{self.family}.yaml: {self.name}.check: "
                            f"cannot import {self.check}") from e

    @functools.cached_property
    def one_of_attrs(self) -> tuple[tuple[str, Any], ...]:
        """(attribute, allowed values) of every attribute with a `one_of` domain."""
        return tuple((a, d["one_of"]) for a, d in self.attrs.items()
                     if isinstance(d, dict) and "one_of" in d)


def _parse_record(family: str, name: str, rec: Any) -> InstructionSpec:
    where = f"{family}.yaml: {name}"
    if not isinstance(rec, dict):
        raise SpecError(f"{where}: expected a mapping, got {type(rec).__name__}")
    ops = {}
    for oname, o in (rec.get("operands") or {}).items():
        if not isinstance(o, dict):
            raise SpecError(f"{where}.operands.{oname}: expected a mapping")
        ops[oname] = OperandSpec(oname, tuple(o.get("spaces", ())), o.get("access", "read"),
                                 o.get("kind", "tensor"), bool(o.get("optional", False)))
    known = {"doc", "engines", "operands", "attrs", "limits", "check", "source", "cost"}
    unknown = set(rec) - known
    if unknown:
        raise SpecError(f"{where}: unknown keys {sorted(unknown)}")
    return InstructionSpec(name=name, engines=tuple(rec.get("engines", ())), operands=ops,
                           attrs=rec.get("attrs") or {}, limits=rec.get("limits") or {},
                           check=rec.get("check"), doc=rec.get("doc", ""),
                           source=rec.get("source", ""), family=family)


@cache
def instruction_specs() -> Mapping[str, InstructionSpec]:
    """Every instruction record under isa/instructions/, by NKI name (immutable, cached)."""
    root = os.path.join(isa_dir(), "instructions")
    specs: dict[str, InstructionSpec] = {}
    for fname in sorted(os.listdir(root)):
        if not fname.endswith(".yaml"):
            continue
        family = fname[:-5]
        with open(os.path.join(root, fname)) as f:
            try:
                data = yamlfile.load(f) or {}
            except yaml.YAMLError as e:
                raise SpecError(f"{fname}: not valid YAML: {e}") from e
        for name, rec in data.items():
            if name in specs:
                raise SpecError(f"{fname}: {name} is already defined in {specs[name].family}.yaml")
            specs[name] = _parse_record(family, name, rec)
    return specs


@cache
def engine_access() -> Mapping[str, Mapping[str, tuple[str, ...]]]:
    """Which memory spaces each engine may read and write (isa/engines.yaml)."""
    with open(os.path.join(isa_dir(), "engines.yaml")) as f:
        data = yamlfile.load(f)
    return {e: {"read": tuple(v["read"]), "write": tuple(v["write"])} for e, v in data.items()}


# ---------------------------------------------------------------- checking
# Values whose meaning is their value (never tensors, never registers): check_key and
# is_tensor answer these from the type alone.
_PLAIN = frozenset({bool, int, float, str, type(None), dt.DType, types.FunctionType,
                    types.BuiltinFunctionType, np.ufunc, np.bool_, np.int32, np.int64,
                    np.float32, np.float64})


def is_tensor(x: Any) -> bool:
    """A view onto simulated memory (anything with .buffer and .layout). Plain values are
    answered from their type: a failed hasattr costs an exception, on every attribute of
    every instruction."""
    t = type(x)
    if t in _PLAIN or isinstance(t, enum.EnumMeta):
        return False
    return hasattr(x, "buffer") and hasattr(x, "layout")


_ARRAY_HINT = ("kernel arguments are passed in as HBM tensors: pass the array to the kernel "
               "and load it with nisa.dma_copy (or embed it with nl.shared_constant)")


def show_value(v: Any, limit: int = 60) -> str:
    """A value for a message: arrays by type, dtype and shape, other values' repr cut short."""
    if isinstance(v, np.ndarray):
        return f"a numpy array (shape {v.shape}, dtype {v.dtype})"
    text = repr(v)
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return f"{type(v).__name__} {text}"


def fail(instr: str, message: str, allowed: str = "") -> None:
    text = f"{instr}: {message}"
    if allowed:
        text += f"; {allowed}"
    raise ConstraintError(text)


def _limit_value(chip: Any, v: Any) -> int:
    return int(chip.tile_size[v]) if isinstance(v, str) else int(v)


def partitions_of(t: Any) -> int:
    shape = t.layout.shape
    return shape[0] if shape and t.buffer.on_chip else 1


def elems_of(t: Any) -> int:
    shape = t.layout.shape
    return math.prod(shape[1:] if t.buffer.on_chip else shape)


def start_partition(t: Any) -> int:
    return t.region().partition_start


def partition_step(stride: int, elems_per_partition: int) -> int | None:
    """Partitions advanced per step of an on-chip layout's dim 0 (1 = dense), or None when
    the step does not land on a partition boundary."""
    if elems_per_partition <= 0 or stride % elems_per_partition:
        return None
    return stride // elems_per_partition


def check_dense_partitions(instr: str, name: str, t: Any) -> None:
    """Compute engines read and write a contiguous, ascending range of partitions
    (nki-api.md §3.4: partition stride must be dense); only DMAs gather partitions."""
    shape = t.layout.shape
    if not shape or shape[0] <= 1:
        return
    step = partition_step(t.layout.strides[0], t.buffer.elems_per_partition(t.layout.dtype))
    if step == 1:
        return
    if step is None:
        got = f"walks free elements (stride {t.layout.strides[0]} elements) on its partition axis"
    else:
        got = f"steps over partitions with stride {step}" + (" (reversed)" if step < 0 else "")
    fail(instr, f"operand '{name}' {got}",
         "compute engines access a contiguous range of partitions; allowed: dense partitions "
         "(use a DMA to gather partitions)")


def check_quadrant(instr: str, name: str, t: Any) -> None:
    """Start-partition rule (nki-api.md §3.5): 0 if >64, 0/64 if 33-64, 0/32/64/96 if 2-32.

    Its scope: the Trainium architecture guide states it for "a tensor" occupying
    num_partition partitions, a rule "handled by the tensor allocator" of the compiler; a
    single-partition access has no lanes to align, and AWS's own examples write one partition
    at every index (`indices[i, j] = v` for i in range(32), nl.gather_flattened's example),
    so one partition may start anywhere."""
    n = partitions_of(t)
    if n <= 1:
        return
    start = start_partition(t)
    allowed = (0,) if n > 64 else (0, 64) if n > 32 else (0, 32, 64, 96)
    if start not in allowed:
        fail(instr, f"operand '{name}' spans {n} partitions starting at partition {start}",
             f"an access of {n} partitions must start at partition "
             f"{' or '.join(map(str, allowed))} (quadrant rule)")


def check_instruction(spec: InstructionSpec, chip: Any, engine: str,
                      operands: Mapping[str, Any], attrs: Mapping[str, Any]) -> None:
    """Check operands and attributes against the record; raise ConstraintError on a violation."""
    instr = spec.name
    if engine not in spec.engines:
        fail(instr, f"cannot run on the {engine} engine",
             f"allowed engines: {', '.join(spec.engines)}")
    access = engine_access()
    tensors = {}
    for name, ospec in spec.operands.items():
        val = operands.get(name)
        if val is None:
            if not ospec.optional:
                fail(instr, f"operand '{name}' is required")
            continue
        if is_tensor(val):
            if ospec.kind in ("scalar", "value"):
                fail(instr, f"operand '{name}' must be a compile-time scalar, got a tensor")
            tensors[name] = val
            space = val.buffer.space
            if space not in ospec.spaces:
                fail(instr, f"operand '{name}' is in {space}",
                     f"allowed: {', '.join(ospec.spaces)}")
            eng_ok = access[engine]["write" if ospec.access == "write" else "read"]
            if space not in eng_ok:
                verb = "write" if ospec.access == "write" else "read"
                fail(instr, f"the {engine} engine cannot {verb} {space} (operand '{name}')",
                     f"the {engine} engine {verb}s {', '.join(eng_ok)}")
            if ospec.access == "readwrite" and space not in access[engine]["write"]:
                fail(instr, f"the {engine} engine cannot write {space} (operand '{name}')")
        elif ospec.kind == "tensor":
            fail(instr, f"operand '{name}' must be a tensor, got {show_value(val)}",
                 _ARRAY_HINT if isinstance(val, np.ndarray) else "")
    for aname, one_of in spec.one_of_attrs:
        if aname in attrs:
            v = attrs[aname]
            if v is not None and v not in one_of:
                fail(instr, f"{aname}={v!r} is not supported",
                     f"allowed: {', '.join(map(str, one_of))}")
    _check_limits(spec, chip, tensors)
    fn = spec._check_fn
    if fn is not None:
        fn(chip=chip, engine=engine, attrs=attrs, **operands)


# ---------------------------------------------------------------- checking once
# A kernel's loops issue the same instruction on the same tile slots again and again, and the
# rules above read only what check_key captures, so a passing combination is checked once per
# core and launch (NeuronCore.issue keeps the set). Bounds are checked every time (memory).


_NOT_PLAIN = object()


def _value_key(v: Any) -> Any:
    """v with its type, when its meaning is its value (not a register, array or mutable
    object); else _NOT_PLAIN. The type keeps 1, 1.0 and True (and a dtype and its name, which
    compare equal) apart: a rule may accept one and refuse the other."""
    t = type(v)
    if t in _PLAIN or isinstance(t, enum.EnumMeta):
        if t is float and v == 0.0:
            return t, v, math.copysign(1.0, v)  # -0.0 == 0.0, but they are recorded apart
        return t, v
    if t is tuple:
        if not v:
            return t, v
        out = tuple([_value_key(x) for x in v])
        return _NOT_PLAIN if _NOT_PLAIN in out else (t, out)
    return _NOT_PLAIN


def _tensor_key(t: Any) -> tuple | None:
    """What the rules read of a tensor: shape, strides, dtype and, on chip, the start
    partition and in PSUM the byte position (bank rules; no SBUF rule reads an SBUF byte
    address). None: runtime offsets."""
    if getattr(t, "dynamic", None) is not None:
        return None
    buf, lay = t.buffer, t.layout
    where = buf.__dict__.get("_check_key")
    if where is None:
        at = buf.byte_start if buf.space == "psum" else 0
        where = buf.__dict__["_check_key"] = token((buf.space, buf.kind, buf.core,
                                                    buf.partition_start, buf.partitions, at,
                                                    buf.nbytes))
    cached = lay.__dict__
    if buf.on_chip:
        geometry = cached.get("_check_key")
        if geometry is None:
            geometry = cached["_check_key"] = token((lay.dtype.name, lay.offset, lay.shape,
                                                     lay.strides))
    else:  # (no HBM rule reads the offset)
        geometry = cached.get("_check_key_hbm")
        if geometry is None:
            geometry = cached["_check_key_hbm"] = token((lay.dtype.name, lay.shape, lay.strides))
    return (type(t), where, geometry)


def check_key(opcode: str, engine: str, operands: Mapping[str, Any],
              attrs: Mapping[str, Any]) -> tuple | None:
    """Everything check_instruction reads, hashable; None when an operand or attribute is not
    plain data (registers, arrays, runtime offsets): those are checked every time. (Issued for
    every instruction: the common cases of is_tensor and _value_key are inlined.)"""
    parts: list[Any] = [opcode, engine]
    for k, v in operands.items():
        t = type(v)
        if t in _PLAIN_SCALARS:
            v = (t, v) if t is not float or v != 0.0 else _value_key(v)
        elif t in _PLAIN or isinstance(t, enum.EnumMeta):
            v = _value_key(v)
        elif hasattr(v, "buffer") and hasattr(v, "layout"):
            v = _tensor_key(v)
            if v is None:
                return None
        else:
            v = _value_key(v)
            if v is _NOT_PLAIN:
                return None
        parts.append(k)
        parts.append(v)
    for k, v in attrs.items():
        t = type(v)
        if t in _PLAIN_SCALARS:
            v = (t, v) if t is not float or v != 0.0 else _value_key(v)
        else:
            v = _value_key(v)
            if v is _NOT_PLAIN:
                return None
        parts.append(k)
        parts.append(v)
    return tuple(parts)


# Types whose _value_key is (type, value) (floats: but for zeros, whose sign counts).
_PLAIN_SCALARS = frozenset({bool, int, float, str, type(None)})


_SAME_GROUPS = (("same_partitions", partitions_of, "partition count"),
                ("same_elems", elems_of, "elements per partition"),
                ("same_shape", lambda t: tuple(t.shape), "shape"),
                ("same_dtype", lambda t: t.dtype.name, "dtype"))


def _check_limits(spec: InstructionSpec, chip: Any, tensors: Mapping[str, Any]) -> None:
    instr = spec.name
    lim = spec.limits
    pmax = _limit_value(chip, lim.get("max_partitions", "pmax"))
    dma = "dma" in spec.engines  # DMA queues gather any partitions; engines cannot
    quadrant = lim.get("quadrant", True)
    on_chip = {}
    for n, t in tensors.items():
        buf = t.buffer
        if not buf.on_chip:
            continue
        on_chip[n] = t
        lay = t.layout
        parts = lay.shape[0] if lay.shape else 1
        if parts > pmax:
            fail(instr, f"operand '{n}' has partition dimension {parts}", f"at most {pmax} (pmax)")
        if parts < 1:  # e.g. t[5:5]: the start-partition rule has no start for 0 partitions
            fail(instr, f"operand '{n}' covers 0 partitions (shape {list(lay.shape)})",
                 f"an on-chip access covers 1 to {pmax} partitions (nki-api.md §3.4 TC1, §3.5)")
        # The common passing cases inline (dense partitions, start partition 0); the checks
        # themselves decide (and word the error) otherwise.
        if not dma and parts > 1 and (lay.strides[0] * lay.dtype.itemsize != buf.nbytes
                                      or not buf.nbytes):
            check_dense_partitions(instr, n, t)
        if quadrant and t.region().partition_start != 0:
            check_quadrant(instr, n, t)
    if "min_partitions" in lim:
        for n, mn in lim["min_partitions"].items():
            if n in on_chip and partitions_of(on_chip[n]) < mn:
                fail(instr, f"operand '{n}' has {partitions_of(on_chip[n])} partitions",
                     f"at least {mn}")
    for group_key, fn, what in _SAME_GROUPS:
        if group_key not in lim:
            continue
        names = [n for n in lim[group_key] if n in tensors]
        vals = {n: fn(tensors[n]) for n in names}
        if len(set(vals.values())) > 1:
            got = ", ".join(f"{n}={v}" for n, v in vals.items())
            fail(instr, f"operands must have the same {what}: got {got}")
    for n, v in (lim.get("max_free") or {}).items():
        if n in tensors:
            mx = _limit_value(chip, v)
            if elems_of(tensors[n]) > mx:
                fail(instr, f"operand '{n}' has free size {elems_of(tensors[n])}",
                     f"at most {mx}" + (f" ({v})" if isinstance(v, str) else ""))
    for n, allowed in (lim.get("dtypes") or {}).items():
        if n in tensors and tensors[n].dtype.name not in allowed:
            fail(instr, f"operand '{n}' has dtype {tensors[n].dtype.name}",
                 f"allowed: {', '.join(allowed)}")
    for n, banned in (lim.get("not_dtypes") or {}).items():
        if n in tensors and tensors[n].dtype.name in banned:
            fail(instr, f"operand '{n}' has dtype {tensors[n].dtype.name}",
                 f"not allowed: {', '.join(banned)}")
    for n in lim.get("per_partition", ()):
        if n in tensors:
            t = tensors[n]
            if elems_of(t) != 1:
                fail(instr, f"operand '{n}' must be a scalar or a (P, 1) tensor, got shape "
                     f"{tuple(t.shape)}")
    if "max_psum_inputs" in lim:
        reads = [n for n, t in tensors.items()
                 if spec.operands[n].access != "write" and t.buffer.space == "psum"]
        if len(reads) > lim["max_psum_inputs"]:
            fail(instr, f"operands {', '.join(reads)} are all in psum",
                 f"at most {lim['max_psum_inputs']} input may be in psum")
    if "max_rank" in lim:
        for n, r in lim["max_rank"].items():
            if n in tensors and len(tensors[n].shape) > r:
                fail(instr, f"operand '{n}' has {len(tensors[n].shape)} dimensions", f"at most {r}")


def resolve_dtype(x: Any, what: str) -> dt.DType:
    try:
        return dt.resolve(x)
    except (TypeError, KeyError, ValueError) as e:
        raise ConstraintError(f"{what}: unknown dtype {x!r} (known: {', '.join(dt.ALL)})") from e
