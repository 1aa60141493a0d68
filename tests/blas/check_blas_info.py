#!/usr/bin/python3
"""tinyfin-info lists the blas plugin with its OpenBLAS features, auto leaves it to be named, the thread
count follows TINYFIN_THREADS / OPENBLAS_NUM_THREADS / the usable cores, and the plugin file
loads OpenBLAS lazily: no static constructor, no link to libopenblas."""
import json, os, subprocess, sys

tool, plugin_path, readelf = sys.argv[1:4]


def info(**env):
    run_env = dict(os.environ)
    for key in ("TINYFIN_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        run_env.pop(key, None)
    run_env.update(env)
    out = subprocess.run([tool, "--json"], capture_output=True, text=True, env=run_env)
    assert out.returncode == 0, f"tinyfin-info --json exited {out.returncode}: {out.stderr}"
    doc = json.loads(out.stdout)
    blas = [p for p in doc["plugins"] if p["name"] == "blas"]
    assert len(blas) == 1, doc["plugins"]
    return doc, blas[0]


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
# At the sample sizes blas claims the 64^3 matmul and not the example's conv2 (stride 1, 288
# taps: cpu's shifted kernels are faster there).
assert blas["supported_ops"] == ["matmul"], blas["supported_ops"]

_, blas = info(TINYFIN_THREADS="1")
assert blas["features"]["openblas.threads"] == "1", blas["features"]
assert blas["features"]["openblas.threads.source"] == "TINYFIN_THREADS", blas["features"]
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
