"""Sequences and optionals (onnx/ops_sequence.cpp, SequenceMap in ops_control.cpp, values.cpp):
split into and concatenated from sequences, insert/erase/at with negative positions, sequence
feeds and outputs as lists, empty optionals as None, a Loop that collects a sequence, SequenceMap
with a tensor and a sequence beside the mapped one; against numpy. Errors: positions out of
range, mixed element types, a feed of the wrong kind, run()'s refusal of a sequence output in the
C++-shaped tensor path."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import make_model, other_backends, rng, value

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def seq(name, elem_type, shape=None):
    return helper.make_tensor_sequence_value_info(name, elem_type, shape)


def opt(name, elem_type, shape=None):
    return helper.make_value_info(name, helper.make_optional_type_proto(helper.make_tensor_type_proto(elem_type, shape)))


def session(model, backend="cpu"):
    return tfo.InferenceSession(model.SerializeToString(), backend=backend)


BACKENDS = ["cpu"] + other_backends()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("split,keepdims,axis", [(None, 1, 1), (None, 0, 1), (2, 1, 1), ([1, 3, 1], 1, -1),
                                                 (None, 0, 0)])
def test_split_to_sequence_then_concat(backend, split, keepdims, axis):
    x = rng(1).standard_normal((3, 5)).astype(np.float32)
    inputs = [value("x", F, [3, 5])]
    nodes_in = ["x"]
    if split is not None:
        inputs.append(value("split", I64, [] if np.ndim(split) == 0 else [len(split)]))
        nodes_in.append("split")
    nodes = [helper.make_node("SplitToSequence", nodes_in, ["s"], axis=axis, keepdims=keepdims),
             helper.make_node("SequenceLength", ["s"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s"], ["back"], axis=axis, new_axis=1 - keepdims if
                              split is None else 0)]
    m = make_model(nodes, inputs, [seq("s", F), value("n", I64, []), value("back", F, None)])
    feeds = {"x": x}
    if split is not None:
        feeds["split"] = np.array(split, dtype=np.int64)
    s, n, back = session(m, backend).run(None, feeds)
    a = axis % 2
    if split is None:
        ref = [np.take(x, [i], axis=a) if keepdims else np.take(x, i, axis=a) for i in range(x.shape[a])]
    elif np.ndim(split) == 0:
        ref = np.array_split(x, range(split, x.shape[a], split), axis=a)
    else:
        ref = np.split(x, np.cumsum(split)[:-1], axis=a)
    assert isinstance(s, list) and len(s) == len(ref) == n
    for got, want in zip(s, ref):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(back, x)  # stacked again on the axis that was dropped


@pytest.mark.parametrize("backend", BACKENDS)
def test_insert_erase_at_with_negative_positions(backend):
    # s = [a, b] from SequenceConstruct; insert c at -1 -> [a, c, b]; erase 0 -> [c, b]; at(-1) = b.
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s0"]),
             helper.make_node("SequenceInsert", ["s0", "c", "minus_one"], ["s1"]),
             helper.make_node("SequenceErase", ["s1", "zero"], ["s2"]),
             helper.make_node("SequenceAt", ["s2", "minus_one"], ["last"]),
             helper.make_node("SequenceInsert", ["s2", "c"], ["s3"])]  # at the end
    m = make_model(nodes, [value(n, F, [2]) for n in "abc"] + [value("minus_one", I64, []), value("zero", I64, [])],
                   [seq("s1", F), seq("s2", F), value("last", F, [2]), seq("s3", F)])
    a, b, c = (rng(i).standard_normal(2).astype(np.float32) for i in range(3))
    s1, s2, last, s3 = session(m, backend).run(None, {"a": a, "b": b, "c": c, "minus_one": np.int64(-1),
                                                     "zero": np.int64(0)})
    for got, want in zip(s1, [a, c, b]):
        np.testing.assert_array_equal(got, want)
    assert len(s2) == 2 and np.array_equal(s2[0], c) and np.array_equal(s2[1], b)
    np.testing.assert_array_equal(last, b)
    assert [x.tolist() for x in s3] == [c.tolist(), b.tolist(), c.tolist()]


def test_sequence_feeds_and_empty_sequences():
    # A sequence input fed as a list, SequenceEmpty, inserting into it, and an empty output.
    nodes = [helper.make_node("SequenceEmpty", [], ["e"], dtype=I64),
             helper.make_node("SequenceLength", ["xs"], ["n"]),
             helper.make_node("SequenceInsert", ["e", "n"], ["one"]),
             helper.make_node("Identity", ["e"], ["still_empty"]),
             helper.make_node("ConcatFromSequence", ["xs"], ["cat"], axis=0)]
    m = make_model(nodes, [seq("xs", F, [None, 2])], [seq("one", I64), seq("still_empty", I64), value("cat", F, None)])
    s = session(m)
    assert s.get_inputs()[0].type == "seq(tensor(float))"
    xs = [np.ones((1, 2), np.float32), np.full((3, 2), 2, np.float32)]
    one, empty, cat = s.run(None, {"xs": xs})
    assert len(one) == 1 and one[0].dtype == np.int64 and one[0].item() == 2
    assert empty == []
    np.testing.assert_array_equal(cat, np.concatenate(xs))
    with pytest.raises(tfo.ModelError, match="empty sequence"):
        s.run(None, {"xs": []})
    with pytest.raises(tfo.InputError, match="sequence of float32"):
        s.run(None, {"xs": np.ones((1, 2), np.float32)})  # a tensor for a sequence input
    with pytest.raises(tfo.InputError, match="int64"):
        s.run(None, {"xs": [np.ones((1, 2), np.int64)]})
    with pytest.raises(tfo.InputError, match="shape"):
        s.run(None, {"xs": [np.ones((1, 3), np.float32)]})


def test_positions_out_of_range_and_mixed_types():
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]), helper.make_node("SequenceAt", ["s", "p"], ["y"])]
    m = make_model(nodes, [value("a", F, [1]), value("b", F, [1]), value("p", I64, [])], [value("y", F, [1])])
    s = session(m)
    feeds = {"a": np.float32([1]), "b": np.float32([2])}
    assert s.run(None, dict(feeds, p=np.int64(-2)))[0].item() == 1
    for bad in (2, -3):
        with pytest.raises(tfo.ModelError, match="out of range"):
            s.run(None, dict(feeds, p=np.int64(bad)))
    mixed = make_model([helper.make_node("SequenceConstruct", ["a", "i"], ["s"])],
                       [value("a", F, [1]), value("i", I64, [1])], [seq("s", F)])
    with pytest.raises((tfo.ModelError, ValueError)):
        session(mixed).run(None, {"a": np.float32([1]), "i": np.int64([1])})


@pytest.mark.parametrize("backend", BACKENDS)
def test_optional_values(backend):
    # has = OptionalHasElement(o); y = has ? OptionalGetElement(o) * 2 : zeros.
    then_g = helper.make_graph([helper.make_node("OptionalGetElement", ["o"], ["v"]),
                                helper.make_node("Add", ["v", "v"], ["t"])], "then", [], [value("t", F, [3])])
    else_g = helper.make_graph([helper.make_node("Identity", ["zeros"], ["e"])], "else", [], [value("e", F, [3])])
    nodes = [helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("If", ["has"], ["y"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Optional", ["y"], ["wrapped"])]
    from conftest import init
    m = make_model(nodes, [opt("o", F, [3])], [value("has", B, []), value("y", F, [3]), opt("wrapped", F, [3])],
                   [init("zeros", np.zeros(3, np.float32))])
    s = session(m, backend)
    assert s.get_inputs()[0].type == "optional(tensor(float))"
    x = np.float32([1, -2, 3])
    has, y, wrapped = s.run(None, {"o": x})
    assert has.item() is True
    np.testing.assert_array_equal(y, 2 * x)
    np.testing.assert_array_equal(wrapped, 2 * x)
    has, y, _ = s.run(None, {"o": None})
    assert has.item() is False
    np.testing.assert_array_equal(y, np.zeros(3, np.float32))
    has, _, _ = s.run(None, {})  # an optional input left out is empty
    assert has.item() is False
    empty_get = make_model([helper.make_node("OptionalGetElement", ["o"], ["v"])], [opt("o", F, [3])],
                           [value("v", F, [3])])
    with pytest.raises(tfo.ModelError, match="holds no value"):
        session(empty_get, backend).run(None, {"o": None})
    none_out = make_model([helper.make_node("Optional", [], ["n"],
                                            type=helper.make_tensor_type_proto(F, [2]))], [], [opt("n", F, [2])])
    assert session(none_out, backend).run(None, {}) == [None]


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_collects_a_sequence(backend):
    # A loop-carried sequence: each iteration inserts x * i; then ConcatFromSequence(new_axis=1).
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], to=F), helper.make_node("Mul", ["x", "i_f"], ["xi"]),
         helper.make_node("SequenceInsert", ["acc", "xi"], ["acc_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [value("i", I64, []), value("cond", B, []), seq("acc", F)], [value("cond_out", B, []), seq("acc_out", F)])
    nodes = [helper.make_node("SequenceEmpty", [], ["e"]),
             helper.make_node("Loop", ["m", "", "e"], ["all"], body=body),
             helper.make_node("ConcatFromSequence", ["all"], ["stacked"], axis=0, new_axis=1)]
    m = make_model(nodes, [value("x", F, [2]), value("m", I64, [])], [seq("all", F), value("stacked", F, [4, 2])])
    x = np.float32([1.5, -2])
    got, stacked = session(m, backend).run(None, {"x": x, "m": np.int64(4)})
    assert len(got) == 4
    np.testing.assert_allclose(stacked, np.stack([x * i for i in range(4)]), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequence_map_with_tensor_and_sequence_inputs(backend):
    # out1[i] = xs[i] * w + ys[i] (w a tensor passed whole), out2[i] = shape of xs[i].
    body = helper.make_graph([helper.make_node("Mul", ["x", "w_in"], ["xw"]), helper.make_node("Add", ["xw", "y"], ["o1"]),
                              helper.make_node("Shape", ["x"], ["o2"])], "body",
                             [value("x", F, None), value("w_in", F, [1]), value("y", F, None)],
                             [value("o1", F, None), value("o2", I64, [1])])
    nodes = [helper.make_node("SequenceMap", ["xs", "w", "ys"], ["out1", "out2"], body=body)]
    m = make_model(nodes, [seq("xs", F), value("w", F, [1]), seq("ys", F)], [seq("out1", F), seq("out2", I64)])
    s = session(m, backend)
    xs = [rng(i).standard_normal(n).astype(np.float32) for i, n in enumerate((2, 5, 1))]
    ys = [rng(9 + i).standard_normal(n).astype(np.float32) for i, n in enumerate((2, 5, 1))]
    w = np.float32([0.5])
    out1, out2 = s.run(None, {"xs": xs, "w": w, "ys": ys})
    for got, x, y in zip(out1, xs, ys):
        np.testing.assert_allclose(got, x * w + y, rtol=1e-6)
    assert [o.tolist() for o in out2] == [[2], [5], [1]]
    assert s.run(None, {"xs": [], "w": w, "ys": []}) == [[], []]
    with pytest.raises(tfo.ModelError, match="sequence of 1"):
        s.run(None, {"xs": xs, "w": w, "ys": ys[:1]})


def test_tensor_path_refuses_sequences():
    import tinyfin as tf
    m = make_model([helper.make_node("SequenceConstruct", ["a"], ["s"])], [value("a", F, [2])], [seq("s", F)])
    s = session(m)
    with pytest.raises(tfo.InputError, match="run_values|not a tensor"):
        s.run(None, {"a": np.float32([1, 2])}, output_type="tinyfin")
    with pytest.raises(tfo.InputError):
        s.run(None, {"a": tf.tensor(np.float32([1, 2]))})
