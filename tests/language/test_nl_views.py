"""NkiTensor views vs numpy indexing of the same array (HBM and on-chip), and their errors."""

from __future__ import annotations

import numpy as np
import pytest
from source_paths import assert_no_internal_path

from trnsim import dtypes as dt
from trnsim.chip import load_chip
from trnsim.core import Device
from trnsim.errors import ConstraintError, OutOfBoundsError
from trnsim.nki.tensor import NkiTensor
from trnsim.nki.views import DynSlice


@pytest.fixture(scope="module")
def device() -> Device:
    return Device(load_chip("trn3"))


def hbm(device: Device, arr: np.ndarray) -> NkiTensor:
    v = device.hbm_from_array(arr, dt.resolve(arr.dtype), "t")
    return NkiTensor(v.buffer, v.layout)


def sbuf(device: Device, arr: np.ndarray) -> NkiTensor:
    v = device.core(0).allocate("sbuf", arr.shape, dt.resolve(arr.dtype), "s")
    v.write(arr)
    return NkiTensor(v.buffer, v.layout)


A3 = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)
T2 = np.arange(128 * 24, dtype=np.float32).reshape(128, 24)


def _no_internal_path(exc: pytest.ExceptionInfo) -> None:
    assert exc.value.loc is not None
    assert exc.value.loc.filename == __file__
    assert_no_internal_path(str(exc.value))


# ---------------------------------------------------------------- __getitem__
@pytest.mark.parametrize(
    ("key", "np_key"),
    [
        ((1,), (1,)),
        ((slice(None), 2, slice(1, 7, 2)), (slice(None), 2, slice(1, 7, 2))),
        ((Ellipsis, -1), (Ellipsis, -1)),
        ((-2, slice(None, None, 3)), (-2, slice(None, None, 3))),
        ((DynSlice(1, 2), slice(0, 6)), (slice(1, 3), slice(0, 6))),
        ((slice(3, 1, -1),), (slice(3, 1, -1),)),
    ],
    ids=["int", "int+step", "ellipsis-neg", "neg-int", "ds", "neg-step"],
)
def test_getitem_hbm_matches_numpy(device, key, np_key):
    t = hbm(device, A3)
    np.testing.assert_array_equal(t[key].read(), A3[np_key])


def test_getitem_on_chip_keeps_partition_dim_and_two_dims(device):
    t = sbuf(device, T2)
    assert t[5].shape == (1, 24)  # int on dim 0 keeps a size-1 partition dim
    np.testing.assert_array_equal(t[5].read(), T2[5:6])
    assert t[:, 3].shape == (128, 1)  # would fall below 2-D: the free dim stays as size 1
    np.testing.assert_array_equal(t[:, 3].read(), T2[:, 3:4])
    t3 = sbuf(device, np.arange(128 * 12, dtype=np.float32).reshape(128, 3, 4))
    assert t3[:, 1].shape == (128, 4)


def test_shape_compares_equal_to_list(device):
    t = hbm(device, A3)
    assert t[1].shape == [6, 8]
    assert t.shape == (4, 6, 8)


def test_getitem_out_of_bounds_is_at_user_line(device):
    t = hbm(device, A3)
    with pytest.raises(OutOfBoundsError, match=r"index range \[0, 6\] exceeds dimension size 6"):
        t[:, 0:7]
    with pytest.raises(OutOfBoundsError) as exc:
        t[9]
    _no_internal_path(exc)


# ---------------------------------------------------------------- named view methods
def test_slice_and_static_select(device):
    t = hbm(device, A3)
    np.testing.assert_array_equal(t.slice(2, 1, 7, 3).read(), A3[:, :, 1:7:3])
    np.testing.assert_array_equal(t.select(1, 4).read(), A3[:, 4, :])
    np.testing.assert_array_equal(t.select(2, -1).read(), A3[:, :, -1])
    s = sbuf(device, A3[0].repeat(2, axis=1).reshape(6, 16)[:, :12].copy().reshape(6, 3, 4))
    assert s.select(1, 2).shape == (6, 4)


def test_permute_broadcast_expand_squeeze(device):
    t = hbm(device, A3)
    np.testing.assert_array_equal(t.permute((2, 0, 1)).read(), A3.transpose(2, 0, 1))
    one = t[:, 0:1, :]
    np.testing.assert_array_equal(
        one.broadcast(1, 5).read(), np.broadcast_to(A3[:, 0:1], (4, 5, 8))
    )
    e = t.expand_dim(1)
    assert e.shape == (4, 1, 6, 8)
    np.testing.assert_array_equal(e.read(), A3[:, None])
    np.testing.assert_array_equal(e.squeeze_dim(1).read(), A3)
    np.testing.assert_array_equal(t.expand_dim(3).read(), A3[..., None])


