"""Load-time fusions (onnx/fusions.cpp, docs/onnx.md "Fusions at load"): each pattern fires
(load_report()["fusions"], and the fused node in node_report()), its output matches a float64
reference computed from the ONNX ops' definitions on every backend, and near misses (an
intermediate with a second consumer, a weight a feed may override, a constant that is not the
pattern's, a mask that does not broadcast into the scores) are left alone or computed unfused,
with correct outputs."""
import os

import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value

F = TensorProto.FLOAT
BACKENDS = ["cpu"] + other_backends()
NEG_INF = np.float32(-np.inf)


def d(a):
    return np.asarray(a, np.float64)


def erf(x):
    from math import erf as e
    return np.vectorize(e)(x)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def session(model, backend, profile=True, **kw):
    return tfo.InferenceSession(model.SerializeToString(), backend=backend, profile=profile, **kw)


def fused(sess, name):
    return sess.load_report()["fusions"].get(name, 0)


def ops_run(sess):
    return [n["op_type"] for n in sess.node_report()]


# ---- Conv + BatchNormalization -------------------------------------------------------------

def conv_bn(r, conv_bias=True, second_consumer=False, overridable_scale=False):
    w = r.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = r.standard_normal(4).astype(np.float32)
    p = {"scale": r.uniform(0.5, 1.5, 4), "bias": r.standard_normal(4), "mean": r.standard_normal(4),
         "var": r.uniform(0.5, 2, 4)}
    p = {k: v.astype(np.float32) for k, v in p.items()}
    conv_in = ["x", "w", "b"] if conv_bias else ["x", "w"]
    nodes = [helper.make_node("Conv", conv_in, ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"], epsilon=1e-3),
             helper.make_node("Relu", ["bn"], ["y"])]
    outputs = [value("y", F, [2, 4, 6, 6])]
    if second_consumer:
        nodes.append(helper.make_node("Neg", ["c"], ["neg_c"]))
        outputs.append(value("neg_c", F, [2, 4, 6, 6]))
    inits = [init("w", w), init("b", b)] + [init(k, v) for k, v in p.items()]
    inputs = [value("x", F, [2, 3, 6, 6])]
    if overridable_scale:
        inputs.append(value("scale", F, [4]))
    model = make_model(nodes, inputs, outputs, inits)

    def reference(x, scale=p["scale"]):
        xp = np.pad(d(x), ((0, 0), (0, 0), (1, 1), (1, 1)))
        c = np.zeros((2, 4, 6, 6))
        for i in range(6):
            for j in range(6):
                c[:, :, i, j] = np.einsum("nchw,ochw->no", xp[:, :, i:i + 3, j:j + 3], d(w))
        if conv_bias:
            c += d(b)[None, :, None, None]
        ch = lambda a: d(a)[None, :, None, None]  # noqa: E731
        bn = (c - ch(p["mean"])) / np.sqrt(ch(p["var"]) + 1e-3) * ch(scale) + ch(p["bias"])
        return np.maximum(bn, 0), -c
    return model, reference


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("conv_bias", [True, False])
def test_conv_batchnorm_folds(backend, conv_bias):
    r = rng(10)
    model, reference = conv_bn(r, conv_bias)
    sess = session(model, backend)
    assert fused(sess, "conv_batchnorm") == 1
    x = r.standard_normal((2, 3, 6, 6)).astype(np.float32)
    [y] = sess.run(None, {"x": x})
    assert fused(sess, "conv_activation") == 1  # the folded Conv's Relu
    assert ops_run(sess) == ["FusedConvActivation"]
    np.testing.assert_allclose(y, reference(x)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_batchnorm_with_a_second_consumer_is_not_folded(backend):
    r = rng(11)
    model, reference = conv_bn(r, second_consumer=True)
    sess = session(model, backend)
    assert fused(sess, "conv_batchnorm") == 0
    x = r.standard_normal((2, 3, 6, 6)).astype(np.float32)
    y, neg_c = sess.run(None, {"x": x})
    assert "BatchNormalization" in ops_run(sess)
    want_y, want_neg = reference(x)
    np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(neg_c, want_neg, rtol=1e-4, atol=1e-5)


def test_conv_batchnorm_with_an_overridable_parameter_is_not_folded():
    """An initializer that is also a graph input may be fed: folding it would ignore the feed."""
    r = rng(12)
    model, reference = conv_bn(r, overridable_scale=True)
    sess = session(model, "cpu")
    assert fused(sess, "conv_batchnorm") == 0
    x = r.standard_normal((2, 3, 6, 6)).astype(np.float32)
    scale = np.array([2.0, -1.0, 0.25, 3.0], np.float32)
    [y] = sess.run(None, {"x": x, "scale": scale})
    np.testing.assert_allclose(y, reference(x, scale)[0], rtol=1e-4, atol=1e-5)


# ---- Conv + Relu / Clip ----------------------------------------------------------------------

def conv_reference(x, w, b, stride=1, pad=1, group=1):
    """float64 Conv from its definition: symmetric pads, square stride, groups."""
    xp = np.pad(d(x), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = xp.shape
    o, cg, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    og = o // group
    y = np.zeros((n, o, oh, ow))
    for g in range(group):
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride:i * stride + kh, j * stride:j * stride + kw]
                y[:, g * og:(g + 1) * og, i, j] = np.einsum("nchw,ochw->no", patch, d(w[g * og:(g + 1) * og]))
    if b is not None:
        y += d(b)[None, :, None, None]
    return y


def conv_act_model(r, act, bias=True, clip=(0.0, 6.0), clip_version=17, second_consumer=False, x_shape=(2, 8, 9, 9),
                   out_channels=16, stride=1, group=1, bounds_as_inputs=False):
    c = x_shape[1]
    w = r.standard_normal((out_channels, c // group, 3, 3)).astype(np.float32) * 0.3
    b = r.standard_normal(out_channels).astype(np.float32) if bias else None
    conv_in = ["x", "w", "b"] if bias else ["x", "w"]
    nodes = [helper.make_node("Conv", conv_in, ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride] * 2,
                              group=group)]
    inits = [init("w", w)] + ([init("b", b)] if bias else [])
    inputs = [value("x", F, list(x_shape))]
    oh = (x_shape[2] + 2 - 3) // stride + 1
    out_shape = [x_shape[0], out_channels, oh, oh]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif clip_version < 11:
        nodes.append(helper.make_node("Clip", ["c"], ["y"], min=clip[0], max=clip[1]))
    else:
        names = []
        for k, v in zip(("lo", "hi"), clip):
            if v is None:
                names.append("")
                continue
            names.append(k)
            if bounds_as_inputs:
                inputs.append(value(k, F, []))
            else:
                inits.append(init(k, np.array(v, np.float32)))
        while names and names[-1] == "":
            names.pop()
        nodes.append(helper.make_node("Clip", ["c"] + names, ["y"]))
    outputs = [value("y", F, out_shape)]
    if second_consumer:
        nodes.append(helper.make_node("Neg", ["c"], ["neg_c"]))
        outputs.append(value("neg_c", F, out_shape))
    opset = clip_version if act == "Clip" else 17
    model = make_model(nodes, inputs, outputs, inits, opset=opset)

    def reference(x):
        y = conv_reference(x, w, b, stride=stride, group=group)
        if act == "Relu":
            return np.maximum(y, 0), -y
        lo = -np.inf if clip[0] is None else clip[0]
        hi = np.inf if clip[1] is None else clip[1]
        return np.minimum(np.maximum(y, lo), hi), -y
    return model, reference


CONV_ACT_CASES = {
    "relu": dict(act="Relu"),
    "relu no bias": dict(act="Relu", bias=False),
    "relu stride 2 groups 2": dict(act="Relu", stride=2, group=2),
    "relu shifted path": dict(act="Relu", x_shape=(1, 32, 14, 14), out_channels=24),
    "relu6": dict(act="Clip"),
    "clip -0.5 0.5": dict(act="Clip", clip=(-0.5, 0.5)),
    "clip max only": dict(act="Clip", clip=(None, 0.25)),
    "clip v6 attributes": dict(act="Clip", clip=(0.0, 6.0), clip_version=6),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CONV_ACT_CASES))
def test_conv_activation_fuses(backend, case, monkeypatch):
    kw = CONV_ACT_CASES[case]
    r = rng(70)
    model, reference = conv_act_model(r, **kw)
    sess = session(model, backend)
    assert fused(sess, "conv_activation") == 1
    x_shape = model.graph.input[0].type.tensor_type.shape.dim
    x = r.standard_normal([dim.dim_value for dim in x_shape]).astype(np.float32)
    [y] = sess.run(None, {"x": x})
    assert ops_run(sess) == ["FusedConvActivation"]
    np.testing.assert_allclose(y, reference(x)[0], rtol=1e-4, atol=1e-5)
    # The same bits as the unfused Conv and activation on this backend.
    monkeypatch.setenv("TINYFIN_ONNX_FUSE", "0")
    plain = session(model, backend)
    assert plain.load_report()["fusions"] == {}
    [y_plain] = plain.run(None, {"x": x})
    np.testing.assert_array_equal(y, y_plain)


def residual_model(r, act="Relu", z_shape=(2, 16, 9, 9), swap=False):
    """Conv -> Add(., z) [-> act]: resnet's residual block tail."""
    w = r.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.3
    b = r.standard_normal(16).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["z", "c"] if swap else ["c", "z"], ["s"] if act else ["y"])]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["s"], ["y"]))
    elif act == "Clip":
        nodes.append(helper.make_node("Clip", ["s", "lo", "hi"], ["y"]))
    inits = [init("w", w), init("b", b), init("lo", np.array(0, np.float32)), init("hi", np.array(6, np.float32))]
    model = make_model(nodes, [value("x", F, [2, 8, 9, 9]), value("z", F, list(z_shape))],
                       [value("y", F, [2, 16, 9, 9])], inits)

    def reference(x, z):
        y = conv_reference(x, w, b) + d(z)
        if act == "Relu":
            y = np.maximum(y, 0)
        if act == "Clip":
            y = np.clip(y, 0, 6)
        return y
    return model, reference


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["relu", "relu swapped", "clip", "no activation", "broadcast z"])
def test_conv_residual_activation_fuses(backend, case, monkeypatch):
    r = rng(72)
    act = {"clip": "Clip", "no activation": None}.get(case, "Relu")
    z_shape = (1, 16, 1, 9) if case == "broadcast z" else (2, 16, 9, 9)
    model, reference = residual_model(r, act=act, z_shape=z_shape, swap=case == "relu swapped")
    sess = session(model, backend)
    assert fused(sess, "conv_activation") == 1
    x = r.standard_normal((2, 8, 9, 9)).astype(np.float32)
    z = r.standard_normal(z_shape).astype(np.float32)
    [y] = sess.run(None, {"x": x, "z": z})
    assert ops_run(sess) == ["FusedConvActivation"]
    np.testing.assert_allclose(y, reference(x, z), rtol=1e-4, atol=1e-5)
    monkeypatch.setenv("TINYFIN_ONNX_FUSE", "0")
    [y_plain] = session(model, backend).run(None, {"x": x, "z": z})
    np.testing.assert_array_equal(y, y_plain)


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_activation_near_misses_are_not_fused(backend):
    r = rng(71)
    x = r.standard_normal((2, 8, 9, 9)).astype(np.float32)
    # The Conv's output also read by another node: the Relu stays a node of its own.
    model, reference = conv_act_model(r, "Relu", second_consumer=True)
    sess = session(model, backend)
    assert fused(sess, "conv_activation") == 0
    y, neg_c = sess.run(None, {"x": x})
    assert ops_run(sess) == ["Conv", "Relu", "Neg"]
    want_y, want_neg = reference(x)
    np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(neg_c, want_neg, rtol=1e-4, atol=1e-5)
    # Clip bounds a feed may set are not constants: Clip stays.
    model, reference = conv_act_model(r, "Clip", clip=(-0.5, 0.5), bounds_as_inputs=True)
    sess = session(model, backend)
    assert fused(sess, "conv_activation") == 0
    [y] = sess.run(None, {"x": x, "lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32)})
    assert ops_run(sess) == ["Conv", "Clip"]
    np.testing.assert_allclose(y, reference(x)[0], rtol=1e-4, atol=1e-5)
    # The Add's sum also read elsewhere: Conv and Add fuse, the Relu stays.
    model, _ = residual_model(r)
    model.graph.output.append(value("s", F, [2, 16, 9, 9]))
    sess = session(model, backend)
    z = r.standard_normal((2, 16, 9, 9)).astype(np.float32)
    y, s_out = sess.run(None, {"x": x, "z": z})
    assert ops_run(sess) == ["FusedConvActivation", "Relu"]
    np.testing.assert_array_equal(y, np.maximum(s_out, 0))
    # The Conv's output is a graph output too.
    model, reference = conv_act_model(r, "Relu")
    model.graph.output.append(value("c", F, [2, 16, 9, 9]))
    sess = session(model, backend)
    assert fused(sess, "conv_activation") == 0
    y, c = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, reference(x)[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c, -reference(x)[1], rtol=1e-4, atol=1e-5)


# ---- GELU ------------------------------------------------------------------------------------

def gelu_model(form, sqrt2=np.sqrt(2), second_consumer=False):
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"])]
    if form == "torch":
        nodes += [helper.make_node("Div", ["h", "c"], ["g0"]), helper.make_node("Erf", ["g0"], ["g1"]),
                  helper.make_node("Add", ["g1", "one"], ["g2"]), helper.make_node("Mul", ["h", "g2"], ["g3"]),
                  helper.make_node("Mul", ["g3", "half"], ["y"])]
        c = np.float32(sqrt2)
    else:  # HF: x * 0.5 * (1 + erf(x * (1 / sqrt 2)))
        nodes += [helper.make_node("Mul", ["h", "c"], ["g0"]), helper.make_node("Erf", ["g0"], ["g1"]),
                  helper.make_node("Add", ["one", "g1"], ["g2"]), helper.make_node("Mul", ["h", "half"], ["g3"]),
                  helper.make_node("Mul", ["g3", "g2"], ["y"])]
        c = np.float32(1 / sqrt2)
    outputs = [value("y", F, ["n", 6])]
    if second_consumer:
        nodes.append(helper.make_node("Neg", ["g1"], ["neg_erf"]))
        outputs.append(value("neg_erf", F, ["n", 6]))
    w = rng(20).standard_normal((5, 6)).astype(np.float32)
    inits = [init("w", w), init("c", np.array(c)), init("one", np.array(1, np.float32)),
             init("half", np.array(0.5, np.float32))]
    model = make_model(nodes, [value("x", F, ["n", 5])], outputs, inits)

    def reference(x):
        h = d(x) @ d(w)
        e = erf(h / np.float64(sqrt2)) if form == "torch" else erf(h * d(c))
        return [h * 0.5 * (1 + e), -e]
    return model, reference


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["torch", "hf"])
def test_gelu_fuses(backend, form):
    model, reference = gelu_model(form)
    sess = session(model, backend)
    assert fused(sess, "gelu") == 1
    x = rng(21).standard_normal((7, 5)).astype(np.float32) * 2
    [y] = sess.run(None, {"x": x})
    assert ops_run(sess) == ["MatMul", "FusedGelu"]
    np.testing.assert_allclose(y, reference(x)[0], rtol=1e-5, atol=1e-5)


def tanh_gelu_model(form, k=0.044715, cube="Pow", cubed="h"):
    """x * 0.5 * (1 + tanh(sqrt(2/pi) (x + k x^3))), torch's or HF's operand order; the cube as
    Pow(x, 3), Mul(Mul(x, x), x) ("MulMul") or Mul(x, Mul(x, x)) ("MulMulSwapped"); `cubed`, the
    tensor whose cube is taken (a near miss when it is not h)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"])]
    if cubed != "h":
        nodes.append(helper.make_node("Neg", ["h"], [cubed]))
    if cube == "Pow":
        nodes.append(helper.make_node("Pow", [cubed, "three"], ["h3"]))
    else:
        nodes.append(helper.make_node("Mul", ["h", cubed], ["h2"]))
        nodes.append(helper.make_node("Mul", ["h2", "h"] if cube == "MulMul" else ["h", "h2"], ["h3"]))
    nodes += [helper.make_node("Mul", ["k", "h3"], ["kh3"]),
             helper.make_node("Add", ["h", "kh3"], ["inner"]),
             helper.make_node("Mul", ["inner", "c"], ["scaled"]),
             helper.make_node("Tanh", ["scaled"], ["t"]),
             helper.make_node("Add", ["t", "one"], ["t1"])]
    if form == "torch":
        nodes += [helper.make_node("Mul", ["h", "t1"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["half", "h"], ["m"]), helper.make_node("Mul", ["m", "t1"], ["y"])]
    w = rng(23).standard_normal((5, 6)).astype(np.float32)
    c = np.float32(np.sqrt(2 / np.pi))
    inits = [init("w", w), init("three", np.array(3, np.float32)), init("k", np.array(k, np.float32)),
             init("c", np.array(c)), init("one", np.array(1, np.float32)), init("half", np.array(0.5, np.float32))]
    model = make_model(nodes, [value("x", F, ["n", 5])], [value("y", F, ["n", 6])], inits)

    def reference(x):
        h = d(x) @ d(w)
        h3 = h ** 3 if cubed == "h" else (h * h * -h if cube != "Pow" else (-h) ** 3)
        return h * 0.5 * (1 + np.tanh(np.float64(c) * (h + np.float64(np.float32(k)) * h3)))
    return model, reference


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["torch", "hf"])
def test_tanh_gelu_fuses(backend, form):
    model, reference = tanh_gelu_model(form)
    sess = session(model, backend)
    assert fused(sess, "gelu") == 1
    x = rng(24).standard_normal((7, 5)).astype(np.float32) * 2
    [y] = sess.run(None, {"x": x})
    assert ops_run(sess) == ["MatMul", "FusedGelu"]
    np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)
    # Another cubic coefficient: not GELU, computed as written.
    model, reference = tanh_gelu_model(form, k=0.05)
    sess = session(model, backend)
    assert fused(sess, "gelu") == 0
    [y] = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cube", ["MulMul", "MulMulSwapped"])
def test_tanh_gelu_with_the_cube_as_products_fuses(backend, cube):
    """x * x * x written as two Muls (GPT-2's and several exporters' form)."""
    x = rng(25).standard_normal((7, 5)).astype(np.float32) * 2
    for form in ("torch", "hf"):
        model, reference = tanh_gelu_model(form, cube=cube)
        sess = session(model, backend)
        assert fused(sess, "gelu") == 1
        [y] = sess.run(None, {"x": x})
        assert ops_run(sess) == ["MatMul", "FusedGelu"]
        np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)
    # x * x * (-x) and (-x)^3: a product of other tensors, not x's cube, computed as written.
    for near in (dict(cube=cube, cubed="neg_h"), dict(cube="Pow", cubed="neg_h")):
        model, reference = tanh_gelu_model("torch", **near)
        sess = session(model, backend)
        assert fused(sess, "gelu") == 0, near
        [y] = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gelu_near_misses_are_not_fused(backend):
    x = rng(22).standard_normal((7, 5)).astype(np.float32) * 2
    # Another constant than sqrt(2): a different function.
    model, reference = gelu_model("torch", sqrt2=1.5)
    sess = session(model, backend)
    assert fused(sess, "gelu") == 0
    [y] = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, reference(x)[0], rtol=1e-5, atol=1e-5)
    # erf's output read by another node (a graph output).
    model, reference = gelu_model("torch", second_consumer=True)
    sess = session(model, backend)
    assert fused(sess, "gelu") == 0
    y, neg_erf = sess.run(None, {"x": x})
    want = reference(x)
    np.testing.assert_allclose(y, want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(neg_erf, want[1], rtol=1e-5, atol=1e-5)


# ---- Attention -------------------------------------------------------------------------------

def attention_model(mask_kind, scale_kind="Div", mask_shape=None, fill=NEG_INF, axis=-1):
    """q, k, v [B, H, T, D] inputs; kT by a Transpose; the scores scaled, masked, softmaxed."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s0"])]
    inits = []
    if scale_kind == "Div":
        nodes.append(helper.make_node("Div", ["s0", "scale"], ["s1"]))
        inits.append(init("scale", np.array(np.sqrt(8), np.float32)))
    else:
        nodes.append(helper.make_node("Mul", ["scale", "s0"], ["s1"]))
        inits.append(init("scale", np.array(1 / np.sqrt(8), np.float32)))
    inputs = [value(n, F, ["b", 2, "t", 8]) for n in ("q", "k", "v")]
    if mask_kind == "add":
        nodes.append(helper.make_node("Add", ["s1", "mask"], ["s2"]))
        inputs.append(value("mask", F, mask_shape))
    elif mask_kind == "where":
        nodes.append(helper.make_node("Where", ["mask", "fill", "s1"], ["s2"]))
        inputs.append(value("mask", TensorProto.BOOL, mask_shape))
        inits.append(init("fill", np.array(fill, np.float32)))
    nodes += [helper.make_node("Softmax", ["s2" if mask_kind else "s1"], ["p"], axis=axis), helper.make_node("MatMul", ["p", "v"], ["y"])]
    return make_model(nodes, inputs, [value("y", F, None)], inits)


