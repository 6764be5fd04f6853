"""nki.isa.constants (current API): the enums that parametrise nki.isa instructions.

The same objects as nki.isa.engine, nki.isa.dge_mode, ... (defined once in
trnsim.nki._isa_base): `from nki.isa.constants import oob_mode` and `nisa.oob_mode` are one
enum. Members as documented for nki.isa (NKI 0.3+): engine {unknown, tensor, scalar, gpsimd,
dma, vector, sync}, reduce_cmd {idle, reset, reduce, reset_reduce, load_reduce}, dge_mode
{unknown, swdge, hwdge, none}, oob_mode {error, skip}, nc_version {gen2, gen3, gen4},
matmul_perf_mode {none, double_row}, dma_engine {dma, gpsimd_dma}.
"""

from trnsim.nki._isa_base import (
    dge_mode,
    dma_engine,
    engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)

__all__ = ["dge_mode", "dma_engine", "engine", "matmul_perf_mode", "nc_version", "oob_mode",
           "reduce_cmd"]
