"""Semantics of Tensor Engine instructions: nc_matmul (with transpose mode) and nc_transpose.

Pure numpy; knows nothing about time. MX matmul and quantize_mx live in semantics/mx.py.

Numerics (nki-api.md §5A.2, §7.1). The PE array multiplies the stored input values (already
rounded to their dtype) and accumulates in fp32. AWS does not publish the accumulation order
or whether partial sums keep extra bits, so an exact fp32 emulation is not possible; we form
every product and the K-sum in float64 (products of fp32 x fp32 are exact in float64, the sum
of <= 256 terms loses < 2^-44 relative) and round to fp32 once per instruction. The result is
the correctly rounded dot product: within the error bound of any fp32 accumulation order, and
independent of BLAS blocking/threading, so runs are bit-reproducible. PSUM accumulation across
instructions is a true fp32 add (bf16 PSUM on NC-v4: upcast, fp32 add, RNE to bf16, as the
Trainium3 arch guide describes).

PSUM accumulation groups (nc_matmul / nc_matmul_mx `accumulate`). `core.psum_accumulating`
flags every fp32 word of PSUM that was written since the allocation that covers it; any write
by any engine sets it (core.py marks written PSUM words after every instruction), and a fresh
PSUM allocation clears it. That is the GA docstring's rule read literally: accumulate=None
"auto-detects based on whether this PSUM location was previously written". Per element:
accumulate=False overwrites, True adds (and warns with SimulationWarning where the word was
never written, as AWS's 0.5 simulator warns; the sum then includes the NaN poison of fresh
PSUM), None adds where written and overwrites elsewhere. Limitation: the state is per 4-byte
word, so two bf16 elements sharing a word share it (a matmul writing only one of them opens
the group for both).
"""

from __future__ import annotations

import warnings

import numpy as np

from trnsim.errors import ConstraintError, SimulationWarning, UnsupportedError
from trnsim.memory import View
from trnsim.program import capture_location
from trnsim.semantics import engine_rule, semantics
from trnsim.spec import elems_of, fail, partitions_of, start_partition

# nc_matmul input dtypes (nki-api.md §7.1); float8_e4m3fn only from NC-v4.
MATMUL_DTYPES = ("float8_e4m3", "float8_e5m2", "bfloat16", "float16", "tfloat32", "float32")
FP8 = ("float8_e4m3", "float8_e5m2", "float8_e4m3fn")
FP32_CLASS = ("float32", "tfloat32")
PE_ROWS = 128  # systolic array rows (contraction) and columns (stationary free -> dst partitions)

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}


# ---------------------------------------------------------------- shared helpers


def warn(message: str) -> None:
    """A SimulationWarning attributed to the user's kernel line."""
    loc = capture_location()
    if loc is None:
        warnings.warn(message, SimulationWarning, stacklevel=3)
    else:
        warnings.warn_explicit(message, SimulationWarning, loc.filename, loc.lineno)


def psum_words(view: View) -> tuple[np.ndarray, np.ndarray]:
    """(partition, fp32 word) of every element of an on-chip view, each shaped like the view:
    indices into core.psum_accumulating."""
    lay, buf = view.layout, view.buffer
    per_partition = buf.elems_per_partition(lay.dtype)
    pos = np.full(lay.shape, lay.offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(lay.shape, lay.strides, strict=True)):
        shape = [1] * len(lay.shape)
        shape[d] = n
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    part, elem = np.divmod(pos, per_partition) if per_partition else (pos * 0, pos)
    return buf.partition_start + part, (buf.byte_start + elem * lay.dtype.itemsize) // 4