def test_reshape_dim_flatten_dims_reshape(device):
    t = hbm(device, A3)
    np.testing.assert_array_equal(t.reshape_dim(2, (2, -1)).read(), A3.reshape(4, 6, 2, 4))
    np.testing.assert_array_equal(t.flatten_dims(1, 2).read(), A3.reshape(4, 48))
    np.testing.assert_array_equal(t.reshape((8, 24)).read(), A3.reshape(8, 24))
    np.testing.assert_array_equal(t.reshape(2, -1, 4).read(), A3.reshape(2, 24, 4))
    # a strided but mergeable view reshapes without copying
    v = t[:, :, 0:8:2]
    np.testing.assert_array_equal(v.reshape((4, 6, 2, 2)).read(), A3[:, :, ::2].reshape(4, 6, 2, 2))


def test_on_chip_reshape_keeps_partitions(device):
    s = sbuf(device, T2)
    np.testing.assert_array_equal(s.reshape((128, 4, 6)).read(), T2.reshape(128, 4, 6))
    with pytest.raises(ConstraintError, match="partition dimension must stay 128") as exc:
        s.reshape((64, 48))
    _no_internal_path(exc)


def test_rearrange_tuple_and_string_patterns(device):
    s = sbuf(device, T2)
    r = s.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4})
    assert r.shape == (128, 6, 4)
    np.testing.assert_array_equal(r.read(), T2.reshape(128, 4, 6).transpose(0, 2, 1))
    t = hbm(device, A3)
    r2 = t.rearrange("a b c", "(a b) c")
    np.testing.assert_array_equal(r2.read(), A3.reshape(24, 8))
    r3 = t.rearrange(("a", ("b", "c"), "d"), ("a", "c", "b", "d"), {"c": 2})
    np.testing.assert_array_equal(r3.read(), A3.reshape(4, 3, 2, 8).transpose(0, 2, 1, 3))


def test_view_dtype_scales_last_dim(device):
    s = sbuf(device, T2)
    u8 = s.view(dt.uint8)
    assert u8.shape == (128, 96)
    np.testing.assert_array_equal(u8.read(), T2.view(np.uint8))
    back = u8.view(dt.float32)
    np.testing.assert_array_equal(back.read(), T2)
    h = hbm(device, np.arange(32, dtype=np.int16).reshape(4, 8))
    np.testing.assert_array_equal(
        h.reinterpret_cast(dt.int32).read(),
        np.arange(32, dtype=np.int16).reshape(4, 8).view(np.int32),
    )


def test_get_pattern_is_contiguous(device):
    t = hbm(device, A3)
    assert t.get_pattern() == [[48, 4], [8, 6], [1, 8]]
    assert t.is_contiguous()
    assert not t[:, :, 0:4].is_contiguous()
    assert t[1:3].is_contiguous()
    assert not t.is_indirect()


# ---------------------------------------------------------------- .ap()
def test_ap_addresses_flat_storage_ignoring_view(device):
    t = hbm(device, A3)
    flat = A3.reshape(-1)
    v = t[1:3, 2:4].ap([[8, 6], [2, 4]], offset=3)
    np.testing.assert_array_equal(v.read(), flat[3 + 8 * np.arange(6)[:, None] + 2 * np.arange(4)])
    v2 = t[1].ap([[1, 5]])  # offset=None keeps the view's offset (48)
    np.testing.assert_array_equal(v2.read(), flat[48:53])


def test_ap_on_chip_partition_step_and_dtype(device):
    s = sbuf(device, T2)
    v = s.ap([[24, 128], [1, 12]], offset=6)
    np.testing.assert_array_equal(v.read(), T2[:, 6:18])
    b = s.ap([[48, 128], [1, 4]], offset=0, dtype=dt.uint16)
    np.testing.assert_array_equal(b.read(), T2.view(np.uint16)[:, 0:4])
    with pytest.raises(ConstraintError, match="its step must be the storage's 24 elements") as exc:
        s.ap([[12, 128], [1, 12]])
    _no_internal_path(exc)


