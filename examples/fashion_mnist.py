#!/usr/bin/python3
"""Trains the Fashion-MNIST CNN of examples/fashion_mnist/main.cpp from Python with the same
recipe, progress line and report (docs/python.md; `bash scripts/run --python`).

    fashion_mnist.py [--epochs N] [--batch B] [--seed S] [--limit N] [--save FILE] [--eval FILE]
                     [--data DIR] [--distributed] [--autocast bf16|f16]

conv 32 3x3 p1, relu, maxpool 2, conv 64 3x3 p1, relu, maxpool 2, flatten, linear 128, relu,
linear 10; AdamW lr 1e-3 (wd 0.01); batch 64; inputs (x/255 - 0.2860)/0.3530; the C++ example's
seeded shuffle each epoch, last partial batch kept. Same seed, same initial parameters and batch
order as the C++ program. Runs on the backend TINYFIN_BACKEND selects.

With --distributed it trains data-parallel under mpirun or srun (tinyfin.dist, docs/distributed.md):
each global batch of --batch is split over the ranks (ShardedSampler, the same shuffle as one
process), gradients are averaged by DistributedDataParallel, rank 0 prints the report and every
rank prints "rank R weights checksum <hex>" of its final parameters.
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np

import tinyfin as tf
import tinyfin.nn as nn
import tinyfin.nn.functional as F
from example_report import backend_report

# Ranks other than 0 of a --distributed run print only their checksum.
quiet = False


def say(*args, **kwargs):
    if not quiet:
        print(*args, **kwargs)


def read_idx(path):
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        sys.exit(f"fashion_mnist: {path}: {e} (Debian package dataset-fashion-mnist, or --data DIR)")
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 8:
        sys.exit(f"fashion_mnist: {path}: not an IDX file of unsigned bytes")
    ndim = raw[3]
    dims = np.frombuffer(raw, ">u4", ndim, 4).astype(np.int64)
    data = np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        sys.exit(f"fashion_mnist: {path}: truncated")
    return data.reshape(dims)


def load_split(directory, name, limit=0):
    images = read_idx(os.path.join(directory, f"{name}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(directory, f"{name}-labels-idx1-ubyte.gz"))
    if limit:
        images, labels = images[:limit], labels[:limit]
    # In f32 like the C++ example: x / 255, then (x - 0.2860) / 0.3530, through a 256-entry table.
    table = (np.arange(256, dtype=np.float32) / np.float32(255) - np.float32(0.2860)) / np.float32(0.3530)
    x = table[images].reshape(-1, 1, images.shape[1], images.shape[2])
    return np.ascontiguousarray(x, np.float32), labels.astype(np.int64)


def permutation(n, seed, epoch):
    """The C++ example's order: nn::permutation of (seed, epoch)."""
    return tf._C.permutation(n, seed, epoch)


def make_model(seed):
    mix = tf._C.mix_seed
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, seed=mix(seed, 1)), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, seed=mix(seed, 2)), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128, seed=mix(seed, 3)), nn.ReLU(),
        nn.Linear(128, 10, seed=mix(seed, 4)))


def evaluate(model, x, y, autocast=None):
    t0 = time.perf_counter()
    model.eval()
    dev = tf.default_device()
    loss_sum, correct = tf.zeros(()), tf.zeros(())
    with tf.no_grad(), tf.autocast(autocast or "bf16", enabled=autocast is not None):
        for i in range(0, len(y), 1000):
            bx = tf.tensor(x[i:i + 1000], device=dev)
            by = tf.tensor(y[i:i + 1000], device=dev)
            logits = model(bx)
            loss_sum = loss_sum + F.cross_entropy(logits, by, reduction="sum")
            correct = correct + tf.sum((tf.argmax(logits, 1) == by).float())
    model.train()
    return correct.item() / len(y), loss_sum.item() / len(y), time.perf_counter() - t0


class Progress:
    """Redraws at most ~5 times a second on a terminal, every 10% otherwise, always at the end."""

    def __init__(self, epoch, total):
        self.epoch, self.total, self.tty = epoch, total, sys.stdout.isatty()
        self.last, self.last_decile = 0.0, -1

    def due(self, done):
        if done >= self.total:
            return True
        if self.tty:
            return time.perf_counter() - self.last > 0.2
        return done * 10 // self.total != self.last_decile

    def draw(self, done, loss, seconds):
        self.last, self.last_decile = time.perf_counter(), done * 10 // self.total
        filled = 30 * done // self.total
        bar = "#" * filled + "." * (30 - filled)
        rate = done / seconds if seconds > 0 else 0
        end = "" if self.tty and done < self.total else "\n"
        if quiet:
            return
        sys.stdout.write(f"{chr(13) if self.tty else ''}epoch {self.epoch} [{bar}] {done:6d}/{self.total}"
                         f"  loss {loss:.4f}  {rate:6.0f} img/s  {seconds:5.1f}s{end}")
        sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--save")
    p.add_argument("--eval")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--distributed", action="store_true",
                   help="data-parallel over the ranks of mpirun/srun (docs/distributed.md)")
    p.add_argument("--autocast", choices=["bf16", "f16", "f32"],
                   help="conv2d and linear in this dtype, f16 with loss scaling (docs/numerics.md)")
    o = p.parse_args()
    if o.autocast == "f32":
        o.autocast = None
    if o.epochs < 0 or o.batch < 1 or o.seed < 0 or o.limit < 0:
        p.error("--epochs, --seed and --limit need integers >= 0, --batch >= 1")

    dist = None
    if o.distributed:
        global quiet
        import tinyfin.dist as dist
        dist.init()
        quiet = dist.rank() != 0
        try:
            return run(o, dist)
        except Exception as e:  # a rank that fails stops the others (they wait in the allreduce)
            dist.abort(1, f"fashion_mnist: {type(e).__name__}: {e}")
    return run(o, dist)


