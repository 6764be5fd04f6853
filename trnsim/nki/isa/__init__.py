"""nki.isa (current API): destination-passing instructions, enums and helpers.

Each wrapper is NKI's signature plus one `_issue` call, grouped by engine family in the
isa_<family> modules; meanings live in trnsim.semantics, rules and costs in isa/.
"""

import inspect

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
    public_instruction,
    reduce_cmd,
)
from trnsim.nki.isa import constants  # noqa: F401  (nki.isa.constants, by module path)
from trnsim.nki.isa_dma import *  # noqa: F403
from trnsim.nki.isa_gpsimd import *  # noqa: F403
from trnsim.nki.isa_misc import *  # noqa: F403
from trnsim.nki.isa_scalar import *  # noqa: F403
from trnsim.nki.isa_select import *  # noqa: F403
from trnsim.nki.isa_tensor import *  # noqa: F403
from trnsim.nki.isa_vector import *  # noqa: F403
from trnsim.nki.language import NKIObject  # noqa: F401

# Every public instruction function checks its enum arguments and turns a wrong call
# signature into a ConstraintError at the user's line (trnsim.nki._isa_base.public_instruction).
for _name, _obj in list(globals().items()):
    if (
        inspect.isfunction(_obj)
        and not _name.startswith("_")
        and (_obj.__module__.startswith("trnsim.nki.isa_") or _obj is get_nc_version)
    ):
        globals()[_name] = public_instruction(_obj)
del _name, _obj

# GA nki.isa still exports the B1 spellings of the engines (deprecated); NkiValidationError
# is the validator's exception class: trnsim raises ConstraintError for every rule.
gpsimd_engine, scalar_engine, tensor_engine, unknown_engine, vector_engine = (
    engine.gpsimd,
    engine.scalar,
    engine.tensor,
    engine.unknown,
    engine.vector,
)
