"""2-D convolution device kernels (NCHW) for the PyTorch device: conv2d and its backward, and
their float64 references.

Layer: kernel library (trnsim.kernels); public NKI API only. Serves ATen
convolution_overrideable / convolution_backward_overrideable (non-transposed). Follows
docs/device-kernels.md. The loop nests live in kernels/_conv_core.py (implicit im2col),
_conv_weights.py (stationaries, groups) and _conv_wgrad.py (weight and bias gradients).
"""

from __future__ import annotations

import numpy as np

from ._common import fail
from ._conv_core import Axis, correlate
from ._conv_weights import ConvWeights
from ._conv_wgrad import grad_bias, grad_weight

DTYPES = ("float32", "bfloat16", "float16")


def conv2d(out, x, w, bias, *, stride, padding, dilation, groups: int) -> None:
    """``out[n, o] = bias[o] + sum_c x[n, c] (*) w[o, c]`` (cross-correlation, NCHW).

    Implicit im2col: per band of output rows, the zero-padded input rows of each 128-channel
    tile sit in SBUF and every matmul's moving operand is a strided window of that band (one
    per kernel tap), so no im2col copy is made. The stationaries W^T (input channels on
    partitions, up to 128 output channels) stay resident; each output tile (<= 512 positions,
    one PSUM bank) accumulates over channel tiles x taps, four tiles per stationary load. The
    bias is fused into the PSUM evacuation (VectorE / ScalarE alternating).

    Dimensions:
        x: [N, Cin, H, W]; w: [Cout, Cin / groups, kh, kw]; out: [N, Cout, OH, OW] with
        OH = (H + 2 ph - dh (kh - 1) - 1) // sh + 1 (likewise OW).

    Args:
        out: output HBM view (float32, bfloat16 or float16), any strides.
        x, w: HBM views of one dtype (float32, bfloat16, float16), any strides.
        bias: [Cout] HBM view or None.
        stride, padding, dilation: an int or a pair (h, w); padding >= 0.
        groups: Cin and Cout are multiples of it. Small groups (Cin/groups <= 128 and
            Cout/groups <= 128) are packed into block-diagonal stationaries (depthwise
            included); larger ones run one dense block per group.

    Notes:
        Products accumulate in fp32 PSUM; the result is rounded once to out's dtype.
    """
    g = _check(out, x, w, stride, padding, dilation, groups, "conv2d")
    ya, xa = _axes(g, transposed=False)
    if bias is not None:
        _check_vector("conv2d", "bias", bias, g["cout"])
    correlate(out, x, ConvWeights(w, groups, transposed=False), bias, ya, xa)


def conv2d_backward(grad_input, grad_weight_, grad_bias_, grad_out, x, w, *, stride, padding,
                    dilation, groups: int) -> None:
    """Gradients of conv2d; any of grad_input, grad_weight_, grad_bias_ may be None.

    grad_input is the correlation of grad_out, zero-dilated by the stride and padded by
    (k - 1) * dilation - padding, with the weights flipped and their channels swapped per group
    (the same loop nest as conv2d). grad_weight contracts over output positions: TensorE
    transposes of 128-position tiles of grad_out and of each tap's input window, accumulated
    in PSUM over the batch (kernels/_conv_wgrad.py). grad_bias sums grad_out per channel.

    Args:
        grad_input: [N, Cin, H, W] or None. grad_weight_: [Cout, Cin/groups, kh, kw] or None.
        grad_bias_: [Cout] or None. grad_out: [N, Cout, OH, OW]. x, w: the forward inputs.
        stride, padding, dilation, groups: as for conv2d.
    """
    g = _check(grad_out, x, w, stride, padding, dilation, groups, "conv2d_backward")
    if grad_input is not None:
        if tuple(grad_input.shape) != tuple(x.shape):
            fail(f"conv2d_backward: grad_input has shape {list(grad_input.shape)}; "
                 f"x is {list(x.shape)}")
        ya, xa = _axes(g, transposed=True)
        correlate(grad_input, grad_out, ConvWeights(w, groups, transposed=True), None, ya, xa)
    if grad_weight_ is not None:
        if tuple(grad_weight_.shape) != tuple(w.shape):
            fail(f"conv2d_backward: grad_weight has shape {list(grad_weight_.shape)}; "
                 f"w is {list(w.shape)}")
        ya, xa = _axes(g, transposed=False)
        grad_weight(grad_weight_, grad_out, x, ConvWeights(w, groups, transposed=False), ya, xa)
    if grad_bias_ is not None:
        _check_vector("conv2d_backward", "grad_bias", grad_bias_, g["cout"])
        grad_bias(grad_bias_, grad_out)


