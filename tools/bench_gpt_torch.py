#!/usr/bin/python3
"""PyTorch's side of tinyfin-bench --train-gpt N --compare torch: examples/char_gpt's model and
recipe in PyTorch, on the same corpus, timed the way tinyfin-bench times its own.

Model (nanoGPT's pre-norm layout, as examples/char_gpt/model.cpp): token and learned position
embeddings (N(0, 1), torch's default), dropout, L blocks of x + drop(proj(attn(ln1(x)))) and
x + drop(fc2(gelu(fc(ln2(x))))) with causal multi-head attention, a final layer norm and a linear
head; linear layers and layer norms keep torch's default initialisation. Recipe: batches of B
random windows of the first 90% of the corpus, by default at the offsets char_gpt draws (its
splitmix64 streams, so both sides train on the same batches and validate on the same windows;
--sampler torch draws them with torch.randint); AdamW (betas 0.9/0.99, eps 1e-8) with weight decay
0.1 on tensors of rank >= 2 only; warmup for min(50, steps/10) steps then cosine down to --min-lr
(default lr: constant after the warmup);
gradients clipped to global norm 1; validation loss over 20 fixed batches of the last 10%.

    /usr/bin/python3 bench_gpt_torch.py --steps 1000 [--time-steps 30] [--threads 2]
        [--blas-threads 1] [--config default] [--batch 32] [--lr 2e-3] [--sample 200]

With --steps N it trains N steps and reports the validation loss; --time-steps K times K steps
only (no loss goal). Sampling: --sample N tokens with a KV cache (torch's own: keys and values
concatenated per layer) under no_grad, one token at a time.
Prints one JSON object.
"""
import argparse
import ctypes
import glob
import json
import math
import os
import resource
import time

CONFIGS = {  # context, dim, layers, heads: examples/char_gpt/model.cpp's config_named
    "tiny": (16, 32, 2, 2),
    "small": (32, 64, 2, 4),
    "default": (64, 128, 4, 4),
}


MASK64 = (1 << 64) - 1


