"""pytest plugin: `pytest --trnsim` makes `nki` and `neuronxcc.nki` resolve to trnsim, so an
existing kernel test suite runs unchanged on the simulator."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trnsim")
    group.addoption("--trnsim", action="store_true", default=False,
                    help="run NKI kernels on trnsim: alias nki / neuronxcc.nki to trnsim")
    group.addoption("--trnsim-chip", default=None,
                    help="chip to simulate (trn1, trn2, trn3; sets NEURON_PLATFORM_TARGET_OVERRIDE)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--trnsim", default=False):
        import os

        from trnsim.aliases import install_nki_aliases

        chip = config.getoption("--trnsim-chip", default=None)
        if chip:
            os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = chip
        os.environ.setdefault("NKI_SIMULATOR", "1")
        install_nki_aliases()
