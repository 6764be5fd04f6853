"""Semantics of Tensor Engine instructions: nc_matmul (with transpose mode) and nc_transpose.

Pure numpy; knows nothing about time. MX matmul and quantize_mx live in semantics/mx.py; the
PSUM accumulate rule and tiling checks in semantics/_tensor_rules.py.

Numerics (nki-api.md §5A.2, §7.1). The PE array multiplies the stored input values (already
rounded to their dtype) and accumulates in fp32. AWS does not publish the accumulation order
or whether partial sums keep extra bits, so an exact fp32 emulation is not possible; we form
every product and the K-sum in float64 (products of fp32 x fp32 are exact in float64, the sum
of <= 256 terms loses < 2^-44 relative) and round to fp32 once per instruction. The result is
the correctly rounded dot product: within the error bound of any fp32 accumulation order, and
independent of BLAS blocking/threading, so runs are bit-reproducible. PSUM accumulation across
instructions is a true fp32 add (bf16 PSUM on NC-v4: upcast, fp32 add, RNE to bf16, as the
Trainium3 arch guide describes).

numerics="fast" (core.NUMERICS, opt-in) multiplies the fp32 values in fp32 BLAS instead: about
twice as fast, deterministic on one machine, but the K-sum is rounded in BLAS's order, so the
last bits may differ from the default and between BLAS builds.
"""

from __future__ import annotations

import numpy as np

from trnsim import wide_fp
from trnsim.errors import UnsupportedError
from trnsim.memory import View
from trnsim.program import capture_location
from trnsim.semantics import engine_rule, semantics
from trnsim.semantics._tensor_rules import (
    PE_ROWS,
    check_dst_shape,
    check_psum_banks,
    check_tiling,
    marks_psum,
    perf_mode_name,
    psum_words,
    warn,
    write_bits,
    write_psum_result,
)
from trnsim.spec import elems_of, fail, partitions_of

# nc_matmul input dtypes (nki-api.md §7.1); float8_e4m3fn only from NC-v4.
MATMUL_DTYPES = ("float8_e4m3", "float8_e5m2", "bfloat16", "float16", "tfloat32", "float32")
FP8 = ("float8_e4m3", "float8_e5m2", "float8_e4m3fn")
FP32_CLASS = ("float32", "tfloat32")


# ---------------------------------------------------------------- nc_matmul


def _check_matmul_dtypes(chip, stationary: View, moving: View, dst: View, double_row: bool):
    instr = "nc_matmul"
    gen = chip.nc_version
    allowed = MATMUL_DTYPES + (("float8_e4m3fn",) if gen >= 4 else ())
    if double_row:
        allowed = tuple(d for d in FP8 if d in allowed)
    for name, t in (("stationary", stationary), ("moving", moving)):
        if t.dtype.name not in allowed:
            mode = " with perf_mode=double_row" if double_row else ""
            fail(
                instr,
                f"operand '{name}' has dtype {t.dtype.name}",
                f"allowed{mode} on {chip.name}: {', '.join(allowed)}",
            )
    pair = {stationary.dtype.name, moving.dtype.name}
    if pair & set(FP32_CLASS) and not pair <= set(FP32_CLASS):
        fail(
            instr,
            f"stationary is {stationary.dtype.name} and moving is {moving.dtype.name}",
            "a float32/tfloat32 operand must be paired with float32/tfloat32",
        )
    if {"float8_e4m3", "float8_e4m3fn"} <= pair:
        fail(
            instr,
            "stationary and moving mix float8_e4m3 (legacy) and float8_e4m3fn (OCP)",
            "use one e4m3 flavour in one matmul",
        )
    dst_ok = ("float32", "bfloat16") if gen >= 4 else ("float32",)
    if dst.dtype.name not in dst_ok:
        fail(
            instr,
            f"dst has dtype {dst.dtype.name}",
            f"nc_matmul dst dtype must be {' or '.join(dst_ok)} on gen{gen} ({chip.name})",
        )


