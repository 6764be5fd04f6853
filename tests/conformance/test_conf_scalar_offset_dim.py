"""`.ap(scalar_offset=s, indirect_dim=k)`: the runtime offset moves the start address by
s x (the stride of dimension k) and is bounded by the tensor, not by dimension k's size
(nki-api.md §4.2 defines only the address; a runtime address outside the tensor is the
documented error). nki-library's TensorView selects a rank's slice through a size-1 dimension
that shares the wanted stride (attention_block_tkg_sharding.py:219)."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim.errors import OutOfBoundsError


def slice_of_rank(x, rank):
    """x: (H, R, 1, D) in HBM; take x[:, rank] through the size-1 dimension 2, whose stride
    (D) is the stride of the rank dimension."""
    h, r, _one, d = x.shape
    s = nl.ndarray((1, 1), dtype=rank.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=rank)
    out = nl.ndarray((h, d), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(
        dst=out,
        src=x.ap(pattern=[[r * d, h], [1, d]], offset=0, scalar_offset=s, indirect_dim=2),
    )
    return out


@pytest.mark.parametrize("rank", [0, 1, 3])
def test_a_scalar_offset_past_a_size_one_dimension_reads_by_stride(rank):
    x = np.arange(4 * 4 * 1 * 8, dtype=np.float32).reshape(4, 4, 1, 8)
    out = nki.simulate(slice_of_rank)(x, np.array([[rank]], np.int32))
    np.testing.assert_array_equal(out, x[:, rank, 0, :])


def test_a_scalar_offset_past_the_tensor_is_refused_with_the_row_reached():
    x = np.zeros((4, 4, 1, 8), dtype=np.float32)
    with pytest.raises(OutOfBoundsError) as exc:
        nki.simulate(slice_of_rank)(x, np.array([[4]], np.int32))
    msg = exc.value.message
    # rows of the indexed dimension's stride (8 elements): 16 in the tensor; the pattern's
    # last head (row 12) from offset 4 reaches row 16
    assert "offset 4 plus 12 rows of the access pattern reaches index 16, outside [0, 16)" in msg
    assert "rows of 8 elements in the hbm tensor" in msg and "oob_mode" in msg
    with pytest.raises(OutOfBoundsError, match=r"offset 16 is outside \[0, 16\)"):
        nki.simulate(slice_of_rank)(x, np.array([[16]], np.int32))
