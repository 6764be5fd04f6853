"""Planted error: sendrecv outside an LNC2 launch.

Rule: nki-api.md §7 sendrecv (LNC2 only).
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: UnsupportedError: sendrecv: this launch runs one program
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def kernel(a):
    s = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    d = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=0.0)
    nisa.sendrecv(src=s, dst=d, send_to_rank=1, recv_from_rank=1, pipe_id=0)  # ERROR


nki.simulate(kernel, chip='trn2')(np.ones((128, 512), np.float32))
