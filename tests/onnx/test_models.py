"""Real exported models (tests/onnx/models/: examples/fashion_mnist's CNN and char_gpt,
torchvision's resnet18, a BERT-style encoder, a Llama-style decoder block with a key/value cache;
made by tools/onnx_export_models.py with PyTorch, parameters regenerated here from numpy seeds) on
every backend against PyTorch's stored outputs, within model_cases.TOLERANCES, with the load-time
fusions each is expected to get (and on cpu unfused too). The fallback count
of each run is printed (pytest -s) and checked against its ceiling: only shape arithmetic on int64
values (Gather of a Shape, integer Div) may leave a GPU backend (shape values are small int64
tensors; ONNX Runtime also computes them on its CPU provider)."""
import pytest

import model_cases
import tinyfin as tf

# cuda where it loads (scripts/gpu-check runs this file with -k cuda on an NVIDIA GPU).
BACKENDS = [b for b in ("cpu", "vulkan", "opengl", "opencl", "cuda") if b in tf.available_backends()]

_DATA = {}


def _data(name):
    if name not in _DATA:
        _DATA[name] = model_cases.load(name)
    return _DATA[name]


# The load-time fusions (docs/onnx.md) each exported model gets.
FUSIONS = {
    "fashion_cnn": {"conv_activation": 2},
    "char_gpt": {"gelu": 4, "attention": 4},
    "resnet18": {"conv_batchnorm": 20, "conv_activation": 17},
    "bert": {"gelu": 2, "attention": 2, "matmul_bias": 12},
    "llama_block": {"rms_norm": 2, "attention": 1},
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(model_cases.TOLERANCES))
def test_model_matches_pytorch(name, backend):
    r = model_cases.run_model(name, backend, _data(name))
    print(f"{name} on {backend}: error/tolerance {r['ratio']:.3f}, {r['fallbacks']} fallbacks "
          f"{r['fallback_ops']}, {r['seconds']:.2f} s, fusions {r['fusions']}")
    assert r["fusions"] == FUSIONS[name]
    assert r["shapes_ok"], "an output's shape or dtype differs from PyTorch's"
    assert r["ratio"] <= 1.0, f"error {r['ratio']:.3f} times the tolerance {model_cases.TOLERANCES[name]}"
    if backend == "cpu":
        assert r["fallbacks"] == 0
    else:
        assert set(r["fallback_ops"]) <= {"Gather", "Div"}, r["fallback_ops"]


@pytest.mark.parametrize("name", list(model_cases.TOLERANCES))
def test_model_unfused_matches_pytorch(name, monkeypatch):
    """The graphs as exported (TINYFIN_ONNX_FUSE=0) pass too: the fusions are not what makes the
    outputs right."""
    monkeypatch.setenv("TINYFIN_ONNX_FUSE", "0")
    r = model_cases.run_model(name, "cpu", _data(name))
    assert r["fusions"] == {}
    assert r["shapes_ok"] and r["ratio"] <= 1.0, r["ratio"]


def test_stripped_weights_are_required():
    """The committed files carry no parameter data: loading one unfilled is a ModelError, so the
    outputs above depend on model_weights' regeneration."""
    import os
    import tinyfin.onnx as tfo
    with pytest.raises(tfo.ModelError):
        tfo.InferenceSession(os.path.join(model_cases.MODELS, "fashion_cnn.onnx"), backend="cpu")
