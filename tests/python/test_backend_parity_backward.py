"""Gradients on every loaded backend against the cpu plugin's, from Python."""
import numpy as np
import pytest

import tinyfin as tf
import tinyfin.nn.functional as F
from conftest import other_backends, rng

BACKENDS = other_backends()
X = rng(0).uniform(-2, 2, (4, 6)).astype(np.float32)
Y = rng(1).uniform(0.5, 2, (4, 6)).astype(np.float32)
IMG = rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)
W = rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32)
LABELS = np.array([1, 0, 5, 2])

CASES = {
    "add_mul": lambda a, b, img, w, lab: (a + b) * a, "div": lambda a, b, *_: a / b,
    "exp_tanh": lambda a, *_: tf.tanh(tf.exp(a * 0.5)), "relu": lambda a, *_: tf.relu(a),
    "gelu": lambda a, *_: tf.gelu(a), "sigmoid_silu": lambda a, *_: tf.silu(a) + tf.sigmoid(a),
    "sum_mean": lambda a, *_: tf.sum(a, 0) + tf.mean(a, 0), "amax": lambda a, *_: tf.amax(a, 1),
    "matmul": lambda a, b, *_: a @ b.T, "softmax": lambda a, *_: F.softmax(a, -1),
    "log_softmax": lambda a, *_: F.log_softmax(a, -1), "layer_norm": lambda a, *_: F.layer_norm(a, (6,)),
    "rms_norm": lambda a, *_: F.rms_norm(a, (6,)),
    "conv2d": lambda a, b, img, w, lab: F.conv2d(img, w, padding=1, stride=2),
    "max_pool2d": lambda a, b, img, *_: F.max_pool2d(img * 1.0, 2),
    "avg_pool2d": lambda a, b, img, *_: F.avg_pool2d(img * 1.0, 2),
    "cross_entropy": lambda a, b, img, w, lab: F.cross_entropy(a, lab),
    "attention": lambda a, b, *_: F.scaled_dot_product_attention(a, b, a),
    "embedding": lambda a, b, img, w, lab: F.embedding(lab, a.T),
    "views": lambda a, *_: a[1:, ::2].T.reshape(-1) * 3,
}


def grads(backend, name):
    dev = tf.device(backend)
    leaves = [tf.tensor(v, device=dev, requires_grad=True) for v in (X, Y, IMG, W)]
    lab = tf.tensor(LABELS, device=dev)
    out = CASES[name](*leaves, lab)
    seed = tf.tensor(rng(4).uniform(0.5, 1.5, out.shape).astype(np.float32), device=dev)
    out.backward(seed)
    return [None if t.grad is None else t.grad.cpu().numpy() for t in leaves]


@pytest.mark.skipif(not BACKENDS, reason="no backend besides cpu is loaded in this build")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_parity(backend, name):
    want = grads("cpu", name)
    got = grads(backend, name)
    assert [g is None for g in got] == [g is None for g in want]
    for g, w in zip(got, want):
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=3e-3, atol=3e-4)
