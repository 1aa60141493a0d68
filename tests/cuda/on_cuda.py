#!/usr/bin/python3
"""Runs a test program that needs the cuda plugin's device (ops-quant-cuda), or skips it.

    on_cuda.py TINYFIN_INFO PROGRAM [ARGS...]

tinyfin-info reports whether the cuda plugin loaded (a driver and a GPU it can run on). When it
did not (CI, any machine without an NVIDIA GPU), this prints the plugin's reason and exits 77,
which meson shows as SKIP: the test has no device to run on here; scripts/gpu-check runs it where
there is one. Otherwise it runs PROGRAM and returns its exit status."""
import json, os, subprocess, sys

info_tool, program = sys.argv[1], sys.argv[2:]
out = subprocess.run([info_tool, "--json"], capture_output=True, text=True, timeout=120)
if out.returncode != 0:
    sys.exit(f"on_cuda: tinyfin-info --json exited {out.returncode}: {out.stderr}")
cuda = [p for p in json.loads(out.stdout)["plugins"] if p["name"] == "cuda"]
outcome = f"{cuda[0]['outcome']}: {cuda[0]['message']}" if cuda else "no cuda plugin on the search path"
if not cuda or cuda[0]["outcome"] != "loaded":
    print(f"the cuda plugin cannot run here ({outcome}), so {os.path.basename(program[0])} has no device: "
          f"skipped (scripts/gpu-check runs it on an NVIDIA GPU)")
    sys.exit(77)
print(f"on_cuda: running {' '.join(program)}", flush=True)
sys.exit(subprocess.run(program).returncode)
