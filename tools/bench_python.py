#!/usr/bin/python3
"""Per-op overhead from Python: a 16-float add, allocating and with out=, in tinyfin, numpy and
PyTorch (when installed), measured in the same run. Medians of repeated timeit runs, in
microseconds per call, and the ratio to numpy.

    PYTHONPATH=build/python /usr/bin/python3 tools/bench_python.py [--repeat 15] [--number 20000]
        [--cpu-time]

--cpu-time times with the thread's CPU clock instead of the wall clock: on a loaded host the wall
clock also counts the time other processes hold the core, which swamps sub-microsecond calls.
"""
import argparse
import statistics
import time
import timeit

import numpy as np

import tinyfin as tf

try:
    import torch
except ImportError:
    torch = None


def interleaved_us(cases, number, repeat, timer=time.perf_counter):
    """Median us/call of each case; the repetitions take turns (case 1, 2, ..., 1, 2, ...), so
    that load from other processes hits every case alike and the ratios of one run compare."""
    times = {key: [] for key in cases}
    for _ in range(repeat):
        for key, stmt in cases.items():
            times[key].append(timeit.timeit(stmt, number=number, timer=timer))
    return {key: statistics.median(t) / number * 1e6 for key, t in times.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--number", type=int, default=20000)
    p.add_argument("--cpu-time", action="store_true", help="time with the thread's CPU clock")
    o = p.parse_args()
    tf.backend_set("cpu")
    a = np.arange(16, dtype=np.float32)
    b = np.ones(16, np.float32)
    out = np.empty(16, np.float32)
    ta, tb, tout = tf.tensor(a), tf.tensor(b), tf.empty(16)
    cases = {
        ("numpy", "a + b"): lambda: a + b,
        ("numpy", "np.add(a, b, out=c)"): lambda: np.add(a, b, out=out),
        ("tinyfin", "a + b"): lambda: ta + tb,
        ("tinyfin", "tf.add(a, b)"): lambda: tf.add(ta, tb),
        ("tinyfin", "tf.add(a, b, out=c)"): lambda: tf.add(ta, tb, out=tout),
        ("tinyfin", "a + 1.0 (number)"): lambda: ta + 1.0,
    }
    if torch is not None:
        torch.set_num_threads(1)
        xa, xb, xo = torch.from_numpy(a.copy()), torch.from_numpy(b.copy()), torch.empty(16)
        cases[("torch", "a + b")] = lambda: xa + xb
        cases[("torch", "torch.add(a, b, out=c)")] = lambda: torch.add(xa, xb, out=xo)
    us = interleaved_us(cases, o.number, o.repeat, time.thread_time if o.cpu_time else time.perf_counter)
    rows = [(lib, call, t) for (lib, call), t in us.items()]
    base = {"a + b": rows[0][2]}
    base_out = rows[1][2]
    print(f"16-float add from Python, median of {o.repeat} interleaved runs of {o.number} calls"
          + (", thread CPU time" if o.cpu_time else "")
          + ("" if torch is not None else " (PyTorch not installed)"))
    print(f"{'library':<8} {'call':<24} {'us/call':>8} {'vs numpy':>9}")
    for lib, call, us in rows:
        ref = base_out if "out=" in call else base["a + b"]
        print(f"{lib:<8} {call:<24} {us:8.3f} {us / ref:8.2f}x")


if __name__ == "__main__":
    main()
