"""trnsim's implementation of the `nki` package (current API, NKI 0.3+), importable as `nki`
after trnsim.install_nki_aliases() or under `trnsim run`."""

from trnsim.nki import collectives, dtype, isa, language, typing
from trnsim.nki.jit import Kernel, cpu_simulate, jit, simulate
from trnsim.nki.ranks import run_ranks
from trnsim.nki.tensor import NkiTensor

__all__ = [
           "Kernel",
           "NkiTensor",
           "collectives",
           "cpu_simulate",
           "dtype",
           "isa",
           "jit",
           "language",
           "run_ranks",
           "simulate",
           "typing",
]
