"""tinyfin.llm models against an independent float64 numpy implementation (llm_models.py):
every architecture, both formats from the same arrays, the KV cache, batches, sampling, and
every loaded backend."""
import os

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.llm as llm
import llm_models as lm

PROMPT = [1, 7, 42, 3, 19, 55, 8, 23, 11, 5, 60, 2, 33]


@pytest.fixture(autouse=True)
def _cpu_default():
    tf.backend_set("cpu")
    yield
    tf.backend_set("cpu")


def make(tmp_path, arch, fmt, dtype="F32", seed=0, **kw):
    cfg = lm.ARCHS[arch]
    w = lm.random_weights(cfg, seed)
    if fmt == "hf":
        path = lm.write_hf_dir(str(tmp_path / f"{arch}-{dtype}"), cfg, w, dtype, **kw)
    else:
        path = lm.write_gguf(str(tmp_path / f"{arch}-{dtype}.gguf"), cfg, w, dtype, **kw)
    return cfg, w, path


@pytest.mark.parametrize("arch", sorted(lm.ARCHS))
@pytest.mark.parametrize("fmt", ["hf", "gguf"])
def test_logits_match_numpy(tmp_path, arch, fmt):
    cfg, w, path = make(tmp_path, arch, fmt)
    model = llm.load(path, backend="cpu")
    got = model.logits(PROMPT)
    want = lm.reference_logits(cfg, w, PROMPT)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # In place on cpu: f32 weights in a mapped file, no copies.
    assert model._m.bytes_in_place > 0


@pytest.mark.parametrize("arch", sorted(lm.ARCHS))
def test_both_formats_give_the_same_logits(tmp_path, arch):
    _, _, hf = make(tmp_path, arch, "hf")
    _, _, gg = make(tmp_path, arch, "gguf")
    a = llm.load(hf, backend="cpu").logits(PROMPT)
    b = llm.load(gg, backend="cpu").logits(PROMPT)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert llm.load(gg).config.rope_interleaved == (lm.ARCHS[arch]["model_type"] != "qwen2")


def test_sharded_safetensors(tmp_path):
    cfg, w, path = make(tmp_path, "llama", "hf", shards=3)
    assert os.path.exists(os.path.join(path, "model.safetensors.index.json"))
    np.testing.assert_allclose(llm.load(path).logits(PROMPT), lm.reference_logits(cfg, w, PROMPT), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["F16", "BF16"])
@pytest.mark.parametrize("fmt", ["hf", "gguf"])
def test_half_precision_weights(tmp_path, fmt, dtype):
    cfg, w, path = make(tmp_path, "llama_gqa_tied", fmt, dtype)
    # The reference sees the values the file holds; norms stay F32 in GGUF, as converters do.
    held = {k: (lm.rounded(v, dtype) if (fmt == "hf" or v.ndim == 2) else v) for k, v in w.items()}
    want = lm.reference_logits(cfg, held, PROMPT)
    # f32 compute on converted weights: only rounding of the f32 path.
    np.testing.assert_allclose(llm.load(path, weights_f32=True).logits(PROMPT), want, rtol=1e-4, atol=1e-4)
    # Weights kept in their dtype, activations cast to it per product: that dtype's rounding.
    got = llm.load(path).logits(PROMPT)
    tol = 0.05 if dtype == "F16" else 0.25
    assert np.max(np.abs(got - want)) < tol * max(1.0, np.max(np.abs(want)))
    assert np.mean(np.argmax(got, -1) == np.argmax(want, -1)) >= 0.75


THREADED_DECODE = """
import sys, numpy as np, tinyfin.llm as llm
m = llm.load(sys.argv[1], backend="cpu")
steps = m.session_logits([[1, 7, 42, 3, 19]], [[5], [60], [2], [33]], 16)[0]
np.save(sys.argv[2], np.concatenate([m.logits([1, 7, 42]), steps]))
"""


