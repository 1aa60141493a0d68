"""tinyfin.onnx's tensor path: tinyfin tensors (on any backend) and DLPack tensors as feeds, tinyfin
tensors as outputs (output_type="tinyfin"), with nothing passing through numpy; checked against
the float64 reference of test_session's MLP and against the numpy path."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin as tf
import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value
from test_session import mlp_model


class DLPackOnly:
    """A foreign tensor that only speaks DLPack (as a torch or JAX tensor would)."""

    def __init__(self, array):
        self._a = array

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


@pytest.fixture
def no_numpy(monkeypatch):
    """Any tinyfin tensor -> numpy conversion fails while the fixture is active."""
    def refuse(*args, **kwargs):
        raise AssertionError("a tensor went through numpy")
    monkeypatch.setattr(tf.Tensor, "numpy", refuse)
    monkeypatch.setattr(tf.Tensor, "__array__", refuse)


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
def test_tinyfin_tensors_in_and_out_on_the_session_device(backend, no_numpy):
    r = rng(5)
    model, reference = mlp_model(r)
    sess = tfo.InferenceSession(model.SerializeToString(), backend=backend)
    x = r.standard_normal((4, 8)).astype(np.float32)
    feed = tf.tensor(x).to(backend)
    [probs] = sess.run(None, {"x": feed}, output_type="tinyfin")
    assert isinstance(probs, tf.Tensor)
    assert str(probs.device).startswith(backend) and probs.dtype == tf.float32 and tuple(probs.shape) == (4, 10)
    got = np.array(probs.to("cpu").tolist())  # tolist: the numpy conversions are refused here
    np.testing.assert_allclose(got, reference(x.astype(np.float64)), rtol=1e-4, atol=1e-6)


def test_dlpack_feed_and_output():
    r = rng(6)
    model, reference = mlp_model(r)
    sess = tfo.InferenceSession(model.SerializeToString(), backend="cpu")
    x = r.standard_normal((3, 8)).astype(np.float32)
    [probs] = sess.run(None, {"x": DLPackOnly(x)}, output_type="tinyfin")
    out = np.from_dlpack(probs)  # a DLPack consumer takes the output as it is
    np.testing.assert_allclose(out, reference(x.astype(np.float64)), rtol=1e-4, atol=1e-6)
    # numpy outputs from tensor feeds: the declared element type.
    [probs_np] = sess.run(None, {"x": DLPackOnly(x)})
    assert isinstance(probs_np, np.ndarray) and probs_np.dtype == np.float32
    np.testing.assert_array_equal(probs_np, out)


def test_tensor_path_matches_numpy_path_for_int_and_narrow_types():
    # y = Cast(x_u8 -> float) * w + i64 index gather: uint8 computes in int32, int64 stays int64.
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
             helper.make_node("Gather", ["w", "idx"], ["wi"], axis=0),
             helper.make_node("Mul", ["xf", "wi"], ["y"]),
             helper.make_node("Identity", ["idx"], ["idx_out"])]
    w = rng(7).standard_normal((5, 3)).astype(np.float32)
    model = make_model(nodes, [value("x", TensorProto.UINT8, [2, 3]), value("idx", TensorProto.INT64, [2])],
                       [value("y", TensorProto.FLOAT, [2, 3]), value("idx_out", TensorProto.INT64, [2])],
                       [init("w", w)])
    sess = tfo.InferenceSession(model.SerializeToString(), backend="cpu")
    x = np.array([[1, 2, 250], [0, 7, 9]], np.uint8)
    idx = np.array([4, 1], np.int64)
    by_numpy = sess.run(None, {"x": x, "idx": idx})
    y, idx_out = sess.run(None, {"x": x, "idx": tf.tensor(idx)}, output_type="tinyfin")
    assert y.dtype == tf.float32 and idx_out.dtype == tf.int64
    np.testing.assert_array_equal(y.numpy(), by_numpy[0])
    np.testing.assert_array_equal(y.numpy(), x.astype(np.float32) * w[idx])
    np.testing.assert_array_equal(idx_out.numpy(), idx)
    # A tinyfin feed must already be its input's compute dtype (uint8 computes in int32).
    with pytest.raises(tfo.InputError, match="i32"):
        sess.run(None, {"x": tf.tensor(x.astype(np.float32)), "idx": idx}, output_type="tinyfin")
    [y32] = sess.run(["y"], {"x": tf.tensor(x.astype(np.int32)), "idx": idx}, output_type="tinyfin")
    np.testing.assert_array_equal(y32.numpy(), by_numpy[0])
    with pytest.raises(tfo.InputError, match="output_type"):
        sess.run(None, {"x": x, "idx": idx}, output_type="torch")
