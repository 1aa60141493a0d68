"""ScatterElements, ScatterND and Scatter (onnx/ops_scatter.cpp) against loops written from ONNX's
definitions in float64 (integers exact), with duplicate indices under add and mul, negative
indices, every axis, int and float data; on cpu and every other loaded backend."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import make_model, other_backends, rng, value

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
NP = {F: np.float32, I64: np.int64, I32: np.int32}


def combine(out, t, u, reduction):
    """One update in the spec's order: replace, or add/multiply into what is there."""
    if reduction == "add":
        out[t] += u
    elif reduction == "mul":
        out[t] *= u
    else:
        out[t] = u


def scatter_elements_ref(data, idx, upd, axis, reduction):
    out = data.astype(np.float64) if data.dtype.kind == "f" else data.copy()
    for j in np.ndindex(*idx.shape):
        t = list(j)
        t[axis] = idx[j] + (data.shape[axis] if idx[j] < 0 else 0)
        t = tuple(t)
        combine(out, t, upd[j], reduction)
    return out


def scatter_nd_ref(data, idx, upd, reduction):
    out = data.astype(np.float64) if data.dtype.kind == "f" else data.copy()
    for j in np.ndindex(*idx.shape[:-1]):
        t = tuple(int(i) + (data.shape[k] if i < 0 else 0) for k, i in enumerate(idx[j]))
        combine(out, t, upd[j], reduction)
    return out


def run(op, data, idx, upd, backend="cpu", opset=16, **attrs):
    et = {np.dtype(np.float32): F, np.dtype(np.int64): I64, np.dtype(np.int32): I32}[data.dtype]
    it = I64 if idx.dtype == np.int64 else I32
    model = make_model([helper.make_node(op, ["d", "i", "u"], ["y"], name="s", **attrs)],
                       [value("d", et, data.shape), value("i", it, idx.shape), value("u", et, upd.shape)],
                       [value("y", et, data.shape)], opset=opset)
    sess = tfo.InferenceSession(model.SerializeToString(), backend=backend)
    return sess.run(None, {"d": data, "i": idx, "u": upd})[0]


def check(out, ref):
    if out.dtype.kind == "f":
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(out, ref)


def elements_case(seed, shape, axis, dtype, dup):
    g = rng(seed)
    data = (g.standard_normal(shape) * 4).astype(dtype)
    ishape = list(shape)
    ishape[axis] = shape[axis] + 2 if dup else max(1, shape[axis] - 1)
    for d in range(len(shape)):
        if d != axis:
            ishape[d] = g.integers(1, shape[d] + 1)
    idx = g.integers(-shape[axis], shape[axis], size=ishape).astype(np.int64)
    if not dup:  # distinct targets along the axis, so that reduction none is defined
        for j in np.ndindex(*[ishape[d] for d in range(len(shape)) if d != axis]):
            perm = g.permutation(shape[axis])[:ishape[axis]]
            sl = list(j)
            sl.insert(axis, slice(None))
            idx[tuple(sl)] = perm - shape[axis] * g.integers(0, 2, size=ishape[axis])
    upd = (g.standard_normal(ishape) * 2 + 0.5).astype(dtype)
    return data, idx, upd