def splitmix64(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def mix_seed(seed, stream):  # tinyfin::nn::mix_seed
    return splitmix64(splitmix64(seed) ^ stream)


class SplitMix:
    """examples/char_gpt/main.cpp's Batcher stream: window starts as (draw * range) >> 64."""

    def __init__(self, state):
        self.state = state

    def below(self, n):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return ((z ^ (z >> 31)) * n) >> 64


def load_corpus(directory):
    files = sorted(f for f in glob.glob(os.path.join(directory, "*"))
                   if os.path.isfile(f) and not os.path.islink(f)
                   and os.path.splitext(f)[1] not in (".dat", ".u8"))
    data = b"".join(open(f, "rb").read() for f in files)
    if not data:
        raise SystemExit(f"no fortune text in {directory}; install Debian's fortunes package")
    vocab = sorted(set(data))
    index = {b: i for i, b in enumerate(vocab)}
    tokens = [index[b] for b in data]
    n = int(len(tokens) * 0.9)
    return vocab, tokens[:n], tokens[n:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=0, help="train this many steps and report the val loss")
    p.add_argument("--time-steps", type=int, default=30, help="steps timed when --steps is 0")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--blas-threads", type=int, default=None)
    p.add_argument("--config", default="default", choices=sorted(CONFIGS))
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr", type=float, default=None, help="end of the cosine decay (default: --lr)")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--sample", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default="/usr/share/games/fortunes")
    p.add_argument("--eval-every", type=int, default=0, help="validation loss every N steps too (char_gpt's --eval-every)")
    p.add_argument("--eval-batches", type=int, default=20, help="validation batches (char_gpt's --eval-batches)")
    p.add_argument("--sampler", default="splitmix", choices=("splitmix", "torch"),
                   help="window offsets: char_gpt's splitmix64 streams (the same batches and validation "
                        "windows as tinyfin for the same seed) or torch.randint")
    p.add_argument("--name", default="default", help="a name for this configuration in the output")
    args = p.parse_args()
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError:
        print(json.dumps({"config": args.name,
                          "error": "torch not installed: apt-get install python3-torch (or scripts/setup --bench)"}))
        return 0
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    blas_threads = None
    try:
        openblas = ctypes.CDLL("libopenblas.so.0")
        openblas.openblas_set_num_threads(args.blas_threads or args.threads)
        blas_threads = openblas.openblas_get_num_threads()
    except OSError:
        pass

    vocab, train, val = load_corpus(args.data)
    train, val = torch.tensor(train), torch.tensor(val)
    V = len(vocab)
    T, E, L, H = CONFIGS[args.config]
    B = args.batch

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.qkv, self.proj = nn.LayerNorm(E), nn.Linear(E, 3 * E), nn.Linear(E, E)
            self.ln2, self.fc, self.fc2 = nn.LayerNorm(E), nn.Linear(E, 4 * E), nn.Linear(4 * E, E)
            self.drop = nn.Dropout(args.dropout)

        def forward(self, x, cache=None):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(E, 2)
            q, k, v = (z.view(b, t, H, E // H).transpose(1, 2) for z in (q, k, v))
            if cache is not None:
                if cache[0] is not None:
                    k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
                cache[0], cache[1] = k, v
            tq, tk = q.shape[2], k.shape[2]
            if hasattr(F, "scaled_dot_product_attention") and tq == tk:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # bottom-right causal mask, as tinyfin's attention op
                att = (q @ k.transpose(-2, -1)) / math.sqrt(E // H)
                mask = torch.ones(tq, tk, dtype=torch.bool).triu(tk - tq + 1)
                y = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
            x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, E)))
            return x + self.drop(self.fc2(F.gelu(self.fc(self.ln2(x)))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(V, E), nn.Embedding(T, E)
            self.drop = nn.Dropout(args.dropout)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln, self.head = nn.LayerNorm(E), nn.Linear(E, V)

        def forward(self, idx, caches=None, offset=0):
            x = self.drop(self.tok(idx) + self.pos(torch.arange(offset, offset + idx.shape[1])))
            for i, block in enumerate(self.blocks):
                x = block(x, None if caches is None else caches[i])
            return self.head(self.ln(x))

    model = GPT()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.99), eps=1e-8)
    total = args.steps if args.steps > 0 else args.time_steps
    warmup = min(50, total // 10)
    min_lr = args.lr if args.min_lr is None else args.min_lr

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        if step >= total:
            return min_lr
        r = (step - warmup) / (total - warmup)
        return min_lr + (args.lr - min_lr) * 0.5 * (1 + math.cos(math.pi * r))

    if args.sampler == "splitmix":
        g = SplitMix(mix_seed(args.seed, 0x7A41))
    else:
        g = torch.Generator().manual_seed(args.seed)

    def batch(d, gen):
        if isinstance(gen, SplitMix):
            ix = [gen.below(len(d) - T - 1) for _ in range(B)]
        else:
            ix = torch.randint(len(d) - T - 1, (B,), generator=gen)
        return (torch.stack([d[i:i + T] for i in ix]), torch.stack([d[i + 1:i + T + 1] for i in ix]))

    def cpu_s():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def validation_loss():
        model.eval()
        with torch.no_grad():
            if args.sampler == "splitmix":
                gv = SplitMix(mix_seed(args.seed, 0xE7A1))
            else:
                gv = torch.Generator().manual_seed(args.seed + 1)
            loss = sum(F.cross_entropy(model(x).view(-1, V), y.view(-1)).item()
                       for x, y in (batch(val, gv) for _ in range(args.eval_batches))) / args.eval_batches
        model.train()
        return loss

    times, cpu_times, val_losses = [], [], {}
    for step in range(total):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        x, y = batch(train, g)
        t0, c0 = time.perf_counter(), cpu_s()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        last_loss = loss.item()
        times.append(time.perf_counter() - t0)
        cpu_times.append(cpu_s() - c0)
        if args.steps > 0 and args.eval_every > 0 and (step + 1) % args.eval_every == 0 and step + 1 < total:
            val_losses[step + 1] = validation_loss()
    out = {"config": args.name, "model": args.config, "torch": torch.__version__,
           "threads": torch.get_num_threads(), "blas_threads": blas_threads, "steps": total,
           "last_loss": last_loss}
    timed = sorted(times[3:] if len(times) > 6 else times)
    median = timed[len(timed) // 2]
    cpu_timed = cpu_times[3:] if len(cpu_times) > 6 else cpu_times
    out.update({"median_ms": median * 1e3, "tokens_per_s": B * T / median,
                "cpu_ms_per_step": sum(cpu_timed) / len(cpu_timed) * 1e3})
    if args.steps > 0:
        val_losses[total] = validation_loss()
        out["val_loss"] = val_losses[total]
        out["val_losses"] = val_losses  # step -> val loss (char_gpt's "val loss" lines)
    model.eval()
    with torch.no_grad():
        if args.sample > 0:
            # One sequence, one token at a time, with each layer's keys and values cached; the
            # cache is refilled with the last T/2 tokens when full (as chargpt::sample does).
            gen = torch.Generator().manual_seed(args.seed)
            tokens = [vocab.index(ord("\n"))]
            caches = [[None, None] for _ in range(L)]
            logits = model(torch.tensor([tokens]), caches, 0)[0, -1]
            length = 1
            t0, c0 = time.perf_counter(), cpu_s()
            for i in range(args.sample):
                probs = torch.softmax(logits / 0.8, -1)
                nxt = int(torch.multinomial(probs, 1, generator=gen))
                tokens.append(nxt)
                if i + 1 == args.sample:
                    break
                if length == T:
                    caches = [[None, None] for _ in range(L)]
                    keep = tokens[-(T // 2):]
                    logits = model(torch.tensor([keep]), caches, 0)[0, -1]
                    length = len(keep)
                else:
                    logits = model(torch.tensor([[nxt]]), caches, length)[0, -1]
                    length += 1
            out["sample_tokens_per_s"] = args.sample / (time.perf_counter() - t0)
            out["sample_cpu_ms_per_token"] = (cpu_s() - c0) * 1e3 / args.sample
            out["sample"] = bytes(vocab[t] for t in tokens[1:]).decode("latin-1")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