def write_psum_result(core, instr: str, dst: View, result: np.ndarray, accumulate) -> None:
    """Store a matmul result (fp32, shaped like dst) with the per-element accumulate rule."""
    rows, words = psum_words(dst)
    written = core.psum_accumulating[rows, words]
    if accumulate is None:
        add = written
    elif accumulate:
        add = np.ones(dst.shape, dtype=bool)
        if not written.all():
            warn(f"{instr}: accumulate=True onto {int((~written).sum())} PSUM element(s) of "
                 f"'{dst.name}' that nothing wrote since allocation; the sum includes their "
                 "undefined contents (use accumulate=False or None for the first matmul)")
    else:
        add = np.zeros(dst.shape, dtype=bool)
    result = np.asarray(result, dtype=np.float32)
    if add.any():
        with np.errstate(all="ignore"):
            result = np.where(add, dst.read_f32() + result, result)  # fp32 PSUM add
    dst.write(result)
    core.psum_accumulating[rows, words] = True


def write_bits(dst: View, bits: np.ndarray) -> None:
    """Store values bit for bit (any storage dtype of dst's element size)."""
    isz = dst.dtype.itemsize
    dst.array().view(_UINT[isz])[...] = np.ascontiguousarray(bits).view(_UINT[isz]).reshape(
        dst.shape)


def _int(v, instr: str, what: str) -> int:
    try:
        return int(v)
    except (TypeError, ValueError) as e:
        raise ConstraintError(f"{instr}: {what} must be integers, got {v!r}") from e


def check_tiling(instr: str, chip, attrs, k: int, m: int, dst: View,
                 row_only: bool = False) -> tuple[int, int]:
    """tile_position / tile_size rules (nki-api.md §7.1). Returns (row_size, column_size)."""
    pos = tuple(attrs.get("tile_position") or ())
    size = tuple(attrs.get("tile_size") or ())
    if bool(pos) != bool(size):
        fail(instr, f"tile_position={pos} and tile_size={size}",
             "set both tile_position and tile_size, or neither")
    if not size:
        return PE_ROWS, PE_ROWS
    if len(pos) != 2 or len(size) != 2:
        fail(instr, f"tile_position={pos}, tile_size={size}",
             "both are (row, column) pairs")
    (r0, c0), (rs, cs) = ((_int(v, instr, "tile_position values") for v in pos),
                          (_int(v, instr, "tile_size values") for v in size))
    allowed = tuple(chip.tensor.tile_sizes)
    for what, v in (("row size", rs), ("column size", cs)):
        if v not in allowed:
            fail(instr, f"tile_size={size}: {what} {v} is not a PE tile size",
                 f"allowed on {chip.name}: {', '.join(map(str, allowed))}")
    if row_only and (cs != PE_ROWS or c0 != 0):
        fail(instr, f"tile_size={size}, tile_position={pos}",
             "only row tiling: column size must be 128 and the start column 0")
    for what, p, s in (("row", r0, rs), ("column", c0, cs)):
        if p < 0 or p % s or p + s > PE_ROWS:
            fail(instr, f"tile_position {what} {p} with {what} size {s}",
                 f"the start {what} must be a multiple of the {what} size and the tile must end "
                 f"by {PE_ROWS}")
    if k > rs:
        fail(instr, f"the contraction spans {k} partitions but the row tile has {rs} rows",
             f"at most {rs} (tile_size row size)")
    if m > cs:
        fail(instr, f"operand 'stationary' has free size {m} but the column tile has {cs} "
             "columns", f"at most {cs} (tile_size column size)")
    if cs < PE_ROWS and start_partition(dst) != c0:
        fail(instr, f"dst starts at PSUM partition {start_partition(dst)}; with tile_position "
             f"column {c0} the results land in PSUM partitions [{c0}, {c0 + m})",
             f"index dst from partition {c0}")
    return rs, cs


def check_dst_shape(instr: str, dst: View, m: int, n: int) -> None:
    if partitions_of(dst) != m or elems_of(dst) != n:
        fail(instr, f"dst has {partitions_of(dst)} partitions x {elems_of(dst)} elements "
             f"(shape {list(dst.shape)})", f"the result is [{m}, {n}]")


