"""Hostile and broken model files: each is a typed error (ModelError, UnsupportedError) whose
message names what is wrong; nothing is read outside the model's folder; no crash."""
import os

import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin as tf
import tinyfin.onnx as tfo
from conftest import init, make_model, rng, value

F = TensorProto.FLOAT


def relu_model(**kw):
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [value("x", F, [2])],
                      [value("y", F, [2])], **kw)


def load(model_or_bytes, **kw):
    data = model_or_bytes if isinstance(model_or_bytes, bytes) else model_or_bytes.SerializeToString()
    return tfo.InferenceSession(data, backend="cpu", **kw)


def test_truncated_protobuf_at_every_length():
    data = relu_model().SerializeToString()
    for n in range(len(data)):
        try:
            load(data[:n])
        except (tfo.ModelError, tfo.UnsupportedError):
            continue
        # A prefix may itself parse as a (smaller) valid model; it must then still run or refuse.


def test_garbage_bytes():
    with pytest.raises(tfo.ModelError, match="not a valid ONNX protobuf"):
        load(b"\xff" * 64)


def test_cycle():
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2")]
    model = make_model(nodes, [value("x", F, [2])], [value("b", F, [2])])
    with pytest.raises(tfo.ModelError, match="cycle"):
        load(model)


def test_node_output_is_its_input():
    model = make_model([helper.make_node("Relu", ["y"], ["y"], name="self")], [value("x", F, [2])],
                       [value("y", F, [2])])
    with pytest.raises(tfo.ModelError, match="'self'.*both input and output"):
        load(model)


def test_missing_initializer():
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [value("x", F, [2])],
                       [value("y", F, [2])])
    with pytest.raises(tfo.ModelError, match="'w' of node 'add'.*missing initializer"):
        load(model)


def test_value_defined_twice():
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]
    with pytest.raises(tfo.ModelError, match="defined twice"):
        load(make_model(nodes, [value("x", F, [2])], [value("y", F, [2])]))


def raw_tensor(name, dims, raw):
    t = TensorProto(name=name, data_type=F, raw_data=raw)
    t.dims.extend(dims)
    return t


def test_initializer_size_mismatch():
    t = raw_tensor("w", [1000, 1000], b"\0" * 8)
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [value("x", F, [2])], [value("y", F, [2])], [t])
    with pytest.raises(tfo.ModelError, match="raw_data has 8 bytes"):
        load(model, shape_inference=False)


def test_huge_declared_dims_in_an_initializer():
    t = raw_tensor("w", [2**40, 2**40], b"")
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [value("x", F, [2])], [value("y", F, [2])], [t])
    with pytest.raises(tfo.ModelError, match="overflow"):
        load(model, shape_inference=False)


def test_huge_constant_of_shape_is_refused_before_allocating():
    model = make_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="big")], [],
                       [value("y", F, None)], [init("s", np.array([2**31, 2**31], np.int64))])
    with pytest.raises(tfo.ModelError, match="'big'.*max_tensor_bytes"):
        load(model)


def test_shape_inference_contradiction():
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [value("x", F, [2, 3])],
                       [value("y", F, [2, 5])], [init("w", np.zeros((4, 5), np.float32))])
    with pytest.raises(tfo.ModelError, match="shape inference"):
        load(model)


CRASHES = os.path.join(os.path.dirname(__file__), "libonnx-crashes")


@pytest.mark.parametrize("name", sorted(os.listdir(CRASHES)))
def test_inputs_that_crash_libonnx_shape_inference(name):
    # Debian's libonnx 1.12 crashes on these in-process; tinyfin runs its inference in a child.
    with open(os.path.join(CRASHES, name), "rb") as f:
        data = f.read()
    with pytest.raises(tfo.ModelError, match="shape inference"):
        load(data)
    assert tfo.InferenceSession(relu_model().SerializeToString(), backend="cpu").run(
        None, {"x": np.array([-1, 2], np.float32)})[0].tolist() == [0, 2]


def refused(model, feeds):
    """A ModelError at load, or else a typed error at run (ModelError naming the node, or the
    core's ShapeError/ValueError): never a result, never a crash."""
    try:
        sess = load(model)
    except tfo.ModelError as e:
        return str(e)
    with pytest.raises((tfo.ModelError, tf.Error)) as e:
        sess.run(None, feeds)
    return str(e.value)


