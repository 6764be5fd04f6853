"""Random NKI kernels for the fuzzer (test_rel_fuzz.py): a kernel is drawn as a small spec,
written out as Python source in either API generation, run on trnsim, and compared with a
reference model that computes every step in float64 and rounds as the engines do (fp32
arithmetic, then round-to-nearest-even into each tile's dtype).

Valid kernels use only operations whose fp32 result the reference reproduces exactly: add,
subtract, multiply, maximum, minimum with dyadic constants, relu, copies, max/min reductions,
and (on integer-valued data, where fp32 sums are exact in any order) add reductions and
matmuls. Invalid kernels are valid ones with one documented rule broken on one marked line.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import textwrap
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from trnsim import dtypes as dt

TILE_DTYPES = ("float32", "bfloat16", "float16")
INPUT_DTYPES = (*TILE_DTYPES, "float8_e4m3")
CONSTANTS = (0.5, 2.0, -1.0, 3.0, 0.25, -0.75)
BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
          "maximum": np.maximum, "minimum": np.minimum}
REDUCE = {"max": np.max, "min": np.min, "add": np.sum}
FINITE_MAX = {"float32": 3e38, "bfloat16": 3e38, "float16": 60000.0, "float8_e4m3": 200.0}


def storage(name: str) -> np.dtype:
    """The numpy (ml_dtypes) type holding a device dtype's values."""
    return np.dtype(dt.resolve(name).storage)


def round_to(x: np.ndarray, name: str) -> np.ndarray:
    """fp32 values rounded to `name` (round-to-nearest-even, ml_dtypes/numpy casts)."""
    return np.asarray(x, np.float32).astype(storage(name))


def fp32(x: np.ndarray) -> np.ndarray:
    """An engine's fp32 result of float64 arithmetic on fp32 inputs (+, -, *, max, min of two
    fp32 values are exact in float64, so one rounding gives IEEE fp32)."""
    return np.asarray(x, np.float64).astype(np.float32)


@dataclass
class Op:
    kind: str  # ts (tensor_scalar) | tt (tensor_tensor with b) | relu | copy | reduce
    op: str = ""
    const: float = 0.0
    dtype: str = "float32"  # the destination tile's dtype


@dataclass
class Spec:
    api: str  # ga | b1
    chip: str
    P: int  # partitions of a tile
    W: int  # free size of a tile (per loop iteration)
    chunks: int  # loop trip count over the free axis (F = chunks * W)
    loop: str  # affine_range | sequential_range | range
    data: str  # ints | floats
    a_dtype: str
    b_dtype: str
    view: str  # full | offset | step | ap   (how the kernel reads its input tiles)
    p0: int
    f0: int
    step: int
    host: str  # C | F | T  (the host array's memory layout)
    ops: list[Op] = field(default_factory=list)
    # (K, M, N) instead of the op chain: `chunks` matmuls of K rows accumulate in PSUM
    matmul: tuple[int, int, int] | None = None
    seed: int = 0
    broken: str = ""  # the rule an invalid kernel breaks ("" for a valid one)

    @property
    def F(self) -> int:
        return self.W * self.chunks

    def uses_b(self) -> bool:
        return self.matmul is not None or any(o.kind == "tt" for o in self.ops)

    def reduces(self) -> bool:
        return bool(self.ops) and self.ops[-1].kind == "reduce"


# ---------------------------------------------------------------- strategies


@st.composite
def op_chains(draw, data: str) -> list[Op]:
    n = draw(st.integers(1, 4))
    ops = []
    for k in range(n):
        kinds = ["ts", "tt", "relu", "copy"] + (["reduce"] if k == n - 1 else [])
        kind = draw(st.sampled_from(kinds))
        dtype = draw(st.sampled_from(TILE_DTYPES))
        if kind == "ts":
            ops.append(Op(kind, draw(st.sampled_from(list(BINARY))),
                          draw(st.sampled_from(CONSTANTS)), dtype))
        elif kind == "tt":
            ops.append(Op(kind, draw(st.sampled_from(list(BINARY))), dtype=dtype))
        elif kind == "reduce":
            names = ["max", "min"] + (["add"] if data == "ints" else [])
            ops.append(Op(kind, draw(st.sampled_from(names)), dtype="float32"))
        else:
            ops.append(Op(kind, dtype=dtype))
    return ops


