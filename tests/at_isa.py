#!/usr/bin/python3
"""Runs one test program under TINYFIN_CPU_ISA=LEVEL (generic, avx2, avx512, avx512bf16), so that
the instruction-set-sensitive tests run at every level this CPU offers, not only at its best.

    at_isa.py LEVEL TINYFIN_INFO PROGRAM [ARGS...]

The cpu plugin caps TINYFIN_CPU_ISA at what the CPU has; tinyfin-info, run under the same
setting, reports what the plugin then runs (features `kernels` and `bf16_matmul`). When that is
not LEVEL, this CPU lacks the level and nothing can run it here: the script says so and exits 77,
which meson shows as SKIP. Otherwise it runs PROGRAM with TINYFIN_CPU_ISA=LEVEL and returns its
exit status."""
import json, os, subprocess, sys

level, info_tool, program = sys.argv[1], sys.argv[2], sys.argv[3:]
env = dict(os.environ, TINYFIN_CPU_ISA=level)
out = subprocess.run([info_tool, "--json"], capture_output=True, text=True, env=env, timeout=120)
if out.returncode != 0:
    sys.exit(f"at_isa: tinyfin-info --json exited {out.returncode}: {out.stderr}")
cpu = [p for p in json.loads(out.stdout)["plugins"] if p["name"] == "cpu"]
if len(cpu) != 1 or "kernels" not in cpu[0].get("features", {}):
    sys.exit(f"at_isa: no cpu plugin with a `kernels` feature in tinyfin-info's report: {cpu}")
features = cpu[0]["features"]
runs = features["kernels"]
if runs == "avx512" and features.get("bf16_matmul") == "avx512bf16":
    runs = "avx512bf16"
if runs != level:
    print(f"TINYFIN_CPU_ISA={level}: this CPU does not have {level} (the cpu plugin runs {runs} under it), "
          f"so {os.path.basename(program[0])} cannot run at that level here. Not a skipped check: "
          f"the level does not exist on this CPU; the levels it has run as their own tests.")
    sys.exit(77)
print(f"at_isa: running {' '.join(program)} with TINYFIN_CPU_ISA={level}", flush=True)
sys.exit(subprocess.run(program, env=env).returncode)
