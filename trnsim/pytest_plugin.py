"""pytest plugin: `pytest --trnsim` makes `nki` and `neuronxcc.nki` resolve to trnsim, so an
existing kernel test suite runs unchanged on the simulator.

The aliases are installed before the suite's conftest.py files are imported (they often
`import nki` at the top), and only when --trnsim is given. One alias is always offered, lazily:
`nki_cpu_simulator`, the name of AWS's CPU simulator that nki-library's harness imports in
`--test-mode simulation` (only where no real nki_cpu_simulator is installed; nothing is imported
until the harness asks for it).

`--trnsim-profile DIR` times every kernel launch of each test and writes the test's timeline
to DIR/<test id>.pftrace (with its .summary.json, as `trnsim profile` writes them); the test's
simulated time goes into its report as the user property `trnsim_time_us` (junitxml shows it)
and the terminal summary lists the slowest tests by simulated time.
"""

from __future__ import annotations

import os
import re
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
    group.addoption(
        "--trnsim-profile",
        default=None,
        metavar="DIR",
        help="time each test's kernel launches and write its timeline to DIR/<test id>.pftrace",
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


_PROFILED = pytest.StashKey[list]()


def _trace_name(nodeid: str) -> str:
    """A file name for a test id: path separators and brackets become safe characters."""
    name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", nodeid.replace("::", "."))
    return name.strip("_.")[:180] or "test"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    out_dir = item.config.getoption("--trnsim-profile", default=None)
    if not out_dir:
        yield
        return
    from trnsim.nki.runner import record_launches, stop_recording

    runs: list = []
    token = record_launches(runs)
    try:
        yield
    finally:
        stop_recording(token)
    if not runs:
        return
    from trnsim.cli_profile import write_profile

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, _trace_name(item.nodeid) + ".pftrace")
    _, summaries = write_profile(runs, path)
    total = sum(s["total_time_us"] for s in summaries)
    item.user_properties.append(("trnsim_time_us", round(total, 3)))
    item.config.stash.setdefault(_PROFILED, []).append((total, len(runs), item.nodeid, path))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    done = config.stash.get(_PROFILED, [])
    if not done:
        return
    terminalreporter.section("trnsim profiles")
    for total, launches, nodeid, _ in sorted(done, reverse=True)[:10]:
        terminalreporter.write_line(f"{total:12.1f} us  {launches:3d} launch(es)  {nodeid}")
    out_dir = config.getoption("--trnsim-profile")
    terminalreporter.write_line(f"{len(done)} timeline(s) in {out_dir} (slowest first; "
                                "open them with `trnsim view` or ui.perfetto.dev)")
