#!/usr/bin/python3
"""Bad values of the TINYFIN_* variables (issue 15, item 12): each is one warning line naming the
variable, its value and what is used instead, the run goes on with that; under TINYFIN_STRICT=1
the same text is a BackendError. Valid values give no warning. Runs env-probe (env_probe.cpp)."""
import os, subprocess, sys

probe = sys.argv[1]
base = dict(os.environ)
cores = len(os.sched_getaffinity(0))
failures = []


def run(extra):
    env = dict(base)
    env.update(extra)
    return subprocess.run([probe], capture_output=True, text=True, env=env, timeout=120)


def fields(stdout):
    line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)


def check(cond, what):
    if not cond:
        failures.append(what)


baseline = run({})
check(baseline.returncode == 0, f"baseline run failed: {baseline.stdout} {baseline.stderr}")
best_kernels = fields(baseline.stdout).get("kernels")

# (variable, bad values, text the warning must hold after "using ", field to check, its value)
cases = [
    ("TINYFIN_THREADS", ["abc", "-1", "1e3", "0", "4096", " 2"],
     f"using {cores} (the cores this process may use)", "threads", str(cores)),
    ("TINYFIN_SCRATCH_BYTES", ["abc", "-1", "64M"], "using 67108864 (the default, 64 MiB)", None, None),
    ("TINYFIN_HOST_CACHE_BYTES", ["-1", "1e3"], "using 536870912 (the default, 512 MiB)",
     None, None),
    ("TINYFIN_CPU_ISA", ["ERROR", "avx"], f"using {best_kernels} (the best this CPU has)",
     "kernels", best_kernels),
    ("TINYFIN_LOG", ["ERROR", "warn,verbose"], "using warn", None, None),
    ("TINYFIN_FALLBACK", ["ERROR", "1"], "using allow (ops fall back to cpu)", None, None),
]

for name, values, using, field, expected in cases:
    for value in values:
        what = f"{name}={value!r}"
        out = run({name: value})
        lines = [l for l in out.stderr.splitlines() if name in l]
        check(out.returncode == 0, f"{what}: exited {out.returncode}: {out.stdout} {out.stderr}")
        check(len(lines) == 1, f"{what}: {len(lines)} lines name the variable, want 1: {lines}")
        if lines:
            line = lines[0]
            check(line.startswith("tinyfin: warning: "), f"{what}: not a warning line: {line}")
            check(f"{name}='{value}' is not " in line, f"{what}: the line does not quote the value: {line}")
            check(using in line, f"{what}: the line does not say '{using}': {line}")
        if field:
            got = fields(out.stdout).get(field)
            check(got == expected, f"{what}: ran with {field}={got}, want {expected}")
        strict = run({name: value, "TINYFIN_STRICT": "1"})
        check(strict.returncode == 3, f"{what} with TINYFIN_STRICT=1: exited {strict.returncode}, want 3 "
                                      f"(a tinyfin error): {strict.stdout} {strict.stderr}")
        check(strict.stdout.startswith("error BackendError: "),
              f"{what} with TINYFIN_STRICT=1: not a BackendError: {strict.stdout}")
        check(f"{name}='{value}'" in strict.stdout and "TINYFIN_STRICT=1" in strict.stdout,
              f"{what} with TINYFIN_STRICT=1: the error does not name the variable: {strict.stdout}")

# Valid values: no warning, and they take effect.
for name, value, field, expected in [
    ("TINYFIN_THREADS", "3", "threads", "3"),
    ("TINYFIN_CPU_ISA", "generic", "kernels", "generic"),
    ("TINYFIN_SCRATCH_BYTES", "1048576", None, None),
    ("TINYFIN_HOST_CACHE_BYTES", "0", None, None),
    ("TINYFIN_LOG", "warn,fallback", None, None),
    ("TINYFIN_FALLBACK", "allow", None, None),
    ("TINYFIN_THREADS", "", "threads", str(cores)),  # empty is unset
]:
    what = f"{name}={value!r}"
    for strict in ("", "1"):
        out = run({name: value, "TINYFIN_STRICT": strict})
        check(out.returncode == 0, f"{what} (STRICT={strict!r}): exited {out.returncode}: {out.stdout} {out.stderr}")
        check(not [l for l in out.stderr.splitlines() if name in l], f"{what}: warned: {out.stderr}")
        if field:
            check(fields(out.stdout).get(field) == expected, f"{what}: ran with {out.stdout}")