def conv_transpose2d(out, x, w, bias, *, stride, padding, output_padding, dilation,
                     groups: int) -> None:
    """The transposed convolution (ConvTranspose2d, aten convolution with transposed=True):
    the adjoint of conv2d with weight w, computed as conv2d's input gradient (the same loop
    nest over x zero-dilated by the stride, flipped weights) plus the bias.

    Dimensions:
        x: [N, Cin, H, W]; w: [Cin, Cout / groups, kh, kw]; out: [N, Cout, OH, OW] with
        OH = (H - 1) sh - 2 ph + dh (kh - 1) + oph + 1 (likewise OW), output_padding < stride
        or < dilation (torch's rule).
    """
    g = _check_transposed(out, x, w, stride, padding, output_padding, dilation, groups,
                          "conv_transpose2d")
    if bias is not None:
        _check_vector("conv_transpose2d", "bias", bias, g["cout"])
    ya, xa = _axes(g, transposed=True)
    correlate(out, x, ConvWeights(w, groups, transposed=True), bias, ya, xa)


def conv_transpose2d_backward(grad_input, grad_weight_, grad_bias_, grad_out, x, w, *, stride,
                              padding, output_padding, dilation, groups: int) -> None:
    """Gradients of conv_transpose2d: grad_input is conv2d(grad_out, w), grad_weight conv2d's
    weight gradient with the roles of x and grad_out exchanged, grad_bias the channel sums of
    grad_out. Any of the three outputs may be None."""
    what = "conv_transpose2d_backward"
    g = _check_transposed(grad_out, x, w, stride, padding, output_padding, dilation, groups,
                          what)
    ya, xa = _axes(g, transposed=False)
    if grad_input is not None:
        if tuple(grad_input.shape) != tuple(x.shape):
            fail(f"{what}: grad_input has shape {list(grad_input.shape)}; x is {list(x.shape)}")
        correlate(grad_input, grad_out, ConvWeights(w, groups, transposed=False), None, ya, xa)
    if grad_weight_ is not None:
        if tuple(grad_weight_.shape) != tuple(w.shape):
            fail(f"{what}: grad_weight has shape {list(grad_weight_.shape)}; w is "
                 f"{list(w.shape)}")
        grad_weight(grad_weight_, x, grad_out, ConvWeights(w, groups, transposed=False), ya, xa)
    if grad_bias_ is not None:
        _check_vector(what, "grad_bias", grad_bias_, g["cout"])
        grad_bias(grad_bias_, grad_out)


