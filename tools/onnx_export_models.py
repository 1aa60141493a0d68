#!/usr/bin/python3
"""Exports the real-model ONNX test graphs (tests/onnx/models/) with PyTorch's torch.onnx.export,
from fixed seeds. A development-time tool: it needs Debian's python3-torch and
python3-torchvision, which CI does not install; CI runs the committed files
(tests/onnx/test_models.py, docs/onnx.md "Exported models").

    tools/onnx_export_models.py [--out tests/onnx/models] [--only NAME,...]

Each model NAME gets NAME.onnx (opset 17, parameters stripped: tests/onnx/model_weights.py
regenerates them from numpy seeds recorded in the model's metadata) and NAME.npz (the feeds of
each case and PyTorch's outputs for them, float32 on cpu). The PyTorch modules are given exactly
the weights model_weights.draw() makes, and the exported initializers are checked to equal them.

tests/onnx/model_cases.py --write DIR writes the models with their weights (for tinyfin-bench
--onnx, docs/performance.md) without PyTorch.

The models:
  fashion_cnn   examples/fashion_mnist's CNN: images [batch, 1, 28, 28] -> logits [batch, 10]
  char_gpt      examples/char_gpt's GPT (config default: context 64, dim 128, 4 layers, 4 heads,
                vocabulary 114, the fortunes corpus's): tokens [batch, seq] -> logits [batch*seq, 114]
  resnet18      torchvision's resnet18 (full width, random weights): images [batch, 3, h, w]
  bert          a BERT-style encoder (2 layers, hidden 64, 4 heads, intermediate 256, vocabulary
                1000, 128 positions): input_ids, attention_mask, token_type_ids [batch, seq] ->
                last_hidden_state, pooler_output
  llama_block   a Llama-style decoder block (RMSNorm, rotary positions, grouped-query attention
                with 4 query and 2 key/value heads of 16, past key/value inputs, SwiGLU):
                hidden [batch, seq, 64], past_key/past_value [batch, 2, past, 16] ->
                out, present_key, present_value [batch, 2, past+seq, 16]
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "onnx"))
import model_weights  # noqa: E402

OPSET = 17


# --- examples/fashion_mnist's CNN -------------------------------------------------------------

def fashion_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


# --- examples/char_gpt's GPT ------------------------------------------------------------------

class GptBlock(nn.Module):
    """x + proj(attn(ln1(x))), then x + fc2(gelu(fc(ln2(x)))) (examples/char_gpt/model.cpp)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.dim, self.heads = dim, heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x, batch, length, mask):
        e, h = self.dim, self.heads
        q, k, v = (t.reshape(batch, length, h, e // h).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(e, -1))
        scores = q @ k.transpose(-1, -2) / math.sqrt(e // h)
        y = torch.softmax(scores.masked_fill(mask, float("-inf")), -1) @ v
        r = x + self.proj(y.transpose(1, 2).reshape(batch * length, e))
        return r + self.fc2(F.gelu(self.fc(self.ln2(r))))


class CharGpt(nn.Module):
    def __init__(self, vocab=114, context=64, dim=128, layers=4, heads=4):
        super().__init__()
        self.dim = dim
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(GptBlock(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        b, t = tokens.shape
        positions = torch.arange(t, device=tokens.device)
        x = (self.tok(tokens) + self.pos(positions)).reshape(b * t, self.dim)
        mask = torch.ones(t, t, dtype=torch.bool, device=tokens.device).triu(1)
        for block in self.blocks:
            x = block(x, b, t, mask)
        return self.head(self.ln_f(x))


# --- a BERT-style encoder ---------------------------------------------------------------------

class BertLayer(nn.Module):
    def __init__(self, hidden, heads, intermediate):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.inter = nn.Linear(hidden, intermediate)
        self.out = nn.Linear(intermediate, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask_bias):
        b, s, hidden = x.shape
        d = hidden // self.heads

        def split(t):
            return t.view(b, s, self.heads, d).permute(0, 2, 1, 3)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d) + mask_bias
        ctx = torch.matmul(torch.softmax(scores, -1), v).permute(0, 2, 1, 3).reshape(b, s, hidden)
        x = self.attn_norm(x + self.attn_out(ctx))
        return self.out_norm(x + self.out(F.gelu(self.inter(x))))


class Bert(nn.Module):
    def __init__(self, vocab=1000, hidden=64, layers=2, heads=4, intermediate=256, positions=128, types=2):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(positions, hidden)
        self.token_type = nn.Embedding(types, hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, intermediate) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask, token_type_ids):
        s = input_ids.shape[1]
        positions = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.emb_norm(self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids))
        # As Hugging Face's BERT: masked keys get the most negative float added.
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x, torch.tanh(self.pooler(x[:, 0]))


# --- a Llama-style decoder block with a key/value cache ---------------------------------------

class RmsNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


class LlamaBlock(nn.Module):
    def __init__(self, hidden=64, heads=4, kv_heads=2, intermediate=172, theta=10000.0):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.input_norm = RmsNorm(hidden)
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.post_norm = RmsNorm(hidden)
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)
        inv_freq = 1.0 / theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, hidden, past_key, past_value):
        b, t, _ = hidden.shape
        past = past_key.shape[2]
        positions = torch.arange(past, past + t, dtype=torch.float32, device=hidden.device)
        freqs = positions[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), -1)
        cos, sin = emb.cos(), emb.sin()

        x = self.input_norm(hidden)
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        present_key = torch.cat((past_key, k), 2)
        present_value = torch.cat((past_value, v), 2)
        # Grouped-query attention: each key/value head serves heads / kv_heads query heads.
        rep = self.heads // self.kv_heads
        total = past + t
        keys = present_key[:, :, None].expand(b, self.kv_heads, rep, total, self.head_dim).reshape(
            b, self.heads, total, self.head_dim)
        values = present_value[:, :, None].expand(b, self.kv_heads, rep, total, self.head_dim).reshape(
            b, self.heads, total, self.head_dim)
        scores = torch.matmul(q, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        # Causal with the cached prefix: query i sees keys up to past + i.
        allowed = torch.ones(t, total, dtype=torch.bool, device=hidden.device).tril(past)
        scores = scores.masked_fill(~allowed, float("-inf"))
        attn = torch.matmul(torch.softmax(scores, -1), values)
        h = hidden + self.o_proj(attn.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))
        y = self.post_norm(h)
        out = h + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))
        return out, present_key, present_value


