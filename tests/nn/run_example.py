#!/usr/bin/python3
"""Smoke test of the Fashion-MNIST example: one short epoch on 2048 training images.

Exits 77 (meson's skip) with the reason when Debian's dataset-fashion-mnist is not installed.
Otherwise the example must exit 0 and print an epoch line, a test accuracy line, the backends
that ran ops and the fallback count.
"""
import os
import re
import subprocess
import sys

DATA = "/usr/share/datasets/fashion-mnist"

def main():
    exe = sys.argv[1]
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")):
        print(f"SKIP: {DATA} not found; install Debian's dataset-fashion-mnist package")
        return 77
    cmd = [exe, "--epochs", "1", "--limit", "2048", "--batch", "64"]
    print("running:", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=280)
    print(proc.stdout)
    if proc.returncode != 0:
        print(f"FAIL: exit status {proc.returncode}")
        return 1
    out = proc.stdout
    checks = [
        (r"^\s*1\s+[\d.]+\s+\d+\s+[\d.]+\s+[\d.]+\s+0\.\d{4}\s+[\d.]+$", "an epoch line"),
        (r"^test accuracy (0\.\d{4}|1\.0000)\s+test loss [\d.]+$", "a test accuracy line"),
        (r"^backends that ran ops: \S+ \(\d+ ops\)", "the backends that ran ops"),
        (r"^fallbacks: \d+", "the fallback count"),
        (r"^default backend: \S+", "the default backend"),
    ]
    ok = True
    for pattern, what in checks:
        if not re.search(pattern, out, re.M):
            print(f"FAIL: no {what} (pattern {pattern!r})")
            ok = False
    m = re.search(r"^test accuracy (\S+)", out, re.M)
    # 2048 images for one epoch already gets far above chance (0.10).
    if m and float(m.group(1)) < 0.5:
        print(f"FAIL: test accuracy {m.group(1)} after 2048 images is below 0.5")
        ok = False
    return 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main())
