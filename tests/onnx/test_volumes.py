"""3-D Conv, ConvTranspose, MaxPool and AveragePool (onnx/ops_nn.cpp: sums and maxima over the
window's depth taps of 2-D ops) against float64 loops written from ONNX's definitions: strides,
dilations, asymmetric pads, groups, output_padding, count_include_pad; on cpu and every other
loaded backend."""
import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value

BACKENDS = ["cpu"] + other_backends()


def run(node, feeds, inits=(), outputs=("y",)):
    model = make_model([node], [value(k, TensorProto.FLOAT, v.shape) for k, v in feeds.items()],
                       [value(o, TensorProto.FLOAT, None) for o in outputs], [init(k, v) for k, v in inits])
    return lambda backend: tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, feeds)


def conv_reference(x, w, b, strides, dilations, pads, group):
    x = x.astype(np.float64)
    n, c, *size = x.shape
    o, cg, *kernel = w.shape
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + 3]) for i in range(3)])
    out = [(xp.shape[2 + i] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(3)]
    y = np.zeros((n, o, *out))
    og = o // group
    for k in itertools.product(*[range(v) for v in kernel]):
        sl = tuple(slice(k[i] * dilations[i], k[i] * dilations[i] + (out[i] - 1) * strides[i] + 1, strides[i])
                   for i in range(3))
        patch = xp[(slice(None), slice(None)) + sl]  # [n, c, od, oh, ow]
        for g in range(group):
            y[:, g * og:(g + 1) * og] += np.einsum("ncdhw,oc->nodhw", patch[:, g * cg:(g + 1) * cg],
                                                   w[g * og:(g + 1) * og, :, k[0], k[1], k[2]])
    return y + (b.reshape(1, -1, 1, 1, 1) if b is not None else 0)


def conv_transpose_reference(x, w, b, strides, dilations, pads, out_pad, group):
    n, c, *size = x.shape
    _, og, *kernel = w.shape
    full = [strides[i] * (size[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 for i in range(3)]
    y = np.zeros((n, og * group, *full))
    cg = c // group
    for i in itertools.product(*[range(v) for v in size]):
        for k in itertools.product(*[range(v) for v in kernel]):
            at = tuple(i[d] * strides[d] + k[d] * dilations[d] for d in range(3))
            for g in range(group):
                y[(slice(None), slice(g * og, (g + 1) * og)) + at] += np.einsum(
                    "nc,co->no", x[(slice(None), slice(g * cg, (g + 1) * cg)) + i].astype(np.float64),
                    w[(slice(g * cg, (g + 1) * cg), slice(None)) + k])
    y = y[(slice(None), slice(None)) + tuple(slice(pads[d], full[d] - pads[d + 3]) for d in range(3))]
    return y + (b.reshape(1, -1, 1, 1, 1) if b is not None else 0)


def pool_reference(x, kernel, strides, pads, dilations, is_max, include_pad):
    n, c, *size = x.shape
    out = [(size[i] + pads[i] + pads[i + 3] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1
           for i in range(3)]
    y = np.zeros((n, c, *out))
    for o in itertools.product(*[range(v) for v in out]):
        vals, count = [], 0
        for k in itertools.product(*[range(v) for v in kernel]):
            at = [o[d] * strides[d] - pads[d] + k[d] * dilations[d] for d in range(3)]
            count += 1
            if all(0 <= at[d] < size[d] for d in range(3)):
                vals.append(x[:, :, at[0], at[1], at[2]].astype(np.float64))
        v = np.stack(vals)
        y[(slice(None), slice(None)) + o] = v.max(0) if is_max else v.sum(0) / (count if include_pad else len(vals))
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("strides, dilations, pads, group, bias", [
    ((1, 1, 1), (1, 1, 1), (0, 0, 0, 0, 0, 0), 1, True),
    ((2, 1, 2), (1, 2, 1), (1, 0, 1, 0, 1, 2), 2, False),
    ((1, 2, 1), (2, 1, 1), (1, 1, 1, 1, 1, 1), 1, True),
])
def test_conv3d(backend, strides, dilations, pads, group, bias):
    r = rng(sum(strides) + group)
    x = r.standard_normal((2, 4, 6, 7, 5)).astype(np.float32)
    w = r.standard_normal((6, 4 // group, 2, 3, 2)).astype(np.float32)
    b = r.standard_normal(6).astype(np.float32) if bias else None
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["y"], strides=strides,
                            dilations=dilations, pads=pads, group=group)
    inits = [("w", w)] + ([("b", b)] if bias else [])
    [y] = run(node, {"x": x}, inits)(backend)
    ref = conv_reference(x, w, b, strides, dilations, pads, group)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("strides, dilations, pads, out_pad, group", [
    ((1, 1, 1), (1, 1, 1), (0, 0, 0, 0, 0, 0), (0, 0, 0), 1),
    ((2, 1, 3), (1, 2, 1), (1, 0, 1, 0, 1, 2), (1, 0, 2), 2),
])
def test_conv_transpose3d(backend, strides, dilations, pads, out_pad, group):
    r = rng(7 + group)
    x = r.standard_normal((2, 4, 3, 4, 3)).astype(np.float32)
    w = r.standard_normal((4, 3, 2, 3, 2)).astype(np.float32)
    b = r.standard_normal(3 * group).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=strides, dilations=dilations,
                            pads=pads, output_padding=out_pad, group=group)
    [y] = run(node, {"x": x}, [("w", w), ("b", b)])(backend)
    ref = conv_transpose_reference(x, w, b, strides, dilations, pads, out_pad, group)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op, kernel, strides, pads, dilations, include_pad", [
    ("MaxPool", (2, 2, 2), (2, 2, 2), (0, 0, 0, 0, 0, 0), (1, 1, 1), 0),
    ("MaxPool", (3, 2, 3), (2, 1, 2), (1, 0, 1, 1, 1, 0), (1, 1, 1), 0),
    ("MaxPool", (2, 2, 2), (1, 1, 1), (0, 0, 0, 0, 0, 0), (2, 1, 2), 0),
    ("AveragePool", (3, 3, 2), (2, 2, 1), (1, 1, 0, 1, 0, 1), (1, 1, 1), 0),
    ("AveragePool", (3, 3, 2), (2, 2, 1), (1, 1, 0, 1, 0, 1), (1, 1, 1), 1),
    ("AveragePool", (2, 2, 2), (2, 2, 2), (0, 0, 0, 0, 0, 0), (1, 1, 1), 0),
])
def test_pool3d(backend, op, kernel, strides, pads, dilations, include_pad):
    x = rng(len(op) + sum(kernel)).standard_normal((2, 3, 7, 6, 5)).astype(np.float32)
    attrs = dict(kernel_shape=kernel, strides=strides, pads=pads)
    if op == "MaxPool":
        attrs["dilations"] = dilations
    else:
        attrs["count_include_pad"] = include_pad
    [y] = run(helper.make_node(op, ["x"], ["y"], **attrs), {"x": x})(backend)
    ref = pool_reference(x, kernel, strides, pads, dilations, op == "MaxPool", include_pad)
    assert y.shape == ref.shape
    if op == "MaxPool":
        np.testing.assert_array_equal(y, ref.astype(np.float32))
    else:
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_pool3d_refuses_what_it_does_not_implement():
    x = np.zeros((1, 1, 4, 4, 4), np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2, 2])
    model = make_model([node], [value("x", TensorProto.FLOAT, x.shape)],
                       [value("y", TensorProto.FLOAT, None), value("i", TensorProto.INT64, None)])
    with pytest.raises(tfo.UnsupportedError, match="Indices output of a 3-D pool"):
        tfo.InferenceSession(model.SerializeToString(), backend="cpu").run(None, {"x": x})
