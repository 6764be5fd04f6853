"""neuronxcc.nki.isa.constants (NKI Beta 1): the enums that parametrise nki.isa instructions.

The same objects as neuronxcc.nki.isa.engine, .dge_mode, ... (AWS's per-API examples import
`from neuronxcc.nki.isa.constants import dge_mode`; the B1 docs' samples spell
`nisa.constants.engine`).
"""

from __future__ import annotations

from trnsim.compat.neuronxcc.nki._isa_core import dge_mode, engine, nc_version, reduce_cmd
from trnsim.nki._isa_base import oob_mode

__all__ = ["dge_mode", "engine", "nc_version", "oob_mode", "reduce_cmd"]
