#!/usr/bin/env python3
"""Writes a Hugging Face model directory (config.json + model.safetensors) with random weights in
the shape of a published model, so that anyone can reproduce tinyfin's LLM speed measurements
(docs/llm.md, docs/performance.md) without downloading a checkpoint.

    tools/tinyfin_llm_random_model.py --shape tinyllama-1.1b --dtype bf16 --out /tmp/tinyllama-random
    tools/tinyfin_llm_random_model.py --shape tinyllama-1.1b --layers 2 --out /tmp/tl2   # fewer layers
    tools/tinyfin_llm_random_model.py --shape tiny --out /tmp/tiny                        # a few MB

The tensors are written one at a time (the file is streamed, never held in memory whole), in the
order of --order: "hf" (the default) as the safetensors library's save_file stores a published
checkpoint (sorted by name: within a layer down, gate, up, k, o, q, v: gate/up and q/v back to
back, k apart); "grouped": each layer's q, k, v, o, gate, up, down (q/k/v and gate/up back to
back: tinyfin fuses both, docs/llm.md "Fused products"; this tool's order before --order).

--gguf writes the same model as one GGUF file instead (OUT is the file; llama shapes only): the
names, metadata and Q/K row order of llama.cpp's converter, norms in F32, and a synthetic
SentencePiece-style vocabulary ("llama": <unk>, <s>, </s>, the 256 byte tokens, then made-up
pieces up to the vocabulary size) so that llama.cpp loads the file as well as tinyfin
(tinyfin-bench --llm FILE --compare llamacpp; tinyfin-quantize FILE OUT --type q4_0 keeps it):

    tools/tinyfin_llm_random_model.py --shape tinyllama-1.1b --dtype bf16 --gguf --out /tmp/tl22-bf16.gguf
Numpy only."""
import argparse
import json
import os
import struct

import numpy as np

SHAPES = {
    # name: (model_type, hidden, layers, heads, kv_heads, intermediate, vocab, rope_theta, tied, extra)
    "tinyllama-1.1b": ("llama", 2048, 22, 32, 4, 5632, 32000, 10000.0, False, {}),
    "llama2-7b": ("llama", 4096, 32, 32, 32, 11008, 32000, 10000.0, False, {}),
    "llama3-8b": ("llama", 4096, 32, 32, 8, 14336, 128256, 500000.0, False,
                  {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}),
    "mistral-7b": ("mistral", 4096, 32, 32, 8, 14336, 32000, 10000.0, False, {"sliding_window": 4096}),
    "qwen2-0.5b": ("qwen2", 896, 24, 14, 2, 4864, 151936, 1000000.0, True, {}),
    # Not a published model: Llama-shaped, a few MB, for smoke tests and quick runs of the tools.
    "tiny": ("llama", 128, 2, 4, 2, 352, 512, 10000.0, False, {}),
}


def bf16_bits(a):
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


GGUF_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
              "lm_head.weight": "output.weight", "input_layernorm.weight": "attn_norm.weight",
              "post_attention_layernorm.weight": "ffn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
              "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
              "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
              "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}


def gguf_name(name):
    if name in GGUF_NAMES:
        return GGUF_NAMES[name]
    _, _, layer, rest = name.split(".", 3)
    return f"blk.{layer}.{GGUF_NAMES[rest]}"


def gguf_kv(key, value):
    """One GGUF metadata pair: str, bool, int (u32), float (f32), a list of strings or a numpy array
    (int32 or float32, as llama.cpp wants token types and scores)."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    def typed(v):
        if isinstance(v, str):
            return 8, s(v)
        if isinstance(v, bool):
            return 7, struct.pack("<?", v)
        if isinstance(v, int):
            return (4, struct.pack("<I", v)) if v >= 0 else (5, struct.pack("<i", v))
        return 6, struct.pack("<f", v)

    if isinstance(value, np.ndarray):
        t = {np.dtype(np.int32): 5, np.dtype(np.float32): 6}[value.dtype]
        return s(key) + struct.pack("<IIQ", 9, t, value.size) + value.astype(value.dtype.newbyteorder("<")).tobytes()
    if isinstance(value, list):
        t = typed(value[0])[0]
        body = b"".join(typed(v)[1] for v in value)
        return s(key) + struct.pack("<IIQ", 9, t, len(value)) + body
    t, body = typed(value)
    return s(key) + struct.pack("<I", t) + body


def synthetic_vocabulary(n):
    """tokens, scores, token types (1 normal, 2 unknown, 3 control, 6 byte) of n pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    tokens += [f"\u2581t{i}" for i in range(n - len(tokens))]
    types += [1] * (n - len(types))
    return tokens[:n], -np.arange(n, dtype=np.float32), np.array(types[:n], np.int32)


