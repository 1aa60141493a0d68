#!/usr/bin/python3
"""Perplexity of a small Llama-shaped model per weight type (docs/numerics.md "Quantized weights").

Trains a character-level Llama (RMSNorm, rotary attention with grouped KV heads, SwiGLU; hidden
256 so that every row is whole 256-blocks and the k-quants apply) with tinyfin on Debian's
fortunes text, writes it as a Hugging Face directory (config.json + model.safetensors), then
loads it with tinyfin.llm in f32 and quantized on load (q8_0, q4_0, q4_k = llama.cpp's Q4_K_M
mix) and reports the perplexity of the held-out text under each.

    tools/llm_quant_perplexity.py [--steps 600] [--out DIR] [--eval-tokens 8192] [--data DIR]

Runs on the cpu backend; a few minutes on two cores.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np

import tinyfin as tf
import tinyfin.llm as llm
import tinyfin.nn.functional as F
import tinyfin.optim as optim

HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, CONTEXT = 256, 512, 2, 4, 2, 64


def load_text(directory):
    files = sorted(os.path.join(directory, f) for f in os.listdir(directory))
    files = [f for f in files if os.path.isfile(f) and not os.path.islink(f)
             and os.path.splitext(f)[1] not in (".dat", ".u8")]
    if not files:
        sys.exit(f"no fortune text files in {directory}: install Debian's fortunes package")
    data = np.frombuffer(b"".join(open(f, "rb").read() for f in files), np.uint8)
    vocab = np.unique(data)
    index = np.full(256, -1, np.int64)
    index[vocab] = np.arange(len(vocab))
    tokens = index[data]
    n = int(len(tokens) * 0.9)
    return len(vocab), tokens[:n], tokens[n:]


def init_params(vocab, seed):
    rng = np.random.default_rng(seed)

    def mat(o, n, scale=1.0):
        return (rng.standard_normal((o, n)) * scale / math.sqrt(n)).astype(np.float32)

    d = HIDDEN // HEADS
    p = {"model.embed_tokens.weight": (rng.standard_normal((vocab, HIDDEN)) * 0.5).astype(np.float32),
         "model.norm.weight": np.ones(HIDDEN, np.float32), "lm_head.weight": mat(vocab, HIDDEN)}
    for l in range(LAYERS):
        q = f"model.layers.{l}."
        p[q + "input_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        p[q + "post_attention_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        p[q + "self_attn.q_proj.weight"] = mat(HEADS * d, HIDDEN)
        p[q + "self_attn.k_proj.weight"] = mat(KV_HEADS * d, HIDDEN)
        p[q + "self_attn.v_proj.weight"] = mat(KV_HEADS * d, HIDDEN)
        p[q + "self_attn.o_proj.weight"] = mat(HIDDEN, HEADS * d, 1 / math.sqrt(2 * LAYERS))
        p[q + "mlp.gate_proj.weight"] = mat(INTER, HIDDEN)
        p[q + "mlp.up_proj.weight"] = mat(INTER, HIDDEN)
        p[q + "mlp.down_proj.weight"] = mat(HIDDEN, INTER, 1 / math.sqrt(2 * LAYERS))
    return {k: tf.tensor(v, requires_grad=True) for k, v in p.items()}


def forward(p, x):
    """x [B, T] int64 -> logits [B*T, vocab]; Hugging Face Llama semantics (rotate_half rope)."""
    b, t = x.shape
    d = HIDDEN // HEADS
    h = F.embedding(x, p["model.embed_tokens.weight"])
    for l in range(LAYERS):
        q = f"model.layers.{l}."
        a = tf.rms_norm(h, [HIDDEN], p[q + "input_layernorm.weight"], 1e-5)
        qh = F.linear(a, p[q + "self_attn.q_proj.weight"]).view(b, t, HEADS, d)
        kh = F.linear(a, p[q + "self_attn.k_proj.weight"]).view(b, t, KV_HEADS, d)
        vh = F.linear(a, p[q + "self_attn.v_proj.weight"]).view(b, t, KV_HEADS, d)
        qh = tf.rope(qh, 10000.0, False, 0, 1).transpose(1, 2)
        kh = tf.rope(kh, 10000.0, False, 0, 1).transpose(1, 2)
        vh = vh.transpose(1, 2)
        g = HEADS // KV_HEADS
        kh = kh.reshape(b, KV_HEADS, 1, t, d).expand(b, KV_HEADS, g, t, d).reshape(b, HEADS, t, d)
        vh = vh.reshape(b, KV_HEADS, 1, t, d).expand(b, KV_HEADS, g, t, d).reshape(b, HEADS, t, d)
        o = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True).transpose(1, 2).reshape(b, t, HIDDEN)
        h = h + F.linear(o, p[q + "self_attn.o_proj.weight"])
        a = tf.rms_norm(h, [HIDDEN], p[q + "post_attention_layernorm.weight"], 1e-5)
        m = tf.silu(F.linear(a, p[q + "mlp.gate_proj.weight"])) * F.linear(a, p[q + "mlp.up_proj.weight"])
        h = h + F.linear(m, p[q + "mlp.down_proj.weight"])
    h = tf.rms_norm(h, [HIDDEN], p["model.norm.weight"], 1e-5)
    return F.linear(h, p["lm_head.weight"]).reshape(b * t, -1)


def write_hf(out, params, vocab):
    os.makedirs(out, exist_ok=True)
    cfg = dict(model_type="llama", architectures=["LlamaForCausalLM"], vocab_size=vocab, hidden_size=HIDDEN,
               intermediate_size=INTER, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
               num_key_value_heads=KV_HEADS, rms_norm_eps=1e-5, rope_theta=10000.0, max_position_embeddings=1024,
               tie_word_embeddings=False, hidden_act="silu", bos_token_id=0, eos_token_id=0)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
    header, blobs, off = {}, [], 0
    for name, t in params.items():
        a = np.ascontiguousarray(t.detach().numpy(), "<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def perplexity(model, tokens, window):
    """exp(mean NLL) of each token given the previous ones in its window (non-overlapping)."""
    nll, n = 0.0, 0
    for s in range(0, len(tokens) - 1, window):
        chunk = [int(t) for t in tokens[s:s + window + 1]]
        if len(chunk) < 2:
            break
        logits = model.logits(chunk[:-1]).astype(np.float64)
        logits -= logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        nll -= logp[np.arange(len(chunk) - 1), chunk[1:]].sum()
        n += len(chunk) - 1
    return math.exp(nll / n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-tokens", type=int, default=8192)
    ap.add_argument("--out", default="/tmp/tinyfin-fortunes-llama")
    ap.add_argument("--data", default="/usr/share/games/fortunes")
    o = ap.parse_args()
    tf.backend_set("cpu")
    vocab, train, val = load_text(o.data)
    rng = np.random.default_rng(o.seed)
    params = init_params(vocab, o.seed)
    opt = optim.AdamW(list(params.values()), lr=o.lr, weight_decay=0.01)
    t0 = time.time()
    for step in range(o.steps):
        lr = o.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / o.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = rng.integers(0, len(train) - CONTEXT - 1, o.batch)
        x = np.stack([train[s:s + CONTEXT] for s in starts])
        y = np.stack([train[s + 1:s + CONTEXT + 1] for s in starts]).reshape(-1)
        loss = F.cross_entropy(forward(params, tf.tensor(x)), tf.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0 or step == o.steps - 1:
            print(f"step {step}: loss {loss.item():.3f} ({time.time() - t0:.0f} s)", flush=True)
    write_hf(o.out, params, vocab)
    ev = val[:o.eval_tokens + 1]
    print(f"model: {o.out} (vocab {vocab}, hidden {HIDDEN}, {LAYERS} layers), {o.steps} steps; "
          f"perplexity of {len(ev) - 1} held-out characters, windows of {CONTEXT}:")
    base = None
    for q in ["", "q8_0", "q4_0", "q4_k"]:
        model = llm.load(o.out, backend="cpu", quantize=q)
        ppl = perplexity(model, ev, CONTEXT)
        weights = llm.estimate(o.out, quantize=q)["weights"]
        base = base or ppl
        print(f"  {q or 'f32':5s} weights {weights / 1024:8.1f} KiB  perplexity {ppl:.4f}  "
              f"increase {100 * (ppl / base - 1):+.2f}%", flush=True)


if __name__ == "__main__":
    main()
