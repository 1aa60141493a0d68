"""Autograd from Python: gradients of every differentiable op against central finite
differences (float64 numpy evaluation of the same tinyfin forward), and the autograd API."""
import numpy as np
import pytest

import tinyfin as tf
import tinyfin.nn.functional as F
from conftest import rng


def numeric_grad(fn, inputs, i, eps=1e-2):
    """d sum(fn(inputs) * w) / d inputs[i] by central differences; w fixed random weights."""
    base = [x.copy() for x in inputs]
    out0 = fn(*[tf.tensor(x) for x in base]).numpy()
    w = rng(99).uniform(0.5, 1.5, out0.shape).astype(np.float32)
    g = np.zeros_like(base[i], dtype=np.float64)
    it = np.nditer(base[i], flags=["multi_index"])
    for _ in it:
        idx = it.multi_index
        for sign in (1, -1):
            pert = [x.copy() for x in base]
            pert[i][idx] += sign * eps
            val = (fn(*[tf.tensor(x) for x in pert]).numpy().astype(np.float64) * w).sum()
            g[idx] += sign * val / (2 * eps)
    return g, w


def check(fn, *inputs, rtol=3e-2, atol=3e-3, which=None):
    inputs = [np.asarray(x, np.float32) for x in inputs]
    for i in (which if which is not None else range(len(inputs))):
        g_num, w = numeric_grad(fn, inputs, i)
        ts = [tf.tensor(x, requires_grad=(j == i)) for j, x in enumerate(inputs)]
        out = fn(*ts)
        out.backward(tf.tensor(w))
        np.testing.assert_allclose(ts[i].grad.numpy(), g_num, rtol=rtol, atol=atol)


X = rng(0).uniform(-1.5, 1.5, (2, 3)).astype(np.float32)
POS = rng(1).uniform(0.5, 2.0, (2, 3)).astype(np.float32)
Y = rng(2).uniform(-1.5, 1.5, (3,)).astype(np.float32)

UNARY = ["neg", "exp", "abs", "sin", "cos", "tanh", "erf", "sigmoid", "silu", "square", "gelu"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_grad(name):
    check(getattr(tf, name), X + 0.05)  # away from abs's kink at 0


@pytest.mark.parametrize("name", ["asin", "acos", "atan", "asinh", "atanh"])
def test_inverse_trig_grad(name):
    check(getattr(tf, name), X / 2)  # inside (-1, 1) for asin, acos, atanh


def test_acosh_grad():
    check(tf.acosh, POS + 1)


@pytest.mark.parametrize("name", ["log", "sqrt", "rsqrt"])
def test_positive_unary_grad(name):
    check(getattr(tf, name), POS)


def test_relu_clamp_grad():
    x = np.array([[-1.0, 0.5, 2.0], [0.3, -0.2, 1.1]], np.float32)
    check(tf.relu, x)
    check(lambda a: tf.clamp(a, -0.5, 1.0), x)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum"])
def test_binary_grad_broadcast(name):
    check(getattr(tf, name), X, Y + 2.0 if name == "div" else Y + 0.1)


def test_pow_grad():
    check(tf.pow, POS, X)


@pytest.mark.parametrize("name,kw", [("sum", {}), ("sum", {"dim": 1}), ("mean", {"dim": 0, "keepdim": True}),
                                     ("amax", {"dim": 1}), ("amin", {}), ("var", {"dim": 1})])
def test_reduce_grad(name, kw):
    check(lambda a: getattr(tf, name)(a, **kw), X)


def test_matmul_grad():
    check(tf.matmul, X, rng(3).standard_normal((3, 4)))


def test_nn_grads():
    x = rng(4).standard_normal((1, 2, 5, 5))
    w = rng(5).standard_normal((3, 2, 3, 3))
    b = rng(6).standard_normal(3)
    check(lambda a, c, d: F.conv2d(a, c, d, stride=2, padding=1), x, w, b)
    check(lambda a: F.max_pool2d(a, 2), x)
    check(lambda a: F.avg_pool2d(a, 3, 1, 1), x)
    check(lambda a: F.softmax(a, 1), X)
    check(lambda a: F.log_softmax(a, 0), X)
    check(lambda a, c, d: F.layer_norm(a, (3,), c, d), X, Y, Y)
    check(lambda a, c: F.rms_norm(a, (3,), c), X, Y)
    q = rng(7).standard_normal((3, 4))
    check(lambda a, c, d: F.scaled_dot_product_attention(a, c, d, is_causal=True), q, q[::-1].copy(), q * 0.5)
    check(lambda a: F.rope(a.reshape(1, 3, 4)), q)
    check(lambda a: tf.where(tf.tensor(X > 0), a, a * 2), X)
    check(lambda a: tf.cat([a, a * 2], 1), X)
    check(lambda a: tf.stack([a, a], 0), X)
    check(lambda a: tf.pad(a, (1, 1)), X)
    check(lambda a: a[:, 1:].transpose(0, 1).reshape(-1), X)


def test_embedding_and_cross_entropy_grad():
    w = rng(8).standard_normal((5, 3))
    idx = tf.tensor([0, 3, 3])
    check(lambda a: F.embedding(idx, a), w)
    labels = tf.tensor([2, 0])
    logits = rng(9).standard_normal((2, 4)).astype(np.float32)
    t = tf.tensor(logits, requires_grad=True)
    F.cross_entropy(t, labels).backward()
    e = np.exp(logits - logits.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    sm[[0, 1], [2, 0]] -= 1
    np.testing.assert_allclose(t.grad.numpy(), sm / 2, rtol=1e-5, atol=1e-6)


def test_autograd_api():
    a = tf.tensor([1.0, 2.0, 3.0])
    assert not a.requires_grad and a.grad is None and a.is_leaf
    a.requires_grad_()
    assert a.requires_grad
    y = (a * a).sum()
    assert not y.is_leaf
    y.backward()
    assert a.grad.tolist() == [2.0, 4.0, 6.0]
    (a * 3).sum().backward()  # accumulates
    assert a.grad.tolist() == [5.0, 7.0, 9.0]
    a.grad = None
    assert a.grad is None
    d = a.detach()
    assert not d.requires_grad and d.shares_storage(a)
    b = tf.ones(2, requires_grad=True)
    with tf.no_grad():
        c = b * 2
        assert not tf.is_grad_enabled()
    assert tf.is_grad_enabled() and not c.requires_grad

    @tf.no_grad()
    def f(x):
        return x * 2, tf.is_grad_enabled()

    r, enabled = f(b)
    assert not r.requires_grad and not enabled and tf.is_grad_enabled()
    v = tf.tensor([1.0, 2.0], requires_grad=True)
    (v * v).backward(gradient=tf.tensor([1.0, 0.5]))
    assert v.grad.tolist() == [2.0, 2.0]
    w = tf.tensor([1.0], requires_grad=True)
    z = (w * w).sum()
    z.backward(retain_graph=True)
    z.backward()
    assert w.grad.tolist() == [4.0]
