"""BatchNormalization with training_mode = 1 (versions 14, 15; onnx/ops_nn.cpp) against ONNX's
definition in float64: batch mean and population variance over every axis but the channels, Y
normalised by them, running statistics moved by (1 - momentum); on cpu and every other loaded
backend."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import make_model, other_backends, rng, value

F = TensorProto.FLOAT


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
@pytest.mark.parametrize("shape, momentum, eps, opset", [((4, 3, 5, 2), 0.9, 1e-5, 15), ((6, 2), 0.7, 1e-2, 14),
                                                         ((2, 4, 7), 0.0, 1e-3, 15)])
def test_batchnorm_training_mode(backend, shape, momentum, eps, opset):
    g = rng(len(shape))
    c = shape[1]
    x = (g.standard_normal(shape) * 3 + 1).astype(np.float32)
    s, b = g.standard_normal(c).astype(np.float32), g.standard_normal(c).astype(np.float32)
    m, v = g.standard_normal(c).astype(np.float32), g.uniform(0.5, 1.5, c).astype(np.float32)
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1,
                            momentum=momentum, epsilon=eps)
    model = make_model([node], [value(n, F, a.shape) for n, a in zip("xsbmv", (x, s, b, m, v))],
                       [value("y", F, None), value("rm", F, None), value("rv", F, None)], opset=opset)
    y, rm, rv = tfo.InferenceSession(model.SerializeToString(), backend=backend).run(
        None, dict(zip("xsbmv", (x, s, b, m, v))))
    axes = tuple(i for i in range(len(shape)) if i != 1)
    xd = x.astype(np.float64)
    bm, bv = xd.mean(axis=axes), xd.var(axis=axes)
    bshape = [1] * len(shape)
    bshape[1] = c
    want = (xd - bm.reshape(bshape)) / np.sqrt(bv.reshape(bshape) + eps) * s.reshape(bshape) + b.reshape(bshape)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rm, m * momentum + bm * (1 - momentum), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rv, v * momentum + bv * (1 - momentum), rtol=1e-5, atol=1e-5)