@pytest.mark.parametrize("fmt", ["hf", "gguf"])
def test_bf16_decoding_split_over_threads(tmp_path, fmt):
    """bf16 weights large enough that each token's products are split over the pool's threads
    (each thread its own rows of W, the rest stolen from the end): the same bits for 1, 2 and 3
    threads, prompt and KV-cached steps, and the bf16 reference's values."""
    import subprocess
    import sys
    cfg = dict(lm.ARCHS["llama"], hidden_size=256, intermediate_size=704, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=1000)
    w = lm.random_weights(cfg, 3)
    path = (lm.write_hf_dir(str(tmp_path / "m"), cfg, w, "BF16") if fmt == "hf"
            else lm.write_gguf(str(tmp_path / "m.gguf"), cfg, w, "BF16"))
    runs = []
    for threads in ("1", "2", "3"):
        out = str(tmp_path / f"logits{threads}.npy")
        r = subprocess.run([sys.executable, "-c", THREADED_DECODE, path, out], capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, TINYFIN_THREADS=threads, TINYFIN_BACKEND="cpu"))
        assert r.returncode == 0, r.stderr
        runs.append(np.load(out))
    np.testing.assert_array_equal(runs[1], runs[0])
    np.testing.assert_array_equal(runs[2], runs[0])
    held = {k: (lm.rounded(v, "BF16") if (fmt == "hf" or v.ndim == 2) else v) for k, v in w.items()}
    want = np.concatenate([lm.reference_logits(cfg, held, [1, 7, 42]),
                           lm.reference_logits(cfg, held, [1, 7, 42, 3, 19, 5, 60, 2, 33])[4:]])
    assert runs[0].shape == want.shape
    assert np.max(np.abs(runs[0] - want)) < 0.25 * max(1.0, np.max(np.abs(want)))
    assert np.mean(np.argmax(runs[0], -1) == np.argmax(want, -1)) >= 0.75


