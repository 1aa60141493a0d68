"""MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv (onnx/ops_quantized.cpp) against
integer references written from ONNX's definitions (int64 products, zero points per tensor, per
row/column and per output channel, requantization rounded half to even and saturated), exactly;
reductions long enough that plain float32 sums would round; invalid zero points and parameter
lengths. On cpu and every other loaded backend."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin as tf
import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value

U8, I8, I32, F = TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32, TensorProto.FLOAT
NP = {U8: np.uint8, I8: np.int8, I32: np.int32, F: np.float32}
ET = {np.dtype(v): k for k, v in NP.items()}
BACKENDS = ["cpu"] + other_backends()


def run_node(op, feeds, out_type, backend="cpu", **attrs):
    """One node `op` named 'q' over feeds (name -> array, None for an absent optional input)."""
    names = [n if a is not None else "" for n, a in feeds.items()]
    inputs = [value(n, ET[a.dtype], a.shape) for n, a in feeds.items() if a is not None]
    node = helper.make_node(op, names, ["y"], name="q", **attrs)
    model = make_model([node], inputs, [value("y", out_type, None)], opset=13)
    sess = tfo.InferenceSession(model.SerializeToString(), backend=backend, shape_inference=False)
    out = sess.run(None, {n: a for n, a in feeds.items() if a is not None})[0]
    return out, sess


def requantize_ref(acc, multiplier, zp, dtype):
    """y = saturate(round_half_even(acc * multiplier) + zp), with the float32 arithmetic of the
    definition (multiplier = a_scale * b_scale / y_scale in float32)."""
    info = np.iinfo(dtype)
    y = np.rint(acc.astype(np.float32) * multiplier.astype(np.float32)).astype(np.int64) + zp.astype(np.int64)
    return np.clip(y, info.min, info.max).astype(dtype)


def ints(g, shape, dtype):
    info = np.iinfo(dtype)
    return g.integers(info.min, info.max + 1, size=shape).astype(dtype)


# ---- MatMulInteger ----

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ta, tb", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
def test_matmul_integer_per_tensor_and_per_row_column(backend, ta, tb):
    g = rng(1)
    a, b = ints(g, (2, 3, 5), ta), ints(g, (5, 4), tb)
    za, zb = ints(g, (), ta), ints(g, (4,), tb)  # per tensor for A, per column for B
    out, _ = run_node("MatMulInteger", {"a": a, "b": b, "za": za, "zb": zb}, I32, backend)
    ref = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ref)
    a2 = ints(g, (3, 5), ta)
    za_rows = ints(g, (3,), ta)  # per row of a 2-D A
    out, _ = run_node("MatMulInteger", {"a": a2, "b": b, "za": za_rows}, I32, backend)
    np.testing.assert_array_equal(out, (a2.astype(np.int64) - za_rows[:, None]) @ b.astype(np.int64))


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmul_integer_long_reduction_is_exact(backend):
    # 600 terms of up to 255 * 255: sums near 4e7 > 2^24, where float32 sums would round.
    g = rng(2)
    a = g.integers(250, 256, size=(3, 600)).astype(np.uint8)
    b = g.integers(250, 256, size=(600, 2)).astype(np.uint8)
    b[::7, 1] = 0
    out, _ = run_node("MatMulInteger", {"a": a, "b": b}, I32, backend)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    assert ref.max() > 2 ** 24
    np.testing.assert_array_equal(out, ref)
    # Signed: -128 - 127 = -255 is the largest shifted magnitude.
    a = np.full((2, 700), -128, np.int8)
    a[1, ::3] = 101
    bb = np.full((700, 3), 127, np.int8)
    bb[::5, 2] = -77
    za, zb = np.array(127, np.int8), np.array(-128, np.int8)
    out, _ = run_node("MatMulInteger", {"a": a, "b": bb, "za": za, "zb": zb}, I32, backend)
    np.testing.assert_array_equal(out, (a.astype(np.int64) - 127) @ (bb.astype(np.int64) + 128))


# ---- QLinearMatMul ----

@pytest.mark.parametrize("backend", BACKENDS)
def test_qlinear_matmul_ties_round_to_even_and_saturate_at_both_ends(backend):
    # Scales whose product over y_scale is 1/4: acc / 4 lands exactly on halves, so ties must go
    # to even; large |acc| pushes past both ends of uint8 and int8.
    a = np.array([[1, 2, 3, 4], [200, 255, 255, 255], [0, 0, 0, 0]], np.uint8)
    b = np.array([[1, 0, -128, 127], [1, 1, -128, 127], [0, 1, -128, 127], [0, 0, 127, 127]], np.int8)
    for y_type, zy in ((U8, np.uint8(3)), (I8, np.int8(-5))):
        feeds = {"a": a, "sa": np.float32(0.5), "za": np.uint8(0), "b": b, "sb": np.float32(0.25),
                 "zb": np.int8(0), "sy": np.float32(0.5), "zy": zy}
        out, _ = run_node("QLinearMatMul", feeds, y_type, backend)
        acc = a.astype(np.int64) @ b.astype(np.int64)
        ref = requantize_ref(acc, np.float32(0.5 * 0.25 / 0.5), np.array(zy), NP[y_type])
        np.testing.assert_array_equal(out, ref)
        # The reference really has ties (acc/4 = k + 0.5) and values clipped at both ends.
        assert np.any(acc % 4 == 2)
        info = np.iinfo(NP[y_type])
        assert np.any(ref == info.max) and np.any(ref == info.min)
    # Hand-computed: acc = 1*1 + 2*1 = 3 -> 0.75 -> 1; 3 + 2 = 5 -> 1.25 -> 1; 2 + 3 = 5; 6 -> 1.5 -> 2.
    feeds = {"a": np.array([[1, 2], [2, 2], [1, 1], [3, 3]], np.uint8), "sa": np.float32(1), "za": np.uint8(0),
             "b": np.array([[1], [1]], np.uint8), "sb": np.float32(1), "zb": np.uint8(0),
             "sy": np.float32(4), "zy": np.uint8(0)}
    out, _ = run_node("QLinearMatMul", feeds, U8, backend)
    assert out.ravel().tolist() == [1, 1, 0, 2]  # 0.75, 1.0, 0.5 (tie -> 0), 1.5 (tie -> 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_qlinear_matmul_per_row_and_per_column(backend):
    g = rng(3)
    a, b = ints(g, (3, 6), np.int8), ints(g, (6, 4), np.uint8)
    sa = g.uniform(0.01, 0.1, 3).astype(np.float32)
    za = ints(g, (3,), np.int8)
    sb = g.uniform(0.01, 0.1, 4).astype(np.float32)
    zb = ints(g, (4,), np.uint8)
    sy = np.array([0.05, 0.2, 0.11], np.float32)
    zy = np.array([100, 7, 250], np.uint8)
    out, _ = run_node("QLinearMatMul", {"a": a, "sa": sa, "za": za, "b": b, "sb": sb, "zb": zb, "sy": sy, "zy": zy},
                      U8, backend)
    acc = (a.astype(np.int64) - za[:, None]) @ (b.astype(np.int64) - zb)
    mult = (sa[:, None] * sb[None, :]).astype(np.float32) / sy[:, None]
    np.testing.assert_array_equal(out, requantize_ref(acc, mult, zy[:, None], np.uint8))


# ---- ConvInteger / QLinearConv ----

def conv_ref(x, w, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1):
    """Direct loops of the convolution definition over int64 values (x already shifted)."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), np.int64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    oh = (xp.shape[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (xp.shape[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    y = np.zeros((n, m, oh, ow), np.int64)
    per = m // group
    for b in range(n):
        for o in range(m):
            gi = o // per
            for i in range(oh):
                for j in range(ow):
                    s = 0
                    for ci in range(cg):
                        for p in range(kh):
                            for q in range(kw):
                                s += (int(xp[b, gi * cg + ci, i * strides[0] + p * dilations[0],
                                             j * strides[1] + q * dilations[1]]) * int(w[o, ci, p, q]))
                    y[b, o, i, j] = s
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_integer_per_channel_zero_points_pads_strides_groups(backend):
    g = rng(4)
    x = ints(g, (1, 4, 5, 6), np.uint8)
    w = ints(g, (6, 2, 3, 2), np.int8)
    zx = np.uint8(131)
    zw = ints(g, (6,), np.int8)
    attrs = dict(strides=[2, 1], pads=[1, 0, 2, 1], dilations=[1, 2], group=2)
    out, _ = run_node("ConvInteger", {"x": x, "w": w, "zx": zx, "zw": zw}, I32, backend, **attrs)
    ref = conv_ref(x.astype(np.int64) - 131, w.astype(np.int64) - zw[:, None, None, None],
                   (2, 1), (1, 0, 2, 1), (1, 2), 2)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_integer_long_reduction_is_exact(backend):
    # 80 channels x 3 x 3 = 720 terms of 255 * 255 each: past float32's exact range.
    x = np.full((1, 80, 3, 3), 255, np.uint8)
    x[0, ::3, 1, 1] = 254
    w = np.full((2, 80, 3, 3), 255, np.uint8)
    w[1, ::2] = 1
    out, _ = run_node("ConvInteger", {"x": x, "w": w}, I32, backend)
    ref = conv_ref(x.astype(np.int64), w.astype(np.int64))
    assert ref.max() > 2 ** 24
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_integer_1d_and_3d(backend):
    g = rng(6)
    x, w = ints(g, (1, 3, 7), np.uint8), ints(g, (2, 3, 3), np.int8)
    out, _ = run_node("ConvInteger", {"x": x, "w": w, "zx": np.uint8(9)}, I32, backend, pads=[1, 1])
    ref = conv_ref((x.astype(np.int64) - 9)[:, :, None, :], w.astype(np.int64)[:, :, None, :], pads=(0, 1, 0, 1))
    np.testing.assert_array_equal(out, ref[:, :, 0, :])
    x3, w3 = ints(g, (1, 2, 3, 4, 4), np.uint8), ints(g, (2, 2, 2, 2, 2), np.int8)
    out, _ = run_node("ConvInteger", {"x": x3, "w": w3}, I32, backend)
    ref = np.zeros((1, 2, 2, 3, 3), np.int64)
    for o, d, i, j in np.ndindex(2, 2, 3, 3):
        ref[0, o, d, i, j] = (x3[0, :, d:d + 2, i:i + 2, j:j + 2].astype(np.int64) * w3[o]).sum()
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("backend", BACKENDS)
def test_qlinear_conv_per_channel_with_bias(backend):
    g = rng(5)
    x = ints(g, (2, 3, 4, 4), np.uint8)
    w = ints(g, (4, 3, 2, 2), np.int8)
    sx, zx = np.float32(0.02), np.uint8(120)
    sw = np.array([0.01, 0.03, 0.002, 0.05], np.float32)
    zw = np.array([0, -3, 5, 0], np.int8)
    sy, zy = np.float32(0.04), np.int8(-10)
    bias = np.array([100, -2000, 50000, 0], np.int32)
    feeds = {"x": x, "sx": sx, "zx": zx, "w": w, "sw": sw, "zw": zw, "sy": sy, "zy": zy, "B": bias}
    out, _ = run_node("QLinearConv", feeds, I8, backend, pads=[1, 1, 0, 0])
    acc = conv_ref(x.astype(np.int64) - 120, w.astype(np.int64) - zw[:, None, None, None], pads=(1, 1, 0, 0))
    acc += bias[None, :, None, None]
    mult = (sx * sw).astype(np.float32) / sy
    ref = requantize_ref(acc, mult[None, :, None, None], np.array(zy), np.int8)
    np.testing.assert_array_equal(out, ref)
    assert np.any(ref == 127) and np.any(ref == -128)  # saturation at both ends is exercised


