"""RNN, GRU and LSTM (onnx/ops_recurrent.cpp) against float64 loops written here from ONNX's
equations, one batch entry and one time step at a time: directions, ragged sequence_lens (zeros
past each length, Y_h the last valid step; reverse reads each sequence from its own end),
layout 1, clip, activations with alpha/beta, GRU's linear_before_reset, LSTM's peepholes and
initial states; a stacked model written with onnx.helper; invalid nodes refused at load. On cpu
and every other loaded backend, tiny shapes."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value

BACKENDS = ["cpu"] + other_backends()

# name: (function of x, alpha, beta; how many of alpha/beta it takes)
ACTIVATIONS = {
    "Relu": (lambda x, a, b: np.maximum(x, 0), 0),
    "Tanh": (lambda x, a, b: np.tanh(x), 0),
    "Sigmoid": (lambda x, a, b: 1 / (1 + np.exp(-x)), 0),
    "Affine": (lambda x, a, b: a * x + b, 2),
    "LeakyRelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 1),
    "ThresholdedRelu": (lambda x, a, b: np.where(x > a, x, 0.0), 1),
    "ScaledTanh": (lambda x, a, b: a * np.tanh(b * x), 2),
    "HardSigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 2),
    "Elu": (lambda x, a, b: np.where(x > 0, x, a * (np.exp(np.minimum(x, 0)) - 1)), 1),
    "Softsign": (lambda x, a, b: x / (1 + np.abs(x)), 0),
    "Softplus": (lambda x, a, b: np.log1p(np.exp(x)), 0),
}
DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def act(spec):
    """(name, alpha, beta) -> a float64 function."""
    name, a, b = spec
    return lambda x: ACTIVATIONS[name][0](x, a, b)


def reference(op, x, w, r, b=None, lens=None, h0=None, c0=None, p=None, direction="forward", layout=0, clip=None,
              acts=None, lbr=0, input_forget=0):
    """ONNX's equations in float64, each batch entry on its own; returns Y, Y_h (, Y_c)."""
    x = x.astype(np.float64)
    if layout == 1:
        x = x.swapaxes(0, 1)
        h0 = None if h0 is None else h0.swapaxes(0, 1)
        c0 = None if c0 is None else c0.swapaxes(0, 1)
    t_len, batch, _ = x.shape
    nd = 2 if direction == "bidirectional" else 1
    hid = r.shape[-1]
    per = len(DEFAULTS[op])
    acts = acts or [(n, 0, 0) for n in DEFAULTS[op]] * nd
    if len(acts) == per and nd == 2:
        acts = acts * 2
    lens = np.full(batch, t_len) if lens is None else lens
    b = np.zeros((nd, 2 * GATES[op] * hid)) if b is None else b
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    y = np.zeros((t_len, nd, batch, hid))
    yh = np.zeros((nd, batch, hid))
    yc = np.zeros((nd, batch, hid))
    for d in range(nd):
        f = [act(a) for a in acts[d * per:(d + 1) * per]]
        wd, rd = w[d].astype(np.float64), r[d].astype(np.float64)
        wb, rb = np.split(b[d].astype(np.float64), 2)
        backwards = direction == "reverse" or d == 1
        for n in range(batch):
            h = np.zeros(hid) if h0 is None else h0[d, n].astype(np.float64)
            c = np.zeros(hid) if c0 is None else c0[d, n].astype(np.float64)
            steps = range(lens[n])
            for t in (reversed(steps) if backwards else steps):
                xt = x[t, n]
                if op == "RNN":
                    h = f[0](cl(xt @ wd.T + h @ rd.T + wb + rb))
                elif op == "GRU":
                    wz, wr, wh = np.split(wd, 3)
                    rz, rr, rh = np.split(rd, 3)
                    wbz, wbr, wbh = np.split(wb, 3)
                    rbz, rbr, rbh = np.split(rb, 3)
                    z = f[0](cl(xt @ wz.T + h @ rz.T + wbz + rbz))
                    rg = f[0](cl(xt @ wr.T + h @ rr.T + wbr + rbr))
                    if lbr:
                        hh = f[1](cl(xt @ wh.T + rg * (h @ rh.T + rbh) + wbh))
                    else:
                        hh = f[1](cl(xt @ wh.T + (rg * h) @ rh.T + rbh + wbh))
                    h = (1 - z) * hh + z * h
                else:
                    wi, wo, wf, wc = np.split(wd, 4)
                    ri, ro, rf, rc = np.split(rd, 4)
                    wbi, wbo, wbf, wbc = np.split(wb, 4)
                    rbi, rbo, rbf, rbc = np.split(rb, 4)
                    pi, po, pf = np.split(p[d].astype(np.float64), 3) if p is not None else (0, 0, 0)
                    i = f[0](cl(xt @ wi.T + h @ ri.T + pi * c + wbi + rbi))
                    fg = 1 - i if input_forget else f[0](cl(xt @ wf.T + h @ rf.T + pf * c + wbf + rbf))
                    cc = f[1](cl(xt @ wc.T + h @ rc.T + wbc + rbc))
                    c = fg * c + i * cc
                    o = f[0](cl(xt @ wo.T + h @ ro.T + po * c + wbo + rbo))
                    h = o * f[2](c)
                y[t, d, n] = h
            yh[d, n] = h
            yc[d, n] = c
    if layout == 1:
        y, yh, yc = y.transpose(2, 0, 1, 3), yh.swapaxes(0, 1), yc.swapaxes(0, 1)
    return (y, yh, yc) if op == "LSTM" else (y, yh)


