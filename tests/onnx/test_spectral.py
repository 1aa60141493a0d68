"""DFT, STFT and MelWeightMatrix (onnx/ops_spectral.cpp) against numpy's FFT in float64 and the
mel filter bank written here from ONNX 1.12's definition; an audio front end (STFT, power, mel
projection, log) written with onnx.helper. On cpu and every other loaded backend."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value

BACKENDS = ["cpu"] + other_backends()


def complex_of(y):
    return y[..., 0] + 1j * y[..., 1]


def run_dft(x, backend, length=None, **attrs):
    inputs = ["x"] + (["n"] if length is not None else [])
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    inits = [init("n", np.array(length, np.int64))] if length is not None else []
    model = make_model([node], [value("x", TensorProto.FLOAT, x.shape)], [value("y", TensorProto.FLOAT, None)], inits)
    return tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, {"x": x})[0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axis, length, onesided", [(1, None, 0), (2, 7, 0), (1, 4, 1), (-2, None, 1), (2, 9, 1)])
def test_dft_real(backend, axis, length, onesided):
    x = rng(1).standard_normal((2, 5, 6, 1)).astype(np.float32)
    got = run_dft(x, backend, length, axis=axis, onesided=onesided)
    ax = axis if axis >= 0 else axis + 4
    want = np.fft.fft(x[..., 0].astype(np.float64), n=length, axis=ax)
    if onesided:
        n = want.shape[ax]
        want = np.take(want, np.arange(n // 2 + 1), axis=ax)
    assert got.shape == want.shape + (2,)
    np.testing.assert_allclose(complex_of(got), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("inverse, length", [(0, None), (1, None), (1, 3), (0, 8)])
def test_dft_complex(backend, inverse, length):
    g = rng(2)
    x = g.standard_normal((1, 3, 6, 2)).astype(np.float32)
    got = run_dft(x, backend, length, axis=2, inverse=inverse)
    z = complex_of(x.astype(np.float64))
    want = (np.fft.ifft if inverse else np.fft.fft)(z, n=length, axis=2)
    np.testing.assert_allclose(complex_of(got), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("window, onesided", [(True, 1), (False, 0)])
def test_stft(backend, window, onesided):
    g = rng(3)
    sig = g.standard_normal((2, 40, 1)).astype(np.float32)
    length, step = 8, 5
    win = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(length) / length)).astype(np.float32)
    inputs = ["s", "step", "w" if window else "", "" if window else "len"]
    inits = [init("step", np.array(step, np.int64)), init("len", np.array(length, np.int64))]
    if window:
        inits.append(init("w", win))
    node = helper.make_node("STFT", inputs, ["y"], onesided=onesided)
    model = make_model([node], [value("s", TensorProto.FLOAT, sig.shape)], [value("y", TensorProto.FLOAT, None)], inits)
    got = tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, {"s": sig})[0]
    frames = (40 - length) // step + 1
    w = win.astype(np.float64) if window else np.ones(length)
    want = np.stack([np.fft.fft(sig[:, f * step:f * step + length, 0].astype(np.float64) * w, axis=-1)
                     for f in range(frames)], axis=1)
    if onesided:
        want = want[..., :length // 2 + 1]
    assert got.shape == want.shape + (2,)
    np.testing.assert_allclose(complex_of(got), want, rtol=1e-4, atol=1e-4)


def mel_reference(mels, dft_length, rate, lo, hi):
    """ONNX 1.12's MelWeightMatrix definition, in float64."""
    edges_mel = np.arange(mels + 2) * ((2595 * np.log10(1 + hi / 700) - 2595 * np.log10(1 + lo / 700)) /
                                       (mels + 2)) + 2595 * np.log10(1 + lo / 700)
    edges = np.floor((dft_length + 1) * (700 * (10 ** (edges_mel / 2595) - 1)) / rate).astype(int)
    out = np.zeros((dft_length // 2 + 1, mels))
    for i in range(mels):
        left, center, right = edges[i:i + 3]
        if center == left:
            out[center, i] = 1
        else:
            out[left:center + 1, i] = (np.arange(left, center + 1) - left) / (center - left)
        if right > center:
            out[center:right, i] = (right - np.arange(center, right)) / (right - center)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mels, dft_length, rate, lo, hi", [(8, 16, 8192, 0.0, 4096.0), (5, 64, 16000, 80.0, 7600.0)])
def test_mel_weight_matrix(backend, mels, dft_length, rate, lo, hi):
    node = helper.make_node("MelWeightMatrix", ["m", "n", "r", "lo", "hi"], ["y"])
    inits = [init("m", np.array(mels, np.int32)), init("n", np.array(dft_length, np.int32)),
             init("r", np.array(rate, np.int32)), init("lo", np.array(lo, np.float32)),
             init("hi", np.array(hi, np.float32))]
    model = make_model([node], [], [value("y", TensorProto.FLOAT, None)], inits)
    got = tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, {})[0]
    np.testing.assert_allclose(got, mel_reference(mels, dft_length, rate, lo, hi), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_log_mel_front_end(backend):
    # signal -> STFT (Hann window from HannWindow) -> power -> mel projection -> log: a whole
    # front end as an exporter writes it, against numpy.
    g = rng(4)
    sig = g.standard_normal((1, 64, 1)).astype(np.float32)
    n_fft, step, mels = 16, 8, 4
    nodes = [
        helper.make_node("HannWindow", ["size"], ["win"]),
        # onesided written out: ONNX 1.12's shape inference gives a full spectrum for a windowed
        # STFT that leaves the attribute at its default (1), which would contradict the MatMul.
        helper.make_node("STFT", ["s", "step", "win"], ["spec"], onesided=1),
        helper.make_node("Mul", ["spec", "spec"], ["sq"]),
        helper.make_node("ReduceSum", ["sq", "last"], ["power"], keepdims=0),
        helper.make_node("MelWeightMatrix", ["m", "size", "rate", "lo", "hi"], ["mel"]),
        helper.make_node("MatMul", ["power", "mel"], ["mp"]),
        helper.make_node("Add", ["mp", "eps"], ["mpe"]),
        helper.make_node("Log", ["mpe"], ["y"]),
    ]
    inits = [init("size", np.array(n_fft, np.int64)), init("step", np.array(step, np.int64)),
             init("last", np.array([-1], np.int64)), init("m", np.array(mels, np.int64)),
             init("rate", np.array(8000, np.int64)), init("lo", np.array(0.0, np.float32)),
             init("hi", np.array(4000.0, np.float32)), init("eps", np.array(1e-6, np.float32))]
    model = make_model(nodes, [value("s", TensorProto.FLOAT, sig.shape)], [value("y", TensorProto.FLOAT, None)], inits)
    got = tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, {"s": sig})[0]
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)
    frames = (64 - n_fft) // step + 1
    spec = np.stack([np.fft.rfft(sig[0, f * step:f * step + n_fft, 0] * win) for f in range(frames)])
    want = np.log(np.abs(spec) ** 2 @ mel_reference(mels, n_fft, 8000, 0.0, 4000.0) + 1e-6)[None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_invalid_spectral_nodes():
    x = np.zeros((1, 4, 3), np.float32)  # last dim 3: neither real nor complex
    node = helper.make_node("DFT", ["x"], ["y"], name="d")
    model = make_model([node], [value("x", TensorProto.FLOAT, x.shape)], [value("y", TensorProto.FLOAT, None)])
    with pytest.raises(tfo.ModelError, match=r"'d'.*1 or 2"):
        tfo.InferenceSession(model.SerializeToString(), backend="cpu").run(None, {"x": x})
    sig = np.zeros((1, 4, 1), np.float32)
    node = helper.make_node("STFT", ["s", "step", "", "len"], ["y"], name="st")
    model = make_model([node], [value("s", TensorProto.FLOAT, sig.shape)], [value("y", TensorProto.FLOAT, None)],
                       [init("step", np.array(1, np.int64)), init("len", np.array(9, np.int64))])
    with pytest.raises(tfo.ModelError, match=r"'st'.*frame length 9"):
        tfo.InferenceSession(model.SerializeToString(), backend="cpu").run(None, {"s": sig})


def test_huge_dft_length_refused():
    # dft_length is an input: a matrix or padded signal past max_tensor_bytes is a ModelError
    # before anything is allocated.
    x = np.zeros((1, 4, 1), np.float32)
    node = helper.make_node("DFT", ["x", "n"], ["y"], name="big")
    model = make_model([node], [value("x", TensorProto.FLOAT, x.shape)], [value("y", TensorProto.FLOAT, None)],
                       [init("n", np.array(1 << 40, np.int64))])
    with pytest.raises(tfo.ModelError, match=r"'big'.*max_tensor_bytes"):
        tfo.InferenceSession(model.SerializeToString(), backend="cpu").run(None, {"x": x})
