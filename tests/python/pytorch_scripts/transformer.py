"""A PyTorch training script, run unmodified but for its imports by test_pytorch_scripts.py:
a one-block causal transformer language model on a repeating token sequence, AdamW with a
linear warmup then cosine decay (SequentialLR), gradient clipping, and a checkpoint that lets a
run stop and resume. argv: the data file (.npz: tokens), a checkpoint path, and the mode:
"full" (12 steps), "first" (6 steps, then save) or "resume" (load, then steps 6..11)."""
import json
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, HEADS, CONTEXT, STEPS = 12, 16, 2, 8, 12


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.ln2 = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
        self.register_buffer("mask", torch.tril(torch.ones(CONTEXT, CONTEXT)) == 0)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(DIM, dim=2)
        q = q.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // HEADS))
        att = att.masked_fill(self.mask[:t, :t], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(CONTEXT, DIM)
        self.block = Block()
        self.ln = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t))
        return self.head(self.ln(self.block(x)))


data = np.load(sys.argv[1])
checkpoint_path, mode = sys.argv[2], sys.argv[3]
tokens = torch.from_numpy(data["tokens"])

model = TinyLM()
with torch.no_grad():
    for i, p in enumerate(model.parameters()):
        p.copy_(torch.from_numpy(data[f"p{i}"]))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=3)
decay = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=STEPS - 3)
scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, decay], milestones=[3])

start = 0
if mode == "resume":
    checkpoint = torch.load(checkpoint_path)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    start = checkpoint["step"]
stop = STEPS // 2 if mode == "first" else STEPS

losses = []
for step in range(start, stop):
    offset = (step * 3) % (tokens.shape[0] - CONTEXT - 1)
    batch = torch.stack([tokens[offset + j:offset + j + CONTEXT + 1] for j in range(4)])
    inputs, targets = batch[:, :-1], batch[:, 1:]
    logits = model(inputs)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    losses.append(loss.item())

if mode == "first":
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "step": stop}, checkpoint_path)
print(json.dumps({"losses": losses, "lr": optimizer.param_groups[0]["lr"],
                  "params": [p.detach().numpy().tolist() for p in model.parameters()]}))