def activation_attrs(acts):
    """ONNX's attributes for (name, alpha, beta) activations: alpha/beta listed in order for the
    activations that take them."""
    alphas, betas = [], []
    for name, a, b in acts:
        n = ACTIVATIONS[name][1]
        if n >= 1:
            alphas.append(a)
        if n >= 2:
            betas.append(b)
    out = {"activations": [a[0] for a in acts]}
    if alphas:
        out["activation_alpha"] = alphas
    if betas:
        out["activation_beta"] = betas
    return out


def build(op, hid, inputs, attrs, n_out, opset=14, weights_as_inputs=()):
    """A one-node model: X (and sequence_lens) fed, the rest initializers; named node 'rec'."""
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    node_inputs, feeds, inits, graph_inputs = [], {}, [], []
    for name, arr in zip(names, inputs):
        if arr is None:
            node_inputs.append("")
            continue
        node_inputs.append(name)
        if name in ("X", "sequence_lens") or name in weights_as_inputs:
            feeds[name] = arr
            # A fed weight's shape is left undeclared: only the run sees it.
            graph_inputs.append(value(name, TensorProto.INT32 if name == "sequence_lens" else TensorProto.FLOAT,
                                      None if name in weights_as_inputs else arr.shape))
        else:
            inits.append(init(name, arr))
    while node_inputs and node_inputs[-1] == "":
        node_inputs.pop()
    outs = ["Y", "Y_h", "Y_c"][:n_out]
    node = helper.make_node(op, node_inputs, outs, name="rec", hidden_size=hid, **attrs)
    model = make_model([node], graph_inputs, [value(o, TensorProto.FLOAT, None) for o in outs], inits, opset=opset)
    return model.SerializeToString(), feeds


def arrays(op, seed, t_len, batch, inp, hid, nd, lens=None, states=True, peep=False, layout=0):
    g = rng(seed)
    gates = GATES[op]
    x = g.standard_normal((t_len, batch, inp) if layout == 0 else (batch, t_len, inp)).astype(np.float32)
    w = (0.6 * g.standard_normal((nd, gates * hid, inp))).astype(np.float32)
    r = (0.6 * g.standard_normal((nd, gates * hid, hid))).astype(np.float32)
    b = (0.3 * g.standard_normal((nd, 2 * gates * hid))).astype(np.float32)
    st = (nd, batch, hid) if layout == 0 else (batch, nd, hid)
    h0 = (0.5 * g.standard_normal(st)).astype(np.float32) if states else None
    c0 = (0.5 * g.standard_normal(st)).astype(np.float32) if states and op == "LSTM" else None
    p = (0.4 * g.standard_normal((nd, 3 * hid))).astype(np.float32) if peep else None
    ln = None if lens is None else np.array(lens, np.int32)
    return dict(x=x, w=w, r=r, b=b, lens=ln, h0=h0, c0=c0, p=p)


