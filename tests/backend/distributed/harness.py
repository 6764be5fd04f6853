"""Launching a multi-process test: one process per rank on a free port, a wall-clock limit
(the processes are killed past it, with their output in the failure), results per rank.

Ranks are forked from a forkserver that has imported torch and trnsim.backend once, so a
launch costs no per-rank interpreter start-up (the slow part on a small machine).
"""

from __future__ import annotations

import multiprocessing as mp
import socket
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
_CTX = mp.get_context("forkserver")
_CTX.set_forkserver_preload(["torch", "torch.distributed", "trnsim.backend", "dist_worker"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(scenario: str, ranks: int, outdir: Path, env: dict | None = None,
           timeout_s: float = 240.0) -> list[dict]:
    """Run `scenario` on `ranks` processes; return each rank's results (dict)."""
    import dist_worker

    port = str(free_port())
    full_env = {"OMP_NUM_THREADS": "1", **(env or {})}
    procs = [_CTX.Process(target=dist_worker.child,
                          args=(scenario, r, ranks, port, str(outdir), full_env), daemon=True)
             for r in range(ranks)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    for p in procs:
        p.join(max(0.1, deadline - time.monotonic()))
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(5)
    if hung:
        raise AssertionError(f"{scenario} on {ranks} ranks: ranks {hung} ran past "
                             f"{timeout_s:g} s and were killed; output:\n" + _logs(outdir, ranks))
    results = []
    for r in range(ranks):
        path = outdir / f"rank{r}.pt"
        if not path.exists():
            raise AssertionError(f"rank {r} wrote no results; output:\n" + _logs(outdir, ranks))
        results.append(torch.load(path, weights_only=False))
    return results


def _logs(outdir: Path, ranks: int) -> str:
    parts = []
    for r in range(ranks):
        p = outdir / f"rank{r}.log"
        if p.exists():
            parts.append(f"--- rank {r} ---\n" + p.read_text()[-4000:])
    return "\n".join(parts)
