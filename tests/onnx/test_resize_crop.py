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


# Hostile roi and scales (the loader's fuzzer found a NaN roi reaching a float-to-index cast): a
# ModelError naming the problem, at load or at the first run, whatever reaches the node.
@pytest.mark.parametrize("roi, scales, sizes, match", [
    ([np.nan, 0, 0, 0, 1, 1, 1, 1], None, [1, 1, 3, 3], "roi must be finite"),
    ([0, 0, np.inf, 0, 1, 1, 1, 1], None, [1, 1, 3, 3], "roi must be finite"),
    (None, [1, 1, np.nan, 1], None, "positive and finite"),
    (None, [1, 1, np.inf, 1], None, "positive and finite"),
    (None, [1, 1, -2, 1], None, "positive and finite"),
    (None, [1, 1, 1e30, 1], None, "too large"),
])
def test_resize_refuses_hostile_roi_and_scales(roi, scales, sizes, match):
    data = rng(2).standard_normal((1, 1, 4, 4)).astype(np.float32)
    crop = roi is not None
    node = helper.make_node("Resize", ["x", "roi" if crop else "", "scales" if scales else "", "sizes" if sizes else ""],
                            ["y"], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize" if crop else "asymmetric")
    inits = []
    if crop:
        inits.append(init("roi", np.array(roi, np.float32)))
    if scales:
        inits.append(init("scales", np.array(scales, np.float32)))
    if sizes:
        inits.append(init("sizes", np.array(sizes, np.int64)))
    model = make_model([node], [value("x", TensorProto.FLOAT, data.shape)], [value("y", TensorProto.FLOAT, None)], inits)
    with pytest.raises(tfo.ModelError, match=match):
        tfo.InferenceSession(model.SerializeToString(), backend="cpu").run(None, {"x": data})


def test_resize_with_a_roi_at_float32_extremes_follows_the_formula():
    # Coordinates of order 1e39 (finite in double): the extrapolation value outside, the
    # formula's value inside, no index computed from an out-of-range float.
    data = rng(3).standard_normal((1, 1, 4, 4)).astype(np.float32)
    roi = np.array([0, 0, -3e38, 0, 1, 1, 3e38, 1], np.float32)
    sizes = [1, 1, 3, 3]
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=5.0)
    model = make_model([node], [value("x", TensorProto.FLOAT, data.shape)], [value("y", TensorProto.FLOAT, None)],
                       [init("roi", roi), init("sizes", np.array(sizes, np.int64))])
    [y] = tfo.InferenceSession(model.SerializeToString(), backend="cpu").run(None, {"x": data})
    want = reference(data.astype(np.float64), roi.astype(np.float64), sizes, "linear", 5.0)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    assert (y == 5.0).any()
