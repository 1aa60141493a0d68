"""The per-op fast path (python/src/fastpath.cpp): operators and the binary functions on two
tensors skip pybind11's dispatcher; everything else falls through to the bindings. Both routes
must give numpy's values, the same errors, autograd, and out=/in-place identity."""
import builtins

import numpy as np
import pytest

import tinyfin as tf
from conftest import rng, to_np

X = rng(3).standard_normal((3, 4)).astype(np.float32)
Y = rng(4).standard_normal((3, 4)).astype(np.float32) + 2.0

BINARY = {
    "+": (lambda a, b: a + b, np.add), "-": (lambda a, b: a - b, np.subtract),
    "*": (lambda a, b: a * b, np.multiply), "/": (lambda a, b: a / b, np.divide),
    "<": (lambda a, b: a < b, np.less), "<=": (lambda a, b: a <= b, np.less_equal),
    ">": (lambda a, b: a > b, np.greater), ">=": (lambda a, b: a >= b, np.greater_equal),
    "==": (lambda a, b: a == b, np.equal), "!=": (lambda a, b: a != b, np.not_equal),
}


@pytest.mark.parametrize("op", BINARY)
def test_operators_two_tensors_and_numbers(op):
    fn, ref = BINARY[op]
    got = fn(tf.tensor(X), tf.tensor(Y))
    np.testing.assert_allclose(to_np(got), ref(X, Y), rtol=1e-6)
    # broadcasting through the fast path
    np.testing.assert_allclose(to_np(fn(tf.tensor(X), tf.tensor(Y[0]))), ref(X, Y[0]), rtol=1e-6)
    # a number on either side: the pybind11 route
    np.testing.assert_allclose(to_np(fn(tf.tensor(X), 1.5)), ref(X, np.float32(1.5)), rtol=1e-6)
    np.testing.assert_allclose(to_np(fn(1.5, tf.tensor(X))), ref(np.float32(1.5), X), rtol=1e-6)


def test_matmul_and_negation():
    np.testing.assert_allclose(to_np(tf.tensor(X) @ tf.tensor(Y.T)), X @ Y.T, rtol=1e-5)
    np.testing.assert_array_equal(to_np(-tf.tensor(X)), -X)


@pytest.mark.parametrize("op,ref", [("__iadd__", np.add), ("__isub__", np.subtract),
                                    ("__imul__", np.multiply), ("__itruediv__", np.divide)])
def test_inplace_keeps_the_object_and_its_views(op, ref):
    a = tf.tensor(X)
    view = a[1:]
    same = a
    b = tf.tensor(Y)
    if op == "__iadd__":
        a += b
    elif op == "__isub__":
        a -= b
    elif op == "__imul__":
        a *= b
    else:
        a /= b
    assert a is same
    np.testing.assert_allclose(to_np(view), ref(X, Y)[1:], rtol=1e-6)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum", "eq", "lt", "ge"])
def test_functions_and_out(name):
    fn, ref = getattr(tf, name), getattr(np, {"sub": "subtract", "mul": "multiply", "div": "divide",
                                              "eq": "equal", "lt": "less", "ge": "greater_equal"}.get(name, name))
    want = ref(X, Y)
    np.testing.assert_allclose(to_np(fn(tf.tensor(X), tf.tensor(Y))), want, rtol=1e-6)
    out = tf.empty(3, 4, dtype=tf.bool if want.dtype == np.bool_ else tf.float32)
    assert fn(tf.tensor(X), tf.tensor(Y), out=out) is out
    np.testing.assert_allclose(to_np(out), want, rtol=1e-6)
    # keywords and numbers take the pybind11 route
    np.testing.assert_allclose(to_np(fn(input=tf.tensor(X), other=tf.tensor(Y))), want, rtol=1e-6)
    np.testing.assert_allclose(to_np(fn(tf.tensor(X), 2.0)), ref(X, np.float32(2.0)), rtol=1e-6)
    np.testing.assert_allclose(to_np(fn(tf.tensor(X), tf.tensor(Y), out=None)), want, rtol=1e-6)


def test_errors_are_tinyfin_classes_on_both_routes():
    with pytest.raises(tf.ShapeError, match="broadcast"):
        tf.ones(2, 3) + tf.ones(4, 3)
    with pytest.raises(tf.ShapeError):
        tf.add(tf.ones(2, 3), tf.ones(4, 3))
    with pytest.raises(tf.DTypeError):
        tf.ones(2) < tf.ones(2, dtype=tf.int32)
    with pytest.raises(tf.ShapeError):
        tf.add(tf.ones(2), tf.ones(2), out=tf.empty(3))
    with pytest.raises(builtins.TypeError):
        tf.add(tf.ones(2), tf.ones(2), alpha=2)
    with pytest.raises(builtins.TypeError):
        tf.add(tf.ones(2))
    with pytest.raises(builtins.TypeError):
        tf.ones(2) + "x"
    with pytest.raises(tf.AutogradError):
        a = tf.ones(2, requires_grad=True)
        a += tf.ones(2)


def test_autograd_through_the_fast_path():
    a = tf.tensor(X, requires_grad=True)
    b = tf.tensor(Y, requires_grad=True)
    ((a * b + a) / b - b).sum().backward()
    np.testing.assert_allclose(to_np(a.grad), 1 + 1 / Y, rtol=1e-5)
    np.testing.assert_allclose(to_np(b.grad), -X / Y ** 2 - 1, rtol=1e-4)
    assert (a + b).requires_grad and not (a < b).requires_grad


def test_fast_functions_keep_name_and_doc():
    assert tf.add.__name__ == "add"
    assert "out=" in tf.add.__doc__
