"""Quantized weights in tinyfin.llm: GGUF files with ggml's block types (written here by the
tests' own writer, gguf_quant.py, from the format's definitions), quantization on load, and
tinyfin-quantize's files checked by an independent reader and numpy codecs.

Tolerances (stated in docs/llm.md): matmul_q quantizes the activations to 8-bit blocks on the
fly as ggml does, so tinyfin's logits differ from a float64 product with the same dequantized
weights by that rounding: at most 3% of the largest |logit| (TIGHT). Against the f32 model's
logits: Q8_0 within 5% (Q8), Q4_0 and Q4_K within 25% (Q4), with the argmax agreeing at most
positions."""
import os
import subprocess

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.llm as llm
import llm_models as lm
import gguf_quant as gq

PROMPT = [1, 7, 42, 3, 19, 55, 8, 23, 11, 5, 60, 2, 33]
TIGHT, Q8, Q4 = 0.03, 0.05, 0.25

# Rows of 256: every k-quant applies (a 32-multiple row would fall back to Q5_0, as in llama.cpp).
QCFG = {
    "llama": dict(lm.BASE, model_type="llama", hidden_size=256, intermediate_size=512, num_attention_heads=4,
                  num_key_value_heads=2),
    "qwen2_tied": dict(lm.BASE, model_type="qwen2", hidden_size=256, intermediate_size=512, num_attention_heads=4,
                       num_key_value_heads=2, tie_word_embeddings=True, rope_theta=1000000.0,
                       use_sliding_window=False, sliding_window=4096),
}
FILE_TYPE = {"q8_0": 7, "q4_0": 2, "q4_k": 15}


@pytest.fixture(autouse=True)
def _cpu_default():
    tf.backend_set("cpu")
    yield
    tf.backend_set("cpu")


def rel_err(got, want):
    return float(np.max(np.abs(got - want)) / max(1.0, np.max(np.abs(want))))


def hf_model(tmp_path, arch="llama", seed=0):
    cfg = QCFG[arch]
    w = lm.random_weights(cfg, seed)
    return cfg, w, lm.write_hf_dir(str(tmp_path / f"hf-{arch}"), cfg, w)