def conv_model(x_shape, w_shape, **attrs):
    w = rng().standard_normal(w_shape).astype(np.float32)
    return make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", **attrs)], [value("x", F, x_shape)],
                      [value("y", F, None)], [init("w", w)])


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ([1, 2, 5, 5], [3, 2, 3, 3], {"strides": [0, 0]}),               # libonnx divides by the stride
    ([1, 2, 5, 5], [3, 2, 3, 3], {"strides": [0, 0], "kernel_shape": [3, 3]}),
    ([1, 2, 5, 5], [3, 2, 3, 3, 3, 3, 3, 3], {}),                    # kernel rank above the input's
    ([1, 2, 5, 5], [3, 2, 3, 3], {"kernel_shape": [3, 3, 3, 3, 3]}),
    ([1, 2, 5, 5], [3, 2, 3, 3], {"pads": [1]}),
    ([1, 2, 5, 5], [3, 2, 3, 3], {"dilations": [1, 1, 1]}),
    ([1, 2, 5, 5], [3, 2, 3, 3], {"strides": [-1, -1]}),
    ([1, 2, 5, 5], [3, 2, 3, 3], {"dilations": [-4, -4]}),
    ([1, 2, 5, 5], [3, 2, 3, 3], {"group": 0}),
    ([1, 2, 5, 5], [3, 2, 3, 3], {"group": -1}),
    ([1, 2, 5, 5], [3, 2, 3, 3], {"pads": [-9, -9, -9, -9]}),
    ([1, 2, 5, 5], [3, 2, 3, 3], {"auto_pad": "SAME_UPPER", "strides": [0, 0]}),
])
def test_malformed_conv_attributes_are_model_errors(x_shape, w_shape, attrs):
    refused(conv_model(x_shape, w_shape, **attrs), {"x": np.zeros(x_shape, np.float32)})


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [0, 0]}),
    ("MaxPool", {"kernel_shape": [2, 2, 2, 2, 2, 2]}),
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [1]}),
    ("MaxPool", {"kernel_shape": [-3, 2]}),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [0, 1]}),
    ("AveragePool", {"kernel_shape": [2]}),
    ("AveragePool", {"kernel_shape": [2, 2], "pads": [1, 1]}),
    ("AveragePool", {"kernel_shape": [0, 0]}),
    ("MaxPool", {}),
])
def test_malformed_pool_attributes_are_model_errors(op, attrs):
    model = make_model([helper.make_node(op, ["x"], ["y"], name="p", **attrs)], [value("x", F, [1, 2, 6, 6])],
                       [value("y", F, None)])
    refused(model, {"x": np.zeros((1, 2, 6, 6), np.float32)})


@pytest.mark.parametrize("attrs", [
    {"strides": [0, 0]}, {"output_padding": [1]}, {"output_shape": [1]}, {"kernel_shape": [3, 3, 3]},
    {"pads": [1, 1]}, {"dilations": [0, 0]}, {"group": 0}, {"output_padding": [5, 5]},
])
def test_malformed_conv_transpose_attributes_are_model_errors(attrs):
    w = rng().standard_normal((2, 3, 3, 3)).astype(np.float32)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="t", **attrs)],
                       [value("x", F, [1, 2, 4, 4])], [value("y", F, None)], [init("w", w)])
    refused(model, {"x": np.zeros((1, 2, 4, 4), np.float32)})


def test_huge_declared_dims_of_an_input():
    # Declared, never allocated: load works, the static shape folds into a Shape; a feed must match.
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Relu", ["x"], ["y"])]
    model = make_model(nodes, [value("x", F, [2**62, 2**62])], [value("s", TensorProto.INT64, [2]),
                                                               value("y", F, None)])
    try:
        sess = load(model)
    except (tfo.ModelError, tf.ShapeError):  # the folded Shape's placeholder has more elements than 2^64
        return
    assert sess.get_inputs()[0].shape == [2**62, 2**62]
    with pytest.raises(tfo.InputError, match="declares"):
        sess.run(None, {"x": np.zeros((1, 1), np.float32)})


