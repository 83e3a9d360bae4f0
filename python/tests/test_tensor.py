"""Tensors <-> NumPy and DLPack: views without copies (same data pointer both ways), copies only
when asked, refused layouts and dtypes with clear errors."""

import numpy as np
import pytest

import weft


def test_numpy_view_of_a_tensor_shares_memory():
    t = weft.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.shape == (2, 3)
    assert a.ctypes.data == t.data_ptr
    assert t.numpy().ctypes.data == t.data_ptr
    a[0, 0] = 42.0  # writes through: the same memory
    assert np.asarray(t)[0, 0] == 42.0


def test_from_numpy_is_a_view_and_keeps_the_array_alive():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = weft.from_numpy(a)
    assert t.data_ptr == a.ctypes.data
    assert t.shape == (3, 4) and t.dtype == "float32"
    ptr = a.ctypes.data
    del a
    b = np.asarray(t)
    assert b.ctypes.data == ptr and b[2, 3] == 11.0
    i = np.array([1, 2, 3], dtype=np.int32)
    assert weft.from_numpy(i).dtype == "int32" and weft.from_numpy(i).data_ptr == i.ctypes.data


def test_from_numpy_takes_every_weft_dtype_without_a_copy():
    for dtype, name in [(np.float64, "float64"), (np.int64, "int64"), (np.bool_, "bool")]:
        a = np.array([[1, 0], [0, 1]], dtype=dtype)
        t = weft.from_numpy(a)
        assert t.dtype == name and t.data_ptr == a.ctypes.data
        back = np.asarray(t)
        assert back.dtype == a.dtype and back.ctypes.data == a.ctypes.data
        np.testing.assert_array_equal(back, a)
    big = np.array([2**62 + 1, -3], dtype=np.int64)
    assert np.asarray(weft.tensor(big, dtype="int64")).tolist() == [2**62 + 1, -3]
    d = np.array([0.1, 2**60], dtype=np.float64)
    assert np.from_dlpack(weft.from_dlpack(d)).tolist() == [0.1, 2**60]


def test_from_numpy_refuses_other_dtypes_and_layouts():
    with pytest.raises(weft.TypeError, match=r"\[from_numpy\] unsupported dtype float16"):
        weft.from_numpy(np.zeros((2, 2), dtype=np.float16))
    with pytest.raises(TypeError):  # also a builtins.TypeError
        weft.from_numpy(np.zeros(3, dtype=np.uint16))
    with pytest.raises(weft.Error, match="not C-contiguous"):
        weft.from_numpy(np.zeros((4, 4), dtype=np.float32)[:, ::2])
    with pytest.raises(weft.Error, match="not C-contiguous"):
        weft.from_numpy(np.zeros((4, 3), dtype=np.float32).T)
    with pytest.raises(weft.Error, match="rank 7"):
        weft.from_numpy(np.zeros((1,) * 7, dtype=np.float32))
    assert issubclass(weft.Error, ValueError)


def test_tensor_copies_and_converts():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = weft.tensor(a)
    assert t.dtype == "float32" and t.data_ptr != a.ctypes.data
    np.testing.assert_array_equal(np.asarray(t), a.astype(np.float32))
    assert weft.tensor([1, 2, 3]).dtype == "int32"
    assert weft.tensor(np.zeros((4, 4), np.float32)[:, ::2]).shape == (4, 2)
    with pytest.raises(weft.Error, match="do not fit int32"):
        weft.tensor(np.array([2**40]))
    with pytest.raises(weft.Error, match="do not fit int64"):
        weft.tensor(np.array([2**64 - 1], dtype=np.uint64), dtype="int64")
    with pytest.raises(weft.Error, match="not whole numbers"):
        weft.tensor([0.5], dtype="int32")
    with pytest.raises(weft.Error, match="unsupported dtype 'float16'"):
        weft.tensor([1.0], dtype="float16")


def test_dlpack_with_numpy():
    t = weft.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr and a.shape == (2, 3)
    b = np.arange(4, dtype=np.int32)
    u = weft.from_dlpack(b)
    assert u.data_ptr == b.ctypes.data and u.dtype == "int32"
    with pytest.raises(weft.TypeError, match="unsupported dtype"):
        weft.from_dlpack(np.zeros(3, dtype=np.float16))


def test_dlpack_with_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is absent (Debian: python3-torch)")
    t = weft.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    x = torch.utils.dlpack.from_dlpack(t.__dlpack__())
    assert x.data_ptr() == t.data_ptr and tuple(x.shape) == (2, 3)
    x[1, 2] = -1.0
    assert np.asarray(t)[1, 2] == -1.0
    y = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    u = weft.from_dlpack(y)
    assert u.data_ptr == y.data_ptr() and u.shape == (2, 4)
    v = weft.from_dlpack(torch.utils.dlpack.to_dlpack(y))  # a capsule works too
    assert v.data_ptr == y.data_ptr()
    del y
    np.testing.assert_array_equal(np.asarray(u), np.arange(8, dtype=np.float32).reshape(2, 4))
    with pytest.raises(weft.Error, match="not contiguous"):
        weft.from_dlpack(torch.zeros(4, 4).t())
    ids = weft.from_dlpack(torch.tensor([2**40, -1], dtype=torch.int64))
    assert ids.dtype == "int64" and torch.from_dlpack(ids).tolist() == [2**40, -1]
    with pytest.raises(weft.TypeError, match="unsupported dtype"):
        weft.from_dlpack(torch.zeros(3, dtype=torch.float16))