def quantize_tool(src, dst, qtype):
    tool = os.environ.get("TINYFIN_QUANTIZE")
    if tool:
        r = subprocess.run([tool, src, dst, "--type", qtype], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "tinyfin-quantize: wrote" in r.stderr
    else:
        llm.quantize_file(src, dst, qtype)
    return dst


def unpermute(w, n_head):
    """Inverse of llm_models.permute_for_gguf."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def weights_from_gguf(path, cfg):
    """Hugging Face-named float32 weights from a GGUF file: the independent reader, numpy
    dequantization, Q/K rows put back in Hugging Face order."""
    meta, tensors, _ = gq.read_gguf(path)
    w = {}
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per_layer = {"attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
                 "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
                 "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
                 "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
                 "attn_v.bias": "self_attn.v_proj.bias", "ffn_gate.weight": "mlp.gate_proj.weight",
                 "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight"}
    for l in range(cfg["num_hidden_layers"]):
        for g, h in per_layer.items():
            names[f"blk.{l}.{g}"] = f"model.layers.{l}.{h}"
    permute = cfg["model_type"] in ("llama", "mistral")
    for name, (tname, shape, data) in tensors.items():
        a = gq.dequantize(data, tname, shape)
        if permute and name.endswith("attn_q.weight"):
            a = unpermute(a, cfg["num_attention_heads"])
        if permute and name.endswith("attn_k.weight"):
            a = unpermute(a, cfg["num_key_value_heads"])
        w[names[name]] = a
    return meta, tensors, w


def expected_types(cfg, qtype):
    """llama.cpp's choice per tensor (llama_tensor_get_type) for these 2-layer models."""
    base = {"q8_0": "Q8_0", "q4_0": "Q4_0", "q4_k": "Q4_K"}[qtype]
    head = "Q8_0" if qtype == "q8_0" else "Q6_K"
    n = cfg["num_hidden_layers"]
    t = {"output_norm.weight": "F32"}
    tied = cfg.get("tie_word_embeddings")
    t["token_embd.weight"] = head if tied else base
    if not tied:
        t["output.weight"] = head
    for l in range(n):
        more = l < n // 8 or l >= 7 * n // 8 or (l - n // 8) % 3 == 2
        for g in ("attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"):
            t[f"blk.{l}.{g}.weight"] = base
        for g in ("attn_v", "ffn_down"):
            t[f"blk.{l}.{g}.weight"] = "Q6_K" if qtype == "q4_k" and more else base
        t[f"blk.{l}.attn_norm.weight"] = t[f"blk.{l}.ffn_norm.weight"] = "F32"
        if cfg["model_type"] == "qwen2":
            for g in ("q", "k", "v"):
                t[f"blk.{l}.attn_{g}.bias"] = "F32"
    return t


# ---- tinyfin-quantize's files ------------------------------------------------------------------

@pytest.mark.parametrize("arch", sorted(QCFG))
@pytest.mark.parametrize("qtype", ["q8_0", "q4_0", "q4_k"])
def test_quantized_file_layout_metadata_and_types(tmp_path, arch, qtype):
    cfg, w, hf = hf_model(tmp_path, arch)
    path = quantize_tool(hf, str(tmp_path / f"{qtype}.gguf"), qtype)
    meta, tensors, info = gq.read_gguf(path)  # raises on any layout fault
    assert info["version"] == 3 and info["alignment"] == 32 and info["data_start"] % 32 == 0
    assert meta["general.file_type"] == FILE_TYPE[qtype] and info["meta_types"]["general.file_type"] == 4
    assert meta["general.quantization_version"] == 2
    a = cfg["model_type"]
    assert meta["general.architecture"] == a
    assert meta[f"{a}.embedding_length"] == cfg["hidden_size"]
    assert meta[f"{a}.feed_forward_length"] == cfg["intermediate_size"]
    assert meta[f"{a}.block_count"] == cfg["num_hidden_layers"]
    assert meta[f"{a}.attention.head_count"] == cfg["num_attention_heads"]
    assert meta[f"{a}.attention.head_count_kv"] == cfg["num_key_value_heads"]
    assert meta[f"{a}.context_length"] == cfg["max_position_embeddings"]
    assert meta[f"{a}.rope.dimension_count"] == lm.head_dim(cfg)
    assert meta[f"{a}.rope.freq_base"] == np.float32(cfg["rope_theta"])
    assert meta[f"{a}.attention.layer_norm_rms_epsilon"] == np.float32(cfg["rms_norm_eps"])
    assert meta["tokenizer.ggml.bos_token_id"] == cfg["bos_token_id"]
    assert meta["tokenizer.ggml.eos_token_id"] == cfg["eos_token_id"]
    assert {n: t[0] for n, t in tensors.items()} == expected_types(cfg, qtype)
    # tinyfin's own reader agrees on every tensor.
    _, _, mine = llm.read_gguf(path)
    assert {n: (t[0], list(t[1]), t[2]) for n, t in mine.items()} == \
        {n: (t[0], t[1], len(t[2])) for n, t in tensors.items()}


@pytest.mark.parametrize("qtype", ["q8_0", "q4_0"])
def test_blocks_equal_the_reference_quantizer(tmp_path, qtype):
    cfg, w, hf = hf_model(tmp_path)
    path = quantize_tool(hf, str(tmp_path / f"{qtype}.gguf"), qtype)
    _, tensors, _ = gq.read_gguf(path)
    want_name = qtype.upper()
    checked = 0
    for name, (tname, shape, data) in tensors.items():
        if tname != want_name:
            continue
        src = {"token_embd.weight": w["model.embed_tokens.weight"], "output.weight": w["lm_head.weight"]}.get(name)
        if src is None:
            l, part = name.split(".")[1], name.split(".")[2]
            hf_part = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                       "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                       "ffn_down": "mlp.down_proj"}[part]
            src = w[f"model.layers.{l}.{hf_part}.weight"]
            if part == "attn_q":
                src = lm.permute_for_gguf(src, cfg["num_attention_heads"])
            if part == "attn_k":
                src = lm.permute_for_gguf(src, cfg["num_key_value_heads"])
        assert data == gq.QUANT[want_name](src), name
        checked += 1
    # Q8_0: the output too; Q4_0: the output is Q6_K (llama.cpp's rule).
    assert checked == (2 if qtype == "q8_0" else 1) + 7 * cfg["num_hidden_layers"]


@pytest.mark.parametrize("arch", sorted(QCFG))
@pytest.mark.parametrize("qtype", ["q8_0", "q4_0", "q4_k"])
def test_logits_of_quantized_files(tmp_path, arch, qtype):
    cfg, w, hf = hf_model(tmp_path, arch)
    path = quantize_tool(hf, str(tmp_path / f"{qtype}.gguf"), qtype)
    _, _, held = weights_from_gguf(path, cfg)
    model = llm.load(path, backend="cpu")
    got = model.logits(PROMPT)
    # The same blocks dequantized by numpy: only the activations' 8-bit rounding differs.
    tight = lm.reference_logits(cfg, held, PROMPT)
    assert rel_err(got, tight) < TIGHT
    # Against the f32 model: the quantization error of the weights.
    f32 = lm.reference_logits(cfg, w, PROMPT)
    err = rel_err(got, f32)
    print(f"{arch} {qtype}: max |logit error| / max |logit| = {err:.4f} (tight {rel_err(got, tight):.4f})")
    assert err < (Q8 if qtype == "q8_0" else Q4)
    assert np.mean(np.argmax(got, -1) == np.argmax(f32, -1)) >= (0.9 if qtype == "q8_0" else 0.6)
    # Zero-copy on cpu: every tensor used from the mapped file.
    assert model._m.bytes_in_place == os.path.getsize(path) - gq.read_gguf(path)[2]["data_start"] or \
        model._m.bytes_copied == 0
    # q4_0/q8_0/q4_k/q6_k matrices kept repacked by the cpu plugin where it has AVX2 (docs/quantization.md),
    # within the same bounds above. With prepack_weights=False the file's blocks as stored: the
    # same sums up to the order of f32 additions, which can flip an activation's 8-bit rounding in
    # a later layer (as the permuted Q/K rows below), far below the quantization error.
    if _cpu_repacks():
        assert model._m.bytes_prepacked > 0
    plain = llm.load(path, backend="cpu", prepack_weights=False)
    assert plain._m.bytes_prepacked == 0
    plain_logits = plain.logits(PROMPT)
    assert rel_err(plain_logits, tight) < TIGHT
    assert rel_err(plain_logits, got) < 0.02


def _cpu_repacks():
    """Whether the cpu plugin repacks q4_0/q8_0/q4_k/q6_k here: AVX2 and F16C, not capped or off."""
    if os.environ.get("TINYFIN_CPU_ISA") == "generic" or os.environ.get("TINYFIN_CPU_PREPACK") == "0":
        return False
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return " avx2" in flags and " f16c" in flags and " fma" in flags


@pytest.mark.parametrize("arch", sorted(QCFG))
@pytest.mark.parametrize("qtype", ["q8_0", "q4_0", "q4_k"])
def test_quantize_on_load_equals_the_quantized_file(tmp_path, arch, qtype):
    cfg, w, hf = hf_model(tmp_path, arch)
    path = quantize_tool(hf, str(tmp_path / f"{qtype}.gguf"), qtype)
    on_load = llm.load(hf, backend="cpu", quantize=qtype)
    # Quantized on load, the matrices are not prepacked (the copy would double them): the file's
    # read as stored too, so that both take the same kernels.
    from_file = llm.load(path, backend="cpu", prepack_weights=False)
    # Same blocks, same kernels: the same bits (qwen2: no permutation).
    a, b = on_load.logits(PROMPT), from_file.logits(PROMPT)
    if cfg["model_type"] == "qwen2":
        assert np.array_equal(a, b)
    else:
        # The file's Q/K rows are permuted (the same blocks in another order) and rotated as
        # adjacent pairs: equal up to f32 rounding, which can flip an activation's 8-bit rounding
        # in matmul_q (measured: < 1e-5 for q8_0 and q4_k, 0.7% for q4_0); far below the
        # quantization error itself (13-17% here).
        assert rel_err(a, b) < 0.02
    assert llm.estimate(hf, quantize=qtype)["weights"] == llm.estimate(path)["weights"]
    assert llm.estimate(path)["weights"] < llm.estimate(hf)["weights"] / (3 if qtype == "q8_0" else 5)


def test_quantize_on_load_from_half_precision(tmp_path):
    cfg = QCFG["llama"]
    w = lm.random_weights(cfg, 3)
    hf = lm.write_hf_dir(str(tmp_path / "bf16"), cfg, w, "BF16")
    held = {k: lm.rounded(v, "BF16") for k, v in w.items()}
    got = llm.load(hf, quantize="q8_0").logits(PROMPT)
    assert rel_err(got, lm.reference_logits(cfg, held, PROMPT)) < Q8
    with pytest.raises(llm.ConfigError, match="q4_k"):
        llm.load(hf, quantize="q3_xs")


def test_generate_cli_quantize(tmp_path):
    gen = os.environ.get("TINYFIN_GENERATE")
    if not gen:
        pytest.skip("TINYFIN_GENERATE is not set (meson test sets it)")
    cfg, w, hf = hf_model(tmp_path)
    path = quantize_tool(hf, str(tmp_path / "q4_k.gguf"), "q4_k")
    ids = ",".join(map(str, PROMPT))
    outs = []
    for model, extra in ((hf, ["--quantize", "q4_k"]), (path, [])):
        r = subprocess.run([gen, "-m", model, "--ids", ids, "-n", "6", "--temp", "0", "--ignore-eos"] + extra,
                           capture_output=True, text=True, timeout=120, env=dict(os.environ, TINYFIN_BACKEND="cpu"))
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.split())
    assert len(outs[0]) == 6 and outs[0] == outs[1]
    assert "quantizing to q4_k_m" in r.stderr or True


