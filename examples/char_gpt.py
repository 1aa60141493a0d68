#!/usr/bin/python3
"""Trains examples/char_gpt's character-level GPT from Python with the same model, recipe and
report, then samples from it with a key/value cache (docs/char_gpt.md).

    char_gpt.py [--steps N] [--config tiny|small|default] [--seed S] [--batch B] [--lr LR]
                [--min-lr LR] [--dropout P] [--eval-every N] [--eval-batches N] [--save FILE]
                [--sample N] [--temperature T] [--top-k K] [--prompt TEXT] [--data DIR]

The same seed gives the same initial parameters, batches and sampling draws as the C++ program
(nn::mix_seed streams; splitmix64 batch offsets), so both print the same losses up to the order of
float sums. Runs on the backend TINYFIN_BACKEND selects.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

import tinyfin as tf
import tinyfin.nn as nn
import tinyfin.nn.functional as F
from example_report import backend_report

CONFIGS = {  # context, dim, layers, heads: examples/char_gpt/model.cpp's config_named
    "tiny": (16, 32, 2, 2),
    "small": (32, 64, 2, 4),
    "default": (64, 128, 4, 4),
}
MASK64 = (1 << 64) - 1
mix = tf._C.mix_seed


def load_corpus(directory):
    """examples/char_gpt/corpus.cpp: every plain file but the .dat indexes and .u8 links, in
    name order, as bytes; the vocabulary is the distinct bytes; 90/10 train/val split."""
    if not os.path.isdir(directory):
        sys.exit(f"char_gpt: corpus directory {directory} not found; install Debian's fortunes "
                 "package (apt-get install fortunes)")
    files = sorted(os.path.join(directory, f) for f in os.listdir(directory))
    files = [f for f in files if os.path.isfile(f) and not os.path.islink(f)
             and os.path.splitext(f)[1] not in (".dat", ".u8")]
    if not files:
        sys.exit(f"char_gpt: no fortune text files in {directory}; install Debian's fortunes package")
    data = np.frombuffer(b"".join(open(f, "rb").read() for f in files), np.uint8)
    vocab = np.unique(data)
    index = np.full(256, -1, np.int32)
    index[vocab] = np.arange(len(vocab), dtype=np.int32)
    tokens = index[data]
    n = int(len(tokens) * 0.9)
    return files, bytes(vocab), tokens[:n], tokens[n:]


class Batcher:
    """Random windows: batch starts drawn by splitmix64 from the seed, as main.cpp's Batcher."""

    def __init__(self, data, batch, context, seed):
        self.data, self.batch, self.context, self.state = data, batch, context, seed

    def draw(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def next(self):
        span = len(self.data) - self.context - 1
        starts = [(self.draw() * span) >> 64 for _ in range(self.batch)]
        x = np.stack([self.data[s:s + self.context] for s in starts])
        y = np.stack([self.data[s + 1:s + 1 + self.context] for s in starts])
        dev = tf.default_device()
        return tf.tensor(x, device=dev), tf.tensor(y.reshape(-1), device=dev)


class Block(nn.Module):
    """x + drop(proj(attn(ln1(x)))), then x + drop(fc2(gelu(fc(ln2(x)))))."""

    def __init__(self, dim, heads, dropout, seed):
        super().__init__()
        self.dim, self.heads = dim, heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, seed=mix(seed, 1))
        self.proj = nn.Linear(dim, dim, seed=mix(seed, 2))
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim, seed=mix(seed, 3))
        self.fc2 = nn.Linear(4 * dim, dim, seed=mix(seed, 4))
        self.drop1 = nn.Dropout(dropout, seed=mix(seed, 5))
        self.drop2 = nn.Dropout(dropout, seed=mix(seed, 6))

    def forward(self, x, batch, length, cache=None, layer=0):
        e, h = self.dim, self.heads
        q, k, v = (t.view(batch, length, h, e // h).transpose(1, 2)
                   for t in tf.split(self.qkv(self.ln1(x)), e, 1))
        if cache is not None:
            keys, values, start = cache["keys"][layer], cache["values"][layer], cache["length"]
            keys[:, :, start:start + length] = k
            values[:, :, start:start + length] = v
            k, v = keys[:, :, :start + length], values[:, :, :start + length]
        # Causal, aligned bottom-right: new queries see the whole cached prefix.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(batch * length, e)
        r = x + self.drop1(self.proj(y))
        return r + self.drop2(self.fc2(tf.gelu(self.fc(self.ln2(r)))))


class GPT(nn.Module):
    def __init__(self, vocab, config, dropout, seed):
        super().__init__()
        self.context, self.dim, layers, self.heads = CONFIGS[config]
        # nn::Embedding(n, dim, s) draws N(0, 1) from the stream mix_seed(s, 0).
        self.tok = nn.Embedding(vocab, self.dim, seed=mix(mix(seed, 1), 0))
        self.pos = nn.Embedding(self.context, self.dim, seed=mix(mix(seed, 2), 0))
        self.drop = nn.Dropout(dropout, seed=mix(seed, 3))
        self.blocks = nn.ModuleList(Block(self.dim, self.heads, dropout, mix(seed, 100 + i)) for i in range(layers))
        self.ln_f = nn.LayerNorm(self.dim)
        self.head = nn.Linear(self.dim, vocab, seed=mix(seed, 4))

    def forward(self, tokens, cache=None):
        b, t = tokens.shape
        offset = cache["length"] if cache else 0
        positions = tf.arange(offset, offset + t, dtype=tf.int64, device=self.tok.weight.device)
        x = self.drop((self.tok(tokens) + self.pos(positions)).reshape(b * t, self.dim))
        for i, block in enumerate(self.blocks):
            x = block(x, b, t, cache, i)
        if cache is not None:
            cache["length"] += t
        return self.head(self.ln_f(x))

    def make_cache(self, batch):
        shape = (batch, self.heads, self.context, self.dim // self.heads)
        dev = self.tok.weight.device
        return {"keys": [tf.zeros(*shape, device=dev) for _ in self.blocks],
                "values": [tf.zeros(*shape, device=dev) for _ in self.blocks], "length": 0}


def pick_token(logits, temperature, top_k, u):
    """chargpt::pick_token: greedy at temperature 0, else a draw among the top k."""
    if temperature <= 0:
        return int(np.argmax(logits))
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    k = top_k if 0 < top_k < len(logits) else len(logits)
    top = float(logits[order[0]])
    p = [math.exp((float(logits[order[i]]) - top) / temperature) for i in range(k)]
    target = u * sum(p)
    for i in range(k):
        target -= p[i]
        if target < 0:
            return order[i]
    return order[k - 1]


def sample(model, prompt, tokens, temperature, top_k, seed):
    """chargpt::sample: the KV cache primed with the prompt, then one token at a time; when the
    cache is full the last context/2 tokens are fed again into an emptied cache."""
    model.eval()
    state = [mix(seed, 0x5A3B1E)]

    def uniform():
        state[0] = (state[0] + 0x9E3779B97F4A7C15) & MASK64
        z = state[0]
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return ((z ^ (z >> 31)) >> 11) * 2.0 ** -53

    dev = model.tok.weight.device
    out, everything = [], list(prompt)
    with tf.no_grad():
        cache = model.make_cache(1)

        def feed(seq):
            logits = model(tf.tensor(np.array([seq], np.int32), device=dev), cache)
            return logits[len(seq) - 1].numpy()

        logits = feed(everything[-model.context:])
        t0 = time.perf_counter()
        for i in range(tokens):
            nxt = pick_token(logits, temperature, top_k, uniform())
            everything.append(nxt)
            out.append(nxt)
            if i + 1 == tokens:
                break
            if cache["length"] == model.context:
                cache["length"] = 0
                logits = feed(everything[-max(1, model.context // 2):])
            else:
                logits = feed([nxt])
        seconds = time.perf_counter() - t0
    model.train()
    return out, seconds


def validation_loss(model, val, o):
    model.eval()
    batcher = Batcher(val, o.batch, model.context, mix(o.seed, 0xE7A1))
    total = tf.zeros(())
    with tf.no_grad():
        for _ in range(o.eval_batches):
            x, y = batcher.next()
            total = total + F.cross_entropy(model(x), y)
    model.train()
    return total.item() / o.eval_batches


def parameter_count(vocab, context, dim, layers):
    per_block = 2 * 2 * dim + (dim * 3 * dim + 3 * dim) + (dim * dim + dim) + (dim * 4 * dim + 4 * dim) + (4 * dim * dim + dim)
    return vocab * dim + context * dim + layers * per_block + 2 * dim + dim * vocab + vocab


def memory_estimate(vocab, config, batch, training):
    """Bytes the model needs on its device, as examples/char_gpt/model.cpp's training_bytes and
    inference_bytes: parameters, gradients and AdamW's two moments plus what autograd keeps of
    one batch (training), or parameters, the KV cache and one step's activations (sampling)."""
    context, dim, layers, heads = CONFIGS[config]
    params = parameter_count(vocab, context, dim, layers)
    if training:
        n = batch * context
        activations = n * dim * (17 * layers + 4) + 2 * n * vocab + 4 * batch * heads * context * context
        return 4 * (4 * params + activations)
    return 4 * (params + 2 * layers * context * dim + (8 * dim + 2 * vocab))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--config", default="default", choices=sorted(CONFIGS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr", type=float, default=None, help="end of the cosine decay (default LR: no decay)")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--save")
    p.add_argument("--sample", type=int, default=200)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--prompt", default="\n")
    p.add_argument("--data", default="/usr/share/games/fortunes")
    o = p.parse_args()
    if o.steps < 0 or o.batch < 1 or o.seed < 0 or o.eval_batches < 1 or not 0 <= o.dropout < 1:
        p.error("--steps and --seed need integers >= 0, --batch and --eval-batches >= 1, --dropout in [0, 1)")

    t_start = time.perf_counter()
    files, vocab, train, val = load_corpus(o.data)
    need_train = memory_estimate(len(vocab), o.config, o.batch, True)
    need_infer = memory_estimate(len(vocab), o.config, 1, False)
    # The program states its requirement: with TINYFIN_BACKEND unset or auto, the best backend
    # whose device has this much free memory is chosen (an error names each device otherwise).
    tf.select_backend_for_memory(need_train if o.steps > 0 else need_infer)
    tf.reset_stats()
    model = GPT(len(vocab), o.config, o.dropout, o.seed)
    context, dim, layers, heads = CONFIGS[o.config]
    params = sum(q.numel() for q in model.parameters())
    print(f"# tinyfin on {tf.default_device()}: {o.config} config, {layers} layers, {heads} heads, {dim} dims, "
          f"context {context}, vocab {len(vocab)}, {params} params; corpus {len(train) + len(val)} chars from "
          f"{len(files)} files (train {len(train)}, val {len(val)}), batch {o.batch}, seed {o.seed}")
    print(f"memory estimate: training {need_train / 2**20:.1f} MiB (params, grads, AdamW state, one batch of "
          f"activations), inference {need_infer / 2**20:.1f} MiB (params, KV cache)")
    if o.steps > 0:
        # AdamW with weight decay on matrices only: one optimizer per group (the update is per
        # parameter, so two optimizers are the C++ example's two parameter groups).
        matrices = [q for q in model.parameters() if q.dim() >= 2]
        others = [q for q in model.parameters() if q.dim() < 2]
        optimizers = [tf.optim.AdamW(matrices, lr=o.lr, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1),
                      tf.optim.AdamW(others, lr=o.lr, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.0)]
        schedule = tf.optim.WarmupCosine(o.lr, o.lr if o.min_lr is None else o.min_lr,
                                         min(50, o.steps // 10), o.steps)
        batcher = Batcher(train, o.batch, context, mix(o.seed, 0x7A41))
        report_every = max(1, min(50, o.steps // 10))
        tokens_per_step = o.batch * context
        t0 = t_window = time.perf_counter()
        eval_seconds = 0.0
        for step in range(o.steps):
            for opt in optimizers:
                opt.lr = schedule(step)
            x, y = batcher.next()
            for opt in optimizers:
                opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            nn.clip_grad_norm_(model.parameters(), 1.0)
            for opt in optimizers:
                opt.step()
            done = step + 1
            if done % report_every == 0 or done == o.steps:
                window = time.perf_counter() - t_window
                in_window = report_every if done % report_every == 0 else done % report_every
                print(f"step {done:5d}/{o.steps}  loss {loss.item():.4f}  lr {schedule(step):.2e}  "
                      f"{tokens_per_step * in_window / window:7.0f} tokens/s  "
                      f"{time.perf_counter() - t0 - eval_seconds:6.1f}s", flush=True)
                t_window = time.perf_counter()
            if o.eval_every > 0 and done % o.eval_every == 0 and done < o.steps:
                te = time.perf_counter()
                print(f"step {done:5d}  val loss {validation_loss(model, val, o):.3f}", flush=True)
                eval_seconds += time.perf_counter() - te
                t_window = time.perf_counter()
        train_s = time.perf_counter() - t0 - eval_seconds
        print(f"trained {o.steps} steps in {train_s:.1f}s: {tokens_per_step * o.steps / train_s:.0f} tokens/s")
    print(f"val loss {validation_loss(model, val, o):.3f}")
    peak = max(b["peak_bytes_in_use"] for b in tf.stats()["backends"].values())
    print(f"memory: estimate {(need_train if o.steps > 0 else need_infer) / 2**20:.1f} MiB, "
          f"measured peak {peak / 2**20:.1f} MiB of tensors on {tf.backend_name()}")
    if o.sample > 0:
        prompt = [vocab.index(b) for b in o.prompt.encode("latin-1")]
        out, seconds = sample(model, prompt, o.sample, o.temperature, o.top_k, o.seed)
        print(f"sample ({o.sample} chars, KV cache, {len(out) / seconds:.0f} tokens/s):\n"
              f"{o.prompt}{bytes(vocab[t] for t in out).decode('latin-1')}")
    if o.save:
        tf.save(model, o.save)
        print(f"saved {o.save}")
    print(f"total time {time.perf_counter() - t_start:.1f}s")
    backend_report()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except tf.Error as e:
        sys.exit(f"char_gpt: {e}")
