"""tinyfin.cumsum and Tensor.cumsum (torch.cumsum's signature, ONNX CumSum's exclusive and reverse)
against numpy, with the gradient against numpy's reverse scan of the seed."""
import numpy as np
import pytest

import tinyfin as tf
from conftest import rng, to_np

X = rng(3).uniform(-2, 2, (3, 4, 5)).astype(np.float32)


def ref(x, dim, exclusive=False, reverse=False):
    """numpy's cumsum in float64 with ONNX CumSum's flags."""
    a = np.flip(x, dim) if reverse else x
    s = np.cumsum(a.astype(np.float64), axis=dim)
    if exclusive:
        s = s - a
    return np.flip(s, dim) if reverse else s


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_values(dim, exclusive, reverse):
    got = tf.cumsum(tf.tensor(X), dim, exclusive=exclusive, reverse=reverse)
    np.testing.assert_allclose(got.numpy(), ref(X, dim, exclusive, reverse), rtol=1e-6, atol=1e-6)


def test_matches_numpy_cumsum_and_method():
    np.testing.assert_allclose(tf.tensor(X).cumsum(1).numpy(), np.cumsum(X, axis=1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tf.cumsum(tf.tensor(X), dim=2).numpy(), np.cumsum(X, axis=2), rtol=1e-6, atol=1e-6)


def test_dtype_argument_and_integers():
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    got = tf.cumsum(tf.tensor(x), 1)
    assert got.dtype == tf.int32
    np.testing.assert_array_equal(got.numpy(), np.cumsum(x, axis=1))
    as_float = tf.cumsum(tf.tensor(x), 0, dtype=tf.float32)
    assert as_float.dtype == tf.float32
    np.testing.assert_array_equal(as_float.numpy(), np.cumsum(x, axis=0).astype(np.float32))
    wide = tf.cumsum(tf.tensor(x), 1, dtype=tf.int64)
    assert wide.dtype == tf.int64


def test_bf16_rounds_once():
    x = tf.tensor(X).to(tf.bfloat16)
    exact = ref(to_np(x), 2)
    np.testing.assert_allclose(to_np(tf.cumsum(x, 2)), exact, rtol=2 ** -8, atol=2 ** -8)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_gradient(exclusive, reverse):
    x = tf.tensor(X, requires_grad=True)
    seed = rng(4).uniform(-1, 1, X.shape).astype(np.float32)
    (tf.cumsum(x, 1, exclusive=exclusive, reverse=reverse) * tf.tensor(seed)).sum().backward()
    # d/dx_j of sum_i seed_i y_i: the seed scanned the other way along the axis.
    want = ref(seed, 1, exclusive, not reverse)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6, atol=1e-6)


def test_errors():
    with pytest.raises(tf.ShapeError):
        tf.cumsum(tf.tensor(X), 3)
    with pytest.raises(tf.DTypeError):
        tf.cumsum(tf.tensor(np.array([True, False])), 0)