def check_psum_banks(instr: str, chip, dst: View) -> None:
    """Before NC-v4 a matmul writes into one 2 KiB PSUM bank (nki-api.md §3.4 TC2)."""
    if chip.nc_version >= 4:
        return
    bank = chip.tile_size["psum_bank_fmax_bytes"]
    r = dst.region()
    if r.byte_end > r.byte_start and r.byte_start // bank != (r.byte_end - 1) // bank:
        fail(instr, f"dst spans PSUM bytes [{r.byte_start}, {r.byte_end}) of each partition, "
             f"crossing a {bank}-byte bank boundary",
             f"on {chip.name} a matmul result must fit in one PSUM bank "
             f"({chip.tile_size['psum_bank_fmax']} fp32)")


def perf_mode_name(v) -> str:
    v = getattr(v, "value", v)
    return "none" if v is None else str(v)


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
            fail(instr, f"operand '{name}' has dtype {t.dtype.name}",
                 f"allowed{mode} on {chip.name}: {', '.join(allowed)}")
    pair = {stationary.dtype.name, moving.dtype.name}
    if pair & set(FP32_CLASS) and not pair <= set(FP32_CLASS):
        fail(instr, f"stationary is {stationary.dtype.name} and moving is {moving.dtype.name}",
             "a float32/tfloat32 operand must be paired with float32/tfloat32")
    if {"float8_e4m3", "float8_e4m3fn"} <= pair:
        fail(instr, "stationary and moving mix float8_e4m3 (legacy) and float8_e4m3fn (OCP)",
             "use one e4m3 flavour in one matmul")
    dst_ok = ("float32", "bfloat16") if gen >= 4 else ("float32",)
    if dst.dtype.name not in dst_ok:
        fail(instr, f"dst has dtype {dst.dtype.name}",
             f"nc_matmul dst dtype must be {' or '.join(dst_ok)} on gen{gen} ({chip.name})")


def _check_transpose_mode_dtypes(chip, stationary: View, dst: View) -> None:
    src, out = stationary.dtype, dst.dtype
    if src.is_packed:
        fail("nc_matmul", f"is_transpose=True with packed dtype {src.name}",
             "transpose the packed words as uint32/uint16 views")
    if src.itemsize == 1:
        if out.itemsize != 2:
            fail("nc_matmul", f"is_transpose=True: {src.name} input with {out.name} dst",
                 "1-byte inputs transpose into a 2-byte dst (code in the low byte)")
    elif out != src:
        fail("nc_matmul", f"is_transpose=True: {src.name} input with {out.name} dst",
             f"transpose mode writes the input bits: dst dtype must be {src.name}")


def check_nc_matmul(*, chip, engine, attrs, dst, stationary, moving, **_) -> None:
    """nc_matmul rules that the generic limits cannot express (nki-api.md §7.1)."""
    instr = "nc_matmul"
    gen = chip.nc_version
    mode = perf_mode_name(attrs.get("perf_mode"))
    double_row = mode == "double_row"
    if mode not in tuple(chip.tensor.perf_modes):
        fail(instr, f"perf_mode={mode!r} is not available on {chip.name} (NeuronCore-v{gen})",
             f"available: {', '.join(chip.tensor.perf_modes)}")
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
                fail(instr, f"perf_mode=double_row: operand '{name}' has shape {list(t.shape)}",
                     "inputs are [K/2, 2, M] and [K/2, 2, N] (second dim exactly 2; pad with 0)")
        m, n = m // 2, n // 2
    _, cs = check_tiling(instr, chip, attrs, k, m, dst)
    if double_row and cs < PE_ROWS:
        fail(instr, f"perf_mode=double_row with column tile size {cs}",
             "double_row cannot be combined with column tiling")
    fmax = chip.tile_size["gemm_stationary_fmax"]
    if m > fmax:
        fail(instr, f"operand 'stationary' has free size {m}",
             f"at most {fmax} (gemm_stationary_fmax)")
    nmax = chip.tile_size["gemm_moving_fmax"]
    if gen >= 4 and dst.dtype.itemsize < 4:
        nmax = nmax * 4 // dst.dtype.itemsize  # NC-v4: 8 PSUM banks of the dst dtype
    if n > nmax:
        fail(instr, f"operand 'moving' has free size {n}",
             f"at most {nmax} (gemm_moving_fmax{' for a ' + dst.dtype.name + ' dst' if gen >= 4 else ''})"
             "; tile the free axis")
    check_dst_shape(instr, dst, m, n)
    check_psum_banks(instr, chip, dst)


