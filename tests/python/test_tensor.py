"""Tensor creation, properties, views and indexing, operators, printing."""
import operator

import numpy as np
import pytest

import tinyfin as tf
from conftest import rng, to_np


@pytest.mark.parametrize("data,dtype", [
    (1.5, tf.float32), (3, tf.int64), (True, tf.bool), ([1.0, 2.0], tf.float32), ([[1, 2], [3, 4]], tf.int64),
    ([[True], [False]], tf.bool), (np.arange(6, dtype=np.int32).reshape(2, 3), tf.int32),
    (np.ones((2, 2), np.float16), tf.float16), (np.ones(3), tf.float32),
])
def test_tensor_from_data(data, dtype):
    t = tf.tensor(data)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(data).astype(t.numpy().dtype))
    assert t.shape == np.asarray(data).shape
    assert t.ndim == np.asarray(data).ndim


@pytest.mark.parametrize("dtype", [tf.float32, tf.float16, tf.bfloat16, tf.int32, tf.int64, tf.bool])
def test_tensor_dtypes_roundtrip(dtype):
    t = tf.tensor([[0, 1, 2], [3, 4, 5]], dtype=dtype)
    assert t.dtype == dtype
    expected = np.array([[0, 1, 2], [3, 4, 5]])
    if dtype == tf.bool:
        expected = expected != 0
    np.testing.assert_array_equal(np.array(t.tolist()), expected)
    assert t.to(tf.float32).tolist() == expected.astype(np.float32).tolist()


def test_factories():
    assert tf.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert tf.ones((2,), dtype=tf.int32).tolist() == [1, 1]
    assert tf.full((2, 2), 7).dtype == tf.int64
    assert tf.full((2, 2), 7.5).tolist() == [[7.5, 7.5], [7.5, 7.5]]
    assert tf.empty(4, 5).shape == (4, 5)
    assert tf.arange(5).tolist() == [0, 1, 2, 3, 4] and tf.arange(5).dtype == tf.int64
    np.testing.assert_allclose(tf.arange(0, 1, 0.25).numpy(), [0, 0.25, 0.5, 0.75])
    x = tf.tensor([[1.0, 2.0]])
    assert tf.zeros_like(x).shape == (1, 2) and tf.ones_like(x).tolist() == [[1.0, 1.0]]
    assert tf.full_like(x, 3).tolist() == [[3.0, 3.0]]
    assert tf.empty_like(x).dtype == tf.float32


def test_random_reproducible():
    a = tf.rand(100, seed=3)
    b = tf.rand(100, seed=3)
    assert a.tolist() == b.tolist()
    v = a.numpy()
    assert v.min() >= 0 and v.max() < 1
    n = tf.randn(2000, seed=4).numpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    tf.manual_seed(11)
    c = tf.rand(5)
    tf.manual_seed(11)
    assert tf.rand(5).tolist() == c.tolist()
    assert tf.rand_like(a).shape == a.shape and tf.randn_like(a).shape == a.shape


def test_properties():
    t = tf.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.ndim == 3 and t.dim() == 3 and t.numel() == 24 and len(t) == 2
    assert str(t.device) == "cpu" and t.device.type == "cpu" and t.device == "cpu"
    assert tf.tensor(2.5).item() == 2.5 and tf.tensor(3).item() == 3 and tf.tensor(True).item() is True
    assert isinstance(tf.tensor(3).item(), int)
    assert float(tf.tensor(2.0)) == 2.0 and int(tf.tensor(4)) == 4
    assert t.is_contiguous() and not t.transpose(0, 1).is_contiguous()
    assert t.transpose(0, 1).contiguous().is_contiguous()


def test_to_and_casts():
    t = tf.tensor([1.7, -2.2])
    assert t.to(tf.int32).tolist() == [1, -2]
    assert t.to("cpu").tolist() == t.tolist()
    assert t.to(dtype=tf.float16).dtype == tf.float16
    assert t.long().dtype == tf.int64 and t.int().dtype == tf.int32 and t.bool().tolist() == [True, True]
    assert t.half().float().dtype == tf.float32
    assert t.to(tf.device("cpu")).tolist() == t.tolist()


A = np.arange(60, dtype=np.float32).reshape(3, 4, 5)


@pytest.mark.parametrize("key", [
    0, -1, 2, (1, 2), (1, 2, 3), slice(None), slice(1, None), slice(None, None, 2), (slice(None), 1),
    (Ellipsis, 1), (Ellipsis, slice(1, 4, 2)), (None, 0), (0, None, slice(1, 3)), (slice(0, 3, 2), Ellipsis, None),
    (1, Ellipsis), (slice(-2, None), slice(None, -1), slice(1, 5, 3)), slice(5, 10), (2, 3, -1), (None,),
    (Ellipsis,), (slice(None), None, slice(None), 0),
])
def test_indexing_matches_numpy(key):
    t = tf.tensor(A)
    v = t[key]
    np.testing.assert_array_equal(v.numpy(), A[key])
    if v.numel():
        assert v.shares_storage(t)


@pytest.mark.parametrize("key", [0, (1, slice(None, None, 2)), (Ellipsis, 0), (slice(1, 3), slice(None), 4)])
def test_setitem(key):
    t = tf.tensor(A.copy())
    ref = A.copy()
    t[key] = -1.0
    ref[key] = -1.0
    np.testing.assert_array_equal(t.numpy(), ref)
    src = np.full(ref[key].shape, 5.0, np.float32)
    t[key] = tf.tensor(src)
    ref[key] = src
    np.testing.assert_array_equal(t.numpy(), ref)


