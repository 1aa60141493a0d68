"""Tiny random-weight Llama-family models for the llm tests: their own safetensors and GGUF
writers (from the formats' specifications: huggingface/safetensors's README, ggml's
docs/gguf.md), and an independent float64 numpy implementation of each architecture written
from the Hugging Face modeling code's definitions (not from tinyfin's)."""
import json
import os
import struct

import numpy as np

# ---- Configurations --------------------------------------------------------------------------

BASE = dict(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, rms_norm_eps=1e-5, rope_theta=10000.0,
            max_position_embeddings=128, tie_word_embeddings=False, hidden_act="silu",
            bos_token_id=1, eos_token_id=2)

ARCHS = {
    "llama": dict(BASE, model_type="llama", architectures=["LlamaForCausalLM"]),
    "llama_gqa_tied": dict(BASE, model_type="llama", num_key_value_heads=2, tie_word_embeddings=True),
    "llama3_scaling": dict(BASE, model_type="llama", num_key_value_heads=2, rope_theta=500000.0,
                           rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                             high_freq_factor=4.0, original_max_position_embeddings=16)),
    "llama_linear": dict(BASE, model_type="llama", rope_scaling=dict(type="linear", factor=2.0)),
    "mistral": dict(BASE, model_type="mistral", num_key_value_heads=2, sliding_window=5),
    "qwen2": dict(BASE, model_type="qwen2", num_key_value_heads=2, tie_word_embeddings=True,
                  rope_theta=1000000.0, use_sliding_window=False, sliding_window=4096),
}


def head_dim(cfg):
    return cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])


