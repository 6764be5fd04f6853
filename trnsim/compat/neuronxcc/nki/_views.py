"""Beta-1 tensor.reshape and tensor.view(dtype): new whole-tensor bases over the same storage.

Both reuse the current API's layout algebra (trnsim.nki.views), which refuses a reshape that
would need a copy. Knows nothing about instructions.
"""

from __future__ import annotations

from typing import Any

from trnsim.compat.neuronxcc.nki._tensor import tensor
from trnsim.errors import ConstraintError
from trnsim.nki import view_shapes as vs


def reshape(t: tensor, shape: tuple[int, ...]) -> tensor:
    """The access reshaped (row-major element order); the partition dim stays on chip."""
    lay = t.layout()
    if t.on_chip and t.ndim and t.partition_axis() not in (0, None):
        raise ConstraintError(
            f"reshape of `{t.name}`: index away the block dimensions first (shape {list(t.shape)})"
        )
    new = vs.reshape(lay, shape, t.on_chip, t.name)
    return tensor.whole(t._buf, new, 0 if t.on_chip else None)


def bitcast(t: tensor, dtype: Any) -> tensor:
    """The same bytes read as another dtype; the last dimension scales by the size ratio."""
    from trnsim.compat.neuronxcc.nki._create import resolve_dtype

    new_dtype = resolve_dtype(dtype)
    lay = t.layout()
    f = t._buf.elems_per_partition(t.dtype) if t.on_chip else None
    new = vs.view_dtype(lay, new_dtype, f, t.name)
    return tensor.whole(t._buf, new, 0 if t.on_chip else None)
