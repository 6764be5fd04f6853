"""Collective algorithms on a topology: which rank sends what to whom, phase by phase, and how
long each phase takes. Knows nothing about values.

`plan_collective(op, nbytes, group, topology, lnc)` picks the algorithm the Neuron runtime uses
for the message size (NRT-INTRANODE: Mesh below `algorithms.mesh_max_bytes`, Ring above;
all-to-all and permutes go direct) and returns its phases. A phase is a set of transfers that
run at once; its time is the DMA trigger latency plus the slowest route's hop latencies, plus
the busiest resource's bytes over its bandwidth: a chip's links on each fabric level (a torus
route loads one link per hop), the sending rank's DMA engines, or a chip's HBM (a reducing
transfer reads its inputs and the receiver's own chunk, and writes once). Ring phases repeat
N-1 times with the chunk indices rotating, so a ring over 576 ranks costs one phase's work.

The PyTorch backend adds `plan.total_ns` to the device clock; NKI launches turn every transfer
into a DMA on the sender's queues (trnsim.timing.world), at the rate this model gives it.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from trnsim.topology import TopologySpec

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "permute",
       "barrier")
ALGORITHMS = ("auto", "ring", "mesh", "direct")


Chunk = tuple[int, str, int]  # (group position, buffer: src | dst | scratch, chunk; -1 whole)


@dataclass(frozen=True)
class Transfer:
    """One sender-to-receiver move inside a phase (positions index the group's rank list).

    The sending rank's DMA reads every chunk in `reads` (its own, or chip mates' for a mesh
    reduction: more than one read means the DMA engines reduce them on the fly) and writes
    chunk `write` of the receiver's buffer; with `reduce`, the receiver's own src chunk of the
    same index is read and added on arrival. A chunk is a 1/N slice of a buffer ("scratch" is
    the runtime's staging buffer for partial sums); -1 is the whole buffer.
    """

    src: int
    dst: int
    nbytes: int
    reads: tuple[Chunk, ...]
    write: tuple[str, int]
    reduce: bool = False


@dataclass(frozen=True)
class Phase:
    """Transfers that run at once, `repeat` times in a row (ring steps). With a `ring` order,
    each repetition moves every chunk index one place back along the ring."""

    transfers: tuple[Transfer, ...]
    repeat: int = 1
    ring: tuple[int, ...] = ()
    latency_ns: float = 0.0  # DMA trigger + the slowest route's hops (set by evaluation)
    transfer_ns: float = 0.0  # the busiest resource's bytes / bandwidth
    bound: str = ""  # what bounds transfer_ns: "link:<level>", "dma", "hbm"

    @property
    def ns(self) -> float:
        return self.latency_ns + self.transfer_ns

    def chunk_at(self, chunk: int, r: int) -> int:
        """Chunk index `chunk` (of the first repetition) at repetition r."""
        if not self.ring or chunk < 0 or r == 0:
            return chunk
        ring = self.ring
        return ring[(ring.index(chunk) - r) % len(ring)]


@dataclass(frozen=True)
class CollectivePlan:
    """An algorithm's phases for one collective on one group, timed on the topology."""

    op: str
    algorithm: str
    group: tuple[int, ...]  # global ranks, in the group's order
    nbytes: int
    phases: tuple[Phase, ...]
    hbm_read_bytes: int = 0  # every chip's HBM traffic together (for summaries)
    hbm_write_bytes: int = 0
    link_bytes: int = 0  # bytes that left their chip

    @property
    def total_ns(self) -> float:
        return sum(p.ns * p.repeat for p in self.phases)

    @property
    def steps(self) -> int:
        return sum(p.repeat for p in self.phases)


# ---------------------------------------------------------------- ordering


def ring_order(group: Sequence[int], topo: TopologySpec, lnc: int) -> tuple[int, ...]:
    """The group's positions in ring order: chips along a Hamiltonian path of each torus
    (snake order), the ranks of one chip next to each other, outer levels outermost."""
    def key(pos: int) -> tuple:
        p = topo.place(group[pos], lnc)
        coords = topo.coords(p.chip)
        out = []
        for lv, c in zip(reversed(topo.levels), reversed(coords), strict=True):
            out.append(_snake(c, lv.shape) if lv.fabric == "torus" else c)
        return (*out, p.logical_core)

    return tuple(sorted(range(len(group)), key=key))


def _snake(unit: int, shape: tuple[int, ...]) -> int:
    """Position of a torus unit along a boustrophedon path (consecutive units are neighbours,
    and so are the last and the first through the wrap-around link)."""
    if len(shape) != 2:
        return unit
    cols = shape[1]
    r, c = divmod(unit, cols)
    return r * cols + (c if r % 2 == 0 else cols - 1 - c)


# ---------------------------------------------------------------- algorithms


def _ring_all_gather(order: tuple[int, ...], c: int, from_src: bool) -> list[Phase]:
    """Ring all-gather (NRT-INTRANODE): step 0 sends the own chunk downstream, each later
    step forwards the chunk just received; N-1 steps. `from_src`: the own chunk starts in
    src (a plain all-gather, which also copies it into its dst slot); else it is in dst (the
    all-gather half of an all-reduce)."""
    n = len(order)
    nxt = {order[i]: order[(i + 1) % n] for i in range(n)}
    prev = {order[(i + 1) % n]: order[i] for i in range(n)}
    own = (lambda p: (p, "src", -1)) if from_src else (lambda p: (p, "dst", p))
    first = [Transfer(p, nxt[p], c, (own(p),), ("dst", p)) for p in order]
    if from_src:
        first += [Transfer(p, p, c, ((p, "src", -1),), ("dst", p)) for p in order]
    phases = [Phase(tuple(first))]
    if n > 2:
        later = tuple(Transfer(p, nxt[p], c, ((p, "dst", prev[p]),), ("dst", prev[p]))
                      for p in order)
        phases.append(Phase(later, repeat=n - 2, ring=order))
    return phases


def _ring_reduce_scatter(order: tuple[int, ...], c: int, into_dst_chunk: bool) -> list[Phase]:
    """Ring reduce-scatter: at step s position order[i] adds its own src chunk
    order[i-1-s] to the partial it received and sends the sum downstream; after N-1 steps the
    chunk's owner adds its own share. `into_dst_chunk`: the result is the owner's chunk of a
    full-size dst (all-reduce); else the whole (chunk-size) dst."""
    n = len(order)
    nxt = {order[i]: order[(i + 1) % n] for i in range(n)}
    prev = {order[(i + 1) % n]: order[i] for i in range(n)}
    prev2 = {p: prev[prev[p]] for p in order}

    def out(chunk: int, last: bool) -> tuple[str, int]:
        return ("dst", chunk if into_dst_chunk else -1) if last else ("scratch", chunk)

    def step(s: int) -> tuple[Transfer, ...]:
        ts = []
        for p in order:
            k = prev[p] if s == 0 else prev2[p]  # chunk of the first repetition
            reads = ((p, "src", k),) if s == 0 else ((p, "scratch", k), (p, "src", k))
            ts.append(Transfer(p, nxt[p], c, reads, out(k, s == n - 2), reduce=s == n - 2))
        return tuple(ts)

    phases = [Phase(step(0))]
    if n > 3:
        phases.append(Phase(step(1), repeat=n - 3, ring=order))
    if n > 2:
        last = step(1)
        # the last step's chunks: rotated n-3 places from step 1's
        shift = n - 3
        last = tuple(Transfer(t.src, t.dst, t.nbytes,
                              tuple((q, b, order[(order.index(k) - shift) % n])
                                    for q, b, k in t.reads),
                              out(order[(order.index(t.write[1]) - shift) % n], True),
                              reduce=True)
                     for t in last)
        phases.append(Phase(last))
    return phases


def _mesh_all_gather(group: Sequence[int], topo: TopologySpec, lnc: int, c: int,
                     from_src: bool, detailed: bool) -> list[Phase]:
    """Mesh (NRT-INTRANODE): each rank writes its chunk straight to one rank of every other
    chip of the group (routed), which then shares it with its chip mates."""
    by_chip = _by_chip(group, topo, lnc)
    inter: list[Transfer] = []
    held: dict[int, list[int]] = defaultdict(list)
    for chip, members in by_chip.items():
        for i, pos in enumerate(members):
            src = (pos, "src", -1) if from_src else (pos, "dst", pos)
            if from_src:
                inter.append(Transfer(pos, pos, c, (src,), ("dst", pos)))
            held[pos].append(pos)
            for other, dests in by_chip.items():
                if other != chip:
                    d = dests[i % len(dests)]
                    inter.append(Transfer(pos, d, c, (src,), ("dst", pos)))
                    held[d].append(pos)
    phases = [Phase(tuple(inter))] if inter else []
    if detailed:  # one transfer per chunk (what NKI launches expand into DMAs)
        intra = [Transfer(pos, q, c, ((pos, "dst", k),), ("dst", k))
                 for members in by_chip.values() for pos in members for q in members
                 if q != pos for k in held[pos]]
    else:  # the same bytes as one transfer per pair of chip mates
        intra = [Transfer(pos, q, c * len(held[pos]), ((pos, "dst", -1),), ("dst", -1))
                 for members in by_chip.values() for pos in members for q in members
                 if q != pos]
    if intra:
        phases.append(Phase(tuple(intra)))
    return phases


def _mesh_reduce_scatter(group: Sequence[int], topo: TopologySpec, lnc: int, c: int,
                         into_dst_chunk: bool) -> list[Phase]:
    """Mesh: for every off-chip destination one rank of each chip reduces the chip's chunks
    for it and writes the sum there; then each rank reduces what arrived with its own and its
    chip mates' chunks."""
    by_chip = _by_chip(group, topo, lnc)
    inter: list[Transfer] = []
    arrived: dict[int, list[int]] = defaultdict(list)
    for chip, members in by_chip.items():
        for other, dests in by_chip.items():
            if other == chip:
                continue
            for j, d in enumerate(dests):
                s = members[j % len(members)]
                inter.append(Transfer(s, d, c, tuple((m, "src", d) for m in members),
                                      ("scratch", s)))
                arrived[d].append(s)
    final = []
    for members in by_chip.values():
        for d in members:
            reads = tuple((d, "scratch", s) for s in arrived[d])
            reads += tuple((m, "src", d) for m in members if m != d)
            final.append(Transfer(d, d, c, reads, ("dst", d if into_dst_chunk else -1),
                                  reduce=True))
    return [Phase(tuple(inter))] * bool(inter) + [Phase(tuple(final))]


def _direct(pairs: Sequence[tuple[int, int, int]], whole: bool) -> list[Phase]:
    """Every sender writes straight to its receivers (all-to-all chunk d to rank d, or whole
    buffers for permutes and broadcasts)."""
    ts = []
    for s, d, n in pairs:
        if n <= 0:
            continue
        if whole:
            ts.append(Transfer(s, d, n, ((s, "src", -1),), ("dst", -1)))
        else:
            ts.append(Transfer(s, d, n, ((s, "src", d),), ("dst", s)))
    return [Phase(tuple(ts))] if ts else []


def _by_chip(group: Sequence[int], topo: TopologySpec, lnc: int) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for pos, r in enumerate(group):
        out.setdefault(topo.place(r, lnc).chip, []).append(pos)
    return out


# ---------------------------------------------------------------- planning


def choose_algorithm(op: str, nbytes: int, n: int, topo: TopologySpec) -> str:
    """Mesh up to the topology's threshold (NRT-INTRANODE: Mesh below 1 MB); all-to-all and
    permutes move data directly; "fastest" above the threshold (the runtime's RDH and
    KangaRing, which take the mid and large sizes, are not modelled: the faster of Mesh and
    Ring stands in for them)."""
    if op in ("all_to_all", "permute", "barrier") or n <= 1:
        return "direct"
    return "mesh" if nbytes <= topo.mesh_max_bytes else topo.above_mesh


def plan_collective(op: str, nbytes: int, group: Sequence[int], topo: TopologySpec, lnc: int,
                    algorithm: str = "auto", root: int = 0,
                    pairs: Sequence[tuple[int, int, int]] | None = None,
                    detailed: bool = False) -> CollectivePlan:
    """Phases of one collective, timed on `topo`.

    nbytes: all_reduce / broadcast the buffer per rank; all_gather a rank's input chunk;
    reduce_scatter a rank's output chunk; all_to_all a rank's whole input (N chunks);
    permute: `pairs` lists (sender position, receiver position, bytes) instead.
    detailed: one transfer per chunk everywhere (for expanding into DMAs); else transfers
    that move several chunks between the same two ranks are merged (the same time).
    """
    if op not in OPS:
        raise ValueError(f"plan_collective: {op!r} is not a collective (known: {', '.join(OPS)})")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"plan_collective: algorithm {algorithm!r} (known: "
                         f"{', '.join(ALGORITHMS)})")
    return _plan_cached(op, int(nbytes), tuple(group), topo, lnc, algorithm, root,
                        tuple(pairs) if pairs is not None else None, detailed)


