"""nki.isa wrappers for vector instructions: NKI's signature and docstring, then one `_issue` call."""

from __future__ import annotations

from typing import Any

from trnsim.nki._isa_base import _issue, engine


def tensor_tensor(dst: Any, data1: Any, data2: Any, op: Any, engine: engine = engine.unknown,
                  name: str | None = None) -> None:
    """dst = data1 <op> data2, element-wise (Vector by default; GpSimd for exact int32)."""
    _issue("tensor_tensor", engine, name=name, dst=dst, data1=data1, data2=data2, op=op)


def memset(dst: Any, value: Any, engine: engine = engine.unknown, name: str | None = None) -> None:
    """Fill dst with a compile-time constant."""
    _issue("memset", engine, name=name, dst=dst, value=value)


def tensor_copy(dst: Any, src: Any, engine: engine = engine.unknown, name: str | None = None) -> None:
    """Copy src to dst within SBUF/PSUM (bit-exact on Vector/GpSimd when dtypes match)."""
    _issue("tensor_copy", engine, name=name, dst=dst, src=src)
