"""Fixtures of the PyTorch-device tests: the device (registered once per process), its modes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import trnsim.backend  # noqa: E402  (registers the device)

sys.path.insert(0, str(Path(__file__).parent))

DEV = trnsim.backend.runtime.name


@pytest.fixture
def dev() -> str:
    return DEV


@pytest.fixture
def rt():
    return trnsim.backend.runtime


@pytest.fixture
def reference_mode(rt):
    old = rt.mode
    rt.mode = "reference"
    yield
    rt.mode = old


@pytest.fixture
def kernel_mode(rt):
    old = rt.mode
    rt.mode = "kernel"
    yield
    rt.mode = old


@pytest.fixture
def cpu_fallback(rt):
    old = rt.fallback
    rt.fallback = "cpu"
    yield
    rt.fallback = old
