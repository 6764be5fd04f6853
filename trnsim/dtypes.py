"""Device dtypes and hardware casts. Knows nothing about memory or time.

Every NKI dtype is a `DType`: its NKI name, the numpy `storage` type that holds its values
in host arrays and simulated memory, its size on the device and its kind. `cast` is the
hardware conversion into a dtype, `to_float32` the engines' fp32 view of stored values.
Result dtypes of arithmetic are in trnsim.dtype_promotion.

Storage. bfloat16, the float8 types and float4_e2m1fn use ml_dtypes types, as AWS's
simulator does with NKI_PRECISE_FP=1 (its `nl.float8_e4m3` *is* `ml_dtypes.float8_e4m3`:
IEEE-style, inf = S.1111.000, max 240, the Neuron legacy cFP8 range used by nki-library).
float4_e2m1fn holds one value per byte (code in the low nibble). tfloat32 is fp32 rounded
to 10 mantissa bits, held in float32. bool is one byte on the device; host storage is
`np.bool_` and `cast` always writes 0/1 bytes.

Packed MX types. float8_e5m2_x4 / float8_e4m3fn_x4 are uint32 words, element j of a group
of 4 in bits [8j, 8j+8) (little-endian, = `fp8_array.view(np.uint32)` in AWS's
mx_cpu_utils.py). float4_e2m1fn_x4 is a **16-bit** word, element j in bits [4j, 4j+4):
nki-library reinterprets uint16 tensors as float4_e2m1fn_x4 and uint32 as
float8_e4m3fn_x4, and its unpack_float4_x4 reads nibble j of a uint16; the NKI migration
guide does `src_ui16.view(nl.float4_e2m1fn_x4)`. Use `pack_x4` / `unpack_x4`; `cast`
into a packed type is a TypeError. A packed type's storage is its word type tagged with the
NKI name (numpy dtype metadata), so host arrays of x4 words keep their type through a
kernel launch; an untagged uint32/uint16 array is just an integer array.

Conversion rules (`cast`):
* Every conversion passes through fp32 (nki-api.md §5A.2: engines and DMA compute in fp32),
  so float64 inputs are first rounded to fp32 and ints above 2^24 round as fp32 does.
* float -> float: round to nearest, ties to even (Neuron data-types doc: "RNE by default";
  stochastic rounding, NEURON_RT_STOCHASTIC_ROUNDING_EN, is not modelled). Subnormals are
  kept (no flush-to-zero is documented). Overflow follows ml_dtypes, like AWS's simulator:
  bf16/fp16/tf32/float8_e4m3/float8_e5m2 -> ±inf, float8_e4m3fn -> NaN, float4_e2m1fn
  saturates to ±6 (it has no inf/NaN). AWS documents no float saturation; nki-library's
  hardware harness sets NEURON_RT_ENABLE_OCP_SATURATION=1 and its MX goldens clip to ±max
  before casting, so `cast(..., saturate=True)` models that mode: values (incl. ±inf) are
  clipped to ±max finite before rounding; NaN stays NaN.
* NaN -> NaN with its sign (payload unspecified); float4_e2m1fn has no NaN: NaN -> +0.
* float8_e8m0fnu (unsigned powers of two, 0xFF = NaN), as ml_dtypes 0.5/0.6 does for
  normal inputs: ties of the one-bit rounding go up (1.5 -> 2, 3 -> 4), values below 2^-127
  become 2^-127 (code 0), values above 2^127 and 0, negatives, ±inf, NaN become NaN.
  Unlike ml_dtypes (which sends all of (2^-127, 2^-126) up), inputs in that binade follow
  the same rule. `saturate` does not apply.
* float -> int: round to nearest, ties to even, saturating to the destination range
  (NKI 0.6.0 simulator fix, "matches hardware"); ±inf saturate; NaN -> 0 (undocumented;
  0 is what a saturating converter that treats NaN as unordered gives, and what
  NVIDIA/Arm saturating conversions return).
* int -> int: saturating (exact; equal to the hardware's int -> fp32 -> int path whenever
  that path is exact, i.e. always for narrowing). bool -> int: 0/1.
* anything -> bool: value != 0 (so NaN -> True).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

KINDS = ("float", "int", "uint", "bool", "packed")
TAG = "nki_dtype"  # numpy dtype metadata key naming a packed type (see _tagged)


class DType:
    """A device dtype. Compares equal to its name, aliases and numpy/ml_dtypes types.

    Immutable. Deliberately not a dataclass: kernels' test harnesses put dtypes in their own
    dataclasses and call dataclasses.asdict on them, which would turn a dataclass dtype into a
    dict (nki-library's test_attention_tkg.py passes `**asdict(test_cfg)`)."""

    __slots__ = ("itemsize", "kind", "name", "storage")
    name: str
    storage: np.dtype
    itemsize: int  # bytes on the device
    kind: str  # float | int | uint | bool | packed

    def __init__(self, name: str, storage: Any, itemsize: int, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"DType {name}: kind {kind!r} not in {KINDS}")
        for attr, value in (("name", name), ("storage", np.dtype(storage)),
                            ("itemsize", itemsize), ("kind", kind)):
            object.__setattr__(self, attr, value)

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError(f"DType {self.name} is immutable")

    def __reduce__(self) -> tuple:
        return (DType, (self.name, self.storage, self.itemsize, self.kind))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return other.name == self.name
        try:
            return resolve(other).name == self.name
        except TypeError:
            return False

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return self.name

    @property
    def dtype(self) -> np.dtype:
        """The host dtype (the storage), so numpy accepts a DType wherever it takes a dtype:
        `np.ones(shape, dtype=nl.float8_e5m2)` (numpy uses an object's `dtype` attribute)."""
        return self.storage

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """True for int and uint (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_packed(self) -> bool:
        return self.kind == "packed"

    @property
    def bits(self) -> int:
        """Bits of device memory one element occupies."""
        return self.itemsize * 8

    @property
    def lanes(self) -> int:
        """Values per element: 4 for the packed MX types, else 1."""
        return 4 if self.is_packed else 1

    @property
    def elem(self) -> DType:
        """The element type of a packed type; the dtype itself otherwise."""
        return ALL[_PACKED_ELEM[self.name]] if self.is_packed else self

    @property
    def max(self) -> float | int:
        """Largest finite value (floats: finfo max; ints: iinfo max; bool: 1)."""
        return _range(self)[1]

    @property
    def min(self) -> float | int:
        """Most negative finite value (float8_e8m0fnu: its smallest value, 2^-127)."""
        return _range(self)[0]


@dataclass(frozen=True)
class FInfo:
    """Numeric facts of a float dtype, with numpy's finfo names (values are Python floats)."""

    dtype: DType
    bits: int  # bits of the encoding (19 for tfloat32, 4 for float4_e2m1fn)
    nexp: int
    nmant: int
    max: float
    min: float
    eps: float
    tiny: float  # smallest positive normal
    smallest_subnormal: float
    has_inf: bool
    has_nan: bool

    @property
    def smallest_normal(self) -> float:
        return self.tiny


def _tagged(word: object, name: str) -> np.dtype:
    """A packed type's host storage: its word type carrying the NKI name as numpy metadata,
    so a host array of x4 words says what it holds (`resolve(arr.dtype)` is the packed type).
    The tag survives views, copies and reshapes; it compares equal to the bare word type."""
    return np.dtype(word, metadata={TAG: name})


def _d(name: str, storage: object, kind: str) -> DType:
    st = np.dtype(storage)
    return DType(name, st, st.itemsize, kind)


float32 = _d("float32", np.float32, "float")
tfloat32 = _d("tfloat32", np.float32, "float")
bfloat16 = _d("bfloat16", ml_dtypes.bfloat16, "float")
float16 = _d("float16", np.float16, "float")
float8_e4m3 = _d("float8_e4m3", ml_dtypes.float8_e4m3, "float")
float8_e4m3fn = _d("float8_e4m3fn", ml_dtypes.float8_e4m3fn, "float")
float8_e5m2 = _d("float8_e5m2", ml_dtypes.float8_e5m2, "float")
float8_e8m0fnu = _d("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu, "float")
float4_e2m1fn = _d("float4_e2m1fn", ml_dtypes.float4_e2m1fn, "float")
float8_e5m2_x4 = _d("float8_e5m2_x4", _tagged(np.uint32, "float8_e5m2_x4"), "packed")
float8_e4m3fn_x4 = _d("float8_e4m3fn_x4", _tagged(np.uint32, "float8_e4m3fn_x4"), "packed")
float4_e2m1fn_x4 = _d("float4_e2m1fn_x4", _tagged(np.uint16, "float4_e2m1fn_x4"), "packed")
int8 = _d("int8", np.int8, "int")
int16 = _d("int16", np.int16, "int")
int32 = _d("int32", np.int32, "int")
uint8 = _d("uint8", np.uint8, "uint")
uint16 = _d("uint16", np.uint16, "uint")
uint32 = _d("uint32", np.uint32, "uint")
bool_ = _d("bool", np.bool_, "bool")
float32r = float32  # B1's "float32r" (fp32 in a faster matmul mode) is simulated as float32

# fmt: off
ALL: dict[str, DType] = {d.name: d for d in (
    float32, tfloat32, bfloat16, float16, float8_e4m3, float8_e4m3fn, float8_e5m2,
    float8_e8m0fnu, float4_e2m1fn, float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4,
    int8, int16, int32, uint8, uint16, uint32, bool_)}

_PACKED_ELEM = {"float8_e5m2_x4": "float8_e5m2", "float8_e4m3fn_x4": "float8_e4m3fn",
                "float4_e2m1fn_x4": "float4_e2m1fn"}
_ALIASES = {
    "fp32": "float32", "f32": "float32", "float": "float32", "float32r": "float32",
    "tf32": "tfloat32", "bf16": "bfloat16", "fp16": "float16", "f16": "float16",
    "half": "float16", "fp8_e4m3": "float8_e4m3", "float8e4": "float8_e4m3",
    "fp8_e4m3fn": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "float8e5": "float8_e5m2",
    "fp8_e8m0": "float8_e8m0fnu", "fp8_e8m0fnu": "float8_e8m0fnu", "e8m0": "float8_e8m0fnu",
    "fp4_e2m1": "float4_e2m1fn", "fp4_e2m1fn": "float4_e2m1fn",
    "fp8_e5m2_x4": "float8_e5m2_x4", "fp8_e4m3fn_x4": "float8_e4m3fn_x4",
    "fp4_e2m1fn_x4": "float4_e2m1fn_x4", "bool_": "bool", "int": "int32", "short": "int16",
}
# fmt: on
# numpy storage -> dtype; tfloat32 and the packed types share storage and are never inferred
_BY_STORAGE = {d.storage: d for d in ALL.values() if d.kind != "packed" and d is not tfloat32}
_PYTHON_TYPES = {bool: bool_, int: int32, float: float32}


def _float_info(d: DType) -> FInfo:
    if d is tfloat32:  # 1s 8e 10m: fp32's exponent range with fp16's precision
        mx = (2 - 2.0**-10) * 2.0**127
        return FInfo(d, 19, 8, 10, mx, -mx, 2.0**-10, 2.0**-126, 2.0**-136, True, True)
    f = ml_dtypes.finfo(d.storage)  # also answers for numpy float16/float32
    has_inf = d.name not in ("float8_e4m3fn", "float8_e8m0fnu", "float4_e2m1fn")
    lo = float(f.tiny) if d is float8_e8m0fnu else float(f.min)
    return FInfo(
        d,
        int(f.bits),
        int(f.nexp),
        int(f.nmant),
        float(f.max),
        lo,
        float(f.eps),
        float(f.tiny),
        float(f.smallest_subnormal),
        has_inf,
        d is not float4_e2m1fn,
    )


_FINFO = {d.name: _float_info(d) for d in ALL.values() if d.is_float}


def finfo(dtype: object) -> FInfo:
    """max/min/eps/tiny/... of a float dtype (backs `nl.finfo`)."""
    d = resolve(dtype)
    if not d.is_float:
        raise TypeError(f"finfo: {d} is not a float dtype")
    return _FINFO[d.name]


def _range(d: DType) -> tuple[float | int, float | int]:
    if d.is_float:
        return _FINFO[d.name].min, _FINFO[d.name].max
    if d.is_int:
        info = np.iinfo(d.storage)
        return int(info.min), int(info.max)
    if d.kind == "bool":
        return 0, 1
    raise TypeError(f"{d}: a packed type has no scalar range (see its elem)")


def resolve(x: object) -> DType:
    """The DType named or denoted by x: a DType, NKI name or alias, numpy/ml_dtypes type,
    Python bool/int/float, or a torch dtype (matched on str(x); torch is not imported).

    Raises TypeError listing the known names.
    """
    if isinstance(x, DType):
        return x
    if isinstance(x, type) and x in _PYTHON_TYPES:
        return _PYTHON_TYPES[x]
    if isinstance(x, str) or type(x).__module__ == "torch":
        key = str(x).strip().lower().removeprefix("torch.")
        d = ALL.get(_ALIASES.get(key, key))
        if d is not None:
            return d
    if type(x).__module__ != "torch":
        tag = (getattr(x, "metadata", None) or {}).get(TAG) if isinstance(x, np.dtype) else None
        if tag in ALL:
            return ALL[tag]
        try:
            d = _BY_STORAGE.get(np.dtype(x))  # type: ignore[call-overload]
        except Exception:  # np.dtype raises assorted errors for non-dtypes
            d = None
        if d is not None:
            return d
    raise TypeError(f"unknown dtype {x!r} (known: {', '.join(ALL)})")


# ---------------------------------------------------------------- conversions


def _source_kind(dt: np.dtype) -> str:
    if dt.kind == "b":
        return "bool"
    if dt.kind in "iu":
        return "int"
    if dt.kind == "f" or (dt in _BY_STORAGE and _BY_STORAGE[dt].is_float):
        return "float"
    raise TypeError(f"cast: cannot convert values of numpy dtype {dt} (not a real number)")


def to_float32(values: object) -> np.ndarray:
    """The engines' fp32 view of values (a new array): exact for every device float type,
    round-to-nearest-even for ints beyond 2^24 and for float64, bool -> 0/1."""
    a = np.asarray(values)
    _source_kind(a.dtype)  # rejects complex, object, ...
    with np.errstate(invalid="ignore", over="ignore"):  # signalling NaNs, float64 overflow
        return a.astype(np.float32)


def cast(values: object, dtype: object, *, saturate: bool = False) -> np.ndarray:
    """Convert values (any real numpy array or scalar) to `dtype` as the hardware does.

    Returns a new array of `dtype.storage`. `saturate=True` selects the OCP saturation
    mode for float destinations (see the module docstring).
    """
    d = resolve(dtype)
    if d.is_packed:
        raise TypeError(f"cast: {d} is a packed type; build it with pack_x4 (elem {d.elem})")
    a = np.asarray(values)
    src = _source_kind(a.dtype)
    if a.size > _CAST_CHUNK and d is not float32:
        return _cast_in_chunks(a, d, saturate)
    if d.kind == "bool":
        return np.asarray((a if src != "float" else to_float32(a)) != 0)
    if d.is_int:
        return _float_to_int(to_float32(a), d) if src == "float" else _int_to_int(a, d)
    f = to_float32(a)
    if saturate and d is not float8_e8m0fnu:
        np.clip(f, -_FINFO[d.name].max, _FINFO[d.name].max, out=f)  # keeps NaN
    if d is float32:
        return f
    if d is tfloat32:
        return _round_tf32(f)
    if d is float8_e8m0fnu:
        return _to_e8m0(f)
    with np.errstate(invalid="ignore", over="ignore"):
        out = f.astype(d.storage)
    if d is float4_e2m1fn:
        out[np.isnan(f)] = 0  # no NaN encoding; ml_dtypes would give a signed zero
    return out


_CAST_CHUNK = 1 << 22  # elements converted at a time by a large cast


def _cast_in_chunks(a: np.ndarray, d: DType, saturate: bool) -> np.ndarray:
    """cast() of a large array a slice at a time: every conversion is elementwise, so the
    values are those of one call, and the fp32 (and float64, for ints) intermediates are a
    slice's, not the array's (a harness's 235 M-element float64 weights: 0.9 GiB less)."""
    flat = a.reshape(-1)
    first = cast(flat[:_CAST_CHUNK], d, saturate=saturate)
    out = np.empty(a.shape, dtype=first.dtype)
    dst = out.reshape(-1)
    dst[:_CAST_CHUNK] = first
    for s in range(_CAST_CHUNK, flat.size, _CAST_CHUNK):
        dst[s : s + _CAST_CHUNK] = cast(flat[s : s + _CAST_CHUNK], d, saturate=saturate)
    return out


def _float_to_int(f: np.ndarray, d: DType) -> np.ndarray:
    lo, hi = _range(d)
    with np.errstate(invalid="ignore"):  # signalling NaNs
        r = f.astype(np.float64)  # exact: every fp32 value and the int ranges fit
    np.rint(r, out=r)  # ties to even
    np.clip(r, lo, hi, out=r)
    r[np.isnan(r)] = 0
    return r.astype(d.storage)


def _int_to_int(a: np.ndarray, d: DType) -> np.ndarray:
    if a.dtype == np.uint64:
        a = np.minimum(a, np.uint64(2**63 - 1))
    lo, hi = _range(d)
    return np.asarray(np.clip(a.astype(np.int64), lo, hi), dtype=d.storage)


def _to_e8m0(f: np.ndarray) -> np.ndarray:
    """fp32 -> e8m0 from the bit fields: code = exponent field, +1 when mantissa >= 1.5."""
    b = f.view(np.uint32)
    exp = (b >> np.uint32(23)).astype(np.int64)  # sign bit lands in bit 8: negatives > 255
    man = b & np.uint32(0x7FFFFF)
    k = np.where(exp == 0, man >= 0x600000, exp + (man >= 0x400000))  # fp32 subnormals: 2^-127
    k = np.where((exp >= 255) | ((exp == 0) & (man == 0)) | (k > 254), 255, k)
    return np.asarray(k, dtype=np.uint8).view(float8_e8m0fnu.storage)


def _round_tf32(f: np.ndarray) -> np.ndarray:
    """fp32 -> tf32 by RNE on the 13 dropped mantissa bits (overflow carries into inf)."""
    b = f.view(np.uint32)
    lsb = (b >> np.uint32(13)) & np.uint32(1)
    with np.errstate(over="ignore"):  # only NaN patterns wrap, and they are replaced below
        r = (b + np.uint32(0x0FFF) + lsb) & np.uint32(0xFFFFE000)
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = (b & np.uint32(0xFFFFE000)) | np.uint32(0x00400000)  # NaN must not round to inf
    return np.asarray(np.where(nan, quiet, r), dtype=np.uint32).view(np.float32)


# ---------------------------------------------------------------- packed MX types


def _packed(dtype: object) -> DType:
    d = resolve(dtype)
    for p, e in _PACKED_ELEM.items():
        if d.name in (p, e):
            return ALL[p]
    raise TypeError(f"{d} is not an MX element or packed type (known: {', '.join(_PACKED_ELEM)})")


def pack_x4(values: object, elem_dtype: object) -> np.ndarray:
    """Pack groups of 4 consecutive values (last axis) into x4 words.

    `elem_dtype` is the element type or the packed type itself. Values not already in the
    element's storage type are `cast` first. Element j of a group goes to bits [8j, 8j+8)
    of a uint32 (fp8) or [4j, 4j+4) of a uint16 (fp4). Shape [..., 4n] -> [..., n].
    """
    p = _packed(elem_dtype)
    v = np.asarray(values)
    if v.dtype != p.elem.storage:
        v = cast(v, p.elem)
    if v.ndim == 0 or v.shape[-1] % 4:
        raise ValueError(f"pack_x4: last axis must be a multiple of 4, got shape {v.shape}")
    width = p.bits // 4
    codes = v.view(np.uint8).astype(p.storage) & ((1 << width) - 1)
    codes = codes.reshape(*v.shape[:-1], v.shape[-1] // 4, 4)
    shifts = (np.arange(4) * width).astype(p.storage)
    return np.asarray(np.bitwise_or.reduce(codes << shifts, axis=-1), dtype=p.storage)


def unpack_x4(words: object, elem_dtype: object) -> np.ndarray:
    """Inverse of pack_x4: x4 words (any int type of the container's width) -> values in
    the element's storage type, shape [..., n] -> [..., 4n]."""
    p = _packed(elem_dtype)
    w = np.asarray(words)
    if w.dtype.kind not in "iu" or w.dtype.itemsize != p.itemsize:
        raise TypeError(f"unpack_x4: {p} words are {p.itemsize}-byte ints, got {w.dtype}")
    if w.ndim == 0:
        raise ValueError("unpack_x4: words must have at least one axis")
    w = w.view(p.storage)
    width = p.bits // 4
    shifts = (np.arange(4) * width).astype(p.storage)
    codes = (w[..., None] >> shifts) & p.storage.type((1 << width) - 1)
    return codes.astype(np.uint8).reshape(*w.shape[:-1], w.shape[-1] * 4).view(p.elem.storage)
