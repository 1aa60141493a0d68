#!/usr/bin/python3
"""Per-op overhead from Python: a 16-float add, allocating and with out=, in tinyfin, numpy and
PyTorch (when installed), measured in the same run. Medians of repeated timeit runs, in
microseconds per call, and the ratio to numpy.

    PYTHONPATH=build/python /usr/bin/python3 tools/bench_python.py [--repeat 15] [--number 20000]
"""
import argparse
import statistics
import timeit

import numpy as np

import tinyfin as tf

try:
    import torch
except ImportError:
    torch = None


def median_us(stmt, number, repeat):
    times = timeit.repeat(stmt, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--number", type=int, default=20000)
    o = p.parse_args()
    tf.backend_set("cpu")
    a = np.arange(16, dtype=np.float32)
    b = np.ones(16, np.float32)
    out = np.empty(16, np.float32)
    ta, tb, tout = tf.tensor(a), tf.tensor(b), tf.empty(16)
    rows = []
    rows.append(("numpy", "a + b", median_us(lambda: a + b, o.number, o.repeat)))
    rows.append(("numpy", "np.add(a, b, out=c)", median_us(lambda: np.add(a, b, out=out), o.number, o.repeat)))
    rows.append(("tinyfin", "a + b", median_us(lambda: ta + tb, o.number, o.repeat)))
    rows.append(("tinyfin", "tf.add(a, b)", median_us(lambda: tf.add(ta, tb), o.number, o.repeat)))
    rows.append(("tinyfin", "tf.add(a, b, out=c)", median_us(lambda: tf.add(ta, tb, out=tout), o.number, o.repeat)))
    if torch is not None:
        torch.set_num_threads(1)
        xa, xb, xo = torch.from_numpy(a.copy()), torch.from_numpy(b.copy()), torch.empty(16)
        rows.append(("torch", "a + b", median_us(lambda: xa + xb, o.number, o.repeat)))
        rows.append(("torch", "torch.add(a, b, out=c)", median_us(lambda: torch.add(xa, xb, out=xo), o.number, o.repeat)))
    base = {"a + b": rows[0][2]}
    base_out = rows[1][2]
    print(f"16-float add from Python, median of {o.repeat} x {o.number} calls"
          + ("" if torch is not None else " (PyTorch not installed)"))
    print(f"{'library':<8} {'call':<24} {'us/call':>8} {'vs numpy':>9}")
    for lib, call, us in rows:
        ref = base_out if "out=" in call else base["a + b"]
        print(f"{lib:<8} {call:<24} {us:8.3f} {us / ref:8.2f}x")


if __name__ == "__main__":
    main()
