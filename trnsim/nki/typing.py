"""nki.typing: shape annotations `nt.tensor[shape]` (checked when a kernel is called)."""

from __future__ import annotations

from typing import Any


class _TensorAnnotation:
    def __init__(self, shape: tuple[Any, ...] = (), dtype: Any = None):
        self.shape = shape
        self.dtype = dtype

    def __class_getitem__(cls, item: Any) -> _TensorAnnotation:
        item = item if isinstance(item, tuple) else (item,)
        return cls(item)

    def __repr__(self) -> str:
        return f"nt.tensor[{', '.join(map(str, self.shape))}]"


tensor = _TensorAnnotation
