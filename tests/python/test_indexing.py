"""Indexing beyond views, against numpy: integer index lists/arrays/tensors and boolean masks
(get: a gathered copy; set: written into the tensor), index_select, flip, and the error for
negative slice steps (tinyfin views have no negative strides: flip is the copy)."""
import numpy as np
import pytest

import tinyfin as tf
from conftest import other_backends, rng, to_np

A = np.arange(60, dtype=np.float32).reshape(3, 4, 5)


def T(a=A):
    return tf.tensor(a)


GET_KEYS = [
    ([0, 2],), ([2, 0, 2, -1],), (np.array([1, 0]),), ([[0, 1], [2, 2]],),
    (slice(None), [3, 0]), (slice(None), slice(None), [4, 0, 1]), (Ellipsis, [1, 1]),
    (1, [0, 3]), (slice(0, 2), [1, 2], slice(None, None, 2)), (None, [2, 1]),
    ([],), (slice(None), np.array([-1, -4])),
]


@pytest.mark.parametrize("key", GET_KEYS, ids=[repr(k) for k in GET_KEYS])
def test_get_index_list_like_numpy(key):
    got = T()[key if len(key) > 1 else key[0]]
    want = A[key if len(key) > 1 else key[0]]
    assert got.shape == want.shape
    np.testing.assert_array_equal(to_np(got), want)


def test_get_index_tensor_and_rank0_tensor():
    idx = tf.tensor([2, 0])
    np.testing.assert_array_equal(to_np(T()[idx]), A[[2, 0]])
    np.testing.assert_array_equal(to_np(T()[:, tf.tensor([[1], [3]], dtype=tf.int32)]), A[:, [[1], [3]]])
    t = T()
    v = t[tf.tensor(1)]  # a rank-0 int tensor is an int: a view
    assert v.shares_storage(t)
    np.testing.assert_array_equal(to_np(v), A[1])


def test_index_result_is_a_copy():
    t = T()
    got = t[[0, 1]]
    got += 100
    np.testing.assert_array_equal(to_np(t), A)


MASKS = [
    (A > 30,), (A[:, :, 0] > 20,), (np.array([True, False, True]),),
    (slice(None), np.array([False, True, True, False])), (Ellipsis, A[0, 0] % 2 == 0),
    (np.zeros(3, bool),), (1, A[1] > 27),
]


@pytest.mark.parametrize("key", MASKS, ids=[f"mask{i}" for i in range(len(MASKS))])
def test_get_bool_mask_like_numpy(key):
    k = key if len(key) > 1 else key[0]
    want = A[k]
    got = T()[tuple(tf.tensor(x) if isinstance(x, np.ndarray) else x for x in key)
              if len(key) > 1 else tf.tensor(key[0])]
    assert got.shape == want.shape
    np.testing.assert_array_equal(to_np(got), want)
    # a numpy mask works the same
    np.testing.assert_array_equal(to_np(T()[k]), want)


def test_mask_from_comparison_and_dtypes():
    x = tf.tensor([[1, -2, 3], [-4, 5, -6]])
    assert x[x < 0].tolist() == [-2, -4, -6]
    b = tf.tensor([True, False, True])
    assert b[tf.tensor([True, True, False])].tolist() == [True, False]
    h = tf.tensor([1.5, 2.5, 3.5], dtype=tf.float16)
    assert h[[2, 0]].dtype == tf.float16 and h[[2, 0]].tolist() == [3.5, 1.5]


SET_CASES = [
    (([0, 2],), 7.0), (([2, 0, 2],), None), ((slice(None), [1, 3]), None),
    ((A > 40,), -1.0), ((A > 40,), "values"), ((slice(None), np.array([True, False, False, True])), None),
    ((1, [3, 0]), None), ((Ellipsis, [0]), 3.0), (([-1],), None),
]


@pytest.mark.parametrize("key,value", SET_CASES, ids=[f"set{i}" for i in range(len(SET_CASES))])
def test_set_like_numpy(key, value):
    k = key if len(key) > 1 else key[0]
    want = A.copy()
    if value is None:  # a value array of the selected shape
        value = rng(1).standard_normal(want[k].shape).astype(np.float32)
    elif value == "values":
        value = np.arange(want[k].size, dtype=np.float32)
    want[k] = value
    t = T()
    base = t
    view_of_base = t[1:]
    t[k] = tf.tensor(value) if isinstance(value, np.ndarray) else value
    assert t is base
    np.testing.assert_array_equal(to_np(t), want)
    np.testing.assert_array_equal(to_np(view_of_base), want[1:])  # written in place


