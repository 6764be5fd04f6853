"""`if t:` on a kernel's HBM tensor argument tests that it was given (nki-library's idiom for an
optional tensor parameter); on-chip tiles keep the value rules (one element: its value; more:
the documented ambiguous-truth-value error)."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim.errors import KernelError


def _copy_if_given(a, b):
    """out = b if b is given, else a."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    src = b if b else a
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("fill", [0.0, 2.0], ids=["zeros", "twos"])
def test_hbm_argument_is_true_whatever_its_values(fill):
    a = np.ones((4, 8), np.float32)
    b = np.full((4, 8), fill, np.float32)
    np.testing.assert_array_equal(nki.simulate(_copy_if_given)(a, b), b)


def test_absent_argument_is_false():
    a = np.ones((4, 8), np.float32)
    np.testing.assert_array_equal(nki.simulate(_copy_if_given)(a, None), a)


def test_multi_element_tile_truth_is_still_an_error():
    def kernel(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        if t:  # <- rule
            pass
        return a

    with pytest.raises(KernelError, match="truth value of a multi-element tensor") as exc:
        nki.simulate(kernel)(np.ones((4, 8), np.float32))
    assert exc.value.loc.code == "if t:  # <- rule"
