"""Scan (onnx/ops_control.cpp) against numpy loops written here from ONNX's definition: state
carried across steps, scan input/output axes and directions (versions 9-16), version 8's batch
axis with per-entry sequence_lens (scan outputs zero past each length), a body reading an outer
value. On cpu and every other loaded backend."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value

BACKENDS = ["cpu"] + other_backends()
F = TensorProto.FLOAT


def body():
    """state s [2], slices a [2] and b [2] -> s + a * b (the new state), s * 2 + b (a scan output),
    and a - outer (a second scan output reading the enclosing graph's 'outer')."""
    nodes = [
        helper.make_node("Mul", ["a", "b"], ["ab"]),
        helper.make_node("Add", ["s", "ab"], ["s2"]),
        helper.make_node("Mul", ["s", "two"], ["s_2"]),
        helper.make_node("Add", ["s_2", "b"], ["o1"]),
        helper.make_node("Sub", ["a", "outer"], ["o2"]),
    ]
    return helper.make_graph(nodes, "body", [value("s", F, [2]), value("a", F, [2]), value("b", F, [2])],
                             [value("s2", F, [2]), value("o1", F, [2]), value("o2", F, [2])],
                             initializer=[init("two", np.array(2.0, np.float32))])


def reference(s, a_seq, b_seq, outer, rev_a=False, rev_b=False):
    s = s.astype(np.float64)
    o1, o2 = [], []
    n = len(a_seq)
    for t in range(n):
        a = a_seq[n - 1 - t if rev_a else t].astype(np.float64)
        b = b_seq[n - 1 - t if rev_b else t].astype(np.float64)
        o1.append(s * 2 + b)
        o2.append(a - outer)
        s = s + a * b
    return s, np.stack(o1), np.stack(o2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("in_axes, in_dirs, out_axes, out_dirs, opset", [
    ([0, 0], [0, 0], [0, 0], [0, 0], 9),
    ([1, 0], [1, 0], [1, -1], [0, 1], 11),
    ([-1, 1], [0, 1], [0, 1], [1, 0], 16),
])
def test_scan_axes_directions(backend, in_axes, in_dirs, out_axes, out_dirs, opset):
    g = rng(1)
    steps = 4
    s0 = g.standard_normal(2).astype(np.float32)
    a_seq = g.standard_normal((steps, 2)).astype(np.float32)
    b_seq = g.standard_normal((steps, 2)).astype(np.float32)
    outer = g.standard_normal(2).astype(np.float32)
    a_in = np.moveaxis(a_seq, 0, in_axes[0])
    b_in = np.moveaxis(b_seq, 0, in_axes[1])
    node = helper.make_node("Scan", ["s0", "a_in", "b_in"], ["s", "y1", "y2"], body=body(), num_scan_inputs=2,
                            scan_input_axes=in_axes, scan_input_directions=in_dirs, scan_output_axes=out_axes,
                            scan_output_directions=out_dirs)
    model = make_model([node], [value("s0", F, [2]), value("a_in", F, a_in.shape), value("b_in", F, b_in.shape)],
                       [value(n, F, None) for n in ("s", "y1", "y2")], [init("outer", outer)], opset=opset)
    got = tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, {
        "s0": s0, "a_in": a_in, "b_in": b_in})
    s, o1, o2 = reference(s0, a_seq, b_seq, outer, in_dirs[0] == 1, in_dirs[1] == 1)
    outs = [o1, o2]
    for k in range(2):
        if out_dirs[k]:
            outs[k] = outs[k][::-1]
        outs[k] = np.moveaxis(outs[k], 0, out_axes[k] if out_axes[k] >= 0 else out_axes[k] + 2)
    np.testing.assert_allclose(got[0], s, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], outs[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], outs[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan8_batch_sequence_lens(backend):
    g = rng(2)
    batch, steps = 3, 4
    lens = np.array([4, 2, 3], np.int64)
    s0 = g.standard_normal((batch, 2)).astype(np.float32)
    a = g.standard_normal((batch, steps, 2)).astype(np.float32)
    b = g.standard_normal((batch, steps, 2)).astype(np.float32)
    outer = g.standard_normal(2).astype(np.float32)
    node = helper.make_node("Scan", ["lens", "s0", "a", "b"], ["s", "y1", "y2"], body=body(), num_scan_inputs=2,
                            directions=[0, 1])
    model = make_model([node], [value("lens", TensorProto.INT64, [batch]), value("s0", F, s0.shape),
                                value("a", F, a.shape), value("b", F, b.shape)],
                       [value(n, F, None) for n in ("s", "y1", "y2")], [init("outer", outer)], opset=8)
    got = tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, {
        "lens": lens, "s0": s0, "a": a, "b": b})
    for n in range(batch):
        length = lens[n]
        s, o1, o2 = reference(s0[n], a[n, :length], b[n, :length], outer, False, True)
        np.testing.assert_allclose(got[0][n], s, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1][n, :length], o1, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[2][n, :length], o2, rtol=1e-5, atol=1e-6)
        assert not got[1][n, length:].any() and not got[2][n, length:].any()


def test_scan_invalid():
    node = helper.make_node("Scan", ["s0", "a", "b"], ["s", "y1", "y2"], body=body(), num_scan_inputs=5, name="sc")
    model = make_model([node], [value("s0", F, [2]), value("a", F, [3, 2]), value("b", F, [3, 2])],
                       [value(n, F, None) for n in ("s", "y1", "y2")],
                       [init("outer", np.zeros(2, np.float32))], opset=16)
    feeds = {"s0": np.zeros(2, np.float32), "a": np.zeros((3, 2), np.float32), "b": np.zeros((3, 2), np.float32)}
    # (libonnx's shape inference refuses this model too; without it the kernel names the attribute.)
    with pytest.raises(tfo.ModelError, match=r"'sc'.*num_scan_inputs"):
        tfo.InferenceSession(model.SerializeToString(), backend="cpu", shape_inference=False).run(None, feeds)
