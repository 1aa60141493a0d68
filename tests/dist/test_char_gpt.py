#!/usr/bin/env python3
"""mpirun -np N char_gpt --distributed, tiny config for 20 steps: every rank prints the same
weights checksum, rank 0 alone prints the report, and the final training loss and val loss equal
a single-process run's within 0.01 nats (the global batch is the same windows; only f32 rounding
and the order of the gradient sums differ).

    test_char_gpt.py MPIRUN_ARGS... -- CHAR_GPT

Exits 77 (meson's skip) with the reason when Debian's fortunes package is not installed.
"""
import os
import re
import subprocess
import sys

DATA = "/usr/share/games/fortunes"
split = sys.argv.index("--")
mpirun, exe = sys.argv[1:split], sys.argv[split + 1]
if not os.path.isdir(DATA):
    print(f"SKIP: {DATA} not found; install Debian's fortunes package")
    sys.exit(77)
np = int(mpirun[mpirun.index("-np") + 1])
args = ["--config", "tiny", "--steps", "20", "--eval-every", "0", "--sample", "16"]

single = subprocess.run([exe] + args, capture_output=True, encoding="latin-1", timeout=280)
run = subprocess.run(mpirun + [exe, "--distributed"] + args, capture_output=True, encoding="latin-1",
                     timeout=280)
print(single.stdout, single.stderr)
print(run.stdout, run.stderr)
failures = []
if single.returncode != 0 or run.returncode != 0:
    failures.append(f"exit status {single.returncode} (single), {run.returncode} (mpirun)")
sums = re.findall(r"^rank (\d+) weights checksum ([0-9a-f]{16})$", run.stdout, re.M)
if sorted(int(r) for r, _ in sums) != list(range(np)):
    failures.append(f"expected one checksum line per rank 0..{np - 1}, got {sums}")
if len({c for _, c in sums}) != 1:
    failures.append(f"the ranks' checksums differ: {sums}")
if run.stdout.count("val loss") != 1 or run.stdout.count("backends that ran ops") != 1 \
        or run.stdout.count("sample (") != 1:
    failures.append("rank 0 alone must print the report (one val loss, one sample, one backend line)")
if f"# distributed: {np} ranks (mpirun)" not in run.stdout:
    failures.append("no '# distributed' line")
for what, pattern in (("val loss", r"^val loss ([\d.]+)$"), ("step 20 loss", r"^step +20/20  loss ([\d.]+)")):
    values = [float(m) for m in re.findall(pattern, single.stdout + run.stdout, re.M)]
    if len(values) != 2 or abs(values[0] - values[1]) > 0.01:
        failures.append(f"{what} single vs distributed: {values}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
