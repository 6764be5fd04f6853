"""Where the ranks of a group meet before each collective: the process group's store.

Every rank posts what it is calling (the collective, its tensors' shapes and dtypes, its
device clock, the user's file:line) under the group's next sequence number and waits for the
others' posts. A post that differs is an error on every rank naming both calls; a rank that
never posts within the timeout is an error naming the collective, the rank and what that rank
last did, so a rank that skips a collective ends the run with a message, never a hang. The
posts also carry the clocks the simulated start of the collective is computed from. Data
moves apart from this (the inner gloo group); only a few hundred bytes go through the store.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

from trnsim.backend.distributed.state import DistributedError

_POLL_S = 0.005


class Exchange:
    """Sequence-numbered meetings of one group's ranks in its store."""

    def __init__(self, store: Any, rank: int, size: int, timeout_s: Any, label: str,
                 global_ranks: tuple[int, ...]):
        self.store, self.rank, self.size = store, rank, size
        self._timeout, self.label, self.global_ranks = timeout_s, label, global_ranks
        self.seq = 0
        self._p2p: dict[tuple[int, int, int], int] = {}  # (src, dst, tag) -> messages so far

    @property
    def timeout_s(self) -> float:
        """Seconds to wait for the other ranks (read at every wait: TRNSIM_DIST_TIMEOUT may
        change during a run)."""
        t = self._timeout
        return float(t() if callable(t) else t)

    def _g(self, r: int) -> int:
        return self.global_ranks[r]

    # ------------------------------------------------------------ collectives
    def meet(self, post: dict[str, Any]) -> list[dict[str, Any]]:
        """Post this rank's call as the group's next collective; return every rank's post (in
        group-rank order) once all arrived. Raises DistributedError on a mismatch or a
        timeout."""
        seq = self.seq
        self.seq += 1
        post = {**post, "seq": seq, "rank": self._g(self.rank)}
        data = json.dumps(post)
        self.store.set(f"c/{seq}/{self.rank}", data)
        self.store.set(f"last/{self.rank}", data)
        keys = [f"c/{seq}/{r}" for r in range(self.size)]
        self._wait(keys, post)
        posts = [json.loads(_text(self.store.get(k))) for k in keys]
        if seq >= 1:  # every rank has read seq-1 once it posted seq
            self.store.delete_key(f"c/{seq - 1}/{self.rank}")
        _check_same(posts, self.label)
        return posts

    def _wait(self, keys: list[str], post: dict[str, Any]) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                if self.store.check(keys):
                    return
            except RuntimeError as e:  # the store went away: a rank (its host) has exited
                raise DistributedError(
                    f"{_call(post)} in {self.label}: the rendezvous store is gone ({e}); "
                    "another rank has ended") from None
            if time.monotonic() > deadline:
                raise self._timeout_error(keys, post)
            time.sleep(_POLL_S)

    def _timeout_error(self, keys: list[str], post: dict[str, Any]) -> DistributedError:
        missing = []
        for r, k in enumerate(keys):
            try:
                there = self.store.check([k])
            except RuntimeError:
                there = False
            if not there:
                missing.append(r)
        notes = []
        for r in missing:
            try:
                last = json.loads(_text(self.store.get(f"last/{r}"))) \
                    if self.store.check([f"last/{r}"]) else None
            except RuntimeError:
                last = None
            what = (f"its last collective was {_call(last)}" if last
                    else "it has made no collective in this group")
            notes.append(f"rank {self._g(r)} never reached it ({what})")
        return DistributedError(
            f"{_call(post)} in {self.label} timed out after {self.timeout_s:g} s: "
            f"{'; '.join(notes)}. Every rank of a group must make the same collectives in "
            "the same order (TRNSIM_DIST_TIMEOUT sets the wait)")

    def gather(self, tag: str, payload: bytes) -> list[bytes]:
        """Every rank's payload (in group-rank order); all ranks call it with the same tag."""
        self.store.set(f"g/{tag}/{self.rank}", payload)
        keys = [f"g/{tag}/{r}" for r in range(self.size)]
        self._wait(keys, {"api": f"gather of {tag}", "what": ""})
        return [bytes(self.store.get(k)) for k in keys]

    # ------------------------------------------------------------ point to point
    def post_send(self, dst: int, tag: int, post: dict[str, Any]) -> None:
        k = self._next(self.rank, dst, tag)
        self.store.set(f"p/{self.rank}/{dst}/{tag}/{k}",
                       json.dumps({**post, "rank": self._g(self.rank)}))

    def poll_send(self, src: int, tag: int, post: dict[str, Any]) -> dict[str, Any] | None:
        """The matching send's post if it is there already (then it is consumed), else None
        (await_send takes it later)."""
        k = self._p2p.get((src, self.rank, tag), 0)
        key = f"p/{src}/{self.rank}/{tag}/{k}"
        if not self.store.check([key]):
            return None
        return self.await_send(src, tag, post)

    def await_send(self, src: int, tag: int, post: dict[str, Any]) -> dict[str, Any]:
        """The matching send's post (its clock, bytes); error if it never comes."""
        k = self._next(src, self.rank, tag)
        key = f"p/{src}/{self.rank}/{tag}/{k}"
        deadline = time.monotonic() + self.timeout_s
        while not self.store.check([key]):
            if time.monotonic() > deadline:
                raise DistributedError(
                    f"{_call(post)} in {self.label}: recv from rank {self._g(src)} (tag {tag}, "
                    f"message #{k}) timed out after {self.timeout_s:g} s: rank {self._g(src)} "
                    "never sent it")
            time.sleep(_POLL_S)
        got = json.loads(_text(self.store.get(key)))
        self.store.delete_key(key)
        if got.get("key") != post.get("key"):
            raise DistributedError(
                f"{_call(post)} in {self.label}: rank {self._g(src)} sent {_call(got)}; a recv "
                "needs the same shape and dtype as its send")
        return got

    def _next(self, src: int, dst: int, tag: int) -> int:
        k = self._p2p.get((src, dst, tag), 0)
        self._p2p[(src, dst, tag)] = k + 1
        return k


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def _call(post: dict[str, Any] | None) -> str:
    if not post:
        return "a collective"
    where = f" at {post['where']}" if post.get("where") else ""
    return (f"torch.distributed.{post['api']}({post.get('what', '')}) (collective "
            f"#{post.get('seq', '?')}{where})")


def _check_same(posts: list[dict[str, Any]], label: str) -> None:
    first = posts[0]
    for p in posts[1:]:
        if p["api"] != first["api"] or p["key"] != first["key"]:
            raise DistributedError(
                f"{label}: rank {first['rank']} called {_call(first)}, but rank {p['rank']} "
                f"called {_call(p)} as the same collective; every rank of a group must make "
                "the same collectives, on tensors of the same shapes and dtypes, in the same "
                "order")


def as_timedelta(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)