# --- weights ----------------------------------------------------------------------------------

def recipe(name, tensor):
    """How a parameter or buffer is drawn: fan-in scaled normals for weights, near-one norm
    scales, small biases, positive running variances."""
    shape = tuple(tensor.shape)
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "running_var":
        return ["uniform", 0.5, 1.5]
    if leaf == "running_mean":
        return ["normal", 0.1, 0.0]
    if len(shape) == 1:
        return ["normal", 0.1, 1.0] if leaf == "weight" else ["normal", 0.05, 0.0]
    if any(key in name for key in ("tok.", "pos.", "word.", "position.", "token_type.")):
        return ["normal", 0.5, 0.0]  # embeddings
    fan_in = int(np.prod(shape[1:]))
    return ["normal", math.sqrt(2.0 / fan_in), 0.0]


def fill_module(module, seed):
    """Sets every float parameter and buffer of the state from model_weights.draw(); returns the
    recipes by state name."""
    tensors = {}
    state = module.state_dict()
    with torch.no_grad():
        for name, tensor in state.items():
            if not tensor.dtype.is_floating_point:
                continue
            tensors[name] = recipe(name, tensor)
            tensor.copy_(torch.from_numpy(model_weights.draw(seed, name, tuple(tensor.shape), tensors[name])))
    return tensors


# --- export -----------------------------------------------------------------------------------

