#!/usr/bin/python3
"""PyTorch's side of tinyfin-bench --train N --compare torch: the same Fashion-MNIST training step
(conv 32, relu, max pool, conv 64, relu, max pool, linear 128, relu, linear 10, cross entropy,
AdamW 1e-3, batch 64) on fixed random images, timed the way tinyfin-bench times its own step.

    /usr/bin/python3 bench_train_torch.py --steps 30 --threads 2 [--blas-threads 1]
                                          [--channels-last]

Prints one JSON object: {"config", "median_ms", "min_ms", "max_ms", "images_per_s",
"minor_faults_per_step", "torch", "threads", "blas_threads"} or {"config", "error"}.
malloc tunables (GLIBC_TUNABLES) must be set by the caller: glibc reads them at process start.
"""
import argparse
import ctypes
import json
import os
import resource
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--blas-threads", type=int, default=None, help="OpenBLAS threads (default: --threads)")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--config", default="default", help="a name for this configuration in the output")
    args = p.parse_args()
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError:
        print(json.dumps({"config": args.config,
                          "error": "torch not installed: apt-get install python3-torch (or scripts/setup --bench)"}))
        return 0

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    blas_threads = None
    try:
        openblas = ctypes.CDLL("libopenblas.so.0")
        openblas.openblas_set_num_threads(args.blas_threads or args.threads)
        blas_threads = openblas.openblas_get_num_threads()
    except OSError:
        pass

    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)).to(memory_format=fmt)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, 1, 28, 28).contiguous(memory_format=fmt)
    y = torch.randint(0, 10, (args.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()  # tinyfin's step ends with synchronize(); this is torch's equivalent

    for _ in range(3):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    ms = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    ms.sort()
    median = ms[len(ms) // 2]
    print(json.dumps({"config": args.config, "median_ms": median, "min_ms": ms[0], "max_ms": ms[-1],
                      "images_per_s": args.batch * 1e3 / median, "minor_faults_per_step": faults / args.steps,
                      "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "blas_threads": blas_threads, "channels_last": args.channels_last,
                      "glibc_tunables": os.environ.get("GLIBC_TUNABLES", "")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
