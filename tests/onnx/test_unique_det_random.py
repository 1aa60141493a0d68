"""Unique and Det (onnx/ops_host.cpp) against numpy (np.unique, np.linalg.det in float64), and the
random ops (onnx/ops_random.cpp): Bernoulli's and RandomUniformLike's draws reproducible for a
seed (on every backend alike), fresh without one and never folded at load, their range and mean,
the dtype attribute. On cpu and every other loaded backend."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value

F, I64, I32, D = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.DOUBLE
ET = {np.dtype(np.float32): F, np.dtype(np.int64): I64, np.dtype(np.int32): I32}
BACKENDS = ["cpu"] + other_backends()


def session(op, feeds, outputs, backend="cpu", initializers=(), shape_inference=True, **attrs):
    inputs = [value(n, ET[a.dtype], a.shape) for n, a in feeds.items()]
    names = list(feeds) + [i.name for i in initializers]
    node = helper.make_node(op, names, [o for o, _ in outputs], name="h", **attrs)
    model = make_model([node], inputs, [value(o, t, None) for o, t in outputs], initializers=initializers,
                       opset=16)
    return tfo.InferenceSession(model.SerializeToString(), backend=backend, shape_inference=shape_inference)


# ---- Unique ----

def unique_ref(x, axis, sorted_):
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted_:  # order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        y = np.take(y, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return y, first, inverse, counts


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique_matches_numpy(backend, dtype, axis, sorted_):
    g = rng(50)
    x = g.integers(-2, 3, size=(4, 3, 2)).astype(dtype)
    x[2] = x[0]  # repeated slices along axis 0
    x[:, 2] = x[:, 0]  # and along axis 1
    attrs = {"sorted": sorted_} | ({} if axis is None else {"axis": axis})
    sess = session("Unique", {"x": x}, [("y", ET[np.dtype(dtype)]), ("i", I64), ("inv", I64), ("c", I64)],
                   backend, **attrs)
    got = sess.run(None, {"x": x})
    want = unique_ref(x, axis, sorted_)
    for g_, w_ in zip(got, want):
        np.testing.assert_array_equal(g_, w_)
    assert got[0].dtype == dtype


# ---- Det ----

@pytest.mark.parametrize("backend", BACKENDS)
def test_det_matches_numpy(backend):
    g = rng(51)
    x = g.standard_normal((2, 3, 4, 4)).astype(np.float32)
    x[1, 2] = [[1, 2, 3, 4], [2, 4, 6, 8], [0, 1, 0, 1], [5, 5, 5, 5]]  # singular: exactly 0
    x[0, 1] = np.eye(4)[[1, 0, 2, 3]] * 2  # a row swap: -16
    sess = session("Det", {"x": x}, [("y", F)], backend)
    y = sess.run(None, {"x": x})[0]
    np.testing.assert_allclose(y, np.linalg.det(x.astype(np.float64)), rtol=1e-5, atol=1e-6)
    assert y[1, 2] == 0 and y[0, 1] == -16
    m = np.array([[2, 1], [7, 4]], np.float32)
    assert session("Det", {"m": m}, [("y", F)], backend).run(None, {"m": m})[0] == pytest.approx(1.0)


def test_det_non_square_is_a_model_error():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(tfo.ModelError, match=r"node 'h' \(Det.*\[\.\.\., M, M\]"):
        session("Det", {"x": x}, [("y", F)], shape_inference=False).run(None, {"x": x})


# ---- random ops ----

def bernoulli_session(p, backend="cpu", constant=False, **attrs):
    if constant:  # the probabilities an initializer: nothing may fold the draw at load
        return session("Bernoulli", {}, [("y", attrs.pop("out", F))], backend, initializers=[init("p", p)], **attrs)
    return session("Bernoulli", {"p": p}, [("y", attrs.pop("out", F))], backend, **attrs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bernoulli_seeded_is_reproducible_and_unseeded_is_fresh(backend):
    p = np.full(512, 0.5, np.float32)
    a = bernoulli_session(p, backend, seed=3.0).run(None, {"p": p})[0]
    b = bernoulli_session(p, backend, seed=3.0).run(None, {"p": p})[0]
    c = bernoulli_session(p, "cpu", seed=3.0).run(None, {"p": p})[0]
    d = bernoulli_session(p, backend, seed=4.0).run(None, {"p": p})[0]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)  # one seed, one draw on every backend
    assert not np.array_equal(a, d)
    sess = bernoulli_session(p, backend, constant=True)
    runs = [sess.run(None, {})[0] for _ in range(2)]
    assert not np.array_equal(runs[0], runs[1])  # a fresh draw per run: 2^-512 to fail by chance
    assert sess.load_report()["folded"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_bernoulli_values_range_and_mean(backend):
    p = np.concatenate([np.zeros(100), np.ones(100), np.full(20000, 0.3)]).astype(np.float32)
    y = bernoulli_session(p, backend, seed=1.0).run(None, {"p": p})[0]
    assert y.dtype == np.float32 and set(np.unique(y)) <= {0.0, 1.0}
    assert not y[:100].any() and y[100:200].all()
    # mean of 20000 draws of p = 0.3: standard deviation 0.0032; 5 of them allowed.
    assert abs(y[200:].mean() - 0.3) < 0.017
    y = bernoulli_session(p, backend, seed=1.0, dtype=TensorProto.INT32, out=I32).run(None, {"p": p})[0]
    assert y.dtype == np.int32 and set(np.unique(y)) <= {0, 1}


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_uniform_like_range_and_seed(backend):
    x = np.zeros((50, 40), np.float32)
    sess = session("RandomUniformLike", {"x": x}, [("y", F)], backend, low=-2.0, high=3.0, seed=7.0)
    y = sess.run(None, {"x": x})[0]
    assert y.shape == x.shape and y.min() >= -2 and y.max() < 3
    assert abs(y.mean() - 0.5) < 5 * 5 / np.sqrt(12 * x.size)
    np.testing.assert_array_equal(y, sess.run(None, {"x": x})[0])
    normal = session("RandomNormalLike", {"x": x}, [("y", F)], backend, mean=1.0, scale=2.0, seed=7.0)
    z = normal.run(None, {"x": x})[0]
    assert abs(z.mean() - 1.0) < 5 * 2 / np.sqrt(x.size) and abs(z.std() - 2.0) < 0.15
