"""Operand records: the timing model's view of one tensor operand. Knows nothing of values or time.

An instruction's record holds, per tensor operand, the region it touches (its address) and
fields that depend on the layout's geometry alone (dtype, shape, strides): a kernel's loops
issue the same geometry at new addresses, so the geometry fields are worked out once.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from trnsim import dtypes as dt
from trnsim.memory import Layout, View
from trnsim.program import Operand


def contiguous_run_bytes(lay: Layout, on_chip: bool) -> int:
    """Longest contiguous byte run of a layout's innermost dims (a DMA descriptor's size)."""
    isz = lay.dtype.itemsize
    run = 1
    expect = 1
    dims = list(zip(lay.shape, lay.strides, strict=True))
    if on_chip and dims:
        dims = dims[1:]
    for n, s in reversed(dims):
        if n == 1:
            continue
        if s != expect:
            break
        run *= n
        expect *= n
    return run * isz


def operand_record(name: str, view: View) -> Operand:
    """The timing model's record of one operand (cached on its layout: whole tiles recur).

    A static view's record is a function of its layout, name, tensor name and buffer
    placement (the region is region_of's, which reads only the placement), so it is looked
    up by those before the region is worked out; a view with a runtime offset (its region is
    its whole buffer) by the region's identity (the record holds the region, so its id cannot
    be reused while the entry lives)."""
    lay = view.layout
    buf = view.buffer
    records = lay.__dict__.get("_operands")
    if records is None:
        records = lay.__dict__["_operands"] = {}
    if getattr(view, "dynamic", None) is None:
        key = (name, buf.name, buf.place)
        rec = records.get(key)
        if rec is not None:
            return rec
        region = view.region()
    else:
        region = view.region()
        key = (name, buf.name, id(region))
        rec = records.get(key)
        if rec is not None and rec.region is region:
            return rec
    if len(records) >= 256:
        records.clear()
    geometry = (lay.dtype.name, lay.shape, lay.strides, buf.on_chip)
    fields = _GEOMETRY.get(geometry)  # (by the dtype's name: a DType hashes in Python)
    if fields is None:
        if len(_GEOMETRY) >= 4096:
            _GEOMETRY.clear()
        fields = _GEOMETRY[geometry] = _geometry_fields(lay.dtype, lay.shape, lay.strides,
                                                        buf.on_chip)
    rec = records[key] = _new_operand(fields, name, region, buf.name)
    return rec


_GEOMETRY: dict[tuple, dict[str, Any]] = {}  # (dtype name, shape, strides, on chip) -> fields


def _new_operand(fields: dict[str, Any], name: str, region: Any, tensor_name: str) -> Operand:
    """Operand(name, region, **fields, tensor_name=...) without the frozen dataclass __init__
    (one object.__setattr__ per field, ~8x the cost): the fields are the ones that __init__
    would set, all checked once in _geometry_fields."""
    rec = Operand.__new__(Operand)
    d = rec.__dict__
    d.update(fields)
    d["name"] = name
    d["region"] = region
    d["tensor_name"] = tensor_name
    return rec


@functools.lru_cache(maxsize=4096)
def _geometry_fields(dtype: dt.DType, shape: tuple[int, ...], strides: tuple[int, ...],
                     on_chip: bool) -> dict[str, Any]:
    """The Operand fields dtype .. contiguous_bytes and pattern of a layout's geometry: a
    function of its shape, strides and dtype alone, so a loop's fresh slices share them."""
    lay = Layout(dtype, 0, shape, strides)
    isz = dtype.itemsize
    inner = 0
    for n, s in reversed(list(zip(shape, strides, strict=True))):
        if n > 1:
            inner = abs(s) * isz
            break
    parts = shape[0] if on_chip and shape else 1
    per_partition = math.prod(shape[1:] if on_chip else shape)
    # The one Operand the dataclass would build, so the fields are exactly its own.
    proto = Operand("", None, dtype.name, shape, parts, per_partition,  # type: ignore[arg-type]
                    lay.size * isz, inner or isz, contiguous_run_bytes(lay, on_chip), "",
                    None if on_chip else _pattern_of(isz, shape, strides))
    fields = dict(proto.__dict__)
    for k in ("name", "region", "tensor_name"):
        del fields[k]
    return fields


@functools.lru_cache(maxsize=4096)
def _pattern_of(isz: int, shape: tuple[int, ...], strides: tuple[int, ...]
                ) -> tuple[int, tuple[tuple[int, int], ...]]:
    """The exact bytes an HBM layout touches relative to its lowest byte (timing/races.py)."""
    first = -sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s < 0 and n > 0)
    return first * isz, tuple((s * isz, n) for n, s in zip(shape, strides, strict=True))
