"""Every op of ops.def from Python, forward against numpy references."""
import math

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.nn.functional as F
from conftest import rng, to_np

X = rng(0).uniform(-2, 2, (3, 5)).astype(np.float32)
P = rng(1).uniform(0.2, 3, (3, 5)).astype(np.float32)
Y = rng(2).uniform(-2, 2, (5,)).astype(np.float32)
erf = np.vectorize(math.erf)

UNARY = {
    "neg": (X, lambda a: -a), "exp": (X, np.exp), "relu": (X, lambda a: np.maximum(a, 0)),
    "abs": (X, np.abs), "log": (P, np.log), "sqrt": (P, np.sqrt), "rsqrt": (P, lambda a: 1 / np.sqrt(a)),
    "sin": (X, np.sin), "cos": (X, np.cos), "tanh": (X, np.tanh), "erf": (X, erf),
    "sigmoid": (X, lambda a: 1 / (1 + np.exp(-a))), "silu": (X, lambda a: a / (1 + np.exp(-a))),
    "square": (X, np.square), "gelu": (X, lambda a: a * 0.5 * (1 + erf(a / math.sqrt(2)))),
    "asin": (X / 2.5, np.arcsin), "acos": (X / 2.5, np.arccos), "atan": (X * 3, np.arctan),
    "asinh": (X * 3, np.arcsinh), "acosh": (P + 1, np.arccosh), "atanh": (X / 2.5, np.arctanh),
}


def test_inverse_trig_aliases_and_domains():
    """torch's arc* aliases; NaN outside the domains, +-inf at atanh(+-1), float64 references."""
    assert tf.arcsin is tf.asin and tf.arccosh is tf.acosh and tf.arctanh is tf.atanh
    x = np.array([-1, 1, 2, -0.0, 1e-20], np.float32)
    np.testing.assert_array_equal(tf.asin(tf.tensor(x)).numpy()[:2], np.float32([-np.pi / 2, np.pi / 2]))
    assert np.isnan(tf.asin(tf.tensor(x)).numpy()[2]) and np.isnan(tf.acosh(tf.tensor(np.float32([0.5]))).numpy()[0])
    np.testing.assert_array_equal(tf.atanh(tf.tensor(x[:2])).numpy(), [-np.inf, np.inf])
    assert np.signbit(tf.atan(tf.tensor(x)).numpy()[3])
    assert tf.asinh(tf.tensor(x)).numpy()[4] == np.float32(1e-20)
    half = tf.tensor(np.float32([0.25, -0.5])).to(tf.float16)
    np.testing.assert_allclose(tf.atan(half).float().numpy(), np.arctan([0.25, -0.5]), rtol=1e-3)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    x, ref = UNARY[name]
    np.testing.assert_allclose(getattr(tf, name)(tf.tensor(x)).numpy(), ref(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(getattr(tf.tensor(x), name)().numpy(), ref(x), rtol=1e-5, atol=1e-6)


def test_gelu_tanh():
    ref = 0.5 * X * (1 + np.tanh(math.sqrt(2 / math.pi) * (X + 0.044715 * X ** 3)))
    np.testing.assert_allclose(tf.gelu(tf.tensor(X), approximate="tanh").numpy(), ref, rtol=1e-5, atol=1e-6)


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
          "minimum": np.minimum, "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
          "gt": np.greater, "ge": np.greater_equal}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast(name):
    got = getattr(tf, name)(tf.tensor(X), tf.tensor(Y))
    np.testing.assert_allclose(got.numpy(), BINARY[name](X, Y), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_out(name):
    out = tf.empty(3, 5, dtype=tf.bool if name in ("eq", "ne", "lt", "le", "gt", "ge") else tf.float32)
    r = getattr(tf, name)(tf.tensor(X), tf.tensor(Y), out=out)
    assert r is out
    np.testing.assert_allclose(out.numpy(), BINARY[name](X, Y), rtol=1e-6)


def test_pow_and_relu_backward():
    np.testing.assert_allclose(tf.pow(tf.tensor(P), tf.tensor(X)).numpy(), P ** X, rtol=1e-5)
    np.testing.assert_allclose(tf.pow(tf.tensor(P), 2).numpy(), P ** 2, rtol=1e-6)
    np.testing.assert_allclose(tf.pow(2.0, tf.tensor(X)).numpy(), 2.0 ** X, rtol=1e-6)
    dy = np.ones_like(X)
    np.testing.assert_array_equal(tf.relu_backward(tf.tensor(dy), tf.tensor(X)).numpy(), (X > 0).astype(np.float32))


def test_where_clamp():
    c = X > 0
    np.testing.assert_array_equal(tf.where(tf.tensor(c), tf.tensor(X), 0.0).numpy(), np.where(c, X, 0))
    np.testing.assert_array_equal(tf.clamp(tf.tensor(X), min=-1, max=0.5).numpy(), np.clip(X, -1, 0.5))
    np.testing.assert_array_equal(tf.clamp(tf.tensor(X), min=0).numpy(), np.maximum(X, 0))
    np.testing.assert_array_equal(tf.tensor(X).clamp(max=0).numpy(), np.minimum(X, 0))


@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "var"])
def test_reductions(name, dim, keepdim):
    ref = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min,
           "var": lambda a, axis, keepdims: np.var(a, axis=axis, keepdims=keepdims, ddof=1)}[name]
    got = getattr(tf, name)(tf.tensor(X), dim=dim, keepdim=keepdim)
    np.testing.assert_allclose(got.numpy(), ref(X, axis=dim, keepdims=keepdim), rtol=1e-5, atol=1e-6)


