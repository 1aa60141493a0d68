"""The block-quantized dtypes from Python: the same API as C++ (docs/quantization.md), checked
against numpy's float64 arithmetic from the formats' definitions."""
import numpy as np
import pytest

import tinyfin as tf


def test_quantize_dequantize_q8_0_on_its_grid():
    """Values d * q with amax = 127 d quantize to exactly those levels and come back bit for bit."""
    rng = np.random.default_rng(0)
    qs = rng.integers(-127, 128, size=(2, 32))
    qs[:, 0] = 127
    want = (qs * np.array([[-0.375], [0.0625]])).astype(np.float32)
    q = tf.quantize(tf.tensor(want), "q8_0")
    assert q.dtype == tf.q8_0 and q.shape == (2, 32)
    np.testing.assert_array_equal(tf.dequantize(q).numpy(), want)


@pytest.mark.parametrize("dtype", ["q8_0", "q4_0", "q4_k", "q6_k"])
def test_matmul_q_against_float64(dtype):
    rng = np.random.default_rng(1)
    w = rng.uniform(-1, 1, size=(12, 256)).astype(np.float32)
    x = rng.uniform(-1, 1, size=(3, 256)).astype(np.float32)
    q = tf.quantize(tf.tensor(w), getattr(tf, dtype))
    wd = tf.dequantize(q).numpy().astype(np.float64)
    want = x.astype(np.float64) @ wd.T
    got = tf.matmul_q(tf.tensor(x), q).numpy()
    # The activations' 8-bit rounding: half a step of amax / 127 per element, times |w|.
    block = 32 if dtype in ("q8_0", "q4_0") else 256
    xb = np.abs(x).reshape(3, -1, block).max(axis=2) / 127 / 2
    bound = np.einsum("mb,nbk->mn", xb, np.abs(wd).reshape(12, -1, block)) * 1.001 + 1e-5
    assert np.all(np.abs(got - want) <= bound)


def test_embedding_q_and_refusals():
    w = tf.tensor(np.linspace(-1, 1, 4 * 64, dtype=np.float32).reshape(4, 64))
    q = tf.quantize(w, tf.q8_0)
    rows = tf.embedding_q(q, tf.tensor([3, 0], dtype=tf.int64))
    np.testing.assert_array_equal(rows.numpy(), tf.dequantize(q).numpy()[[3, 0]])
    with pytest.raises(tf.DTypeError):
        q + q
    with pytest.raises(tf.ShapeError):
        tf.quantize(tf.zeros(2, 48), tf.q4_0)