# ---- GGUF files with block types from the tests' own writer -------------------------------------

def mixed_gguf(tmp_path, cfg, seed=0, types=None):
    """A Q4_K_M-like file: Q4_K matrices, Q6_K attn_v/ffn_down/output, Q8_0 embedding, F32 norms;
    random valid blocks. Returns (path, HF-named dequantized weights)."""
    rng = np.random.default_rng(seed)
    types = types or {}
    base = lm.random_weights(cfg, seed)  # norms (F32) and shapes
    a = cfg["model_type"]
    md = [("general.architecture", lm.GGUF_STRING, a), ("general.alignment", lm.GGUF_U32, 32),
          ("general.file_type", lm.GGUF_U32, 15),
          (f"{a}.context_length", lm.GGUF_U32, cfg["max_position_embeddings"]),
          (f"{a}.embedding_length", lm.GGUF_U32, cfg["hidden_size"]),
          (f"{a}.block_count", lm.GGUF_U32, cfg["num_hidden_layers"]),
          (f"{a}.feed_forward_length", lm.GGUF_U32, cfg["intermediate_size"]),
          (f"{a}.attention.head_count", lm.GGUF_U32, cfg["num_attention_heads"]),
          (f"{a}.attention.head_count_kv", lm.GGUF_U32, cfg["num_key_value_heads"]),
          (f"{a}.rope.freq_base", lm.GGUF_F32, cfg["rope_theta"]),
          (f"{a}.attention.layer_norm_rms_epsilon", lm.GGUF_F32, cfg["rms_norm_eps"])]
    tensors = []

    def add(name, shape, tname, scale):
        data = gq.random_k_blocks(rng, tname, shape[0], shape[1], scale)
        tensors.append((name, list(shape), tname, data))
        return gq.dequantize(data, tname, shape)

    def add_f32(name, a32):
        tensors.append((name, list(a32.shape), "F32", a32.astype("<f4").tobytes()))
        return a32

    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    d = lm.head_dim(cfg)
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    w = {"model.embed_tokens.weight": add("token_embd.weight", (v, h), types.get("embed", "Q8_0"), 1.0),
         "model.norm.weight": add_f32("output_norm.weight", base["model.norm.weight"])}
    if not cfg.get("tie_word_embeddings"):
        w["lm_head.weight"] = add("output.weight", (v, h), types.get("output", "Q6_K"), 1 / np.sqrt(h))
    mat = types.get("matrix", "Q4_K")
    for l in range(cfg["num_hidden_layers"]):
        p, g = f"model.layers.{l}.", f"blk.{l}."
        w[p + "input_layernorm.weight"] = add_f32(g + "attn_norm.weight", base[p + "input_layernorm.weight"])
        wq = add(g + "attn_q.weight", (q, h), mat, 1 / np.sqrt(h))
        wk = add(g + "attn_k.weight", (kv, h), mat, 1 / np.sqrt(h))
        w[p + "self_attn.q_proj.weight"] = unpermute(wq, cfg["num_attention_heads"])
        w[p + "self_attn.k_proj.weight"] = unpermute(wk, cfg["num_key_value_heads"])
        w[p + "self_attn.v_proj.weight"] = add(g + "attn_v.weight", (kv, h), types.get("wv", "Q6_K"), 1 / np.sqrt(h))
        w[p + "self_attn.o_proj.weight"] = add(g + "attn_output.weight", (h, q), mat, 1 / np.sqrt(q))
        w[p + "post_attention_layernorm.weight"] = add_f32(g + "ffn_norm.weight",
                                                            base[p + "post_attention_layernorm.weight"])
        w[p + "mlp.gate_proj.weight"] = add(g + "ffn_gate.weight", (i, h), mat, 1 / np.sqrt(h))
        w[p + "mlp.up_proj.weight"] = add(g + "ffn_up.weight", (i, h), mat, 1 / np.sqrt(h))
        w[p + "mlp.down_proj.weight"] = add(g + "ffn_down.weight", (h, i), types.get("wdown", "Q6_K"),
                                            1 / np.sqrt(i))
    path = str(tmp_path / "mixed.gguf")
    with open(path, "wb") as f:
        f.write(gq.gguf_raw_bytes(md, tensors))
    return path, w


