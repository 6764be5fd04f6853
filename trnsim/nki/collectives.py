"""nki.collectives: not simulated yet; every name raises UnsupportedError saying so."""

from __future__ import annotations

from typing import Any

from trnsim.errors import UnsupportedError
from trnsim.program import capture_location

_NAMES = ("all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all",
          "all_to_all_v", "collective_permute", "collective_permute_implicit",
          "collective_permute_implicit_reduce",
          "collective_permute_implicit_current_processing_rank_id", "rank_id")


def _unsupported(name: str):
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(f"nki.collectives.{name}: collectives are not simulated yet "
                               "(single-kernel LNC2 exchange: nisa.sendrecv, nisa.core_barrier)",
                               capture_location())

    fn.__name__ = name
    return fn


for _n in _NAMES:
    globals()[_n] = _unsupported(_n)


class ReplicaGroup:
    """A group of ranks taking part in a collective (accepted, collectives not simulated)."""

    def __init__(self, *groups: Any):
        self.groups = groups
