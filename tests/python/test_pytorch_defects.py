"""The four silent defects of issue 32, each as PyTorch behaves: select_backend_for_memory keeps
the backends backend_set named; save/load through file objects; Module.to moves parameters in
place (an optimizer built before keeps training); ops on two devices raise DeviceError. Expected
values are worked by hand or with numpy."""
import builtins
import io
import os

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.nn as nn
from conftest import other_backends, to_np


# ---- 1. select_backend_for_memory after backend_set ----------------------------------------------

@pytest.mark.parametrize("name", tf.available_backends())
def test_select_backend_for_memory_keeps_the_backends_backend_set_named(name):
    # "auto" skips software devices (lavapipe) and blas: the old code fell back to it and chose cpu.
    assert tf.backend_set(name)
    assert tf.select_backend_for_memory(1 << 20) == name
    assert tf.backend_name() == name
    reports_memory = any(d.get("memory_free") for b in tf.backends() if b["name"] == name for d in b["devices"])
    if reports_memory:  # a device that reports no free memory counts as fitting (opengl)
        with pytest.raises(tf.OutOfMemoryError):
            tf.select_backend_for_memory(1 << 62)
    else:
        assert tf.select_backend_for_memory(1 << 62) == name
    assert tf.backend_name() == name  # a failed call changes nothing


def test_select_backend_for_memory_with_a_list():
    names = tf.available_backends()
    tf.backend_set(",".join(names))
    assert tf.select_backend_for_memory(1 << 20) == names[0]
    assert tf.select_backend_for_memory(1 << 20, "cpu") == "cpu"


# ---- 2. save/load with file objects ---------------------------------------------------------------

def _state():
    return {"w": tf.tensor([[1.0, 2.0], [3.0, 4.0]]), "b": tf.tensor([5, 6])}