def check(op, a, attrs, ref_kwargs, backend, opset=14, rtol=1e-4, atol=1e-5):
    hid = a["r"].shape[-1]
    n_out = 3 if op == "LSTM" else 2
    inputs = [a["x"], a["w"], a["r"], a["b"], a["lens"], a["h0"], a["c0"] if op == "LSTM" else None,
              a["p"] if op == "LSTM" else None]
    model, feeds = build(op, hid, inputs, attrs, n_out, opset)
    got = tfo.InferenceSession(model, backend=backend).run(None, feeds)
    want = reference(op, a["x"], a["w"], a["r"], a["b"], a["lens"], a["h0"], a["c0"], a["p"], **ref_kwargs)
    assert len(got) == len(want)
    for g_, w_ in zip(got, want):
        assert g_.shape == w_.shape
        np.testing.assert_allclose(g_, w_, rtol=rtol, atol=atol)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_bidirectional_ragged(backend, op):
    # Lengths 4, 2, 1 of 4 steps: outputs zero past each length, Y_h (and Y_c) the last valid step,
    # the reverse direction reading each sequence from its own last element.
    a = arrays(op, 1, 4, 3, 3, 2, 2, lens=[4, 2, 1], peep=op == "LSTM")
    check(op, a, {"direction": "bidirectional"}, {"direction": "bidirectional"}, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_reverse_ragged_layout1(backend, op):
    a = arrays(op, 2, 3, 2, 2, 3, 1, lens=[1, 3], layout=1)
    check(op, a, {"direction": "reverse", "layout": 1}, {"direction": "reverse", "layout": 1}, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op, acts", [
    ("RNN", [("LeakyRelu", 0.2, 0)]),
    ("RNN", [("Affine", 0.7, -0.1)]),
    ("RNN", [("Softsign", 0, 0), ("Softplus", 0, 0)]),
    ("RNN", [("ThresholdedRelu", 0.1, 0), ("Relu", 0, 0)]),
    ("GRU", [("HardSigmoid", 0.3, 0.4), ("Elu", 0.8, 0)]),
    ("LSTM", [("HardSigmoid", 0.25, 0.45), ("ScaledTanh", 0.9, 1.3), ("LeakyRelu", 0.05, 0)]),
])
def test_activations_and_clip(backend, op, acts):
    nd = 2 if len(acts) == 2 * len(DEFAULTS[op]) else 1
    direction = "bidirectional" if nd == 2 else "forward"
    a = arrays(op, 3, 3, 2, 3, 2, nd, peep=op == "LSTM")
    attrs = dict(activation_attrs(acts), direction=direction, clip=0.7)
    check(op, a, attrs, {"direction": direction, "acts": acts, "clip": 0.7}, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_linear_before_reset(backend, lbr):
    a = arrays("GRU", 4 + lbr, 4, 2, 3, 3, 1, lens=[4, 3])
    check("GRU", a, {"linear_before_reset": lbr}, {"lbr": lbr}, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("peep", [False, True])
def test_lstm_input_forget(backend, peep):
    # Coupled gates: f = 1 - i (with the input gate's peephole when there is one); bidirectional,
    # ragged, clipped.
    a = arrays("LSTM", 8 + peep, 4, 3, 3, 2, 2, lens=[4, 1, 3], peep=peep)
    attrs = {"input_forget": 1, "direction": "bidirectional", "clip": 2.5}
    check("LSTM", a, attrs, {"input_forget": 1, "direction": "bidirectional", "clip": 2.5}, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lstm_peepholes_old_opset(backend):
    # LSTM version 7 (opset 7..13), no optional bias, peepholes and initial states.
    a = arrays("LSTM", 6, 3, 2, 2, 2, 1, peep=True)
    a["b"] = None
    check("LSTM", a, {}, {}, backend, opset=9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stacked_model(backend):
    # What exporters write for a 2-layer bidirectional LSTM over [batch, time, features]: Transpose
    # to time-major, LSTM, Transpose/Reshape to [T, B, 2H], a GRU, the last Y_h through a MatMul.
    g = rng(7)
    t_len, batch, inp, hid = 5, 2, 3, 2
    x = g.standard_normal((batch, t_len, inp)).astype(np.float32)
    w1 = (0.5 * g.standard_normal((2, 4 * hid, inp))).astype(np.float32)
    r1 = (0.5 * g.standard_normal((2, 4 * hid, hid))).astype(np.float32)
    b1 = (0.2 * g.standard_normal((2, 8 * hid))).astype(np.float32)
    w2 = (0.5 * g.standard_normal((1, 3 * hid, 2 * hid))).astype(np.float32)
    r2 = (0.5 * g.standard_normal((1, 3 * hid, hid))).astype(np.float32)
    b2 = (0.2 * g.standard_normal((1, 6 * hid))).astype(np.float32)
    head = g.standard_normal((hid, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
        helper.make_node("LSTM", ["xt", "w1", "r1", "b1"], ["y1"], hidden_size=hid, direction="bidirectional"),
        helper.make_node("Transpose", ["y1"], ["y1t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["y1t", "shape"], ["y1r"]),
        helper.make_node("GRU", ["y1r", "w2", "r2", "b2"], ["", "h2"], hidden_size=hid, linear_before_reset=1),
        helper.make_node("Squeeze", ["h2", "zero"], ["h2s"]),
        helper.make_node("MatMul", ["h2s", "head"], ["out"]),
    ]
    inits = [init("w1", w1), init("r1", r1), init("b1", b1), init("w2", w2), init("r2", r2), init("b2", b2),
             init("head", head), init("shape", np.array([t_len, batch, 2 * hid], np.int64)),
             init("zero", np.array([0], np.int64))]
    model = make_model(nodes, [value("x", TensorProto.FLOAT, x.shape)], [value("out", TensorProto.FLOAT, None)],
                       inits, opset=13)
    (got,) = tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, {"x": x})
    y1, _, _ = reference("LSTM", x.swapaxes(0, 1), w1, r1, b1, direction="bidirectional")
    y1r = y1.transpose(0, 2, 1, 3).reshape(t_len, batch, 2 * hid)
    _, h2 = reference("GRU", y1r, w2, r2, b2, lbr=1)
    np.testing.assert_allclose(got, h2[0] @ head.astype(np.float64), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op, attrs, shapes, match", [
    ("LSTM", {}, {"W": (1, 12, 3)}, r"'rec'.*input W has shape \[1,12,3\]"),
    ("GRU", {}, {"R": (1, 9, 2)}, r"'rec'.*input R has shape \[1,9,2\].*hidden_size = 2"),
    ("RNN", {"direction": "bidirectional"}, {}, r"'rec'.*input W .*hidden_size = 2 and direction"),
    ("RNN", {"activations": ["Tanhh"]}, {}, r"'rec'.*attribute activations names 'Tanhh'"),
    ("GRU", {"activations": ["Sigmoid"]}, {}, r"'rec'.*attribute activations has 1 names; 2 expected"),
    ("LSTM", {"direction": "sideways"}, {}, r"'rec'.*attribute direction is 'sideways'"),
    ("RNN", {"clip": -1.0}, {}, r"'rec'.*attribute clip"),
    ("RNN", {"activations": ["LeakyRelu"], "activation_alpha": [0.1, 0.2]}, {}, r"'rec'.*activation_alpha"),
    ("LSTM", {}, {"B": (1, 15)}, r"'rec'.*input B has shape \[1,15\]"),
])
def test_invalid_nodes_refused_at_load(op, attrs, shapes, match):
    # hidden_size 2, input size 3; one weight of the wrong shape, or a bad attribute: a ModelError
    # when the session is made, naming the node and the attribute or input.
    gates = GATES[op]
    sh = {"X": (2, 1, 3), "W": (1, gates * 2, 3), "R": (1, gates * 2, 2), "B": (1, 2 * gates * 2)}
    sh.update(shapes)
    inputs = [np.zeros(sh[k], np.float32) for k in ("X", "W", "R", "B")]
    model, _ = build(op, 2, inputs, attrs, 2)
    with pytest.raises(tfo.ModelError, match=match):
        tfo.InferenceSession(model, backend="cpu")


def test_hidden_size_missing_refused():
    inputs = [np.zeros(s, np.float32) for s in ((2, 1, 3), (1, 2, 3), (1, 2, 2))]
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], name="rec")
    model = make_model([node], [value("X", TensorProto.FLOAT, (2, 1, 3))], [value("Y", TensorProto.FLOAT, None)],
                       [init("W", inputs[1]), init("R", inputs[2])], opset=14)
    with pytest.raises(tfo.ModelError, match=r"'rec'.*hidden_size"):
        tfo.InferenceSession(model.SerializeToString(), backend="cpu")


def test_fed_weights_checked_at_run():
    # W fed at run time with a shape the load could not see: the kernel names it.
    a = arrays("RNN", 9, 2, 1, 3, 2, 1)
    model, feeds = build("RNN", 2, [a["x"], a["w"], a["r"]], {}, 2, weights_as_inputs=("W",))
    sess = tfo.InferenceSession(model, backend="cpu")
    np.testing.assert_allclose(sess.run(None, feeds)[1], reference("RNN", a["x"], a["w"], a["r"])[1], rtol=1e-5,
                               atol=1e-6)
    feeds["W"] = np.zeros((1, 2, 4), np.float32)
    with pytest.raises(Exception, match=r"'rec'.*W"):
        sess.run(None, feeds)


def test_supported_versions_listed():
    ops = dict(tfo.supported_ops())
    assert ops["RNN"] == [1, 7, 14] and ops["GRU"] == [1, 3, 7, 14] and ops["LSTM"] == [1, 7, 14]
    assert ops["Scan"] == [8, 9, 11, 16] and ops["DFT"] == [17] and ops["STFT"] == [17]
    assert ops["MelWeightMatrix"] == [17]