def permute_rows(w, heads):
    """llama.cpp's converter's Q/K row order: each head's two rotary halves interleaved."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama-1.1b")
    p.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    p.add_argument("--layers", type=int, default=0, help="fewer layers than the published model (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--order", choices=["hf", "grouped"], default="hf", help="the tensors' order in the file")
    p.add_argument("--gguf", action="store_true", help="write OUT as one GGUF file (llama shapes)")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    mt, h, layers, heads, kv, inter, vocab, theta, tied, extra = SHAPES[a.shape]
    if a.gguf and mt != "llama":
        p.error(f"--gguf writes llama shapes; {a.shape} is {mt}")
    layers = a.layers or layers
    d = h // heads
    cfg = dict(model_type=mt, hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
               num_key_value_heads=kv, intermediate_size=inter, vocab_size=vocab, rope_theta=theta,
               tie_word_embeddings=tied, rms_norm_eps=1e-5, max_position_embeddings=4096, hidden_act="silu",
               bos_token_id=1, eos_token_id=2, **extra)
    shapes = [("model.embed_tokens.weight", (vocab, h)), ("model.norm.weight", (h,))]
    if not tied:
        shapes.append(("lm_head.weight", (vocab, h)))
    for l in range(layers):
        pre = f"model.layers.{l}."
        shapes += [(pre + "input_layernorm.weight", (h,)), (pre + "post_attention_layernorm.weight", (h,)),
                   (pre + "self_attn.q_proj.weight", (heads * d, h)), (pre + "self_attn.k_proj.weight", (kv * d, h)),
                   (pre + "self_attn.v_proj.weight", (kv * d, h)), (pre + "self_attn.o_proj.weight", (h, heads * d)),
                   (pre + "mlp.gate_proj.weight", (inter, h)), (pre + "mlp.up_proj.weight", (inter, h)),
                   (pre + "mlp.down_proj.weight", (h, inter))]
        if mt == "qwen2":
            shapes += [(pre + f"self_attn.{n}_proj.bias", (m * d,)) for n, m in (("q", heads), ("k", kv), ("v", kv))]
    if a.order == "hf":
        shapes.sort(key=lambda item: item[0])
    rng = np.random.default_rng(a.seed)

    def tensor(name, shape):
        if len(shape) == 1:
            return np.ones(shape, np.float32) if name.endswith("norm.weight") else np.zeros(shape, np.float32)
        return (rng.standard_normal(shape, dtype=np.float32) * (1.0 / np.sqrt(shape[1]))).astype(np.float32)

    def encoded(x, dtype):
        return bf16_bits(x).tobytes() if dtype == "bf16" else x.astype("<f2" if dtype == "f16" else "<f4").tobytes()

    if a.gguf:
        write_gguf(a, cfg, shapes, tensor, encoded)
        return
    esize, tag = {"bf16": (2, "BF16"), "f16": (2, "F16"), "f32": (4, "F32")}[a.dtype]
    header, offset = {}, 0
    for name, shape in shapes:
        n = int(np.prod(shape)) * esize
        header[name] = {"dtype": tag, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for name, shape in shapes:
            f.write(encoded(tensor(name, shape), a.dtype))
    print(f"{a.out}: {a.shape} ({layers} layers), {a.dtype}, {offset / 2**30:.2f} GiB of weights")


def write_gguf(a, cfg, shapes, tensor, encoded):
    """GGUF v3, 32-byte aligned; matrices in --dtype, vectors F32; tensors streamed in --order."""
    ggml_type, file_type, esize = {"bf16": (30, 32, 2), "f16": (1, 1, 2), "f32": (0, 0, 4)}[a.dtype]
    h, heads, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    tokens, scores, types = synthetic_vocabulary(cfg["vocab_size"])
    meta = [("general.architecture", "llama"), ("general.name", f"random {a.shape}"),
            ("general.file_type", file_type), ("general.alignment", 32),
            ("llama.vocab_size", cfg["vocab_size"]), ("llama.context_length", cfg["max_position_embeddings"]),
            ("llama.embedding_length", h), ("llama.block_count", cfg["num_hidden_layers"]),
            ("llama.feed_forward_length", cfg["intermediate_size"]), ("llama.attention.head_count", heads),
            ("llama.attention.head_count_kv", kv), ("llama.rope.dimension_count", h // heads),
            ("llama.rope.freq_base", float(cfg["rope_theta"])),
            ("llama.attention.layer_norm_rms_epsilon", float(cfg["rms_norm_eps"])),
            ("tokenizer.ggml.model", "llama"), ("tokenizer.ggml.tokens", tokens),
            ("tokenizer.ggml.scores", scores), ("tokenizer.ggml.token_type", types),
            ("tokenizer.ggml.unknown_token_id", 0), ("tokenizer.ggml.bos_token_id", 1),
            ("tokenizer.ggml.eos_token_id", 2), ("tokenizer.ggml.add_bos_token", True),
            ("tokenizer.ggml.add_eos_token", False)]
    infos, offset, layout = [], 0, []
    for name, shape in shapes:
        t, size = (ggml_type, esize) if len(shape) == 2 else (0, 4)
        n = int(np.prod(shape)) * size
        g = gguf_name(name).encode()
        infos.append(struct.pack("<Q", len(g)) + g + struct.pack("<I", len(shape)) +
                     b"".join(struct.pack("<Q", d) for d in reversed(shape)) + struct.pack("<IQ", t, offset))
        layout.append((name, shape, offset))
        offset += (n + 31) // 32 * 32
    head = b"GGUF" + struct.pack("<IQQ", 3, len(shapes), len(meta)) + b"".join(gguf_kv(k, v) for k, v in meta)
    head += b"".join(infos)
    head += b"\0" * ((32 - len(head) % 32) % 32)
    with open(a.out, "wb") as f:
        f.write(head)
        for name, shape, at in layout:
            x = tensor(name, shape)
            if name.endswith("q_proj.weight"):
                x = permute_rows(x, heads)
            elif name.endswith("k_proj.weight"):
                x = permute_rows(x, kv)
            f.seek(len(head) + at)
            f.write(encoded(x, a.dtype) if len(shape) == 2 else encoded(x, "f32"))
    print(f"{a.out}: {a.shape} ({cfg['num_hidden_layers']} layers), {a.dtype} GGUF, "
          f"{(len(head) + offset) / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