def random_weights(cfg, seed=0):
    """Hugging Face tensor names -> float32 arrays."""
    rng = np.random.default_rng(seed)
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    d = head_dim(cfg)
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d

    def mat(o, n):
        return (rng.standard_normal((o, n)) / np.sqrt(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": rng.standard_normal((v, h)).astype(np.float32),
         "model.norm.weight": (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)}
    if not cfg.get("tie_word_embeddings"):
        w["lm_head.weight"] = mat(v, h)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
        w[p + "post_attention_layernorm.weight"] = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
        w[p + "self_attn.q_proj.weight"] = mat(q, h)
        w[p + "self_attn.k_proj.weight"] = mat(kv, h)
        w[p + "self_attn.v_proj.weight"] = mat(kv, h)
        w[p + "self_attn.o_proj.weight"] = mat(h, q)
        if cfg["model_type"] == "qwen2":
            for name, n in (("q", q), ("k", kv), ("v", kv)):
                w[p + f"self_attn.{name}_proj.bias"] = (0.5 * rng.standard_normal(n)).astype(np.float32)
        w[p + "mlp.gate_proj.weight"] = mat(i, h)
        w[p + "mlp.up_proj.weight"] = mat(i, h)
        w[p + "mlp.down_proj.weight"] = mat(h, i)
    return w


# ---- dtypes ------------------------------------------------------------------------------------

def to_bf16_bits(a):
    """float32 -> bf16 bit patterns, round to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def rounded(a, dtype):
    """The float32 values a file of dtype holds for a."""
    if dtype == "F32":
        return a.astype(np.float32)
    if dtype == "F16":
        return a.astype(np.float16).astype(np.float32)
    return from_bf16_bits(to_bf16_bits(a))


def encode(a, dtype):
    if dtype == "F32":
        return np.ascontiguousarray(a, dtype="<f4").tobytes()
    if dtype == "F16":
        return np.ascontiguousarray(a, dtype="<f2").tobytes()
    return to_bf16_bits(a).astype("<u2").tobytes()


# ---- safetensors writer ----------------------------------------------------------------------

def safetensors_bytes(tensors, dtypes=None, metadata=None):
    """tensors: name -> array (float32). dtypes: name -> "F32"/"F16"/"BF16" (default F32)."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        dt = (dtypes or {}).get(name, "F32")
        data = encode(a, dt)
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def hf_file_order(names):
    """The order the safetensors library's save_file writes tensors of one dtype in (its data
    sorted by name, as in Hugging Face's published checkpoints): within a layer down, gate, up, k,
    o, q, v, so that gate/up and q/v lie back to back and k does not."""
    return sorted(names)


def write_hf_dir(path, cfg, weights, dtype="F32", shards=1, order=None):
    """order: a function of the tensor names giving the order the file stores them in (default:
    the dict's, q k v o gate up down within a layer)."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    names = list(weights)
    if order:
        names = order(names)
        weights = {n: weights[n] for n in names}
    dtypes = {n: dtype for n in names}
    if shards == 1:
        with open(os.path.join(path, "model.safetensors"), "wb") as f:
            f.write(safetensors_bytes(weights, dtypes))
        return path
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        with open(os.path.join(path, fname), "wb") as f:
            f.write(safetensors_bytes({n: weights[n] for n in part}, dtypes))
        weight_map.update({n: fname for n in part})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return path


# ---- GGUF writer -----------------------------------------------------------------------------

GGUF_U8, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, \
    GGUF_ARRAY, GGUF_U64, GGUF_I64, GGUF_F64 = range(13)
GGML_TYPES = {"F32": 0, "F16": 1, "BF16": 30}
_SCALAR = {GGUF_U8: "<B", GGUF_I8: "<b", GGUF_U16: "<H", GGUF_I16: "<h", GGUF_U32: "<I", GGUF_I32: "<i",
           GGUF_F32: "<f", GGUF_BOOL: "<?", GGUF_U64: "<Q", GGUF_I64: "<q", GGUF_F64: "<d"}


def gguf_string(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, value):
    if vtype == GGUF_STRING:
        return gguf_string(value)
    if vtype == GGUF_ARRAY:
        etype, items = value
        return struct.pack("<IQ", etype, len(items)) + b"".join(gguf_value(etype, x) for x in items)
    return struct.pack(_SCALAR[vtype], value)


def gguf_bytes(metadata, tensors, version=3, alignment=32):
    """metadata: list of (key, type, value); tensors: list of (name, array, dtype-name)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, vtype, value in metadata:
        out += gguf_string(key) + struct.pack("<I", vtype) + gguf_value(vtype, value)
    datas, offset = [], 0
    for name, a, dt in tensors:
        data = encode(a, dt)
        ne = list(reversed(a.shape))
        out += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", GGML_TYPES[dt], offset)
        datas.append(data)
        offset += len(data)
        offset += (alignment - offset % alignment) % alignment
    out += b"\0" * ((alignment - len(out) % alignment) % alignment)
    for data in datas:
        out += data + b"\0" * ((alignment - len(data) % alignment) % alignment)
    return out


def permute_for_gguf(w, n_head):
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute: each head's rows reordered so that
    the rotary pairs (i, i + D/2) become adjacent."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(cfg):
    """llama.cpp's convert script's rope_freqs for rope_type llama3."""
    rs = cfg["rope_scaling"]
    d = head_dim(cfg)
    freqs = 1.0 / (cfg["rope_theta"] ** (np.arange(0, d, 2, dtype=np.float64) / d))
    low_wavelen = rs["original_max_position_embeddings"] / rs["low_freq_factor"]
    high_wavelen = rs["original_max_position_embeddings"] / rs["high_freq_factor"]
    factors = []
    for f in freqs:
        wavelen = 2 * np.pi / f
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(rs["factor"])
        else:
            smooth = (rs["original_max_position_embeddings"] / wavelen - rs["low_freq_factor"]) / (
                rs["high_freq_factor"] - rs["low_freq_factor"])
            factors.append(1 / ((1 - smooth) / rs["factor"] + smooth))
    return np.array(factors, dtype=np.float32)


def gguf_model_bytes(cfg, weights, dtype="F32", vocab=None, version=3, order=None):
    """order: a function of the tensor list [(name, array, dtype)] giving the order the file
    stores them in (default: each layer's attn_q k v output, ffn_gate up down)."""
    arch = cfg["model_type"]
    a = arch
    d = head_dim(cfg)
    md = [("general.architecture", GGUF_STRING, arch),
          ("general.alignment", GGUF_U32, 32),
          (f"{a}.context_length", GGUF_U32, cfg["max_position_embeddings"]),
          (f"{a}.embedding_length", GGUF_U32, cfg["hidden_size"]),
          (f"{a}.block_count", GGUF_U32, cfg["num_hidden_layers"]),
          (f"{a}.feed_forward_length", GGUF_U32, cfg["intermediate_size"]),
          (f"{a}.attention.head_count", GGUF_U32, cfg["num_attention_heads"]),
          (f"{a}.attention.head_count_kv", GGUF_U32, cfg["num_key_value_heads"]),
          (f"{a}.rope.dimension_count", GGUF_U32, d),
          (f"{a}.rope.freq_base", GGUF_F32, cfg["rope_theta"]),
          (f"{a}.attention.layer_norm_rms_epsilon", GGUF_F32, cfg["rms_norm_eps"]),
          ("tokenizer.ggml.bos_token_id", GGUF_U32, cfg["bos_token_id"]),
          ("tokenizer.ggml.eos_token_id", GGUF_U32, cfg["eos_token_id"])]
    if cfg["model_type"] == "mistral" and cfg.get("sliding_window"):
        md.append((f"{a}.attention.sliding_window", GGUF_U32, cfg["sliding_window"]))
    rs = cfg.get("rope_scaling")
    if rs and rs.get("type", rs.get("rope_type")) == "linear":
        md += [(f"{a}.rope.scaling.type", GGUF_STRING, "linear"), (f"{a}.rope.scaling.factor", GGUF_F32, rs["factor"])]
    if vocab:
        md += vocab
    permute = arch in ("llama", "mistral")
    t = [("token_embd.weight", weights["model.embed_tokens.weight"], dtype),
         ("output_norm.weight", weights["model.norm.weight"], "F32")]
    if "lm_head.weight" in weights:
        t.append(("output.weight", weights["lm_head.weight"], dtype))
    if rs and rs.get("rope_type") == "llama3":
        t.append(("rope_freqs.weight", llama3_rope_factors(cfg), "F32"))
    for l in range(cfg["num_hidden_layers"]):
        p, g = f"model.layers.{l}.", f"blk.{l}."
        wq, wk = weights[p + "self_attn.q_proj.weight"], weights[p + "self_attn.k_proj.weight"]
        if permute:
            wq = permute_for_gguf(wq, cfg["num_attention_heads"])
            wk = permute_for_gguf(wk, cfg["num_key_value_heads"])
        t += [(g + "attn_norm.weight", weights[p + "input_layernorm.weight"], "F32"),
              (g + "attn_q.weight", wq, dtype), (g + "attn_k.weight", wk, dtype),
              (g + "attn_v.weight", weights[p + "self_attn.v_proj.weight"], dtype),
              (g + "attn_output.weight", weights[p + "self_attn.o_proj.weight"], dtype),
              (g + "ffn_norm.weight", weights[p + "post_attention_layernorm.weight"], "F32"),
              (g + "ffn_gate.weight", weights[p + "mlp.gate_proj.weight"], dtype),
              (g + "ffn_up.weight", weights[p + "mlp.up_proj.weight"], dtype),
              (g + "ffn_down.weight", weights[p + "mlp.down_proj.weight"], dtype)]
        for name in ("q", "k", "v"):
            key = p + f"self_attn.{name}_proj.bias"
            if key in weights:
                t.append((g + f"attn_{name}.bias", weights[key], "F32"))
    if order:
        t = order(t)
    return gguf_bytes(md, t, version=version)


def write_gguf(path, cfg, weights, dtype="F32", vocab=None, version=3, order=None):
    with open(path, "wb") as f:
        f.write(gguf_model_bytes(cfg, weights, dtype, vocab, version, order))
    return path


# ---- Reference implementation (float64) --------------------------------------------------------

def inv_frequencies(cfg):
    """transformers' ROPE_INIT_FUNCTIONS: default, linear and llama3."""
    d = head_dim(cfg)
    inv = 1.0 / (cfg["rope_theta"] ** (np.arange(0, d, 2, dtype=np.float64) / d))
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return inv / rs["factor"]
    assert kind == "llama3"
    old = rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / rs["low_freq_factor"], old / rs["high_freq_factor"]
    wavelen = 2 * np.pi / inv
    llama = np.where(wavelen > low_wavelen, inv / rs["factor"], inv)
    smooth = (old / wavelen - rs["low_freq_factor"]) / (rs["high_freq_factor"] - rs["low_freq_factor"])
    smoothed = (1 - smooth) * llama / rs["factor"] + smooth * llama
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, llama)


