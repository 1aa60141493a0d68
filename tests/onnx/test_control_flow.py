"""If and Loop (onnx/ops_control.cpp): bodies that read the enclosing graph's values, nested
bodies, loop-carried values, scan outputs, early exit through cond, against the same loops
written in numpy; errors for bodies that read undefined values or use unimplemented ops."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value

F = TensorProto.FLOAT


def session(model, backend="cpu"):
    return tfo.InferenceSession(model.SerializeToString(), backend=backend)


def if_model():
    # y = cond ? x * w : x - w, with w and x read from the outer graph; z = cond ? x + 1 : x.
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["t0"]), helper.make_node("Add", ["x", "one"], ["t1"])], "then", [],
        [value("t0", F, None), value("t1", F, None)])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["x", "w"], ["e0"]), helper.make_node("Identity", ["x"], ["e1"])], "else", [],
        [value("e0", F, None), value("e1", F, None)])
    nodes = [helper.make_node("Relu", ["x_in"], ["x"]),
             helper.make_node("If", ["c"], ["y", "z"], then_branch=then_g, else_branch=else_g)]
    return make_model(nodes, [value("x_in", F, [2, 3]), value("c", TensorProto.BOOL, [])],
                      [value("y", F, None), value("z", F, None)],
                      [init("w", rng(1).standard_normal((2, 3)).astype(np.float32)), init("one", np.float32(1))])


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
def test_if_branches_read_outer_values(backend):
    s = session(if_model(), backend)
    w = rng(1).standard_normal((2, 3)).astype(np.float32)
    x = rng(2).standard_normal((2, 3)).astype(np.float32)
    r = np.maximum(x, 0)
    y, z = s.run(None, {"x_in": x, "c": np.array(True)})
    np.testing.assert_allclose(y, r * w, rtol=1e-6)
    np.testing.assert_allclose(z, r + 1, rtol=1e-6)
    y, z = s.run(None, {"x_in": x, "c": np.array(False)})
    np.testing.assert_allclose(y, r - w, rtol=1e-6)
    np.testing.assert_array_equal(z, r)


def loop_model(with_m=True, with_cond=True, limit=None):
    # carried: acc = acc * a + i (a from the outer graph); scan: acc each iteration; cond_out:
    # acc < limit (or cond_in); a nested If adds 10 on even iterations to a second carried value.
    I64, B = TensorProto.INT64, TensorProto.BOOL
    even_then = helper.make_graph([helper.make_node("Add", ["cnt", "ten"], ["c_then"])], "t", [],
                                  [value("c_then", F, None)])
    even_else = helper.make_graph([helper.make_node("Identity", ["cnt"], ["c_else"])], "e", [],
                                  [value("c_else", F, None)])
    nodes = [
        helper.make_node("Cast", ["i"], ["i_f"], to=F),
        helper.make_node("Mul", ["acc", "a"], ["scaled"]),
        helper.make_node("Add", ["scaled", "i_f"], ["acc_out"]),
        helper.make_node("Mod", ["i", "two"], ["parity"]),
        helper.make_node("Equal", ["parity", "zero"], ["even"]),
        helper.make_node("If", ["even"], ["cnt_out"], then_branch=even_then, else_branch=even_else),
    ]
    if limit is None:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    else:
        nodes += [helper.make_node("ReduceMax", ["acc_out"], ["top"], keepdims=0),
                  helper.make_node("Less", ["top", "limit"], ["cond_out"])]
    nodes.append(helper.make_node("Identity", ["acc_out"], ["scan"]))
    body = helper.make_graph(nodes, "body",
                             [value("i", I64, []), value("cond_in", B, []), value("acc", F, [3]), value("cnt", F, [])],
                             [value("cond_out", B, []), value("acc_out", F, [3]), value("cnt_out", F, []),
                              value("scan", F, [3])])
    loop = helper.make_node("Loop", ["m" if with_m else "", "c" if with_cond else "", "acc0", "cnt0"],
                            ["acc_final", "cnt_final", "scans"], body=body)
    inits = [init("a", np.float32([0.5, 2, -1])), init("two", np.int64(2)), init("zero", np.int64(0)),
             init("ten", np.float32(10)), init("cnt0", np.float32(0))]
    if limit is not None:
        inits.append(init("limit", np.float32(limit)))
    inputs = [value("acc0", F, [3])] + ([value("m", I64, [])] if with_m else []) + \
             ([value("c", TensorProto.BOOL, [])] if with_cond else [])
    return make_model([loop], inputs, [value("acc_final", F, None), value("cnt_final", F, None),
                                       value("scans", F, None)], inits)


def loop_reference(acc, trips, limit=None):
    a = np.float32([0.5, 2, -1])
    cnt, scans, i, running = np.float32(0), [], 0, True
    while i < trips and running:
        acc = (acc * a + np.float32(i)).astype(np.float32)
        cnt = cnt + 10 if i % 2 == 0 else cnt
        scans.append(acc)
        running = True if limit is None else bool(acc.max() < limit)
        i += 1
    return acc, np.float32(cnt), np.stack(scans)


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
def test_loop_carried_scan_and_nested_if(backend):
    acc0 = np.float32([1, -1, 0.25])
    for trips in (1, 5):
        got = session(loop_model(), backend).run(None, {"acc0": acc0, "m": np.int64(trips), "c": np.array(True)})
        for g, r in zip(got, loop_reference(acc0, trips)):
            np.testing.assert_allclose(g, r, rtol=1e-6)


def test_loop_stops_on_cond_without_m():
    acc0 = np.float32([1, -1, 0.25])
    got = session(loop_model(with_m=False, limit=40)).run(None, {"acc0": acc0, "c": np.array(True)})
    ref = loop_reference(acc0, 10 ** 6, limit=40)
    assert got[2].shape == ref[2].shape and ref[2].shape[0] > 3
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-6)


def test_loop_with_false_cond_runs_no_iteration():
    acc0 = np.float32([1, -1, 0.25])
    model = loop_model()
    model.graph.output.pop()  # no scan outputs
    model.graph.node[0].output.pop()
    model.graph.node[0].attribute[0].g.output.pop()
    acc, cnt = session(model).run(None, {"acc0": acc0, "m": np.int64(4), "c": np.array(False)})
    np.testing.assert_array_equal(acc, acc0)
    assert cnt == 0


def test_body_errors():
    g = helper.make_graph([helper.make_node("Mul", ["x", "nowhere"], ["t"])], "then", [], [value("t", F, None)])
    e = helper.make_graph([helper.make_node("Identity", ["x"], ["u"])], "else", [], [value("u", F, None)])
    node = helper.make_node("If", ["c"], ["y"], then_branch=g, else_branch=e)
    model = make_model([node], [value("x", F, [2]), value("c", TensorProto.BOOL, [])], [value("y", F, None)])
    with pytest.raises(tfo.ModelError, match="nowhere"):
        session(model)
    g = helper.make_graph([helper.make_node("LpNormalization", ["x"], ["t"])], "then", [], [value("t", F, None)])
    node = helper.make_node("If", ["c"], ["y"], then_branch=g, else_branch=e)
    model = make_model([node], [value("x", F, [2]), value("c", TensorProto.BOOL, [])], [value("y", F, None)])
    with pytest.raises(tfo.UnsupportedError, match="LpNormalization"):
        session(model)
