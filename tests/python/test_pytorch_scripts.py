"""Short PyTorch training scripts (tests/python/pytorch_scripts: an MLP; a CNN with BatchNorm, a
DataLoader and a StepLR schedule; a tiny transformer with AdamW, warmup + cosine and a checkpoint
resume) run under tinyfin with only their import lines changed, by the rule
docs/porting-from-pytorch.md gives. Checked against float64 numpy of the same computation (the
MLP's 20 steps; the CNN's first loss and its evaluation from the final state), the schedule's
formula, and resume == uninterrupted bit-exactly; when PyTorch is installed the unchanged scripts
also run under torch and the losses are compared."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "pytorch_scripts")

# What a user changes: the module name torch becomes tinyfin in import lines, bound to the same
# local names (docs/porting-from-pytorch.md).
IMPORT_RULES = [
    (re.compile(r"^import torch$"), "import tinyfin as torch"),
    (re.compile(r"^import torch\.([\w.]+) as (\w+)$"), r"import tinyfin.\1 as \2"),
    (re.compile(r"^from torch((?:\.\w+)*) import (.+)$"), r"from tinyfin\1 import \2"),
]


def port(source):
    """The script with its import lines rewritten; every other line is unchanged (asserted)."""
    out, changed = [], 0
    for line in source.splitlines():
        new = line
        for pattern, repl in IMPORT_RULES:
            new = pattern.sub(repl, new)
        if new != line:
            assert line.startswith(("import ", "from ")), line
            changed += 1
        out.append(new)
    assert changed >= 2
    assert "torch" not in "\n".join(l for l in out if l.startswith(("import ", "from "))).replace("as torch", "")
    return "\n".join(out) + "\n"


def run(script, args, tmp_path, framework):
    source = open(os.path.join(SCRIPTS, script)).read()
    if framework == "tinyfin":
        path = tmp_path / ("tinyfin_" + script)
        path.write_text(port(source))
    else:
        path = os.path.join(SCRIPTS, script)
    env = dict(os.environ)
    if framework == "torch":
        env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, str(path)] + [str(a) for a in args], capture_output=True, text=True,
                          env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def have_torch():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True).returncode == 0


# ---- float64 numpy references ---------------------------------------------------------------

def log_softmax(z):
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def mlp_reference(d, steps=20, lr=0.1, momentum=0.9, wd=1e-4):
    params = [d[k].astype(np.float64) for k in ("w1", "b1", "w2", "b2")]
    bufs = [None] * 4
    x, y = d["x"].astype(np.float64), d["y"]
    losses = []
    for step in range(steps):
        s = (step * 16) % x.shape[0]
        xb, yb = x[s:s + 16], y[s:s + 16]
        w1, b1, w2, b2 = params
        h_pre = xb @ w1.T + b1
        h = np.maximum(h_pre, 0)
        logits = h @ w2.T + b2
        logp = log_softmax(logits)
        n = len(yb)
        losses.append(-logp[np.arange(n), yb].mean())
        g_logits = np.exp(logp)
        g_logits[np.arange(n), yb] -= 1
        g_logits /= n
        g_w2, g_b2 = g_logits.T @ h, g_logits.sum(0)
        g_h = g_logits @ w2 * (h_pre > 0)
        g_w1, g_b1 = g_h.T @ xb, g_h.sum(0)
        for i, g in enumerate([g_w1, g_b1, g_w2, g_b2]):  # torch.optim.SGD's update
            g = g + wd * params[i]
            bufs[i] = g if bufs[i] is None else momentum * bufs[i] + g
            params[i] = params[i] - lr * bufs[i]
    return losses, params


def conv(x, w, b, pad):
    x = np.pad(x, ((0, 0), (0, 0)) + pad)
    o, _, kh, kw = w.shape
    oh, ow = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    out = np.zeros((x.shape[0], o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i:i + kh, j:j + kw], w)
    return out + b.reshape(1, -1, 1, 1)


def batch_norm(x, weight, bias, mean=None, var=None, eps=1e-5):
    if mean is None:
        mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    return (x - mean.reshape(1, -1, 1, 1)) / np.sqrt(var.reshape(1, -1, 1, 1) + eps) * weight.reshape(
        1, -1, 1, 1) + bias.reshape(1, -1, 1, 1)


def cnn_forward(x, p, stats=None):
    """SmallCNN in float64; p: parameters in model order; stats: running (mean, var) per BN or None."""
    s = stats or [(None, None), (None, None)]
    h = batch_norm(conv(x, p[0], p[1], ((1, 1), (1, 1))), p[2], p[3], *s[0])
    h = np.maximum(h, 0)
    n, c, hh, ww = h.shape
    h = h.reshape(n, c, hh // 2, 2, ww // 2, 2).max((3, 5))
    h = batch_norm(conv(h, p[4], p[5], ((1, 1), (0, 1))), p[6], p[7], *s[1])  # (3, 2) kernel, "same"
    h = np.maximum(h, 0).mean((2, 3))
    return h @ p[8].T + p[9]


def ce(logits, y):
    return -log_softmax(logits)[np.arange(len(y)), y].mean()


# ---- data -----------------------------------------------------------------------------------

def mlp_data(path):
    r = np.random.default_rng(0)
    x = r.standard_normal((64, 8)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    np.savez(path, x=x, y=y, w1=(r.standard_normal((16, 8)) * 0.3).astype(np.float32),
             b1=(r.standard_normal(16) * 0.1).astype(np.float32),
             w2=(r.standard_normal((3, 16)) * 0.3).astype(np.float32),
             b2=(r.standard_normal(3) * 0.1).astype(np.float32))


CNN_SHAPES = [(4, 1, 3, 3), (4,), (4,), (4,), (6, 4, 3, 2), (6,), (6,), (6,), (3, 6), (3,)]


def cnn_data(path):
    r = np.random.default_rng(1)
    x = r.standard_normal((24, 1, 8, 8)).astype(np.float32)
    y = np.argmax(x.reshape(24, 1, 4, 16).mean(-1)[:, 0, :3], axis=1).astype(np.int64)
    params = {}
    for i, shape in enumerate(CNN_SHAPES):
        if len(shape) == 1 and i in (2, 6):
            params[f"p{i}"] = (1 + 0.1 * r.standard_normal(shape)).astype(np.float32)  # BN weights
        else:
            params[f"p{i}"] = (r.standard_normal(shape) * 0.4).astype(np.float32)
    np.savez(path, x=x, y=y, **params)


TRANSFORMER_SHAPES = [(12, 16), (8, 16), (16,), (16,), (48, 16), (48,), (16, 16), (16,), (16,), (16,), (64, 16),
                      (64,), (16, 64), (16,), (16,), (16,), (12, 16), (12,)]


def transformer_data(path):
    r = np.random.default_rng(2)
    tokens = np.array([(i * 5 + i // 7) % 12 for i in range(80)], dtype=np.int64)
    params = {f"p{i}": (r.standard_normal(s) * (0.02 if len(s) > 1 else 0.0) +
                        (1.0 if len(s) == 1 and i in (2, 8, 14) else 0.0)).astype(np.float32)
              for i, s in enumerate(TRANSFORMER_SHAPES)}
    np.savez(path, tokens=tokens, **params)


# ---- the tests ------------------------------------------------------------------------------

def test_port_changes_only_import_lines():
    for script in ("mlp.py", "cnn.py", "transformer.py"):
        source = open(os.path.join(SCRIPTS, script)).read()
        ported = port(source)
        a, b = source.splitlines(), ported.splitlines()
        assert len(a) == len(b)
        diff = [(x, y) for x, y in zip(a, b) if x != y]
        assert all(x.startswith(("import", "from")) for x, _ in diff)
        assert ("import torch", "import tinyfin as torch") in diff


def test_mlp_script_matches_float64_numpy(tmp_path):
    data = tmp_path / "mlp.npz"
    mlp_data(data)
    got = run("mlp.py", [data], tmp_path, "tinyfin")
    losses, params = mlp_reference(np.load(data))
    np.testing.assert_allclose(got["losses"], losses, rtol=2e-5, atol=2e-6)
    for p, ref in zip(got["params"], params):
        np.testing.assert_allclose(np.array(p), ref, rtol=1e-4, atol=2e-6)
    assert got["losses"][-1] < got["losses"][0] * 0.7
    if have_torch():
        theirs = run("mlp.py", [data], tmp_path, "torch")
        np.testing.assert_allclose(got["losses"], theirs["losses"], rtol=2e-5, atol=2e-6)
        assert got["accuracy"] == theirs["accuracy"]


def test_cnn_script_matches_float64_numpy(tmp_path):
    data = tmp_path / "cnn.npz"
    cnn_data(data)
    got = run("cnn.py", [data], tmp_path, "tinyfin")
    d = np.load(data)
    x, y = d["x"].astype(np.float64), d["y"]
    p0 = [d[f"p{i}"].astype(np.float64) for i in range(len(CNN_SHAPES))]
    # the first batch's loss with the initial parameters, BatchNorm on batch statistics
    np.testing.assert_allclose(got["losses"][0], ce(cnn_forward(x[:8], p0), y[:8]), rtol=1e-5)
    assert len(got["losses"]) == 12
    assert got["lrs"] == pytest.approx([0.01, 0.01, 0.005, 0.005], rel=1e-12)  # StepLR(2, 0.5)
    # evaluation: running statistics, from the final state the script printed
    s = {k: np.array(v, dtype=np.float64) for k, v in got["state"].items()}
    order = ["features.0.weight", "features.0.bias", "features.1.weight", "features.1.bias",
             "features.4.weight", "features.4.bias", "features.5.weight", "features.5.bias",
             "classifier.weight", "classifier.bias"]
    stats = [(s["features.1.running_mean"], s["features.1.running_var"]),
             (s["features.5.running_mean"], s["features.5.running_var"])]
    assert s["features.1.num_batches_tracked"] == 12
    np.testing.assert_allclose(got["eval_loss"], ce(cnn_forward(x, [s[k] for k in order], stats), y), rtol=1e-5)
    assert got["eval_loss"] < got["losses"][0]
    if have_torch():
        theirs = run("cnn.py", [data], tmp_path, "torch")
        np.testing.assert_allclose(got["losses"], theirs["losses"], rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(got["eval_loss"], theirs["eval_loss"], rtol=2e-3)
        # A conv bias feeding BatchNorm has a zero gradient up to rounding, which Adam scales up to
        # full steps of either sign: those two follow rounding, not the computation, so are skipped.
        for k in order:
            if k not in ("features.0.bias", "features.4.bias"):
                np.testing.assert_allclose(s[k], np.array(theirs["state"][k]), rtol=2e-2, atol=2e-3, err_msg=k)


def test_transformer_script_resumes_bit_exactly(tmp_path):
    data = tmp_path / "lm.npz"
    transformer_data(data)
    ckpt = tmp_path / "ckpt.pt"
    full = run("transformer.py", [data, ckpt, "full"], tmp_path, "tinyfin")
    first = run("transformer.py", [data, ckpt, "first"], tmp_path, "tinyfin")
    resumed = run("transformer.py", [data, ckpt, "resume"], tmp_path, "tinyfin")
    assert len(full["losses"]) == 12 and len(first["losses"]) == 6 and len(resumed["losses"]) == 6
    assert first["losses"] == full["losses"][:6]
    assert resumed["losses"] == full["losses"][6:]  # bit-exact: the same float32 values
    assert resumed["params"] == full["params"] and resumed["lr"] == full["lr"]
    assert full["losses"][-1] < full["losses"][0]
    np.testing.assert_allclose(full["losses"][0], np.log(12), rtol=0.05)  # small init: near uniform
    if have_torch():
        theirs = run("transformer.py", [data, tmp_path / "torch_ckpt.pt", "full"], tmp_path, "torch")
        np.testing.assert_allclose(full["losses"], theirs["losses"], rtol=1e-3, atol=1e-4)
        assert full["lr"] == pytest.approx(theirs["lr"], rel=1e-9)
