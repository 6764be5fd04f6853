"""A whole MLP block in one launch: out = h @ w_out.T + b_out with h = act(x @ w_in.T + b_in)
(GELU-style MLP) or h = act(x @ w_in.T + b_in) * (x @ w_up.T + b_up) (SwiGLU-style gated
MLP), for the torch.compile fusion pass; with its float64 reference.

Layer: kernel library (trnsim.kernels); public NKI API only; follows docs/device-kernels.md.
The hidden activations never reach HBM: per tile of 128 rows the first products come out
transposed, h^T [hidden on partitions, rows] (stationary w_in^T, moving x^T), which is
already the K-major stationary operand of the down projection; the weights stay resident in
SBUF for the whole launch (`mlp_fits` says when they fit; the fusion pass fuses only then).
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import fail
from ._kmajor import P_MAX, Mat, kmajor_mode, load_kmajor
from .fused_linear import ACTS, REF_OPS

DTYPES = ("float32", "bfloat16", "float16")
TILE_N = 512  # moving free size of the down projection: one fp32 PSUM bank
PSUM_GROUP = 4  # down-projection banks accumulated per row tile before their evacuation
SBUF_SHARE = 0.8  # share of usable SBUF the resident weights and the row tiles may use


def mlp_sbuf_bytes(d: int, h: int, n: int, itemsize: int, gated: bool) -> int:
    """SBUF bytes per partition the kernel needs: resident weights (K-major), bias columns and
    rows, and two row tiles in flight (x^T, h^T, hidden temporaries, the output tile)."""
    kt, ht = -(-d // P_MAX), -(-h // P_MAX)
    weights = (kt * h * (2 if gated else 1) + ht * n) * itemsize
    biases = 4 * (2 * ht + n)
    rows = 2 * (kt * P_MAX * itemsize + ht * P_MAX * itemsize + 4 * P_MAX * itemsize
                + min(n, PSUM_GROUP * TILE_N) * 4)
    return weights + biases + rows


def mlp_fits(d: int, h: int, n: int, itemsize: int, gated: bool, sbuf_bytes: int) -> bool:
    """True when the kernel's SBUF plan fits `sbuf_bytes` usable bytes per partition."""
    return mlp_sbuf_bytes(d, h, n, itemsize, gated) <= SBUF_SHARE * sbuf_bytes


