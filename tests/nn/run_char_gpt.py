#!/usr/bin/python3
"""Runs examples/char_gpt's tiny config for a few steps plus a short sample on the backend of the
environment (TINYFIN_BACKEND, with TINYFIN_FALLBACK=error set by the suite) and on cpu, and
compares them.

    run_char_gpt.py CHAR_GPT [--reference-cpu]

Checks: exit status 0; a progress line per step, a 'val loss' line, a sample, 'backends that ran
ops' naming the backend and 'fallbacks: 0'. With --reference-cpu the same run on cpu gives the
reference: every step's loss and the val loss must match it within 2e-3 nats (f32 GPU kernels sum
in other orders; over 3 steps of AdamW the losses drift apart by about 1e-5 on lavapipe and llvmpipe).
Exits 77 (skip) when the fortunes corpus is missing.
"""
import os
import re
import subprocess
import sys

CORPUS = "/usr/share/games/fortunes"
ARGS = ["--config", "tiny", "--steps", "3", "--batch", "4", "--eval-batches", "2", "--sample", "16",
        "--seed", "1", "--dropout", "0.1"]
TOLERANCE = 2e-3


def run(exe, env):
    cmd = [exe] + ARGS
    print("running:", " ".join(cmd), "with TINYFIN_BACKEND=" + env.get("TINYFIN_BACKEND", ""), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", env=env, timeout=550)
    print(proc.stdout)
    return proc


def parse(out):
    losses = [float(m) for m in re.findall(r"^step\s+\d+/\d+\s+loss (\S+)", out, re.M)]
    val = re.search(r"^val loss (\S+)$", out, re.M)
    return losses, float(val.group(1)) if val else None


def main():
    exe = sys.argv[1]
    if not os.path.isdir(CORPUS):
        print(f"SKIP: {CORPUS} not found; install Debian's fortunes package")
        return 77
    env = dict(os.environ)
    backend = env.get("TINYFIN_BACKEND", "cpu")
    proc = run(exe, env)
    if proc.returncode != 0:
        print(f"FAIL: exit status {proc.returncode}")
        return 1
    out = proc.stdout
    ok = True
    checks = [
        (r"^val loss \d+\.\d{3}$", "a val loss line"),
        (r"^sample \(16 chars, KV cache, \d+ tokens/s\):$", "a sample"),
        (r"^backends that ran ops: " + (r"\S+" if backend == "auto" else re.escape(backend)) + r" \(\d+ ops\)",
         "ops run by " + backend),
        (r"^fallbacks: 0$", "zero fallbacks"),
        (r"^memory: estimate [\d.]+ MiB, measured peak [\d.]+ MiB", "the memory line"),
    ]
    for pattern, what in checks:
        if not re.search(pattern, out, re.M):
            print(f"FAIL: no {what} (pattern {pattern!r})")
            ok = False
    losses, val = parse(out)
    if len(losses) != 3:
        print(f"FAIL: {len(losses)} step lines, expected 3")
        ok = False
    if "--reference-cpu" in sys.argv:
        ref_env = dict(env, TINYFIN_BACKEND="cpu")
        ref = run(exe, ref_env)
        if ref.returncode != 0:
            print("FAIL: the cpu reference run failed")
            return 1
        ref_losses, ref_val = parse(ref.stdout)
        for i, (a, b) in enumerate(zip(losses, ref_losses)):
            if abs(a - b) > TOLERANCE:
                print(f"FAIL: step {i + 1} loss {a} on {backend}, {b} on cpu (tolerance {TOLERANCE})")
                ok = False
        if val is None or ref_val is None or abs(val - ref_val) > TOLERANCE:
            print(f"FAIL: val loss {val} on {backend}, {ref_val} on cpu (tolerance {TOLERANCE})")
            ok = False
        print(f"{backend} vs cpu: losses {losses} vs {ref_losses}, val {val} vs {ref_val}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