@st.composite
def specs(draw, api: str | None = None) -> Spec:
    api = api or draw(st.sampled_from(["ga", "b1"]))
    chip = draw(st.sampled_from(["trn1", "trn2", "trn3"]))
    data = draw(st.sampled_from(["ints", "floats"]))
    matmul = None
    if draw(st.integers(0, 5)) == 0:
        matmul = (draw(st.integers(1, 128)), draw(st.integers(1, 128)), draw(st.integers(1, 512)))
        data = "ints"
    P = draw(st.sampled_from([1, 2, 7, 32, 64, 100, 128]))
    W = draw(st.sampled_from([1, 3, 16, 64, 130]))
    chunks = draw(st.integers(1, 3))
    view = draw(st.sampled_from(["full", "offset", "step"] + (["ap"] if api == "ga" else [])))
    ops = [] if matmul else draw(op_chains(data))
    a_dtype = draw(st.sampled_from(INPUT_DTYPES if not matmul else TILE_DTYPES))
    b_dtype = draw(st.sampled_from(INPUT_DTYPES if not matmul else TILE_DTYPES))
    if matmul and "float32" in (a_dtype, b_dtype):  # fp32 pairs only with fp32 (nc_matmul)
        a_dtype = b_dtype = "float32"
    return Spec(
        api=api, chip=chip, P=P, W=W, chunks=chunks,
        loop=draw(st.sampled_from(["affine_range", "sequential_range", "range"])),
        data=data, a_dtype=a_dtype, b_dtype=b_dtype,
        view=view, p0=draw(st.integers(0, 3)) if view != "full" else 0,
        f0=draw(st.integers(0, 5)) if view != "full" else 0,
        step=draw(st.integers(2, 3)) if view in ("step", "ap") else 1,
        host=draw(st.sampled_from(["C", "F", "T"])), ops=ops, matmul=matmul,
        seed=draw(st.integers(0, 2**16)),
    )


# ---------------------------------------------------------------- inputs and the reference


def host_shape(s: Spec) -> tuple[int, int]:
    if s.matmul:
        return s.matmul[0] * s.chunks, 520  # (an invalid kernel's moving tile is 513 wide)
    return s.p0 + s.P, s.f0 + s.F * s.step


def inputs(s: Spec) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(s.seed)
    arrays = []
    for name in (s.a_dtype, s.b_dtype):
        shape = host_shape(s)
        if s.data == "ints":
            v = rng.integers(-8, 9, size=shape).astype(np.float32)
        else:
            mag = np.exp2(rng.uniform(-8, 5, size=shape)).astype(np.float32)
            v = mag * rng.choice([-1.0, 1.0], size=shape).astype(np.float32)
        v = round_to(v, name)
        if s.host == "F":
            v = np.asfortranarray(v)
        elif s.host == "T":
            v = np.ascontiguousarray(v.T).T
        arrays.append(v)
    return arrays[0], arrays[1]


def tile_of(s: Spec, x: np.ndarray, i: int) -> np.ndarray:
    """The input tile loop iteration i reads, as fp32 values."""
    f = s.f0 + i * s.W * s.step
    return x[s.p0:s.p0 + s.P, f:f + s.W * s.step:s.step].astype(np.float32)