def _check_transpose_mode_dtypes(chip, stationary: View, dst: View) -> None:
    src, out = stationary.dtype, dst.dtype
    if src.is_packed:
        fail(
            "nc_matmul",
            f"is_transpose=True with packed dtype {src.name}",
            "transpose the packed words as uint32/uint16 views",
        )
    if src.itemsize == 1:
        if out.itemsize != 2:
            fail(
                "nc_matmul",
                f"is_transpose=True: {src.name} input with {out.name} dst",
                "1-byte inputs transpose into a 2-byte dst (code in the low byte)",
            )
    elif out != src:
        fail(
            "nc_matmul",
            f"is_transpose=True: {src.name} input with {out.name} dst",
            f"transpose mode writes the input bits: dst dtype must be {src.name}",
        )


def check_nc_matmul(*, chip, engine, attrs, dst, stationary, moving, **_) -> None:
    """nc_matmul rules that the generic limits cannot express (nki-api.md §7.1)."""
    instr = "nc_matmul"
    gen = chip.nc_version
    mode = perf_mode_name(attrs.get("perf_mode"))
    double_row = mode == "double_row"
    if mode not in tuple(chip.tensor.perf_modes):
        fail(
            instr,
            f"perf_mode={mode!r} is not available on {chip.name} (NeuronCore-v{gen})",
            f"available: {', '.join(chip.tensor.perf_modes)}",
        )
    acc = attrs.get("accumulate")
    if acc not in (None, True, False):
        fail(instr, f"accumulate={acc!r}", "allowed: None (auto), True, False")
    transpose_mode = bool(attrs.get("is_transpose")) and gen >= 3
    if transpose_mode:
        _check_transpose_mode_dtypes(chip, stationary, dst)
    else:
        _check_matmul_dtypes(chip, stationary, moving, dst, double_row)
    k, m, n = partitions_of(stationary), elems_of(stationary), elems_of(moving)
    if double_row:
        for name, t in (("stationary", stationary), ("moving", moving)):
            if len(t.shape) < 3 or t.shape[1] != 2:
                fail(
                    instr,
                    f"perf_mode=double_row: operand '{name}' has shape {list(t.shape)}",
                    "inputs are [K/2, 2, M] and [K/2, 2, N] (second dim exactly 2; pad with 0)",
                )
        m, n = m // 2, n // 2
    _, cs = check_tiling(instr, chip, attrs, k, m, dst)
    if double_row and cs < PE_ROWS:
        fail(
            instr,
            f"perf_mode=double_row with column tile size {cs}",
            "double_row cannot be combined with column tiling",
        )
    fmax = chip.tile_size["gemm_stationary_fmax"]
    if m > fmax:
        fail(
            instr,
            f"operand 'stationary' has free size {m}",
            f"at most {fmax} (gemm_stationary_fmax)",
        )
    nmax = chip.tensor.moving_fmax
    if gen >= 4 and dst.dtype.itemsize < 4:
        nmax = nmax * 4 // dst.dtype.itemsize  # NC-v4: 8 PSUM banks of the dst dtype
    if n > nmax:
        why = (f"NC-v{gen}: the PSUM banks of a {dst.dtype.name} dst" if gen >= 4
               else "gemm_moving_fmax")
        fail(
            instr,
            f"operand 'moving' has free size {n}",
            f"at most {nmax} ({why}); tile the free axis",
        )
    check_dst_shape(instr, dst, m, n)
    check_psum_banks(instr, chip, dst)


# Storage dtypes whose values numpy converts to float64 exactly and bit for bit as via fp32
# (checked over every bit pattern); others (float16 signalling NaNs) go through read_f32.
_DIRECT_F64 = frozenset(
    {"float32", "tfloat32", "bfloat16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn"}
)