@functools.lru_cache(maxsize=512)
def _plan_cached(op: str, nbytes: int, group: tuple[int, ...], topo: TopologySpec, lnc: int,
                 algorithm: str, root: int, pairs: tuple[tuple[int, int, int], ...] | None,
                 detailed: bool) -> CollectivePlan:
    n = len(group)
    # the message the runtime's choice looks at: the whole collective buffer of a rank
    message = nbytes * n if op in ("all_gather", "reduce_scatter") else nbytes
    algo = choose_algorithm(op, message, n, topo) if algorithm == "auto" else algorithm
    if op in ("barrier", "all_to_all", "permute"):
        algo = "direct"
    if algo == "fastest":
        plans = [_plan_cached(op, nbytes, group, topo, lnc, a, root, pairs, detailed)
                 for a in ("mesh", "ring")]
        return min(plans, key=lambda p: p.total_ns)
    phases = _phases(op, nbytes, group, topo, lnc, algo, root, pairs, detailed)
    timed, reads, writes, link = [], 0, 0, 0
    for ph in phases:
        t, r, w, lb = _evaluate(ph, group, topo, lnc)
        timed.append(t)
        reads, writes, link = reads + r * ph.repeat, writes + w * ph.repeat, link + lb * ph.repeat
    return CollectivePlan(op, algo, group, nbytes, tuple(timed), reads, writes, link)