# TINYFIN_STRICT itself: a typo warns and counts as on.
out = run({"TINYFIN_STRICT": "yes"})
lines = [l for l in out.stderr.splitlines() if "TINYFIN_STRICT" in l]
check(out.returncode == 0 and len(lines) == 1 and "TINYFIN_STRICT='yes' is not 0 or 1; using 1" in lines[0],
      f"TINYFIN_STRICT=yes: {out.returncode} {out.stderr}")
out = run({"TINYFIN_STRICT": "yes", "TINYFIN_THREADS": "abc"})
check(out.returncode == 3 and "TINYFIN_THREADS='abc'" in out.stdout, f"TINYFIN_STRICT=yes is not on: {out.stdout}")

# Empty TINYFIN_PLUGIN_PATH entries warn (docs/security.md); "" alone is unset.
for value in ["/nonexistent-tinyfin-dir::", ":/nonexistent-tinyfin-dir", "/nonexistent-tinyfin-dir:"]:
    out = run({"TINYFIN_PLUGIN_PATH": value})
    lines = [l for l in out.stderr.splitlines() if "empty entry" in l]
    check(out.returncode == 0, f"TINYFIN_PLUGIN_PATH={value!r}: exited {out.returncode}: {out.stderr}")
    check(len(lines) >= 1 and "TINYFIN_PLUGIN_PATH" in lines[0] and "never searched" in lines[0],
          f"TINYFIN_PLUGIN_PATH={value!r}: no warning about the empty entry: {out.stderr}")
out = run({"TINYFIN_PLUGIN_PATH": ""})
check("empty entry" not in out.stderr, f"TINYFIN_PLUGIN_PATH='' warned: {out.stderr}")

# A plugin's own switch, read in its init: TINYFIN_VULKAN_STAGING (where vulkan is usable).
vulkan = {"TINYFIN_BACKEND": "vulkan"}
if run({**vulkan, "TINYFIN_STRICT": "1"}).returncode == 0:
    for value in ["yes", "2"]:
        what = f"TINYFIN_VULKAN_STAGING={value!r}"
        out = run({**vulkan, "TINYFIN_VULKAN_STAGING": value})
        lines = [l for l in out.stderr.splitlines() if "TINYFIN_VULKAN_STAGING" in l]
        check(out.returncode == 0, f"{what}: exited {out.returncode}: {out.stdout} {out.stderr}")
        check(len(lines) == 1 and lines[0].startswith("tinyfin: warning: vulkan: ")
              and f"TINYFIN_VULKAN_STAGING='{value}' is not 0 or 1; using 0" in lines[0],
              f"{what}: want one warning line from vulkan: {lines}")
        strict = run({**vulkan, "TINYFIN_VULKAN_STAGING": value, "TINYFIN_STRICT": "1"})
        check(strict.returncode == 3 and strict.stdout.startswith("error BackendError: ")
              and f"TINYFIN_VULKAN_STAGING='{value}'" in strict.stdout,
              f"{what} with TINYFIN_STRICT=1: want a BackendError naming it: {strict.stdout} {strict.stderr}")
    out = run({**vulkan, "TINYFIN_VULKAN_STAGING": "1", "TINYFIN_STRICT": "1"})
    check(out.returncode == 0 and "TINYFIN_VULKAN_STAGING" not in out.stderr,
          f"TINYFIN_VULKAN_STAGING=1: {out.stdout} {out.stderr}")
else:
    print("vulkan is not usable here: the TINYFIN_VULKAN_STAGING cases did not run")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