@pytest.mark.parametrize("arch", ["llama", "mistral", "qwen2", "llama3_scaling"])
def test_kv_cache_decoding_equals_recomputing(tmp_path, arch):
    cfg, w, path = make(tmp_path, arch, "gguf" if arch == "mistral" else "hf")
    model = llm.load(path, prefill_chunk=4)  # chunked prefill: queries see earlier chunks' keys
    prefix, rest = PROMPT[:6], PROMPT[6:]
    steps = model.session_logits([prefix], [[t] for t in rest], 32)[0]
    full = model.logits(PROMPT)
    # steps[0] is the prefix's last position, steps[i] the position of rest[i-1].
    np.testing.assert_allclose(steps, full[5:], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(full, lm.reference_logits(cfg, w, PROMPT), rtol=1e-4, atol=1e-4)


def test_batched_prompts_of_different_lengths(tmp_path):
    cfg, w, path = make(tmp_path, "mistral", "hf")
    model = llm.load(path)
    a, b = PROMPT[:4], PROMPT[:11]
    out = model.session_logits([a, b], [[5, 6], [7, 8]], 24)
    for row, prompt, extra in ((0, a, [5, 7]), (1, b, [6, 8])):
        seq = prompt + extra
        want = lm.reference_logits(cfg, w, seq)[len(prompt) - 1:]
        np.testing.assert_allclose(out[row], want, rtol=1e-4, atol=1e-4)


def test_greedy_generation_follows_the_reference(tmp_path):
    cfg, w, path = make(tmp_path, "llama_gqa_tied", "hf")
    model = llm.load(path)
    got = model.generate(PROMPT[:5], max_new_tokens=6, ignore_eos=True)
    seq = list(PROMPT[:5])
    for _ in range(6):
        seq.append(int(np.argmax(lm.reference_logits(cfg, w, seq)[-1])))
    assert got == seq[5:]


def test_seeded_sampling_is_deterministic(tmp_path):
    _, _, path = make(tmp_path, "llama", "hf")
    model = llm.load(path)
    kw = dict(max_new_tokens=12, temperature=1.5, top_k=20, top_p=0.9, min_p=0.01, repetition_penalty=1.2,
              ignore_eos=True)
    a = model.generate([PROMPT[:5], PROMPT[:3]], seed=7, **kw)
    b = model.generate([PROMPT[:5], PROMPT[:3]], seed=7, **kw)
    c = model.generate([PROMPT[:5], PROMPT[:3]], seed=8, **kw)
    assert a == b
    assert a != c
    assert all(len(s) == 12 for s in a)


def test_top_k_one_is_greedy_and_max_new_tokens_and_eos(tmp_path):
    cfg, w, path = make(tmp_path, "llama", "hf")
    model = llm.load(path)
    greedy = model.generate(PROMPT[:5], max_new_tokens=5, ignore_eos=True)
    assert model.generate(PROMPT[:5], max_new_tokens=5, temperature=2.0, top_k=1, seed=3, ignore_eos=True) == greedy
    # Stopping at EOS: make the first greedy token the end-of-sequence id.
    first = greedy[0]
    tokens, reasons = model._m.generate_ids([PROMPT[:5]], 5, 0.0, 0, 1.0, 0.0, 1.0, 0, [], False, 0, None)
    if first == cfg["eos_token_id"]:
        assert tokens[0] == [first] and reasons == ["eos"]
    else:
        assert len(tokens[0]) == 5 and reasons == ["length"]


def test_streaming_callback_sees_every_token_and_can_stop(tmp_path):
    _, _, path = make(tmp_path, "llama", "hf")
    model = llm.load(path)
    seen = []
    out = model.generate(PROMPT[:4], max_new_tokens=6, ignore_eos=True, stream=lambda i, t: seen.append((i, t)))
    assert [t for _, t in seen] == out
    stopped = model.generate(PROMPT[:4], max_new_tokens=6, ignore_eos=True, stream=lambda i, t: False)
    assert stopped == out[:1]


def test_memory_estimate_counts_weights_and_cache(tmp_path):
    cfg, w, path = make(tmp_path, "llama", "hf")
    e = llm.estimate(path, ctx=64)
    assert e["weights"] == sum(a.nbytes for a in w.values())
    d = lm.head_dim(cfg)
    assert e["kv_cache"] == 2 * cfg["num_hidden_layers"] * 64 * cfg["num_key_value_heads"] * d * 4
    assert e["total"] == e["weights"] + e["kv_cache"] + e["activations"]


def test_context_overflow_is_a_value_error(tmp_path):
    _, _, path = make(tmp_path, "llama", "hf")
    model = llm.load(path)
    with pytest.raises(tf.ValueError, match="context"):
        model.session_logits([PROMPT], [[1]], len(PROMPT))
    with pytest.raises(tf.ValueError, match="vocabulary"):
        model.logits([1, 999])


def _backends():
    # Every loaded backend but cpu: cuda too where it loads (scripts/gpu-check runs these with -k cuda).
    return [b for b in tf.available_backends() if b != "cpu"]


@pytest.mark.parametrize("backend", _backends())
def test_logits_on_every_backend(tmp_path, backend):
    cfg, w, path = make(tmp_path, "qwen2", "gguf")
    tf.reset_stats()
    model = llm.load(path, backend=backend)
    assert model.device.startswith(backend)
    got = model.logits(PROMPT)
    steps = model.session_logits([PROMPT[:6]], [[t] for t in PROMPT[6:9]], 16)[0]
    want = lm.reference_logits(cfg, w, PROMPT)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(steps, want[5:9], rtol=2e-3, atol=2e-3)
    fallbacks = tf.stats()["fallbacks"]
    print(f"{backend}: ops that fell back to cpu: {fallbacks}")
    # Every backend runs every op of the model itself (blas: OpenBLAS, then cpu's kernels).
    assert fallbacks == {}


MEASURE = """
import sys, numpy as np, tinyfin as tf, tinyfin.llm as llm
path, ctx, chunk, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
m = llm.load(path, backend="cpu", ctx=ctx, prefill_chunk=chunk, batch=batch)
prompts = [list(range(1, ctx - 8))] * batch
m.generate(prompts, max_new_tokens=4, ctx=ctx, ignore_eos=True)
print(tf.stats()["backends"]["cpu"]["peak_bytes_in_use"])
"""


@pytest.mark.parametrize("ctx, chunk, batch", [(256, 64, 1), (128, 128, 2), (512, 32, 1)])
def test_memory_estimate_against_the_measured_peak(tmp_path, ctx, chunk, batch):
    """The KV cache and activations estimated against the peak of tensor memory that
    tinyfin.stats() measures on cpu (weights are mapped in place, not tensor allocations; the
    attention kernel's scratch is not a tensor there), within 15%."""
    import subprocess
    import sys
    cfg = dict(lm.ARCHS["llama"], hidden_size=256, intermediate_size=688, num_attention_heads=8,
               num_key_value_heads=4, vocab_size=1000, num_hidden_layers=4, max_position_embeddings=512)
    path = lm.write_hf_dir(str(tmp_path / "m"), cfg, lm.random_weights(cfg))
    e = llm.estimate(path, ctx=ctx, prefill_chunk=chunk, batch=batch)
    r = subprocess.run([sys.executable, "-c", MEASURE, path, str(ctx), str(chunk), str(batch)],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, TINYFIN_BACKEND="cpu"))
    assert r.returncode == 0, r.stderr
    measured = int(r.stdout.split()[-1])
    expected = e["kv_cache"] + e["activations"] - e["attention_scores"]
    print(f"ctx {ctx} chunk {chunk} batch {batch}: estimated {expected}, measured {measured}")
    assert abs(expected - measured) <= 0.15 * measured


