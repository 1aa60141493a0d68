"""Resize with coordinate_transformation_mode tf_crop_and_resize (onnx/ops_resize.cpp) against the
spec's formula evaluated per output element in float64: the source coordinate of output x on an
axis of input length L and output length O is start (L - 1) + x (end - start) (L - 1) / (O - 1)
(O = 1: the middle of the box); an element with a coordinate outside [0, L - 1] on any axis is
extrapolation_value; otherwise linear (bilinear) or nearest (round_prefer_floor) interpolation."""
import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value


def coordinate(x, start, end, length, out):
    if out == 1:
        return (end - start) * (length - 1) / 2 + start * (length - 1)
    return x * (end - start) * (length - 1) / (out - 1) + start * (length - 1)


def reference(data, roi, sizes, mode, extrapolation):
    r = data.ndim
    out = np.zeros(sizes, np.float64)
    for o in np.ndindex(*sizes):
        cs = [coordinate(o[a], roi[a], roi[a + r], data.shape[a], sizes[a]) for a in range(r)]
        if any(c < 0 or c > data.shape[a] - 1 for a, c in enumerate(cs)):
            out[o] = extrapolation
            continue
        if mode == "nearest":
            idx = tuple(int(np.floor(c) if c - np.floor(c) <= 0.5 else np.ceil(c)) for c in cs)
            out[o] = data[idx]
            continue
        total = 0.0
        for corner in itertools.product((0, 1), repeat=r):
            w, idx = 1.0, []
            for a, c in enumerate(cs):
                i0 = int(np.floor(c))
                f = c - i0
                i = min(i0 + corner[a], data.shape[a] - 1)
                w *= f if corner[a] else 1 - f
                idx.append(i)
            total += w * data[tuple(idx)]
        out[o] = total
    return out


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("roi, sizes, extrapolation", [
    ([0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8], [1, 1, 3, 3], 0.0),
    ([0, 0, 0.1, -0.3, 1, 1, 1.2, 0.9], [1, 2, 5, 4], 10.0),  # parts of the box outside the image
    ([0, 0, 0.25, 0.5, 1, 1, 0.75, 0.5], [1, 2, 1, 1], -1.0),
])
def test_tf_crop_and_resize(backend, mode, roi, sizes, extrapolation):
    data = rng(1).standard_normal((1, 2, 5, 6)).astype(np.float32)
    roi = np.array(roi, np.float32)
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode=mode,
                            coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=extrapolation)
    model = make_model([node], [value("x", TensorProto.FLOAT, data.shape)], [value("y", TensorProto.FLOAT, None)],
                       [init("roi", roi), init("sizes", np.array(sizes, np.int64))])
    [y] = tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, {"x": data})
    np.testing.assert_allclose(y, reference(data.astype(np.float64), roi.astype(np.float64), sizes, mode,
                                            extrapolation), rtol=1e-5, atol=1e-5)
