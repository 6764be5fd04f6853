"""nki.compiler: AWS's compiler driver (NEFF compilation, the kernel builder, MLIR dialects).

trnsim runs kernels without compiling them, so nothing here is simulated: the module exists
because harnesses import it by path (nki-library's simulation harness imports AWS's simulator's
`nki.compiler`). Any name looked up in it raises UnsupportedError naming the entry points that
do run a kernel.
"""

from __future__ import annotations

from typing import Any

from trnsim.errors import UnsupportedError

__trnsim_unsupported__ = True  # `trnsim coverage`: the path imports, nothing in it runs


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise UnsupportedError(
        f"nki.compiler.{name}: AWS's NKI compiler is not part of trnsim (kernels are simulated, "
        "not compiled); run a kernel with nki.jit, nki.simulate or nki.cpu_simulate"
    )