def _matrix(v: View, double_row: bool) -> np.ndarray:
    """An input as a float64 [K, free] matrix; double_row folds the pair dim into K."""
    x = v.read_f32().astype(np.float64)
    if double_row:
        return x.reshape(v.shape[0], 2, -1).reshape(v.shape[0] * 2, -1)
    return x.reshape(v.shape[0], -1)


@semantics("nc_matmul")
def nc_matmul(core, *, engine: str, dst: View, stationary: View, moving: View,
              is_transpose: bool = False, accumulate: bool | None = None,
              perf_mode=None, **attrs) -> None:
    """dst = stationary.T @ moving, K on partitions (double_row: K over partitions x 2).

    Products and the K-sum in float64, rounded to fp32 once; the PSUM rule of the module
    docstring decides overwrite vs add per element. is_transpose on NC-v3+ moves bits.
    """
    if is_transpose and core.chip.nc_version >= 3:
        if accumulate:
            raise UnsupportedError("nc_matmul: accumulate=True with is_transpose=True is not "
                                   "simulated (transpose mode writes input bits; supported: "
                                   "accumulate=None or False)", capture_location())
        pe_transpose(core, dst, stationary, moving)
        return
    double_row = perf_mode_name(perf_mode) == "double_row"
    s, m = _matrix(stationary, double_row), _matrix(moving, double_row)
    with np.errstate(all="ignore"):
        prod = (s.T @ m).astype(np.float32)  # NaN/Inf spread as in a real dot product
    write_psum_result(core, "nc_matmul", dst, prod.reshape(dst.shape), accumulate)


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
            warn("nc_matmul: is_transpose=True with a moving operand that is not a 0/1 selection "
                 "(identity) matrix; simulated as an arithmetic matmul")
            x = data.read_f32().reshape(k, -1).astype(np.float64)
            with np.errstate(all="ignore"):
                write_psum_result(core, "nc_matmul", dst,
                                  (x.T @ mv.astype(np.float64)).astype(np.float32)
                                  .reshape(dst.shape), False)
            return
        picked = bits[np.argmax(nonzero, axis=0), :]  # [N, M]
        picked[~nonzero.any(axis=0)] = 0
        out = picked.T
    if data.dtype.itemsize == 1 and dst.dtype.itemsize == 2:
        out = np.ascontiguousarray(out).view(np.uint8).astype(np.uint16)  # zero upper byte
    write_bits(dst, out)
    rows, words = psum_words(dst)
    core.psum_accumulating[rows, words] = True


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
        hint = ("; the Tensor Engine (up to 128x128) reads SBUF and writes PSUM"
                if engine == "vector" else "")
        fail(instr, f"data is [{p}, {f}] on the {engine} engine",
             f"at most [{limit}, {limit}]{hint}")
    if dst.dtype != data.dtype:
        fail(instr, f"dst has dtype {dst.dtype.name} but data has {data.dtype.name}",
             "dst dtype must equal data dtype (cast separately)")
    if data.dtype.is_packed:
        fail(instr, f"data has packed dtype {data.dtype.name}",
             "transpose its uint32/uint16 view")
    check_dst_shape(instr, dst, f, p)


@semantics("nc_transpose")
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
        core.psum_accumulating[rows, words] = True