# ---------------------------------------------------------------- dynamic addressing
def test_ap_scalar_offset_reads_at_runtime_value(device):
    t = hbm(device, A3)
    idx = sbuf(device, np.array([[2]], dtype=np.int32))
    v = t.ap([[8, 6], [1, 8]], offset=0, scalar_offset=idx, indirect_dim=0)
    assert v.is_indirect()
    assert v.dynamic.kind == "scalar"
    np.testing.assert_array_equal(v.read(), A3[2])
    idx.write(np.array([[3]], dtype=np.int32))  # the offset is read when the view is used
    np.testing.assert_array_equal(v.read(), A3[3])


def test_dynamic_select_and_write(device):
    t = hbm(device, A3.copy())
    idx = sbuf(device, np.array([[1]], dtype=np.int32))
    v = t.select(0, idx)
    assert v.shape == (6, 8)
    np.testing.assert_array_equal(v.read(), A3[1])
    v.write(np.zeros((6, 8), np.float32))
    expect = A3.copy()
    expect[1] = 0
    np.testing.assert_array_equal(t.read(), expect)


def test_vector_select_gathers_rows(device):
    table = np.arange(10 * 4, dtype=np.float32).reshape(10, 4)
    t = hbm(device, table)
    rows = np.array([[7], [0], [3]], dtype=np.int32)
    idx = sbuf(device, rows)
    v = t.vector_select(0, idx)
    assert v.shape == (3, 4)
    np.testing.assert_array_equal(v.read(), table[rows[:, 0]])
    ap = t.ap([[4, 3], [1, 4]], offset=0, vector_offset=idx)
    np.testing.assert_array_equal(ap.read(), table[rows[:, 0]])


def test_runtime_index_out_of_bounds(device):
    t = hbm(device, np.zeros((10, 4), np.float32))
    idx = sbuf(device, np.array([[12]], dtype=np.int32))
    v = t.vector_select(0, idx)
    _pos, valid = v.element_positions()
    assert not valid.any()
    with pytest.raises(OutOfBoundsError, match=r"valid indices \[0, 10\)"):
        v.read()


def test_indirect_view_snake_offsets(device):
    base = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    s = sbuf(device, base)
    offs = np.arange(16 * 2, dtype=np.int32)[::-1].reshape(2, 16).T.copy()  # (16, 2)
    idx = sbuf(device, offs)
    v = s.indirect(idx)
    assert v.shape == (16, 32)
    i = np.arange(32)
    cols = offs[i % 16, i // 16]
    np.testing.assert_array_equal(v.read(), base[:, cols])


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda t: t.permute((1, 0)), "dims\\[0\\] must be 0"),
        (lambda t: t.broadcast(1, 4), "only a size-1 dimension"),
        (lambda t: t.broadcast(0, 4), "dimension 0 is the partition"),
        (lambda t: t.expand_dim(0), "dimension 0 is the partition"),
        (lambda t: t.squeeze_dim(1), "only a size-1 dimension can be removed"),
        (lambda t: t.flatten_dims(0, 1), "dimension 0 is the partition"),
        (lambda t: t.select(0, 3), "use slice\\(0, i, i \\+ 1\\)"),
        (lambda t: t.slice(1, 0, 40), "outside a dimension of size 24"),
        (lambda t: t.reshape_dim(1, (5, -1)), "cannot infer -1"),
        (lambda t: t[:, 0:24:2].view(dt.uint8), "last dimension must be contiguous"),
    ],
    ids=[
        "permute",
        "broadcast-size",
        "broadcast-p",
        "expand-p",
        "squeeze",
        "flatten-p",
        "select-p",
        "slice",
        "reshape_dim",
        "view",
    ],
)
def test_view_errors_on_chip(device, call, match):
    s = sbuf(device, T2)
    with pytest.raises((ConstraintError, OutOfBoundsError), match=match) as exc:
        call(s)
    assert_no_internal_path(str(exc.value))


def test_flatten_non_contiguous_and_vector_select_on_chip(device):
    t = hbm(device, A3)
    with pytest.raises(ConstraintError, match="not contiguous in memory") as exc:
        t.permute((0, 2, 1)).flatten_dims(1, 2)
    _no_internal_path(exc)
    s = sbuf(device, T2)
    idx = sbuf(device, np.zeros((4, 1), np.int32))
    with pytest.raises(ConstraintError, match="only HBM tensors") as exc:
        s.vector_select(0, idx)
    _no_internal_path(exc)