def run(o, dist):
    t_start = time.perf_counter()
    test_x, test_y = load_split(o.data, "t10k")
    model = make_model(o.seed)
    if o.eval:
        model.load_state_dict(tf.load(o.eval))
        acc, loss, secs = evaluate(model, test_x, test_y, o.autocast)
        say(f"evaluated {o.eval} on {len(test_y)} test images in {secs:.2f}s")
        say(f"test accuracy {acc:.4f}  test loss {loss:.4f}")
        if not quiet:
            backend_report()
        return 0

    train_x, train_y = load_split(o.data, "train", o.limit)
    n = len(train_y)
    params = sum(q.numel() for q in model.parameters())
    dev = tf.default_device()
    say(f"# tinyfin on {dev}: train {n} x {train_x.shape[2]}x{train_x.shape[3]}, test {len(test_y)}, "
          f"batch {o.batch}, seed {o.seed}, {params} params (data {time.perf_counter() - t_start:.2f}s)")
    ddp = sampler = None
    if dist:
        # Wraps the model before the optimizer sees its parameters (rank 0's are broadcast).
        ddp = dist.DistributedDataParallel(model)
        sampler = dist.ShardedSampler(n, o.batch, seed=o.seed)
        say(f"# distributed: {dist.world_size()} ranks ({dist.launcher()}), "
            f"{o.batch / dist.world_size():.1f} images per rank and step")
    opt = tf.optim.AdamW(model.parameters(), lr=1e-3)
    # f16's range needs the loss scaled; bf16 has f32's range (the scaler then passes through).
    scaler = tf.amp.GradScaler(enabled=o.autocast == "f16")
    say(f"{'epoch':>5} {'train_s':>8} {'img/s':>8} {'eval_s':>7} {'loss':>7} {'test_acc':>8} {'test_loss':>9}")
    last = None
    for epoch in range(1, o.epochs + 1):
        perm = permutation(n, o.seed, epoch)
        progress = Progress(epoch, n)
        t0 = time.perf_counter()
        loss_sum = tf.zeros(())
        batches = 0
        if sampler:
            sampler.set_epoch(epoch)
        for step, i in enumerate(range(0, n, o.batch)):
            # This process's samples: the whole batch, or this rank's slice of it.
            idx = sampler.batch(step) if sampler else perm[i:i + o.batch]
            if ddp:
                ddp.set_batch_size(len(idx))
            opt.zero_grad()
            if len(idx):
                bx = tf.tensor(train_x[idx], device=dev)
                by = tf.tensor(train_y[idx], device=dev)
                with tf.autocast(o.autocast or "bf16", enabled=o.autocast is not None):
                    loss = F.cross_entropy(model(bx), by)
                scaler.scale(loss).backward()
                loss_sum = loss_sum + loss.detach()
                batches += 1
            if ddp:
                ddp.synchronize_gradients()
            scaler.step(opt)
            scaler.update()
            done = min(i + o.batch, n)
            if progress.due(done):
                progress.draw(done, loss_sum.item() / batches, time.perf_counter() - t0)
        train_s = time.perf_counter() - t0
        # In a distributed run only rank 0 reports, so only it evaluates.
        last = (0.0, 0.0, 0.0) if quiet else evaluate(model, test_x, test_y, o.autocast)
        acc, tloss, eval_s = last
        say(f"{epoch:5d} {train_s:8.2f} {n / train_s:8.0f} {eval_s:7.2f} {loss_sum.item() / max(batches, 1):7.4f} "
              f"{acc:8.4f} {tloss:9.4f}", flush=True)
    if last is None:
        last = (0.0, 0.0, 0.0) if quiet else evaluate(model, test_x, test_y, o.autocast)
    say(f"test accuracy {last[0]:.4f}  test loss {last[1]:.4f}")
    if o.save and not quiet:
        tf.save(model, o.save)
        say(f"saved {o.save}")
    say(f"total time {time.perf_counter() - t_start:.2f}s")
    if not quiet:
        backend_report()
    if dist:
        # Every rank, rank 0 last (after its report): identical when the ranks stayed in step.
        sys.stdout.flush()
        dist.barrier()
        print(f"rank {dist.rank()} weights checksum {dist.checksum(model.parameters()):016x}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except tf.Error as e:
        sys.exit(f"fashion_mnist: {e}")
