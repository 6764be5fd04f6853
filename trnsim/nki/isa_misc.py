"""nki.isa wrappers for registers and multi-core instructions: NKI's signatures, then `_issue`.

core_barrier and sendrecv first meet the peer program (trnsim.nki.lnc: the other program runs
until it arrives), then issue their instruction; both programs of an LNC2 launch must issue the
same barriers and sendrecvs in the same order, or the launch fails with a deadlock error.
"""

from __future__ import annotations

from typing import Any

from trnsim.errors import ConstraintError, KernelError, UnsupportedError
from trnsim.nki._isa_base import _issue, dma_engine, engine
from trnsim.nki.context import KernelContext, current
from trnsim.nki.registers import NkiScalar, VirtualRegister, new_register
from trnsim.program import capture_location
from trnsim.spec import is_tensor

__all__ = [
    "NkiScalar",
    "VirtualRegister",
    "core_barrier",
    "get_nc_sub_version",
    "register_alloc",
    "register_load",
    "register_move",
    "register_store",
    "scalar_load",
    "scalar_store",
    "sendrecv",
]


# ---------------------------------------------------------------- registers
def register_alloc(x: Any = None) -> VirtualRegister:
    """A new virtual register, initialised from an int (register_move) or a 1-element tensor
    (register_load); 0 when x is None."""
    reg = new_register(VirtualRegister)
    if is_tensor(x):
        _issue("register_load", None, dst=reg, src=x)
    elif x is not None:
        _issue("register_move", None, dst=reg, src=x)
    return reg


def _require_register(api: str, name: str, x: Any, what: str = "a register") -> Any:
    # The record's generic message ("must be a compile-time scalar") would mislead here.
    if is_tensor(x):
        raise ConstraintError(
            f"{api}: {name} must be {what} (nisa.register_alloc()), got "
            f"tensor '{x.name}' {list(x.shape)}",
            capture_location(),
        )


def register_move(dst: VirtualRegister, src: Any) -> Any:
    """dst register = an immediate integer or another register."""
    _require_register("register_move", "dst", dst)
    _require_register("register_move", "src", src, "an integer or a register")
    return _issue("register_move", None, dst=dst, src=src)


def register_load(dst: VirtualRegister, src: Any) -> Any:
    """dst register = the single element of a 1-element HBM or SBUF tensor."""
    _require_register("register_load", "dst", dst)
    return _issue("register_load", None, dst=dst, src=src)


def register_store(dst: Any, src: VirtualRegister) -> Any:
    """The single element of a 1-element HBM or SBUF tensor = src register."""
    _require_register("register_store", "src", src)
    return _issue("register_store", None, dst=dst, src=src)


def scalar_load(src: Any) -> NkiScalar:
    """0.7: a runtime scalar loaded from a 1-element tensor."""
    reg = new_register(NkiScalar)
    _issue("register_load", None, dst=reg, src=src)
    return reg


def scalar_store(dst: Any, src: Any) -> Any:
    """0.7: store a runtime scalar into a 1-element tensor."""
    return _issue("register_store", None, dst=dst, src=src)


# ---------------------------------------------------------------- multi-core
def _peer_programs(api: str) -> tuple[KernelContext, Any, int]:
    ctx = current(f"nisa.{api}")
    programs = ctx.extra.get("lnc")
    if programs is None:
        raise UnsupportedError(
            f"{api}: this launch runs one program; at LNC=1 the peer is another kernel on the "
            "sibling core, which is not simulated (launch the kernel as kernel[2])",
            capture_location(),
        )
    rank = ctx.program_id[0] if ctx.program_id else 0
    return ctx, programs, rank


def core_barrier(
    data: Any, cores: Any, engine: engine = engine.gpsimd, name: str | None = None
) -> Any:
    """Both cores of the LNC2 pair wait until each has reached this barrier."""
    loc = capture_location()
    _, programs, rank = _peer_programs("core_barrier")
    arrived = programs.state.setdefault("core_barrier", [0] * programs.count)
    k = arrived[rank]
    arrived[rank] += 1
    programs.wait_until(rank, lambda: min(arrived) > k, f"core_barrier #{k}", loc)
    return _issue(
        "core_barrier",
        engine,
        name=name,
        data=data,
        cores=tuple(cores) if _seq(cores) else cores,
        sync_id=f"core_barrier:{k}",
        program=rank,
    )


def _seq(x: Any) -> bool:
    return isinstance(x, (tuple, list))


def sendrecv(
    src: Any,
    dst: Any,
    send_to_rank: int,
    recv_from_rank: int,
    pipe_id: int,
    dma_engine: dma_engine = dma_engine.dma,
    name: str | None = None,
) -> Any:
    """Send src to the peer core's dst while receiving the peer's src into own dst."""
    loc = capture_location()
    _, programs, rank = _peer_programs("sendrecv")
    try:
        _check_ranks(rank, send_to_rank, recv_from_rank)
        if is_tensor(src) and is_tensor(dst) and src.region().overlaps(dst.region()):
            raise ConstraintError(
                f"sendrecv: dst '{dst.name}' overlaps src '{src.name}'; the "
                "peer's transfer into dst would race with the send from src "
                "(use separate tiles)"
            )
    except KernelError as e:
        raise e.with_loc(loc) from None
    # Pairing: the k-th sendrecv of each program on one pipe_id goes together.
    posts = programs.state.setdefault("sendrecv", {})
    mine = posts.setdefault((rank, pipe_id), [])
    k = len(mine)
    entry = {"src": src, "to": send_to_rank, "done": False}
    mine.append(entry)
    peer = posts.setdefault((recv_from_rank, pipe_id), [])
    what = f"sendrecv #{k} on pipe_id {pipe_id}"
    programs.wait_until(rank, lambda: len(peer) > k, what, loc)
    theirs = peer[k]
    if theirs["to"] != rank:
        raise ConstraintError(
            f"sendrecv: program {rank} receives from rank {recv_from_rank}, "
            f"but that program's matching sendrecv sends to rank "
            f"{theirs['to']}",
            loc,
        )
    eng = "gpsimd" if _engine_value(dma_engine) == "gpsimd_dma" else "dma"
    _issue(
        "sendrecv",
        eng,
        name=name,
        src=src,
        dst=dst,
        peer_src=theirs["src"],
        send_to_rank=send_to_rank,
        recv_from_rank=recv_from_rank,
        pipe_id=pipe_id,
        dma_engine=_engine_value(dma_engine),
        sync_id=f"sendrecv:{pipe_id}:{k}",
        program=rank,
    )
    # The pair completes before either side proceeds (hardware: all of a pipe's transfers
    # finish first), so the peer's src is still unchanged when it is read.
    entry["done"] = True
    programs.wait_until(rank, lambda: theirs["done"], what, loc)


def _check_ranks(rank: int, send_to: Any, recv_from: Any) -> Any:
    for key, r in (("send_to_rank", send_to), ("recv_from_rank", recv_from)):
        if not isinstance(r, int) or isinstance(r, bool) or r not in (0, 1):
            raise ConstraintError(
                f"sendrecv: {key}={r!r} is not a rank of the LNC2 pair; allowed: 0 or 1"
            )
        if r == rank:
            raise ConstraintError(
                f"sendrecv: {key}={r} is this program's own rank; an LNC2 "
                f"exchange goes to the other core (rank {1 - rank})"
            )


def _engine_value(e: Any) -> str:
    return getattr(e, "name", None) or str(e)


def get_nc_sub_version() -> int:
    """Sub-version of the NeuronCore (0 on every simulated chip)."""
    current("nisa.get_nc_sub_version")
    return 0
