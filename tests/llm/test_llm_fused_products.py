"""Fused products (llm/fusion.hpp): a layer's q/k/v and gate/up run as one product over their rows
stacked where the file stores them back to back (used in place) or where the loader copies them
anyway (stacked into one buffer). Checked: which matrices fuse for each file order (the loader's
count), the logits against the float64 numpy reference (llm_models.py), bit for bit the logits of
one product per matrix on cpu, over 1, 2 and 3 threads, and on every backend."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.llm as llm
import llm_models as lm

PROMPT = [1, 7, 42, 3, 19, 55, 8, 23, 11, 5, 60, 2, 33]
# More than 16 tokens: the prompt multiplies a fused f16/bf16 matrix member by member (views of its
# rows; forward.cpp's k_fused_max_rows), the decoded steps the fused matrix at once.
LONG = PROMPT + [4, 9, 14, 21, 27, 30, 36, 41, 47, 50, 58]
LAYERS = lm.BASE["num_hidden_layers"]

# A layer's matrices by role, as each format names them.
ROLES = {"q": ("self_attn.q_proj.weight", "attn_q.weight"), "k": ("self_attn.k_proj.weight", "attn_k.weight"),
         "v": ("self_attn.v_proj.weight", "attn_v.weight"), "o": ("self_attn.o_proj.weight", "attn_output.weight"),
         "gate": ("mlp.gate_proj.weight", "ffn_gate.weight"), "up": ("mlp.up_proj.weight", "ffn_up.weight"),
         "down": ("mlp.down_proj.weight", "ffn_down.weight")}


def _role(name):
    return next((r for r, suffixes in ROLES.items() if name.endswith(suffixes)), None)


def _layer(name):
    for tag in ("layers.", "blk."):
        if tag in name:
            return int(name.split(tag)[1].split(".")[0])
    return -1


def layer_order(*roles):
    """A file order (for write_hf_dir's names or gguf_model_bytes' tensor list): the global
    tensors first, then layer by layer the matrices in `roles`' order, then the layer's others."""
    def order(items):
        def key(item):
            name = item if isinstance(item, str) else item[0]
            r = _role(name)
            return _layer(name), roles.index(r) if r in roles else len(roles)
        return sorted(items, key=key)
    return order


APART = layer_order("q", "gate", "k", "up", "v", "o", "down")  # no two shared-input matrices adjacent
REVERSED = layer_order("down", "up", "gate", "o", "v", "k", "q")  # adjacent, each group backwards


@pytest.fixture(autouse=True)
def _cpu_default():
    tf.backend_set("cpu")
    yield
    tf.backend_set("cpu")


def make(tmp_path, arch, fmt, dtype="F32", order=None, tag=""):
    cfg = lm.ARCHS[arch]
    w = lm.random_weights(cfg, 0)
    if fmt == "hf":
        path = lm.write_hf_dir(str(tmp_path / f"{arch}-{dtype}{tag}"), cfg, w, dtype, order=order)
    else:
        path = lm.write_gguf(str(tmp_path / f"{arch}-{dtype}{tag}.gguf"), cfg, w, dtype, order=order)
    return cfg, w, path


def outputs(model):
    """Logits of a 24-token prompt and of three KV-cached steps after a 6-token prefill."""
    steps = model.session_logits([PROMPT[:6]], [[t] for t in PROMPT[6:9]], 16)[0]
    return model.logits(LONG), steps


@pytest.mark.parametrize("dtype", ["F32", "BF16"])
@pytest.mark.parametrize("fmt", ["hf", "gguf"])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_back_to_back_matrices_run_as_one_product(tmp_path, arch, fmt, dtype):
    """The tests' writers store q k v and gate up back to back: five matrices a layer fused, in
    place (nothing copied on cpu), the same bits as one product per matrix."""
    cfg, w, path = make(tmp_path, arch, fmt, dtype)
    fused, plain = llm.load(path), llm.load(path, fuse_products=False)
    assert fused._m.fused_matrices == 5 * LAYERS
    assert plain._m.fused_matrices == 0
    assert fused._m.bytes_copied == plain._m.bytes_copied
    assert fused._m.bytes_in_place == plain._m.bytes_in_place > 0
    got, steps = outputs(fused)
    want_got, want_steps = outputs(plain)
    np.testing.assert_array_equal(got, want_got)
    np.testing.assert_array_equal(steps, want_steps)
    held = {k: (lm.rounded(v, dtype) if (fmt == "hf" or v.ndim == 2) else v) for k, v in w.items()}
    want = lm.reference_logits(cfg, held, LONG)
    if dtype == "F32":
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(steps, want[5:9], rtol=1e-4, atol=1e-4)
    else:  # activations rounded to bf16 for each product
        assert np.max(np.abs(got - want)) < 0.25 * max(1.0, np.max(np.abs(want)))
        assert np.mean(np.argmax(got, -1) == np.argmax(want, -1)) >= 0.75


# (order name, format, architecture, matrices fused per layer when used in place)
ORDERS = [("hf", "hf", "llama", 4),  # gate+up, q+v (k lies before o)
          ("hf", "hf", "qwen2", 2),  # gate+up (the biases lie between q, k and v)
          ("reversed", "hf", "llama", 5), ("reversed", "gguf", "qwen2", 5),
          ("apart", "hf", "llama", 0), ("apart", "gguf", "mistral", 0)]
ORDER_FUNCTIONS = {"hf": lm.hf_file_order, "reversed": REVERSED, "apart": APART}


@pytest.mark.parametrize("order, fmt, arch, per_layer", ORDERS)
def test_file_orders(tmp_path, order, fmt, arch, per_layer):
    """Only what lies back to back fuses (in file order: a group stored backwards still splits into
    the right outputs); the rest stays one product per matrix and is still right."""
    cfg, w, path = make(tmp_path, arch, fmt, order=ORDER_FUNCTIONS[order])
    model = llm.load(path)
    assert model._m.fused_matrices == per_layer * LAYERS
    assert model._m.bytes_copied == 0
    got, steps = outputs(model)
    want = lm.reference_logits(cfg, w, LONG)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(steps, want[5:9], rtol=1e-4, atol=1e-4)
    plain_got, plain_steps = outputs(llm.load(path, fuse_products=False))
    np.testing.assert_array_equal(got, plain_got)
    np.testing.assert_array_equal(steps, plain_steps)


@pytest.mark.parametrize("scheme", ["q8_0", "q4_0"])
def test_matrices_copied_anyway_are_stacked(tmp_path, scheme):
    """Quantized on load (copies in any case), matrices apart in the file are stacked into one
    buffer: all five fused, the same bits as quantizing and multiplying each on its own."""
    cfg, w, path = make(tmp_path, "llama", "hf", order=APART)
    fused = llm.load(path, quantize=scheme)
    plain = llm.load(path, quantize=scheme, fuse_products=False)
    assert fused._m.fused_matrices == 5 * LAYERS
    assert plain._m.fused_matrices == 0
    got, steps = outputs(fused)
    want_got, want_steps = outputs(plain)
    np.testing.assert_array_equal(got, want_got)
    np.testing.assert_array_equal(steps, want_steps)
    want = lm.reference_logits(cfg, w, LONG)
    bound = {"q8_0": 0.1, "q4_0": 0.4}[scheme]  # the blocks' rounding, not the fusion's
    assert np.max(np.abs(got - want)) < bound * max(1.0, np.max(np.abs(want)))


THREADED = """
import sys, numpy as np, tinyfin.llm as llm
m = llm.load(sys.argv[1], backend="cpu", fuse_products=sys.argv[3] == "1")
assert m._m.fused_matrices == (10 if sys.argv[3] == "1" else 0), m._m.fused_matrices
steps = m.session_logits([[1, 7, 42, 3, 19]], [[5], [60], [2], [33]], 16)[0]
np.save(sys.argv[2], np.concatenate([m.logits([1, 7, 42]), steps]))
"""


@pytest.mark.parametrize("fmt", ["hf", "gguf"])
def test_fused_bf16_decoding_over_threads(tmp_path, fmt):
    """bf16 matrices large enough that every product splits over the pool's threads: the fused
    products give the same bits for 1, 2 and 3 threads, and the unfused products' bits."""
    cfg = dict(lm.ARCHS["llama"], hidden_size=256, intermediate_size=704, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=1000)
    w = lm.random_weights(cfg, 3)
    path = (lm.write_hf_dir(str(tmp_path / "m"), cfg, w, "BF16", order=REVERSED) if fmt == "hf"
            else lm.write_gguf(str(tmp_path / "m.gguf"), cfg, w, "BF16"))
    runs = []
    for threads, fuse in (("1", "1"), ("2", "1"), ("3", "1"), ("2", "0")):
        out = str(tmp_path / f"logits{threads}{fuse}.npy")
        r = subprocess.run([sys.executable, "-c", THREADED, path, out, fuse], capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, TINYFIN_THREADS=threads, TINYFIN_BACKEND="cpu"))
        assert r.returncode == 0, r.stderr
        runs.append(np.load(out))
    for other in runs[1:]:
        np.testing.assert_array_equal(other, runs[0])
    held = {k: (lm.rounded(v, "BF16") if (fmt == "hf" or v.ndim == 2) else v) for k, v in w.items()}
    want = np.concatenate([lm.reference_logits(cfg, held, [1, 7, 42]),
                           lm.reference_logits(cfg, held, [1, 7, 42, 3, 19, 5, 60, 2, 33])[4:]])
    assert np.max(np.abs(runs[0] - want)) < 0.25 * max(1.0, np.max(np.abs(want)))
    assert np.mean(np.argmax(runs[0], -1) == np.argmax(want, -1)) >= 0.75


