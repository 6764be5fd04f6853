"""`if t:` on a kernel's HBM tensor argument tests that it was given (nki-library's idiom for an
optional tensor parameter); so is a multi-element tile the kernel declared (with a warning);
the result of an nl operation keeps the value rules (one element: its value; more: the
ambiguous-truth-value error)."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim.errors import KernelError, SimulationWarning


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


def test_a_declared_multi_element_tile_is_true_with_a_warning():
    """nki-library's mlp_tkg tests `if params.expert_params.expert_index:` on the SBUF tile
    moe_block_tkg declares: a declared tile in `if` is a handle (true), told once per line."""

    def kernel(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        if t:  # <- handle
            nisa.dma_copy(dst=out, src=t)
        return out

    a = np.zeros((4, 8), np.float32)  # all zeros: the values would say false
    with pytest.warns(SimulationWarning, match="multi-element tile: taken as true") as rec:
        np.testing.assert_array_equal(nki.simulate(kernel)(a), a)
    assert rec[0].filename == __file__


def test_the_result_of_an_nl_operation_in_if_is_still_an_error():
    def kernel(a):
        x = nl.load(a)
        if nl.greater(x, 0.0):  # <- rule
            pass
        return a

    with pytest.raises(KernelError, match="truth value of a multi-element tensor") as exc:
        nki.simulate(kernel)(np.ones((4, 8), np.float32))
    assert exc.value.loc.code == "if nl.greater(x, 0.0):  # <- rule"
