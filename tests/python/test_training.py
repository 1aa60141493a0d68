"""A short training run from Python that must reach a loss threshold: a small CNN with AdamW
on a synthetic, learnable task (which quadrant of an 8x8 image is bright)."""
import numpy as np

import tinyfin as tf
import tinyfin.nn as nn
import tinyfin.nn.functional as F


def data(n, seed):
    r = np.random.default_rng(seed)
    labels = r.integers(0, 4, n)
    x = r.normal(0, 0.3, (n, 1, 8, 8)).astype(np.float32)
    for i, q in enumerate(labels):
        x[i, 0, (q // 2) * 4:(q // 2) * 4 + 4, (q % 2) * 4:(q % 2) * 4 + 4] += 1.0
    return x, labels


def test_cnn_learns():
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, seed=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(64, 4, seed=2))
    opt = tf.optim.AdamW(model.parameters(), lr=0.02)
    x, y = data(256, 0)
    first = None
    for step in range(60):
        i = (step * 32) % 256
        logits = model(tf.from_numpy(x[i:i + 32]))
        loss = F.cross_entropy(logits, tf.from_numpy(y[i:i + 32]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    xt, yt = data(128, 1)
    model.eval()
    with tf.no_grad():
        test_loss = F.cross_entropy(model(tf.tensor(xt)), tf.tensor(yt)).item()
        acc = (tf.argmax(model(tf.tensor(xt)), 1).numpy() == yt).mean()
    assert first > 1.0
    assert test_loss < 0.3, test_loss
    assert acc > 0.9, acc
