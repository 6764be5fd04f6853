"""Helpers shared by the select and GpSimd semantics tests: load/store tiles, simulate, check
that a rule's error lands on the kernel line marked `# <- rule`."""

from __future__ import annotations

import inspect

import nki
import nki.isa as nisa
import nki.language as nl
import pytest
from source_paths import assert_no_internal_path

from trnsim.errors import ConstraintError
from trnsim.nki.runner import run_kernel


def op(name):
    """nl.<name> once the language module has it, else the name (both resolve the same)."""
    return getattr(nl, name, name)


def load(x, dtype=None):
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def store(t):
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def sim(kernel, *args, chip=None):
    return nki.simulate(kernel, **({"chip": chip} if chip else {}))(*args)


def raises_at(kernel, *args, match, chip=None, error=ConstraintError):
    """The kernel fails with `error` at its line marked `# <- rule`, no internal path."""
    with pytest.raises(error, match=match) as exc:
        sim(kernel, *args, chip=chip)
    lines, start = inspect.getsourcelines(kernel)
    want = start + next(i for i, text in enumerate(lines) if "# <- rule" in text)
    assert exc.value.loc is not None
    assert exc.value.loc.lineno == want
    assert_no_internal_path(str(exc.value))
    return exc.value


def record(kernel, *args, opcode):
    run = run_kernel(kernel, args, {})
    return next(i for i in run.program if i.opcode == opcode)