@pytest.mark.parametrize("types", [{}, dict(matrix="Q5_K", wv="Q4_0", wdown="Q8_0", embed="Q4_K", output="Q4_K")],
                         ids=["q4_k_m", "q5_k-q4_0-q8_0"])
def test_mixed_quantized_file_from_own_writer(tmp_path, types):
    cfg = QCFG["llama"]
    path, w = mixed_gguf(tmp_path, cfg, types=types)
    model = llm.load(path, backend="cpu")
    got = model.logits(PROMPT)
    want = lm.reference_logits(cfg, w, PROMPT)
    print(f"mixed {types}: rel err {rel_err(got, want):.4f}")
    assert rel_err(got, want) < TIGHT
    # Zero-copy on cpu: nothing converted or copied (norms are F32 in the file).
    assert model._m.bytes_copied == 0 and model._m.bytes_in_place > 0


def _backends():
    # Every loaded backend but cpu: cuda too where it loads (scripts/gpu-check runs these with -k cuda).
    return [b for b in tf.available_backends() if b != "cpu"]


@pytest.mark.parametrize("backend", _backends())
def test_quantized_models_on_every_backend(tmp_path, backend):
    cfg = QCFG["llama"]
    path, w = mixed_gguf(tmp_path, cfg)
    want = lm.reference_logits(cfg, w, PROMPT)
    tf.reset_stats()
    model = llm.load(path, backend=backend)
    assert model.device.startswith(backend)
    got = model.logits(PROMPT)
    steps = model.session_logits([PROMPT[:6]], [[t] for t in PROMPT[6:9]], 16)[0]
    assert rel_err(got, want) < TIGHT
    assert rel_err(steps, want[5:9]) < TIGHT
    # vulkan, opengl and opencl (shaders/quant.comp) and cuda (quant.cu) run matmul_q and
    # embedding_q themselves, blas with cpu's kernels: a quantized model leaves nothing to cpu.
    fallbacks = tf.stats()["fallbacks"]
    print(f"{backend}: ops that fell back to cpu: {fallbacks}")
    assert not fallbacks
    cfg2, w2, hf = hf_model(tmp_path)
    on_load = llm.load(hf, backend=backend, quantize="q8_0").logits(PROMPT)
    assert rel_err(on_load, lm.reference_logits(cfg2, w2, PROMPT)) < Q8


