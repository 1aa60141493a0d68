"""In-place ops under autograd as PyTorch records them (issue 32): y += 1 and y[0] = 0 on
non-leaves keep their gradients, a saved tensor modified later is an error at backward naming
the op, in-place on a leaf that requires grad is an error outside no_grad, and the messages
speak Python. Expected gradients are worked by hand."""
import numpy as np
import pytest

import tinyfin as tf
import tinyfin.nn as nn
from conftest import other_backends, to_np

DEVICES = ["cpu"] + other_backends()


@pytest.mark.parametrize("device", DEVICES)
def test_add_in_place_on_a_non_leaf(device):
    w = tf.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    y = w * 2
    v0 = y._version
    y += 1
    assert y._version == v0 + 1 and not y.is_leaf
    (y * y).sum().backward()
    np.testing.assert_allclose(to_np(w.grad), 4 * (2 * np.array([1, 2, 3]) + 1))


@pytest.mark.parametrize("device", DEVICES)
def test_residual_out_plus_identity(device):
    # ResNet's block: out = conv(x); out += identity; out = relu(out)
    x = tf.tensor([[-3.0, 1.0], [2.0, -0.5]], device=device, requires_grad=True)
    w = tf.tensor([[2.0, 0.0], [0.0, 2.0]], device=device, requires_grad=True)
    out = x @ w
    out += x
    out = tf.relu(out)
    out.sum().backward()
    xs = np.array([[-3.0, 1.0], [2.0, -0.5]])
    mask = (xs * 3 > 0).astype(np.float32)  # out = 3x before the relu
    np.testing.assert_allclose(to_np(x.grad), mask * 3)
    np.testing.assert_allclose(to_np(w.grad), xs.T @ mask)


@pytest.mark.parametrize("device", DEVICES)
def test_setitem_on_a_non_leaf(device):
    w = tf.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    y = w * 2
    y[0] = 0
    np.testing.assert_array_equal(to_np(y), [0, 4, 6])
    (y * y).sum().backward()
    np.testing.assert_allclose(to_np(w.grad), [0, 16, 24])


def test_setitem_of_a_tensor_that_requires_grad():
    u = tf.tensor([2.0], requires_grad=True)
    z = tf.zeros(3)
    z[1:2] = u * 3
    assert z.requires_grad
    (z * tf.tensor([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_allclose(to_np(u.grad), [30])


def test_mul_and_div_in_place_on_a_non_leaf():
    w = tf.tensor([1.0, 2.0], requires_grad=True)
    y = w * 2
    y.mul_(w)  # y = 2 w^2
    y.sum().backward()
    np.testing.assert_allclose(to_np(w.grad), [4, 8])
    w.grad = None
    y = w + 1
    y /= w  # y = (w + 1) / w = 1 + 1/w
    y.sum().backward()
    np.testing.assert_allclose(to_np(w.grad), [-1, -0.25], rtol=1e-6)


def test_backward_refuses_a_saved_tensor_modified_later_naming_the_op():
    w = tf.tensor([0.0, 1.0], requires_grad=True)
    y = tf.exp(w)  # exp keeps its output for the gradient
    y += 1
    with pytest.raises(tf.AutogradError, match="exp saved for its gradient was modified in place"):
        y.sum().backward()
    z = tf.sigmoid(w)
    z[0] = 5
    with pytest.raises(tf.AutogradError, match="sigmoid saved"):
        z.sum().backward()


def test_in_place_on_a_leaf_that_requires_grad():
    w = tf.ones(2, requires_grad=True)
    for fn in (lambda: w.add_(1), lambda: w.__iadd__(1), lambda: w.mul_(2), lambda: w.copy_(tf.zeros(2)),
               lambda: w.fill_(0), lambda: w.zero_()):
        with pytest.raises(tf.AutogradError) as e:
            fn()
        message = str(e.value)
        assert "leaf" in message and "tinyfin.no_grad()" in message
        assert "NoGradGuard" not in message
    with pytest.raises(tf.AutogradError, match="view of a leaf"):
        w[0] = 3
    np.testing.assert_array_equal(to_np(w), [1, 1])
    with tf.no_grad():
        w.add_(1)
        w -= 0.5
        w[0] = 7
    np.testing.assert_array_equal(to_np(w), [7, 1.5])
    assert w.is_leaf and w.requires_grad


def test_messages_speak_python():
    w = tf.ones(2, requires_grad=True)
    loss = (w * w).sum()
    loss.backward()
    with pytest.raises(tf.AutogradError) as e:
        loss.backward()
    assert "retain_graph=True" in str(e.value)
    assert "/*" not in str(e.value)


def test_version_counter_is_shared_by_views():
    x = tf.zeros(4)
    v = x[1:3]
    before = x._version
    v += 1
    x[0] = 2
    assert x._version == before + 2 == v._version


def test_optimizer_update_then_forward_and_backward_again():
    # the usual loop: the parameters are written under no_grad between iterations
    model = nn.Linear(3, 1, seed=0)
    opt = tf.optim.SGD(model.parameters(), lr=0.1)
    x = tf.tensor([[1.0, 2.0, 3.0]])
    for _ in range(3):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    np.testing.assert_allclose(to_np(model.weight.grad), [[1, 2, 3]])


def test_clone_keeps_history():
    w = tf.tensor([1.0, 2.0], requires_grad=True)
    c = (w * 3).clone()
    c[0] = 0
    c.sum().backward()
    np.testing.assert_allclose(to_np(w.grad), [0, 3])


def test_copy_of_constants_into_a_non_leaf_gives_zero_gradient():
    w = tf.tensor([1.0, 2.0], requires_grad=True)
    y = w * 3
    y.copy_(tf.tensor([5.0, 6.0]))
    assert y.requires_grad
    (y * y).sum().backward()
    np.testing.assert_array_equal(to_np(w.grad), [0, 0])
