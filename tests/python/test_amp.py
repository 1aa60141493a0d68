"""tinyfin.autocast and tinyfin.amp.GradScaler: output dtypes inside a scope (strings and dtype
objects), nesting and enabled=False, parameters and gradients staying float32 and close to a
float32 run (numpy reference), the decorator form, and the scaler's skip/backoff/growth and
state round trip."""
import numpy as np
import pytest

import tinyfin as tf
import tinyfin.nn.functional as F
from conftest import rng


def test_autocast_lowers_the_listed_ops_and_keeps_sensitive_ones_in_float32():
    r = rng(1)
    x = tf.tensor(r.standard_normal((4, 6)).astype(np.float32))
    w = tf.tensor(r.standard_normal((5, 6)).astype(np.float32))
    b = tf.tensor(r.standard_normal(5).astype(np.float32))
    assert tf.amp.get_autocast_dtype() is None
    for spec, low in [("bf16", tf.bfloat16), ("bfloat16", tf.bfloat16), (tf.bfloat16, tf.bfloat16),
                      ("float16", tf.float16), (tf.float16, tf.float16)]:
        with tf.autocast(spec):
            assert tf.amp.get_autocast_dtype() == low
            assert tf.amp.is_autocast_enabled()
            y = F.linear(x, w, b)
            assert y.dtype == low
            assert tf.matmul(x, w.transpose(0, 1)).dtype == low
            assert tf.softmax(y, -1).dtype == tf.float32
            assert F.cross_entropy(y, tf.tensor([0, 1, 2, 3])).dtype == tf.float32
            assert tf.sum(y).dtype == tf.float32
            assert (y + b).dtype == tf.float32
            assert tf.relu(y).dtype == low
        assert tf.amp.get_autocast_dtype() is None
    assert tf.amp._C.amp.autocast_policy("layer_norm") == "f32"


def test_autocast_nests_and_turns_off():
    x = tf.ones(3, 3)
    with tf.autocast("bf16"):
        with tf.autocast(enabled=False):
            assert tf.matmul(x, x).dtype == tf.float32
        with tf.autocast(tf.float32):
            assert tf.matmul(x, x).dtype == tf.float32
            with tf.autocast("f16"):
                assert tf.matmul(x, x).dtype == tf.float16
        assert tf.matmul(x, x).dtype == tf.bfloat16
    with pytest.raises(tf.DTypeError):
        tf.autocast(tf.int32)

    @tf.autocast("bf16")
    def forward(a):
        return tf.matmul(a, a)
    assert forward(x).dtype == tf.bfloat16
    assert tf.matmul(x, x).dtype == tf.float32


def test_autocast_gradients_stay_float32_and_match_numpy():
    r = rng(2)
    xn = r.standard_normal((8, 12)).astype(np.float32)
    wn = (r.standard_normal((4, 12)) * 0.3).astype(np.float32)
    labels = np.array([0, 1, 2, 3, 3, 2, 1, 0])
    # numpy reference in float64: mean cross-entropy of x w^T and its gradient wrt w.
    logits = xn.astype(np.float64) @ wn.T.astype(np.float64)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    d = p.copy()
    d[np.arange(8), labels] -= 1
    want = d.T @ xn / 8
    for spec, tol in [("bf16", 3e-2), ("f16", 4e-3)]:
        w = tf.tensor(wn, requires_grad=True)
        with tf.autocast(spec):
            loss = F.cross_entropy(tf.matmul(tf.tensor(xn), w.transpose(0, 1)), tf.tensor(labels))
        loss.backward()
        assert w.dtype == tf.float32 and w.grad.dtype == tf.float32
        got = w.grad.numpy()
        assert np.linalg.norm(got - want) <= tol * np.linalg.norm(want), spec


def test_grad_scaler_skips_inf_backs_off_and_grows():
    p = tf.tensor([1.0, 2.0], requires_grad=True)
    opt = tf.optim.SGD([p], lr=0.5)
    scaler = tf.amp.GradScaler(init_scale=1024.0, growth_interval=2)
    assert scaler.get_scale() == 1024.0
    assert tf.GradScaler is tf.amp.GradScaler

    def step(g):
        opt.zero_grad()
        scaler.scale((p * tf.tensor(g)).sum()).backward()
        stepped = scaler.step(opt)
        scaler.update()
        return stepped

    assert not step([float("inf"), 1.0])
    assert p.detach().numpy().tolist() == [1.0, 2.0]
    assert scaler.get_scale() == 512.0
    assert not step([float("nan"), 1.0])
    assert scaler.get_scale() == 256.0
    assert step([1.0, 1.0]) and step([1.0, 1.0])
    assert scaler.get_scale() == 512.0
    np.testing.assert_array_equal(p.detach().numpy(), [0.0, 1.0])
    state = scaler.state_dict()
    assert set(state) == {"grad_scaler.scale", "grad_scaler.growth_tracker"}
    other = tf.amp.GradScaler()
    other.load_state_dict(state)
    assert other.get_scale() == 512.0 and other.growth_tracker == 0


def test_a_short_bf16_training_run_learns():
    r = rng(3)
    y = np.arange(128) % 4
    x = (np.eye(8)[y % 8] * 1.5 + r.uniform(-0.6, 0.6, (128, 8))).astype(np.float32)
    model = tf.nn.Sequential(tf.nn.Linear(8, 32), tf.nn.ReLU(), tf.nn.Linear(32, 4))
    opt = tf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xt, yt = tf.tensor(x), tf.tensor(y)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        with tf.autocast("bf16"):
            loss = F.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 1.0 and losses[-1] < 0.1
    assert all(p.dtype == tf.float32 for p in model.parameters())