def _scratch(core, key: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """A work array reused across instructions: a fresh 0.5 MiB array costs page faults on
    every call, more than the conversions into it."""
    pool = core.state.setdefault("matmul.scratch", {})
    arr = pool.get((key, shape, dtype))
    if arr is None:
        arr = pool[(key, shape, dtype)] = np.empty(shape, dtype)
    return arr


def _fill_generic(core, key: str, x: np.ndarray, v: View) -> None:
    """x[...] = v's values, converted by numpy (exact for every float dtype)."""
    src = v.array() if v.dtype.name in _DIRECT_F64 else v.read_f32()
    np.copyto(x, src, casting="unsafe")


def _fill_bf16(core, key: str, x: np.ndarray, v: View) -> None:
    """x[...] = bf16 values: the bits shifted into fp32 (a bf16 is the upper half of the fp32
    of the same value), then widened; bit for bit what _fill_generic gives, at half its cost."""
    bits = v.array().view(np.uint16)
    if x.dtype == np.float32:
        np.left_shift(bits, 16, out=x.view(np.uint32), dtype=np.uint32)
        return
    wide = _scratch(core, key + ".u32", x.shape, np.uint32)
    np.left_shift(bits, 16, out=wide, dtype=np.uint32)
    with np.errstate(invalid="ignore"):  # signalling NaNs become quiet, as in numpy's cast
        np.copyto(x, wide.view(np.float32))


# Input dtype -> how its values are put into the work matrix (the rest: _fill_generic).
_FILLS = {"bfloat16": _fill_bf16}


def _matrix(core, key: str, v: View, double_row: bool, work: type = np.float64) -> np.ndarray:
    """An input as a `work`-typed [K, free] matrix; double_row folds the pair dim into K."""
    k = v.shape[0]
    x = _scratch(core, key, (k, v.size // k if k else 0), work)
    if x.size:
        if wide_fp.kept(v):  # NKI_PRECISE_FP=0 kept fp32 values: read_f32 has them
            np.copyto(x.reshape(v.shape), v.read_f32(), casting="unsafe")
        else:
            _FILLS.get(v.dtype.name, _fill_generic)(core, key, x.reshape(v.shape), v)
    if double_row:
        return x.reshape(k, 2, -1).reshape(k * 2, -1)
    return x


@semantics("nc_matmul")
@marks_psum
def nc_matmul(
    core,
    *,
    engine: str,
    dst: View,
    stationary: View,
    moving: View,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    perf_mode=None,
    **attrs,
) -> None:
    """dst = stationary.T @ moving, K on partitions (double_row: K over partitions x 2).

    Products and the K-sum in float64, rounded to fp32 once; the PSUM rule of the module
    docstring decides overwrite vs add per element. is_transpose on NC-v3+ moves bits.
    """
    if is_transpose and core.chip.nc_version >= 3:
        if accumulate:
            raise UnsupportedError(
                "nc_matmul: accumulate=True with is_transpose=True is not "
                "simulated (transpose mode writes input bits; supported: "
                "accumulate=None or False)",
                capture_location(),
            )
        pe_transpose(core, dst, stationary, moving)
        return
    double_row = perf_mode_name(perf_mode) == "double_row"
    work = np.float32 if core.numerics == "fast" else np.float64
    s = _matrix(core, "stationary", stationary, double_row, work)
    m = _matrix(core, "moving", moving, double_row, work)
    out = _scratch(core, "out", (s.shape[1], m.shape[1]), work)
    with np.errstate(all="ignore"):
        np.matmul(s.T, m, out=out)  # NaN/Inf spread as in a real dot product
    # Rounded to fp32 once, as it is stored (fused with the PSUM add); fast: already fp32.
    write_psum_result(core, "nc_matmul", dst, out.reshape(dst.shape), accumulate)


# ---------------------------------------------------------------- transposes


def pe_transpose(core, dst: View, data: View, moving: View | None = None) -> None:
    """Bit-exact PE-array transpose (NC-v3+ transpose mode): dst[m, n] = data[k(n), m], where
    k(n) is the row holding the single 1 of column n of `moving` (identity: k(n) = n).

    A `moving` that is not a 0/1 selection matrix falls back to the arithmetic product (with a
    SimulationWarning): the hardware's behaviour there is not documented.
    """
    k = data.shape[0]
    bits = data.read().reshape(k, -1)
    if moving is None:
        out = bits.T
    else:
        mv = moving.read_f32().reshape(k, -1)
        nonzero = mv != 0
        ok = np.all((mv == 0) | (mv == 1)) and np.all(nonzero.sum(axis=0) <= 1)
        if not ok:
            warn(
                "nc_matmul: is_transpose=True with a moving operand that is not a 0/1 selection "
                "(identity) matrix; simulated as an arithmetic matmul"
            )
            x = data.read_f32().reshape(k, -1).astype(np.float64)
            with np.errstate(all="ignore"):
                write_psum_result(
                    core,
                    "nc_matmul",
                    dst,
                    (x.T @ mv.astype(np.float64)).astype(np.float32).reshape(dst.shape),
                    False,
                )
            return
        picked = bits[np.argmax(nonzero, axis=0), :]  # [N, M]
        picked[~nonzero.any(axis=0)] = 0
        out = picked.T
    if data.dtype.itemsize == 1 and dst.dtype.itemsize == 2:
        out = np.ascontiguousarray(out).view(np.uint8).astype(np.uint16)  # zero upper byte
    write_bits(dst, out)
    rows, words = psum_words(dst)
    core.psum_writer[rows, words] = dst.buffer.psum_tag


def _transpose_dims(data: View) -> tuple[int, int]:
    return partitions_of(data), elems_of(data)


@engine_rule("nc_transpose")
def _nc_transpose_engine(chip, operands, attrs):
    data, dst = operands.get("data"), operands.get("dst")
    if not (hasattr(data, "buffer") and hasattr(dst, "buffer")):
        return None
    p, f = _transpose_dims(data)
    # Only VectorE reads PSUM / writes SBUF; it handles up to 32x32 (nki-api.md §7.1).
    if p <= 32 and f <= 32:
        return "vector"
    if data.buffer.space != "sbuf" or dst.buffer.space != "psum":
        return "vector"
    return "tensor"


def check_nc_transpose(*, chip, engine, attrs, dst, data, **_) -> None:
    instr = "nc_transpose"
    p, f = _transpose_dims(data)
    limit = 128 if engine == "tensor" else 32
    if p > limit or f > limit:
        hint = (
            "; the Tensor Engine (up to 128x128) reads SBUF and writes PSUM"
            if engine == "vector"
            else ""
        )
        fail(
            instr, f"data is [{p}, {f}] on the {engine} engine", f"at most [{limit}, {limit}]{hint}"
        )
    if dst.dtype != data.dtype:
        fail(
            instr,
            f"dst has dtype {dst.dtype.name} but data has {data.dtype.name}",
            "dst dtype must equal data dtype (cast separately)",
        )
    if data.dtype.is_packed:
        fail(instr, f"data has packed dtype {data.dtype.name}", "transpose its uint32/uint16 view")
    check_dst_shape(instr, dst, f, p)


@semantics("nc_transpose")
@marks_psum
def nc_transpose(core, *, engine: str, dst: View, data: View, **attrs) -> None:
    """2-D partition<->free transpose (free dims flattened). Bit-exact, except TensorE on
    NC-v2, which multiplies by an identity in fp32: NaN/Inf spread along the row."""
    if engine == "tensor" and core.chip.nc_version < 3 and data.dtype.is_float:
        p = data.shape[0]
        x = data.read_f32().reshape(p, -1).astype(np.float64)
        with np.errstate(all="ignore"):
            out = (x.T @ np.eye(p)).astype(np.float32)
        dst.write(out.reshape(dst.shape))
    else:
        write_bits(dst, data.read().reshape(data.shape[0], -1).T)
    if dst.buffer.space == "psum":
        rows, words = psum_words(dst)
        core.psum_writer[rows, words] = dst.buffer.psum_tag