def test_save_and_load_through_a_binary_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "x.tfnn"
    with open(path, "wb") as f:
        tf.save(_state(), f)
    assert os.listdir(tmp_path) == ["x.tfnn"]  # no file named after the file object
    assert path.stat().st_size > 0
    with open(path, "rb") as f:
        back = tf.load(f)
    assert list(back) == ["w", "b"]
    np.testing.assert_array_equal(to_np(back["w"]), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(to_np(back["b"]), [5, 6])
    assert back["b"].dtype == tf.int64
    # the same bytes as a save to the path (C++ nn::load reads them)
    tf.save(_state(), tmp_path / "y.tfnn")
    assert path.read_bytes() == (tmp_path / "y.tfnn").read_bytes()


def test_save_and_load_through_bytesio(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    buf = io.BytesIO()
    tf.save(_state(), buf)
    assert len(buf.getvalue()) > 0
    assert os.listdir(tmp_path) == []
    assert buf.getvalue()[:4] == b"TFNN"
    buf.seek(0)
    back = tf.load(buf)
    np.testing.assert_array_equal(to_np(back["w"]), [[1, 2], [3, 4]])


def test_save_and_load_accept_path_likes(tmp_path):
    tf.save(_state(), tmp_path / "p.tfnn")  # pathlib.Path
    tf.save(_state(), os.fsencode(str(tmp_path / "q.tfnn")))  # bytes path
    np.testing.assert_array_equal(to_np(tf.load(tmp_path / "p.tfnn")["b"]), [5, 6])
    np.testing.assert_array_equal(to_np(tf.load(str(tmp_path / "q.tfnn"))["b"]), [5, 6])


@pytest.mark.parametrize("bad", [42, None, 1.5, ["x.tfnn"]])
def test_save_and_load_reject_what_is_no_file(bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(builtins.TypeError, match="path .* or a binary file"):
        tf.save(_state(), bad)
    with pytest.raises(builtins.TypeError, match="path .* or a binary file"):
        tf.load(bad)
    assert os.listdir(tmp_path) == []


def test_save_rejects_a_text_mode_file(tmp_path):
    with open(tmp_path / "t.tfnn", "w") as f:
        with pytest.raises(builtins.TypeError, match="text mode"):
            tf.save(_state(), f)


# ---- 3. Module.to moves parameters in place ------------------------------------------------------

def _devices():
    return ["cpu"] + other_backends()


@pytest.mark.parametrize("device", _devices())
def test_optimizer_built_before_module_to_keeps_training(device):
    model = nn.Linear(2, 1, seed=3)
    params = list(model.parameters())
    w0, b0 = to_np(model.weight).copy(), to_np(model.bias).copy()
    opt = tf.optim.SGD(model.parameters(), lr=0.1)
    model.to(device)
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]  # the same objects
    assert model.weight is params[0] and model.weight.device == tf.device(device)
    x = tf.tensor([[1.0, 2.0], [3.0, -1.0]], device=device)
    loss = model(x).sum()
    loss.backward()
    opt.step()
    # d loss / dW = sum over rows of x; d loss / db = number of rows
    np.testing.assert_allclose(to_np(model.weight), w0 - 0.1 * np.array([[4.0, 1.0]]), rtol=1e-6)
    np.testing.assert_allclose(to_np(model.bias), b0 - 0.1 * 2, rtol=1e-6)


@pytest.mark.parametrize("device", _devices())
def test_module_to_moves_python_parameters_and_grads_in_place(device):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(tf.tensor([1.0, 2.0]))

        def forward(self, x):
            return x * self.w

    m = M()
    w = m.w
    (m(tf.tensor([3.0, 4.0])).sum()).backward()
    m.to(device)
    assert m.w is w and w.device == tf.device(device) and w.requires_grad and w.is_leaf
    assert w.grad.device == tf.device(device)
    np.testing.assert_array_equal(to_np(w.grad), [3, 4])
    m.to("cpu")
    np.testing.assert_array_equal(to_np(m.w), [1, 2])


def test_module_to_dtype():
    m = nn.Linear(2, 2, seed=1)
    w = m.weight
    m.to(tf.float16)
    assert m.weight is w and w.dtype == tf.float16


# ---- 4. mixed devices -------------------------------------------------------------------------

@pytest.mark.parametrize("device", other_backends())
def test_ops_on_two_devices_raise_device_error_naming_both(device):
    assert tf.get_mixed_devices() == "strict"
    a, b = tf.ones(2), tf.ones(2, device=device)
    other = str(b.device)
    for fn in (lambda: a + b, lambda: b * a, lambda: tf.matmul(a.reshape(1, 2), b.reshape(2, 1)),
               lambda: tf.where(a > 0, a, b), lambda: tf.cat([a, b]), lambda: tf.maximum(b, a)):
        with pytest.raises(tf.DeviceError) as e:
            fn()
        assert "got cpu and " + other in str(e.value) or "got " + other + " and cpu;" in str(e.value)
    lin = nn.Linear(2, 1, seed=0).to(device)
    with pytest.raises(tf.DeviceError):
        lin(tf.ones(1, 2))
    # Python numbers and rank-0 cpu tensors are scalars, allowed as in PyTorch
    np.testing.assert_array_equal(to_np(b + 1), [2, 2])
    c = b * tf.tensor(3.0)
    assert c.device == b.device
    np.testing.assert_array_equal(to_np(c), [3, 3])
    # copying between devices is explicit and still works
    d = tf.zeros(2)
    d.copy_(b)
    np.testing.assert_array_equal(to_np(d), [1, 1])


@pytest.mark.parametrize("device", other_backends())
def test_mixed_devices_move_mode_is_selectable(device):
    tf.set_mixed_devices("move")
    try:
        r = tf.ones(2) + tf.ones(2, device=device)
        np.testing.assert_array_equal(to_np(r), [2, 2])
    finally:
        tf.set_mixed_devices("strict")
    with pytest.raises(tf.ValueError):
        tf.set_mixed_devices("sometimes")


def test_two_non_cpu_devices_raise_too():
    others = other_backends()
    if len(others) < 2:
        pytest.skip("needs two non-cpu backends (CI has vulkan on lavapipe and blas)")
    a, b = tf.ones(2, device=others[0]), tf.ones(2, device=others[1])
    with pytest.raises(tf.DeviceError, match=f"{others[0]}.*{others[1]}|{others[1]}.*{others[0]}"):
        a + b
