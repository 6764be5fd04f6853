"""Run one nki-library test in this process, so `trnsim profile` records its kernel launch.

    trnsim profile tools/nkilib_profile.py CHECKOUT NODEID -o out.pftrace --chip trn2

CHECKOUT is an nki-library checkout, NODEID a test of its simulation suite (as
`pytest --collect-only -q` prints it, relative to CHECKOUT). The test builds the kernel's
inputs and golden itself; its kernel runs through `nki.cpu_simulate` on trnsim, and `trnsim
profile` writes the timeline of every launch. pytest's own report is printed.
"""

from __future__ import annotations

import os
import pathlib
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    checkout, nodeid = pathlib.Path(argv[0]).resolve(), argv[1]
    tools = str(pathlib.Path(__file__).resolve().parent)
    sys.path[:0] = [str(checkout / "src"), tools]
    os.environ.setdefault("NEURON_PYTHONHASHSEED", "0")
    os.chdir(checkout)
    import pytest

    return int(pytest.main([nodeid if nodeid.startswith("test/") else "test/" + nodeid,
                            "--test-mode", "simulation", "--trnsim", "-p",
                            "nkilib_upstream_fixes", "-p", "no:cacheprovider", "-q"]))


if __name__ == "__main__":
    rc = main(sys.argv[1:])
    if rc:  # exit quietly on success: `trnsim profile` writes the trace after the script ends
        sys.exit(rc)