def test_views():
    t = tf.tensor(A)
    np.testing.assert_array_equal(t.reshape(12, 5).numpy(), A.reshape(12, 5))
    np.testing.assert_array_equal(t.reshape((-1,)).numpy(), A.reshape(-1))
    np.testing.assert_array_equal(t.view(3, 20).numpy(), A.reshape(3, 20))
    np.testing.assert_array_equal(t.permute(2, 0, 1).numpy(), A.transpose(2, 0, 1))
    np.testing.assert_array_equal(t.transpose(0, 2).numpy(), A.swapaxes(0, 2))
    np.testing.assert_array_equal(t.T.numpy(), A.T)
    np.testing.assert_array_equal(t[0].T.numpy(), A[0].T)
    np.testing.assert_array_equal(t.flatten().numpy(), A.reshape(-1))
    np.testing.assert_array_equal(t.flatten(1).numpy(), A.reshape(3, 20))
    np.testing.assert_array_equal(t.unsqueeze(1).numpy(), A[:, None])
    np.testing.assert_array_equal(t.unsqueeze(-1).numpy(), A[..., None])
    np.testing.assert_array_equal(t[:, :1].squeeze().numpy(), A[:, 0])
    np.testing.assert_array_equal(t[:, :1].squeeze(1).numpy(), A[:, 0])
    e = tf.tensor([[1.0], [2.0]]).expand(2, 3)
    np.testing.assert_array_equal(e.numpy(), [[1, 1, 1], [2, 2, 2]])
    np.testing.assert_array_equal(t.narrow(1, 1, 2).numpy(), A[:, 1:3])
    assert t.permute(2, 0, 1).shares_storage(t)


BINARY = ["__add__", "__sub__", "__mul__", "__truediv__", "__pow__", "__lt__", "__le__", "__gt__", "__ge__",
          "__eq__", "__ne__"]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("scalar_side", ["none", "right", "left"])
def test_operators(op, scalar_side):
    """a op b with tensors, tensor op number and number op tensor (Python reflects or swaps)."""
    fn = getattr(operator, op[2:-2])
    a = rng(1).uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    b = rng(2).uniform(0.5, 2.0, (4,)).astype(np.float32)
    ta, tb = tf.tensor(a), tf.tensor(b)
    if scalar_side == "none":
        got, want = fn(ta, tb), fn(a, b)
    elif scalar_side == "right":
        got, want = fn(ta, 1.5), fn(a, np.float32(1.5))
    else:
        got, want = fn(1.5, ta), fn(np.float32(1.5), a)
    assert isinstance(got, tf.Tensor)
    np.testing.assert_allclose(to_np(got), want, rtol=1e-5)


def test_operators_misc():
    a = tf.tensor([[1.0, -2.0], [3.0, 4.0]])
    an = a.numpy().copy()
    np.testing.assert_allclose((a @ a).numpy(), an @ an)
    np.testing.assert_allclose((-a).numpy(), -an)
    np.testing.assert_allclose(abs(a).numpy(), np.abs(an))
    np.testing.assert_allclose((2 ** a).numpy(), 2 ** an, rtol=1e-6)
    assert (1 < a).tolist() == (1 < an).tolist()
    np.testing.assert_allclose((3 - a).numpy(), 3 - an)
    i = tf.tensor([1, 2, 3])
    assert (i * 2).tolist() == [2, 4, 6] and (i * 2).dtype == tf.int64


def test_inplace():
    a = tf.tensor([1.0, 2.0, 3.0])
    view = a[1:]
    a += 1
    assert a.tolist() == [2.0, 3.0, 4.0] and view.tolist() == [3.0, 4.0]
    a *= tf.tensor([2.0, 2.0, 2.0])
    a -= 1
    a /= 2
    assert a.tolist() == [1.5, 2.5, 3.5]
    a.add_(1).mul_(2)
    assert a.tolist() == [5.0, 7.0, 9.0]
    a.zero_()
    assert a.tolist() == [0.0, 0.0, 0.0]
    a.fill_(2)
    a.pow_(2)
    assert a.tolist() == [4.0, 4.0, 4.0]
    b = tf.zeros(3)
    b.copy_(tf.tensor([1.0, 2.0, 3.0]))
    assert b.tolist() == [1.0, 2.0, 3.0]
    c = b.clone()
    c += 1
    assert b.tolist() == [1.0, 2.0, 3.0]


def test_repr_like_numpy():
    assert repr(tf.tensor([1.0, 2.5])) == "tensor([1. , 2.5])"
    assert repr(tf.tensor([[1, 2], [3, 4]])) == "tensor([[1, 2],\n        [3, 4]])"
    assert repr(tf.tensor([1, 2], dtype=tf.int32)) == "tensor([1, 2], dtype=tinyfin.int32)"
    assert "requires_grad=True" in repr(tf.ones(2, requires_grad=True))
    assert repr(tf.tensor(3.0)) == "tensor(3.)"
    assert repr(tf.float16) == "tinyfin.float16"
    assert str(tf.zeros(0)) == "tensor([])"


def test_iteration_and_len():
    t = tf.tensor([[1, 2], [3, 4]])
    assert [r.tolist() for r in t] == [[1, 2], [3, 4]]
    assert len(t) == 2
    assert bool(tf.tensor(1.0)) and not bool(tf.tensor(0.0))
