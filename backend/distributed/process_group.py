"""The `trn` process group: torch.distributed collectives on device tensors, data over gloo.

Each collective first meets the group's other ranks in the store (exchange.py: matching
calls, clocks, errors instead of hangs), then moves the data with an inner gloo group on the
tensors' host aliases (the same HBM bytes, no copy; torchrun across hosts works as gloo does),
then adds its simulated time from the topology to the rank's device clock (state.py). CPU
tensors pass through to gloo untimed. In a virtual world (one process for every rank) no data
moves: each rank's result is computed from this process's data alone (timing only).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from trnsim.backend.distributed.exchange import Exchange, as_timedelta
from trnsim.backend.distributed.state import CollectiveEvent, DistributedError, DistState
from trnsim.backend.launch import user_location
from trnsim.backend.runtime import Runtime

_GLOO_OPS = ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")


def _what(tensors: Sequence[torch.Tensor]) -> str:
    return ", ".join(f"{list(t.shape)} {str(t.dtype).replace('torch.', '')}" for t in tensors)


def _key(tensors: Sequence[torch.Tensor], **extra: Any) -> list:
    return [[list(t.shape), str(t.dtype)] for t in tensors] + [[k, v] for k, v in
                                                               sorted(extra.items())]


def _nbytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class TrnProcessGroup(dist.ProcessGroup):
    """A process group of ranks that each simulate one NeuronCore."""

    def __init__(self, rt: Runtime, st: DistState, store: Any, rank: int, size: int,
                 timeout: Any, name: str, global_ranks: Sequence[int],
                 timeout_s: Callable[[], float]):
        super().__init__(rank, size)
        self._rt, self._st = rt, st
        self._rank, self._size, self._name = rank, size, name
        self._global = tuple(global_ranks) if global_ranks else tuple(range(size))
        label = "the default group" if name == "0" else f"group {name}"
        label += f" (ranks {list(self._global)})" if len(self._global) <= 16 else ""
        self._exchange = Exchange(store, rank, size, timeout_s, label, self._global)
        self._store, self._timeout_s = store, timeout_s
        self._inner = None

    def connect(self) -> None:
        """Start the inner gloo group (its constructor waits for every rank: call it once the
        world is known to agree). gloo gives up after the rendezvous' wait: point-to-point
        messages have no rendezvous, so a missing peer shows as a gloo timeout, reported as
        ours."""
        if not self._st.virtual and self._inner is None:
            self._inner = dist.ProcessGroupGloo(dist.PrefixStore("gloo/", self._store),
                                                self._rank, self._size,
                                                as_timedelta(self._timeout_s()))

    @property
    def group_name(self) -> str:
        return self._name

    def getBackendName(self) -> str:
        return self._rt.name

    # ------------------------------------------------------------ the common path
    def _host(self, t: torch.Tensor) -> torch.Tensor:
        return self._rt.host_views.of(t) if t.device.type == self._rt.name else t

    def _on_device(self, tensors: Sequence[torch.Tensor]) -> bool:
        return any(t.device.type == self._rt.name for t in tensors)

    def _run(self, api: str, tensors: Sequence[torch.Tensor], key: list,
             data: Callable[[list[dict]], None], timing: Callable[[list[dict]], tuple],
             virtual: Callable[[], None] | None = None, extra: dict | None = None,
             result: Sequence[torch.Tensor] | None = None) -> Any:
        rt, st = self._rt, self._st
        loc = user_location()
        where = f"{loc.filename}:{loc.lineno}" if loc is not None else ""
        post = {"api": api, "what": _what(tensors) if api != "barrier" else "",
                "key": key, "clock": rt.clock_ns,
                "where": where, **(extra or {})}
        posts = [post] if st.virtual else self._exchange.meet(post)
        if st.virtual:
            if virtual is not None:
                virtual()
        else:
            data(posts)
        if self._on_device(tensors):
            op, nbytes, pairs, root = timing(posts)
            ns, algo = st.time_collective(op, nbytes, self._global, pairs, root)
            start = max(p["clock"] for p in posts)
            with rt.lock:
                arrive = rt.clock_ns
                rt.clock_ns = max(rt.clock_ns, start + ns)
            st.events.append(CollectiveEvent(self._exchange.seq - 1 if not st.virtual else
                                             len(st.events), api, self._global, nbytes, algo,
                                             arrive, start, start + ns, where))
        return _done(list(result if result is not None else tensors))

    def _gloo_opts(self, cls: Any, opts: Any, api: str) -> tuple[Any, str]:
        op = opts.reduceOp.op.name if hasattr(opts, "reduceOp") else "SUM"
        o = cls()
        if hasattr(opts, "reduceOp"):
            if op == "AVG":
                o.reduceOp = dist.ReduceOp.SUM
            elif op in _GLOO_OPS:
                o.reduceOp = opts.reduceOp
            else:
                raise DistributedError(f"torch.distributed.{api}: ReduceOp.{op} is not "
                                       f"supported on {self._rt.name} (supported: AVG, "
                                       f"{', '.join(_GLOO_OPS)})")
        if hasattr(opts, "timeout"):
            o.timeout = opts.timeout
        return o, op

    def _dense(self, tensors: Sequence[torch.Tensor]) -> tuple[list[torch.Tensor], Callable]:
        """Host tensors gloo can use (contiguous), and what copies results back."""
        hosts = [self._host(t) for t in tensors]
        dense = [h if h.is_contiguous() else h.contiguous() for h in hosts]

        def back() -> None:
            for h, d in zip(hosts, dense, strict=True):
                if d is not h:
                    h.copy_(d)

        return dense, back

    # ------------------------------------------------------------ collectives
    def allreduce(self, tensors: list[torch.Tensor], opts: Any) -> Any:
        o, op = self._gloo_opts(dist.AllreduceOptions, opts, "all_reduce")

        def data(_: list) -> None:
            dense, back = self._dense(tensors)
            self._inner.allreduce(dense, o).wait()
            if op == "AVG":
                for d in dense:
                    d.div_(self._size)
            back()

        return self._run("all_reduce", tensors, _key(tensors, op=op), data,
                         lambda _: ("all_reduce", _nbytes(tensors), None, 0))

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any) -> Any:
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors: list[torch.Tensor], opts: Any) -> Any:
        root = opts.rootRank

        def data(_: list) -> None:
            dense, back = self._dense(tensors)
            o = dist.BroadcastOptions()
            o.rootRank, o.rootTensor = root, opts.rootTensor
            self._inner.broadcast(dense, o).wait()
            back()

        return self._run("broadcast", tensors, _key(tensors, root=root), data,
                         lambda _: ("broadcast", _nbytes(tensors), None, root))

    def all_gather_single(self, out: torch.Tensor, inp: torch.Tensor, opts: Any) -> Any:
        def data(_: list) -> None:
            (o,), back = self._dense([out])
            self._inner._allgather_base(o, self._host(inp).contiguous()).wait()
            back()

        def virtual() -> None:
            self._host(out).view(self._size, -1).copy_(self._host(inp).reshape(1, -1).clone())

        return self._run("all_gather_into_tensor", [inp], _key([inp, out]), data,
                         lambda _: ("all_gather", _nbytes([inp]), None, 0), virtual,
                         result=[out])

    def all_gather_single_coalesced(self, outs: list[torch.Tensor], ins: list[torch.Tensor],
                                    opts: Any) -> Any:
        work = None
        for o, i in zip(outs, ins, strict=True):
            work = self.all_gather_single(o, i, opts)
        return work

    def allgather(self, outs: list[list[torch.Tensor]], ins: list[torch.Tensor],
                  opts: Any) -> Any:
        def data(_: list) -> None:
            dense_out = [[self._host(t) for t in lst] for lst in outs]
            self._inner.allgather(dense_out, [self._host(t).contiguous() for t in ins]).wait()

        def virtual() -> None:
            for lst, i in zip(outs, ins, strict=True):
                for t in lst:
                    self._host(t).copy_(self._host(i))

        return self._run("all_gather", ins, _key(ins), data,
                         lambda _: ("all_gather", _nbytes(ins), None, 0), virtual,
                         result=[t for lst in outs for t in lst])

    def reduce_scatter_single(self, out: torch.Tensor, inp: torch.Tensor, opts: Any) -> Any:
        o, op = self._gloo_opts(dist.ReduceScatterOptions, opts, "reduce_scatter_tensor")

        def data(_: list) -> None:
            (d,), back = self._dense([out])
            self._inner._reduce_scatter_base(d, self._host(inp).contiguous(), o).wait()
            if op == "AVG":
                d.div_(self._size)
            back()

        def virtual() -> None:
            chunk = self._host(inp).reshape(self._size, -1)[self._rank]
            self._host(out).copy_(chunk.view(out.shape))

        return self._run("reduce_scatter_tensor", [inp], _key([inp, out], op=op), data,
                         lambda _: ("reduce_scatter", _nbytes([out]), None, 0), virtual,
                         result=[out])

    def reduce_scatter_single_coalesced(self, outs: list[torch.Tensor],
                                        ins: list[torch.Tensor], opts: Any) -> Any:
        work = None
        for o, i in zip(outs, ins, strict=True):
            work = self.reduce_scatter_single(o, i, opts)
        return work

    def reduce_scatter(self, outs: list[torch.Tensor], ins: list[list[torch.Tensor]],
                       opts: Any) -> Any:
        o, op = self._gloo_opts(dist.ReduceScatterOptions, opts, "reduce_scatter")

        def data(_: list) -> None:
            dense, back = self._dense(outs)
            self._inner.reduce_scatter(dense, [[self._host(t).contiguous() for t in lst]
                                               for lst in ins], o).wait()
            if op == "AVG":
                for d in dense:
                    d.div_(self._size)
            back()

        def virtual() -> None:
            for out, lst in zip(outs, ins, strict=True):
                self._host(out).copy_(self._host(lst[self._rank]))

        return self._run("reduce_scatter", outs, _key(outs, op=op), data,
                         lambda _: ("reduce_scatter", _nbytes(outs), None, 0), virtual)

    def all_to_all_single(self, out: torch.Tensor, inp: torch.Tensor,
                          out_splits: list[int] | None, in_splits: list[int] | None,
                          opts: Any) -> Any:
        rows = inp.numel() // max(inp.shape[0], 1) * inp.element_size() if inp.dim() else 0
        even = not in_splits and not out_splits
        sent = [s * rows for s in in_splits] if in_splits else []

        def data(_: list) -> None:
            (o,), back = self._dense([out])
            self._inner.alltoall_base(o, self._host(inp).contiguous(), list(out_splits or []),
                                      list(in_splits or [])).wait()
            back()

        def timing(posts: list[dict]) -> tuple:
            if even:
                return "all_to_all", _nbytes([inp]), None, 0
            pairs = tuple((s, d, int(b)) for s, p in enumerate(posts)
                          for d, b in enumerate(p["sent"]) if s != d)
            return "permute", sum(b for *_, b in pairs), pairs, 0

        def virtual() -> None:
            if out.numel() == inp.numel():
                self._host(out).copy_(self._host(inp).view(out.shape))

        key = [[list(inp.shape[1:]), str(inp.dtype)]]  # the splits may differ by rank
        return self._run("all_to_all_single", [inp], key, data, timing, virtual,
                         extra={"sent": sent}, result=[out])

    def alltoall(self, outs: list[torch.Tensor], ins: list[torch.Tensor], opts: Any) -> Any:
        def data(_: list) -> None:
            dense, back = self._dense(outs)
            self._inner.alltoall(dense, [self._host(t).contiguous() for t in ins]).wait()
            back()

        def timing(posts: list[dict]) -> tuple:
            pairs = tuple((s, d, int(b)) for s, p in enumerate(posts)
                          for d, b in enumerate(p["sent"]) if s != d)
            return "permute", sum(b for *_, b in pairs), pairs, 0

        return self._run("all_to_all", ins, [[str(ins[0].dtype)]] if ins else [], data, timing,
                         extra={"sent": [_nbytes([t]) for t in ins]}, result=outs)

    def barrier(self, opts: Any) -> Any:
        dev = torch.empty(0, device=self._rt.device)
        return self._run("barrier", [dev], [], lambda _: None,
                         lambda _: ("barrier", 0, None, 0), result=[])

    def scatter(self, outs: list[torch.Tensor], ins: list[list[torch.Tensor]], opts: Any) -> Any:
        root = opts.rootRank

        def data(_: list) -> None:
            dense, back = self._dense(outs)
            o = dist.ScatterOptions()
            o.rootRank = root
            srcs = [[self._host(t).contiguous() for t in lst] for lst in ins]
            self._inner.scatter(dense, srcs, o).wait()
            back()

        def virtual() -> None:
            if ins and ins[0]:
                for out in outs:
                    self._host(out).copy_(self._host(ins[0][self._rank]))

        pairs = lambda _: ("permute", _nbytes(outs) * self._size,  # noqa: E731
                           tuple((root, d, _nbytes(outs)) for d in range(self._size)
                                 if d != root), root)
        return self._run("scatter", outs, _key(outs, root=root), data, pairs, virtual)

    def gather(self, outs: list[list[torch.Tensor]], ins: list[torch.Tensor], opts: Any) -> Any:
        root = opts.rootRank

        def data(_: list) -> None:
            o = dist.GatherOptions()
            o.rootRank = root
            dst = [[self._host(t) for t in lst] for lst in outs]
            self._inner.gather(dst, [self._host(t).contiguous() for t in ins], o).wait()

        pairs = lambda _: ("permute", _nbytes(ins) * self._size,  # noqa: E731
                           tuple((s, root, _nbytes(ins)) for s in range(self._size)
                                 if s != root), root)
        return self._run("gather", ins, _key(ins, root=root), data, pairs,
                         result=[t for lst in outs for t in lst] or ins)

    def reduce(self, tensors: list[torch.Tensor], opts: Any) -> Any:
        o, op = self._gloo_opts(dist.ReduceOptions, opts, "reduce")
        o.rootRank = opts.rootRank

        def data(_: list) -> None:
            dense, back = self._dense(tensors)
            self._inner.reduce(dense, o).wait()
            if op == "AVG" and self._rank == opts.rootRank:
                for d in dense:
                    d.div_(self._size)
            back()

        # timed as an all-reduce (a reduce-scatter then a gather to the root costs the same
        # steps on a ring)
        return self._run("reduce", tensors, _key(tensors, op=op, root=opts.rootRank), data,
                         lambda _: ("all_reduce", _nbytes(tensors), None, opts.rootRank))

    # ------------------------------------------------------------ point to point
    def _p2p_post(self, api: str, tensors: list[torch.Tensor]) -> dict:
        loc = user_location()
        return {"api": api, "what": _what(tensors), "key": _key(tensors),
                "clock": self._rt.clock_ns,
                "where": f"{loc.filename}:{loc.lineno}" if loc is not None else ""}

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> Any:
        """Post the send (its clock) in the store, hand the bytes to gloo; non-blocking."""
        post = self._p2p_post("send", tensors)
        self._time_p2p("send", tensors, self._rank, dst, post["clock"], post["where"])
        if self._st.virtual:
            return _done(tensors)
        self._exchange.post_send(dst, tag, post)
        work = self._inner.send([self._host(t).contiguous() for t in tensors], dst, tag)
        what = f"send to rank {self._global[dst]} (tag {tag}) at {post['where'] or '?'}"
        return _in_background(work, what, lambda: tensors)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> Any:
        """Receive through gloo, non-blocking; the simulated start is the later of this
        rank's clock and the sender's (known at once when the send was posted first)."""
        post = self._p2p_post("recv", tensors)
        if self._st.virtual:
            self._time_p2p("recv", tensors, src, self._rank, post["clock"], post["where"])
            return _done(tensors)
        dense, back = self._dense(tensors)
        sent = self._exchange.poll_send(src, tag, post)
        if sent is not None:
            self._time_p2p("recv", tensors, src, self._rank, max(post["clock"], sent["clock"]),
                           post["where"])
        work = self._inner.recv(dense, src, tag)
        what = f"recv from rank {self._global[src]} (tag {tag}) at {post['where'] or '?'}"

        def finish() -> list[torch.Tensor]:
            back()
            if sent is None:
                late = self._exchange.await_send(src, tag, post)
                self._time_p2p("recv", tensors, src, self._rank,
                               max(post["clock"], late["clock"]), post["where"])
            return tensors

        return _in_background(work, what, finish)

    def _time_p2p(self, api: str, tensors: list[torch.Tensor], src: int, dst: int,
                  start: float, where: str) -> None:
        if not self._on_device(tensors):
            return
        rt, st = self._rt, self._st
        nb = _nbytes(tensors)
        group = (self._global[src], self._global[dst])
        ns, algo = st.time_collective("permute", nb, group, ((0, 1, nb),))
        with rt.lock:
            arrive = rt.clock_ns
            rt.clock_ns = max(rt.clock_ns, start + ns)
        st.events.append(CollectiveEvent(len(st.events), api, group, nb, algo, arrive, start,
                                         start + ns, where))


def _in_background(work: Any, what: str, finish: Callable[[], list[torch.Tensor]]) -> Any:
    """A Work that completes when gloo's `work` does (waited on a helper thread: gloo's
    point-to-point works have no future), then runs `finish`; gloo's timeout becomes an
    error naming the call."""
    fut = torch.futures.Future()

    def wait() -> None:
        try:
            work.wait()
            fut.set_result(finish())
        except RuntimeError as e:
            fut.set_exception(DistributedError(
                f"torch.distributed {what} did not complete: the peer never made the matching "
                f"call within the timeout (TRNSIM_DIST_TIMEOUT) ({e})"))
        except Exception as e:
            fut.set_exception(e)

    threading.Thread(target=wait, name="trnsim-p2p", daemon=True).start()
    return _create_work_from_future(fut)


def _done(result: list[torch.Tensor]) -> Any:
    fut = torch.futures.Future()
    fut.set_result(result)
    return _create_work_from_future(fut)
