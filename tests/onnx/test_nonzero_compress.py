"""NonZero and Compress (onnx/ops_indexing.cpp) against numpy.nonzero / numpy.compress, on cpu and
every other loaded backend."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import make_model, other_backends, rng, value

ET = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
      np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.int32): TensorProto.INT32}


def session(node, feeds, backend):
    model = make_model([node], [value(k, ET[v.dtype], v.shape) for k, v in feeds.items()],
                       [value("y", ET[np.dtype(np.int64)] if node.op_type == "NonZero" else
                              ET[feeds["x"].dtype], None)])
    return tfo.InferenceSession(model.SerializeToString(), backend=backend)


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), (2, 0, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_nonzero(backend, shape, dtype):
    x = rng(len(shape)).integers(-1, 2, size=shape).astype(dtype)
    if dtype == np.float32 and x.size:
        x.flat[0] = np.nan  # NaN is nonzero
    [y] = session(helper.make_node("NonZero", ["x"], ["y"]), {"x": x}, backend).run(None, {"x": x})
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, np.array(np.nonzero(x), np.int64).reshape(len(shape), -1))


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress(backend, axis):
    g = rng(7)
    x = g.standard_normal((4, 5)).astype(np.float32)
    n = x.size if axis is None else x.shape[axis]
    for cond in (g.integers(0, 2, size=n).astype(bool), np.zeros(n, bool), np.array([False, True, True])):
        kw = {} if axis is None else {"axis": axis}
        sess = session(helper.make_node("Compress", ["x", "c"], ["y"], **kw), {"x": x, "c": cond}, backend)
        [y] = sess.run(None, {"x": x, "c": cond})
        np.testing.assert_array_equal(y, np.compress(cond, x, axis=axis))


def test_compress_past_the_axis_is_a_model_error():
    x = np.zeros((2, 3), np.float32)
    cond = np.array([0, 0, 0, 1], bool)
    sess = session(helper.make_node("Compress", ["x", "c"], ["y"], axis=1), {"x": x, "c": cond}, "cpu")
    with pytest.raises(tfo.ModelError, match="selects element 3"):
        sess.run(None, {"x": x, "c": cond})