# ---- hostile quantized files --------------------------------------------------------------------

def _hostile(tmp_path, name, tensors, offsets=None, cut=0):
    data = gq.gguf_raw_bytes([("general.architecture", lm.GGUF_STRING, "llama")], tensors, offsets=offsets)
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        f.write(data[:len(data) - cut] if cut else data)
    return path


def test_hostile_quantized_files(tmp_path):
    rng = np.random.default_rng(1)
    q8 = gq.random_k_blocks(rng, "Q8_0", 4, 64)
    q4k = gq.random_k_blocks(rng, "Q4_K", 2, 256)
    cases = {
        # rows that are not whole blocks
        "row33.gguf": ([("a", [4, 33], "Q8_0", q8)], None, 0, "not whole"),
        "row128k.gguf": ([("a", [4, 128], "Q4_K", q4k)], None, 0, "not whole"),
        # a tensor's bytes (from its blocks) running past the end of the file
        "short.gguf": ([("a", [2, 256], "Q4_K", q4k)], None, 100, "past the end"),
        "bigdim.gguf": ([("a", [1 << 20, 256], "Q4_K", q4k)], None, 0, "past the end"),
        # the second tensor starting inside the first one's blocks
        "overlap.gguf": ([("a", [4, 64], "Q8_0", q8), ("b", [4, 64], "Q8_0", q8)], [0, 256], 0, "overlap"),
        "unaligned.gguf": ([("a", [4, 64], "Q8_0", q8)], [2], 0, "alignment"),
        # dims whose byte size overflows
        "overflow.gguf": ([("a", [1 << 40, 1 << 20], "Q8_0", q8)], None, 0, "overflow|out of range|past the end"),
    }
    for name, (tensors, offsets, cut, msg) in cases.items():
        path = _hostile(tmp_path, name, tensors, offsets, cut)
        with pytest.raises(llm.FormatError, match=msg):
            llm.read_gguf(path)
        with pytest.raises(llm.FormatError):
            llm.load(path)
        with pytest.raises(gq.GgufLayoutError):
            gq.read_gguf(path)


