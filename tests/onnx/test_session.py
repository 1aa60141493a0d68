"""tinyfin.onnx.InferenceSession against numpy float64 references computed from the ops'
definitions: an MLP, a CNN block, a transformer block with dynamic shapes, the API's names and
reports, external data, dtypes."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value

F = TensorProto.FLOAT


def erf(x):
    from math import erf as e
    return np.vectorize(e)(x)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def mlp_model(r):
    w1, b1 = r.standard_normal((8, 16)), r.standard_normal(16)
    w2, b2 = r.standard_normal((10, 16)), r.standard_normal(10)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
        helper.make_node("Relu", ["hb"], ["a"], name="relu"),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["logits"], name="fc2", transB=1, alpha=0.5),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    inits = [init("w1", w1.astype(np.float32)), init("b1", b1.astype(np.float32)),
             init("w2", w2.astype(np.float32)), init("b2", b2.astype(np.float32))]
    model = make_model(nodes, [value("x", F, ["batch", 8])], [value("probs", F, ["batch", 10])], inits)
    f32 = lambda a: a.astype(np.float32).astype(np.float64)  # noqa: E731

    def reference(x):
        h = np.maximum(x @ f32(w1) + f32(b1), 0)
        return softmax(0.5 * h @ f32(w2).T + f32(b2))
    return model, reference


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
def test_mlp_matches_float64_reference(backend):
    r = rng(1)
    model, reference = mlp_model(r)
    sess = tfo.InferenceSession(model.SerializeToString(), backend=backend)
    for batch in (1, 5):  # the dynamic batch dimension
        x = r.standard_normal((batch, 8)).astype(np.float32)
        [probs] = sess.run(None, {"x": x})
        assert probs.dtype == np.float32 and probs.shape == (batch, 10)
        np.testing.assert_allclose(probs, reference(x.astype(np.float64)), rtol=1e-4, atol=1e-6)


def test_inputs_outputs_and_reports():
    model, _ = mlp_model(rng(2))
    sess = tfo.InferenceSession(model.SerializeToString(), backend="cpu", profile=True)
    [i] = sess.get_inputs()
    [o] = sess.get_outputs()
    assert (i.name, i.type, i.shape) == ("x", "tensor(float)", ["batch", 8])
    assert (o.name, o.type, o.shape) == ("probs", "tensor(float)", ["batch", 10])
    report = sess.load_report()
    assert report["opset"] == 17 and report["nodes"] == 5 and report["backend"] == "cpu"
    assert report["initializer_bytes"] == 4 * (8 * 16 + 16 + 10 * 16 + 10)
    sess.run(["probs"], {"x": np.zeros((3, 8), np.float32)})
    run = sess.last_run()
    # fc1 and bias1 run as one matmul_bias node, which keeps the Add's name.
    assert report["fusions"] == {"matmul_bias": 1}
    assert run["nodes_run"] == 4
    assert [n["node"] for n in run["nodes"]] == ["bias1", "relu", "fc2", "softmax"]
    assert all(n["backend"] == "cpu" and n["fallbacks"] == 0 for n in run["nodes"])


def conv2d_ref(x, w, b, stride, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return y + b[None, :, None, None]


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
def test_cnn_block_matches_float64_reference(backend):
    r = rng(3)
    w = r.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = r.standard_normal(4).astype(np.float32)
    scale, bias = r.uniform(0.5, 1.5, 4).astype(np.float32), r.standard_normal(4).astype(np.float32)
    mean, var = r.standard_normal(4).astype(np.float32), r.uniform(0.5, 2, 4).astype(np.float32)
    fc = r.standard_normal((5, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"], epsilon=1e-5),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1),
    ]
    inits = [init(n, a) for n, a in [("w", w), ("b", b), ("scale", scale), ("bias", bias), ("mean", mean),
                                      ("var", var), ("fc", fc)]]
    model = make_model(nodes, [value("x", F, [2, 3, 8, 8])], [value("y", F, [2, 5])], inits)
    x = r.standard_normal((2, 3, 8, 8)).astype(np.float32)
    [y] = tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, {"x": x})
    d = lambda a: a.astype(np.float64)  # noqa: E731
    c = conv2d_ref(d(x), d(w), d(b), 1, 1)
    bn = (c - d(mean)[None, :, None, None]) / np.sqrt(d(var)[None, :, None, None] + 1e-5)
    bn = bn * d(scale)[None, :, None, None] + d(bias)[None, :, None, None]
    rl = np.maximum(bn, 0)
    p = rl.reshape(2, 4, 4, 2, 4, 2).max(axis=(3, 5))
    ref = p.mean(axis=(2, 3)) @ d(fc).T
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def transformer_model(r, d=8, heads=2):
    """LayerNorm, a projection, heads split by Shape/Gather/Concat/Reshape (dynamic batch and
    sequence), scaled scores, Softmax, an erf GELU, a residual."""
    wq = r.standard_normal((d, d)).astype(np.float32) / np.sqrt(d)
    gamma, beta = r.uniform(0.5, 1.5, d).astype(np.float32), r.standard_normal(d).astype(np.float32)
    hd = d // heads
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["ln", "wq"], ["q"]),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "i0"], ["bsz"], axis=0),
        helper.make_node("Gather", ["shape", "i1"], ["seq"], axis=0),
        helper.make_node("Concat", ["bsz", "seq", "heads_hd"], ["split_shape"], axis=0),
        helper.make_node("Reshape", ["q", "split_shape"], ["qh"]),
        helper.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["qh"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qt", "kt"], ["scores"]),
        helper.make_node("Div", ["scores", "sqrt_hd"], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["attn"], axis=-1),
        helper.make_node("MatMul", ["attn", "qt"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "merge_shape"], ["merged"]),
        helper.make_node("Div", ["merged", "sqrt2"], ["g0"]),
        helper.make_node("Erf", ["g0"], ["g1"]),
        helper.make_node("Add", ["g1", "one"], ["g2"]),
        helper.make_node("Mul", ["merged", "g2"], ["g3"]),
        helper.make_node("Mul", ["g3", "half"], ["gelu"]),
        helper.make_node("Add", ["x", "gelu"], ["y"]),
    ]
    inits = [init("wq", wq), init("gamma", gamma), init("beta", beta),
             init("i0", np.array([0], np.int64)), init("i1", np.array([1], np.int64)),
             init("heads_hd", np.array([heads, hd], np.int64)), init("merge_shape", np.array([0, 0, d], np.int64)),
             init("sqrt_hd", np.array(np.sqrt(hd), np.float32)), init("sqrt2", np.array(np.sqrt(2), np.float32)),
             init("one", np.array(1, np.float32)), init("half", np.array(0.5, np.float32))]
    model = make_model(nodes, [value("x", F, ["b", "t", d])], [value("y", F, ["b", "t", d])], inits)

    def reference(x):
        x = x.astype(np.float64)
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        ln = (x - mu) / np.sqrt(var + 1e-5) * gamma + beta
        q = ln @ wq.astype(np.float64)
        b, t, _ = x.shape
        qt = q.reshape(b, t, heads, hd).transpose(0, 2, 1, 3)
        attn = softmax(qt @ qt.transpose(0, 1, 3, 2) / np.sqrt(hd))
        merged = (attn @ qt).transpose(0, 2, 1, 3).reshape(b, t, d)
        return x + merged * 0.5 * (1 + erf(merged / np.sqrt(2)))
    return model, reference


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
def test_transformer_block_dynamic_shapes(backend):
    r = rng(4)
    model, reference = transformer_model(r)
    sess = tfo.InferenceSession(model.SerializeToString(), backend=backend)
    for b, t in ((1, 3), (2, 7)):
        x = r.standard_normal((b, t, 8)).astype(np.float32)
        [y] = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, reference(x), rtol=1e-4, atol=1e-5)


def test_shape_computations_fold_at_load_for_static_inputs():
    r = rng(5)
    model, reference = transformer_model(r)
    model.graph.input[0].CopyFrom(value("x", F, [2, 5, 8]))
    sess = tfo.InferenceSession(model.SerializeToString(), backend="cpu")
    # Shape, two Gathers and the Concat of the head split: evaluated once, at load.
    assert sess.load_report()["folded"] == 4
    x = r.standard_normal((2, 5, 8)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], reference(x), rtol=1e-4, atol=1e-5)
    with pytest.raises(tfo.InputError, match="shape"):
        sess.run(None, {"x": np.zeros((2, 6, 8), np.float32)})


def test_intermediates_are_freed_after_their_last_consumer():
    # 30 chained Adds on 1 MiB: without freeing, 30 MiB would be alive at the end.
    n, nodes, prev = 30, [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Add", [prev, "one"], [f"t{i}"]))
        prev = f"t{i}"
    model = make_model(nodes, [value("x", F, [256, 1024])], [value(prev, F, [256, 1024])],
                       [init("one", np.array(1, np.float32))])
    sess = tfo.InferenceSession(model.SerializeToString(), backend="cpu")
    x = np.zeros((256, 1024), np.float32)
    [y] = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, np.full_like(x, n))
    tensor = 256 * 1024 * 4
    assert sess.last_run()["peak_bytes"] == 2 * tensor  # a node's input and output, no more


def test_dtypes_round_trip():
    nodes = [helper.make_node("Add", ["a", "a"], ["a2"]), helper.make_node("Cast", ["a2"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Cast", ["a2"], ["d"], to=TensorProto.DOUBLE),
             helper.make_node("Cast", ["a2"], ["u"], to=TensorProto.UINT8),
             helper.make_node("Greater", ["a2", "zero"], ["pos"])]
    model = make_model(nodes, [value("a", TensorProto.INT8, [4])],
                       [value("h", TensorProto.FLOAT16, [4]), value("d", TensorProto.DOUBLE, [4]),
                        value("u", TensorProto.UINT8, [4]), value("pos", TensorProto.BOOL, [4])],
                       [init("zero", np.array(0, np.int8))])
    sess = tfo.InferenceSession(model.SerializeToString(), backend="cpu")
    a = np.array([-3, 0, 5, 60], np.int8)
    h, d, u, pos = sess.run(None, {"a": a})
    # (int8 arithmetic runs in int32: a result outside int8 wraps only when it leaves; docs/onnx.md.)
    a2 = a * np.int8(2)
    assert h.dtype == np.float16 and d.dtype == np.float64 and u.dtype == np.uint8 and pos.dtype == np.bool_
    np.testing.assert_array_equal(h, a2.astype(np.float16))
    np.testing.assert_array_equal(d, a2.astype(np.float64))
    np.testing.assert_array_equal(u, a2.astype(np.uint8))
    np.testing.assert_array_equal(pos, a2 > 0)
    with pytest.raises(tfo.InputError, match="int8"):
        sess.run(None, {"a": a.astype(np.int32)})


def test_external_data_inside_the_model_folder(tmp_path):
    w = rng(6).standard_normal((4, 3)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [value("x", F, [2, 4])],
                       [value("y", F, [2, 3])], [init("w", w)])
    tensor = model.graph.initializer[0]
    (tmp_path / "weights.bin").write_bytes(b"\0" * 16 + w.tobytes())
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "16"), ("length", str(w.nbytes))):
        entry = tensor.external_data.add()
        entry.key, entry.value = k, v
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    x = rng(7).standard_normal((2, 4)).astype(np.float32)
    [y] = tfo.InferenceSession(str(path), backend="cpu").run(None, {"x": x})
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.astype(np.float64), rtol=1e-5, atol=1e-6)


def test_backend_api_drives_a_model():
    import tinyfin.onnx.backend as backend
    model, reference = mlp_model(rng(8))
    assert backend.supports_device("CPU")
    x = rng(9).standard_normal((2, 8)).astype(np.float32)
    [probs] = backend.prepare(model, device="CPU").run([x])
    np.testing.assert_allclose(probs, reference(x.astype(np.float64)), rtol=1e-4, atol=1e-6)
    [probs] = backend.run_model(model, {"x": x})
    np.testing.assert_allclose(probs, reference(x.astype(np.float64)), rtol=1e-4, atol=1e-6)


def test_supported_ops_lists_versions():
    ops = dict(tfo.supported_ops())
    assert ops["Softmax"] == [1, 11, 13] and ops["Squeeze"] == [1, 11, 13]
    assert "Conv" in ops and "LayerNormalization" in ops and "LpNormalization" not in ops


def test_einsum_attention_scores_against_numpy():
    r = rng(10)
    q = r.standard_normal((2, 3, 4, 5)).astype(np.float32)
    k = r.standard_normal((2, 3, 6, 5)).astype(np.float32)
    model = make_model([helper.make_node("Einsum", ["q", "k"], ["s"], equation="bhqd,bhkd->bhqk")],
                       [value("q", F, [2, 3, 4, 5]), value("k", F, [2, 3, 6, 5])], [value("s", F, [2, 3, 4, 6])])
    [s] = tfo.InferenceSession(model.SerializeToString(), backend="cpu").run(None, {"q": q, "k": k})
    np.testing.assert_allclose(s, np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)),
                               rtol=1e-5, atol=1e-5)


def test_onnx_and_llm_in_one_python_process(tmp_path):
    # libtinyfin-llm's libsentencepiece carries its own protobuf-lite; in one executable it
    # crashes libonnx_proto at start-up (docs/onnx.md). Python's extension modules keep their
    # symbols apart: both import, and a session runs after the LLM library is loaded.
    import subprocess
    import sys
    r = rng(3)
    model = tmp_path / "mlp.onnx"
    with open(model, "wb") as f:
        f.write(mlp_model(r)[0].SerializeToString())
    code = ("import numpy as np, tinyfin.llm, tinyfin.onnx as tfo; "
            f"s = tfo.InferenceSession({str(model)!r}, backend='cpu'); "
            "p = s.run(None, {'x': np.ones((2, 8), np.float32)})[0]; "
            "print(p.shape, round(float(p.sum()), 4))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(2, 10) 2.0"


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
def test_weights_marked_constant_and_overridable_initializers(backend):
    """The session marks the constants it never writes (the cpu plugin keeps a matmul weight
    packed between runs): repeated runs match float64, and an initializer that is also a graph
    input takes the fed values in the runs that feed it and its own in the others."""
    r = rng(7)
    w = r.standard_normal((40, 24)).astype(np.float32)
    d = r.standard_normal((24, 24)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc1"),
             helper.make_node("MatMul", ["h", "d"], ["y"], name="fc2")]
    model = make_model(nodes, [value("x", F, ["rows", 40]), value("d", F, [24, 24])],
                       [value("y", F, ["rows", 24])], [init("w", w), init("d", d)])
    sess = tfo.InferenceSession(model.SerializeToString(), backend=backend)
    f64 = lambda a: a.astype(np.float64)  # noqa: E731
    for run, fed in enumerate([None, None, r.standard_normal((24, 24)).astype(np.float32), None,
                               r.standard_normal((24, 24)).astype(np.float32)]):
        x = r.standard_normal((33, 40)).astype(np.float32)  # rows above the few-row matmul path
        feeds = {"x": x} if fed is None else {"x": x, "d": fed}
        [y] = sess.run(None, feeds)
        expected = f64(x) @ f64(w) @ f64(d if fed is None else fed)
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4, err_msg=f"run {run}")


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
def test_gather_indices_against_numpy(backend):
    """One index (a pooler's first token, a shape pick) is read on the host and taken as a view:
    scalar and [1] indices, negative ones, on axes 0, 1 and 2; an index out of range fails; the
    same for several indices with and without negative ones."""
    x = rng(11).standard_normal((2, 5, 3)).astype(np.float32)
    # Several indices too: without negatives (read on the host and passed on as they are, on cpu)
    # and with them (normalised first).
    for axis in (0, 1, 2):
        for index in (np.array(0, np.int64), np.array(-1, np.int64), np.array([1], np.int64),
                      np.array([[0, 1], [1, 0]], np.int64), np.array([[0, -1], [-2, 1]], np.int64)):
            model = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)],
                               [value("x", F, [2, 5, 3]), value("i", TensorProto.INT64, list(index.shape))],
                               [value("y", F, None)])
            sess = tfo.InferenceSession(model.SerializeToString(), backend=backend)
            [y] = sess.run(None, {"x": x, "i": index})
            np.testing.assert_array_equal(y, np.take(x, index, axis=axis))
            with pytest.raises(Exception, match="range"):
                sess.run(None, {"x": x, "i": np.full(index.shape, x.shape[axis], np.int64)})