def _check_transposed(out, x, w, stride, padding, output_padding, dilation, groups, what):
    """The geometry of a transposed convolution, as the conv2d from out back to x."""
    for name, t in (("out", out), ("x", x), ("w", w)):
        if len(t.shape) != 4:
            fail(f"{what}: {name} must be 4-D, got {list(t.shape)}")
    s = _pair(what, "stride", stride, 1)
    p = _pair(what, "padding", padding, 0)
    op = _pair(what, "output_padding", output_padding, 0)
    d = _pair(what, "dilation", dilation, 1)
    if not isinstance(groups, int) or groups < 1:
        fail(f"{what}: groups={groups!r} must be a positive int")
    cin, cout_g, kh, kw = (int(v) for v in w.shape)
    n, h, wd = int(x.shape[0]), int(x.shape[2]), int(x.shape[3])
    if int(x.shape[1]) != cin or cin % groups:
        fail(f"{what}: x has {int(x.shape[1])} channels, w {list(w.shape)}, groups={groups}; "
             f"need x channels = w.shape[0], a multiple of groups")
    if any(op[a] >= max(s[a], d[a]) for a in range(2)):
        fail(f"{what}: output_padding {op} must be smaller than stride {s} or dilation {d}")
    oh = (h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1
    ow = (wd - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1
    want = (n, cout_g * groups, oh, ow)
    if oh < 1 or ow < 1 or tuple(out.shape) != want:
        fail(f"{what}: output has shape {list(out.shape)}; expected {list(want)}")
    if x.dtype != w.dtype or x.dtype.name not in DTYPES or out.dtype.name not in DTYPES:
        fail(f"{what}: x is {x.dtype.name}, w {w.dtype.name}, out {out.dtype.name}; x and w "
             f"must share one of {', '.join(DTYPES)}")
    # As a conv2d: out is its input (H = oh), x its output, w its weight [cin, cout_g, ...].
    return {"n": n, "cin": cout_g * groups, "cout": cout_g * groups, "h": oh, "w": ow,
            "oh": h, "ow": wd, "kh": kh, "kw": kw, "s": s, "p": p, "d": d}


# ---------------------------------------------------------------- checks


def _pair(what: str, name: str, v, minimum: int) -> tuple[int, int]:
    vals = [v] if isinstance(v, int) else list(v) if isinstance(v, (list, tuple)) else None
    if vals is None or len(vals) not in (1, 2) or not all(isinstance(i, int) for i in vals):
        fail(f"{what}: {name}={v!r} must be an int or a pair of ints")
    if len(vals) == 1:
        vals = vals * 2
    if min(vals) < minimum:
        fail(f"{what}: {name}={v!r} must be >= {minimum}")
    return int(vals[0]), int(vals[1])


def _check(out, x, w, stride, padding, dilation, groups, what: str) -> dict:
    for name, t in (("out" if what == "conv2d" else "grad_out", out), ("x", x), ("w", w)):
        if len(t.shape) != 4:
            fail(f"{what}: {name} must be 4-D (NCHW / [Cout, Cin/groups, kh, kw]), got "
                 f"{list(t.shape)}")
    sh, sw = _pair(what, "stride", stride, 1)
    ph, pw = _pair(what, "padding", padding, 0)
    dh, dw = _pair(what, "dilation", dilation, 1)
    if not isinstance(groups, int) or groups < 1:
        fail(f"{what}: groups={groups!r} must be a positive int")
    n, cin, h, wd = (int(s) for s in x.shape)
    cout, cin_g, kh, kw = (int(s) for s in w.shape)
    if cin % groups or cout % groups or cin_g != cin // groups:
        fail(f"{what}: x has Cin={cin}, w {list(w.shape)}, groups={groups}; need Cin and Cout "
             f"multiples of groups and w.shape[1] = Cin / groups")
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        fail(f"{what}: the kernel {kh}x{kw} (dilation {dh}x{dw}) does not fit the padded input "
             f"{h + 2 * ph}x{wd + 2 * pw}")
    if tuple(out.shape) != (n, cout, oh, ow):
        fail(f"{what}: {'out' if what == 'conv2d' else 'grad_out'} has shape "
             f"{list(out.shape)}; expected {[n, cout, oh, ow]}")
    if x.dtype != w.dtype or x.dtype.name not in DTYPES or out.dtype.name not in DTYPES:
        fail(f"{what}: x is {x.dtype.name}, w {w.dtype.name}, out {out.dtype.name}; x and w "
             f"must share one of {', '.join(DTYPES)} and out be one of them")
    return {"n": n, "cin": cin, "cout": cout, "h": h, "w": wd, "oh": oh, "ow": ow, "kh": kh,
            "kw": kw, "s": (sh, sw), "p": (ph, pw), "d": (dh, dw)}


def _check_vector(what: str, name: str, t, size: int) -> None:
    if len(t.shape) != 1 or int(t.shape[0]) != size or t.dtype.name not in DTYPES:
        fail(f"{what}: {name} must be a [{size}] float vector, got {list(t.shape)} "
             f"{t.dtype.name}")


def _axes(g: dict, transposed: bool) -> tuple[Axis, Axis]:
    """The (rows, columns) axes of the virtual correlation (see kernels/_conv_core.py)."""
    out = []
    for o, r, k, s, p, d in ((g["oh"], g["h"], g["kh"], *(v[0] for v in (g["s"], g["p"],
                                                                          g["d"]))),
                             (g["ow"], g["w"], g["kw"], *(v[1] for v in (g["s"], g["p"],
                                                                         g["d"])))):
        if transposed:  # input gradient: over grad_out dilated by s, output = the input size
            out.append(Axis(out=r, k=k, stride=1, dil=d, real=o, ins=s, off=(k - 1) * d - p))
        else:
            out.append(Axis(out=o, k=k, stride=s, dil=d, real=r, ins=1, off=p))
    return out[0], out[1]


# ---------------------------------------------------------------- references


def conv2d_ref(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """conv2d in float64 (direct sum over taps)."""
    x64, w64 = np.asarray(x, np.float64), np.asarray(w, np.float64)
    sh, sw = _pair("conv2d_ref", "stride", stride, 1)
    ph, pw = _pair("conv2d_ref", "padding", padding, 0)
    dh, dw = _pair("conv2d_ref", "dilation", dilation, 1)
    n, _cin, h, wd = x64.shape
    cout, cin_g, kh, kw = w64.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.pad(x64, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((n, cout, oh, ow))
    cout_g = cout // groups
    for g in range(groups):
        xg = xp[:, g * cin_g : (g + 1) * cin_g]
        wg = w64[g * cout_g : (g + 1) * cout_g]
        for i in range(kh):
            for j in range(kw):
                win = xg[:, :, i * dh : i * dh + (oh - 1) * sh + 1 : sh,
                         j * dw : j * dw + (ow - 1) * sw + 1 : sw]
                out[:, g * cout_g : (g + 1) * cout_g] += np.einsum("nchw,oc->nohw", win,
                                                                    wg[:, :, i, j])
    if bias is not None:
        out += np.asarray(bias, np.float64)[None, :, None, None]
    return out


def conv2d_backward_ref(grad_out, x, w, stride=1, padding=0, dilation=1, groups=1):
    """(grad_input, grad_weight, grad_bias) in float64: the adjoint of conv2d_ref, tap by tap."""
    go, x64, w64 = (np.asarray(a, np.float64) for a in (grad_out, x, w))
    sh, sw = _pair("conv2d_backward_ref", "stride", stride, 1)
    ph, pw = _pair("conv2d_backward_ref", "padding", padding, 0)
    dh, dw = _pair("conv2d_backward_ref", "dilation", dilation, 1)
    _n, _, h, wd = x64.shape
    cout, cin_g, kh, kw = w64.shape
    oh, ow = go.shape[2:]
    cout_g = cout // groups
    xp = np.pad(x64, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    gxp = np.zeros_like(xp)
    gw = np.zeros_like(w64)
    for g in range(groups):
        cs, os_ = slice(g * cin_g, (g + 1) * cin_g), slice(g * cout_g, (g + 1) * cout_g)
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dh, i * dh + (oh - 1) * sh + 1, sh)
                cols = slice(j * dw, j * dw + (ow - 1) * sw + 1, sw)
                gxp[:, cs, rows, cols] += np.einsum("nohw,oc->nchw", go[:, os_], w64[os_, :, i, j])
                gw[os_, :, i, j] = np.einsum("nohw,nchw->oc", go[:, os_], xp[:, cs, rows, cols])
    gx = gxp[:, :, ph : ph + h, pw : pw + wd]
    return gx, gw, go.sum(axis=(0, 2, 3))
