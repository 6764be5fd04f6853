"""nki.language.dtypes: the device dtypes by their NKI names (re-exported by nki.language).

Each name is a trnsim.dtypes.DType, usable wherever numpy takes a dtype
(`np.zeros(shape, dtype=nl.bfloat16)`); the packed MX types (`*_x4`) hold four elements per
word. AWS's CPU simulator serves this module path as `nki.dtype` to nki-library's harness.
"""

from trnsim import dtypes as _dt

DType = _dt.DType
float32 = _dt.float32
tfloat32 = _dt.tfloat32
bfloat16 = _dt.bfloat16
float16 = _dt.float16
float8_e4m3 = _dt.float8_e4m3
float8_e4m3fn = _dt.float8_e4m3fn
float8_e5m2 = _dt.float8_e5m2
float8_e8m0fnu = _dt.float8_e8m0fnu
float4_e2m1fn = _dt.float4_e2m1fn
float8_e5m2_x4 = _dt.float8_e5m2_x4
float8_e4m3fn_x4 = _dt.float8_e4m3fn_x4
float4_e2m1fn_x4 = _dt.float4_e2m1fn_x4
int8, int16, int32 = _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
bool_ = _dt.bool_

__all__ = ["DType", "bfloat16", "bool_", "float4_e2m1fn", "float4_e2m1fn_x4", "float8_e4m3",
           "float8_e4m3fn", "float8_e4m3fn_x4", "float8_e5m2", "float8_e5m2_x4", "float8_e8m0fnu",
           "float16", "float32", "int8", "int16", "int32", "tfloat32", "uint8", "uint16", "uint32"]
