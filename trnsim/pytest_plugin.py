"""pytest plugin: `pytest --trnsim` makes `nki` and `neuronxcc.nki` resolve to trnsim, so an
existing kernel test suite runs unchanged on the simulator.

The aliases are installed before the suite's conftest.py files are imported (they often
`import nki` at the top), and only when --trnsim is given. One alias is always offered, lazily:
`nki_cpu_simulator`, the name of AWS's CPU simulator that nki-library's harness imports in
`--test-mode simulation` (only where no real nki_cpu_simulator is installed; nothing is imported
until the harness asks for it).
"""

from __future__ import annotations

import os
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trnsim")
    group.addoption(
        "--trnsim",
        action="store_true",
        default=False,
        help="run NKI kernels on trnsim: alias nki / neuronxcc.nki to trnsim",
    )
    group.addoption(
        "--trnsim-chip",
        default=None,
        help="chip to simulate: trn1, trn2 or trn3 (sets NEURON_PLATFORM_TARGET_OVERRIDE)",
    )


def _install(chip: str | None) -> None:
    from trnsim.aliases import install_nki_aliases

    if chip:
        os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = chip
    os.environ.setdefault("NKI_SIMULATOR", "1")
    install_nki_aliases()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    from trnsim.aliases import install_harness_aliases

    install_harness_aliases()
    ns: Any = early_config.known_args_namespace
    if getattr(ns, "trnsim", False):
        _install(getattr(ns, "trnsim_chip", None))


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--trnsim", default=False):
        _install(config.getoption("--trnsim-chip", default=None))