@pytest.mark.parametrize("shape, axis", [((5,), 0), ((4, 6), 0), ((4, 6), 1), ((3, 4, 5), 1), ((3, 4, 5), -1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("reduction", ["none", "add", "mul"])
def test_scatter_elements(shape, axis, dtype, reduction):
    data, idx, upd = elements_case(len(shape) * 10 + axis, shape, axis % len(shape), dtype, reduction != "none")
    out = run("ScatterElements", data, idx, upd, axis=axis, reduction=reduction)
    check(out, scatter_elements_ref(data, idx, upd, axis % len(shape), reduction))


def test_scatter_elements_duplicates_under_add_apply_in_order():
    # Five updates of one element in float32: each sum rounded in turn, as the spec's loop does.
    data = np.array([1e8, 0, 0], np.float32)
    idx = np.array([0, 0, 0, 0, 0, 2], np.int64)
    upd = np.array([1, 1, 1, 1, 4, 7], np.float32)
    out = run("ScatterElements", data, idx, upd, reduction="add")
    want = np.float32(1e8)
    for u in upd[:5]:
        want = np.float32(want + u)
    assert out.tolist() == [want, 0, 7]


@pytest.mark.parametrize("dshape, ishape", [((8,), (4, 1)), ((4, 5, 6), (2, 2)), ((4, 5, 6), (3, 1)),
                                            ((4, 5, 6), (2, 3, 3)), ((3, 4), (1, 2, 1))])
@pytest.mark.parametrize("reduction", ["none", "add", "mul"])
def test_scatter_nd(dshape, ishape, reduction):
    g = rng(sum(dshape) + len(ishape))
    data = g.standard_normal(dshape).astype(np.float32)
    k = ishape[-1]
    n = int(np.prod(ishape[:-1]))
    if reduction == "none":  # distinct tuples
        flat = g.permutation(int(np.prod(dshape[:k])))[:n]
        tuples = np.stack(np.unravel_index(flat, dshape[:k]), -1)
    else:  # repeats allowed
        tuples = np.stack([g.integers(0, dshape[j], size=n) for j in range(k)], -1)
    idx = (tuples - np.array(dshape[:k]) * g.integers(0, 2, size=tuples.shape)).reshape(ishape).astype(np.int64)
    upd = g.standard_normal(ishape[:-1] + dshape[k:]).astype(np.float32)
    out = run("ScatterND", data, idx, upd, reduction=reduction)
    check(out, scatter_nd_ref(data, idx, upd, reduction))


def test_deprecated_scatter_and_int32_indices():
    data = np.zeros((3, 3), np.int32)
    idx = np.array([[1, 0, 2], [0, 2, 1]], np.int32)
    upd = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    out = run("Scatter", data, idx, upd, opset=10, axis=0)
    check(out, scatter_elements_ref(data, idx, upd, 0, "none"))


@pytest.mark.parametrize("op, idx, upd, match", [
    ("ScatterElements", np.array([[3]]), np.ones((1, 1), np.float32), "outside"),
    ("ScatterElements", np.array([[-4]]), np.ones((1, 1), np.float32), "outside"),
    ("ScatterElements", np.array([0]), np.ones(1, np.float32), "same rank"),
    ("ScatterElements", np.array([[0, 1]]), np.ones((1, 1), np.float32), "updates have shape"),
    ("ScatterND", np.array([[0, 0, 0]]), np.ones(1, np.float32), "last axis"),
    ("ScatterND", np.array([[5, 0]]), np.ones(1, np.float32), "outside"),
    ("ScatterND", np.array([[1]]), np.ones(2, np.float32), "updates have shape"),
])
def test_bad_indices_are_model_errors(op, idx, upd, match):
    data = np.zeros((3, 3), np.float32)
    with pytest.raises(tfo.ModelError, match=match):
        run(op, data, idx.astype(np.int64), upd)


def test_unknown_reduction_is_a_model_error():
    with pytest.raises(tfo.ModelError, match="reduction 'max'"):
        run("ScatterND", np.zeros(3, np.float32), np.array([[0]], np.int64), np.ones(1, np.float32),
            reduction="max")


@pytest.mark.parametrize("backend", other_backends())
def test_other_backends_match(backend):
    data, idx, upd = elements_case(3, (3, 4, 5), 1, np.float32, True)
    for reduction in ("add", "mul"):
        out = run("ScatterElements", data, idx, upd, backend=backend, axis=1, reduction=reduction)
        check(out, scatter_elements_ref(data, idx, upd, 1, reduction))
    d = rng(5).standard_normal((4, 5, 6)).astype(np.float32)
    i = np.array([[0, 1], [3, -1], [0, 1]], np.int64)
    u = rng(6).standard_normal((3, 6)).astype(np.float32)
    check(run("ScatterND", d, i, u, backend=backend, reduction="add"), scatter_nd_ref(d, i, u, "add"))
