#!/usr/bin/env python3
"""mpirun -np N fashion_mnist --distributed on 1024 training images: every rank prints the same
weights checksum, rank 0 alone prints the report, and the test accuracy is within 0.05 of a
single-process run of the same recipe (the global batch is the same; only f32 rounding and the
order of the gradient sums differ).

    test_example.py MPIRUN_ARGS... -- FASHION_MNIST...

FASHION_MNIST is the C++ program, or `python3 examples/fashion_mnist.py` (several words).

Exits 77 (meson's skip) with the reason when Debian's dataset-fashion-mnist is not installed.
"""
import os
import re
import subprocess
import sys

DATA = "/usr/share/datasets/fashion-mnist"
split = sys.argv.index("--")
mpirun, exe = sys.argv[1:split], sys.argv[split + 1:]
if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")):
    print(f"SKIP: {DATA} not found; install Debian's dataset-fashion-mnist package")
    sys.exit(77)
np = int(mpirun[mpirun.index("-np") + 1])
args = ["--epochs", "1", "--limit", "1024", "--batch", "64"]

single = subprocess.run(exe + args, capture_output=True, text=True, timeout=280)
run = subprocess.run(mpirun + exe + ["--distributed"] + args, capture_output=True, text=True,
                     timeout=280)
print(run.stdout, run.stderr)
failures = []
if single.returncode != 0 or run.returncode != 0:
    failures.append(f"exit status {single.returncode} (single), {run.returncode} (mpirun)")
sums = re.findall(r"^rank (\d+) weights checksum ([0-9a-f]{16})$", run.stdout, re.M)
if sorted(int(r) for r, _ in sums) != list(range(np)):
    failures.append(f"expected one checksum line per rank 0..{np - 1}, got {sums}")
if len({c for _, c in sums}) != 1:
    failures.append(f"the ranks' checksums differ: {sums}")
if run.stdout.count("test accuracy") != 1 or run.stdout.count("backends that ran ops") != 1:
    failures.append("rank 0 alone must print the report (one test accuracy, one backend line)")
if f"# distributed: {np} ranks (mpirun)" not in run.stdout:
    failures.append("no '# distributed' line")
acc = [float(m) for m in re.findall(r"^test accuracy ([\d.]+)", single.stdout + run.stdout, re.M)]
if len(acc) != 2 or abs(acc[0] - acc[1]) > 0.05:
    failures.append(f"test accuracies single vs distributed: {acc}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
