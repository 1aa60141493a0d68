"""numpy and DLPack interop: zero-copy where memory allows, copies otherwise, clear errors."""
import gc
import sys

import numpy as np
import pytest

import tinyfin as tf
from conftest import other_backends

try:
    import torch
except ImportError:  # python3-torch is installed only for benchmarks (scripts/setup --bench)
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (Debian python3-torch) is not installed")


@pytest.mark.parametrize("dtype", [tf.float32, tf.float16, tf.int32, tf.int64, tf.bool])
def test_numpy_shares_memory(dtype):
    t = tf.zeros(3, 4, dtype=dtype)
    a = t.numpy()
    b = np.asarray(t)
    assert np.shares_memory(a, b)
    a[1, 2] = 1
    assert t[1, 2].item() == 1
    assert a.dtype == np.dtype({tf.float32: "float32", tf.float16: "float16", tf.int32: "int32",
                                tf.int64: "int64", tf.bool: "bool"}[dtype])


def test_numpy_of_views_keeps_strides():
    t = tf.arange(24, dtype=tf.float32).reshape(4, 6)
    v = t[1:, ::2].T
    a = v.numpy()
    np.testing.assert_array_equal(a, np.arange(24).reshape(4, 6)[1:, ::2].T)
    assert np.shares_memory(a, t.numpy())


def test_numpy_keeps_tensor_alive():
    a = tf.arange(5, dtype=tf.float32).numpy()
    gc.collect()
    assert a.tolist() == [0, 1, 2, 3, 4]


def test_from_numpy_shares_and_keeps_alive():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    refs = sys.getrefcount(a)
    t = tf.from_numpy(a)
    assert sys.getrefcount(a) == refs + 1
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    t[1] = 7.0
    assert (a[1] == 7).all()
    assert np.shares_memory(t.numpy(), a)
    del t
    gc.collect()
    assert sys.getrefcount(a) == refs
    b = np.arange(6, dtype=np.int64)
    tb = tf.from_numpy(b)
    del b
    gc.collect()
    assert (tb * 2).tolist() == [0, 2, 4, 6, 8, 10]


def test_from_numpy_strided_shares():
    a = np.arange(40, dtype=np.float32).reshape(5, 8)
    v = a[::2, 1::3]
    t = tf.from_numpy(v)
    assert np.shares_memory(t.numpy(), a)
    np.testing.assert_array_equal((t + 1).numpy(), v + 1)
    np.testing.assert_array_equal(tf.from_numpy(a.T).numpy(), a.T)
    assert np.shares_memory(tf.from_numpy(a.T).numpy(), a)


def test_from_numpy_copies_when_layout_does_not_allow():
    a = np.arange(6, dtype=np.float32)
    rev = a[::-1]
    t = tf.from_numpy(rev)
    assert t.tolist() == rev.tolist() and not np.shares_memory(t.numpy(), a)
    ro = np.arange(3, dtype=np.float32)
    ro.setflags(write=False)
    t2 = tf.from_numpy(ro)
    assert t2.tolist() == [0, 1, 2] and not np.shares_memory(t2.numpy(), ro)
    with pytest.raises(tf.DTypeError, match="float64"):
        tf.from_numpy(np.ones(3))
    assert tf.tensor(np.ones(3)).dtype == tf.float32


def test_tensor_copies():
    a = np.ones(3, np.float32)
    t = tf.tensor(a)
    a[0] = 5
    assert t.tolist() == [1, 1, 1]
    assert tf.as_tensor(a).tolist() == [5, 1, 1]


def test_numpy_requires_grad_and_bfloat16_errors():
    with pytest.raises(tf.AutogradError, match="detach"):
        tf.ones(2, requires_grad=True).numpy()
    with pytest.raises(tf.DTypeError, match="float32"):
        tf.ones(2, dtype=tf.bfloat16).numpy()
    assert tf.ones(2, dtype=tf.bfloat16).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("backend", [b for b in other_backends() if b in ("vulkan", "opengl", "cuda")])
def test_device_tensor_numpy_needs_explicit_copy(backend):
    t = tf.ones(3, device=backend)
    with pytest.raises(tf.DeviceError, match=r'\.to\("cpu"\)'):
        t.numpy()
    with pytest.raises(tf.DeviceError):
        np.asarray(t)
    assert t.to("cpu").numpy().tolist() == [1, 1, 1]
    assert t.numpy(force=True).tolist() == [1, 1, 1]
    with pytest.raises(tf.DeviceError):
        t.__dlpack__()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64])
def test_dlpack_numpy_both_ways(dtype):
    a = np.arange(12).astype(dtype).reshape(3, 4)
    t = tf.from_dlpack(a)
    assert t.dtype == {np.float32: tf.float32, np.float16: tf.float16, np.int32: tf.int32,
                       np.int64: tf.int64}[dtype]
    np.testing.assert_array_equal(t.numpy(), a)
    assert np.shares_memory(t.numpy(), a)
    back = np.from_dlpack(t)
    np.testing.assert_array_equal(back, a)
    assert np.shares_memory(back, a)
    assert t.__dlpack_device__() == (1, 0)


def test_dlpack_keeps_producer_alive():
    t = tf.arange(6, dtype=tf.float32)[::2]
    a = np.from_dlpack(t)
    del t
    gc.collect()
    assert a.tolist() == [0, 2, 4]
    b = tf.from_dlpack(np.arange(4, dtype=np.float32)[1:])
    gc.collect()
    assert b.tolist() == [1, 2, 3]


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "int64"])
def test_dlpack_torch_both_ways(dtype):
    from torch.utils.dlpack import from_dlpack as torch_from_dlpack
    x = torch.arange(12).to(getattr(torch, dtype)).reshape(3, 4)[:, 1:]
    t = tf.from_dlpack(x)
    assert t.dtype == getattr(tf, dtype) and t.shape == (3, 3)
    assert t.to(tf.float32).tolist() == x.float().tolist()
    x[0, 0] = 100
    assert t[0, 0].item() == 100
    y = torch_from_dlpack(t)
    assert y.data_ptr() == x.data_ptr() and y.stride() == x.stride()
    u = tf.arange(6, dtype=tf.float32).reshape(2, 3)
    z = torch_from_dlpack(u)
    z[1, 1] = -1
    assert u[1, 1].item() == -1


def test_dlpack_bad_input():
    with pytest.raises(tf.ValueError):
        tf.from_dlpack(42)
