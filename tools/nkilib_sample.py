"""pytest plugin for tools/run_nkilib.py: sampling and a memory guard.

NKILIB_SAMPLE_SHARE=F keeps the collected tests whose node id hashes (SHA-1) below F of the
hash range, so the same tests are kept on every run and every xdist worker; the rest are
deselected. Runs after the harness's own collection hooks (platform filters, skip marks).

NKILIB_MAX_RSS_GB=G ends the (worker) process when its resident memory passes G GiB: a
test with huge shapes then fails as a crashed xdist worker instead of driving the machine
into the kernel's OOM killer (which picks any large process). The test is reported by
xdist ("worker crashed while running ...").
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time

import pytest


def keep(nodeid: str, share: float) -> bool:
    h = int(hashlib.sha1(nodeid.encode()).hexdigest(), 16)
    return h < share * (1 << 160)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    share = os.environ.get("NKILIB_SAMPLE_SHARE")
    if not share:
        return
    kept = [i for i in items if keep(i.nodeid, float(share))]
    dropped = [i for i in items if not keep(i.nodeid, float(share))]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _watch_rss(limit_bytes: int) -> None:
    page = os.sysconf("SC_PAGE_SIZE")
    while True:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * page
        if rss > limit_bytes:
            os.write(2, f"nkilib_sample: resident memory {rss >> 20} MiB passed the limit "
                        f"{limit_bytes >> 20} MiB (NKILIB_MAX_RSS_GB); ending\n".encode())
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.25)


def pytest_configure(config: pytest.Config) -> None:
    limit = os.environ.get("NKILIB_MAX_RSS_GB")
    if limit and os.path.exists("/proc/self/statm"):
        threading.Thread(target=_watch_rss, args=(int(float(limit) * (1 << 30)),),
                         daemon=True, name="nkilib-rss-guard").start()