def _phases(op: str, nbytes: int, group: tuple[int, ...], topo: TopologySpec, lnc: int,
            algo: str, root: int, pairs: tuple[tuple[int, int, int], ...] | None,
            detailed: bool) -> list[Phase]:
    n = len(group)
    if op == "permute":
        return _direct(pairs or (), whole=True)
    if n <= 1:
        return []
    if op == "barrier":  # a 4-byte semaphore write to everyone
        return _direct([(s, d, 4) for s in range(n) for d in range(n) if s != d], whole=True)
    if op == "all_to_all":
        c = nbytes // n
        return _direct([(s, d, c) for s in range(n) for d in range(n)], whole=False)
    order = ring_order(group, topo, lnc)
    if op == "broadcast":
        if algo == "mesh":
            return _direct([(root, d, nbytes) for d in range(n) if d != root], whole=True)
        # large: scatter the buffer from the root, then a ring all-gather of the pieces
        c = -(-nbytes // n)
        return (_direct([(root, d, c) for d in range(n)], whole=False)
                + _ring_all_gather(order, c, from_src=False))
    if op == "all_gather":
        if algo == "mesh":
            return _mesh_all_gather(group, topo, lnc, nbytes, True, detailed)
        return _ring_all_gather(order, nbytes, from_src=True)
    if op == "reduce_scatter":
        if algo == "mesh":
            return _mesh_reduce_scatter(group, topo, lnc, nbytes, into_dst_chunk=False)
        return _ring_reduce_scatter(order, nbytes, into_dst_chunk=False)
    # all_reduce: a reduce-scatter, then an all-gather, of B/N chunks (NRT-INTRANODE)
    c = -(-nbytes // n)
    if algo == "mesh":
        return (_mesh_reduce_scatter(group, topo, lnc, c, into_dst_chunk=True)
                + _mesh_all_gather(group, topo, lnc, c, False, detailed))
    return (_ring_reduce_scatter(order, c, into_dst_chunk=True)
            + _ring_all_gather(order, c, from_src=False))


def _evaluate(ph: Phase, group: tuple[int, ...], topo: TopologySpec,
              lnc: int) -> tuple[Phase, int, int, int]:
    """The phase with its latency and transfer time; its HBM read/write and link bytes."""
    chip = topo.chip
    chips = [topo.place(r, lnc).chip for r in group]
    hops_of = _hops_table(topo)
    lat_of = _latency_table(topo)
    out_load: dict[tuple[int, int], float] = defaultdict(float)  # (chip, level) -> bytes
    in_load: dict[tuple[int, int], float] = defaultdict(float)
    dma: dict[int, float] = defaultdict(float)  # sending position -> bytes
    hbm: dict[int, float] = defaultdict(float)  # chip -> bytes read + written
    hop_lat = 0.0
    reads = writes = link = 0
    for t in ph.transfers:
        a, b = chips[t.src], chips[t.dst]
        if a != b:
            hops = hops_of(a, b)
            lat = lat_of(a, b)
            if lat > hop_lat:
                hop_lat = lat
            for lv_i, h in enumerate(hops):
                if h:
                    out_load[(a, lv_i)] += t.nbytes * h
                    in_load[(b, lv_i)] += t.nbytes
            link += t.nbytes
        dma[t.src] += t.nbytes * max(1, len(t.reads))
        r = t.nbytes * len(t.reads)
        w = t.nbytes
        hbm[a] += r
        hbm[b] += w
        if t.reduce:
            hbm[b] += t.nbytes
            r += t.nbytes
        reads, writes = reads + r, writes + w
    best, bound = 0.0, ""
    for (_, lv_i), v in (*out_load.items(), *in_load.items()):
        tns = v / topo.levels[lv_i].bandwidth_gbps
        if tns > best:
            best, bound = tns, f"link:{topo.levels[lv_i].name}"
    dma_rate = lnc * chip.dma.engines_per_core * chip.dma.engine_bytes_per_ns
    for v in dma.values():
        if v / dma_rate > best:
            best, bound = v / dma_rate, "dma"
    for v in hbm.values():
        if v / chip.hbm.bandwidth_gbps > best:
            best, bound = v / chip.hbm.bandwidth_gbps, "hbm"
    latency = chip.dma.trigger_latency_ns + hop_lat if ph.transfers else 0.0
    timed = Phase(ph.transfers, ph.repeat, ph.ring, latency, best, bound)
    return timed, reads, writes, link


@functools.cache
def _hops_table(topo: TopologySpec):
    return functools.lru_cache(maxsize=1 << 16)(topo.hops)


@functools.cache
def _latency_table(topo: TopologySpec):
    hops = _hops_table(topo)

    @functools.lru_cache(maxsize=1 << 16)
    def latency(a: int, b: int) -> float:
        return sum(h * lv.latency_ns for h, lv in zip(hops(a, b), topo.levels, strict=True))

    return latency


def transfer_rate_gbps(ph: Phase, t: Transfer) -> float:
    """The rate a transfer of `ph` moves at so that it ends with the phase (GB/s)."""
    return t.nbytes / ph.transfer_ns if ph.transfer_ns > 0 else math.inf


def describe(plan: CollectivePlan) -> str:
    """One line: algorithm, steps, time, what bounds the slowest phase."""
    slow = max(plan.phases, key=lambda p: p.ns, default=None)
    bound = f", bound by {slow.bound}" if slow is not None and slow.bound else ""
    return (f"{plan.op} {plan.nbytes} B over {len(plan.group)} ranks: {plan.algorithm}, "
            f"{plan.steps} steps, {plan.total_ns / 1000:.2f} us{bound}")
