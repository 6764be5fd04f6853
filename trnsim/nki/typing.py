"""nki.typing: `nt.tensor[shape]` parameter annotations, checked when a kernel is launched.

`nt.tensor[128, 512]` (or `nt.tensor[(128, 512)]`, optionally with a dtype as the last item)
annotates a kernel parameter; a launch whose argument has another shape raises
ConstraintError. Non-integer entries (a name, None, ...) match any size.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from trnsim import dtypes as _dt
from trnsim.errors import ConstraintError
from trnsim.program import capture_location


class _TensorAnnotation:
    """The value of `nt.tensor[...]`: an expected shape (and optional dtype)."""

    def __init__(self, shape: tuple[Any, ...] = (), dtype: Any = None):
        self.shape = shape
        self.dtype = dtype

    def __class_getitem__(cls, item: Any) -> _TensorAnnotation:
        items = item if isinstance(item, tuple) else (item,)
        dtype = None
        if items and _is_dtype(items[-1]):
            dtype, items = _dt.resolve(items[-1]), items[:-1]
        if len(items) == 1 and isinstance(items[0], (tuple, list)):
            items = tuple(items[0])
        return cls(tuple(items), dtype)

    def __repr__(self) -> str:
        inner = ", ".join(map(str, self.shape))
        return f"nt.tensor[{inner}{', ' + self.dtype.name if self.dtype is not None else ''}]"

    def check_value(self, value: Any, name: str) -> None:
        """Raise ConstraintError if a tensor argument does not match the annotation."""
        shape = getattr(value, "shape", None)
        if shape is None:
            return
        shape = tuple(shape)
        want = self.shape
        ok = len(shape) == len(want) and all(
            not isinstance(w, int) or w == s for w, s in zip(want, shape, strict=True)
        )
        if not ok:
            raise ConstraintError(
                f"kernel argument '{name}' has shape {list(shape)}; its "
                f"annotation {self!r} expects {list(want)}"
            )
        if self.dtype is not None and getattr(value, "dtype", None) != self.dtype:
            raise ConstraintError(
                f"kernel argument '{name}' has dtype {value.dtype}; its "
                f"annotation {self!r} expects {self.dtype.name}"
            )


def _is_dtype(x: Any) -> bool:
    if isinstance(x, (int, tuple, list)) or x is None:
        return False
    try:
        _dt.resolve(x)
    except (TypeError, KeyError, ValueError):
        return False
    return True


tensor = _TensorAnnotation


def _resolve(ann: Any, fn: Callable[..., Any]) -> Any:
    if isinstance(ann, str):  # `from __future__ import annotations` in the user's module
        try:
            return eval(ann, getattr(fn, "__globals__", {}))
        except Exception:
            return None
    return ann


def check_annotations(fn: Callable[..., Any], args: tuple | list, kwargs: dict[str, Any]) -> None:
    """Check the launch arguments against `nt.tensor[...]` parameter annotations of fn."""
    try:
        sig = inspect.signature(fn)
        bound = sig.bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return  # signature errors surface when the kernel is called
    for name, value in bound.arguments.items():
        ann = _resolve(sig.parameters[name].annotation, fn)
        check = getattr(ann, "check_value", None)
        if callable(check):
            try:
                check(value, name)
            except ConstraintError as e:
                raise e.with_loc(capture_location()) from None