def test_huge_reshape_and_expand_are_refused_before_allocating():
    for node, inits in ((helper.make_node("Expand", ["x", "s"], ["y"], name="big"),
                         [init("s", np.array([2**40, 2**40], np.int64))]),
                        (helper.make_node("Tile", ["x", "s"], ["y"], name="big"),
                         [init("s", np.array([2**40], np.int64))])):
        model = make_model([node], [value("x", F, [1])], [value("y", F, None)], inits)
        sess = load(model, shape_inference=False)
        with pytest.raises(tfo.ModelError, match="'big'.*max_tensor_bytes"):
            sess.run(None, {"x": np.zeros(1, np.float32)})


def test_newer_opset_is_named():
    with pytest.raises(tfo.UnsupportedError, match="opset 18.*1 through 17"):
        load(relu_model(opset=18, ir_version=8))


def test_unsupported_op_names_node_type_and_version():
    model = make_model([helper.make_node("LpNormalization", ["x"], ["y"], name="lp0")], [value("x", F, [2, 2])],
                       [value("y", F, [2, 2])])
    with pytest.raises(tfo.UnsupportedError, match=r"node 'lp0' \(LpNormalization version 1\).*not implemented"):
        load(model)


def test_unsupported_version_lists_the_implemented_ones():
    # Reshape 1 took the shape as an attribute; versions 5, 13 and 14 are implemented.
    model = make_model([helper.make_node("Reshape", ["x"], ["y"], name="old", shape=[4])], [value("x", F, [2, 2])],
                       [value("y", F, [4])], opset=4, ir_version=3)
    with pytest.raises(tfo.UnsupportedError, match=r"'old' \(Reshape version 1\).*implemented versions: 5, 13, 14"):
        load(model)


def external_model(location, offset=0, length=8):
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [value("x", F, [2])], [value("y", F, [2])],
                       [init("w", np.zeros(2, np.float32))])
    t = model.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return model


@pytest.mark.parametrize("location", ["../secret.bin", "sub/../../secret.bin", "/tmp/secret.bin", ""])
def test_external_data_may_not_leave_the_folder(tmp_path, location):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\1" * 8)
    path = folder / "m.onnx"
    path.write_bytes(external_model(location).SerializeToString())
    with pytest.raises(tfo.ModelError, match="relative path inside the model's folder"):
        tfo.InferenceSession(str(path), backend="cpu")


def test_external_data_symlink_out_of_the_folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\1" * 8)
    os.symlink(tmp_path / "secret.bin", folder / "w.bin")
    path = folder / "m.onnx"
    path.write_bytes(external_model("w.bin").SerializeToString())
    with pytest.raises(tfo.ModelError, match="outside the model's folder"):
        tfo.InferenceSession(str(path), backend="cpu")


def test_external_data_through_a_symlinked_folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "w.bin").write_bytes(b"\1" * 8)
    os.symlink(tmp_path / "outside", folder / "sub")
    path = folder / "m.onnx"
    path.write_bytes(external_model("sub/w.bin").SerializeToString())
    with pytest.raises(tfo.ModelError, match="outside the model's folder"):
        tfo.InferenceSession(str(path), backend="cpu")


def test_external_data_past_the_end_and_special_files(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\0" * 8)
    path = tmp_path / "m.onnx"
    path.write_bytes(external_model("w.bin", offset=4).SerializeToString())
    with pytest.raises(tfo.ModelError, match="past the end"):
        tfo.InferenceSession(str(path), backend="cpu")
    os.mkfifo(tmp_path / "fifo")
    path.write_bytes(external_model("fifo").SerializeToString())
    with pytest.raises(tfo.ModelError, match="FIFO"):
        tfo.InferenceSession(str(path), backend="cpu")


def test_external_data_from_bytes_needs_a_folder():
    with pytest.raises(tfo.ModelError, match="folder"):
        load(external_model("w.bin"))


def test_bad_feeds():
    sess = load(relu_model())
    with pytest.raises(tfo.InputError, match="not an input"):
        sess.run(None, {"z": np.zeros(2, np.float32)})
    with pytest.raises(tfo.InputError, match="no feed"):
        sess.run(None, {})
    with pytest.raises(tfo.InputError, match="float32"):
        sess.run(None, {"x": np.zeros(2, np.float64)})
    with pytest.raises(tfo.InputError, match="not an output"):
        sess.run(["nope"], {"x": np.zeros(2, np.float32)})
