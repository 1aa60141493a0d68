#!/usr/bin/python3
"""PyTorch's speed on the same Llama-family model as tinyfin-bench --llm: the weights of a Hugging
Face directory (config.json + model.safetensors, as tools/tinyfin_llm_random_model.py writes them)
read with numpy and kept in their dtype (bf16 stays bf16), a decoder written here (RMSNorm, RoPE
with rotate_half, grouped-query attention, SwiGLU) with its own preallocated KV cache; times a
prompt's prefill and greedy decoding, medians of --repeat runs after one warm-up. Prints one JSON
line: {"peer": "torch", "prompt_tokens_per_s": ..., "generate_tokens_per_s": ...,
"generate_tokens_per_cpu_s": ...} (the last on the process CPU clock, all threads).

    bench_llm_torch.py --model DIR [--threads N] [--prompt 512] [--generate 16] [--repeat 3]

Debian's python3-torch (1.13); a benchmark peer only, never part of the tests."""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np


def load_safetensors(path):
    import torch
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = np.array(data[lo:hi])
        if info["dtype"] == "BF16":
            t = torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
        elif info["dtype"] == "F16":
            t = torch.from_numpy(raw.view(np.float16))
        elif info["dtype"] == "F32":
            t = torch.from_numpy(raw.view(np.float32))
        else:
            raise ValueError(f"{name}: dtype {info['dtype']} not handled")
        out[name] = t.reshape(info["shape"])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--generate", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"peer": "torch", "error": f"no torch: {e}"}))
        return 0
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    w = load_safetensors(os.path.join(a.model, "model.safetensors"))
    h, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    d = h // heads
    eps = cfg.get("rms_norm_eps", 1e-5)
    theta = cfg.get("rope_theta", 10000.0)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    dtype = head.dtype
    ctx = a.prompt + a.generate + 1
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = torch.arange(ctx, dtype=torch.float32)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(dtype)

    def rms(x, g):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * g

    def rot(x, c, s):  # x [T, H, D]
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * c[:, None, :] + torch.cat([-x2, x1], -1) * s[:, None, :]

    kc = [torch.zeros(kv, ctx, d, dtype=dtype) for _ in range(layers)]
    vc = [torch.zeros(kv, ctx, d, dtype=dtype) for _ in range(layers)]

    def forward(ids, start):
        t = ids.shape[0]
        x = w["model.embed_tokens.weight"][ids]
        c, s = cos[start:start + t], sin[start:start + t]
        total = start + t
        mask = None
        if t > 1:
            mask = torch.full((t, total), float("-inf"), dtype=dtype).triu(start + 1)
        for l in range(layers):
            pre = f"model.layers.{l}."
            y = rms(x, w[pre + "input_layernorm.weight"])
            q = (y @ w[pre + "self_attn.q_proj.weight"].t()).view(t, heads, d)
            k = (y @ w[pre + "self_attn.k_proj.weight"].t()).view(t, kv, d)
            v = (y @ w[pre + "self_attn.v_proj.weight"].t()).view(t, kv, d)
            q, k = rot(q, c, s), rot(k, c, s)
            kc[l][:, start:total] = k.transpose(0, 1)
            vc[l][:, start:total] = v.transpose(0, 1)
            keys = kc[l][:, :total].repeat_interleave(heads // kv, 0)
            vals = vc[l][:, :total].repeat_interleave(heads // kv, 0)
            att = (q.transpose(0, 1) @ keys.transpose(1, 2)) / math.sqrt(d)
            if mask is not None:
                att = att + mask
            o = (att.float().softmax(-1).to(dtype) @ vals).transpose(0, 1).reshape(t, heads * d)
            x = x + o @ w[pre + "self_attn.o_proj.weight"].t()
            y = rms(x, w[pre + "post_attention_layernorm.weight"])
            g = torch.nn.functional.silu(y @ w[pre + "mlp.gate_proj.weight"].t())
            x = x + (g * (y @ w[pre + "mlp.up_proj.weight"].t())) @ w[pre + "mlp.down_proj.weight"].t()
        x = rms(x[-1:], w["model.norm.weight"])
        return (x @ head.t()).float()

    gen = torch.Generator().manual_seed(1234)
    prompt = torch.randint(3, cfg["vocab_size"], (a.prompt,), generator=gen)
    prompt_rates, gen_rates, gen_cpu_rates = [], [], []
    with torch.no_grad():
        for rep in range(a.repeat + 1):
            t0 = time.perf_counter()
            nxt = int(forward(prompt, 0).argmax())
            t1, c1 = time.perf_counter(), time.process_time()
            pos = a.prompt
            for _ in range(a.generate):
                nxt = int(forward(torch.tensor([nxt]), pos).argmax())
                pos += 1
            t2, c2 = time.perf_counter(), time.process_time()
            print(f"bench_llm_torch: {'warm-up' if rep == 0 else 'repeat %d' % rep}: prompt "
                  f"{a.prompt / (t1 - t0):.2f} tokens/s, generation {a.generate / (t2 - t1):.3f} tokens/s",
                  file=sys.stderr, flush=True)
            if rep:
                prompt_rates.append(a.prompt / (t1 - t0))
                gen_rates.append(a.generate / (t2 - t1))
                gen_cpu_rates.append(a.generate / (c2 - c1))
    print(json.dumps({"peer": "torch", "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "prompt_tokens_per_s": float(np.median(prompt_rates)),
                      "generate_tokens_per_s": float(np.median(gen_rates)),
                      "generate_tokens_per_cpu_s": float(np.median(gen_cpu_rates))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