LOAD_RSS = """
import sys, tinyfin as tf, tinyfin.llm as llm
def peak():  # VmHWM: this process's peak resident memory (ru_maxrss would count the forking parent's)
    return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
tf.backend_set(sys.argv[2]); tf.ones(4).sum().item()  # the backend's libraries loaded before measuring
before = peak()
m = llm.load(sys.argv[1], backend=sys.argv[2], map_weights=sys.argv[3] == "1")
print(m.device, before, peak(), m._m.bytes_in_place, m._m.bytes_copied)
"""


@pytest.mark.parametrize("backend", ["cpu", "blas"])
def test_peak_resident_memory_while_loading_stays_near_the_model_size(tmp_path, backend):
    """Issue 33: loading never holds the model twice. On cpu and on blas (host memory: from_blob
    wraps the mapping on either) the mapped f32 weights are used in place, nothing is copied and
    the resident memory does not grow by the model while loading (blas copied them before, 1.7x
    this small model at the peak; other host-memory backends that copy give each copy's mapped
    pages back with madvise, docs/llm.md)."""
    import subprocess
    import sys
    if backend not in tf.available_backends():
        pytest.skip(f"{backend} is not built here")
    cfg = dict(lm.ARCHS["llama"], hidden_size=512, intermediate_size=1376, num_attention_heads=8,
               num_key_value_heads=8, vocab_size=8000, num_hidden_layers=4)
    w = lm.random_weights(cfg, 1)
    model_bytes = sum(a.nbytes for a in w.values())
    path = lm.write_hf_dir(str(tmp_path / "m"), cfg, w)
    del w
    r = subprocess.run([sys.executable, "-c", LOAD_RSS, path, backend, "1"], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, TINYFIN_BACKEND=backend))
    assert r.returncode == 0, r.stderr
    device, before, after, in_place, copied = r.stdout.split()
    assert device.startswith(backend)
    grown = int(after) - int(before)
    print(f"{backend}: model {model_bytes / 2**20:.1f} MiB, peak resident memory {int(before) / 2**20:.1f} MiB before "
          f"loading, {int(after) / 2**20:.1f} MiB after; {in_place} bytes in place, {copied} copied")
    assert int(copied) == 0
    assert int(in_place) == model_bytes
    assert grown < 0.5 * model_bytes
    # --no-mmap: the large matrices copied into huge pages, each copy's mapped pages given back
    # before the next tensor: the copies plus one tensor, never twice the model.
    r = subprocess.run([sys.executable, "-c", LOAD_RSS, path, backend, "0"], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, TINYFIN_BACKEND=backend))
    assert r.returncode == 0, r.stderr
    device, before, after, in_place, copied = r.stdout.split()
    print(f"{backend} --no-mmap: peak {int(after) / 2**20:.1f} MiB after loading, {copied} bytes copied")
    assert int(in_place) + int(copied) == model_bytes
    if _huge_pages_available():
        assert int(copied) > 0
    assert int(after) - int(before) < 2 * model_bytes


def _huge_pages_available():
    try:
        setting = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return False
    return "[always]" in setting or "[madvise]" in setting


