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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama-1.1b")
    p.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    p.add_argument("--layers", type=int, default=0, help="fewer layers than the published model (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--order", choices=["hf", "grouped"], default="hf", help="the tensors' order in the file")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    mt, h, layers, heads, kv, inter, vocab, theta, tied, extra = SHAPES[a.shape]
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
    rng = np.random.default_rng(a.seed)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for name, shape in shapes:
            if len(shape) == 1:
                x = np.ones(shape, np.float32) if name.endswith("norm.weight") else np.zeros(shape, np.float32)
            else:
                x = (rng.standard_normal(shape, dtype=np.float32) * (1.0 / np.sqrt(shape[1]))).astype(np.float32)
            f.write(bf16_bits(x).tobytes() if a.dtype == "bf16" else x.astype("<f2" if a.dtype == "f16" else "<f4").tobytes())
    print(f"{a.out}: {a.shape} ({layers} layers), {a.dtype}, {offset / 2**30:.2f} GiB of weights")


if __name__ == "__main__":
    main()
