"""Host arguments after a launch (trnsim/nki/host_io.py): whether an argument's HBM copy still
holds the host bytes is told exactly, whichever word size the comparison uses."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trnsim import dtypes as dt
from trnsim.core import Device
from trnsim.nki import host_io
from trnsim.nki.runner import resolve_chip
from trnsim.nki.tensor import NkiTensor


@pytest.mark.parametrize(("n", "dtype"), [(1, np.float32), (7, ml_dtypes.bfloat16),
                                          (4096, np.float32), (3 << 20, np.uint8),
                                          ((1 << 21) + 3, np.int16)])
def test_same_bytes_is_the_byte_comparison(n, dtype, monkeypatch):
    monkeypatch.setattr(host_io, "_COMPARE_BYTES", 1 << 20)  # several slices
    rng = np.random.default_rng(n)
    host = rng.integers(0, 255, n * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)
    device = Device(resolve_chip("trn2"))
    view = device.hbm_from_array(host, dt.resolve(np.dtype(dtype).name))
    tensor = NkiTensor(view.buffer, view.layout)
    assert host_io._same_bytes(tensor, host)
    raw = view.buffer.raw()
    for at in {0, raw.size // 2, raw.size - 1, min(raw.size - 1, (1 << 20) + 1)}:
        raw[at] ^= 1
        assert not host_io._same_bytes(tensor, host), at
        raw[at] ^= 1
    assert host_io._same_bytes(tensor, host)


def test_malloc_tuning_is_skipped_when_switched_off(monkeypatch):
    from trnsim import hostmem

    monkeypatch.setenv(hostmem.ENV_MALLOC, "0")
    assert hostmem.tune_malloc.__wrapped__() is False
    monkeypatch.setenv(hostmem.ENV_MALLOC, "1")
    assert isinstance(hostmem.tune_malloc.__wrapped__(), bool)
