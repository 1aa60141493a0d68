"""tinyfin's exception classes in Python and bad input: clear errors, never a crash."""
import builtins

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.nn.functional as F

HIERARCHY = [("ShapeError", builtins.ValueError), ("DTypeError", builtins.TypeError),
             ("ValueError", builtins.ValueError), ("DeviceError", builtins.RuntimeError),
             ("BackendError", builtins.RuntimeError), ("FallbackError", builtins.RuntimeError),
             ("OutOfMemoryError", builtins.MemoryError), ("PluginError", builtins.RuntimeError),
             ("AutogradError", builtins.RuntimeError)]


@pytest.mark.parametrize("name,builtin", HIERARCHY)
def test_exception_classes(name, builtin):
    cls = getattr(tf, name)
    assert issubclass(cls, tf.Error) and issubclass(cls, builtin) and issubclass(tf.Error, builtins.RuntimeError)
    assert cls.__module__ == "tinyfin" and cls.__name__ == name


BAD = [
    ("ragged list", lambda: tf.tensor([[1, 2], [3]]), tf.ShapeError, "rectangular"),
    ("None data", lambda: tf.tensor(None), tf.DTypeError, "None"),
    ("None inside", lambda: tf.tensor([1.0, None]), tf.DTypeError, "numbers"),
    ("strings", lambda: tf.tensor(["a"]), tf.DTypeError, "numbers"),
    ("broadcast", lambda: tf.ones(2, 3) + tf.ones(4, 3), tf.ShapeError, "broadcast"),
    ("matmul shapes", lambda: tf.ones(2, 3) @ tf.ones(2, 3), tf.ShapeError, ""),
    ("dtype mix", lambda: tf.ones(2) + tf.ones(2, dtype=tf.int32), tf.DTypeError, ""),
    ("bad dim", lambda: tf.sum(tf.ones(2, 3), dim=5), tf.ShapeError, ""),
    ("bad dim type", lambda: tf.sum(tf.ones(2, 3), dim="x"), tf.ValueError, "dim"),
    ("index range", lambda: tf.ones(3)[5], tf.ValueError, "out of range"),
    ("too many indices", lambda: tf.ones(3)[0, 0], tf.ShapeError, "indices"),
    ("negative step", lambda: tf.ones(3)[::-1], tf.ValueError, "tinyfin.flip"),
    ("two index arrays", lambda: tf.ones(3, 3)[[0], [1]], tf.ValueError, "one index array"),
    ("float index", lambda: tf.ones(3)[1.5], tf.DTypeError, "integers"),
    ("reshape size", lambda: tf.ones(6).reshape(4, 2), tf.ShapeError, ""),
    ("reshape type", lambda: tf.ones(6).reshape("a"), tf.ValueError, "integers"),
    ("view impossible", lambda: tf.ones(2, 3).T.view(6), tf.ShapeError, ""),
    ("permute", lambda: tf.ones(2, 3).permute(0, 0), tf.ShapeError, ""),
    ("unsqueeze", lambda: tf.ones(2).unsqueeze(5), tf.ShapeError, "dim"),
    ("item", lambda: tf.ones(2).item(), tf.ShapeError, "expected 1"),
    ("bool of many", lambda: bool(tf.ones(2)), tf.ValueError, "ambiguous"),
    ("operand type", lambda: tf.ones(2) + "x", builtins.TypeError, ""),
    ("operand None", lambda: tf.add(tf.ones(2), None), tf.DTypeError, "Tensor or a number"),
    ("both numbers", lambda: tf.add(1, 2), tf.DTypeError, "Tensor"),
    ("bad dtype name", lambda: tf.zeros(2, dtype="float64"), tf.DTypeError, "float64"),
    ("bad dtype type", lambda: tf.zeros(2, dtype=3.5), tf.DTypeError, "dtype"),
    ("bad device", lambda: tf.zeros(2, device="nowhere"), tf.DeviceError, "nowhere"),
    ("device type", lambda: tf.zeros(2, device=1.5), tf.DeviceError, "device"),
    ("negative size", lambda: tf.zeros(-1), tf.ShapeError, "negative"),
    ("size type", lambda: tf.zeros(2.5), tf.ShapeError, "integers"),
    ("conv shapes", lambda: F.conv2d(tf.ones(1, 3, 5, 5), tf.ones(2, 4, 3, 3)), tf.ShapeError, ""),
    ("pool kernel", lambda: F.max_pool2d(tf.ones(1, 1, 4, 4), (1, 2, 3)), tf.ValueError, "pair"),
    ("gelu approx", lambda: F.gelu(tf.ones(2), approximate="x"), tf.ValueError, "approximate"),
    ("reduction", lambda: F.cross_entropy(tf.ones(2, 3), tf.tensor([0, 1]), reduction="avg"), tf.ValueError, "reduction"),
    ("labels range", lambda: F.cross_entropy(tf.ones(2, 3), tf.tensor([0, 7])).item(), tf.ValueError, ""),
    ("embedding range", lambda: F.embedding(tf.tensor([9]), tf.ones(3, 2)).tolist(), tf.ValueError, ""),
    ("grad of int", lambda: tf.ones(2, dtype=tf.int32).requires_grad_(), tf.Error, ""),
    ("backward non-scalar", lambda: (tf.ones(2, requires_grad=True) * 2).backward(), tf.Error, ""),
    ("inplace on leaf", lambda: tf.ones(2, requires_grad=True).add_(1), tf.AutogradError, ""),
    ("layer_norm shape", lambda: F.layer_norm(tf.ones(2, 3), (4,)), tf.ShapeError, "normalized_shape"),
    ("load missing", lambda: tf.load("/nonexistent/file.tfnn"), tf.ValueError, "nonexistent"),
    ("save bad obj", lambda: tf.save(object(), "/tmp/x.tfnn"), builtins.TypeError, "cannot save a object"),
    ("from_dlpack", lambda: tf.from_dlpack("no"), tf.ValueError, "dlpack"),
    ("from_numpy type", lambda: tf.from_numpy([1, 2]), builtins.TypeError, ""),
    ("attention dropout", lambda: F.scaled_dot_product_attention(tf.ones(2, 2), tf.ones(2, 2), tf.ones(2, 2), dropout_p=0.1),
     tf.ValueError, "dropout"),
    ("len of scalar", lambda: len(tf.tensor(1.0)), builtins.TypeError, ""),
    ("split size", lambda: tf.split(tf.ones(4), 0), tf.ValueError, "positive"),
    ("pad pairs", lambda: tf.pad(tf.ones(2), (1,)), tf.ShapeError, "pair"),
]


@pytest.mark.parametrize("what,fn,cls,text", BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises(what, fn, cls, text):
    with pytest.raises(cls) as info:
        fn()
    assert text.lower() in str(info.value).lower()
    assert str(info.value)  # every error carries a message


def test_message_without_duplicate_prefix():
    with pytest.raises(tf.ShapeError) as info:
        tf.ones(2, 3) + tf.ones(4, 3)
    assert not str(info.value).startswith("ShapeError:")
    assert "add" in str(info.value)


def test_catch_as_builtin():
    try:
        tf.ones(2, 3) @ tf.ones(5, 2)
    except builtins.ValueError as e:
        assert isinstance(e, tf.ShapeError)
    else:
        pytest.fail("no error")


def test_strict_backend_error(monkeypatch):
    assert not tf.backend_set("definitely-not-a-backend")


def test_numpy_object_arrays():
    with pytest.raises(tf.DTypeError):
        tf.tensor(np.array([object()]))
