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


# ---- Reused Tensor objects (python/src/objects.cpp) -------------------------------------------

def test_reused_objects_hold_their_own_values():
    # Results die and are reused at once: each new one must carry its own op's values.
    a = tf.tensor(X)
    for k in range(200):
        got = a + float(k)
        np.testing.assert_allclose(to_np(got), X + np.float32(k), rtol=1e-6)
    live = [a + float(k) for k in range(100)]  # more than the free list holds
    assert len({id(t) for t in live}) == len(live)
    for k, t in enumerate(live):
        np.testing.assert_allclose(to_np(t), X + np.float32(k), rtol=1e-6)
    del live
    again = [tf.add(a, a) for _ in range(100)]
    for t in again:
        assert isinstance(t, tf.Tensor) and type(t) is tf.Tensor
        assert t.shape == (3, 4) and not t.requires_grad and t.grad is None
        np.testing.assert_allclose(to_np(t), X + X, rtol=1e-6)


def test_reused_objects_and_weak_references():
    import weakref
    a = tf.tensor(X)
    fired = []
    t = a + a
    r = weakref.ref(t, lambda _: fired.append(True))
    assert r() is t
    del t
    assert r() is None and fired == [True]
    # Objects made after the weakly referenced one died are unaffected by its callback.
    u = a * a
    np.testing.assert_allclose(to_np(u), X * X, rtol=1e-6)
    assert weakref.ref(u)() is u


def test_reused_objects_release_borrowed_numpy_memory():
    import gc
    import sys
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    refs = sys.getrefcount(base)
    for _ in range(3):
        t = tf.from_numpy(base)
        assert sys.getrefcount(base) == refs + 1
        s = t + t  # a result object dies and is reused below
        del t, s
        gc.collect()
        assert sys.getrefcount(base) == refs
    v = tf.from_numpy(base) * 2.0
    np.testing.assert_allclose(to_np(v), base * 2, rtol=1e-6)


def test_reused_objects_keep_autograd_and_errors_apart():
    w = tf.tensor(X, requires_grad=True)
    for _ in range(3):
        loss = (w * w).sum()
        loss.backward()
    np.testing.assert_allclose(to_np(w.grad), 6 * X, rtol=1e-5)
    plain = tf.tensor(X) + tf.tensor(Y)
    assert not plain.requires_grad and plain.grad is None
    with pytest.raises(tf.ShapeError):
        tf.tensor(X) + tf.tensor(np.ones((5,), np.float32))
    ok = tf.tensor(X) + tf.tensor(Y)
    np.testing.assert_allclose(to_np(ok), X + Y, rtol=1e-6)