def reference(s: Spec, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if s.matmul:
        k, m, n = s.matmul
        rows = k * s.chunks
        st_, mv = a[:rows, :m].astype(np.float64), b[:rows, :n].astype(np.float64)
        return fp32(st_.T @ mv)  # integer values: exact in fp32 in any order
    pieces = []
    for i in range(s.chunks):
        x = tile_of(s, a, i)
        y = tile_of(s, b, i)
        for o in s.ops:
            if o.kind == "ts":
                r = fp32(BINARY[o.op](x.astype(np.float64), np.float64(o.const)))
            elif o.kind == "tt":
                r = fp32(BINARY[o.op](x.astype(np.float64), y.astype(np.float64)))
            elif o.kind == "relu":
                r = np.maximum(x, np.float32(0))
            elif o.kind == "reduce":
                r = fp32(REDUCE[o.op](x.astype(np.float64), axis=1, keepdims=True))
            else:
                r = x
            x = round_to(r, o.dtype).astype(np.float32)
        pieces.append(x)
    return np.concatenate(pieces, axis=1)


def out_dtype(s: Spec) -> str:
    return "float32" if s.matmul or not s.ops else s.ops[-1].dtype


def in_range(s: Spec, want: np.ndarray) -> bool:
    """Whether every value stays finite in the dtypes it passes through (else not a test of
    rounding but of overflow, whose rule differs by dtype)."""
    limit = min(FINITE_MAX[d] for d in (out_dtype(s), *(o.dtype for o in s.ops)))
    return bool(np.all(np.abs(want) < limit))


# ---------------------------------------------------------------- source text


def _dt(name: str, api: str) -> str:
    return f"nl.{name}"


def ga_source(s: Spec) -> list[str]:
    """The kernel in the current API; returns its lines (line k of the file is lines[k-1])."""
    L = ["import nki", "import nki.isa as nisa", "import nki.language as nl", "", "",
         "def kernel(a, b):"]
    if s.matmul:
        k, m, n = s.matmul
        rows = f"kk * {k}:(kk + 1) * {k}"
        return [
            *L,
            f"    out = nl.ndarray(({m}, {n}), nl.float32, buffer=nl.shared_hbm)",
            f"    ps = nl.ndarray(({m}, {n}), nl.float32, buffer=nl.psum)",
            f"    for kk in {_loop(s)}:",
            f"        st = nl.ndarray(({k}, {m}), nl.{s.a_dtype}, buffer=nl.sbuf)",
            f"        nisa.dma_copy(dst=st, src=a[{rows}, 0:{m}])",
            f"        mv = nl.ndarray(({k}, {n}), nl.{s.b_dtype}, buffer=nl.sbuf)",
            f"        nisa.dma_copy(dst=mv, src=b[{rows}, 0:{n}])",
            "        nisa.nc_matmul(dst=ps, stationary=st, moving=mv)  # MATMUL",
            f"    res = nl.ndarray(({m}, {n}), nl.float32, buffer=nl.sbuf)",
            "    nisa.tensor_copy(dst=res, src=ps)",
            "    nisa.dma_copy(dst=out, src=res)",
            "    return out"]
    fout = s.chunks if s.reduces() else s.F
    L.append(f"    out = nl.ndarray(({s.P}, {fout}), nl.{out_dtype(s)}, buffer=nl.shared_hbm)")
    L.append(f"    for i in {_loop(s)}:")
    for src, name, dtype in (("a", "x0", s.a_dtype), ("b", "y0", s.b_dtype)):
        if src == "b" and not s.uses_b():
            continue
        L.append(f"        {name} = nl.ndarray(({s.P}, {s.W}), nl.{dtype}, buffer=nl.sbuf)")
        L.append(f"        nisa.dma_copy(dst={name}, src={_ga_view(s, src)})  # LOAD_{src}")
    cur = "x0"
    for k, o in enumerate(s.ops, 1):
        w = 1 if o.kind == "reduce" else s.W
        L.append(f"        x{k} = nl.ndarray(({s.P}, {w}), nl.{o.dtype}, buffer=nl.sbuf)")
        if o.kind == "ts":
            L.append(f"        nisa.tensor_scalar(dst=x{k}, data={cur}, op0=nl.{o.op}, "
                     f"operand0={o.const})  # OP{k}")
        elif o.kind == "tt":
            L.append(f"        nisa.tensor_tensor(dst=x{k}, data1={cur}, data2=y0, "
                     f"op=nl.{o.op})  # OP{k}")
        elif o.kind == "relu":
            L.append(f"        nisa.activation(dst=x{k}, op=nl.relu, data={cur})  # OP{k}")
        elif o.kind == "reduce":
            L.append(f"        nisa.tensor_reduce(dst=x{k}, op=nl.{o.op}, data={cur}, "
                     f"axis=1)  # OP{k}")
        else:
            L.append(f"        nisa.tensor_copy(dst=x{k}, src={cur})  # OP{k}")
        cur = f"x{k}"
    dst = "out[:, i:i + 1]" if s.reduces() else f"out[:, i * {s.W}:(i + 1) * {s.W}]"
    L.append(f"        nisa.dma_copy(dst={dst}, src={cur})  # STORE")
    L.append("    return out")
    return L


def _loop(s: Spec) -> str:
    return f"{'nl.' if s.loop != 'range' else ''}{s.loop}({s.chunks})"


def _ga_view(s: Spec, src: str) -> str:
    fs = f"{s.f0} + i * {s.W * s.step}"
    if s.view == "ap":
        rows = host_shape(s)[1]
        return f"{src}.ap([[{rows}, {s.P}], [{s.step}, {s.W}]], offset={s.p0 * rows} + {fs})"
    end = f"{s.f0} + (i + 1) * {s.W * s.step}"
    step = f":{s.step}" if s.step > 1 else ""
    return f"{src}[{s.p0}:{s.p0 + s.P}, {fs}:{end}{step}]"


def b1_source(s: Spec) -> list[str]:
    """The kernel in Beta 1 (value-returning nl, nl.load/nl.store, arange indexing)."""
    L = ["import neuronxcc.nki as nki", "import neuronxcc.nki.isa as nisa",
         "import neuronxcc.nki.language as nl", "", "", "def kernel(a, b):"]
    if s.matmul:
        k, m, n = s.matmul
        L.append(f"    out = nl.ndarray(({m}, {n}), dtype=nl.float32, buffer=nl.shared_hbm)")
        load = (f"        st = nl.load(a[nl.ds(kk * {k}, {k}), 0:{m}], dtype=nl.{s.a_dtype})",
                f"        mv = nl.load(b[nl.ds(kk * {k}, {k}), 0:{n}], dtype=nl.{s.b_dtype})")
        if s.chunks == 1:  # the result tile of the matmul itself
            L += ["    kk = 0", *(ln[4:] for ln in load),
                  "    ps = nisa.nc_matmul(st, mv)  # MATMUL"]
        else:  # accumulated into a PSUM tile over K chunks (B1 `+=`)
            L += [f"    ps = nl.zeros(({m}, {n}), dtype=nl.float32, buffer=nl.psum)",
                  f"    for kk in {_loop(s)}:", *load,
                  "        ps += nisa.nc_matmul(st, mv)  # MATMUL"]
        return [*L, "    nl.store(out, value=nl.copy(ps, dtype=nl.float32))", "    return out"]
    fout = s.chunks if s.reduces() else s.F
    L.append(f"    out = nl.ndarray(({s.P}, {fout}), dtype=nl.{out_dtype(s)}, "
             "buffer=nl.shared_hbm)")
    L.append(f"    ip = nl.arange({s.P})[:, None]")
    L.append(f"    jf = nl.arange({s.W})[None, :]")
    L.append(f"    for i in {_loop(s)}:")
    for src, name, dtype in (("a", "x0", s.a_dtype), ("b", "y0", s.b_dtype)):
        if src == "b" and not s.uses_b():
            continue
        L.append(f"        {name} = nl.load({_b1_view(s, src)}, dtype=nl.{dtype})  "
                 f"# LOAD_{src}")
    cur = "x0"
    for k, o in enumerate(s.ops, 1):
        d = f"dtype=nl.{o.dtype}"
        if o.kind == "ts":
            L.append(f"        x{k} = nl.{o.op}({cur}, {o.const}, {d})  # OP{k}")
        elif o.kind == "tt":
            L.append(f"        x{k} = nl.{o.op}({cur}, y0, {d})  # OP{k}")
        elif o.kind == "relu":
            L.append(f"        x{k} = nl.relu({cur}, {d})  # OP{k}")
        elif o.kind == "reduce":
            name = {"add": "sum"}.get(o.op, o.op)
            L.append(f"        x{k} = nl.{name}({cur}, axis=1, keepdims=True, {d})  # OP{k}")
        else:
            L.append(f"        x{k} = nl.copy({cur}, {d})  # OP{k}")
        cur = f"x{k}"
    dst = "out[ip, i]" if s.reduces() else f"out[ip, i * {s.W} + jf]"
    L.append(f"        nl.store({dst}, value={cur})  # STORE")
    L.append("    return out")
    return L


def _b1_view(s: Spec, src: str) -> str:
    if s.view == "full":
        return f"{src}[ip, i * {s.W} + jf]"
    return f"{src}[{s.p0} + ip, {s.f0} + {s.step} * (i * {s.W} + jf)]"


def source(s: Spec) -> list[str]:
    return ga_source(s) if s.api == "ga" else b1_source(s)


# ---------------------------------------------------------------- running


_COUNTER = itertools.count()


def load(lines: list[str], folder: str):
    """Write the kernel to a file (so error locations and linecache see it) and import it."""
    path = os.path.join(folder, f"fuzz_kernel_{os.getpid()}_{next(_COUNTER)}.py")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


def launch(s: Spec, mod, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if s.api == "ga":
        import nki

        return nki.simulate(mod.kernel, chip=s.chip)(a, b)
    import neuronxcc.nki as b1

    return b1.jit(mod.kernel, platform_target=s.chip)(a, b)


def line_of(lines: list[str], marker: str) -> int:
    return next(k for k, text in enumerate(lines, 1) if text.rstrip().endswith(marker))


def describe(s: Spec, lines: list[str]) -> str:
    return f"{s}\n" + textwrap.indent("\n".join(lines), "    ")


# ---------------------------------------------------------------- invalid kernels

# Each: (name, the documented rule, applies(spec), break(spec, lines) -> (lines, marker),
# error class name, words of the message). The marker names the line the error must point at.
def _edit(lines: list[str], marker: str, old: str, new: str) -> list[str]:
    k = line_of(lines, marker) - 1
    assert old in lines[k], (old, lines[k])
    out = list(lines)
    out[k] = out[k].replace(old, new, 1)
    return out


def _insert_before(lines: list[str], marker: str, new: str) -> list[str]:
    k = line_of(lines, marker) - 1
    return [*lines[:k], new, *lines[k:]]


def _insert_after(lines: list[str], marker: str, new: str) -> list[str]:
    k = line_of(lines, marker)
    return [*lines[:k], new, *lines[k:]]


def _too_many_partitions(s: Spec, lines: list[str]):
    shape = f"({s.P + 128}, {s.W})"
    new = (f"        bad = nl.ndarray({shape}, nl.float32, buffer=nl.sbuf)  # BROKEN"
           if s.api == "ga" else
           f"        bad = nl.ndarray({shape}, dtype=nl.float32, buffer=nl.sbuf)  # BROKEN")
    return _insert_before(lines, "# LOAD_a", new), "# BROKEN"


def _shape_mismatch(s: Spec, lines: list[str]):
    """The second operand one partition short (or, on 1-2 partitions, one element short):
    neither equal (tensor_tensor) nor broadcastable (Beta-1 nl.*)."""
    k = next(i for i, o in enumerate(s.ops, 1) if o.kind == "tt")
    marker = f"# OP{k}"
    short = f"y0[0:{s.P - 1}, :]" if s.P > 2 else f"y0[:, 0:{s.W - 1}]"
    old = "data2=y0" if s.api == "ga" else ", y0,"
    new = f"data2={short}" if s.api == "ga" else f", {short},"
    return _edit(lines, marker, old, new), marker


def _psum_dma(s: Spec, lines: list[str]):
    return _insert_after(lines, "# MATMUL", "    nisa.dma_copy(dst=out, src=ps)  # BROKEN"), \
        "# BROKEN"


def _moving_too_wide(s: Spec, lines: list[str]):
    """A moving tile 513 wide (N), and the PSUM result and output with it."""
    k, m, n = s.matmul
    out = []
    for ln in lines:
        if "mv = " in ln or "dst=mv" in ln:
            ln = ln.replace(f"({k}, {n})", f"({k}, 513)").replace(f", 0:{n}]", ", 0:513]")
        elif "out = " in ln or "ps = nl" in ln or "res = " in ln:
            ln = ln.replace(f"({m}, {n})", f"({m}, 513)")
        out.append(ln)
    return out, "# MATMUL"


def _oob_load(s: Spec, lines: list[str]):
    rows = host_shape(s)[0]
    if s.api == "ga":
        return _edit(lines, "# LOAD_a", f"src=a[{s.p0}:{s.p0 + s.P}",
                     f"src=a[{rows - s.P + 1}:{rows + 1}"), "# LOAD_a"
    return _edit(lines, "# LOAD_a", "a[", f"a[{rows - s.P + 1} + "), "# LOAD_a"


def _quadrant(s: Spec, lines: list[str]):
    """A compute op on 40 partitions starting at partition 16 (allowed starts: 0 or 64)."""
    if s.api == "ga":
        return _edit(lines, "# OP1", "dst=x1, data=x0", "dst=x1[16:56], data=x0[16:56]"), "# OP1"
    return _edit(lines, "# OP1", "(x0,", "(x0[16:56],"), "# OP1"


def _bitwise_on_float(s: Spec, lines: list[str]):
    if s.api == "ga":
        return _edit(lines, "# OP1", f"op0=nl.{s.ops[0].op}", "op0=nl.bitwise_and"), "# OP1"
    return _edit(lines, "# OP1", f"nl.{s.ops[0].op}(", "nl.bitwise_and("), "# OP1"


INVALID = {
    "partitions > pmax (§3.4 TC1)": (
        lambda s: not s.matmul and s.P <= 128, _too_many_partitions,
        ("ConstraintError",), ("partition",)),
    "tensor_tensor operand shapes (§4 elementwise)": (
        lambda s: any(o.kind == "tt" for o in s.ops) and (s.P > 2 or s.W >= 3), _shape_mismatch,
        ("ConstraintError",), ("partition", "element", "shape")),
    "DMA never reads PSUM (§7 dma_copy)": (
        lambda s: bool(s.matmul) and s.api == "ga", _psum_dma,  # (B1 nl.store copies first)
        ("ConstraintError",), ("psum",)),
    "gemm_moving_fmax = 512 (§3.4 TC3)": (
        lambda s: bool(s.matmul) and s.chip != "trn3" and (s.api == "ga" or s.chunks == 1),
        _moving_too_wide,
        ("ConstraintError",), ("512",)),
    "view bounds (out-of-bound access)": (
        lambda s: not s.matmul and s.view != "ap", _oob_load,
        ("OutOfBoundsError", "ConstraintError"), ("bound", "outside", "exceed")),
    "start-partition rule (§3.5)": (
        lambda s: (not s.matmul and s.P >= 56 and s.ops and s.ops[0].kind == "ts"),
        _quadrant, ("ConstraintError",), ("partition",)),
    "bitvec ops need integer dtypes (§5A.2)": (
        lambda s: bool(s.ops) and s.ops[0].kind == "ts", _bitwise_on_float,
        ("ConstraintError",), ("int", "bitvec", "bitwise")),
}