def test_set_broadcasts_value_rows_and_repeated_index_last_wins():
    want = A.copy()
    want[[0, 2]] = np.arange(5, dtype=np.float32)
    t = T()
    t[[0, 2]] = tf.arange(5).float()
    np.testing.assert_array_equal(to_np(t), want)
    x = tf.zeros(4)
    x[[1, 1, 3]] = tf.tensor([5.0, 6.0, 7.0])
    assert x.tolist() == [0.0, 6.0, 0.0, 7.0]


def test_set_mask_with_tensor_scalar_and_bool_tensor():
    x = tf.tensor([1.0, -2.0, 3.0, -4.0])
    x[x < 0] = tf.tensor(0.0)
    assert x.tolist() == [1.0, 0.0, 3.0, 0.0]
    b = tf.tensor([False, False, False])
    b[[0, 2]] = True
    assert b.tolist() == [True, False, True]


def test_set_errors():
    x = tf.zeros(2, 3)
    with pytest.raises(tf.ShapeError, match="cannot assign"):
        x[[0, 1]] = tf.ones(4)
    with pytest.raises(tf.ShapeError, match="mask of shape"):
        x[tf.tensor([True, False, True])] = 1.0
    with pytest.raises(tf.ValueError, match="out of range"):
        x[[0, 2]] = 1.0


def test_get_errors():
    x = T()
    with pytest.raises(tf.ValueError, match="index 3 is out of range for dim 0 of size 3"):
        x[[0, 3]]
    with pytest.raises(tf.ShapeError, match="does not match"):
        x[np.ones((3, 5), bool)]
    with pytest.raises(tf.DTypeError, match="integers or bools"):
        x[[0.5, 1.0]]
    with pytest.raises(tf.ValueError, match="one index array"):
        x[[0], :, [1]]
    with pytest.raises(tf.ShapeError, match="rectangular"):
        x[[[0, 1], [2]]]


def test_gradient_flows_through_gathered_rows():
    w = tf.tensor(A[0], requires_grad=True)  # [4, 5]
    (w[[0, 2, 2]] * tf.tensor([[1.0], [2.0], [3.0]])).sum().backward()
    want = np.zeros((4, 5), np.float32)
    want[0] = 1
    want[2] = 5
    np.testing.assert_array_equal(to_np(w.grad), want)
    w.grad = None
    w[w > 10].sum().backward()
    np.testing.assert_array_equal(to_np(w.grad), (A[0] > 10).astype(np.float32))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_index_select_like_numpy_take(dim):
    idx = [3, 0, 0] if A.shape[dim] > 3 else [2, 0, 0]
    got = tf.index_select(T(), dim, idx)
    np.testing.assert_array_equal(to_np(got), np.take(A, idx, axis=dim))
    np.testing.assert_array_equal(to_np(T().index_select(dim, tf.tensor(idx))), np.take(A, idx, axis=dim))


@pytest.mark.parametrize("dims", [0, 1, (0, 2), (-1,), (0, 1, 2)])
def test_flip_like_numpy(dims):
    got = tf.flip(T(), dims)
    np.testing.assert_array_equal(to_np(got), np.flip(A, dims))
    np.testing.assert_array_equal(to_np(T().flip(dims)), np.flip(A, dims))


def test_negative_steps_name_flip():
    for key in [slice(None, None, -1), slice(5, 1, -2)]:
        with pytest.raises(tf.ValueError, match=r"negative step cannot be a view.*tinyfin\.flip"):
            tf.arange(8)[key]
    # what the error suggests gives numpy's values
    np.testing.assert_array_equal(to_np(tf.flip(tf.arange(8), 0)), np.arange(8)[::-1])
    np.testing.assert_array_equal(to_np(tf.arange(8)[[5, 3]]), np.arange(8)[5:1:-2])


@pytest.mark.parametrize("backend", other_backends())
def test_on_other_backends(backend):
    dev = tf.device(backend + ":0")
    t = tf.tensor(A, device=dev)
    np.testing.assert_array_equal(to_np(t[[2, 0]]), A[[2, 0]])
    np.testing.assert_array_equal(to_np(t[t > 40]), A[A > 40])
    t[:, [0]] = -1.0
    want = A.copy()
    want[:, [0]] = -1
    np.testing.assert_array_equal(to_np(t), want)