def test_max_min_forms():
    t = tf.tensor(X)
    v, i = tf.max(t, 1)
    np.testing.assert_array_equal(v.numpy(), X.max(1))
    np.testing.assert_array_equal(i.numpy(), X.argmax(1))
    assert t.max().item() == pytest.approx(X.max())
    assert t.min(dim=0).indices.tolist() == X.argmin(0).tolist()
    np.testing.assert_array_equal(tf.max(t, tf.tensor(Y)).numpy(), np.maximum(X, Y))
    assert tf.argmax(t).item() == X.argmax()
    assert tf.argmin(t, dim=1, keepdim=True).shape == (3, 1)
    np.testing.assert_allclose(t.std(1).numpy(), X.std(1, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(tf.var(t, 1, correction=0).numpy(), X.var(1), rtol=1e-5)


@pytest.mark.parametrize("shapes", [((3, 4), (4, 2)), ((4,), (4, 3)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2)),
                                    ((4,), (4,))])
def test_matmul(shapes):
    a = rng(3).standard_normal(shapes[0]).astype(np.float32)
    b = rng(4).standard_normal(shapes[1]).astype(np.float32)
    np.testing.assert_allclose(tf.matmul(tf.tensor(a), tf.tensor(b)).numpy(), np.matmul(a, b), rtol=1e-4, atol=1e-5)


def conv2d_ref(x, w, b, stride, pad, dil=1, groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    y = np.zeros((n, o, oh, ow), np.float64)
    og = o // groups
    for g in range(groups):
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride:i * stride + dil * (kh - 1) + 1:dil,
                           j * stride:j * stride + dil * (kw - 1) + 1:dil]
                y[:, g * og:(g + 1) * og, i, j] = np.einsum("nchw,ochw->no", patch, w[g * og:(g + 1) * og])
    if b is not None:
        y += b[None, :, None, None]
    return y


@pytest.mark.parametrize("stride,pad,dil,groups", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 1, 2, 1), (1, 1, 1, 2)])
def test_conv2d(stride, pad, dil, groups):
    x = rng(5).standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng(6).standard_normal((6, 4 // groups, 3, 3)).astype(np.float32)
    b = rng(7).standard_normal(6).astype(np.float32)
    got = F.conv2d(tf.tensor(x), tf.tensor(w), tf.tensor(b), stride=stride, padding=pad, dilation=dil, groups=groups)
    np.testing.assert_allclose(got.numpy(), conv2d_ref(x, w, b, stride, pad, dil, groups), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("activation,lo,hi,with_residual,stride,pad,groups", [
    ("relu", 0, 0, False, 1, 1, 1), ("relu", 0, 0, True, 1, 1, 2), ("clip", -0.5, 0.75, True, 2, 1, 1),
    ("none", 0, 0, True, 1, 0, 1), ("clip", 0, 6, False, 1, 1, 1)])
def test_conv2d_activation(activation, lo, hi, with_residual, stride, pad, groups):
    x = rng(5).standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng(6).standard_normal((6, 4 // groups, 3, 3)).astype(np.float32)
    b = rng(7).standard_normal(6).astype(np.float32)
    y64 = conv2d_ref(x, w, b, stride, pad, 1, groups)
    z = rng(8).standard_normal(y64.shape).astype(np.float32) if with_residual else None
    ref = y64 + (z if with_residual else 0)
    ref = {"relu": np.maximum(ref, 0), "clip": np.clip(ref, lo, hi), "none": ref}[activation]
    got = tf.conv2d_activation(tf.tensor(x), tf.tensor(w), tf.tensor(b), stride=stride, padding=pad, groups=groups,
                               activation=activation, min=lo, max=hi,
                               residual=tf.tensor(z) if with_residual else None)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-4)
    # The same bits as the separate ops (docs: conv2d_act adds in the same order).
    sep = F.conv2d(tf.tensor(x), tf.tensor(w), tf.tensor(b), stride=stride, padding=pad, groups=groups)
    if with_residual:
        sep = sep + tf.tensor(z)
    sep = {"relu": lambda t: tf.relu(t), "clip": lambda t: tf.clamp(t, lo, hi), "none": lambda t: t}[activation](sep)
    np.testing.assert_array_equal(got.numpy(), sep.numpy())


def test_conv2d_activation_gradients_and_bad_activation():
    x = tf.tensor(rng(9).standard_normal((1, 3, 5, 5)).astype(np.float32), requires_grad=True)
    w = tf.tensor(rng(10).standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)
    tf.conv2d_activation(x, w, None, padding=1).sum().backward()
    gx, gw = x.grad.numpy(), w.grad.numpy()
    x.grad, w.grad = None, None
    tf.relu(F.conv2d(x, w, None, padding=1)).sum().backward()
    np.testing.assert_array_equal(gx, x.grad.numpy())
    np.testing.assert_array_equal(gw, w.grad.numpy())
    with pytest.raises(tf.ValueError, match="activation must be"):
        tf.conv2d_activation(x, w, None, activation="gelu")


def test_mark_constant_weights_stay_correct_and_follow_tinyfin_writes():
    # A marked weight: the cpu plugin keeps the matmul's packed B and the 3x3 convolution's
    # Winograd transform; results against float64 references, and after each in-place write
    # (copy_, add_, fill_) against the new values: a kept form that was not refreshed fails.
    a = rng(11).standard_normal((64, 96)).astype(np.float32)
    b = rng(12).standard_normal((96, 80)).astype(np.float32)
    x = rng(13).standard_normal((2, 16, 12, 12)).astype(np.float32)
    w = rng(14).standard_normal((16, 16, 3, 3)).astype(np.float32)
    tb, tw = tf.tensor(b), tf.tensor(w)
    tf.mark_constant(tb)
    tf.mark_constant(tw)
    ta, tx = tf.tensor(a), tf.tensor(x)
    for step in range(4):
        for _ in range(2):  # the second call reads the kept form
            np.testing.assert_allclose(tf.matmul(ta, tb).numpy(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
            got = F.conv2d(tx, tw, None, padding=1).numpy()
            np.testing.assert_allclose(got, conv2d_ref(x, w, None, 1, 1), rtol=1e-4, atol=1e-4)
        if step == 0:
            b = rng(15).standard_normal((96, 80)).astype(np.float32)
            w = rng(16).standard_normal((16, 16, 3, 3)).astype(np.float32)
            tb.copy_(tf.tensor(b))
            tw.copy_(tf.tensor(w))
        elif step == 1:
            tb.add_(1.0)
            tw.add_(0.5)
            b, w = b + np.float32(1), w + np.float32(0.5)
        elif step == 2:
            tb.fill_(0.25)
            tw.fill_(-0.125)
            b, w = np.full_like(b, 0.25), np.full_like(w, -0.125)
    with pytest.raises(TypeError):
        tf.mark_constant(b)  # a numpy array is not a tinyfin tensor


def pool_ref(x, k, s, p, fn, count_include_pad=True):
    n, c, h, w = x.shape
    fill = -np.inf if fn is np.max else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    ones = np.pad(np.ones((h, w)), ((p, p), (p, p)))
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    y = np.zeros((n, c, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * s:i * s + k, j * s:j * s + k]
            if fn is np.max:
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                div = k * k if count_include_pad else ones[i * s:i * s + k, j * s:j * s + k].sum()
                y[:, :, i, j] = win.sum(axis=(2, 3)) / div
    return y


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 1, 1), (3, 2, 1)])
def test_pools(k, s, p):
    x = rng(8).standard_normal((2, 3, 6, 7)).astype(np.float32)
    np.testing.assert_allclose(F.max_pool2d(tf.tensor(x), k, s, p).numpy(), pool_ref(x, k, s, p, np.max), rtol=1e-6)
    np.testing.assert_allclose(F.avg_pool2d(tf.tensor(x), k, s, p).numpy(), pool_ref(x, k, s, p, np.mean),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(F.avg_pool2d(tf.tensor(x), k, s, p, count_include_pad=False).numpy(),
                               pool_ref(x, k, s, p, np.mean, False), rtol=1e-5, atol=1e-6)


def softmax_ref(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dim):
    np.testing.assert_allclose(F.softmax(tf.tensor(X), dim).numpy(), softmax_ref(X, dim), rtol=1e-5)
    np.testing.assert_allclose(F.log_softmax(tf.tensor(X), dim=dim).numpy(), np.log(softmax_ref(X, dim)),
                               rtol=1e-5, atol=1e-6)


def test_norms():
    x = rng(9).standard_normal((2, 3, 4)).astype(np.float32)
    w = rng(10).standard_normal(4).astype(np.float32)
    b = rng(11).standard_normal(4).astype(np.float32)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(F.layer_norm(tf.tensor(x), (4,), tf.tensor(w), tf.tensor(b)).numpy(),
                               (x - mu) / np.sqrt(var + 1e-5) * w + b, rtol=1e-4, atol=1e-5)
    mu2, var2 = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
    np.testing.assert_allclose(F.layer_norm(tf.tensor(x), [3, 4]).numpy(), (x - mu2) / np.sqrt(var2 + 1e-5),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(F.rms_norm(tf.tensor(x), (4,), tf.tensor(w)).numpy(),
                               x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * w, rtol=1e-4, atol=1e-5)


def test_rope():
    x = rng(12).standard_normal((2, 5, 8)).astype(np.float32)
    t = np.arange(5)[:, None] + 2
    freqs = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    ang = t * freqs
    x1, x2 = x[..., :4], x[..., 4:]
    ref = np.concatenate([x1 * np.cos(ang) - x2 * np.sin(ang), x1 * np.sin(ang) + x2 * np.cos(ang)], -1)
    np.testing.assert_allclose(F.rope(tf.tensor(x), position_offset=2).numpy(), ref, rtol=1e-4, atol=1e-5)
    # The same rotation at an explicit positions tensor, and at positions out of order.
    positions = np.arange(5, dtype=np.int64) + 2
    np.testing.assert_allclose(F.rope(tf.tensor(x), tf.tensor(positions)).numpy(), ref, rtol=1e-4, atol=1e-5)
    shuffled = np.array([4, 0, 3, 1, 2])
    got = F.rope(tf.tensor(x), tf.tensor(positions[shuffled])).numpy()
    np.testing.assert_allclose(got, F.rope(tf.tensor(x[:, np.argsort(shuffled)]), position_offset=2).numpy()[:, shuffled],
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [False, "top_left", "bottom_right"])
def test_attention(causal):
    q = rng(13).standard_normal((2, 4, 8)).astype(np.float32)
    k = rng(14).standard_normal((2, 6, 8)).astype(np.float32)
    v = rng(15).standard_normal((2, 6, 3)).astype(np.float32)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(8)
    kwargs = {}
    if causal:
        # top_left (PyTorch's, the default) masks key j > i; bottom_right masks j > i + Tk - Tq
        s = np.where(np.tril(np.ones((4, 6), bool), k=0 if causal == "top_left" else 6 - 4), s, -np.inf)
        kwargs = {"is_causal": True}
        if causal == "bottom_right":
            kwargs["causal_alignment"] = "bottom_right"
    ref = softmax_ref(s, -1) @ v
    got = F.scaled_dot_product_attention(tf.tensor(q), tf.tensor(k), tf.tensor(v), **kwargs)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5)
    mask = rng(16).standard_normal((4, 6)).astype(np.float32)
    got = F.scaled_dot_product_attention(tf.tensor(q), tf.tensor(k), tf.tensor(v), attn_mask=tf.tensor(mask), scale=0.5)
    np.testing.assert_allclose(got.numpy(), softmax_ref(q @ k.transpose(0, 2, 1) * 0.5 + mask, -1) @ v,
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_without_mask_is_a_zero_mask(causal):
    # No mask: the op's mask operand is absent (no tensor at all); the result and every gradient
    # must be those of an explicit zero mask, bit for bit, and v's gradient numpy's P^T w.
    q = rng(31).standard_normal((2, 4, 8)).astype(np.float32)
    k = rng(32).standard_normal((2, 6, 8)).astype(np.float32)
    v = rng(33).standard_normal((2, 6, 3)).astype(np.float32)
    w = rng(34).standard_normal((2, 4, 3)).astype(np.float32)
    kwargs = {"is_causal": True} if causal else {}
    runs = []
    for mask in (None, np.zeros((4, 6), np.float32)):
        ts = [tf.tensor(a, requires_grad=True) for a in (q, k, v)]
        extra = dict(kwargs, attn_mask=tf.tensor(mask)) if mask is not None else kwargs
        out = F.scaled_dot_product_attention(*ts, **extra)
        (out * tf.tensor(w)).sum().backward()
        runs.append([out.detach().numpy()] + [t.grad.numpy() for t in ts])
    for got, want in zip(*runs):
        np.testing.assert_array_equal(got, want)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(8)
    if causal:
        s = np.where(np.tril(np.ones((4, 6), bool)), s, -np.inf)  # top_left, PyTorch's default
    p = softmax_ref(s, -1)
    np.testing.assert_allclose(runs[0][0], p @ v, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(runs[0][3], p.transpose(0, 2, 1) @ w, rtol=1e-4, atol=1e-5)


def test_embedding_one_hot_cross_entropy():
    w = rng(17).standard_normal((6, 3)).astype(np.float32)
    idx = np.array([[0, 5], [2, 2]])
    np.testing.assert_array_equal(F.embedding(tf.tensor(idx), tf.tensor(w)).numpy(), w[idx])
    oh = F.one_hot(tf.tensor([0, 2, 1]), 4)
    assert oh.dtype == tf.int64 and oh.tolist() == np.eye(4, dtype=int)[[0, 2, 1]].tolist()
    assert F.one_hot(tf.tensor([0, 3])).shape == (2, 4)
    logits = rng(18).standard_normal((4, 5)).astype(np.float32)
    labels = np.array([1, 0, 4, 2])
    lsm = np.log(softmax_ref(logits, 1))
    per = -lsm[np.arange(4), labels]
    tl = tf.tensor(labels)
    np.testing.assert_allclose(F.cross_entropy(tf.tensor(logits), tl).item(), per.mean(), rtol=1e-5)
    np.testing.assert_allclose(F.cross_entropy(tf.tensor(logits), tl, reduction="sum").item(), per.sum(), rtol=1e-5)
    np.testing.assert_allclose(F.cross_entropy(tf.tensor(logits), tl, reduction="none").numpy(), per, rtol=1e-5)
    tl2 = tf.tensor([1, -100, 4, 2])
    np.testing.assert_allclose(F.cross_entropy(tf.tensor(logits), tl2).item(), per[[0, 2, 3]].mean(), rtol=1e-5)


def test_layout_ops():
    a, b = tf.tensor(X), tf.tensor(P)
    np.testing.assert_array_equal(tf.cat([a, b], 0).numpy(), np.concatenate([X, P], 0))
    np.testing.assert_array_equal(tf.cat([a, b], dim=1).numpy(), np.concatenate([X, P], 1))
    np.testing.assert_array_equal(tf.stack([a, b], 1).numpy(), np.stack([X, P], 1))
    parts = tf.split(a, 2, dim=1)
    assert [p.shape for p in parts] == [(3, 2), (3, 2), (3, 1)]
    np.testing.assert_array_equal(parts[2].numpy(), X[:, 4:])
    assert [p.shape[0] for p in tf.split(a, [1, 2])] == [1, 2]
    assert len(tf.chunk(a, 3, dim=0)) == 3
    np.testing.assert_array_equal(tf.pad(a, (1, 2)).numpy(), np.pad(X, ((0, 0), (1, 2))))
    np.testing.assert_array_equal(F.pad(a, (1, 0, 0, 2), value=3.0).numpy(),
                                  np.pad(X, ((0, 2), (1, 0)), constant_values=3))
    np.testing.assert_array_equal(tf.narrow(a, 0, 1, 2).numpy(), X[1:3])


def test_functional_extras():
    x = tf.tensor(X)
    w = tf.tensor(rng(19).standard_normal((2, 5)).astype(np.float32))
    b = tf.tensor(np.array([1.0, -1.0], np.float32))
    np.testing.assert_allclose(F.linear(x, w, b).numpy(), X @ w.numpy().T + b.numpy(), rtol=1e-5, atol=1e-6)
    assert F.flatten(tf.zeros(2, 3, 4), 1).shape == (2, 12)
    d = F.dropout(tf.ones(1000), 0.5, seed=1).numpy()
    assert set(np.unique(d)) <= {0.0, 2.0} and 300 < (d == 0).sum() < 700
    assert F.dropout(x, 0.5, training=False) is x
    np.testing.assert_allclose(F.mse_loss(x, tf.zeros(3, 5)).item(), (X ** 2).mean(), rtol=1e-5)


@pytest.mark.parametrize("dtype,np_dtype", [(tf.int32, np.int32), (tf.int64, np.int64)])
def test_integer_tensor_compares_with_a_number_exactly(dtype, np_dtype):
    # numpy compares the integers with the number's exact value; so does tinyfin (x < 0.5 is x <= 0,
    # not x < 0 with 0.5 truncated to the tensor's dtype).
    X = np.array([-2, -1, 0, 1, 2, 2147483647], dtype=np_dtype)
    x = tf.tensor(X)
    for v in [0.5, -0.5, 1.0, 1.5, 3e9, -3e9, 2147483647.5]:
        for got, want in [(x < v, X < v), (x <= v, X <= v), (x > v, X > v), (x >= v, X >= v),
                          (x == v, X == v), (x != v, X != v), (v < x, v < X), (v >= x, v >= X)]:
            np.testing.assert_array_equal(got.numpy(), want, err_msg=f"{v}")
