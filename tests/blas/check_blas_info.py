#!/usr/bin/python3
"""tinyfin-info lists the blas plugin with its OpenBLAS features and every op (cpu's kernels are linked
in), auto leaves it to be named, the thread count follows TINYFIN_THREADS / OPENBLAS_NUM_THREADS /
the usable cores, cpu's runtime in blas follows TINYFIN_THREADS and TINYFIN_CPU_ISA, a bad value
is one warning line (cpu's), and the plugin file loads OpenBLAS lazily: no static constructor, no
link to libopenblas."""
import json, os, subprocess, sys

tool, plugin_path, readelf = sys.argv[1:4]


def run(**env):
    run_env = dict(os.environ)
    for key in ("TINYFIN_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS",
                "TINYFIN_CPU_ISA"):
        run_env.pop(key, None)
    run_env.update(env)
    out = subprocess.run([tool, "--json"], capture_output=True, text=True, env=run_env)
    assert out.returncode == 0, f"tinyfin-info --json exited {out.returncode}: {out.stderr}"
    return out


def plugin(doc, name):
    found = [p for p in doc["plugins"] if p["name"] == name]
    assert len(found) == 1, doc["plugins"]
    return found[0]


def info(**env):
    doc = json.loads(run(**env).stdout)
    return doc, plugin(doc, "blas")


doc, blas = info()
assert blas["outcome"] == "loaded", blas
assert blas["initialised"] is True, blas
assert blas["priority"] == 0, blas
assert blas["path"].endswith("tinyfin-blas.so"), blas["path"]
assert len(blas["devices"]) == 1, blas["devices"]
device = blas["devices"][0]
assert device["kind"] == "cpu" and device["host_addressable"] is True, device
features = blas["features"]
for key in ("openblas.core", "openblas.threads", "openblas.config"):
    assert features.get(key), f"feature {key} missing: {features}"
assert "OpenBLAS" in features["openblas.config"], features
cores = len(os.sched_getaffinity(0))
assert features["openblas.threads"] == str(cores), (features, cores)
# Priority 0: a peer of cpu that auto does not pick, and says why.
assert doc["selection"]["selected"] == "cpu", doc["selection"]
assert any("skipped blas: priority 0 is not above cpu's" in n for n in doc["selection"]["notes"]), doc["selection"]
doc, _ = info(TINYFIN_BACKEND="blas")
assert doc["selection"]["selected"] == "blas", doc["selection"]
# Every op: OpenBLAS's rows first, then cpu's kernels, so blas lists what cpu lists, which is
# every op of ops.def but quantize (its sample output is quantized).
cpu = plugin(doc, "cpu")
assert blas["supported_ops"] == cpu["supported_ops"], (blas["supported_ops"], cpu["supported_ops"])
assert "softmax" in blas["supported_ops"] and "attention" in blas["supported_ops"], blas["supported_ops"]
assert len(blas["supported_ops"]) >= 70, blas["supported_ops"]
# cpu's runtime inside blas: its own features, following cpu's variables.
for key in ("simd", "threads", "kernels", "bf16_matmul", "scratch_arenas", "scratch_bytes"):
    assert key in features, f"feature {key} missing: {features}"
assert features["threads"] == str(cores), features
assert features["kernels"] == cpu["features"]["kernels"], (features, cpu["features"])
assert features["openblas.ops"] == "0", features

_, blas = info(TINYFIN_THREADS="1")
assert blas["features"]["openblas.threads"] == "1", blas["features"]
assert blas["features"]["threads"] == "1", blas["features"]
assert blas["features"]["openblas.threads.source"] == "TINYFIN_THREADS", blas["features"]
_, blas = info(TINYFIN_CPU_ISA="generic")
assert blas["features"]["kernels"] == "generic", blas["features"]
# A bad value: one warning line (the cpu plugin's), though blas reads the variable too.
for name, value in (("TINYFIN_THREADS", "abc"), ("TINYFIN_CPU_ISA", "avx"), ("TINYFIN_SCRATCH_BYTES", "64M")):
    out = run(**{name: value})
    lines = [l for l in out.stderr.splitlines() if name in l]
    assert len(lines) == 1, (name, value, out.stderr)
    assert plugin(json.loads(out.stdout), "blas")["outcome"] == "loaded", out.stdout
for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    _, blas = info(**{name: "1"})
    assert blas["features"]["openblas.threads"] == "1", (name, blas["features"])
    assert blas["features"]["openblas.threads.source"] == name, (name, blas["features"])
# tinyfin's own setting wins over OpenBLAS's.
_, blas = info(TINYFIN_THREADS="1", OPENBLAS_NUM_THREADS="2")
assert blas["features"]["openblas.threads"] == "1", blas["features"]
doc, blas = info(TINYFIN_BACKEND="cpu")
assert doc["selection"]["selected"] == "cpu", doc["selection"]

# The file: OpenBLAS is dlopened in init, and nothing runs at dlopen but crtbegin's frame_dummy.
dynamic = subprocess.run([readelf, "-d", "-W", plugin_path], capture_output=True, text=True, check=True).stdout
assert "libopenblas" not in dynamic, dynamic
sections = subprocess.run([readelf, "-S", "-W", plugin_path], capture_output=True, text=True, check=True).stdout
# A sanitizer build adds the sanitizer's own module constructors: count only in normal builds.
sanitized = any(lib in dynamic for lib in ("libasan", "libubsan", "libtsan"))
if sanitized:
    print("blas: sanitizer build, .init_array not counted")
for line in ([] if sanitized else sections.splitlines()):
    fields = line.replace("[ ", "[").split()
    if ".init_array" in fields:
        size = int(fields[fields.index(".init_array") + 4], 16)
        assert size <= 8, f"{plugin_path} has {size // 8} .init_array entries: a static constructor"
print(f"blas ok: core {features['openblas.core']}, {features['openblas.threads']} threads")