def mlp(out, x, w_in, w_out, *, act: str, w_up=None, b_in=None, b_up=None, b_out=None,
        pre=None, up=None, act_out=None, hidden=None) -> None:
    """``out = h @ w_out.T + b_out``, h = act(x w_in^T + b_in) [* (x w_up^T + b_up)].

    Dimensions:
        x: [M, D]; w_in, w_up: [H, D] (torch Linear weights); w_out: [N, H]; out: [M, N];
        b_in, b_up: [H]; b_out: [N]; any strides.

    Args:
        act: an activation of kernels/fused_linear.py (gelu, gelu_tanh, relu, silu, ...).
        pre, up: optional [M, H] outputs receiving x w_in^T + b_in and x w_up^T + b_up (for a
            backward), rounded to x's dtype; stored from h^T tiles, so a layout with M
            contiguous ([H, M] storage) stores in runs.
        act_out, hidden: optional [M, H] outputs receiving act(pre) (gated MLPs) and h, the
            down projection's input (what eager's backward reads), stored the same way.

    Notes:
        With `pre` the activation reads the pre-activation rounded to x's dtype, as eager's
        linear then activation does; the gated product is rounded to x's dtype before the down
        projection, as eager's mul output is. Without `pre`, act reads the fp32 PSUM.
    """
    m, d, h, n, dtype = _check(out, x, w_in, w_out, w_up, b_in, b_up, b_out, pre, up, act)
    for name, t in (("act_out", act_out), ("hidden", hidden)):
        if t is not None and (tuple(t.shape) != (m, h) or t.dtype != x.dtype):
            fail(f"mlp: {name} has shape {list(t.shape)} and dtype {t.dtype.name}; expected "
                 f"[{m}, {h}] {x.dtype.name}")
    if act_out is not None and w_up is None:
        fail("mlp: act_out is given without w_up (without a gate, act(pre) is `hidden`)")
    saves = {"pre": pre, "up": up, "act": act_out, "hidden": hidden}
    isz = x.dtype.itemsize
    if not mlp_fits(d, h, n, isz, w_up is not None, nl.tile_size.total_available_sbuf_size):
        fail(f"mlp: D={d}, H={h}, N={n} need {mlp_sbuf_bytes(d, h, n, isz, w_up is not None)} "
             f"bytes per partition of SBUF for the resident weights; at most "
             f"{int(SBUF_SHARE * nl.tile_size.total_available_sbuf_size)} fit (mlp_fits)")
    kt, ht = -(-d // P_MAX), -(-h // P_MAX)
    w = {"in": _resident(w_in, d, h, "mlp_w_in")}
    if w_up is not None:
        w["up"] = _resident(w_up, d, h, "mlp_w_up")
    w_o = _resident(w_out, h, n, "mlp_w_out")
    cols = {k: _bias_col(b, h, ht, f"mlp_b_{k}") for k, b in (("in", b_in), ("up", b_up))
            if b is not None}
    row = _bias_row(b_out, n) if b_out is not None else None
    xt = Mat.of(x).T  # [D, M]
    mode = kmajor_mode(xt)
    starts = list(range(0, m, P_MAX))
    nxt = _load_x(xt, kt, starts[0], m, mode, dtype)
    for i, r0 in enumerate(starts):
        cur = nxt
        if i + 1 < len(starts):  # the next row tile loads while this one computes
            nxt = _load_x(xt, kt, starts[i + 1], m, mode, dtype)
        mm = min(P_MAX, m - r0)
        h_t = nl.ndarray((P_MAX, ht, P_MAX), dtype=dtype, buffer=nl.sbuf, name="mlp_hT")
        for j in nl.affine_range(ht):
            _hidden(h_t, j, cur, w, cols, act, d, h, mm, r0, dtype, saves)
        _down(out, h_t, w_o, row, ht, h, n, mm, r0, i)
        del cur, h_t


def _check(out, x, w_in, w_out, w_up, b_in, b_up, b_out, pre, up, act):
    if act not in ACTS:
        fail(f"mlp: act={act!r} is not one of {', '.join(ACTS)}")
    for name, t, nd in (("out", out, 2), ("x", x, 2), ("w_in", w_in, 2), ("w_out", w_out, 2)):
        if len(t.shape) != nd:
            fail(f"mlp: {name} must be 2-D, got shape {list(t.shape)}")
    m, d = (int(s) for s in x.shape)
    h = int(w_in.shape[0])
    n = int(w_out.shape[0])
    want = {"w_in": (h, d), "w_up": (h, d), "w_out": (n, h), "out": (m, n), "b_in": (h,),
            "b_up": (h,), "b_out": (n,), "pre": (m, h), "up": (m, h)}
    given = {"w_in": w_in, "w_up": w_up, "w_out": w_out, "out": out, "b_in": b_in,
             "b_up": b_up, "b_out": b_out, "pre": pre, "up": up}
    for name, t in given.items():
        if t is None:
            continue
        if tuple(int(s) for s in t.shape) != want[name]:
            fail(f"mlp: {name} has shape {list(t.shape)}; expected {list(want[name])} "
                 f"(x is [{m}, {d}], w_in [{h}, {d}])")
        if t.dtype != x.dtype:
            fail(f"mlp: {name} has dtype {t.dtype.name}; x's is {x.dtype.name} (one dtype)")
    if x.dtype.name not in DTYPES:
        fail(f"mlp: dtype {x.dtype.name} is not one of {', '.join(DTYPES)}")
    if up is not None and w_up is None:
        fail("mlp: `up` is given without w_up (only a gated MLP has an up projection)")
    if b_up is not None and w_up is None:
        fail("mlp: b_up is given without w_up")
    if min(m, d, h, n) < 1:
        fail(f"mlp: empty operand (M={m}, D={d}, H={h}, N={n})")
    return m, d, h, n, x.dtype


def _resident(wt, k: int, cols: int, name: str):
    """A torch weight [cols, k] as the K-major tile [128, KT, cols] of its transpose."""
    mat = Mat.of(wt).T  # [k, cols]
    t = nl.ndarray((P_MAX, -(-k // P_MAX), cols), dtype=wt.dtype, buffer=nl.sbuf, name=name)
    load_kmajor(t, mat, 0, k, 0, cols, kmajor_mode(mat))
    return t


def _bias_col(b, h: int, ht: int, name: str):
    """b [H] as per-partition columns [128, HT, 1] fp32: hidden unit t*128+p at (p, t)."""
    t = nl.ndarray((P_MAX, ht, 1), dtype=nl.float32, buffer=nl.sbuf, name=name)
    load_kmajor(t, Mat(b, h, 1, int(b.strides[0]), 1, int(b.offset)), 0, h, 0, 1, "direct")
    return t


def _bias_row(b, n: int):
    """b [N] on every partition, fp32 (partition stride 0)."""
    t = nl.ndarray((P_MAX, n), dtype=nl.float32, buffer=nl.sbuf, name="mlp_b_out")
    nisa.dma_copy(dst=t, src=b.ap([[0, P_MAX], [int(b.strides[0]), n]], offset=int(b.offset)))
    return t


def _load_x(xt: Mat, kt: int, r0: int, m: int, mode: str, dtype):
    t = nl.ndarray((P_MAX, kt, P_MAX), dtype=dtype, buffer=nl.sbuf, name="mlp_xT")
    load_kmajor(t, xt, 0, xt.rows, r0, min(P_MAX, m - r0), mode)
    return t


def _hidden(h_t, j: int, x_t, w: dict, cols: dict, act: str, d: int, h: int, mm: int,
            r0: int, dtype, saves: dict) -> None:
    """h^T rows j*128.. for one row tile: the gate (and up) products, bias, activation."""
    hh = min(P_MAX, h - j * P_MAX)
    h0 = j * P_MAX
    acc = {}
    for key, wk in w.items():
        ps = nl.ndarray((P_MAX, P_MAX), dtype=nl.float32, buffer=nl.psum, name=f"mlp_{key}")
        for k in range(-(-d // P_MAX)):
            kk = min(P_MAX, d - k * P_MAX)
            nisa.nc_matmul(dst=ps[0:hh, 0:mm], stationary=wk[0:kk, k, h0:h0 + hh],
                           moving=x_t[0:kk, k, 0:mm], accumulate=k > 0)
        acc[key] = ps
    fn = ACTS[act]
    dst = h_t[0:hh, j, 0:mm]
    gated = "up" in acc
    bias_in = cols["in"][0:hh, j, :] if "in" in cols else None
    act_dst = dst if not gated else nl.ndarray((P_MAX, P_MAX), dtype=dtype, buffer=nl.sbuf,
                                               name="mlp_act")[0:hh, 0:mm]

    def save(name: str, tile) -> None:
        if saves[name] is not None:
            nisa.dma_copy(dst=Mat.of(saves[name]).T.block(h0, hh, r0, mm), src=tile)

    if saves["pre"] is None:
        nisa.activation(dst=act_dst, op=fn, data=acc["in"][0:hh, 0:mm], bias=bias_in)
    else:
        z = nl.ndarray((P_MAX, P_MAX), dtype=dtype, buffer=nl.sbuf, name="mlp_pre")[0:hh, 0:mm]
        _evacuate(z, acc["in"][0:hh, 0:mm], bias_in, nisa.engine.scalar)
        save("pre", z)
        nisa.activation(dst=act_dst, op=fn, data=z)
    if gated:
        save("act", act_dst)
        u = nl.ndarray((P_MAX, P_MAX), dtype=dtype, buffer=nl.sbuf, name="mlp_up")[0:hh, 0:mm]
        bias_up = cols["up"][0:hh, j, :] if "up" in cols else None
        _evacuate(u, acc["up"][0:hh, 0:mm], bias_up, nisa.engine.vector)
        save("up", u)
        nisa.tensor_tensor(dst=dst, data1=act_dst, data2=u, op=nl.multiply)
    save("hidden", dst)


def _evacuate(dst, acc, bias, engine) -> None:
    """dst = acc (+ per-partition bias), cast to dst's dtype."""
    if bias is None:
        nisa.tensor_copy(dst=dst, src=acc, engine=engine)
    elif engine == nisa.engine.scalar:
        nisa.activation(dst=dst, op=nl.copy, data=acc, bias=bias)
    else:
        nisa.tensor_scalar(dst=dst, data=acc, op0=nl.add, operand0=bias, engine=engine)


def _down(out, h_t, w_o, row, ht: int, h: int, n: int, mm: int, r0: int, tile_no: int) -> None:
    """out rows r0..r0+mm = h @ w_out^T (+ b_out): PSUM groups of 4 x 512 columns."""
    om = Mat.of(out)
    group = PSUM_GROUP * TILE_N
    for g0 in range(0, n, group):
        gw = min(group, n - g0)
        acc = nl.ndarray((P_MAX, gw), dtype=nl.float32, buffer=nl.psum, name="mlp_acc")
        for j in range(ht):
            hh = min(P_MAX, h - j * P_MAX)
            for c0 in range(0, gw, TILE_N):
                w = min(TILE_N, gw - c0)
                nisa.nc_matmul(dst=acc[0:mm, c0:c0 + w], stationary=h_t[0:hh, j, 0:mm],
                               moving=w_o[0:hh, j, g0 + c0:g0 + c0 + w], accumulate=j > 0)
        res = nl.ndarray((P_MAX, gw), dtype=out.dtype, buffer=nl.sbuf, name="mlp_res")
        for b, c0 in enumerate(range(0, gw, TILE_N)):
            w = min(TILE_N, gw - c0)
            cs = slice(c0, c0 + w)
            if row is not None:
                nisa.tensor_tensor(dst=res[0:mm, cs], data1=acc[0:mm, cs],
                                   data2=row[0:mm, g0 + c0:g0 + c0 + w], op=nl.add)
            else:
                engine = nisa.engine.vector if (tile_no + b) % 2 == 0 else nisa.engine.scalar
                nisa.tensor_copy(dst=res[0:mm, cs], src=acc[0:mm, cs], engine=engine)
        nisa.dma_copy(dst=om.block(r0, mm, g0, gw), src=res[0:mm, 0:gw])


def mlp_ref(x, w_in, w_out, *, act: str, w_up=None, b_in=None, b_up=None, b_out=None):
    """The block in float64 (the activation from the pointwise table's reference)."""
    from .pointwise import pointwise_ref

    x64 = np.asarray(x, np.float64)
    z = x64 @ np.asarray(w_in, np.float64).T
    if b_in is not None:
        z = z + np.asarray(b_in, np.float64)
    op, attrs = REF_OPS[act]
    hid = np.asarray(pointwise_ref(op, z, **attrs), np.float64)
    if w_up is not None:
        u = x64 @ np.asarray(w_up, np.float64).T
        if b_up is not None:
            u = u + np.asarray(b_up, np.float64)
        hid = hid * u
    y = hid @ np.asarray(w_out, np.float64).T
    if b_out is not None:
        y = y + np.asarray(b_out, np.float64)
    return y
