"""trnsim's stand-in for AWS's `nki_cpu_simulator` package, the CPU simulator that
nki-library's test harness swaps in for `nki` in `--test-mode simulation`.

`nki_cpu_simulator.nki` is trnsim's `nki` itself (trnsim.nki), so every module path the
harness imports (`nki_cpu_simulator.nki.builtin`, `.compiler`, `.isa`, `.isa.constants`,
`.language`, `.language.dtypes`, `.tensor`, `.typing`) is the matching trnsim.nki module, and
`nki.cpu_simulate(kernel)[lnc](**inputs)` runs the kernel on the simulated chip
(NKI_NC_VERSION=gen2|gen3|gen4 chooses trn1|trn2|trn3 when NEURON_PLATFORM_TARGET_OVERRIDE is
unset). Importing this package also installs the `nki`, `neuronxcc` and `neuron_dtypes`
aliases, so the module paths the harness does not alias itself (`nki.collectives`,
`neuron_dtypes`, ...) resolve to the same trnsim objects. Served only where no real
nki_cpu_simulator is installed (trnsim.aliases.install_harness_aliases).
"""

from trnsim.aliases import install_nki_aliases
from trnsim.nki import builtin, compiler

install_nki_aliases()

import trnsim.nki as nki  # noqa: E402

__all__ = ["builtin", "compiler", "nki"]
