"""pytest plugin for tools/run_nkilib.py: sampling and a memory guard.

NKILIB_SAMPLE_SHARE=F keeps the collected tests whose node id hashes (SHA-1) below F of the
hash range, so the same tests are kept on every run and every xdist worker; the rest are
deselected. NKILIB_SAMPLE_FROM=F0 moves that window to [F0, F0 + F) of the range: a sample
disjoint from the one below F0. NKILIB_SAMPLE_PER_FAMILY=N keeps, per kernel family (the
folder under test/integration/nkilib/core or experimental), the N tests with the smallest hashes: a
stratified sample whose per-family counts do not hang on the family's size. With both set, a
test is kept if either keeps it. Runs after the harness's own collection hooks (platform
filters, skip marks).

NKILIB_MAX_RSS_GB=G ends the (worker) process when its resident memory passes G GiB: a
test with huge shapes then fails as a crashed xdist worker instead of driving the machine
into the kernel's OOM killer (which picks any large process). The test is reported by
xdist ("worker crashed while running ...").

NKILIB_TEST_TIMEOUT_S=S fails a test whose call phase runs past S seconds (SIGALRM raises
TimeoutError inside it), so a bounded run reports slow tests instead of waiting on them.
"""

from __future__ import annotations

import collections
import faulthandler
import hashlib
import os
import re
import signal
import threading
import time

import pytest

FAMILY = re.compile(r"integration/nkilib/(core|experimental)/([^/]+)/")


def family(nodeid: str) -> str:
    """'core/attention' for a test under test/integration/nkilib/core/attention/; else 'other'."""
    m = FAMILY.search(nodeid)
    return f"{m.group(1)}/{m.group(2)}" if m else "other"


def node_hash(nodeid: str) -> int:
    return int(hashlib.sha1(nodeid.encode()).hexdigest(), 16)


def keep(nodeid: str, share: float, start: float = 0.0) -> bool:
    """Whether the node id's hash lies in [start, start + share) of the hash range."""
    h = node_hash(nodeid)
    return start * (1 << 160) <= h < (start + share) * (1 << 160)


def per_family(nodeids: list[str], n: int) -> set[str]:
    """The n node ids of smallest hash in each family."""
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for i in nodeids:
        groups[family(i)].append(i)
    return {i for ids in groups.values() for i in sorted(ids, key=node_hash)[:n]}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    share = os.environ.get("NKILIB_SAMPLE_SHARE")
    n = os.environ.get("NKILIB_SAMPLE_PER_FAMILY")
    if not share and not n:
        return
    start = float(os.environ.get("NKILIB_SAMPLE_FROM") or 0)
    stratified = per_family([i.nodeid for i in items], int(n)) if n else set()
    chosen = {i.nodeid for i in items
              if i.nodeid in stratified or (share and keep(i.nodeid, float(share), start))}
    kept = [i for i in items if i.nodeid in chosen]
    dropped = [i for i in items if i.nodeid not in chosen]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _watch_rss(limit_bytes: int) -> None:
    page = os.sysconf("SC_PAGE_SIZE")
    while True:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * page
        if rss > limit_bytes:
            msg = (f"nkilib_sample: resident memory {rss >> 20} MiB passed the limit "
                   f"{limit_bytes >> 20} MiB (NKILIB_MAX_RSS_GB) in {_CURRENT[0]}; ending\n")
            os.write(2, msg.encode())
            _log(msg)
            path = os.environ.get("NKILIB_CRASH_LOG")
            if path:  # where the memory went: every thread's stack at the limit
                with open(path, "a") as f:
                    faulthandler.dump_traceback(file=f, all_threads=True)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.25)


_CURRENT = ["(no test)"]  # the node id running in this process, for the crash log


def _log(msg: str) -> None:
    """Append to NKILIB_CRASH_LOG (xdist workers' stderr does not reach the run's output)."""
    path = os.environ.get("NKILIB_CRASH_LOG")
    if path:
        with open(path, "a") as f:
            f.write(msg)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: object) -> None:
    _CURRENT[0] = item.nodeid


class TestTimeout(TimeoutError):
    """A test ran past NKILIB_TEST_TIMEOUT_S."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    limit = float(os.environ.get("NKILIB_TEST_TIMEOUT_S") or 0)
    if limit <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise TestTimeout(f"nkilib_sample: the test ran past {limit:g} s "
                          "(NKILIB_TEST_TIMEOUT_S)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def pytest_configure(config: pytest.Config) -> None:
    crash_log = os.environ.get("NKILIB_CRASH_LOG")
    if crash_log:  # a segfault's Python traceback, with the test, lands there too
        faulthandler.enable(file=open(crash_log, "a"), all_threads=True)  # noqa: SIM115
    limit = os.environ.get("NKILIB_MAX_RSS_GB")
    if limit and os.path.exists("/proc/self/statm"):
        threading.Thread(target=_watch_rss, args=(int(float(limit) * (1 << 30)),),
                         daemon=True, name="nkilib-rss-guard").start()
