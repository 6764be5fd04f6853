"""Shared fixtures: nki aliases, a seeded rng, chips, and --update-traces."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim

trnsim.install_nki_aliases()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-traces", action="store_true", default=False,
                     help="regenerate golden traces in traces/ instead of diffing them")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture
def update_traces(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-traces"))
