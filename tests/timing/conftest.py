"""Fixtures for timing tests: the tiny chip (1 GHz everywhere, round numbers), a builder."""

from __future__ import annotations

import pytest

from trnsim.chip import load_chip

from .builders import TINY, ProgramBuilder


@pytest.fixture
def tiny_chip():
    return load_chip(TINY)


@pytest.fixture
def builder():
    return ProgramBuilder()