def reference_logits(cfg, weights, ids):
    """Logits [T, vocab] of token ids, float64, from the Hugging Face definitions."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    eps = cfg["rms_norm_eps"]
    nh, nkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    window = cfg.get("sliding_window") if cfg["model_type"] == "mistral" else None
    T = len(ids)

    def rms(x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g

    def rotate_half(x):
        return np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)

    freqs = np.arange(T, dtype=np.float64)[:, None] * inv_frequencies(cfg)[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    allowed = np.tril(np.ones((T, T), dtype=bool))
    if window:
        qi, kj = np.arange(T)[:, None], np.arange(T)[None, :]
        allowed &= (qi - kj) < window
    x = w["model.embed_tokens.weight"][np.array(ids)]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, w[p + "input_layernorm.weight"])

        def proj(name):
            y = h @ w[p + f"self_attn.{name}_proj.weight"].T
            return y + w[p + f"self_attn.{name}_proj.bias"] if p + f"self_attn.{name}_proj.bias" in w else y

        q = proj("q").reshape(T, nh, d)
        k = proj("k").reshape(T, nkv, d)
        v = proj("v").reshape(T, nkv, d)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        out = np.zeros((T, nh, d))
        for head in range(nh):
            kvh = head // (nh // nkv)
            s = q[:, head] @ k[:, kvh].T / np.sqrt(d)
            s = np.where(allowed, s, -np.inf)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            out[:, head] = s @ v[:, kvh]
        x = x + out.reshape(T, nh * d) @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        g = h @ w[p + "mlp.gate_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    x = rms(x, w["model.norm.weight"])
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T