# ---- invalid inputs ----

def test_zero_point_type_mismatch_is_a_model_error_naming_the_node():
    a, b = np.ones((2, 3), np.uint8), np.ones((3, 2), np.uint8)
    with pytest.raises(tfo.ModelError, match=r"node 'q' \(MatMulInteger.*zero point.*int8.*uint8"):
        run_node("MatMulInteger", {"a": a, "b": b, "za": np.int8(1)}, I32)


@pytest.mark.parametrize("op, feeds, match", [
    ("MatMulInteger", {"a": np.ones((2, 3), np.uint8), "b": np.ones((3, 4), np.uint8), "za": None,
                       "zb": np.ones(5, np.uint8)}, "per-column parameter needs 4"),
    ("MatMulInteger", {"a": np.ones((2, 3), np.uint8), "b": np.ones((3, 4), np.uint8),
                       "za": np.ones(3, np.uint8)}, "per-row parameter needs 2"),
    ("ConvInteger", {"x": np.ones((1, 2, 3, 3), np.uint8), "w": np.ones((3, 2, 1, 1), np.uint8),
                     "zx": np.ones(2, np.uint8)}, "must be a scalar"),
    ("ConvInteger", {"x": np.ones((1, 2, 3, 3), np.uint8), "w": np.ones((3, 2, 1, 1), np.uint8), "zx": None,
                     "zw": np.ones(2, np.uint8)}, "one element per output channel"),
    ("MatMulInteger", {"a": np.ones((2, 3), np.int32), "b": np.ones((3, 4), np.uint8)}, "uint8 or int8"),
])
def test_wrong_parameter_lengths_are_model_errors(op, feeds, match):
    with pytest.raises(tfo.ModelError, match=match):
        run_node(op, feeds, I32)


def test_qlinear_conv_wrong_scale_length_and_bias_type():
    x, w = np.ones((1, 2, 3, 3), np.uint8), np.ones((3, 2, 1, 1), np.int8)
    base = {"x": x, "sx": np.float32(1), "zx": np.uint8(0), "w": w, "sw": np.ones(2, np.float32),
            "zw": np.zeros(2, np.int8), "sy": np.float32(1), "zy": np.uint8(0)}
    with pytest.raises(tfo.ModelError, match="one element per output channel"):
        run_node("QLinearConv", base, U8)
    base.update(sw=np.ones(3, np.float32), zw=np.zeros(3, np.int8), B=np.zeros(3, np.float32))
    with pytest.raises(tfo.ModelError, match="B must be int32"):
        run_node("QLinearConv", base, U8)

