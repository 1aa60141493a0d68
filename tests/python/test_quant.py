"""The block-quantized dtypes from Python: the same API as C++ (docs/quantization.md), checked
against numpy's float64 arithmetic from the formats' definitions."""
import os

import numpy as np
import pytest

import tinyfin as tf


def test_quantize_dequantize_q8_0_on_its_grid():
    """Values d * q with amax = 127 d quantize to exactly those levels and come back bit for bit."""
    rng = np.random.default_rng(0)
    qs = rng.integers(-127, 128, size=(2, 32))
    qs[:, 0] = 127
    want = (qs * np.array([[-0.375], [0.0625]])).astype(np.float32)
    q = tf.quantize(tf.tensor(want), "q8_0")
    assert q.dtype == tf.q8_0 and q.shape == (2, 32)
    np.testing.assert_array_equal(tf.dequantize(q).numpy(), want)


@pytest.mark.parametrize("dtype", ["q8_0", "q4_0", "q4_k", "q6_k"])
def test_matmul_q_against_float64(dtype):
    rng = np.random.default_rng(1)
    w = rng.uniform(-1, 1, size=(12, 256)).astype(np.float32)
    x = rng.uniform(-1, 1, size=(3, 256)).astype(np.float32)
    q = tf.quantize(tf.tensor(w), getattr(tf, dtype))
    wd = tf.dequantize(q).numpy().astype(np.float64)
    want = x.astype(np.float64) @ wd.T
    got = tf.matmul_q(tf.tensor(x), q).numpy()
    # The activations' 8-bit rounding: half a step of amax / 127 per element, times |w|.
    block = 32 if dtype in ("q8_0", "q4_0") else 256
    xb = np.abs(x).reshape(3, -1, block).max(axis=2) / 127 / 2
    bound = np.einsum("mb,nbk->mn", xb, np.abs(wd).reshape(12, -1, block)) * 1.001 + 1e-5
    assert np.all(np.abs(got - want) <= bound)


def _avx2():
    with open("/proc/cpuinfo") as f:
        return " avx2" in f.read()


# (elements, bytes) of a block of each type with a repacked layout.
_REPACKED = {"q8_0": (32, 34), "q4_0": (32, 18), "q4_k": (256, 144), "q6_k": (256, 210)}


@pytest.mark.parametrize("dtype", sorted(_REPACKED))
def test_prepack_weight_keeps_matmul_q_results(dtype):
    """prepack_weight (tinyfin.hpp) hands the cpu plugin a q4_0/q8_0/q4_k/q6_k weight to keep in
    its own eight-row layout: matmul_q then reads that copy, with the plain layout's values up to
    the order of f32 additions (the same float64 bound as above); 20 rows = two groups of eight + 4
    plain; K = 512 (two super-blocks of the k-quants)."""
    rng = np.random.default_rng(2)
    k = 512
    w = rng.uniform(-1, 1, size=(20, k)).astype(np.float32)
    x = rng.uniform(-1, 1, size=(3, k)).astype(np.float32)
    q = tf.quantize(tf.tensor(w), getattr(tf, dtype))
    plain = tf.matmul_q(tf.tensor(x), q).numpy()
    wd = tf.dequantize(q).numpy().astype(np.float64)
    want = x.astype(np.float64) @ wd.T
    packed = tf.prepack_weight(q)
    assert isinstance(packed, int)
    block, block_bytes = _REPACKED[dtype]
    if tf.backend_name() == "cpu" and _avx2() and os.environ.get("TINYFIN_CPU_ISA", "") not in ("generic",) \
            and os.environ.get("TINYFIN_CPU_PREPACK", "1") != "0":
        assert packed == 20 * (k // block) * block_bytes
    got = tf.matmul_q(tf.tensor(x), q).numpy()
    act = 32 if block == 32 else 256  # the activations' 8-bit blocks (q8_k for the k-quants)
    xb = np.abs(x).reshape(3, -1, act).max(axis=2) / 127 / 2
    bound = np.einsum("mb,nbk->mn", xb, np.abs(wd).reshape(20, -1, act)) * 1.001 + 1e-5
    assert np.all(np.abs(got - want) <= bound)
    np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5)
    # A type without such a layout is left as it is: 0 bytes, not an error.
    assert tf.prepack_weight(tf.quantize(tf.tensor(w), tf.q5_k)) == 0


def test_embedding_q_and_refusals():
    w = tf.tensor(np.linspace(-1, 1, 4 * 64, dtype=np.float32).reshape(4, 64))
    q = tf.quantize(w, tf.q8_0)
    rows = tf.embedding_q(q, tf.tensor([3, 0], dtype=tf.int64))
    np.testing.assert_array_equal(rows.numpy(), tf.dequantize(q).numpy()[[3, 0]])
    with pytest.raises(tf.DTypeError):
        q + q
    with pytest.raises(tf.ShapeError):
        tf.quantize(tf.zeros(2, 48), tf.q4_0)


GPU_BACKENDS = [b for b in ("vulkan", "opengl", "opencl") if b in tf.available_backends()]


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["q8_0", "q4_0", "q4_k", "q6_k"])
def test_gpu_kernels_without_fallback(backend, dtype):
    """dequantize, embedding_q and matmul_q run on the GPU backends themselves (no fallback):
    dequantize and embedding_q give the cpu codec's bits; matmul_q multiplies f32 activations, so
    it is within f32 accumulation's bound of the float64 product."""
    rng = np.random.default_rng(2)
    w = rng.uniform(-1, 1, size=(40, 512)).astype(np.float32)
    x = rng.uniform(-1, 1, size=(3, 512)).astype(np.float32)
    q = tf.quantize(tf.tensor(w), getattr(tf, dtype))
    wd = tf.dequantize(q).numpy()
    qd, xd = q.to(backend), tf.tensor(x).to(backend)
    idx = tf.tensor([39, 0, 7], dtype=tf.int64).to(backend)
    tf.reset_stats()
    got_d, got_e, got_y = tf.dequantize(qd), tf.embedding_q(qd, idx), tf.matmul_q(xd, qd)
    assert tf.stats()["total_fallbacks"] == 0
    assert str(got_y.device) == backend + ":0"
    got_d, got_e, got_y = (t.to("cpu").numpy() for t in (got_d, got_e, got_y))
    np.testing.assert_array_equal(got_d.view(np.uint32), wd.view(np.uint32))
    np.testing.assert_array_equal(got_e.view(np.uint32), wd[[39, 0, 7]].view(np.uint32))
    prod = x.astype(np.float64)[:, None, :] * wd.astype(np.float64)[None, :, :]
    want, mag = prod.sum(axis=2), np.abs(prod).sum(axis=2)
    assert np.all(np.abs(got_y - want) <= mag * 512 * 2.0 ** -24 * 1.01)
