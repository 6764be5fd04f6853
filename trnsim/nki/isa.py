"""nki.isa (current API): destination-passing instructions, enums and helpers.

Each wrapper is NKI's signature plus one `_issue` call, grouped by engine family in the
isa_<family> modules; meanings live in trnsim.semantics, rules and costs in isa/.
"""

from trnsim.errors import ConstraintError as NkiValidationError  # noqa: F401
from trnsim.nki._isa_base import (  # noqa: F401
    NkiInstruction,
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
from trnsim.nki.language import NKIObject  # noqa: F401

# GA nki.isa still exports the B1 spellings of the engines (deprecated); NkiValidationError
# is the validator's exception class: trnsim raises ConstraintError for every rule.
gpsimd_engine, scalar_engine, tensor_engine, unknown_engine, vector_engine = (
    engine.gpsimd,
    engine.scalar,
    engine.tensor,
    engine.unknown,
    engine.vector,
)
