"""The same ops on every loaded backend (blas, vulkan on lavapipe, opengl on llvmpipe, ...)
against the cpu plugin, from Python. The forward values must agree within float tolerance."""
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
    "add": lambda a, b, *_: a + b, "sub": lambda a, b, *_: a - b, "mul": lambda a, b, *_: a * b,
    "div": lambda a, b, *_: a / b, "pow": lambda a, b, *_: tf.pow(b, a), "maximum": lambda a, b, *_: tf.maximum(a, b),
    "lt": lambda a, b, *_: a < b, "where": lambda a, b, *_: tf.where(a > 0, a, b),
    "exp": lambda a, *_: tf.exp(a), "relu": lambda a, *_: tf.relu(a), "tanh": lambda a, *_: tf.tanh(a),
    "sigmoid": lambda a, *_: tf.sigmoid(a), "gelu": lambda a, *_: tf.gelu(a), "silu": lambda a, *_: tf.silu(a),
    "log": lambda a, b, *_: tf.log(b), "sqrt": lambda a, b, *_: tf.sqrt(b), "erf": lambda a, *_: tf.erf(a),
    "clamp": lambda a, *_: tf.clamp(a, -1, 1), "sum": lambda a, *_: tf.sum(a, 1), "mean": lambda a, *_: tf.mean(a),
    "amax": lambda a, *_: tf.amax(a, 0), "var": lambda a, *_: tf.var(a, 1), "argmax": lambda a, *_: tf.argmax(a, 1),
    "matmul": lambda a, b, *_: a @ b.T, "softmax": lambda a, *_: F.softmax(a, -1),
    "log_softmax": lambda a, *_: F.log_softmax(a, 0), "layer_norm": lambda a, *_: F.layer_norm(a, (6,)),
    "rms_norm": lambda a, *_: F.rms_norm(a, (6,)),
    "conv2d": lambda a, b, img, w, *_: F.conv2d(img, w, padding=1),
    "max_pool2d": lambda a, b, img, *_: F.max_pool2d(img, 2),
    "avg_pool2d": lambda a, b, img, *_: F.avg_pool2d(img, 2),
    "cross_entropy": lambda a, b, img, w, lab: F.cross_entropy(a, lab),
    "one_hot": lambda a, b, img, w, lab: F.one_hot(lab, 6, dtype=tf.float32),
    "embedding": lambda a, b, img, w, lab: F.embedding(lab, a.T.contiguous()),
    "attention": lambda a, b, *_: F.scaled_dot_product_attention(a, b, a, is_causal=True),
    "rope": lambda a, *_: F.rope(a),
    "cat": lambda a, b, *_: tf.cat([a, b], 1), "transpose_contiguous": lambda a, *_: a.T.contiguous(),
    "cast": lambda a, *_: a.to(tf.float16).float(), "slice_setitem": lambda a, *_: a[1:3, ::2] * 2,
}


def run(backend, name):
    dev = tf.device(backend)
    args = [tf.tensor(v, device=dev) for v in (X, Y, IMG, W, LABELS)]
    out = CASES[name](*args)
    assert out.device == dev, f"{name} on {backend} returned a tensor on {out.device}"
    return out.cpu().numpy()


@pytest.mark.skipif(not BACKENDS, reason="no backend besides cpu is loaded in this build")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_parity(backend, name):
    want = run("cpu", name)
    got = run(backend, name)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4)


def test_every_build_backend_is_tested():
    """vulkan and opengl must be loaded (and so tested above) wherever the build made them."""
    built = {p["name"] for p in tf.info()["plugins"] if p["outcome"] == "loaded"}
    for name in ("vulkan", "opengl", "blas"):
        if name in built:
            assert name in BACKENDS