def test_large_matrices_are_copied_into_huge_pages_on_cpu_without_mmap(tmp_path):
    """Issue 34: with map_weights=False (--no-mmap) the matrices of 2 MiB or more are copied out of
    the mapping into host memory (transparent huge pages: the dots read them faster than the file's
    4 KiB pages) where the kernel has huge pages; by default (issue 33) every tensor stays over the
    mapping. Same logits."""
    cfg = dict(lm.ARCHS["llama"], hidden_size=512, intermediate_size=1376, num_attention_heads=8,
               num_key_value_heads=8, vocab_size=1000, num_hidden_layers=1)
    w = lm.random_weights(cfg, 2)
    path = lm.write_hf_dir(str(tmp_path / "m"), cfg, w)
    # The loader's matrices: q/k/v and gate/up fused (back to back in the file: fusion.hpp).
    fused = [("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")]
    sizes = [a.nbytes for n, a in w.items() if not any(n.endswith(m + ".weight") for g in fused for m in g)]
    sizes += [sum(a.nbytes for n, a in w.items() if any(n.endswith(m + ".weight") for m in g)) for g in fused]
    big = sum(s for s in sizes if s >= 2 << 20)
    assert big > 0  # q/k/v (3 x 512 x 512 f32), gate/up and down (1376 x 512 f32)
    copied = llm.load(path, backend="cpu", map_weights=False)
    mapped = llm.load(path, backend="cpu")
    assert mapped._m.bytes_copied == 0
    assert copied._m.bytes_copied == (big if _huge_pages_available() else 0)
    assert copied._m.bytes_in_place + copied._m.bytes_copied == mapped._m.bytes_in_place
    got = copied.logits(PROMPT)
    np.testing.assert_array_equal(got, mapped.logits(PROMPT))
    np.testing.assert_allclose(got, lm.reference_logits(cfg, w, PROMPT), rtol=1e-4, atol=1e-4)


def test_auto_backend_places_the_model_where_it_fits(tmp_path):
    cfg, w, path = make(tmp_path, "llama", "hf")
    e = llm.estimate(path, ctx=32)
    chosen = tf.select_backend_for_memory(e["total"], "auto")
    tf.backend_set("cpu")
    model = llm.load(path, backend="auto", ctx=32)
    assert model.device.split(":")[0] == chosen
    np.testing.assert_allclose(model.logits(PROMPT), lm.reference_logits(cfg, w, PROMPT), rtol=2e-3, atol=2e-3)
    # Hundreds of terabytes of KV cache fit no device: one error naming the devices.
    with pytest.raises(tf.OutOfMemoryError, match="cpu:0"):
        llm.load(path, backend="auto", ctx=1 << 24, batch=4096)


@pytest.mark.parametrize("backend", ["cpu"] + _backends())
@pytest.mark.parametrize("kv,bound", [("f16", 2e-3), ("bf16", 1e-2)])
def test_half_precision_kv_cache(tmp_path, backend, kv, bound):
    """KV caches in f16/bf16: attention runs in that dtype. Bounds (relative to the largest
    |logit|): a few roundings of 2^-11 (f16) or 2^-8 (bf16) of the attention inputs; measured
    3.2e-4 and 2.2e-3 on every backend. Above 1e-5: the cache really holds the half dtype (the f32
    cache is within 5e-7)."""
    cfg, w, path = make(tmp_path, "mistral", "gguf")  # sliding window: the mask path too
    want = lm.reference_logits(cfg, w, PROMPT)
    scale = np.max(np.abs(want))
    tf.reset_stats()
    model = llm.load(path, backend=backend, kv_cache=kv)
    got = model.logits(PROMPT)
    steps = model.session_logits([PROMPT[:6]], [[t] for t in PROMPT[6:9]], 16)[0]
    err = np.max(np.abs(got - want)) / scale
    assert 1e-5 < err < bound
    assert np.max(np.abs(steps - want[5:9])) / scale < bound
    assert tf.stats()["fallbacks"] == {}
    assert 2 * llm.estimate(path, ctx=64, kv_cache=kv)["kv_cache"] == llm.estimate(path, ctx=64)["kv_cache"]
    with pytest.raises(tf.ValueError, match="kv_cache"):
        llm.load(path, kv_cache="i32")