def export(module, name, seed, inputs, input_names, output_names, dynamic_axes, cases, out_dir):
    """Exports module (state filled from seed) to out_dir/NAME.onnx with parameters stripped, and
    PyTorch's outputs for each case (a tuple of feeds in input_names' order) to NAME.npz."""
    import onnx
    from onnx import numpy_helper
    module.eval()
    tensors = fill_module(module, seed)
    path = os.path.join(out_dir, name + ".onnx")
    with torch.no_grad():
        # PRESERVE keeps BatchNormalization (its eval-mode attributes) instead of folding it into
        # the convolutions, and no constant folding keeps each parameter an initializer of its own
        # name, so that model_weights can regenerate them.
        torch.onnx.export(module, inputs, path, input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes, opset_version=OPSET, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.PRESERVE)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    inits = {t.name: t for t in model.graph.initializer}
    stripped = {}
    for init_name, init in inits.items():
        if init_name in tensors:
            got = numpy_helper.to_array(init)
            want = model_weights.draw(seed, init_name, got.shape, tensors[init_name])
            assert np.array_equal(got, want), f"{name}: initializer {init_name} is not the drawn tensor"
            stripped[init_name] = tensors[init_name]
        elif init.ByteSize() > 65536:
            sys.exit(f"{name}: initializer {init_name} ({init.ByteSize()} bytes) is derived from no state "
                     "tensor; it would have to be committed")
    missing = [n for n in tensors if n not in stripped and not n.endswith("inv_freq")]
    model_weights.strip(model, seed, stripped)
    onnx.save(model, path)

    arrays = {}
    with torch.no_grad():
        for c, feeds in enumerate(cases):
            outs = module(*[torch.from_numpy(f) for f in feeds])
            outs = outs if isinstance(outs, tuple) else (outs,)
            for n, f in zip(input_names, feeds):
                arrays[f"{c}.in.{n}"] = f
            for n, o in zip(output_names, outs):
                arrays[f"{c}.out.{n}"] = o.numpy()
    np.savez_compressed(os.path.join(out_dir, name + ".npz"), **arrays)
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"{name}: {len(model.graph.node)} nodes, {len(stripped)} stripped parameters "
          f"({sum(int(np.prod(inits[n].dims)) for n in stripped)} values), {len(cases)} cases; ops: {' '.join(ops)}")
    if missing:
        print(f"  (state tensors not in the graph: {', '.join(missing)})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                                      "onnx", "models"))
    parser.add_argument("--only", default="")
    o = parser.parse_args()
    os.makedirs(o.out, exist_ok=True)
    only = set(filter(None, o.only.split(",")))
    torch.manual_seed(0)
    rng = None

    def want(name):
        # Each model's feeds from a stream of its own, so that --only reproduces them.
        nonlocal rng
        rng = np.random.default_rng([37, sum(name.encode())])
        return not only or name in only

    def f32(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    if want("fashion_cnn"):
        cases = [(f32(2, 1, 28, 28),), (f32(1, 1, 28, 28),)]
        export(fashion_cnn(), "fashion_cnn", 1, (torch.from_numpy(cases[0][0]),), ["images"], ["logits"],
               {"images": {0: "batch"}, "logits": {0: "batch"}}, cases, o.out)
    if want("char_gpt"):
        cases = [(rng.integers(0, 114, (1, 64)),), (rng.integers(0, 114, (2, 9)),)]
        export(CharGpt(), "char_gpt", 2, (torch.from_numpy(cases[0][0]),), ["tokens"], ["logits"],
               {"tokens": {0: "batch", 1: "seq"}, "logits": {0: "rows"}}, cases, o.out)
    if want("resnet18"):
        import torchvision
        cases = [(f32(1, 3, 32, 32),), (f32(2, 3, 24, 40),)]
        export(torchvision.models.resnet18(weights=None), "resnet18", 3, (torch.from_numpy(cases[0][0]),),
               ["images"], ["logits"], {"images": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}},
               cases, o.out)
    if want("bert"):
        def bert_case(b, s, pad):
            ids = rng.integers(0, 1000, (b, s))
            mask = np.ones((b, s), np.int64)
            mask[-1, s - pad:] = 0  # the last sequence padded
            types = np.zeros((b, s), np.int64)
            types[:, s // 2:] = 1
            return ids, mask, types
        cases = [bert_case(2, 16, 5), bert_case(1, 7, 0)]
        names = ["input_ids", "attention_mask", "token_type_ids"]
        export(Bert(), "bert", 4, tuple(torch.from_numpy(a) for a in cases[0]), names,
               ["last_hidden_state", "pooler_output"],
               {**{n: {0: "batch", 1: "seq"} for n in names}, "last_hidden_state": {0: "batch", 1: "seq"},
                "pooler_output": {0: "batch"}}, cases, o.out)
    if want("llama_block"):
        def llama_case(b, t, past):
            return f32(b, t, 64), f32(b, 2, past, 16), f32(b, 2, past, 16)
        cases = [llama_case(1, 1, 7), llama_case(2, 5, 3), llama_case(1, 4, 0)]
        names = ["hidden", "past_key", "past_value"]
        export(LlamaBlock(), "llama_block", 5, tuple(torch.from_numpy(a) for a in cases[1]), names,
               ["out", "present_key", "present_value"],
               {"hidden": {0: "batch", 1: "seq"}, "past_key": {0: "batch", 2: "past"},
                "past_value": {0: "batch", 2: "past"}, "out": {0: "batch", 1: "seq"},
                "present_key": {0: "batch", 2: "total"}, "present_value": {0: "batch", 2: "total"}},
               cases, o.out)


if __name__ == "__main__":
    main()
