"""nki.isa (current API): destination-passing instructions, enums and helpers.

Each wrapper is NKI's signature plus one `_issue` call, grouped by engine family in the
isa_<family> modules; meanings live in trnsim.semantics, rules and costs in isa/.
"""

from trnsim.nki._isa_base import (  # noqa: F401
    dge_mode,
    dma_engine,
    engine,
    get_nc_version,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
from trnsim.nki.isa_dma import *  # noqa: F403
from trnsim.nki.isa_gpsimd import *  # noqa: F403
from trnsim.nki.isa_misc import *  # noqa: F403
from trnsim.nki.isa_scalar import *  # noqa: F403
from trnsim.nki.isa_select import *  # noqa: F403
from trnsim.nki.isa_tensor import *  # noqa: F403
from trnsim.nki.isa_vector import *  # noqa: F403
