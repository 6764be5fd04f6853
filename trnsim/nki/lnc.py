"""Cooperative execution of the programs of one LNC launch: one thread each, one baton.

A `kernel[2]` launch runs two programs (program_id 0 and 1) on physical cores 0 and 1. Their
cross-core instructions (nisa.core_barrier, nisa.sendrecv) need both programs alive at once, so
each program runs in its own Python thread. Exactly one thread runs at a time: it holds the
baton until it blocks on a peer, finishes, or has issued QUANTUM instructions since it took the
baton (current-API instructions; Beta-1 cooperative kernels switch only where they block),
then hands it to the next runnable program in rank order. The quantum keeps the
programs abreast, as the cores run side by side on hardware: a kernel whose cores touch the
same HBM bytes with no barrier between (a race, warned about) then sees them in the order two
concurrently running cores would, not one core's whole program before the other's (core 1
zeroing its slice at the start while core 0 writes into it at the end). Switch points depend
only on the kernel, never on the OS scheduler, so a launch is bit-identical run to run. Knows
nothing about instructions or values.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trnsim.errors import KernelError
from trnsim.program import SourceLocation

QUANTUM = 256  # instructions a program issues before the baton moves on


class _Aborted(BaseException):
    """Unwinds a waiting program after another one failed (BaseException: user code that
    catches Exception must not swallow it)."""


@dataclass
class _Wait:
    ready: Callable[[], bool]
    what: str  # e.g. "core_barrier #0"
    loc: SourceLocation | None


class Programs:
    """The baton shared by the programs of one launch (`ctx.extra["lnc"]`).

    `state` is scratch space for the rendezvous protocols built on top (barrier counts,
    posted sendrecvs); only the thread holding the baton touches it.
    """

    def __init__(self, count: int):
        self.count = count
        self.state: dict[str, Any] = {}
        self._cv = threading.Condition()
        self._turn = 0
        self._status = ["ready"] * count  # ready | blocked | done | failed
        self._waits: list[_Wait | None] = [None] * count
        self._abort = False
        self._failure: BaseException | None = None
        self._results: list[Any] = [None] * count
        self._issued = 0  # instructions issued since the holder took the baton

    # ------------------------------------------------------------ launching
    def run(self, bodies: list[Callable[[], Any]]) -> list[Any]:
        """Run bodies[p] as program p, cooperatively; return their results in rank order."""
        if len(bodies) != self.count:
            raise ValueError(f"expected {self.count} program bodies, got {len(bodies)}")
        threads = []
        for p, body in enumerate(bodies):
            ctx = contextvars.copy_context()  # threads start with an empty context otherwise
            threads.append(
                threading.Thread(
                    target=ctx.run,
                    args=(self._main, p, body),
                    name=f"trnsim-program-{p}",
                    daemon=True,
                )
            )
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self._waits = [None] * self.count  # (their conditions hold the waiting programs)
        failure, self._failure = self._failure, None
        if failure is not None:
            try:
                raise failure
            finally:  # its traceback holds this frame: no cycle through the local
                del failure
        return list(self._results)

    def _main(self, p: int, body: Callable[[], Any]) -> None:
        with self._cv:
            while self._turn != p and not self._abort:
                self._cv.wait()
            if self._abort:
                return
        try:
            self._results[p] = body()
        except _Aborted:
            return
        except BaseException as e:
            with self._cv:
                self._status[p] = "failed"
                self._fail(e)
            return
        with self._cv:
            self._status[p] = "done"
            self._pass_baton(p)

    # ------------------------------------------------------------ blocking
    def wait_until(
        self, program: int, ready: Callable[[], bool], what: str, loc: SourceLocation | None
    ) -> None:
        """Block `program` (the caller, holding the baton) until `ready()` is true.

        Other programs run meanwhile; if none can run, the launch has deadlocked and fails
        with a KernelError at the waiting program's line.
        """
        if ready():
            return
        with self._cv:
            self._status[program] = "blocked"
            self._waits[program] = _Wait(ready, what, loc)
            self._pass_baton(program)
            while self._turn != program and not self._abort:
                self._cv.wait()
            if self._abort:
                raise _Aborted
            self._status[program] = "ready"
            self._waits[program] = None

    def tick(self, program: int) -> None:
        """`program` (holding the baton) issued an instruction: after QUANTUM of them the
        baton goes to the next runnable program, and comes back when that one blocks,
        finishes or has issued its own quantum."""
        self._issued += 1
        if self._issued < QUANTUM:
            return
        with self._cv:
            self._pass_baton(program)
            while self._turn != program and not self._abort:
                self._cv.wait()
            if self._abort:
                raise _Aborted

    def _runnable(self, q: int) -> bool:
        st = self._status[q]
        if st == "ready":
            return True
        wait = self._waits[q]
        return st == "blocked" and wait is not None and wait.ready()

    def _pass_baton(self, p: int) -> None:
        """Give the baton to the next runnable program after p (lock held)."""
        for k in range(1, self.count + 1):
            q = (p + k) % self.count
            if self._runnable(q):
                self._turn = q
                self._issued = 0
                self._cv.notify_all()
                return
        blocked = [q for q in range(self.count) if self._status[q] == "blocked"]
        if blocked:
            self._fail(self._deadlock(blocked))

    def _deadlock(self, blocked: list[int]) -> KernelError:
        q = blocked[0]
        wait = self._waits[q]
        others = []
        for r in range(self.count):
            if r == q:
                continue
            if self._status[r] == "done":
                others.append(f"program {r} finished without reaching it")
            elif self._status[r] == "blocked" and self._waits[r] is not None:
                w = self._waits[r]
                where = f" ({w.loc.short()})" if w.loc is not None else ""
                others.append(f"program {r} waits at {w.what}{where}")
        what = wait.what if wait is not None else "a cross-core instruction"
        return KernelError(
            f"deadlock: program {q} waits at {what}, but {'; '.join(others)}; both programs "
            "of an LNC2 kernel must issue the same core_barrier and sendrecv calls in the "
            "same order",
            wait.loc if wait is not None else None,
        )

    def _fail(self, e: BaseException) -> None:
        if self._failure is None:
            self._failure = e
        self._abort = True
        self._cv.notify_all()