def _backends():
    return [b for b in tf.available_backends() if b != "cpu"]


@pytest.mark.parametrize("order", ["adjacent", "apart"])
@pytest.mark.parametrize("backend", _backends())
def test_fused_products_on_every_backend(tmp_path, backend, order):
    """Every backend: fused products (back to back: one upload of the file's bytes; apart: on a
    GPU backend, which copies anyway, stacked) against the reference and the unfused products,
    every op on the backend itself."""
    cfg, w, path = make(tmp_path, "qwen2", "gguf", order=APART if order == "apart" else None, tag=order)
    tf.reset_stats()
    model = llm.load(path, backend=backend)
    assert model.device.startswith(backend)
    in_place = model._m.bytes_in_place > 0  # blas: host memory, used in place as on cpu
    assert model._m.fused_matrices == (0 if order == "apart" and in_place else 5 * LAYERS)
    got, steps = outputs(model)
    want = lm.reference_logits(cfg, w, LONG)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(steps, want[5:9], rtol=2e-3, atol=2e-3)
    assert tf.stats()["fallbacks"] == {}
    plain_got, plain_steps = outputs(llm.load(path, backend=backend, fuse_products=False))
    np.testing.assert_allclose(got, plain_got, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(steps, plain_steps, rtol=1e-5, atol=1e-5)