def attention_reference(q, k, v, mask_kind, mask=None, fill=NEG_INF, scale_kind="Div"):
    s = d(q) @ d(k).transpose(0, 1, 3, 2)
    s = s / np.float64(np.float32(np.sqrt(8))) if scale_kind == "Div" else s * np.float64(np.float32(1 / np.sqrt(8)))
    if mask_kind == "add":
        s = s + d(mask)
    elif mask_kind == "where":
        s = np.where(mask, np.float64(fill), s)
    return softmax(s) @ d(v)


def qkv(r, b=2, t=5):
    return [r.standard_normal((b, 2, t, 8)).astype(np.float32) for _ in range(3)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale_kind", ["Div", "Mul"])
def test_attention_with_additive_mask_fuses(backend, scale_kind):
    """HF's padding mask [B, 1, 1, T] (large negative where padded)."""
    r = rng(30)
    model = attention_model("add", scale_kind, mask_shape=["b", 1, 1, "t"])
    sess = session(model, backend)
    assert fused(sess, "attention") == 1
    for t in (5, 17):  # under 16 query rows the fused node runs the separate ops
        q, k, v = qkv(r, t=t)
        mask = np.zeros((2, 1, 1, t), np.float32)
        mask[1, ..., 3:] = np.finfo(np.float32).min
        [y] = sess.run(None, {"q": q, "k": k, "v": v, "mask": mask})
        assert ops_run(sess) == ["Transpose", "FusedAttention"]
        np.testing.assert_allclose(y, attention_reference(q, k, v, "add", mask, scale_kind=scale_kind),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_with_causal_where_mask_fuses(backend):
    """torch's masked_fill(mask, -inf): Where(cond, -inf, scores) with a [T, T] causal cond."""
    r = rng(31)
    model = attention_model("where", mask_shape=["t", "t"])
    sess = session(model, backend)
    assert fused(sess, "attention") == 1
    for t in (6, 16):
        q, k, v = qkv(r, t=t)
        cond = np.triu(np.ones((t, t), bool), 1)
        [y] = sess.run(None, {"q": q, "k": k, "v": v, "mask": cond})
        np.testing.assert_allclose(y, attention_reference(q, k, v, "where", cond), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_without_mask_fuses(backend):
    r = rng(32)
    sess = session(attention_model(None), backend)
    assert fused(sess, "attention") == 1
    for t in (5, 20):
        q, k, v = qkv(r, t=t)
        [y] = sess.run(None, {"q": q, "k": k, "v": v})
        np.testing.assert_allclose(y, attention_reference(q, k, v, None), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_mask_that_grows_the_scores_runs_unfused(backend):
    """A mask [2, B, H, T, T] broadcasts the scores to rank 5: scaled_dot_product_attention cannot
    express that, so the fused node computes the original ops (output of rank 5)."""
    r = rng(33)
    model = attention_model("add", mask_shape=[2, "b", 2, "t", "t"])
    sess = session(model, backend)
    q, k, v = qkv(r, b=1, t=16)
    mask = r.standard_normal((2, 1, 2, 16, 16)).astype(np.float32)
    [y] = sess.run(None, {"q": q, "k": k, "v": v, "mask": mask})
    assert y.shape == (2, 1, 2, 16, 8)
    np.testing.assert_allclose(y, attention_reference(q, k, v, "add", mask), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_near_misses_are_not_fused(backend):
    r = rng(34)
    q, k, v = qkv(r, t=16)
    cond = np.triu(np.ones((16, 16), bool), 1)
    # A finite fill (-1e4) is not an additive -inf mask: a fully masked row would differ.
    sess = session(attention_model("where", mask_shape=["t", "t"], fill=-1e4), backend)
    assert fused(sess, "attention") == 0
    [y] = sess.run(None, {"q": q, "k": k, "v": v, "mask": cond})
    np.testing.assert_allclose(y, attention_reference(q, k, v, "where", cond, fill=-1e4), rtol=1e-4, atol=1e-5)
    # Softmax over another axis than the last.
    sess = session(attention_model("where", mask_shape=["t", "t"], axis=2), backend)
    assert fused(sess, "attention") == 0
    [y] = sess.run(None, {"q": q, "k": k, "v": v, "mask": cond})
    s = d(q) @ d(k).transpose(0, 1, 3, 2) / np.float64(np.float32(np.sqrt(8)))
    s = np.where(cond, -np.inf, s)
    e = np.exp(s - s.max(axis=2, keepdims=True))
    np.testing.assert_allclose(y, (e / e.sum(axis=2, keepdims=True)) @ d(v), rtol=1e-4, atol=1e-5)


def test_fusions_can_be_turned_off(monkeypatch):
    r = rng(40)
    model, reference = conv_bn(r)
    monkeypatch.setenv("TINYFIN_ONNX_FUSE", "0")
    sess = session(model, "cpu")
    assert sess.load_report()["fusions"] == {}
    x = r.standard_normal((2, 3, 6, 6)).astype(np.float32)
    [y] = sess.run(None, {"x": x})
    assert "BatchNormalization" in ops_run(sess)
    np.testing.assert_allclose(y, reference(x)[0], rtol=1e-4, atol=1e-5)


# ---- Shape values reused per signature of feed shapes ---------------------------------------

def test_shape_arithmetic_runs_once_per_signature():
    """Shape -> Gather -> Concat -> Reshape: the second run with the same feed shapes skips the
    shape arithmetic; other shapes compute theirs; outputs stay right throughout."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             helper.make_node("Concat", ["b", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Relu", ["flat"], ["y"])]
    inits = [init("i0", np.array([0], np.int64)), init("minus1", np.array([-1], np.int64))]
    model = make_model(nodes, [value("x", F, ["n", "c", "h"])], [value("y", F, ["n", None])], inits)
    sess = session(model, "cpu")
    r = rng(50)
    for shape, skipped in [((2, 3, 4), False), ((2, 3, 4), True), ((5, 1, 2), False), ((2, 3, 4), True)]:
        x = r.standard_normal(shape).astype(np.float32)
        [y] = sess.run(None, {"x": x})
        np.testing.assert_array_equal(y, np.maximum(x.reshape(shape[0], -1), 0))
        assert ops_run(sess) == (["Reshape", "Relu"] if skipped else ["Shape", "Gather", "Concat", "Reshape", "Relu"])


def test_shapes_that_depend_on_values_are_not_reused():
    """Range(0, n) has a shape that depends on n's value, not its shape: Shape of it is computed
    at every run, though n's shape (a scalar) never changes."""
    nodes = [helper.make_node("Range", ["zero", "n", "one"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["z"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0])),
             helper.make_node("Add", ["z", "x"], ["y"])]
    inits = [init("zero", np.array(0, np.int64)), init("one", np.array(1, np.int64))]
    model = make_model(nodes, [value("n", TensorProto.INT64, []), value("x", F, [1])], [value("y", F, None)], inits)
    sess = session(model, "cpu")
    for n in (3, 5, 3):
        [y] = sess.run(None, {"n": np.array(n, np.int64), "x": np.array([1.0], np.float32)})
        np.testing.assert_array_equal(y, np.full(n, 3.0, np.float32))


def test_shape_values_flow_through_fused_nodes():
    """A fused node's output shape follows from its inputs' shapes (here FusedMatMulBias, as in a
    transformer's second layer, whose head reshape reads the shape of the first layer's output):
    the shape arithmetic after it runs once per signature too."""
    w = rng(52).standard_normal((4, 6)).astype(np.float32)
    bias = rng(53).standard_normal(6).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
             helper.make_node("Add", ["xw", "bias"], ["h"]),
             helper.make_node("Shape", ["h"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             helper.make_node("Concat", ["b", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["h", "target"], ["y"])]
    inits = [init("w", w), init("bias", bias), init("i0", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64))]
    model = make_model(nodes, [value("x", F, ["n", "t", 4])], [value("y", F, ["n", None])], inits)
    sess = session(model, "cpu")
    assert fused(sess, "matmul_bias") == 1
    r = rng(54)
    for shape, skipped in [((2, 3, 4), False), ((2, 3, 4), True), ((1, 5, 4), False), ((1, 5, 4), True)]:
        x = r.standard_normal(shape).astype(np.float32)
        [y] = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, (d(x) @ d(w) + d(bias)).reshape(shape[0], -1), rtol=1e-5, atol=1e-5)
        assert ops_run(sess) == (["FusedMatMulBias", "Reshape"] if skipped else
                                 ["FusedMatMulBias", "Shape", "Gather", "Concat", "Reshape"])


# ---- RMSNorm ---------------------------------------------------------------------------------

def rms_model(form="DivOne", axes=(-1,), exponent=2.0, weighted=True):
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["ms"], axes=list(axes), keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["mse"]),
             helper.make_node("Sqrt", ["mse"], ["rms"])]
    if form == "DivOne":
        nodes += [helper.make_node("Div", ["one", "rms"], ["inv"]), helper.make_node("Mul", ["x", "inv"], ["n"])]
    elif form == "Div":
        nodes += [helper.make_node("Div", ["x", "rms"], ["n"])]
    else:
        nodes += [helper.make_node("Reciprocal", ["rms"], ["inv"]), helper.make_node("Mul", ["inv", "x"], ["n"])]
    w = rng(60).uniform(0.5, 1.5, 6).astype(np.float32)
    nodes.append(helper.make_node("Mul", ["w", "n"], ["y"]) if weighted else helper.make_node("Identity", ["n"], ["y"]))
    inits = [init("two", np.array(exponent, np.float32)), init("eps", np.array(1e-6, np.float32)),
             init("one", np.array(1, np.float32)), init("w", w)]
    model = make_model(nodes, [value("x", F, ["b", "t", 6])], [value("y", F, ["b", "t", 6])], inits)

    def reference(x):
        x = d(x)
        ms = np.mean(x ** exponent, axis=tuple(axes), keepdims=True)
        n = x / np.sqrt(ms + np.float64(np.float32(1e-6)))
        return n * d(w) if weighted else n
    return model, reference


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["DivOne", "Div", "Reciprocal"])
def test_rms_norm_fuses(backend, form):
    model, reference = rms_model(form)
    sess = session(model, backend)
    assert fused(sess, "rms_norm") == 1
    x = rng(61).standard_normal((2, 3, 6)).astype(np.float32)
    [y] = sess.run(None, {"x": x})
    assert ops_run(sess) == ["FusedRmsNorm"]
    np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rms_norm_near_misses_are_not_fused(backend):
    x = rng(62).standard_normal((2, 3, 6)).astype(np.float32)
    for kw in (dict(axes=(1,)), dict(exponent=3.0)):  # another axis; a cube (of positive x)
        model, reference = rms_model(**kw)
        sess = session(model, backend)
        assert fused(sess, "rms_norm") == 0, kw
        xp = np.abs(x) + np.float32(0.1)
        [y] = sess.run(None, {"x": xp})
        np.testing.assert_allclose(y, reference(xp), rtol=1e-4, atol=1e-5)
    # Without a weight (the Identity is not a Mul): fused, normalised only.
    model, reference = rms_model(weighted=False)
    sess = session(model, backend)
    assert fused(sess, "rms_norm") == 1
    [y] = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-6)


def test_shape_values_with_runs_on_several_threads():
    """Runs of one session from several threads, with two signatures interleaved, all right."""
    from concurrent.futures import ThreadPoolExecutor
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             helper.make_node("Concat", ["b", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [init("i0", np.array([0], np.int64)), init("minus1", np.array([-1], np.int64))]
    model = make_model(nodes, [value("x", F, ["n", "c", "h"])], [value("y", F, ["n", None])], inits)
    sess = tfo.InferenceSession(model.SerializeToString(), backend="cpu")
    shapes = [(2, 3, 4), (5, 1, 2)] * 20

    def one(shape):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        [y] = sess.run(None, {"x": x})
        return np.array_equal(y, x.reshape(shape[0], -1))
    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(one, shapes))


# ---- LayerNorm written out as elementwise ops ---------------------------------------------

def layer_norm_model(square="Pow", weight=True, bias=True, eps_after_sqrt=False, axes=(-1,), exponent=2.0,
                     second_consumer=False, fed_eps=False, variance_of="d", weight_shape=(6,)):
    """ReduceMean -> Sub -> Pow(., 2) | Mul(., .) -> ReduceMean -> Add eps -> Sqrt -> Div ->
    [Mul weight] -> [Add bias], as exporters write LayerNorm before opset 17; the keywords make
    the near misses (eps added after the Sqrt, other axes, another exponent, the variance read
    elsewhere, eps a feed may override, the square of x rather than of x - mean)."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["mu"], axes=list(axes), keepdims=1),
             helper.make_node("Sub", ["x", "mu"], ["dd"])]
    if square == "Pow":
        nodes.append(helper.make_node("Pow", [variance_of if variance_of != "d" else "dd", "two"], ["sq"]))
    else:
        base = variance_of if variance_of != "d" else "dd"
        nodes.append(helper.make_node("Mul", [base, base], ["sq"]))
    nodes.append(helper.make_node("ReduceMean", ["sq"], ["var"], axes=list(axes), keepdims=1))
    if eps_after_sqrt:
        nodes += [helper.make_node("Sqrt", ["var"], ["sd"]), helper.make_node("Add", ["sd", "eps"], ["den"])]
    else:
        nodes += [helper.make_node("Add", ["eps", "var"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["den"])]
    nodes.append(helper.make_node("Div", ["dd", "den"], ["n"]))
    last = "n"
    if weight:
        nodes.append(helper.make_node("Mul", ["n", "g"], ["nw"]))
        last = "nw"
    if bias:
        nodes.append(helper.make_node("Add", ["beta", last], ["nb"]))
        last = "nb"
    nodes.append(helper.make_node("Relu", [last], ["y"]))  # the pattern's output feeds another node
    r = rng(70)
    g = r.uniform(0.5, 1.5, weight_shape).astype(np.float32)
    beta = r.standard_normal(6).astype(np.float32)
    eps = np.float32(0.5)  # large enough that a lost or misplaced eps fails the comparison
    inits = [init("two", np.array(exponent, np.float32)), init("eps", np.array(eps)), init("g", g),
             init("beta", beta)]
    inputs = [value("x", F, ["b", "t", 6])]
    if fed_eps:
        inputs.append(value("eps", F, []))
    outputs = [value("y", F, ["b", "t", 6])]
    if second_consumer:
        nodes.append(helper.make_node("Neg", ["var"], ["neg_var"]))
        outputs.append(value("neg_var", F, None))
    model = make_model(nodes, inputs, outputs, inits)

    def reference(x, eps=eps):
        x = d(x)
        ax = tuple(axes)
        dd = x - x.mean(axis=ax, keepdims=True)
        base = dd if variance_of == "d" else x
        var = np.mean(base ** exponent if square == "Pow" else base * base, axis=ax, keepdims=True)
        den = np.sqrt(var) + np.float64(eps) if eps_after_sqrt else np.sqrt(var + np.float64(eps))
        n = dd / den
        if weight:
            n = n * d(g)
        if bias:
            n = n + d(beta)
        return [np.maximum(n, 0), -var]
    return model, reference


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("square", ["Pow", "Mul"])
@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, True), (False, False)])
def test_layer_norm_fuses(backend, square, affine):
    model, reference = layer_norm_model(square, *affine)
    sess = session(model, backend)
    assert fused(sess, "layer_norm") == 1
    x = (rng(71).standard_normal((2, 3, 6)) * 3 + 1).astype(np.float32)
    [y] = sess.run(None, {"x": x})
    assert ops_run(sess) == ["FusedLayerNorm", "Relu"]
    np.testing.assert_allclose(y, reference(x)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_norm_near_misses_are_not_fused(backend):
    x = (rng(72).standard_normal((2, 3, 6)) * 3 + 1).astype(np.float32)
    for kw in (dict(eps_after_sqrt=True), dict(axes=(1,)), dict(exponent=4.0), dict(variance_of="x"),
               dict(square="Mul", variance_of="x")):
        model, reference = layer_norm_model(**kw)
        sess = session(model, backend)
        assert fused(sess, "layer_norm") == 0, kw
        [y] = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, reference(x)[0], rtol=1e-4, atol=1e-5, err_msg=str(kw))
    # The variance also read by another node (a graph output).
    model, reference = layer_norm_model(second_consumer=True)
    sess = session(model, backend)
    assert fused(sess, "layer_norm") == 0
    y, neg_var = sess.run(None, {"x": x})
    want = reference(x)
    np.testing.assert_allclose(y, want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(neg_var, want[1], rtol=1e-5, atol=1e-5)


def test_layer_norm_with_a_fed_eps_is_not_fused():
    model, reference = layer_norm_model(fed_eps=True)
    sess = session(model, "cpu")
    assert fused(sess, "layer_norm") == 0
    x = (rng(73).standard_normal((2, 3, 6)) * 3 + 1).astype(np.float32)
    eps = np.float32(4.0)
    [y] = sess.run(None, {"x": x, "eps": np.array(eps)})
    np.testing.assert_allclose(y, reference(x, eps)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_norm_weight_that_is_not_a_row_runs_the_original_ops(backend):
    """A weight of one element broadcasts over the row: the pattern fuses, and the fused node,
    seeing a weight layer_norm cannot take, computes the original ops."""
    model, reference = layer_norm_model(weight_shape=(1,))
    sess = session(model, backend)
    assert fused(sess, "layer_norm") == 1
    x = (rng(74).standard_normal((2, 3, 6)) * 3 + 1).astype(np.float32)
    [y] = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, reference(x)[0], rtol=1e-5, atol=1e-5)


# ---- MatMul + Add(bias), and Gemm's C ------------------------------------------------------

def matmul_bias_model(r, x_shape=(2, 5, 16), n=24, bias_first=False, fed_weight=False, second_consumer=False,
                      bias_shape=None, fed_bias=False):
    k = x_shape[-1]
    w = r.standard_normal((k, n)).astype(np.float32)
    b = r.standard_normal(bias_shape or (n,)).astype(np.float32)
    y_shape = list(x_shape[:-1]) + [n]
    add_in = ["b", "p"] if bias_first else ["p", "b"]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"], name="mm"), helper.make_node("Add", add_in, ["y"])]
    inputs = [value("x", F, list(x_shape))]
    outputs = [value("y", F, y_shape)]
    inits = [init("w", w)]
    if fed_bias:
        inputs.append(value("b", F, [n]))
    else:
        inits.append(init("b", b))
    if fed_weight:
        inputs.append(value("w", F, [k, n]))
    if second_consumer:
        nodes.append(helper.make_node("Neg", ["p"], ["neg_p"]))
        outputs.append(value("neg_p", F, y_shape))
    model = make_model(nodes, inputs, outputs, inits)

    def reference(x, weight=w):
        return d(x) @ d(weight) + d(b)
    return model, reference


MATMUL_BIAS_CASES = {
    "rank 3": {},
    "bias first": {"bias_first": True},  # torch's export: Add(bias, MatMul)
    "rank 2": {"x_shape": (7, 33), "n": 70},
    "rank 4, one row": {"x_shape": (2, 3, 1, 20), "n": 9},
    "bert's projection": {"x_shape": (1, 128, 64), "n": 64},
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(MATMUL_BIAS_CASES))
def test_matmul_bias_fuses(backend, case, monkeypatch):
    kw = MATMUL_BIAS_CASES[case]
    r = rng(90)
    model, reference = matmul_bias_model(r, **kw)
    sess = session(model, backend)
    assert fused(sess, "matmul_bias") == 1
    x = r.standard_normal(kw.get("x_shape", (2, 5, 16))).astype(np.float32)
    [y] = sess.run(None, {"x": x})
    assert ops_run(sess) == ["FusedMatMulBias"]
    np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)
    # The same bits as the unfused MatMul and Add on this backend.
    monkeypatch.setenv("TINYFIN_ONNX_FUSE", "0")
    plain = session(model, backend)
    assert plain.load_report()["fusions"] == {}
    [y_plain] = plain.run(None, {"x": x})
    assert ops_run(plain) == ["MatMul", "Add"]
    np.testing.assert_array_equal(y, y_plain)


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmul_bias_near_misses_are_not_fused(backend):
    r = rng(91)
    x = r.standard_normal((2, 5, 16)).astype(np.float32)
    # A weight a feed may override, the product read twice, a bias that is not a vector of N,
    # a bias fed at run time (not a constant).
    for kw in ({"fed_weight": True}, {"second_consumer": True}, {"bias_shape": (5, 24)}, {"fed_bias": True}):
        model, reference = matmul_bias_model(r, **kw)
        sess = session(model, backend)
        assert fused(sess, "matmul_bias") == 0, kw
        feeds = {"x": x}
        if kw.get("fed_weight"):
            feeds["w"] = r.standard_normal((16, 24)).astype(np.float32)
            [y] = sess.run(None, feeds)
            np.testing.assert_allclose(y, reference(x, feeds["w"]), rtol=1e-5, atol=1e-5)
            continue
        if kw.get("fed_bias"):
            b = r.standard_normal(24).astype(np.float32)
            [y] = sess.run(None, {"x": x, "b": b})
            np.testing.assert_allclose(y, reference(x) - reference(np.zeros_like(x)) + d(b), rtol=1e-5, atol=1e-5)
            continue
        outs = sess.run(None, feeds)
        assert "MatMul" in ops_run(sess), kw
        np.testing.assert_allclose(outs[0], reference(x), rtol=1e-5, atol=1e-5)


def gemm_model(r, c_shape=(24,), alpha=1.0, beta=1.0, trans_b=1, m=7, k=33, n=24):
    w = r.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c = r.standard_normal(c_shape).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "w", "c"], ["y"], alpha=alpha, beta=beta, transB=trans_b)
    model = make_model([node], [value("x", F, [m, k])], [value("y", F, [m, n])], [init("w", w), init("c", c)])
    wk = d(w).T if trans_b else d(w)

    def reference(x):
        return alpha * (d(x) @ wk) + beta * np.broadcast_to(d(c), (m, n))
    # The same layer as MatMul + Add over W [K, N] (what the Gemm kernel's linear must equal).
    pair = make_model([helper.make_node("MatMul", ["x", "wk"], ["p"]), helper.make_node("Add", ["p", "c"], ["y"])],
                      [value("x", F, [m, k])], [value("y", F, [m, n])],
                      [init("wk", np.ascontiguousarray(wk.astype(np.float32))), init("c", c)])
    return model, reference, pair


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("c_shape", [(24,), (1, 24), (7, 24)])
@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm_bias_has_the_bits_of_matmul_then_add(backend, c_shape, trans_b, monkeypatch):
    r = rng(92)
    model, reference, pair = gemm_model(r, c_shape=c_shape, trans_b=trans_b)
    x = r.standard_normal((7, 33)).astype(np.float32)
    [y] = session(model, backend).run(None, {"x": x})
    np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)
    monkeypatch.setenv("TINYFIN_ONNX_FUSE", "0")
    [y_pair] = session(pair, backend).run(None, {"x": x})
    np.testing.assert_array_equal(y, y_pair)


@pytest.mark.parametrize("alpha,beta", [(0.5, 1.0), (1.0, 2.0), (1.0, 0.0)])
def test_gemm_with_scaled_terms_is_computed_as_defined(alpha, beta):
    r = rng(93)
    model, reference, _ = gemm_model(r, alpha=alpha, beta=beta)
    x = r.standard_normal((7, 33)).astype(np.float32)
    [y] = session(model, "cpu").run(None, {"x": x})
    np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)
