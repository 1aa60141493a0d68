"""MaxPool's Indices output (onnx/ops_nn.cpp) against a loop over each window written from ONNX's
definition (flat index into X, row-major or with storage_order 1 column-major in the spatial
axes; padding never chosen), on cpu and every other loaded backend."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import make_model, other_backends, rng, value


def reference(x, kernel, strides, pads, dilations, storage_order, out_shape):
    n, c, h, w = x.shape
    y = np.zeros((n, c) + out_shape, np.float32)
    idx = np.zeros((n, c) + out_shape, np.int64)
    for b, ch, oy, ox in np.ndindex(n, c, *out_shape):
        best, at = -np.inf, -1
        for ky in range(kernel[0]):
            for kx in range(kernel[1]):
                iy = oy * strides[0] - pads[0] + ky * dilations[0]
                ix = ox * strides[1] - pads[1] + kx * dilations[1]
                if 0 <= iy < h and 0 <= ix < w and x[b, ch, iy, ix] > best:
                    best = x[b, ch, iy, ix]
                    at = (ix * h + iy) if storage_order else (iy * w + ix)
        y[b, ch, oy, ox] = best
        idx[b, ch, oy, ox] = (b * c + ch) * h * w + at
    return y, idx


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
@pytest.mark.parametrize("kernel, strides, pads, dilations, storage_order, ceil", [
    ((2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 0, 0),
    ((3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 0, 0),
    ((3, 2), (2, 1), (1, 0, 2, 1), (1, 1), 1, 0),
    ((2, 2), (1, 1), (0, 0, 0, 0), (2, 2), 0, 0),
    ((3, 3), (2, 2), (0, 0, 0, 0), (1, 1), 1, 1),
])
def test_maxpool_indices(backend, kernel, strides, pads, dilations, storage_order, ceil):
    x = rng(sum(kernel)).permutation(2 * 3 * 7 * 6).reshape(2, 3, 7, 6).astype(np.float32)  # distinct values
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=kernel, strides=strides, pads=pads,
                            dilations=dilations, storage_order=storage_order, ceil_mode=ceil)
    model = make_model([node], [value("x", TensorProto.FLOAT, x.shape)],
                       [value("y", TensorProto.FLOAT, None), value("i", TensorProto.INT64, None)])
    y, i = tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, {"x": x})
    ry, ri = reference(x, kernel, strides, pads[:2], dilations, storage_order, y.shape[2:])
    np.testing.assert_array_equal(y, ry)
    np.testing.assert_array_equal(i, ri)


def test_maxpool_indices_1d():
    x = rng(3).permutation(2 * 9).reshape(1, 2, 9).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3], strides=[2], pads=[1, 1])
    model = make_model([node], [value("x", TensorProto.FLOAT, x.shape)],
                       [value("y", TensorProto.FLOAT, None), value("i", TensorProto.INT64, None)])
    y, i = tfo.InferenceSession(model.SerializeToString(), backend="cpu").run(None, {"x": x})
    ry, ri = reference(x[:, :, None, :], (1, 3), (1, 2), (0, 1), (1, 1), 0, (1, y.shape[2]))
    np.testing.assert_array_equal(y, ry[:, :, 0])
    np.testing.assert_array_equal(i, ri[:, :, 0])
