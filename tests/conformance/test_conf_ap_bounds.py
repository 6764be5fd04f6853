"""An access pattern (`.ap()`) is checked where an instruction uses it: a pattern that would
leave its tensor but is never used (nki-library's output_projection_tkg.py makes the last
tile's pattern before testing whether that tile exists) is not an error; used, it is, at the
instruction's line."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim.errors import OutOfBoundsError

W = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)


def _tiles(w, use_last: bool):
    out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    w_sb = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_sb, src=w)
    r = nl.ndarray((128, 12), nl.float32, buffer=nl.sbuf)
    for j in range(3):  # tiles of 4 columns: the third starts past the end
        tile = w_sb.ap(pattern=[[8, 128], [1, 4]], offset=4 * j)
        if j < 2 or use_last:
            nisa.tensor_copy(dst=r[:, 4 * j:4 * j + 4], src=tile)  # USE
    nisa.dma_copy(dst=out, src=r[:, 0:8])
    return out


def test_unused_out_of_bounds_pattern_is_not_an_error():
    got = nki.simulate(_tiles)(W, False)
    np.testing.assert_array_equal(got, W)


def test_used_out_of_bounds_pattern_fails_at_the_instruction():
    with pytest.raises(OutOfBoundsError) as err:
        nki.simulate(_tiles)(W, True)
    text = str(err.value)
    assert "# USE" in text and "tensor_copy operand 'src'" in text
    assert "the access reaches partitions [1, 128]" in text  # offset 8 wraps to partition 1
