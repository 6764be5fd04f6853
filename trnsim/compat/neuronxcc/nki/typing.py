"""neuronxcc.nki.typing (nt): shape annotations `nt.tensor[...]`, `nt.mutable_tensor`, and
`nt.scalar`.

`nt.tensor[128, 512]` (or `nt.tensor[[128, 512], nl.float32]`) annotates a shape, checked when
the kernel runs (err_annotation_shape_mismatch) on parameters and on annotated local
assignments; with a dtype it is also an abstract argument (nki.benchmark(kernel)(
nt.tensor[[8192, 4096], nl.bfloat16], ...) runs on an uninitialized tensor of that type).
`nt.mutable_tensor` marks a kernel parameter the kernel may write (it must be returned).
"""

from __future__ import annotations

from typing import Any

from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.errors import ConstraintError


class TensorType:
    """An nt.tensor[...] annotation: a shape (ints, or None for any size) and maybe a dtype."""

    def __init__(self, shape: tuple[Any, ...] | None, dtype: Any = None, mutable: bool = False):
        self.shape = None if shape is None else tuple(shape)
        self.dtype = dtype
        self.mutable = mutable

    def __repr__(self) -> str:
        head = "nt.mutable_tensor" if self.mutable else "nt.tensor"
        if self.shape is None:
            return head
        dt = f", {self.dtype}" if self.dtype is not None else ""
        return f"{head}[{list(self.shape)}{dt}]"

    def __getitem__(self, item: Any) -> TensorType:
        return _subscript(item, self.mutable)

    def matches(self, shape: tuple[int, ...]) -> bool:
        if self.shape is None:
            return True
        return len(self.shape) == len(shape) and all(
            want is None or want is Ellipsis or int(want) == int(got)
            for want, got in zip(self.shape, shape, strict=True)
        )

    def check(self, value: Any, name: str, loc: Any = None) -> Any:
        """value itself, or err_annotation_shape_mismatch if its shape differs."""
        shape = getattr(value, "shape", None)
        if shape is not None and not self.matches(tuple(shape)):
            raise b1_error(
                ConstraintError,
                "err_annotation_shape_mismatch",
                f"shape of `{name}{list(shape)}` does not match the expected shape "
                f"of {list(self.shape)}",
                loc,
            )
        return value


def _subscript(item: Any, mutable: bool) -> TensorType:
    items = item if isinstance(item, tuple) else (item,)
    if items and isinstance(items[0], (list, tuple)):  # tensor[[P, F], dtype]
        return TensorType(tuple(items[0]), items[1] if len(items) > 1 else None, mutable)
    return TensorType(tuple(items), None, mutable)


class _TensorAnnotations(TensorType):
    """nt.tensor / nt.mutable_tensor: subscript for a shape; bare means any shape."""


tensor = _TensorAnnotations(None)
mutable_tensor = _TensorAnnotations(None, mutable=True)


def scalar(value: Any) -> Any:
    """A runtime scalar for the do-while pattern: a Python value as is, or the value of a 1x1
    tile read now (kernels run as Python here, so `while cond:` tests it directly)."""
    from trnsim.compat.neuronxcc.nki._tensor import tensor as b1_tensor

    if isinstance(value, b1_tensor):
        value._ready()
        if value.layout().size != 1:
            raise ConstraintError(f"nt.scalar: expected a 1x1 tile, got {list(value.shape)}")
        return value.operand().read().reshape(-1)[0].item()
    return value


__all__ = ["TensorType", "mutable_tensor", "scalar", "tensor"]
