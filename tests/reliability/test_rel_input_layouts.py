"""Host inputs of every layout (issue 13.1): transposed, Fortran-order, stepped, reversed,
offset, 0-d, size-0, big-endian, numpy and torch CPU, both API generations. Each reaches the
kernel as a dense HBM tensor of its values, and what the kernel writes goes back through the
array's own strides; an input whose writes cannot go back is refused at the writing line."""

from __future__ import annotations

import inspect

import neuronxcc.nki as b1
import neuronxcc.nki.language as b1l
import neuronxcc.nki.typing as nt
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
import torch
from source_paths import assert_no_internal_path

from trnsim.errors import ConstraintError, KernelError


def add_one_ga(a, o):
    """out = a + 1, also written into the input `o` (destination passing)."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=t)
    nisa.dma_copy(dst=o, src=t)  # WRITE o
    return out


def add_one_b1(a, o: nt.mutable_tensor):
    out = b1l.ndarray(a.shape, dtype=a.dtype, buffer=b1l.shared_hbm)
    t = b1l.add(b1l.load(a), 1.0)
    b1l.store(out, t)
    b1l.store(o, t)  # WRITE o
    return out, o  # (Beta 1 returns every nt.mutable_tensor parameter)


def launch(api, kernel_args):
    if api == "ga":
        return nki.simulate(add_one_ga)(*kernel_args)
    return b1.jit(add_one_b1)(*kernel_args)[0]


def write_line(api):
    fn = add_one_ga if api == "ga" else add_one_b1
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(src) if "# WRITE o" in s)


BASE = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 7


def views(base):
    """name -> a view of `base` (a fresh copy each time: outputs are written through it)."""
    return {
        "transposed": base[:32, :32].T,
        "fortran": np.asfortranarray(base),
        "step2": base[:, ::2],
        "reversed": base[:, ::-1],
        "reversed_rows": base[::-1, 3:9],
        "offset": base[3:, 5:],
        "column": base[:, 7:8],
    }


LAYOUTS = list(views(BASE))


@pytest.mark.parametrize("api", ["ga", "b1"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_numpy_layout_reads_and_writes_back(api, layout):
    a = views(BASE.copy())[layout]
    home = np.zeros_like(BASE)
    o = views(home)[layout]
    untouched = home.copy()
    out = launch(api, (a, o))
    np.testing.assert_array_equal(out, a + 1)
    np.testing.assert_array_equal(o, a + 1)
    # elements of the base outside the view stay as they were
    mask = np.ones(BASE.shape, bool)
    views(mask)[layout][...] = False
    np.testing.assert_array_equal(home[mask], untouched[mask])


def test_transposed_input_is_the_usual_lhsT():
    """A.T passed to a matmul kernel (the usual way to hand over lhsT)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 128)).astype(np.float32)
    b = rng.standard_normal((128, 32)).astype(np.float32)

    def matmul(lhsT, rhs):
        out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), nl.float32, buffer=nl.shared_hbm)
        s = nl.ndarray(lhsT.shape, nl.float32, buffer=nl.sbuf)
        m = nl.ndarray(rhs.shape, nl.float32, buffer=nl.sbuf)
        p = nl.ndarray((lhsT.shape[1], rhs.shape[1]), nl.float32, buffer=nl.psum)
        r = nl.ndarray(p.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=lhsT)
        nisa.dma_copy(dst=m, src=rhs)
        nisa.nc_matmul(dst=p, stationary=s, moving=m)
        nisa.tensor_copy(dst=r, src=p)
        nisa.dma_copy(dst=out, src=r)
        return out

    out = nki.simulate(matmul)(a.T, b)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    assert not a.T.flags.c_contiguous


@pytest.mark.parametrize("api", ["ga", "b1"])
def test_big_endian_input_works(api):
    a = BASE.astype(">f4")
    o = np.zeros(BASE.shape, ">f4")
    out = launch(api, (a, o))
    np.testing.assert_array_equal(out, BASE + 1)
    np.testing.assert_array_equal(o, BASE + 1)
    assert o.dtype == np.dtype(">f4")


def test_zero_d_and_size_zero_inputs_pass_through():
    seen = {}

    def kernel(s, e, f):
        seen.update(s=s.shape, e=e.shape, f=f.shape)

    s, e, f = np.array(3.0, np.float32), np.zeros((0, 4), np.float32), np.zeros((4, 0))
    nki.simulate(kernel)(s, e, f.astype(np.float32))
    assert seen == {"s": (), "e": (0, 4), "f": (4, 0)}
    assert s == 3.0


def test_zero_d_input_written_back():
    def kernel(s, o):
        t = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=s.reshape((1, 1)))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=o.reshape((1, 1)), src=t)

    o = np.array(0.0, np.float32)
    nki.simulate(kernel)(np.array(3.0, np.float32), o)
    assert o == 6.0


@pytest.mark.parametrize("api", ["ga", "b1"])
def test_read_only_input_is_read(api):
    a = BASE.copy()
    a.flags.writeable = False
    o = np.zeros_like(BASE)
    np.testing.assert_array_equal(launch(api, (a, o)), BASE + 1)
    np.testing.assert_array_equal(o, BASE + 1)


def readonly():
    o = np.zeros_like(BASE)
    o.flags.writeable = False
    return o