def test_quantized_types_tinyfin_cannot_run(tmp_path):
    cfg = QCFG["llama"]
    path, _ = mixed_gguf(tmp_path, cfg)
    data = bytearray(open(path, "rb").read())
    # Retype the embedding Q8_0 (8) -> Q8_1 (9): same geometry class but no tinyfin dtype.
    name = b"token_embd.weight"
    at = data.index(name) + len(name)
    nd = int.from_bytes(data[at:at + 4], "little")
    tpos = at + 4 + 8 * nd
    assert int.from_bytes(data[tpos:tpos + 4], "little") == 8
    data[tpos:tpos + 4] = (9).to_bytes(4, "little")
    bad = str(tmp_path / "q8_1.gguf")
    open(bad, "wb").write(bytes(data))
    # Q8_1 blocks are 36 bytes: the size check or the type check refuses it, typed either way.
    with pytest.raises((llm.ConfigError, llm.FormatError)):
        llm.load(bad)
    # A quantized matrix of the wrong shape: ConfigError naming the tensor.
    path2, _ = mixed_gguf(tmp_path, dict(cfg, intermediate_size=768))
    os.rename(path2, str(tmp_path / "wide.gguf"))
    meta_cfg = str(tmp_path / "wide.gguf")
    data = bytearray(open(meta_cfg, "rb").read())
    key = b"llama.feed_forward_length"
    at = data.index(key) + len(key) + 4
    data[at:at + 4] = (512).to_bytes(4, "little")
    open(meta_cfg, "wb").write(bytes(data))
    with pytest.raises(llm.ConfigError, match="ffn_gate"):
        llm.load(meta_cfg)


def test_quantize_a_gguf_file_keeps_its_metadata_and_vocabulary(tmp_path):
    from test_llm_text import gpt2_vocab
    tokens, vocab = gpt2_vocab()
    cfg = dict(QCFG["llama"], vocab_size=len(tokens), bos_token_id=0, eos_token_id=1)
    w = lm.random_weights(cfg, 4)
    src = lm.write_gguf(str(tmp_path / "f32.gguf"), cfg, w, vocab=vocab)
    hf = lm.write_hf_dir(str(tmp_path / "hf"), cfg, w)
    a = quantize_tool(src, str(tmp_path / "from-gguf.gguf"), "q4_k")
    b = quantize_tool(hf, str(tmp_path / "from-hf.gguf"), "q4_k")
    meta_src, _, _ = gq.read_gguf(src)
    meta, tensors, _ = gq.read_gguf(a)
    # Every key of the input is kept (the vocabulary included); file_type and the quantization
    # version are the output's.
    for k, v in meta_src.items():
        assert meta[k] == v, k
    assert meta["general.file_type"] == 15 and meta["general.quantization_version"] == 2
    assert meta["tokenizer.ggml.tokens"] == tokens
    # The same blocks from either input: the GGUF input's Q/K rows are already permuted.
    _, tensors_hf, _ = gq.read_gguf(b)
    assert {n: t[2] for n, t in tensors.items()} == {n: t[2] for n, t in tensors_hf.items()}
    model = llm.load(a)
    assert model.tokenizer.decode(model.tokenizer.encode("hello world")) == "hello world"
    want = lm.reference_logits(cfg, weights_from_gguf(a, cfg)[2], PROMPT)
    assert rel_err(model.logits(PROMPT), want) < TIGHT
    # Quantizing a quantized file again needs saying so.
    with pytest.raises((llm.ConfigError, AssertionError), match="requantize|already"):
        llm.quantize_file(a, str(tmp_path / "again.gguf"), "q8_0")