def test_broadcast_input_is_read():
    a = np.broadcast_to(np.float32(2), BASE.shape)
    np.testing.assert_array_equal(launch("ga", (a, np.zeros_like(BASE))), 3)


REFUSED = {
    "read-only": (readonly, "is a read-only array"),
    "broadcast": (lambda: np.broadcast_to(np.zeros((1, 32), np.float32), BASE.shape),
                  "read-only array"),
    "zero-stride": (lambda: np.lib.stride_tricks.as_strided(
        np.zeros(32, np.float32), BASE.shape, (0, 4), writeable=True),
        "elements that share memory"),
    "torch-expand": (lambda: torch.zeros(1, 32).expand(64, 32), "elements that share memory"),
}


@pytest.mark.parametrize("api", ["ga", "b1"])
@pytest.mark.parametrize("case", list(REFUSED))
def test_unreturnable_write_is_refused_at_the_line(api, case):
    make, words = REFUSED[case]
    o = make()
    a = torch.from_numpy(BASE.copy()) if case.startswith("torch") else BASE
    with pytest.raises(KernelError, match=words) as exc:
        launch(api, (a, o))
    assert exc.value.loc.lineno == write_line(api)
    assert "kernel argument 'o'" in str(exc.value)
    assert_no_internal_path(str(exc.value))


def test_torch_inference_tensor_write_is_refused():
    with torch.inference_mode():
        o = torch.zeros(64, 32)
    with pytest.raises(KernelError, match="torch inference tensor") as exc:
        launch("ga", (BASE, o))
    assert exc.value.loc.lineno == write_line("ga")


def test_same_array_twice_in_either_role():
    """kernel(x, x): the input copy is read, the output copy written and given back."""
    for order in ("in-out", "out-in"):
        x = BASE.copy()

        def kernel(p, q, order=order):
            src, dst = (p, q) if order == "in-out" else (q, p)
            t = nl.ndarray(src.shape, src.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=src)
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
            nisa.dma_copy(dst=dst, src=t)

        nki.simulate(kernel)(x, x)
        np.testing.assert_array_equal(x, BASE + 1)


def test_overlapping_inputs_both_written_is_refused():
    def kernel(p, q):
        t = nl.ndarray((64, 4), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.0)
        nisa.dma_copy(dst=p, src=t)
        nisa.dma_copy(dst=q, src=t)  # the second write

    x = np.zeros((64, 8), np.float32)
    with pytest.raises(KernelError, match="shares host memory with kernel argument 'p'") as exc:
        nki.simulate(kernel)(x[:, :4], x[:, 2:6])
    assert exc.value.loc.code.endswith("# the second write")
    # disjoint halves of one base are separate arrays: both written back
    nki.simulate(kernel)(x[:, :4], x[:, 4:])
    np.testing.assert_array_equal(x, 1)


@pytest.mark.parametrize("api", ["ga", "b1"])
@pytest.mark.parametrize("layout", ["transposed", "step2", "narrow", "bf16_transposed"])
def test_torch_layouts(api, layout):
    base = torch.arange(64 * 32, dtype=torch.float32).reshape(64, 32) / 8
    make = {
        "transposed": lambda t: t[:32, :32].T,
        "step2": lambda t: t[:, ::2],
        "narrow": lambda t: t.narrow(1, 5, 20),
        "bf16_transposed": lambda t: t.to(torch.bfloat16).T,
    }[layout]
    a = make(base.clone())
    home = torch.zeros_like(base) if layout != "bf16_transposed" else None
    o = make(home) if home is not None else torch.zeros_like(a.T).T
    out = launch(api, (a, o))
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, a + 1, rtol=0, atol=0)
    torch.testing.assert_close(o, a + 1, rtol=0, atol=0)


REFUSED_UP_FRONT = {
    "masked": (lambda: np.ma.masked_array(BASE, mask=BASE > 3), "masked array"),
    "meta": (lambda: torch.zeros(64, 32, device="meta"), "on device 'meta'"),
    "sparse": (lambda: torch.eye(32).to_sparse(), "layout torch.sparse_coo"),
    "float64": (lambda: BASE.astype(np.float64), "float64 is not a device dtype"),
    "int64": (lambda: BASE.astype(np.int64), "dtype int64 has no device equivalent"),
    "complex": (lambda: BASE.astype(np.complex64), "dtype complex64 has no device"),
    "object": (lambda: BASE.astype(object), "dtype object has no device"),
}


@pytest.mark.parametrize("case", list(REFUSED_UP_FRONT))
def test_input_without_device_copy_is_refused_before_the_kernel_runs(case):
    make, words = REFUSED_UP_FRONT[case]
    ran = []

    def kernel(a, o):
        ran.append(True)

    with pytest.raises(ConstraintError, match=words) as exc:
        nki.simulate(kernel)(make(), np.zeros(4, np.float32))
    assert not ran
    assert "kernel argument 'a'" in str(exc.value)


def test_timing_only_run_takes_unreturnable_inputs():
    """values=False gives nothing back: a broadcast output is fine there."""
    import trnsim

    o = np.broadcast_to(np.float32(0), BASE.shape)
    prof = trnsim.profile(add_one_ga, o, o, values=False)
    assert prof.outputs is None and prof.latency_ns > 0
